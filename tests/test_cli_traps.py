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

    def interrupted(self, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(Trainer, "train_epoch", interrupted)
        assert cli(command) == 130
    err = one_error_line(capsys)
    assert "interrupted" in err and "the same command starts again" in err
    assert cli(command) == 0
    assert (tmp_path / "b" / "last.pt").is_file()
