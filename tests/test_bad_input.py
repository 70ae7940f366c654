"""Issue #33's bad input and faults, by class: work and memory stay bounded (or the input is refused with
the limit stated), every fault ends in one sentence naming the file or flag, valid input is accepted and
silent nonsense is refused."""
import os
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("vrplib")

from routing_gym import tsplib  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"


def tsp_file(path, coords, name="tiny", ewt="EUC_2D", extra=""):
    rows = "".join(f"{i} {x!r} {y!r}\n" for i, (x, y) in enumerate(coords, 1))
    path.write_text(f"NAME : {name}\n{extra}TYPE : TSP\nDIMENSION : {len(coords)}\nEDGE_WEIGHT_TYPE : {ewt}\n"
                    f"NODE_COORD_SECTION\n{rows}EOF\n")
    return path


def cvrp_file(path, capacity="10", extra="", demands=(0, 3, 4)):
    coords = "".join(f"{i} {i} {i * 2}\n" for i in range(1, len(demands) + 1))
    rows = "".join(f"{i} {d}\n" for i, d in enumerate(demands, 1))
    path.write_text(f"NAME : v\nTYPE : CVRP\nDIMENSION : {len(demands)}\nEDGE_WEIGHT_TYPE : EUC_2D\n"
                    f"CAPACITY : {capacity}\n{extra}NODE_COORD_SECTION\n{coords}DEMAND_SECTION\n{rows}"
                    "DEPOT_SECTION\n1\n-1\nEOF\n")
    return path


# -- bounded work and memory ----------------------------------------------------------------------------
def test_tsplib_cost__memory_bounded_for_large_instances(tmp_path):
    n = 3000  # an (N, N, 2) float64 array would be 144 MB; edge by edge is a few MB at most
    coords = np.random.default_rng(0).integers(0, 10_000, (n, 2)).tolist()
    real = tsplib.load(tsp_file(tmp_path / "big.tsp", coords))
    tracemalloc.start()
    try:
        value = tsplib.cost(real, np.arange(n))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    xy = np.asarray(coords, dtype=np.float64)
    legs = np.floor(np.hypot(*(xy - np.roll(xy, -1, axis=0)).T) + 0.5)
    assert value == legs.sum()
    assert peak < 20e6


def test_tsplib_distance_matrix__refused_above_its_stated_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(tsplib, "MATRIX_NODES", 4)
    real = tsplib.load(tsp_file(tmp_path / "five.tsp", [(0, 0), (3, 4), (6, 8), (0, 8), (3, 0)]))
    with pytest.raises(ValueError, match="5 nodes.*up to 4 nodes"):
        tsplib.distance_matrix(real)
    assert tsplib.cost(real, [0, 1, 2, 3, 4]) == 5 + 5 + 6 + 9 + 3


# -- valid input accepted -------------------------------------------------------------------------------
@pytest.mark.parametrize("extra", ["", "COMMENT : read to EOF, GEOFFREY's EOF test\n"])
def test_tsplib__eof_inside_name_or_comment_is_accepted(tmp_path, extra):
    real = tsplib.load(tsp_file(tmp_path / "g.tsp", [(0, 0), (3, 4), (6, 8)], name="GEOFF8", extra=extra))
    assert real.name == "GEOFF8" and len(real.node_ids) == 3
    assert tsplib.cost(real, [0, 1, 2]) == 20


def test_tsplib__text_after_the_eof_line_is_ignored(tmp_path):
    path = tsp_file(tmp_path / "t.tsp", [(0, 0), (3, 4), (6, 8)])
    path.write_text(path.read_text() + "anything at all\n")
    assert tsplib.cost(tsplib.load(path), [0, 1, 2]) == 20


# -- silent nonsense refused ----------------------------------------------------------------------------
def test_tsplib_sol__cost_line_below_its_own_routes_is_refused(tmp_path):
    path = cvrp_file(tmp_path / "v.vrp")
    (tmp_path / "v.sol").write_text("Route #1: 1 2\nCost 5\n")  # 0-1-2-0: 2 + 2 + 4 = 8 (nint)
    with pytest.raises(ValueError, match=r"v\.sol.*Cost line 5 is below the cost of its own routes, 8"):
        tsplib.load(path)
    (tmp_path / "v.sol").write_text("Route #1: 1 2\nCost 8\n")
    assert tsplib.load(path).reference == 8


@pytest.mark.parametrize("coords,what", [
    ([(1e200, 1e200), (-1e200, 0.0), (0.0, -1e200)], "magnitudes up to 1e\\+200"),
    ([(1e-200, 0.0), (0.0, 1e-200), (2e-200, 2e-200)], "extent of 2e-200"),
])
def test_tsplib__coordinates_whose_lengths_overflow_or_vanish_are_refused(tmp_path, coords, what):
    with pytest.raises(ValueError, match=f"t.tsp: NODE_COORD_SECTION.*within \\+-1e\\+100.*{what}"):
        tsplib.load(tsp_file(tmp_path / "t.tsp", coords, ewt="EXACT_2D"))


def test_tsplib__large_but_representable_coordinates_cost_exactly(tmp_path):
    real = tsplib.load(tsp_file(tmp_path / "t.tsp", [(0.0, 0.0), (3e90, 4e90), (0.0, 8e90)], ewt="EXACT_2D"))
    assert tsplib.cost(real, [0, 1, 2]) == pytest.approx(5e90 + 5e90 + 8e90, rel=1e-12)


@pytest.mark.parametrize("extra", ["DISTANCE : 100\n", "SERVICE_TIME : 10\n", "VEHICLES_MAX_DISTANCE : 50\n"])
def test_tsplib_cvrp__constraints_beyond_capacity_are_refused_by_name(tmp_path, extra):
    key = extra.split()[0]
    with pytest.raises(ValueError, match=f"{key} .*cannot be represented"):
        tsplib.load(cvrp_file(tmp_path / "v.vrp", extra=extra))


def test_tsplib_cvrp__capacity_below_a_demand_is_refused_naming_capacity(tmp_path):
    with pytest.raises(ValueError, match=r"v\.vrp: node 3's demand 4 exceeds the capacity \(CAPACITY 1e-300\)"):
        tsplib.load(cvrp_file(tmp_path / "v.vrp", capacity="1e-300"))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_tsplib__a_folder_or_fifo_is_named_as_what_it_is(tmp_path):
    (tmp_path / "dir.tsp").mkdir()
    with pytest.raises(IsADirectoryError, match="dir.tsp is a folder"):
        tsplib.load(tmp_path / "dir.tsp")
    os.mkfifo(tmp_path / "pipe.tsp")
    with pytest.raises(ValueError, match="pipe.tsp: a FIFO"):  # and never opened (that would block)
        tsplib.load(tmp_path / "pipe.tsp")
    with pytest.raises(FileNotFoundError, match="none.tsp does not exist"):
        tsplib.load(tmp_path / "none.tsp")


# -- datasets: bounded reads, members that are not arrays ----------------------------------------------
def write_npz(path, **members):
    """An .npz whose members are given as arrays (written as .npy) or bytes (written as they are)."""
    import io
    import zipfile
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, value in members.items():
            if isinstance(value, bytes):
                z.writestr(name, value)
            else:
                buf = io.BytesIO()
                np.save(buf, value)
                z.writestr(name + ".npy", buf.getvalue())
    return path


def test_dataset__limit_reads_only_the_first_rows(tmp_path):
    from routing_gym.data import load_dataset
    locs = np.zeros((100_000, 50, 2), np.float32)  # 40 MB decompressed, a few kB in the file
    locs[:3] = np.random.default_rng(0).random((3, 50, 2))
    path = write_npz(tmp_path / "big.npz", locs=locs, ref_cost=np.ones(100_000))
    tracemalloc.start()
    try:
        instances, refs = load_dataset(path, "tsp", limit=3)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert instances.locs.shape == (3, 50, 2) and np.allclose(instances.locs.numpy(), locs[:3])
    assert refs["ref_cost"].shape == (3,)
    assert peak < 5e6


def test_dataset__more_than_the_read_limit_is_refused_saying_it(tmp_path, monkeypatch):
    from routing_gym import data
    path = write_npz(tmp_path / "big.npz", locs=np.zeros((1000, 10, 2), np.float32))  # 80 kB
    monkeypatch.setattr(data, "MAX_READ_BYTES", 50_000)
    with pytest.raises(ValueError, match=r"big.npz: array 'locs' would take .* limited to .* GiB.*--limit"):
        data.load_dataset(path, "tsp")
    assert data.load_dataset(path, "tsp", limit=100)[0].locs.shape == (100, 10, 2)


@pytest.mark.parametrize("member", [b"not an array at all", b"\x93NUMPY\x01\x00garbage"])
def test_dataset__a_member_that_is_not_an_array_is_one_sentence(tmp_path, member):
    from routing_gym.data import load_dataset
    path = write_npz(tmp_path / "d.npz", locs=member)
    with pytest.raises(ValueError, match=r"d.npz: array 'locs'"):
        load_dataset(path, "tsp")
    path = write_npz(tmp_path / "e.npz", **{"locs.npy": member})
    with pytest.raises(ValueError, match=r"e.npz: array 'locs'"):
        load_dataset(path, "tsp")


def test_dataset__truncated_array_and_fortran_order(tmp_path):
    import io
    from routing_gym.data import load_dataset
    buf = io.BytesIO()
    np.save(buf, np.random.default_rng(0).random((4, 5, 2)))
    path = write_npz(tmp_path / "t.npz", **{"locs.npy": buf.getvalue()[:-40]})
    with pytest.raises(ValueError, match="t.npz: array 'locs' is truncated"):
        load_dataset(path, "tsp")
    locs = np.asfortranarray(np.random.default_rng(1).random((4, 5, 2)))
    instances, _ = load_dataset(write_npz(tmp_path / "f.npz", locs=locs), "tsp", limit=2)
    assert np.allclose(instances.locs.numpy(), locs[:2])


def test_dataset__a_folder_is_named_as_such(tmp_path):
    from routing_gym.data import load_dataset
    (tmp_path / "d.npz").mkdir()
    with pytest.raises(IsADirectoryError, match="dataset .*d.npz is a folder"):
        load_dataset(tmp_path / "d.npz", "tsp")


def test_cli_eval__dataset_member_not_an_array_is_one_line_exit_2(tmp_path, capsys):
    from agents.apps.cli import main as cli
    path = write_npz(tmp_path / "d.npz", locs=b"junk")
    assert cli(["eval", "--problem", "tsp", "--policy", "nearest", "--dataset", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "d.npz: array 'locs'" in err


# -- checkpoints: damaged on disk, or holding the wrong types -------------------------------------------
TINY_TRAIN = ["--num-nodes", "5", "--epochs", "1", "--epoch-size", "32", "--batch-size", "32", "--eval-size", "32",
              "--val-size", "32", "--embed-dim", "16", "--n-layers", "1", "--no-progress"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny run's last.pt and its exported policy file."""
    from agents.apps.cli import main as cli
    root = tmp_path_factory.mktemp("run")
    assert cli(["train", *TINY_TRAIN, "--out-dir", str(root / "r")]) == 0
    assert cli(["export", "--checkpoint", str(root / "r" / "last.pt"), "--out", str(root / "p.pt")]) == 0
    return root / "r" / "last.pt", root / "p.pt"


def commands(path, out):
    return {"train": ["train", "--resume", str(path), "--epochs", "2", "--no-progress"],
            "eval": ["eval", "--policy", str(path), "--num-instances", "4", "--no-progress"],
            "export": ["export", "--checkpoint", str(path), "--out", str(out)]}


def refused_in_one_line(capsys, argv, *words):
    from agents.apps.cli import main as cli
    capsys.readouterr()
    assert cli(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    for word in words:
        assert word in err, err
    return err


def test_checkpoint__a_flipped_bit_in_the_weights_is_refused(trained, tmp_path, capsys):
    import torch
    from agents.policies.checkpoint import load_checkpoint
    last, _ = trained
    weights = next(v for v in load_checkpoint(last)["model"].values() if v.numel() >= 32)
    data = bytearray(last.read_bytes())
    at = data.find(weights.numpy().tobytes())
    assert at > 0
    data[at + 5] ^= 0x10
    bad = tmp_path / "flipped.pt"
    bad.write_bytes(bytes(data))
    assert torch.load(bad, weights_only=True)  # torch's reader takes it without a word
    with pytest.raises(ValueError, match="flipped.pt is corrupt: its member .* fails its CRC check"):
        load_checkpoint(bad)
    for name, argv in commands(bad, tmp_path / "o.pt").items():
        refused_in_one_line(capsys, argv, "flipped.pt is corrupt")
    assert not (tmp_path / "o.pt").exists()


@pytest.mark.parametrize("key,value,says", [
    ("config", [1, 2], "'config' must be a dict, got a list"),
    ("meta", "hello", "'meta' must be a dict, got a str"),
    ("history", "abc", "'history' must be a list, got a str"),
    ("history", [1, 2], "'history' must be a list of metrics rows"),
    ("history", [{"epoch": 0}], "'history' must be a list of metrics rows"),
    ("epoch", -5, "'epoch' must be a whole number >= 0, got -5"),
    ("instances_seen", "x", "'instances_seen' must be a whole number >= 0"),
    ("elapsed_s", float("nan"), "'elapsed_s' must be a finite number of seconds >= 0"),
    ("prior", [1], "'prior' must be a dict"),
    ("generators", "x", "'generators' must be a list"),
    ("model_config", [1], "'model_config' must be a dict"),
    ("model", "embed", "does not describe a valid attention model"),
])
def test_checkpoint__wrong_types_are_one_line_naming_the_file_and_entry(trained, tmp_path, capsys, key, value, says):
    from agents.policies.checkpoint import load_checkpoint, save_checkpoint
    last, policy = trained
    for source in (last, policy):
        ckpt = load_checkpoint(source)
        if key == "model":  # a 1-d embedding
            name = next(k for k in ckpt["model"] if "embed" in k)
            value = {**ckpt["model"], name: ckpt["model"][name].reshape(-1)}
            says = "does not describe a valid attention model" if source == policy else "does not match the model"
        elif key not in ckpt and key != "meta":
            continue
        payload = {k: v for k, v in ckpt.items() if k not in ("format", "version", "kind")}
        payload[key] = value
        bad = tmp_path / f"bad-{source.stem}.pt"
        save_checkpoint(bad, kind=ckpt["kind"], payload=payload)
        runs = commands(bad, tmp_path / "o.pt") if source == last else {"eval": commands(bad, None)["eval"]}
        for name, argv in runs.items():
            expected = says
            if key == "model" and name in ("eval", "export"):
                expected = "does not describe a valid attention model"
            refused_in_one_line(capsys, argv, str(bad), expected)
        assert not (tmp_path / "o.pt").exists()


# -- bounded memory: counts and model sizes refused before any allocation -------------------------------
@pytest.mark.parametrize("argv,says", [
    (["eval", "--problem", "tsp", "--policy", "nearest", "--num-nodes", "5", "--num-instances", "1000000000"],
     "--num-instances 1000000000: TSP-5 instances would take 37.3 GiB; instances generated at once are limited "
     "to 4 GiB"),
    (["solve", "--problem", "atsp", "--method", "lkh", "--num-nodes", "2000", "--num-instances", "1000"],
     "--num-instances 1000: ATSP-2000 instances would take 14.9 GiB"),
    (["train", "--num-nodes", "5", "--embed-dim", "100000"],
     "embed_dim=100000 would have 190,309,201,536 parameters; the limit is 200,000,000"),
    (["train", "--num-nodes", "5", "--val-size", "1000000000"], "--val-size 1000000000: TSP-5 instances"),
])
def test_cli__too_much_memory_is_refused_saying_the_limit(tmp_path, capsys, argv, says):
    out = ["--out-dir", str(tmp_path / "r")] if argv[0] == "train" else []
    refused_in_one_line(capsys, argv + out + ["--no-progress"], says)
    assert not (tmp_path / "r").exists()


def test_compare__too_many_instances_is_refused_before_generating():
    from agents.apps.compare import compare_problem
    with pytest.raises(ValueError, match="--num-instances 1000000000: TSP-20 instances would take"):
        compare_problem("tsp", 20, 10**9, seed=0)


# -- every fault one sentence: full disk, read-only folder, deep JSON, long names ------------------------
def full_disk(path):
    """The next write of ``path``'s temporary file fails with ENOSPC: it is a link to /dev/full."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to("/dev/full")
    return tmp


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_checkpoint__a_full_disk_is_an_oserror_naming_the_file_and_nothing_is_lost(tmp_path):
    import torch
    from agents.policies.checkpoint import load_checkpoint, save_checkpoint
    path = tmp_path / "last.pt"
    save_checkpoint(path, kind="trainer", payload={"epoch": 1, "model": {"w": torch.zeros(10)}})
    before = path.read_bytes()
    tmp = full_disk(path)
    with pytest.raises(OSError, match=r"No space left on device.*last\.pt'$") as info:
        save_checkpoint(path, kind="trainer", payload={"epoch": 2, "model": {"w": torch.zeros(100_000)}})
    assert info.value.filename == str(path) and not os.path.lexists(tmp)
    assert path.read_bytes() == before and load_checkpoint(path)["epoch"] == 1


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("fault", ["full disk", "read-only folder"])
def test_train__a_write_failing_mid_run_stops_it_in_one_line_keeping_the_last_epoch(tmp_path, capsys, monkeypatch,
                                                                                   fault):
    import errno
    from agents.apps.cli import main as cli
    from agents.policies import checkpoint
    from agents.policies.checkpoint import load_checkpoint
    out = tmp_path / "r"
    argv = ["train", *TINY_TRAIN, "--out-dir", str(out)]
    assert cli(argv) == 0
    save = checkpoint.save_checkpoint

    def failing(path, **kwargs):
        if fault == "full disk":
            full_disk(Path(path))
        else:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return save(path, **kwargs)

    monkeypatch.setattr("agents.training.checkpointing.save_checkpoint", failing)
    before = (out / "last.pt").read_bytes()
    capsys.readouterr()
    assert cli(["train", "--resume", str(out / "last.pt"), "--epochs", "2", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    reason = "No space left on device" if fault == "full disk" else "Permission denied"
    assert f"{out}/best.pt: {reason}" in err or f"{out}/last.pt: {reason}" in err
    assert f"{out / 'last.pt'} keeps epoch 0: continue with routing-gym train --resume {out / 'last.pt'}" in err
    assert (out / "last.pt").read_bytes() == before and load_checkpoint(out / "last.pt")["epoch"] == 1
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    monkeypatch.undo()
    assert cli(["train", "--resume", str(out / "last.pt"), "--epochs", "2", "--no-progress"]) == 0


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_eval_save__a_full_disk_is_one_line_and_leaves_no_file(tmp_path, capsys):
    save = tmp_path / "d.npz"
    full_disk(save)
    refused_in_one_line(capsys, ["eval", "--problem", "tsp", "--policy", "nearest", "--num-nodes", "5",
                                 "--num-instances", "4", "--save", str(save), "--no-progress"],
                        f"{save}: No space left on device")
    assert not os.path.lexists(save) and not os.path.lexists(tmp_path / "d.npz.tmp")


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a": ' * 100_000 + "1" + "}" * 100_000])
def test_reference_table__deeply_nested_json_is_one_sentence(tmp_path, capsys, text):
    table = tmp_path / "deep.json"
    table.write_text(text)
    with pytest.raises(ValueError, match="deep.json: JSON nested too deeply"):
        tsplib.read_table(table)
    refused_in_one_line(capsys, ["eval", "--policy", "nearest", "--instances", str(DATA / "eil51.tsp"),
                                 "--reference-table", str(table)], "deep.json: JSON nested too deeply")


@pytest.mark.parametrize("argv", [
    ["eval", "--problem", "tsp", "--policy", "nearest", "--num-nodes", "5", "--save", "{long}.npz"],
    ["eval", "--problem", "tsp", "--policy", "nearest", "--dataset", "{long}.npz"],
    ["eval", "--policy", "nearest", "--instances", "{long}.tsp"],
    ["eval", "--policy", "nearest", "--instances", str(DATA / "eil51.tsp"), "--reference-table", "{long}.json"],
    ["eval", "--policy", "{long}.pt", "--problem", "tsp", "--num-nodes", "5"],
    ["train", "--num-nodes", "5", "--out-dir", "{long}"],
    ["train", "--resume", "{long}/last.pt"],
    ["solve", "--problem", "tsp", "--num-nodes", "5", "--save", "{long}.npz"],
    ["render", "--problem", "tsp", "--num-nodes", "5", "--out", "{long}.gif"],
    ["export", "--checkpoint", "{long}.pt", "--out", "x.pt"],
])
def test_cli__a_300_character_file_name_is_one_line_naming_the_option_or_file(tmp_path, capsys, argv):
    long = str(tmp_path / ("x" * 300))
    err = refused_in_one_line(capsys, [a.format(long=long) for a in argv] + ["--no-progress"][:argv[0] != "export"])
    assert "File name too long" in err and ("argument --" in err or "x" * 40 in err)
    assert os.listdir(tmp_path) == []


# -- bounded drawing -------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [(100_000, 100_000), (600, 8193)])
def test_env__render_size_above_the_limit_is_refused_naming_it(size):
    import gymnasium as gym
    with pytest.raises(ValueError, match=r"render_size must be at most 8192 pixels a side"):
        gym.make("routing/TSP-20", render_size=size)
    env = gym.make("routing/TSP-20", render_size=(8192, 64))
    assert env.unwrapped.render_size == (8192, 64)


def test_vector_env__render_size_above_the_limit_is_refused_naming_it():
    import gymnasium as gym
    with pytest.raises(ValueError, match=r"render_size must be at most 8192 pixels a side"):
        gym.make_vec("routing/TSP-20", num_envs=2, vectorization_mode="vector_entry_point",
                     render_size=(100_000, 100_000))


def test_render__too_many_nodes_is_refused_before_rolling_out(tmp_path, capsys):
    refused_in_one_line(capsys, ["render", "--problem", "tsp", "--num-nodes", "20000", "--policy", "nearest",
                                 "--out", str(tmp_path / "r.gif")], "--num-nodes 20000", "limited to 1000 nodes")
    assert not (tmp_path / "r.gif").exists()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("name", ["r.gif", "r.png"])
def test_render__a_full_disk_is_one_line_and_keeps_the_earlier_picture(tmp_path, capsys, name):
    pytest.importorskip("pygame")
    out = tmp_path / name
    out.write_bytes(b"an earlier picture")
    (tmp_path / f"r.tmp{out.suffix}").symlink_to("/dev/full")
    refused_in_one_line(capsys, ["render", "--problem", "tsp", "--num-nodes", "5", "--policy", "nearest",
                                 "--out", str(out)], f"{out}: ")
    assert out.read_bytes() == b"an earlier picture" and sorted(os.listdir(tmp_path)) == [name]


@pytest.mark.parametrize("error", [
    RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory: you tried to "
                 "allocate 40000000000 bytes. Error code 12 (Cannot allocate memory)"),
    MemoryError(),
])
def test_cli__running_out_of_memory_anyway_is_one_line_exit_2(monkeypatch, capsys, error):
    from routing_gym.problems import get_problem

    def allocate(*args, **kwargs):
        raise error

    monkeypatch.setattr(get_problem("tsp"), "generate", allocate)
    refused_in_one_line(capsys, ["eval", "--problem", "tsp", "--policy", "nearest", "--num-nodes", "5",
                                 "--no-progress"], "routing-gym eval: error: out of memory", "--batch-size")


def test_cli__other_runtime_errors_are_not_taken_for_memory(monkeypatch):
    from agents.apps.cli import main as cli
    from routing_gym.problems import get_problem

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(get_problem("tsp"), "generate", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        cli(["eval", "--problem", "tsp", "--policy", "nearest", "--num-nodes", "5", "--no-progress"])
