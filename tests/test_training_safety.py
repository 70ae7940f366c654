"""A training run never loses work: it refuses to overwrite another run, survives a kill at any instant
of its writes, stops on divergence with the last good checkpoint intact, and refuses nonsense settings
and malformed checkpoints with a clear error."""
import csv
import math
import os

import pytest
import torch

from agents.apps.cli import main as cli
from agents.policies.checkpoint import load_checkpoint, save_checkpoint
from agents.training.config import TrainConfig
from agents.training.reinforce import Trainer, TrainingDiverged

TINY_MODEL = {"embed_dim": 16, "n_heads": 2, "n_layers": 1, "ff_hidden": 32}
TIMING = {"train_time_s", "instances_per_s", "elapsed_s"}  # columns that differ between equal runs


def tiny(tmp_path, **overrides):
    base = dict(problem="tsp", num_nodes=6, epochs=2, epoch_size=64, batch_size=32, eval_size=32, val_size=32,
                lr=1e-3, out_dir=str(tmp_path / "run"), model=TINY_MODEL, seed=5)
    base.update(overrides)
    return TrainConfig(**base)


def read_rows(path):
    with open(path, newline="") as f:
        return [{k: v for k, v in row.items() if k not in TIMING} for row in csv.DictReader(f)]


# -- a new run never replaces an earlier one --------------------------------------------------------
def test_new_run__refuses_a_folder_holding_a_run_and_names_resume_and_overwrite(tmp_path):
    Trainer(tiny(tmp_path, epochs=1)).fit(progress=False, log=False)
    before = (tmp_path / "run" / "last.pt").read_bytes()
    with pytest.raises(FileExistsError, match=r"--resume .*last\.pt.*--overwrite"):
        Trainer(tiny(tmp_path, epochs=1, seed=6)).fit(progress=False, log=False)
    assert (tmp_path / "run" / "last.pt").read_bytes() == before  # untouched
    Trainer(tiny(tmp_path, epochs=1, seed=6)).fit(progress=False, log=False, overwrite=True)
    assert [r["epoch"] for r in read_rows(tmp_path / "run" / "metrics.csv")] == ["0"]


def test_cli__train_twice_refuses_then_overwrites(tmp_path, capsys):
    args = ["train", "--num-nodes", "5", "--epochs", "1", "--epoch-size", "32", "--batch-size", "32",
            "--eval-size", "32", "--val-size", "32", "--out-dir", str(tmp_path / "r"), "--no-progress"]
    assert cli(args) == 0
    capsys.readouterr()
    assert cli(args) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--resume" in err and "--overwrite" in err
    assert cli(args + ["--overwrite"]) == 0


def test_resume__writes_beside_the_checkpoint_not_where_it_was_recorded(tmp_path):
    Trainer(tiny(tmp_path / "a", epochs=1)).fit(progress=False, log=False)
    origin = tmp_path / "a" / "run"
    listing = sorted(p.name for p in origin.iterdir())
    copy = tmp_path / "b" / "last.pt"
    copy.parent.mkdir()
    copy.write_bytes((origin / "last.pt").read_bytes())
    trainer = Trainer.resume(copy, epochs=2)
    assert trainer.cfg.out_dir == str(copy.parent)
    trainer.fit(progress=False, log=False)
    assert sorted(p.name for p in origin.iterdir()) == listing and load_checkpoint(origin / "last.pt")["epoch"] == 1
    assert [r["epoch"] for r in read_rows(copy.parent / "metrics.csv")] == ["0", "1"]  # the history came along


# -- a kill at any instant loses nothing ----------------------------------------------------------------
class Killed(BaseException):
    """Stands for SIGKILL: nothing catches it."""


def kill_at(monkeypatch, call: int, after: bool):
    """Make the ``call``-th ``os.replace`` (every file the trainer writes lands through one) die before
    or after moving its file into place; returns the counter."""
    real, count = os.replace, [0]

    def replace(src, dst):
        count[0] += 1
        if count[0] == call and not after:
            raise Killed
        real(src, dst)
        if count[0] == call:
            raise Killed

    monkeypatch.setattr(os, "replace", replace)
    return count


def test_kill_at_any_write__the_resumed_run_equals_an_uninterrupted_one(tmp_path, monkeypatch):
    straight = Trainer(tiny(tmp_path / "straight"))
    straight.fit(progress=False, log=False)
    expected = read_rows(tmp_path / "straight" / "run" / "metrics.csv")
    count = kill_at(monkeypatch, 0, False)
    Trainer(tiny(tmp_path / "count")).fit(progress=False, log=False)
    writes = count[0]
    assert writes >= 5  # best.pt, last.pt and metrics.csv per epoch (best.pt when validation improved)
    for call in range(1, writes + 1):
        for after in (False, True):
            folder = tmp_path / f"kill{call}{'after' if after else 'before'}"
            kill_at(monkeypatch, call, after)
            with pytest.raises(Killed):
                Trainer(tiny(folder)).fit(progress=False, log=False)
            monkeypatch.undo()
            out = folder / "run"
            saved = [out / name for name in ("last.pt", "best.pt") if (out / name).exists()]
            trainer = Trainer.resume(saved[0]) if saved else Trainer(tiny(folder))
            if trainer.epoch < 2:
                trainer.fit(progress=False, log=False)
            else:  # killed after the last checkpoint: resuming only brings metrics.csv up to date
                with pytest.raises(ValueError, match="already"):
                    trainer.fit(progress=False, log=False)
            assert read_rows(out / "metrics.csv") == expected, (call, after)
            for (name, p), q in zip(straight.policy.state_dict().items(), trainer.policy.state_dict().values()):
                assert torch.equal(p, q), (call, after, name)
            best = load_checkpoint(out / "best.pt", kind="trainer")
            assert best["history"][-1]["val_cost"] == min(float(r["val_cost"]) for r in expected)


def test_resume_of_an_older_run__its_csv_rows_counted_once(tmp_path):
    """A checkpoint without the history (older versions) takes its rows from the CSV beside it: rows a
    killed run wrote past the checkpoint, and epochs written twice, count once."""
    trainer = Trainer(tiny(tmp_path, epochs=2))
    trainer.fit(progress=False, log=False)
    out = tmp_path / "run"
    ckpt = load_checkpoint(out / "last.pt")
    del ckpt["history"], ckpt["best_val"], ckpt["elapsed_s"]
    save_checkpoint(out / "last.pt", kind="trainer", payload={k: v for k, v in ckpt.items()
                                                               if k not in ("format", "version", "kind")})
    rows = (out / "metrics.csv").read_text().splitlines()
    (out / "metrics.csv").write_text("\n".join(rows[:2] + rows[1:] + [rows[2].replace("1,", "2,", 1)]) + "\n")
    resumed = Trainer.resume(out / "last.pt", epochs=3)
    resumed.fit(progress=False, log=False)
    assert [r["epoch"] for r in read_rows(out / "metrics.csv")] == ["0", "1", "2"]


# -- divergence stops the run and keeps the last good checkpoint ----------------------------------------
def test_divergence__stops_with_a_clear_error_and_keeps_the_last_good_checkpoint(tmp_path):
    trainer = Trainer(tiny(tmp_path, epochs=3))
    trainer.cfg.epochs = 1
    trainer.fit(progress=False, log=False)
    good = {k: v.clone() for k, v in trainer.policy.state_dict().items()}
    trainer.cfg.epochs = 3
    with torch.no_grad():  # what an exploding step leaves behind
        next(trainer.policy.parameters()).fill_(math.nan)
    with pytest.raises(TrainingDiverged, match=r"diverged at epoch 1.*last\.pt keeps epoch 0"):
        trainer.fit(progress=False, log=False)
    ckpt = load_checkpoint(tmp_path / "run" / "last.pt")
    assert ckpt["epoch"] == 1 and all(torch.equal(ckpt["model"][k], v) for k, v in good.items())
    assert [r["epoch"] for r in read_rows(tmp_path / "run" / "metrics.csv")] == ["0"]


def test_divergence__a_non_finite_loss_is_refused_before_the_step(tmp_path, monkeypatch):
    trainer = Trainer(tiny(tmp_path))
    before = {k: v.clone() for k, v in trainer.policy.named_parameters()}
    real = trainer.training_pass.forward

    def poisoned(*args):
        cost, log_likelihood = real(*args)
        return cost, log_likelihood * math.inf

    monkeypatch.setattr(trainer.training_pass, "forward", poisoned)
    with pytest.raises(TrainingDiverged, match="batch 0: the loss is"):
        trainer.fit(progress=False, log=False)
    assert all(torch.equal(p, before[k]) for k, p in trainer.policy.named_parameters())  # no step taken


def test_divergence__a_failing_rollout_with_finite_outputs_is_a_bug_not_divergence(tmp_path, monkeypatch):
    trainer = Trainer(tiny(tmp_path))

    def broken(*args):
        raise RuntimeError("shape mismatch in the decoder")

    monkeypatch.setattr(trainer.training_pass, "forward", broken)
    with pytest.raises(RuntimeError, match="shape mismatch") as info:
        trainer.fit(progress=False, log=False)
    assert not isinstance(info.value, TrainingDiverged)


def test_cli__a_huge_learning_rate_ends_in_one_line_and_no_checkpoint(tmp_path, capsys):
    code = cli(["train", "--num-nodes", "6", "--epochs", "2", "--epoch-size", "128", "--batch-size", "32",
                "--eval-size", "32", "--val-size", "32", "--lr", "1e6", "--out-dir", str(tmp_path / "r"),
                "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "diverged" in err
    assert not (tmp_path / "r" / "last.pt").exists()


# -- nonsense settings and malformed checkpoints ---------------------------------------------------------
@pytest.mark.parametrize("field, value", [
    ("lr_decay", -1), ("lr", math.inf), ("lr", 0), ("lr", math.nan), ("epochs", -1), ("epochs", 0),
    ("epoch_size", 0), ("eval_size", 0), ("val_size", 0), ("batch_size", 0), ("batch_size", 2.5),
    ("max_grad_norm", -1.0), ("exp_beta", 1.0), ("bl_alpha", 0), ("max_minutes", 0), ("seed", -1),
    ("num_nodes", 1), ("epochs", True),
])
def test_config__nonsense_settings_are_refused_by_name(field, value, tmp_path):
    with pytest.raises(ValueError, match=field):
        tiny(tmp_path, **{field: value})


@pytest.mark.parametrize("flag, value", [("--lr-decay", "-1"), ("--epochs", "-1"), ("--epoch-size", "0"),
                                         ("--eval-size", "0"), ("--val-size", "0"), ("--lr", "inf"),
                                         ("--warmup-epochs", "-1"),
                                         ("--imitation-epochs", "-2"), ("--lr-warmup", "2")])
def test_cli__nonsense_settings_end_in_one_line(flag, value, tmp_path, capsys):
    assert cli(["train", flag, value, "--out-dir", str(tmp_path / "r"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and flag.lstrip("-").replace("-", "_") in err
    assert not (tmp_path / "r").exists()


def test_resume__nothing_left_to_do_is_said(tmp_path):
    Trainer(tiny(tmp_path, epochs=1)).fit(progress=False, log=False)
    with pytest.raises(ValueError, match="at epoch 1 already"):
        Trainer.resume(tmp_path / "run" / "last.pt").fit(progress=False, log=False)


@pytest.mark.parametrize("damage, message", [
    (lambda c: c.pop("config"), "lacks config"),
    (lambda c: c.pop("generators"), "lacks generators"),
    (lambda c: c["config"].update(flux_capacitor=1), "unknown training setting"),
    (lambda c: c["config"].update(lr=-1), "lr must be"),
    (lambda c: c.update(generators=[torch.zeros(3, dtype=torch.uint8)] * 2), "random-generator state"),
    (lambda c: c.update(generators=[]), "random-generator state"),
])
def test_resume__a_malformed_checkpoint_is_named(tmp_path, damage, message):
    Trainer(tiny(tmp_path, epochs=1)).fit(progress=False, log=False)
    ckpt = load_checkpoint(tmp_path / "run" / "last.pt")
    damage(ckpt)
    bad = tmp_path / "bad.pt"
    save_checkpoint(bad, kind="trainer", payload={k: v for k, v in ckpt.items() if k not in ("format", "version", "kind")})
    with pytest.raises(ValueError, match=message) as info:
        Trainer.resume(bad)
    assert "bad.pt" in str(info.value)


# -- budgets and held-out validation ---------------------------------------------------------------------
def test_max_minutes__cuts_the_epoch_short_saves_it_and_then_refuses_to_continue(tmp_path):
    trainer = Trainer(tiny(tmp_path, epochs=5, epoch_size=3200, max_minutes=1e-4))
    rows = trainer.fit(progress=False, log=False)
    assert len(rows) == 1 and rows[0]["instances_seen"] == 32  # one batch, then the budget was spent
    with pytest.raises(ValueError, match="budget"):
        Trainer.resume(tmp_path / "run" / "last.pt").fit(progress=False, log=False)
    resumed = Trainer.resume(tmp_path / "run" / "last.pt", max_minutes=10.0, epochs=2)
    resumed.fit(progress=False, log=False)
    assert resumed.epoch == 2 and resumed.elapsed_s > rows[0]["elapsed_s"]


def test_val_dataset__records_the_gap_to_its_references(tmp_path):
    from routing_gym.data import save_dataset
    from routing_gym.problems import get_problem

    instances = get_problem("tsp").generate(32, 6, generator=torch.Generator().manual_seed(9))
    save_dataset(tmp_path / "held.npz", instances, ref_cost=torch.full((32,), 2.0).numpy())
    trainer = Trainer(tiny(tmp_path, epochs=1, val_dataset=str(tmp_path / "held.npz")))
    row = trainer.fit(progress=False, log=False)[0]
    assert row["val_gap"] == pytest.approx(row["val_cost"] / 2.0 - 1, rel=1e-5)
    with pytest.raises(ValueError, match="size 6, the run trains size 7"):
        Trainer(tiny(tmp_path / "b", num_nodes=7, val_dataset=str(tmp_path / "held.npz")))

