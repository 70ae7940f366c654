"""Training and the command line never leave a trap: a run holds its folder while it runs (and a killed
run leaves no stale lock), a command never writes over its own input, and a refused command writes
nothing that would block the next try."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agents.apps.cli import main as cli
from agents.training.config import TrainConfig
from agents.training.reinforce import Trainer
from agents.training.runlock import RunFolderBusy, RunLock

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_TSP20 = ROOT / "agents" / "weights" / "tsp20.pt"
TINY_MODEL = {"embed_dim": 16, "n_heads": 2, "n_layers": 1, "ff_hidden": 32}
RUN_ARGS = ["--num-nodes", "5", "--epochs", "1", "--epoch-size", "32", "--batch-size", "32", "--eval-size", "32",
            "--val-size", "32", "--no-progress"]  # a tiny run, its model chosen elsewhere
TINY_ARGS = [*RUN_ARGS, "--embed-dim", "16", "--n-layers", "1", "--ff-hidden", "32"]


def tiny_checkpoint(folder: Path, **overrides) -> Path:
    """A trainer checkpoint of a tiny TSP-5 run, written without training (``folder/last.pt``)."""
    config = dict(problem="tsp", num_nodes=5, epochs=1, epoch_size=32, batch_size=32, eval_size=32, val_size=32,
                  model=TINY_MODEL, out_dir=str(folder), seed=1)
    config.update(overrides)
    trainer = Trainer(TrainConfig(**config))
    trainer.save(folder / "last.pt")
    return folder / "last.pt"


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


# -- a run holds its folder -------------------------------------------------------------------------------
def test_run_lock__a_second_trainer_on_one_folder_is_refused_in_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    with RunLock(out):  # the first trainer, still running
        assert cli(["train", *TINY_ARGS, "--out-dir", str(out)]) == 1
        err = one_error_line(capsys)
        assert "in use by another training run" in err and f"pid {os.getpid()}" in err
        assert sorted(p.name for p in out.iterdir()) == [".lock"]  # nothing of the second run
    assert not (out / ".lock").exists()  # released and removed with the first run's end
    assert cli(["train", *TINY_ARGS, "--out-dir", str(out)]) == 0


def test_run_lock__a_killed_holder_leaves_no_stale_lock(tmp_path):
    out = tmp_path / "run"
    code = ("import sys, time; from agents.training.runlock import RunLock\n"
            f"lock = RunLock({str(out)!r}).__enter__(); print('held', flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunFolderBusy, match=f"pid {holder.pid}"):
            RunLock(out).__enter__()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (out / ".lock").exists()  # the file stays behind, its lock does not
    with RunLock(out):
        assert (out / ".lock").read_text() == str(os.getpid())


# -- a command never writes over its own input ---------------------------------------------------------------
def test_eval__save_over_its_own_dataset_is_refused(tmp_path, capsys):
    data = tmp_path / "set.npz"
    assert cli(["solve", "--problem", "tsp", "--method", "exact", "--num-nodes", "5", "--num-instances", "4",
                "--save", str(data), "--no-progress"]) == 0
    before = data.read_bytes()
    link = tmp_path / "link.npz"
    link.symlink_to(data)
    for save in (str(data), str(tmp_path / "." / "set.npz"), str(link)):
        capsys.readouterr()
        assert cli(["eval", "--problem", "tsp", "--policy", "nearest", "--dataset", str(data), "--save", save]) == 2
        assert "own input (--dataset" in one_error_line(capsys)
    assert cli(["solve", "--problem", "tsp", "--method", "exact", "--dataset", str(data), "--save", str(data)]) == 2
    assert data.read_bytes() == before


def test_export__over_its_own_checkpoint_is_refused(tmp_path, capsys):
    checkpoint = tiny_checkpoint(tmp_path / "run")
    before = checkpoint.read_bytes()
    assert cli(["export", "--checkpoint", str(checkpoint), "--out", str(checkpoint)]) == 2
    assert "own input (--checkpoint" in one_error_line(capsys)
    assert checkpoint.read_bytes() == before
    assert Trainer.resume(checkpoint).epoch == 0  # still a trainer checkpoint


def test_train__init_from_an_attention_model_with_policy_pointer_is_refused_before_training(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli(["train", "--problem", "tsp", *RUN_ARGS, "--num-nodes", "20", "--init-from", str(SHIPPED_TSP20),
                "--policy", "pointer", "--out-dir", str(out)]) == 2
    assert "holds a attention network, not the pointer network" in one_error_line(capsys)
    assert not out.exists()


def test_train__init_from_a_pointer_network_trains_the_pointer_network(tmp_path):
    start = tiny_checkpoint(tmp_path / "start", policy="pointer", model={"embed_dim": 16})
    out = tmp_path / "run"
    assert cli(["train", *RUN_ARGS, "--init-from", str(start), "--out-dir", str(out)]) == 0
    assert Trainer.resume(out / "last.pt", epochs=2).cfg.policy == "pointer"  # the run can be continued


def test_train__overwrite_never_deletes_the_weights_it_starts_from(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli(["train", *TINY_ARGS, "--out-dir", str(out)]) == 0
    before = (out / "last.pt").read_bytes()
    capsys.readouterr()
    assert cli(["train", *RUN_ARGS, "--init-from", str(out / "last.pt"), "--out-dir", str(out), "--overwrite"]) == 1
    assert "--overwrite would delete" in one_error_line(capsys)
    assert (out / "last.pt").read_bytes() == before


# -- a refused command writes nothing; a stopped run blocks nothing --------------------------------------------
def test_train__a_refused_resume_writes_nothing(tmp_path, capsys):
    Trainer(TrainConfig(problem="tsp", num_nodes=5, epochs=3, epoch_size=32, batch_size=32, eval_size=32,
                        val_size=32, model=TINY_MODEL, out_dir=str(tmp_path / "a"), max_minutes=1e-6)).fit(
        progress=False, log=False)
    out = tmp_path / "b"
    assert cli(["train", "--resume", str(tmp_path / "a" / "last.pt"), "--out-dir", str(out)]) == 1
    assert "spent its budget" in one_error_line(capsys)
    assert not out.exists()


def test_train__a_resumed_run_stopped_in_its_first_epoch_blocks_no_retry(tmp_path, monkeypatch, capsys):
    Trainer(TrainConfig(problem="tsp", num_nodes=5, epochs=1, epoch_size=32, batch_size=32, eval_size=32,
                        val_size=32, model=TINY_MODEL, out_dir=str(tmp_path / "a"))).fit(progress=False, log=False)
    command = ["train", "--resume", str(tmp_path / "a" / "last.pt"), "--epochs", "2", "--out-dir",
               str(tmp_path / "b"), "--no-progress"]

    def interrupted(*args):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr("agents.training.reinforce.optimise", interrupted)
        assert cli(command) == 130
    err = one_error_line(capsys)
    assert "interrupted" in err and "the same command starts again" in err
    assert cli(command) == 0
    assert (tmp_path / "b" / "last.pt").is_file()


# -- a minutes budget holds the epoch's end too ---------------------------------------------------------------
def tiny_trainer(tmp_path, **overrides) -> Trainer:
    config = dict(problem="tsp", num_nodes=5, epochs=3, epoch_size=320, batch_size=32, eval_size=32, val_size=32,
                  model=TINY_MODEL, out_dir=str(tmp_path / "run"), seed=1)
    config.update(overrides)
    return Trainer(TrainConfig(**config))


def test_budget__keeps_the_epoch_end_within_it_or_says_by_how_much_it_overruns(tmp_path, monkeypatch, capsys):
    # validation takes the whole 10 min
    monkeypatch.setattr("agents.training.reinforce.estimate_epoch_end", lambda trainer: 600.0)
    trainer = tiny_trainer(tmp_path, epochs=1, max_minutes=10)
    trainer.fit(progress=False, log=True)
    assert trainer.instances_seen == 32  # one batch, then the epoch's end: not the epoch's 10 batches
    out = capsys.readouterr().out
    assert "about 600 s are kept for each epoch's end (validation of 32 instances, up to 64 for the baseline" in out
    assert "the run will overrun it by about 0 s and one batch" in out


def test_budget__a_resumed_run_says_the_checkpoint_s_minutes_count(tmp_path, capsys):
    tiny_trainer(tmp_path, epochs=1, epoch_size=32, max_minutes=30).fit(progress=False, log=False)
    trainer = Trainer.resume(tmp_path / "run" / "last.pt", epochs=2)
    trainer.fit(progress=False, log=True)
    assert "(the checkpoint's run spent 0.0 of the 30)" in capsys.readouterr().out


def test_validation__shows_progress(tmp_path, capsys):
    tiny_trainer(tmp_path, epochs=1, epoch_size=32).fit(progress=True, log=False)
    assert "validation 0" in capsys.readouterr().err


def test_train__a_rounded_epoch_size_is_said(tmp_path, capsys):
    args = [a if a != "32" else "32" for a in RUN_ARGS]
    args[args.index("--epoch-size") + 1] = "40"
    assert cli(["train", *args, "--embed-dim", "16", "--n-layers", "1", "--out-dir", str(tmp_path / "r")]) == 0
    assert "each epoch trains 2 whole batches, 64 instances" in capsys.readouterr().out


# -- eval takes what a checkpoint knows, and says what it does --------------------------------------------------
def test_eval__a_checkpoint_gives_its_problem_and_size(tmp_path, capsys):
    checkpoint = tiny_checkpoint(tmp_path / "run")
    assert cli(["eval", "--policy", str(checkpoint), "--num-instances", "8", "--no-progress"]) == 0
    assert capsys.readouterr().out.startswith("tsp-5 ")


def test_eval__pretrained_on_other_prizes_is_said(capsys):
    assert cli(["eval", "--problem", "op", "--policy", "pretrained", "--prize-type", "unif", "--num-instances", "8",
                "--no-progress"]) == 0
    assert "the shipped op-20 model was trained on prize_type 'dist'; these instances have prize_type 'unif'" \
        in capsys.readouterr().err


def test_eval__options_that_do_not_apply_to_instances_are_refused(tmp_path, capsys):
    pytest.importorskip("vrplib")
    tsp = str(ROOT / "tests" / "data" / "eil51.tsp")
    assert cli(["eval", "--problem", "op", "--policy", "nearest", "--instances", tsp]) == 2
    assert "a tsp file, not op (--problem)" in one_error_line(capsys)
    assert cli(["eval", "--policy", "nearest", "--instances", tsp, "--dataset", tsp]) == 2
    assert "--dataset does not apply to it" in one_error_line(capsys)


def test_eval__policy_help_names_every_heuristic(capsys):
    from agents.references.heuristics import HEURISTICS

    with pytest.raises(SystemExit):
        cli(["eval", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert all(name in text for name in HEURISTICS)


def test_compare__offers_only_problems_with_a_shipped_model(capsys):
    assert cli(["compare", "--problems", "sdvrp", "--no-picture"]) == 2
    assert "invalid choice: 'sdvrp'" in one_error_line(capsys)
    assert cli(["compare", "--problems", "tsp", "--num-nodes", "30", "--no-picture"]) == 2
    assert "no shipped tsp model for n = 30" in one_error_line(capsys)


def test_train__imitation_epochs_without_imitate_and_an_empty_out_dir_are_refused(tmp_path, capsys):
    assert cli(["train", *TINY_ARGS, "--imitation-epochs", "3", "--out-dir", str(tmp_path / "r")]) == 2
    assert "--imitate" in one_error_line(capsys)
    assert cli(["train", *TINY_ARGS, "--out-dir", ""]) == 2
    assert "empty folder name" in one_error_line(capsys)
    assert not (tmp_path / "r").exists()


def test_eval__save_writes_the_name_given_and_creates_its_folder_first(tmp_path, capsys):
    out = tmp_path / "new" / "labels.NPZ"
    assert cli(["eval", "--problem", "tsp", "--num-nodes", "5", "--policy", "nearest", "--num-instances", "4",
                "--save", str(out), "--no-progress"]) == 0
    assert f"saved {out} " in capsys.readouterr().out
    assert sorted(p.name for p in out.parent.iterdir()) == ["labels.NPZ"]


def test_eval__ctrl_c_ends_in_one_line_and_status_130(monkeypatch, capsys):
    import agents.inference.search as search

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(search, "decode", interrupted)
    assert cli(["eval", "--problem", "tsp", "--num-nodes", "5", "--policy", "nearest", "--num-instances", "4",
                "--no-progress"]) == 130
    assert "interrupted" in one_error_line(capsys)


# -- the README's commands work as written ---------------------------------------------------------------
def test_readme__install_commands_work_from_a_clone():
    import re
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    readme = (ROOT / "README.md").read_text()
    assert not re.search(r"pip install [\"']?routing-gym\[", readme)  # not on PyPI: the clone's extras
    named = re.findall(r"pip install -e [\"']\.\[([\w,-]+)\][\"']", readme)
    assert named and all(extra in extras for group in named for extra in group.split(","))


def test_exit_statuses__are_documented_in_help_and_readme(capsys):
    with pytest.raises(SystemExit):
        cli(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    readme = " ".join((ROOT / "README.md").read_text().split())
    for words in ("1 a run refused or stopped", "2 a usage error", "130 interrupted"):
        assert words in text and words in readme


def test_resume__an_earlier_checkpoint_never_replaces_later_epochs_in_its_folder(tmp_path, capsys):
    out = tmp_path / "run"
    tiny_trainer(tmp_path, epochs=1, epoch_size=32).fit(progress=False, log=False)
    earlier = (out / "last.pt").read_bytes()  # epoch 1
    Trainer.resume(out / "last.pt", epochs=2).fit(progress=False, log=False)
    later = (out / "last.pt").read_bytes()  # epoch 2
    (out / "best.pt").write_bytes(earlier)
    assert cli(["train", "--resume", str(out / "best.pt"), "--epochs", "3", "--no-progress"]) == 1
    assert "is at epoch 2, later than the checkpoint resumed here (epoch 1)" in one_error_line(capsys)
    assert (out / "last.pt").read_bytes() == later
    assert cli(["train", "--resume", str(out / "best.pt"), "--epochs", "3", "--out-dir", str(tmp_path / "branch"),
                "--no-progress"]) == 0


def test_eval__the_bundled_tsplib_files_print_their_gap(capsys):
    pytest.importorskip("vrplib")
    data = ROOT / "tests" / "data"
    assert cli(["eval", "--policy", "nearest", "--instances", str(data / "eil51.tsp"), str(data / "berlin52.tsp"),
                "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "| eil51 | tsp | 51 |" in out and "426 (TSPLIB)" in out and "7542 (TSPLIB)" in out


def test_compare__reports_each_method_done(capsys):
    from agents.apps.compare import compare_problem, method_count

    done = []
    rows = compare_problem("tsp", 20, 4, 0, done=done.append)
    assert done == [row["method"] for row in rows] and len(done) == method_count("tsp")
    assert cli(["compare", "--problems", "tsp", "--num-instances", "4", "--no-picture", "--no-progress"]) == 0
