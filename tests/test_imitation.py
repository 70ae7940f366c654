"""A warm start by imitation (``TrainConfig.imitate``): the run's first epochs fit solver labels by teacher
forcing, REINFORCE follows in the same run; the labels are checked, and resume is exact."""
import pytest
import torch

from agents.apps.cli import main as cli
from agents.references.exact import held_karp
from agents.training.config import TrainConfig
from agents.training.reinforce import Trainer
from routing_gym.data import save_dataset
from routing_gym.problems import get_problem

TINY_MODEL = {"embed_dim": 32, "n_heads": 4, "n_layers": 1, "ff_hidden": 64}
N = 8


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """512 TSP-8 instances with their optimal tours (Held-Karp), and a held-out set of 256 with theirs."""
    folder = tmp_path_factory.mktemp("labels")
    paths = []
    for name, size, seed in (("labels.npz", 512, 11), ("val.npz", 256, 12)):
        instances = get_problem("tsp").generate(size, N, generator=torch.Generator().manual_seed(seed))
        cost, tours = held_karp(instances.locs)
        save_dataset(folder / name, instances, ref_cost=cost.numpy(), ref_tours=tours.numpy())
        paths.append(str(folder / name))
    return paths


def config(tmp_path, labels, val, **overrides):
    base = dict(problem="tsp", num_nodes=N, epochs=3, epoch_size=1024, batch_size=64, eval_size=128, val_size=128,
                lr=1e-3, out_dir=str(tmp_path / "run"), model=TINY_MODEL, seed=3, imitate=labels, imitation_epochs=2,
                val_dataset=val)
    base.update(overrides)
    return TrainConfig(**base)


def test_imitation__supervised_epochs_fit_the_labels_then_reinforce_continues(tmp_path, labelled):
    trainer = Trainer(config(tmp_path, *labelled))
    untrained = float(trainer.greedy_costs(trainer.policy, trainer.val_set).mean())
    rows = trainer.fit(progress=False, log=False)
    assert ["train_nll" in r for r in rows] == [True, True, False]
    assert ["train_cost" in r for r in rows] == [False, False, True]
    assert rows[1]["train_nll"] < rows[0]["train_nll"] - 0.5  # the labels' cross-entropy falls
    ref = float(trainer.val_ref.mean())
    assert untrained / ref - 1 > 0.25 and rows[1]["val_gap"] < 0.12, (untrained / ref, rows[1]["val_gap"])
    assert rows[-1]["instances_seen"] == 3 * 1024


def test_imitation__resume_between_supervised_epochs_is_exact(tmp_path, labelled):
    whole = Trainer(config(tmp_path / "a", *labelled))
    whole.fit(progress=False, log=False)
    first = Trainer(config(tmp_path / "b", *labelled, epochs=1))
    first.fit(progress=False, log=False)
    resumed = Trainer.resume(tmp_path / "b" / "run" / "last.pt", epochs=3)
    resumed.fit(progress=False, log=False)
    for a, b in zip(whole.policy.state_dict().values(), resumed.policy.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_imitation__bad_labelled_sets_are_refused_by_name(tmp_path, labelled):
    labels, val = labelled
    instances = get_problem("tsp").generate(16, N, generator=torch.Generator().manual_seed(0))
    save_dataset(tmp_path / "plain.npz", instances)
    with pytest.raises(ValueError, match=r"plain\.npz holds no ref_tours"):
        Trainer(config(tmp_path, str(tmp_path / "plain.npz"), val))
    tours = held_karp(instances.locs)[1]
    tours[5, 3] = tours[5, 2]  # a node visited twice
    save_dataset(tmp_path / "twice.npz", instances, ref_tours=tours.numpy())
    with pytest.raises(ValueError, match=r"twice\.npz.*label of instance 5 takes masked action \d+ at step 3"):
        Trainer(config(tmp_path, str(tmp_path / "twice.npz"), val))
    with pytest.raises(ValueError, match=r"labels\.npz has instances of size 8, the run trains size 9"):
        Trainer(config(tmp_path, labels, None, num_nodes=9))


def test_cli__imitate_then_reinforce(tmp_path, labelled, capsys):
    labels, val = labelled
    out = tmp_path / "r"
    args = ["train", "--num-nodes", str(N), "--epochs", "2", "--epoch-size", "128", "--batch-size", "64",
            "--eval-size", "64", "--val-size", "64", "--imitate", labels, "--imitation-epochs", "1",
            "--embed-dim", "16", "--n-layers", "1", "--ff-hidden", "32", "--out-dir", str(out), "--no-progress"]
    assert cli(args) == 0
    assert "train_nll=" in capsys.readouterr().out
    config = torch.load(out / "last.pt", weights_only=True)["config"]
    assert (config["imitate"], config["imitation_epochs"]) == (labels, 1)
    assert cli(["train", "--imitate", str(tmp_path / "missing.npz")]) == 2
    assert "missing.npz does not exist" in capsys.readouterr().err


def test_cli__eval_save_labels_a_dataset_with_the_policys_own_tours(tmp_path, capsys):
    """Self-labelling: ``eval --save`` writes the decoded tours (here nearest neighbour's multi-start) as
    ``ref_tours`` and their costs as ``ref_cost``; ``train --imitate`` then fits them."""
    from routing_gym.data import load_dataset
    from routing_gym.problems import tour_cost

    labels = tmp_path / "self.npz"
    seeded = ["--problem", "cvrp", "--num-nodes", str(N), "--num-instances", "96", "--seed", "11"]
    assert cli(["eval", *seeded, "--policy", "nearest"]) == 0
    assert cli(["eval", *seeded, "--policy", "nearest", "--decode", "multistart", "--augment", "2",
                "--batch-size", "40", "--save", str(labels)]) == 0  # three chunks, tours of different lengths
    greedy, multistart, saved = capsys.readouterr().out.strip().splitlines()
    assert str(labels) in saved
    instances, refs = load_dataset(labels, "cvrp")
    expected = get_problem("cvrp").generate(96, N, generator=torch.Generator().manual_seed(11))
    torch.testing.assert_close(instances.locs, expected.locs)
    cost = tour_cost(get_problem("cvrp"), instances, torch.as_tensor(refs["ref_tours"]))
    torch.testing.assert_close(cost, torch.as_tensor(refs["ref_cost"]))
    mean = lambda line: float(line.split("mean cost ")[1].split()[0])  # noqa: E731
    assert mean(multistart) == pytest.approx(float(cost.mean()), abs=1e-4)
    assert mean(multistart) < mean(greedy)  # the search found better tours than the greedy ones
    out = tmp_path / "r"
    assert cli(["train", "--problem", "cvrp", "--num-nodes", str(N), "--epochs", "1", "--epoch-size", "96",
                "--batch-size", "32", "--eval-size", "32", "--val-size", "32", "--imitate", str(labels),
                "--imitation-epochs", "1", "--embed-dim", "16", "--n-layers", "1", "--ff-hidden", "32",
                "--out-dir", str(out), "--no-progress"]) == 0
    assert "train_nll=" in capsys.readouterr().out
    assert cli(["eval", "--policy", "nearest", "--instances", "none.tsp", "--save", str(tmp_path / "x.npz")]) == 2
    assert "with --instances there is none" in capsys.readouterr().err
