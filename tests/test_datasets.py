"""Datasets (.npz) are read strictly and lazily: every malformed file is a ValueError (FileNotFoundError when
missing) naming the file and the field; only the instance fields and the references are read (pickles
never), other arrays are named in a warning and left compressed."""
import re

import numpy as np
import pytest
import torch

from routing_gym.data import load_dataset, save_dataset
from routing_gym.problems import get_problem


@pytest.fixture
def tsp_arrays():
    inst = get_problem("tsp").generate(4, 5, generator=torch.Generator().manual_seed(0))
    return {"locs": inst.locs.numpy()}


def dataset_refused(path, match, **arrays):
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match=match) as info:
        load_dataset(path, "tsp")
    assert str(path) in str(info.value)


def test_dataset_round_trip_with_references(tmp_path, tsp_arrays):
    inst = get_problem("tsp").instance_from(tsp_arrays, batched=True)
    save_dataset(tmp_path / "d.npz", inst, ref_cost=np.arange(1, 5), ref_tours=np.tile(np.arange(5), (4, 1)))
    loaded, refs = load_dataset(tmp_path / "d.npz", "tsp")
    assert torch.equal(loaded.locs, inst.locs)
    assert refs["ref_cost"].dtype == np.float64 and refs["ref_tours"].shape == (4, 5)
    with pytest.raises(ValueError, match="unknown reference array"):
        save_dataset(tmp_path / "e.npz", inst, ref_costs=np.ones(4))
    with pytest.raises(ValueError, match="'ref_cost' must hold one real number per instance"):
        save_dataset(tmp_path / "e.npz", inst, ref_cost=np.ones(3))


@pytest.mark.parametrize("dtype", [np.complex128, np.bool_, np.str_])
def test_dataset_fields_must_be_real_numbers(tmp_path, tsp_arrays, dtype):
    locs = tsp_arrays["locs"].astype(dtype)  # complex parts were dropped
    dataset_refused(tmp_path / "d.npz", f"array 'locs' holds {np.dtype(locs.dtype)} values", locs=locs)


@pytest.mark.parametrize("ref_cost,match", [
    (np.ones(3), "'ref_cost' must hold one real number per instance, shape \\(4,\\), got float64 of shape \\(3,\\)"),
    (np.ones((4, 2)), "shape \\(4,\\), got float64 of shape \\(4, 2\\)"),
    (np.array(["1", "2", "3", "4"]), "array 'ref_cost' holds <U1 values"),
    (np.array([1, 2, 3, 4j]), "array 'ref_cost' holds complex128 values"),
    (np.array([1, 2, np.inf, 4]), "'ref_cost' holds NaN or infinite values"),
    (np.array([1, None, 3, 4], dtype=object), "array 'ref_cost' cannot be read: Object arrays"),
])
def test_dataset_ref_cost_must_be_one_finite_number_per_instance(tmp_path, tsp_arrays, ref_cost, match):
    dataset_refused(tmp_path / "d.npz", match, ref_cost=ref_cost, **tsp_arrays)


@pytest.mark.parametrize("ref_tours,match", [
    (np.tile(np.arange(5), (3, 1)), "'ref_tours' must hold one tour of node indices per instance, shape \\(4, S\\)"),
    (np.tile(np.arange(5.0), (4, 1)), "got float64"),
    (np.tile(np.arange(1, 6), (4, 1)), "'ref_tours' holds node 5; the instances have nodes 0..4"),
])
def test_dataset_ref_tours_must_be_node_indices_per_instance(tmp_path, tsp_arrays, ref_tours, match):
    dataset_refused(tmp_path / "d.npz", match, ref_tours=ref_tours, **tsp_arrays)


def test_an_empty_dataset_is_refused(tmp_path):
    dataset_refused(tmp_path / "d.npz", "holds no instances", locs=np.zeros((0, 5, 2)), ref_cost=np.zeros(0))


def test_unknown_arrays_are_not_read_but_named_in_a_warning(tmp_path, tsp_arrays):
    # an extra that cannot even be read (a pickled object array) proves it is never decompressed
    np.savez(tmp_path / "d.npz", junk=np.array([object()], dtype=object), ref_costs=np.ones(4), **tsp_arrays)
    with pytest.warns(UserWarning, match=r"array\(s\) \['junk', 'ref_costs'\] not read"):
        instances, refs = load_dataset(tmp_path / "d.npz", "tsp")
    assert instances.locs.shape == (4, 5, 2) and refs == {}


def test_what_is_not_an_npz_is_refused_by_name(tmp_path, tsp_arrays):
    np.save(tmp_path / "single.npy", tsp_arrays["locs"])
    (tmp_path / "single.npy").rename(tmp_path / "single.npz")
    (tmp_path / "text.npz").write_text("locs = [[0, 0]]")
    for path in (tmp_path / "single.npz", tmp_path / "text.npz"):
        with pytest.raises(ValueError, match=f"dataset {re.escape(str(path))} is not an .npz file"):
            load_dataset(path, "tsp")
    with pytest.raises(FileNotFoundError, match="none.npz"):
        load_dataset(tmp_path / "none.npz", "tsp")
    np.savez(tmp_path / "obj.npz", locs=np.array([None], dtype=object))
    with pytest.raises(ValueError, match="array 'locs' cannot be read: Object arrays"):  # never unpickled
        load_dataset(tmp_path / "obj.npz", "tsp")
