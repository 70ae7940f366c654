"""Learning-rate schedules over a run's budget (``TrainConfig.lr_schedule``, ``lr_warmup``): the rate each
step takes, how the budget is counted (instances, or minutes when they end first), resume, and refusals."""
import math

import pytest
import torch

from agents.apps.cli import main as cli
from agents.training.config import TrainConfig, budget_progress, learning_rate
from agents.training.reinforce import Trainer

TINY_MODEL = {"embed_dim": 16, "n_heads": 2, "n_layers": 1, "ff_hidden": 32}


def tiny(tmp_path, **overrides):
    base = dict(problem="tsp", num_nodes=6, epochs=2, epoch_size=128, batch_size=32, eval_size=32, val_size=32,
                lr=1e-3, out_dir=str(tmp_path / "run"), model=TINY_MODEL, seed=5)
    base.update(overrides)
    return TrainConfig(**base)


def step_rates(trainer: Trainer) -> list[float]:
    """Train ``trainer`` to its end and return the learning rate of every Adam step."""
    rates, step = [], trainer.optimizer.step

    def record(*args, **kwargs):
        rates.append(trainer.optimizer.param_groups[0]["lr"])
        return step(*args, **kwargs)

    trainer.optimizer.step = record
    trainer.fit(progress=False, log=False)
    return rates


def test_learning_rate__shapes_at_known_points():
    cosine = TrainConfig(lr=1e-3, lr_schedule="cosine")
    linear = TrainConfig(lr=1e-3, lr_schedule="linear")
    constant = TrainConfig(lr=1e-3, lr_decay=0.5)
    assert [learning_rate(cosine, 0, p) for p in (0, 0.5, 1)] == pytest.approx([1e-3, 5e-4, 0], abs=1e-12)
    assert learning_rate(cosine, 0, 0.25) == pytest.approx(1e-3 * (1 + math.cos(math.pi / 4)) / 2)
    assert [learning_rate(linear, 0, p) for p in (0, 0.25, 1)] == pytest.approx([1e-3, 7.5e-4, 0], abs=1e-12)
    assert [learning_rate(constant, e, 0.9) for e in (0, 1, 3)] == pytest.approx([1e-3, 5e-4, 1.25e-4])
    warm = TrainConfig(lr=1e-3, lr_schedule="linear", lr_warmup=0.2)
    assert [learning_rate(warm, 0, p) for p in (0, 0.1, 0.2, 0.6, 1)] == pytest.approx([0, 5e-4, 1e-3, 5e-4, 0],
                                                                                      abs=1e-12)


def test_budget_progress__the_budget_that_ends_first_counts():
    cfg = TrainConfig(epochs=4, epoch_size=1000)
    assert budget_progress(cfg, 1000, 1e9) == 0.25  # no minutes budget: instances only
    timed = TrainConfig(epochs=4, epoch_size=1000, max_minutes=10)
    assert budget_progress(timed, 1000, 300) == 0.5  # half the minutes, a quarter of the instances
    assert budget_progress(timed, 3000, 60) == 0.75
    assert budget_progress(timed, 0, 900) == 1.0  # past the deadline (the last batch): clipped


def test_trainer__cosine_steps_follow_the_schedule_down_to_the_end_of_the_budget(tmp_path):
    cfg = tiny(tmp_path, lr_schedule="cosine", lr_warmup=0.25)
    rates = step_rates(Trainer(cfg))
    steps = cfg.epochs * cfg.epoch_size // cfg.batch_size
    expected = [learning_rate(cfg, i * cfg.batch_size // cfg.epoch_size, i / steps) for i in range(steps)]
    assert rates == pytest.approx(expected)
    assert rates[0] == 0 and max(rates) == pytest.approx(1e-3) and rates[-1] < 0.1 * 1e-3
    peak = rates.index(max(rates))
    assert all(a <= b for a, b in zip(rates[:peak], rates[1:peak + 1]))  # up during the warm-up
    assert all(a >= b for a, b in zip(rates[peak:], rates[peak + 1:]))  # then down


def test_trainer__constant_schedule_keeps_the_per_epoch_decay(tmp_path):
    rates = step_rates(Trainer(tiny(tmp_path, lr_decay=0.5)))
    assert rates == pytest.approx([1e-3] * 4 + [5e-4] * 4)


def test_trainer__a_minutes_budget_drives_the_schedule(tmp_path, monkeypatch):
    """Under --max-minutes (with far more epochs than fit), the rate follows the clock."""
    clock = [0.0]
    monkeypatch.setattr("agents.training.reinforce.time.perf_counter", lambda: clock[0])
    trainer = Trainer(tiny(tmp_path, epochs=1000, max_minutes=1.0, lr_schedule="linear"))
    step = trainer.optimizer.step

    def timed_step(*args, **kwargs):
        clock[0] += 10.0  # every batch takes 10 s of the 60 s budget
        return step(*args, **kwargs)

    trainer.optimizer.step = timed_step
    rates = step_rates(trainer)
    assert len(rates) == 6  # the budget ends after 60 s
    assert rates == pytest.approx([1e-3 * (1 - t / 60) for t in range(0, 60, 10)])


class Killed(BaseException):
    """Stands for SIGKILL: nothing catches it."""


def test_resume__a_scheduled_run_killed_mid_budget_continues_exactly(tmp_path):
    whole = Trainer(tiny(tmp_path / "a", lr_schedule="cosine", lr_warmup=0.1))
    whole.fit(progress=False, log=False)
    killed = Trainer(tiny(tmp_path / "b", lr_schedule="cosine", lr_warmup=0.1))
    step, calls = killed.optimizer.step, [0]

    def dies_in_the_second_epoch(*args, **kwargs):
        calls[0] += 1
        if calls[0] > 5:  # an epoch is 4 batches: killed in the second, after its checkpoint of the first
            raise Killed
        return step(*args, **kwargs)

    killed.optimizer.step = dies_in_the_second_epoch
    with pytest.raises(Killed):
        killed.fit(progress=False, log=False)
    resumed = Trainer.resume(tmp_path / "b" / "run" / "last.pt")
    assert resumed.epoch == 1
    resumed.fit(progress=False, log=False)
    for a, b in zip(whole.policy.state_dict().values(), resumed.policy.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_resume__a_checkpoint_with_the_former_scheduler_entry_still_loads(tmp_path):
    trainer = Trainer(tiny(tmp_path, epochs=1, lr_decay=0.5))
    trainer.fit(progress=False, log=False)
    path = tmp_path / "run" / "last.pt"
    ckpt = torch.load(path, weights_only=True)
    ckpt["scheduler"] = {"base_lrs": [1e-3], "last_epoch": 1}  # what checkpoints of older versions hold
    torch.save(ckpt, path)
    resumed = Trainer.resume(path, epochs=2)
    assert step_rates(resumed) == pytest.approx([5e-4] * 4)


@pytest.mark.parametrize("field, value", [("lr_schedule", "step"), ("lr_schedule", None), ("lr_warmup", 1.0),
                                          ("lr_warmup", -0.1), ("lr_warmup", True), ("lr_warmup", math.nan)])
def test_config__bad_schedule_settings_are_refused_by_name(field, value):
    with pytest.raises(ValueError, match=field):
        TrainConfig(**{field: value})


def test_cli__schedule_options_reach_the_checkpoint(tmp_path, capsys):
    out = tmp_path / "r"
    args = ["train", "--num-nodes", "5", "--epochs", "1", "--epoch-size", "32", "--batch-size", "32", "--eval-size",
            "32", "--val-size", "32", "--lr-schedule", "linear", "--lr-warmup", "0.5", "--out-dir", str(out),
            "--no-progress"]
    assert cli(args) == 0
    config = torch.load(out / "last.pt", weights_only=True)["config"]
    assert (config["lr_schedule"], config["lr_warmup"]) == ("linear", 0.5)
    capsys.readouterr()
    bad = [a for a in args if a not in ("linear", "--lr-schedule")]
    assert cli(bad[:-3] + ["--lr-schedule", "step", "--out-dir", str(tmp_path / "s")]) == 2
    assert "--lr-schedule" in capsys.readouterr().err
    assert cli([a if a != "0.5" else "1.5" for a in args[:-2]] + [str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lr_warmup must be a number in [0, 1), got 1.5" in err
    assert not (tmp_path / "s").exists() and not (tmp_path / "w").exists()
