"""The layers of ``agents/`` import one way: apps -> training, references -> inference -> policies ->
routing_gym. Each module is parsed (not imported) and every ``agents`` import in it, absolute or
relative, at the top or inside a function, must point into its own subpackage or to a lower layer."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
AGENTS = ROOT / "agents"
LAYER = {"policies": 0, "inference": 1, "training": 2, "references": 2, "apps": 3}
"""Subpackage -> layer: a module may import its own subpackage and the subpackages of lower layers only
(so training and references, one layer, do not import each other)."""
TOP_LEVEL = {
    "agents/__init__.py": "policies",  # re-exports load_pretrained and available_pretrained
    "agents/train.py": "apps",  # ``python -m agents.train``, a thin entry point of the CLI
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def owner(path: Path) -> str:
    """The subpackage (layer) a module under agents/ belongs to."""
    rel = path.relative_to(ROOT).as_posix()
    if rel in TOP_LEVEL:
        return TOP_LEVEL[rel]
    sub = path.relative_to(AGENTS).parts[0]
    assert sub in LAYER, f"{rel} is in no layer: put it in one of agents/{{{','.join(LAYER)}}}/"
    return sub


def imported_modules(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """``(line, absolute module name)`` of every import in the file (or in ``source``, as if it were the
    file); ``from X import name`` yields ``X.name`` too (it may be a module)."""
    tree = ast.parse(path.read_text() if source is None else source, filename=str(path))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            out.append((node.lineno, module))
            out += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return out


def target(module: str) -> str | None:
    """The layer an imported ``agents`` module belongs to; None for anything outside ``agents``."""
    parts = module.split(".")
    if parts[0] != "agents":
        return None
    if len(parts) == 1:
        return TOP_LEVEL["agents/__init__.py"]
    if parts[1] in LAYER:
        return parts[1]
    if f"agents/{parts[1]}.py" in TOP_LEVEL:
        return TOP_LEVEL[f"agents/{parts[1]}.py"]
    return TOP_LEVEL["agents/__init__.py"]  # a name that agents/__init__.py exports


MODULES = sorted(AGENTS.rglob("*.py"))


def test_every_layer_has_modules():
    assert {owner(p) for p in MODULES} == set(LAYER)


def violations(path: Path, source: str | None = None) -> list[str]:
    """The imports of a module under agents/ that point sideways or upwards."""
    here = owner(path)
    wrong = []
    for line, module in imported_modules(path, source):
        there = target(module)
        if there is not None and there != here and LAYER[there] >= LAYER[here]:
            wrong.append(f"line {line}: {module} ({there}, layer {LAYER[there]})")
    return wrong


@pytest.mark.parametrize("path", MODULES, ids=[p.relative_to(ROOT).as_posix() for p in MODULES])
def test_imports_point_down_the_layers(path):
    wrong = violations(path)
    assert not wrong, (f"{path.relative_to(ROOT)} ({owner(path)}, layer {LAYER[owner(path)]}) imports sideways "
                       f"or upwards: " + "; ".join(wrong))


@pytest.mark.parametrize("path", sorted((ROOT / "routing_gym").rglob("*.py")),
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_routing_gym_imports_nothing_from_agents(path):
    assert not [m for _, m in imported_modules(path) if m.split(".")[0] == "agents"]


def test_the_checker_sees_sideways_and_upward_imports():
    """The checker itself: relative and absolute, top-level and lazy imports are all resolved."""
    probe = AGENTS / "inference" / "_probe.py"
    source = ("from . import rollout\nfrom ..policies.protocol import select_rows\nimport torch\n"
              "def f():\n    from ..references.heuristics import Greedy\n    import agents.training.config\n")
    assert violations(probe, source) == ["line 5: agents.references.heuristics (references, layer 2)",
                                         "line 5: agents.references.heuristics.Greedy (references, layer 2)",
                                         "line 6: agents.training.config (training, layer 2)"]
    sibling = AGENTS / "training" / "_probe.py"
    assert violations(sibling, "from agents.references import exact\n")
    assert not violations(AGENTS / "apps" / "_probe.py", "from ..training.reinforce import Trainer\n")
