"""The problem tables of README.md and docs/contract.md, generated from what the registered problem units
declare (a test fails when a file's table differs).

Each table stands in a file between ``<!-- table: NAME -->`` and ``<!-- end table -->``;
``python -m routing_gym.problems.tables README.md docs/contract.md`` writes them anew.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from . import PROBLEMS


def _ids(problem) -> str:
    return ", ".join(f"`-{n}`" for n in problem.sizes) + ", `-v0`"


def _nodes(problem) -> str:
    """The nodes of an instance of ``num_nodes`` n: "n", "depot + n" or "k depots + n"."""
    n = problem.valid_num_nodes(10)
    extra = problem.num_nodes_total(n) - n
    return "n" if extra == 0 else "depot + n" if extra == 1 else f"{extra} depots + n"


def _keys(entries) -> str:
    return ", ".join(f"`{o.key}`" for o in entries) or "-"


def problems_table() -> str:
    """One row per registered problem: ids, nodes, per-node features, step context, episode end, cost."""
    rows = ["| problem | ids `routing/{P}...` | nodes | per-node features | step context | episode ends when | cost |",
            "|---|---|---|---|---|---|---|"]
    for p in PROBLEMS.values():
        per_node = [o for o in p.observation if o.shape[:1] == ("N",) and o.key != "locs"]
        context = [o for o in p.observation if o.shape[:1] != ("N",)]
        ends = re.sub(r"^Terminates when ", "", p.doc.episode_end)
        rows.append(f"| {p.label} | {_ids(p)} | {_nodes(p)} | {_keys(per_node)} | "
                    f"{_keys(context)} | {ends} | {p.doc.cost} |")
    return "\n".join(rows)


def observation_table() -> str:
    """One row per observation key: the problems that have it, its dtype and shape, and its meaning (per
    problem where they differ)."""
    entries: dict[str, list] = {}
    for p in PROBLEMS.values():
        for o in p.observation:
            entries.setdefault(o.key, []).append((p.label, o))
    rows = ["| key | problems | dtype, shape | meaning |", "|---|---|---|---|"]
    for key, found in entries.items():
        labels = [label for label, _ in found]
        first = found[0][1]
        meanings = list(dict.fromkeys(o.meaning for _, o in found))
        meaning = meanings[0] if len(meanings) == 1 else "; ".join(
            f"{', '.join(label for label, o in found if o.meaning == m)}: {m}" for m in meanings)
        everywhere = len(labels) == len(PROBLEMS)
        rows.append(f"| `{key}` | {'all' if everywhere else ', '.join(labels)} | {first.dtype} {first.shape_text} | "
                    f"{meaning} |")
    rows.append("| `action_mask` | all | int8 (N,), `MultiBinary(N)` | 1 = the action is allowed |")
    return "\n".join(rows)


TABLES = {"problems": problems_table, "observation": observation_table}
_BLOCK = re.compile(r"(<!-- table: (\w+) -->\n)(.*?)(<!-- end table -->)", re.S)


def tables_in(text: str) -> dict[str, str]:
    """The tables a file holds, by name."""
    return {m.group(2): m.group(3).rstrip("\n") for m in _BLOCK.finditer(text)}


def rewrite(text: str) -> str:
    """``text`` with each marked table generated anew."""
    return _BLOCK.sub(lambda m: m.group(1) + TABLES[m.group(2)]() + "\n" + m.group(4), text)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        path = Path(name)
        path.write_text(rewrite(path.read_text()))
        print(f"wrote the tables of {path}")
