"""The REINFORCE trainer: it learns, its baseline test decides right, and resume is exact."""
import datetime
import math
import subprocess
import sys
from operator import attrgetter

import pytest
import torch

from agents.policies.checkpoint import load_checkpoint
from agents.policies.pretrained import load_policy_file
from agents.training.config import TrainConfig
from agents.training.reinforce import Trainer, paired_t_test_better

SMALL_MODEL = {"embed_dim": 32, "n_heads": 4, "n_layers": 1, "ff_hidden": 64}


def small_config(tmp_path, **overrides):
    base = dict(problem="tsp", num_nodes=8, epochs=2, epoch_size=128, batch_size=64, eval_size=128, val_size=128,
                lr=1e-3, out_dir=str(tmp_path / "run"), model=SMALL_MODEL, seed=3)
    base.update(overrides)
    return TrainConfig(**base)


def test_train__short_cpu_run_lowers_greedy_validation_cost(tmp_path):
    trainer = Trainer(small_config(tmp_path, num_nodes=10, epochs=4, epoch_size=1280, batch_size=128))
    before = float(trainer.greedy_costs(trainer.policy, trainer.val_set).mean())
    rows = trainer.fit(progress=False, log=True)
    after = rows[-1]["val_cost"]
    assert after < before - 0.3, (before, [r["val_cost"] for r in rows])
    assert (tmp_path / "run" / "metrics.csv").read_text().count("\n") == 5  # header + 4 epochs
    pytest.importorskip("tensorboard")
    assert list((tmp_path / "run" / "tb").glob("events.out.tfevents.*"))


@pytest.mark.parametrize("problem", ["tsp", "op", "cvrptw", "atsp"])
def test_train__bf16_on_the_cpu_runs_under_autocast_and_learns(tmp_path, problem, monkeypatch):
    """``bf16=True`` is honoured on the CPU (it used to be ignored there): the forward passes run under bf16
    autocast, for problems with node features, dynamic features, time windows and a cost matrix, and a short run
    still lowers the greedy validation cost (TSP)."""
    import agents.training.reinforce as reinforce

    seen, rollout = [], reinforce.rollout
    monkeypatch.setattr(reinforce, "rollout", lambda *a, **kw: seen.append(torch.is_autocast_enabled("cpu")) or
                        rollout(*a, **kw))
    epochs = 4 if problem == "tsp" else 1
    trainer = Trainer(small_config(tmp_path, problem=problem, bf16=True, num_nodes=10, epochs=epochs,
                                   epoch_size=1280 if problem == "tsp" else 128, batch_size=128))
    before = float(trainer.greedy_costs(trainer.policy, trainer.val_set).mean())
    rows = trainer.fit(progress=False, log=False)
    assert seen and all(seen)
    assert all(math.isfinite(r["val_cost"]) for r in rows)
    if problem == "tsp":
        assert rows[-1]["val_cost"] < before - 0.3, (before, [r["val_cost"] for r in rows])


def test_mixed_sizes__batches_draw_each_size_and_the_run_learns_and_resumes(tmp_path, monkeypatch):
    config = small_config(tmp_path, num_nodes=10, mixed_sizes=[6, 10, 14], epochs=3, epoch_size=640, batch_size=64)
    trainer = Trainer(config)
    assert sorted(trainer.envs) == [6, 10, 14]
    drawn = []
    draw = Trainer.draw_size
    monkeypatch.setattr(Trainer, "draw_size", lambda self: drawn.append(draw(self)) or drawn[-1])
    before = float(trainer.greedy_costs(trainer.policy, trainer.val_set).mean())
    rows = trainer.fit(progress=False, log=False)
    assert sorted(set(drawn)) == [6, 10, 14] and len(drawn) == 30  # one size per batch, every size drawn
    assert rows[-1]["val_cost"] < before - 0.3, (before, [r["val_cost"] for r in rows])
    assert trainer.val_set[0].shape[1] == 10  # validated at num_nodes
    resumed = Trainer.resume(tmp_path / "run" / "last.pt")
    assert resumed.cfg.mixed_sizes == [6, 10, 14] and sorted(resumed.envs) == [6, 10, 14]


@pytest.mark.parametrize("overrides, message", [
    ({"mixed_sizes": [6, 6]}, "lists a size twice"),
    ({"mixed_sizes": [0]}, "must be a positive integer"),
    ({"mixed_sizes": [6], "baseline": "pomo"}, "not 'pomo'"),
    ({"mixed_sizes": 6}, "must be a list of sizes"),
])
def test_mixed_sizes__bad_settings_are_refused(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        small_config(tmp_path, **overrides)


def test_t_test__replaces_only_on_a_significant_improvement():
    g = torch.Generator().manual_seed(0)
    base = 4 + torch.rand(1000, generator=g)
    noise = 0.05 * torch.randn(1000, generator=g)
    assert paired_t_test_better(base - 0.02 + noise, base, 0.05)[0]  # small but consistent gain
    assert not paired_t_test_better(base + 0.02 + noise, base, 0.05)[0]  # worse
    better, p = paired_t_test_better(base - 0.001 + noise, base, 0.05)  # within the noise
    assert not better and p > 0.05


def test_resume__continues_exactly_as_an_uninterrupted_run(tmp_path):
    straight = Trainer(small_config(tmp_path / "a", epochs=3))
    straight.fit(progress=False, log=False)
    first = Trainer(small_config(tmp_path / "b", epochs=1))
    first.fit(progress=False, log=False)
    resumed = Trainer.resume(tmp_path / "b" / "run" / "last.pt", epochs=3)
    assert resumed.epoch == 1
    resumed.fit(progress=False, log=False)
    for (name, p), q in zip(straight.policy.state_dict().items(), resumed.policy.state_dict().values()):
        assert torch.equal(p, q), name


def test_checkpoint__corrupt_or_foreign_files_are_named(tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="bad.pt is corrupt"):
        Trainer.resume(bad)
    pickled = tmp_path / "pickled.pt"  # an object weights_only=True refuses: refused without advice to unpickle it
    torch.save({"when": datetime.date(2020, 1, 1)}, pickled)
    for load in (load_checkpoint, load_policy_file):
        with pytest.raises(ValueError, match="pickled.pt is corrupt or not a torch file .*datetime.date") as refused:
            load(pickled)
        assert "weights_only=False" not in str(refused.value) and "safe_globals" not in str(refused.value)
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    with pytest.raises(ValueError, match="not a routing-gym checkpoint"):
        load_checkpoint(foreign)
    trainer = Trainer(small_config(tmp_path, epochs=1, baseline="exponential"))
    trainer.fit(progress=False, log=False)
    with pytest.raises(ValueError, match="trains 'tsp', not 'cvrp'"):
        Trainer.resume(tmp_path / "run" / "last.pt", problem="cvrp")


def test_cli__train_then_eval_a_checkpoint(tmp_path):
    out = tmp_path / "cli"
    cmd = [sys.executable, "-m", "agents.apps.cli", "train", "--problem", "cvrp", "--num-nodes", "5", "--epochs", "1",
           "--epoch-size", "64", "--batch-size", "32", "--eval-size", "64", "--val-size", "64",
           "--baseline", "exponential", "--out-dir", str(out), "--no-progress"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    res = subprocess.run([sys.executable, "-m", "agents.apps.cli", "eval", "--problem", "cvrp", "--num-nodes", "5",
                          "--policy", str(out / "last.pt"), "--num-instances", "50"],
                         check=True, capture_output=True, text=True)
    assert "cvrp-5" in res.stdout and "mean cost" in res.stdout
    res = subprocess.run([sys.executable, "-m", "agents.apps.cli", "export", "--checkpoint", str(out / "last.pt"),
                          "--out", str(tmp_path / "cvrp5.pt")], check=True, capture_output=True, text=True)
    assert "cvrp-5, 64 instances seen" in res.stdout
    meta = load_checkpoint(tmp_path / "cvrp5.pt", kind="policy")["meta"]
    assert meta["problem"] == "cvrp" and meta["instances_seen"] == 64 and meta["val_cost"] > 0
    res = subprocess.run([sys.executable, "-m", "agents.apps.cli", "eval", "--problem", "tsp", "--num-nodes", "5",
                          "--policy", str(out / "last.pt"), "--num-instances", "5"], capture_output=True, text=True)
    assert res.returncode == 2 and "holds a cvrp policy, not tsp" in res.stderr
    resume = [sys.executable, "-m", "agents.apps.cli", "train", "--resume", str(out / "last.pt"), "--epochs", "2",
              "--no-progress"]
    res = subprocess.run(resume + ["--lr", "0.01"], capture_output=True, text=True)
    assert res.returncode == 2 and "not --lr" in res.stderr  # a setting resume would not honour is refused
    subprocess.run(resume + ["--batch-size", "16"], check=True, capture_output=True, text=True)
    rows = (out / "metrics.csv").read_text().splitlines()
    assert len(rows) == 3 and [row.split(",")[4] for row in rows] == ["batch_size", "32", "16"]


def test_pomo_baseline__learns_with_shared_multi_start_baseline(tmp_path):
    trainer = Trainer(small_config(tmp_path, num_nodes=8, epochs=2, epoch_size=256, batch_size=32, baseline="pomo"))
    assert trainer.envs[trainer.cfg.num_nodes].num_envs == 32 * 8  # every node as a start
    before = float(trainer.greedy_costs(trainer.policy, trainer.val_set).mean())
    rows = trainer.fit(progress=False, log=False)
    assert rows[-1]["val_cost"] < before - 0.2, (before, [r["val_cost"] for r in rows])


def test_pomo_baseline_with_augmentation__learns_and_records_its_copies(tmp_path):
    trainer = Trainer(small_config(tmp_path, num_nodes=8, epochs=2, epoch_size=128, batch_size=16, baseline="pomo",
                                   augment=8))
    assert trainer.envs[trainer.cfg.num_nodes].num_envs == 16 * 8 * 8  # every node as a start, on each of the 8 copies
    before = float(trainer.greedy_costs(trainer.policy, trainer.val_set).mean())
    rows = trainer.fit(progress=False, log=False)
    assert rows[-1]["val_cost"] < before - 0.2, (before, [r["val_cost"] for r in rows])
    assert Trainer.resume(tmp_path / "run" / "last.pt").cfg.augment == 8


def critic_error(trainer, num=256):
    """Mean absolute error of the critic's predicted cost against the greedy cost of the policy."""
    instances = trainer.problem.generate(num, trainer.cfg.num_nodes, generator=torch.Generator().manual_seed(99))
    with torch.no_grad():
        predicted = trainer.baseline.critic(trainer.problem.observe(trainer.problem.reset(instances)))
    return float((predicted - trainer.greedy_costs(trainer.policy, instances)).abs().mean())


def test_critic_baseline__policy_learns_and_critic_fits_the_costs(tmp_path):
    trainer = Trainer(small_config(tmp_path, num_nodes=10, epochs=4, epoch_size=1280, batch_size=128,
                                   baseline="critic", critic_lr=1e-3))
    before, error_before = float(trainer.greedy_costs(trainer.policy, trainer.val_set).mean()), critic_error(trainer)
    rows = trainer.fit(progress=False, log=False)
    assert rows[-1]["val_cost"] < before - 0.3, (before, [r["val_cost"] for r in rows])
    assert critic_error(trainer) < 0.5 * error_before, (error_before, critic_error(trainer))


@pytest.mark.parametrize("policy", ["attention", "pointer"])
def test_critic_baseline__resume_restores_the_critic_exactly(tmp_path, policy):
    config = dict(problem="cvrp", num_nodes=6, epochs=2, baseline="critic", policy=policy,
                  model=SMALL_MODEL if policy == "attention" else {"embed_dim": 32})
    straight = Trainer(small_config(tmp_path / "a", **config))
    straight.fit(progress=False, log=False)
    first = Trainer(small_config(tmp_path / "b", **dict(config, epochs=1)))
    first.fit(progress=False, log=False)
    resumed = Trainer.resume(tmp_path / "b" / "run" / "last.pt", epochs=2)
    resumed.fit(progress=False, log=False)
    for module in ("policy", "baseline.critic"):
        for (name, p), q in zip(attrgetter(module)(straight).state_dict().items(),
                                attrgetter(module)(resumed).state_dict().values()):
            assert torch.equal(p, q), (module, name)


def test_init_from__starts_from_given_weights_and_export_counts_their_training(tmp_path):
    from agents.policies.pretrained import export_policy

    first = Trainer(small_config(tmp_path / "a", epochs=1))
    first.fit(progress=False, log=False)
    export_policy(tmp_path / "a" / "run" / "last.pt", tmp_path / "first.pt")
    config = small_config(tmp_path / "b", epochs=1, baseline="pomo", batch_size=16, model={},
                          init_from=str(tmp_path / "first.pt"))
    second = Trainer(config)
    for p, q in zip(first.policy.parameters(), second.policy.parameters()):
        assert torch.equal(p, q)
    second.fit(progress=False, log=False)
    meta = export_policy(tmp_path / "b" / "run" / "last.pt", tmp_path / "second.pt")
    assert meta["instances_seen"] == 128 + 128 and meta["trainer"]["init_from"] == str(tmp_path / "first.pt")
    assert meta["training_time_s"] > second.elapsed_s > 0
    assert load_policy_file(tmp_path / "second.pt").config.embed_dim == SMALL_MODEL["embed_dim"]
    with pytest.raises(ValueError, match="holds a tsp policy, not cvrp"):
        Trainer(small_config(tmp_path / "c", problem="cvrp", model={}, init_from=str(tmp_path / "first.pt")))
    with pytest.raises(ValueError, match="leave model empty"):
        small_config(tmp_path / "d", init_from=str(tmp_path / "first.pt"))


def test_export__averages_with_other_policies_and_refuses_another_architecture(tmp_path):
    from agents.policies.pretrained import export_policy

    first = Trainer(small_config(tmp_path / "a", epochs=1))
    first.fit(progress=False, log=False)
    second = Trainer(small_config(tmp_path / "b", epochs=1, seed=4))
    second.fit(progress=False, log=False)
    export_policy(tmp_path / "b" / "run" / "last.pt", tmp_path / "b.pt")
    meta = export_policy(tmp_path / "a" / "run" / "last.pt", tmp_path / "soup.pt", [tmp_path / "b.pt"])
    assert [m["file"] for m in meta["averaged_with"]] == [str(tmp_path / "b.pt")]
    weights = [load_policy_file(p).state_dict() for p in
               (tmp_path / "a" / "run" / "last.pt", tmp_path / "b.pt", tmp_path / "soup.pt")]
    for key, value in weights[0].items():
        expected = (value + weights[1][key]) / 2 if value.is_floating_point() else value
        assert torch.allclose(weights[2][key], expected, atol=1e-6), key
    assert any(not torch.equal(weights[0][k], weights[2][k]) for k in weights[0])  # the two runs differ
    other = Trainer(small_config(tmp_path / "c", epochs=1, model={**SMALL_MODEL, "embed_dim": 16}))
    other.fit(progress=False, log=False)
    with pytest.raises(ValueError, match="not the architecture of"):
        export_policy(tmp_path / "a" / "run" / "last.pt", tmp_path / "bad.pt", [tmp_path / "c" / "run" / "last.pt"])
