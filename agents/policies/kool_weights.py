"""Importer for the published Attention Model weights of Kool, van Hoof & Welling (ICLR 2019).

Their repository (wouterkool/attention-learn-to-route, folder ``pretrained/``) ships, per problem and
size, ``epoch-99.pt`` (a dict whose ``"model"`` entry is the state dict) beside the ``args.json`` it was
trained with. :func:`load_kool_weights` reads both (``torch.load(..., weights_only=True)``) and maps
their state dict onto :class:`~agents.policies.attention_model.AttentionModel` key by key (:func:`key_mapping`).
The weights are third-party data (MIT license); nothing here ships them.

Their layout, for D = embedding, H heads, K = D / H, F node features:

============================================== ================ ====================================
theirs                                         shape            ours
============================================== ================ ====================================
``init_embed.{weight,bias}``                   (D, 2 + F), (D,) ``init_embedding.node.*``
``init_embed_depot.{weight,bias}``             (D, 2), (D,)     ``init_embedding.depot.*``
``embedder.layers.{i}.0.module.W_query``       (H, D, K)        ``layers.{i}.attention.qkv.weight``
``... W_key``, ``... W_val``                   (H, D, K)        (rows ``h * K + k`` of Q, K, V)
``embedder.layers.{i}.0.module.W_out``         (H, K, D)        ``layers.{i}.attention.out.weight``
``embedder.layers.{i}.1.normalizer.*``         (D,)             ``layers.{i}.norm1.norm.*``
``embedder.layers.{i}.2.module.{0,2}.*``       (512, D), ...    ``layers.{i}.feed_forward.{0,2}.*``
``embedder.layers.{i}.3.normalizer.*``         (D,)             ``layers.{i}.norm2.norm.*``
``W_placeholder`` (TSP)                        (2D,)            ``step_context.placeholder``
``project_node_step.weight`` (SDVRP)           (3D, 1)          same name
``project_{node_embeddings,fixed_context,...}`` as ours          same names
============================================== ================ ====================================
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

from .attention_model import AttentionModel, AttentionModelConfig
from .checkpoint import read_torch_file

# Their ``args.json`` "problem" -> ours. Their OP models were trained on one prize distribution
# ("op_dist", or "op" with "data_distribution"); the network is the same for any.
PROBLEM_NAMES = {"tsp": "tsp", "cvrp": "cvrp", "sdvrp": "sdvrp", "op": "op", "op_const": "op", "op_unif": "op",
                 "op_dist": "op", "pctsp_det": "pctsp", "pctsp_stoch": "spctsp"}
# Node features after (x, y) -> problem, for state dicts without args.json (3 is CVRP or OP: ambiguous).
PROBLEM_BY_NODE_DIM = {2: "tsp", 4: "pctsp"}

Transform = Callable[..., Tensor]


def heads_in(*weights: Tensor) -> Tensor:
    """Their per-head input projections (H, D, K) each -> one ``nn.Linear`` weight (len * H * K, D)."""
    return torch.cat([w.permute(0, 2, 1).reshape(-1, w.shape[1]) for w in weights])


def heads_out(w: Tensor) -> Tensor:
    """Their per-head output projection (H, K, D) -> an ``nn.Linear`` weight (D, H * K)."""
    return w.reshape(-1, w.shape[-1]).t()


def same(w: Tensor) -> Tensor:
    """Tensors whose layout is already ours."""
    return w


def key_mapping(n_layers: int) -> dict[str, tuple[tuple[str, ...], Transform]]:
    """``our key -> (their keys, transform)``: our tensor is ``transform(*their tensors)``. It covers all
    problems and both normalisations; a model uses the entries whose keys it has."""
    mapping: dict[str, tuple[tuple[str, ...], Transform]] = {"step_context.placeholder": (("W_placeholder",), same)}
    for p in ("weight", "bias"):
        mapping[f"init_embedding.node.{p}"] = ((f"init_embed.{p}",), same)
        mapping[f"init_embedding.depot.{p}"] = ((f"init_embed_depot.{p}",), same)
    for i in range(n_layers):
        theirs, ours = f"embedder.layers.{i}", f"layers.{i}"
        mapping[f"{ours}.attention.qkv.weight"] = (
            tuple(f"{theirs}.0.module.W_{w}" for w in ("query", "key", "val")), heads_in)
        mapping[f"{ours}.attention.out.weight"] = ((f"{theirs}.0.module.W_out",), heads_out)
        for norm, index in (("norm1", 1), ("norm2", 3)):
            for p in ("weight", "bias", "running_mean", "running_var"):
                mapping[f"{ours}.{norm}.norm.{p}"] = ((f"{theirs}.{index}.normalizer.{p}",), same)
        for j in (0, 2):
            for p in ("weight", "bias"):
                mapping[f"{ours}.feed_forward.{j}.{p}"] = ((f"{theirs}.2.module.{j}.{p}",), same)
    for name in ("project_node_embeddings", "project_fixed_context", "project_step_context", "project_out",
                 "project_node_step"):  # the last for SDVRP only
        mapping[f"{name}.weight"] = ((f"{name}.weight",), same)
    return mapping


def checkpoint_file(path: Path) -> Path:
    """The ``.pt`` file: ``path`` itself, or in a folder its last ``epoch-<k>.pt``."""
    if path.is_dir():
        epochs = [(int(m.group(1)), p) for p in path.iterdir() if (m := re.fullmatch(r"epoch-(\d+)\.pt", p.name))]
        if not epochs:
            raise FileNotFoundError(f"{path}: no epoch-<k>.pt checkpoint in this folder")
        return max(epochs)[1]
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such checkpoint")
    return path


def read_config(file: Path, state: dict[str, Tensor]) -> AttentionModelConfig:
    """Our config from their ``args.json`` (beside ``file``, if there) and the state dict's shapes."""
    args_file = file.parent / "args.json"
    try:
        args = json.loads(args_file.read_text()) if args_file.is_file() else {}
    except json.JSONDecodeError as e:
        raise ValueError(f"{args_file}: not valid JSON ({e})") from None
    if args.get("model", "attention") != "attention":
        raise ValueError(f"{args_file}: model {args['model']!r} is not the Attention Model")
    node_dim = state["init_embed.weight"].shape[1]
    if "problem" in args:
        problem = PROBLEM_NAMES.get(args["problem"])
        if problem is None:
            raise ValueError(f"{args_file}: problem {args['problem']!r} is not supported; "
                             f"known: {sorted(PROBLEM_NAMES)}")
    elif node_dim in PROBLEM_BY_NODE_DIM:
        problem = PROBLEM_BY_NODE_DIM[node_dim]
    else:
        raise ValueError(f"{file}: cannot tell the problem from node features of size {node_dim} "
                         f"(CVRP or OP) without an args.json beside it")
    n_layers = len({k.split(".")[2] for k in state if k.startswith("embedder.layers.")})
    mha = state["embedder.layers.0.0.module.W_query"]  # (H, D, K)
    config = AttentionModelConfig(
        problem=problem, embed_dim=mha.shape[1], n_heads=mha.shape[0], n_layers=n_layers,
        ff_hidden=state["embedder.layers.0.2.module.0.weight"].shape[0],
        tanh_clipping=float(args.get("tanh_clipping", 10.0)), normalization=args.get("normalization", "batch"))
    for key, want in (("embedding_dim", config.embed_dim), ("n_encode_layers", config.n_layers)):
        if key in args and args[key] != want:
            raise ValueError(f"{args_file}: {key} = {args[key]} but the weights in {file.name} have {want}")
    return config


def load_kool_weights(path: str | Path, device: str | torch.device = "cpu") -> AttentionModel:
    """An :class:`AttentionModel` holding Kool et al.'s published weights, in evaluation mode.

    Args:
        path: their ``epoch-<k>.pt``, or the folder holding it and ``args.json``.
        device: where to put the model.

    Raises:
        ValueError: naming the file, for an unknown problem, a missing or surplus key, or a shape
            that does not fit the architecture.
    """
    file = checkpoint_file(Path(path))
    raw = read_torch_file(file)  # ValueError naming the file when it is damaged or not a torch file
    if not isinstance(raw, dict) or not isinstance(raw.get("model"), dict):
        raise ValueError(f"{file}: not a checkpoint of Kool et al.'s Attention Model (no 'model' state dict)")
    state = raw["model"]
    try:
        config = read_config(file, state)
    except KeyError as e:
        raise ValueError(f"{file}: missing key {e} of Kool et al.'s Attention Model") from None
    model = AttentionModel(config)
    ours = model.state_dict()
    mapping = {key: entry for key, entry in key_mapping(config.n_layers).items() if key in ours}
    missing = sorted({k for keys, _ in mapping.values() for k in keys} - set(state))
    surplus = sorted(set(state) - {k for keys, _ in mapping.values() for k in keys})
    if missing or surplus:
        raise ValueError(f"{file}: not a {config.problem.upper()} Attention Model of Kool et al.: "
                         f"missing keys {missing}, unexpected keys {surplus}")
    for key, (theirs, transform) in mapping.items():
        value = transform(*(state[k] for k in theirs))
        if value.shape != ours[key].shape:
            raise ValueError(f"{file}: {', '.join(theirs)} gives shape {tuple(value.shape)} for {key}, "
                             f"expected {tuple(ours[key].shape)}")
        ours[key] = value
    model.load_state_dict(ours)
    return model.to(device).eval()
