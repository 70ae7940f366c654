"""The REINFORCE baselines one by one (agents/training/baselines.py): what each computes, when the rollout
baseline is replaced, their states round-trip, and the older checkpoint layouts still resume."""
import io
from pathlib import Path

import pytest
import torch

from agents.inference.rollout import rollout
from agents.inference.search import augment_locs
from agents.policies.checkpoint import load_checkpoint
from agents.policies.protocol import select_rows
from agents.training.baselines import BASELINES, CriticBaseline, ExponentialBaseline, POMOBaseline, RolloutBaseline
from agents.training.config import TrainConfig
from agents.training.reinforce import Trainer
from routing_gym.problems import tour_cost

ROOT = Path(__file__).resolve().parents[1]
SMALL_MODEL = {"embed_dim": 16, "n_heads": 2, "n_layers": 1, "ff_hidden": 32}


def tiny(tmp_path, **overrides):
    base = dict(problem="tsp", num_nodes=6, epochs=1, epoch_size=32, batch_size=16, eval_size=64, val_size=16,
                lr=1e-3, out_dir=str(tmp_path / "run"), model=SMALL_MODEL, seed=2, device="cpu")
    base.update(overrides)
    return TrainConfig(**base)


def draw(trainer, n=16, seed=0):
    return trainer.problem.generate(n, trainer.cfg.num_nodes, generator=torch.Generator().manual_seed(seed),
                                    **trainer.cfg.variant)


def same(a, b) -> bool:
    """Nested states (dicts, lists, tensors, numbers) equal exactly."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
    return a == b


def test_registry__names_the_four_baselines_and_the_config_checks_against_it():
    assert BASELINES == {"rollout": RolloutBaseline, "exponential": ExponentialBaseline, "pomo": POMOBaseline,
                         "critic": CriticBaseline}
    with pytest.raises(ValueError, match="baseline must be one of"):
        TrainConfig(baseline="greedy")


def test_exponential__moving_average_by_hand():
    bl = ExponentialBaseline(beta=0.75)
    first = bl.values(None, torch.tensor([1.0, 2.0, 6.0]))
    assert torch.equal(first, torch.full((3,), 3.0))  # the first batch's mean starts it
    second = bl.values(None, torch.tensor([7.0, 7.0]))
    assert torch.allclose(second, torch.full((2,), 0.75 * 3.0 + 0.25 * 7.0))
    third = bl.values(None, torch.tensor([1.0]))
    assert third.item() == pytest.approx(0.75 * 4.0 + 0.25 * 1.0)
    again = ExponentialBaseline(beta=0.75)
    again.load_state_dict(bl.state_dict())
    assert again.value == bl.value == pytest.approx(3.25)


def test_rollout__warm_up_is_the_moving_average_then_the_frozen_greedy_cost(tmp_path):
    trainer = Trainer(tiny(tmp_path, warmup_epochs=1))
    bl, instances = trainer.baseline, draw(trainer)
    cost = torch.rand(16, generator=torch.Generator().manual_seed(1)) + 2
    assert torch.allclose(bl.values(instances, cost), torch.full((16,), float(cost.mean())))
    trainer.epoch = 1
    assert torch.equal(bl.values(instances, cost), trainer.greedy_costs(bl.model, instances))


def test_rollout__replaced_only_when_the_t_test_says_the_policy_is_better(tmp_path):
    trainer = Trainer(tiny(tmp_path))
    bl = trainer.baseline
    with torch.no_grad():  # the policy moves away from its frozen copy
        for p in trainer.policy.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    candidate = trainer.greedy_costs(trainer.policy, bl.eval_set)
    frozen = {k: v.clone() for k, v in bl.model.state_dict().items()}
    noise = 0.01 * torch.randn(candidate.shape, generator=torch.Generator().manual_seed(5))

    bl.eval_costs = candidate - 0.05 + noise  # the frozen copy is better: kept
    eval_set = bl.eval_set
    row = bl.epoch_end()
    assert row == {"baseline_p": 1.0, "baseline_replaced": 0}
    assert bl.eval_set is eval_set and all(torch.equal(frozen[k], v) for k, v in bl.model.state_dict().items())

    bl.eval_costs = candidate + 0.05 + noise  # the policy is better, significantly: it replaces the copy
    row = bl.epoch_end()
    assert row["baseline_replaced"] == 1 and row["baseline_p"] < trainer.cfg.bl_alpha
    for (name, p), q in zip(trainer.policy.state_dict().items(), bl.model.state_dict().values()):
        assert torch.equal(p, q), name
    assert not torch.equal(bl.eval_set.locs, eval_set.locs)  # a fresh evaluation set, with the new copy's costs
    assert torch.equal(bl.eval_costs, trainer.greedy_costs(bl.model, bl.eval_set))
    assert not any(p.requires_grad for p in bl.model.parameters()) and not bl.model.training


@pytest.mark.parametrize("problem, starts", [("tsp", list(range(6))), ("cvrp", list(range(1, 7)))])
def test_pomo__every_start_node_and_the_per_instance_mean(tmp_path, problem, starts):
    trainer = Trainer(tiny(tmp_path, problem=problem, baseline="pomo", batch_size=4))
    bl, instances = trainer.baseline, draw(trainer, n=4)
    assert bl.rollouts_per_instance == len(starts) and trainer.envs[trainer.cfg.num_nodes].num_envs == 4 * len(starts)
    rollouts, first = bl.prepare(instances)
    assert first.tolist() == starts * 4
    assert torch.equal(rollouts.locs, instances.locs.repeat_interleave(len(starts), dim=0))
    out = rollout(trainer.policy, trainer.envs[trainer.cfg.num_nodes], rollouts, strategy="sample", generator=torch.Generator().manual_seed(0),
                  first_actions=first)
    assert out.actions[:, 0].tolist() == starts * 4
    values = bl.values(instances, out.cost)
    for i in range(4):
        mine = out.cost[i * len(starts):(i + 1) * len(starts)]
        assert torch.allclose(values[i * len(starts):(i + 1) * len(starts)], mine.mean().expand(len(starts)))


@pytest.mark.parametrize("problem", ["tsp", "cvrp", "op"])
def test_pomo_augment__every_copy_from_every_start_shares_the_instance_mean(tmp_path, problem):
    trainer = Trainer(tiny(tmp_path, problem=problem, baseline="pomo", augment=4, batch_size=3))
    bl, instances = trainer.baseline, draw(trainer, n=3)
    starts = trainer.problem.start_nodes(trainer.problem.num_nodes_total(6), "cpu").tolist()
    per = 4 * len(starts)
    assert bl.rollouts_per_instance == per and bl.equal_rows == len(starts) and trainer.envs[trainer.cfg.num_nodes].num_envs == 3 * per
    rollouts, first = bl.prepare(instances)
    assert first.tolist() == starts * 12
    for i in range(3):  # instance i, copy c, start s at row (i * 4 + c) * S + s: the instance's c-th transform
        for c in range(4):
            block = rollouts.locs[(i * 4 + c) * len(starts):(i * 4 + c + 1) * len(starts)]
            assert torch.equal(block, augment_locs(instances.locs[i:i + 1], torch.tensor([c])).expand_as(block))
    assert not torch.equal(rollouts.locs[len(starts)], rollouts.locs[0])  # copy 1 is not the instance itself
    sample = dict(strategy="sample", first_actions=first)
    out = rollout(trainer.policy, trainer.envs[trainer.cfg.num_nodes], rollouts, generator=torch.Generator().manual_seed(0), **sample,
                  repeats=bl.equal_rows)
    alone = rollout(trainer.policy, trainer.envs[trainer.cfg.num_nodes], rollouts, generator=torch.Generator().manual_seed(0), **sample)
    assert torch.equal(out.actions, alone.actions) and torch.allclose(out.cost, alone.cost)  # one encoding per copy
    # each tour costs the same on its copy as on the instance: the transforms keep every distance
    originals = select_rows(instances, torch.arange(3).repeat_interleave(per))
    assert torch.allclose(out.cost, tour_cost(trainer.problem, originals, out.actions).to(out.cost.dtype), atol=1e-5)
    values = bl.values(instances, out.cost)
    for i in range(3):
        mine = out.cost[i * per:(i + 1) * per]
        assert torch.allclose(values[i * per:(i + 1) * per], mine.mean().expand(per))


def test_pomo_augment__a_training_step_samples_what_an_unshared_rollout_of_its_rows_samples(tmp_path):
    trainer = Trainer(tiny(tmp_path, baseline="pomo", augment=8, batch_size=4, epoch_size=4))
    stream = torch.Generator().set_state(trainer.generator.get_state())
    instances = trainer.problem.generate(4, 6, generator=stream)
    rollouts, first = trainer.baseline.prepare(instances)
    with torch.no_grad():
        expected = rollout(trainer.policy.train(), trainer.envs[trainer.cfg.num_nodes], rollouts, strategy="sample", generator=stream,
                           first_actions=first).cost.mean()
    row, = trainer.fit(progress=False, log=False)  # one step on the same stream: the same instances, copies, samples
    assert row["train_cost"] == pytest.approx(float(expected), rel=1e-5)


def test_augment__refused_outside_one_to_eight_and_without_pomo(tmp_path):
    with pytest.raises(ValueError, match="augment must be an integer from 1 to 8"):
        tiny(tmp_path, baseline="pomo", augment=9)
    with pytest.raises(ValueError, match="augment=2 needs baseline='pomo'"):
        tiny(tmp_path, baseline="rollout", augment=2)


def test_critic__its_loss_falls_on_a_fixed_batch(tmp_path):
    trainer = Trainer(tiny(tmp_path, problem="cvrp", baseline="critic", critic_lr=1e-3))
    bl, instances = trainer.baseline, draw(trainer, n=32)
    cost = trainer.greedy_costs(trainer.policy, instances)
    losses = [float(bl.fit(instances, cost)[1]) for _ in range(60)]
    assert losses[-1] < 0.2 * losses[0], losses[::10]
    values = bl.values(instances, cost)
    assert values.shape == cost.shape and not values.requires_grad


@pytest.mark.parametrize("name", list(BASELINES))
def test_state_dict__round_trips_through_a_weights_only_file(tmp_path, name):
    """After two epochs of steps and epoch ends (the rollout baseline past its warm-up), a baseline's state
    survives ``torch.save`` / ``weights_only`` loading into a fresh trainer's baseline unchanged."""
    trainer = Trainer(tiny(tmp_path, baseline=name, problem="cvrp", epochs=2))
    trainer.fit(progress=False, log=False)
    state = trainer.baseline.state_dict()
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    fresh = Trainer(tiny(tmp_path, baseline=name, problem="cvrp"), init_baseline=False)
    fresh.baseline.load_state_dict(torch.load(buffer, weights_only=True))
    assert same(fresh.baseline.state_dict(), state)


@pytest.mark.parametrize("name", list(BASELINES))
def test_resume__continues_exactly_for_every_baseline(tmp_path, name):
    config = dict(baseline=name, epochs=2, problem="cvrp", num_nodes=5)
    straight = Trainer(tiny(tmp_path / "a", **config))
    straight.fit(progress=False, log=False)
    first = Trainer(tiny(tmp_path / "b", **dict(config, epochs=1)))
    first.fit(progress=False, log=False)
    assert "baseline" in load_checkpoint(tmp_path / "b" / "run" / "last.pt", kind="trainer")
    resumed = Trainer.resume(tmp_path / "b" / "run" / "last.pt", epochs=2)
    resumed.fit(progress=False, log=False)
    for (key, p), q in zip(straight.policy.state_dict().items(), resumed.policy.state_dict().values()):
        assert torch.equal(p, q), key
    assert same(straight.baseline.state_dict(), resumed.baseline.state_dict())


@pytest.mark.parametrize("name", ["tsp20-rollout", "cvrp20-rollout", "op20-rollout", "pctsp20-rollout", "tsp20-b128"])
def test_shipped_resume_checkpoints__resume_whatever_their_layout(tmp_path, name, monkeypatch):
    """The committed ``training/*/last.pt`` resume. OP-20 and PCTSP-20 predate baseline classes and
    ``variant``: their top-level baseline entries and ``prize_type`` are converted when they are read;
    TSP-20 and CVRP-20 were continued since, and hold the current layout; TSP-20's batch-128 run (the
    shipped model's) validates on the held-out set committed beside it."""
    monkeypatch.chdir(ROOT)  # the committed configs name their files from the repository root
    path = ROOT / "training" / name / "last.pt"
    name = name.split("-")[0]
    ckpt = load_checkpoint(path, kind="trainer")
    older = "baseline" not in ckpt
    assert older == (name in ("op20", "pctsp20"))
    trainer = Trainer.resume(path, out_dir=str(tmp_path), epochs=ckpt["epoch"] + 1, epoch_size=4, batch_size=4,
                             val_dataset=None, val_size=4, device="cpu")
    assert trainer.epoch == ckpt["epoch"] and trainer.cfg.baseline == "rollout"
    bl = trainer.baseline
    if older:
        assert "prize_type" in ckpt["config"]
        assert trainer.cfg.variant == ({"prize_type": ckpt["config"]["prize_type"]} if name == "op20" else {})
        assert same(bl.model.state_dict(), ckpt["baseline_model"]) and torch.equal(bl.eval_costs, ckpt["eval_costs"])
        assert torch.equal(bl.eval_set.locs, ckpt["eval_set"]["locs"]) and bl.warmup.value == ckpt["exp_value"]
    else:
        assert same(bl.state_dict(), ckpt["baseline"]) and trainer.history == ckpt["history"]
    if name == "tsp20":  # a step of the resumed run, past the warm-up: the frozen copy's greedy costs
        before = [p.clone() for p in trainer.policy.parameters()]
        bl.epoch_end = lambda: {"baseline_p": float("nan"), "baseline_replaced": 0}  # no t-test on its large set
        row, = trainer.fit(progress=False, log=False)
        assert 3 < row["train_cost"] < 6
        assert any(not torch.equal(p, q) for p, q in zip(before, trainer.policy.parameters()))


def test_config__variant_is_validated_and_the_older_prize_type_converted():
    assert TrainConfig(problem="op").variant == {"prize_type": "dist"}  # defaults filled in
    assert TrainConfig(problem="op", variant={"prize_type": "unif"}).variant == {"prize_type": "unif"}
    with pytest.raises(TypeError, match="prize_type"):
        TrainConfig(problem="tsp", variant={"prize_type": "unif"})
    with pytest.raises(ValueError, match="prize_type"):
        TrainConfig(problem="op", variant={"prize_type": "gauss"})
    assert TrainConfig.from_dict({"problem": "op", "prize_type": "const"}).variant == {"prize_type": "const"}
    assert TrainConfig.from_dict({"problem": "cvrp", "prize_type": "dist"}).variant == {}
