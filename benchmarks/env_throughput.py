"""Vector env throughput: env steps per second of each contender's own ``step``, side by side.

For each problem at n = 50 (``--num-nodes``) and one torch thread (``--threads``), in one run (by default every
registered problem that RL4CO also has, :data:`RL4CO_ENVS`: TSP, CVRP, OP, PCTSP, SPCTSP, SDVRP, ATSP, CVRPTW, CVRPMVC,
PDP, MDCPDP, MTSP, SHPP, SVRP and MTVRP, RouteFinder's mixed variants):

- ``ours torch B=1024 (NEXT_STEP)``: ``gym.make_vec(id, num_envs=1024, vectorization_mode=
  "vector_entry_point", array_type="torch", autoreset_mode="NextStep")``, ``step(tensor)``; a finished
  sub-env is reset inside the next ``step`` (timed).
- ``ours torch B=1024 (DISABLED)``: the same with ``autoreset_mode="Disabled"``; when every sub-env has
  finished, ``reset()`` outside the timing (RL4CO's regime, the like-for-like comparison).
- ``ours numpy B=64 (NEXT_STEP)``: ``array_type="numpy"``, ``step(ndarray)``; resets inside ``step``.
- ``SyncVectorEnv B=64 (NEXT_STEP)``: ``gymnasium.vector.SyncVectorEnv`` over 64 ``gym.make(id)``; resets inside
  ``step``.
- ``ours single env B=1``: ``gym.make(id).step(int)``; ``reset()`` outside the timing.
- ``..., compiled``: the same envs made with ``compile=True`` (the step compiled with ``torch.compile``;
  compiled during the warm-up, before any timing).
- ``RL4CO B=1024`` and ``RL4CO B=1``: ``rl4co.envs.<P>Env(...).step(td)`` on a TensorDict; RL4CO has no
  autoreset, so when every sub-env is done, ``env.reset(batch_size=[B])`` outside the timing; finished
  sub-envs take their no-op meanwhile.
- ``RL4CO B=1024 (resets timed)``: the same, its ``env.reset(batch_size=[B])`` (which generates B fresh instances)
  timed too: what a loop of fresh episodes costs in RL4CO, as our NEXT_STEP rows pay for their fresh instances
  inside ``step``. Shown for information beside the target's own comparison (the untimed resets above).

What is timed: only the contender's ``step`` call, with ``time.perf_counter`` (``--clock cpu``: the
thread's CPU time, ``time.thread_time``, which ignores time the process spends descheduled on a busy
machine; valid because with one torch thread all the work runs on the calling thread). Not timed: choosing the
action and handing it over (``td["action"] = ...`` for RL4CO), and every reset that the contender does
not do inside its own ``step``. The two RL4CO rows appear when ``rl4co`` is importable (``pip install
routing-gym[bench]``); otherwise a note says they were skipped.

Steps counted: B per ``step`` call, i.e. every sub-env advanced once, including the steps in which a
sub-env is reset (NEXT_STEP) or has finished and takes its no-op while the rest of its batch runs
(DISABLED, RL4CO). Our NEXT_STEP rows therefore pay for their resets inside the timed region, which
RL4CO, having no autoreset, does not; the DISABLED row is the like-for-like comparison with ``RL4CO B=1024``, and
NEXT_STEP's with ``RL4CO B=1024 (resets timed)``.

Actions: the same cheap rule for everyone, computed from the mask the contender returned: the first
allowed customer, or the depot when no customer is allowed (TSP: the first allowed node), i.e. the
argmax of ``mask * priority`` with priority 1 for node 0 (the depot, SHPP's start; MDCPDP's other depots count
as other nodes) and 2 for the other nodes. (Plain "first allowed node" would end every OP episode at its first
step, since OP always allows the depot.)

Noise control: every contender runs ``--rounds`` timing windows of ``--window`` seconds of timed
``step`` calls, interleaved (each contender once per round); the table shows the median over windows
and the spread (max - min) / median.

Targets: torch mode B = 1024 at least 2x RL4CO's B = 1024 throughput (moonshot 5x); numpy mode B = 64
at least 20x SyncVectorEnv B = 64 per instance; the single env at least as fast per step as RL4CO at
B = 1 (moonshot 3x).

Usage::

    python benchmarks/env_throughput.py                  # the 15 problems RL4CO also has, n = 50, 1 thread
    python benchmarks/env_throughput.py --problems TSP --rounds 3 --window 0.2 --json throughput.json
    python benchmarks/env_throughput.py --only "DISABLED" "single" "RL4CO"   # contenders whose name has one of these
"""
from __future__ import annotations

import argparse
import gc
import json
import time
import warnings
from functools import partial

import gymnasium as gym
import numpy as np
import torch

import routing_gym  # noqa: F401  (registers the routing/ ids)
from report import machine_line, markdown_table, threads_kept

# every registered problem that RL4CO also has (rl4co.envs): our id's name -> RL4CO's env class, its generator's
# parameters for our default variant, and the nodes its num_loc counts beyond our n (MTSP's depot, SHPP's start), so
# that both envs have the same node count at n = --num-nodes
RL4CO_ENVS = {
    "TSP": ("TSPEnv", {}, 0), "CVRP": ("CVRPEnv", {}, 0), "OP": ("OPEnv", {"prize_type": "dist"}, 0),
    "PCTSP": ("PCTSPEnv", {}, 0), "SPCTSP": ("SPCTSPEnv", {}, 0), "SDVRP": ("SDVRPEnv", {}, 0),
    "ATSP": ("ATSPEnv", {}, 0), "CVRPTW": ("CVRPTWEnv", {}, 0), "CVRPMVC": ("CVRPMVCEnv", {}, 0),
    "PDP": ("PDPEnv", {}, 0), "MDCPDP": ("MDCPDPEnv", {}, 0), "MTSP": ("MTSPEnv", {}, 1), "SHPP": ("SHPPEnv", {}, 1),
    "SVRP": ("SVRPEnv", {}, 0), "MTVRP": ("MTVRPEnv", {"variant_preset": "all"}, 0),
}
PROBLEMS = tuple(RL4CO_ENVS)
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
clock = CLOCKS["wall"]  # set from --clock in main()
TARGET_TORCH_VS_RL4CO = 2.0
TARGET_NUMPY_VS_SYNC = 20.0
TARGET_SINGLE_VS_RL4CO = 1.0  # our µs per step / RL4CO's at B = 1


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=PROBLEMS)
    p.add_argument("--num-nodes", type=int, default=50)
    p.add_argument("--big-batch", type=int, default=1024, help="B of the torch-mode and RL4CO rows")
    p.add_argument("--small-batch", type=int, default=64, help="B of the numpy-mode and SyncVectorEnv rows")
    p.add_argument("--rounds", type=int, default=5, help="interleaved timing windows per contender")
    p.add_argument("--window", type=float, default=0.3, help="seconds of timed step calls per window")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                   help="wall (time.perf_counter, default) or cpu (time.thread_time: this thread's CPU time, "
                        "robust on a shared machine; valid because one torch thread does all the work)")
    p.add_argument("--no-rl4co", action="store_true", help="skip RL4CO even when it is installed")
    p.add_argument("--only", nargs="+", metavar="TEXT", help="run only the contenders whose name contains one of these")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    return p.parse_args(argv)


# -- the action rule ------------------------------------------------------------------------------
def priority(n_total: int, has_depot: bool) -> np.ndarray:
    """Per-node weights whose ``argmax(mask * w)`` is the first allowed customer, else the depot."""
    w = np.full(n_total, 2, dtype=np.int16)
    if has_depot:
        w[0] = 1
    return w


def first_allowed_numpy(mask: np.ndarray, w: np.ndarray) -> np.ndarray:
    return (mask * w).argmax(axis=-1)


def first_allowed_torch(mask: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (mask.to(torch.int16) * w).argmax(dim=-1)


# -- contenders: each keeps its env and current observation; run(seconds) -> (steps, timed seconds) --
class OursVector:
    def __init__(self, env_id: str, batch: int, array_type: str, autoreset: str, w: np.ndarray, seed: int,
                 compile: bool = False):
        self.env = gym.make_vec(env_id, num_envs=batch, vectorization_mode="vector_entry_point",
                                array_type=array_type, autoreset_mode=autoreset, compile=compile)
        self.batch, self.torch_mode = batch, array_type == "torch"
        self.disabled = autoreset == gym.vector.AutoresetMode.DISABLED.value
        self.w = torch.as_tensor(w) if self.torch_mode else w
        self.obs, _ = self.env.reset(seed=seed)

    def run(self, seconds: float) -> tuple[int, float]:
        env, obs, w = self.env, self.obs, self.w
        pick = first_allowed_torch if self.torch_mode else first_allowed_numpy
        timed, calls = 0.0, 0
        while timed < seconds:
            actions = pick(obs["action_mask"], w)
            t0 = clock()
            obs, _, terminated, truncated, _ = env.step(actions)
            timed += clock() - t0
            calls += 1
            if self.disabled and bool((terminated | truncated).all()):
                obs, _ = env.reset()  # not timed: the batch-synchronous regime of RL4CO
        self.obs = obs
        return calls * self.batch, timed


def make_single(env_id: str) -> gym.Env:
    return gym.make(env_id)


class SyncVector:
    def __init__(self, env_id: str, batch: int, w: np.ndarray, seed: int):
        self.env = gym.vector.SyncVectorEnv([partial(make_single, env_id)] * batch)  # NEXT_STEP autoreset
        self.batch, self.w = batch, w
        self.obs, _ = self.env.reset(seed=seed)

    def run(self, seconds: float) -> tuple[int, float]:
        env, obs, w = self.env, self.obs, self.w
        timed, calls = 0.0, 0
        while timed < seconds:
            actions = first_allowed_numpy(obs["action_mask"], w)
            t0 = clock()
            obs, _, _, _, _ = env.step(actions)
            timed += clock() - t0
            calls += 1
        self.obs = obs
        return calls * self.batch, timed


class OursSingle:
    def __init__(self, env_id: str, w: np.ndarray, seed: int, compile: bool = False):
        self.env = gym.make(env_id, compile=compile)
        self.w = w
        self.obs, _ = self.env.reset(seed=seed)

    def run(self, seconds: float) -> tuple[int, float]:
        env, obs, w = self.env, self.obs, self.w
        timed, calls = 0.0, 0
        while timed < seconds:
            action = int(first_allowed_numpy(obs["action_mask"], w))
            t0 = clock()
            obs, _, terminated, truncated, _ = env.step(action)
            timed += clock() - t0
            calls += 1
            if terminated or truncated:
                obs, _ = env.reset()  # not timed
        self.obs = obs
        return calls, timed


def rl4co_env(problem: str, num_nodes: int, seed: int):
    """RL4CO's env for the problem, its generator giving our env's node count (:data:`RL4CO_ENVS`; Kool et al.'s
    settings for TSP, CVRP, OP and PCTSP)."""
    with threads_kept():
        import rl4co.envs

    name, params, counted = RL4CO_ENVS[problem]
    return getattr(rl4co.envs, name)(generator_params={**params, "num_loc": num_nodes + counted}, seed=seed)


class RL4CO:
    def __init__(self, problem: str, num_nodes: int, batch: int, w: np.ndarray, seed: int, resets_timed: bool = False):
        self.env = rl4co_env(problem, num_nodes, seed)
        self.batch, self.w, self.resets_timed = batch, torch.as_tensor(w), resets_timed
        self.td = self.env.reset(batch_size=[batch])

    def run(self, seconds: float) -> tuple[int, float]:
        env, td, w = self.env, self.td, self.w
        timed, calls = 0.0, 0
        while timed < seconds:
            td["action"] = first_allowed_torch(td["action_mask"], w)  # not timed
            t0 = clock()
            td = env.step(td)["next"]
            timed += clock() - t0
            calls += 1
            if bool(td["done"].all()):
                t0 = clock()
                td = env.reset(batch_size=[self.batch])  # RL4CO has no autoreset: timed only if asked
                if self.resets_timed:
                    timed += clock() - t0
        self.td = td
        return calls * self.batch, timed


def rl4co_available() -> tuple[bool, str]:
    try:
        with warnings.catch_warnings(), threads_kept():
            warnings.simplefilter("ignore")
            import rl4co
            import rl4co.envs  # noqa: F401
    except ImportError as e:
        return False, f"rl4co is not installed ({e}); RL4CO rows skipped (pip install 'routing-gym[bench]')"
    return True, f"rl4co {rl4co.__version__}"


# -- measurement and report ------------------------------------------------------------------------
def contenders(problem: str, args, use_rl4co: bool) -> dict:
    env_id = f"routing/{problem}-{args.num_nodes}"
    core = routing_gym.get_problem(problem)
    w = priority(core.num_nodes_total(args.num_nodes), core.has_depot)
    big, small, s = args.big_batch, args.small_batch, args.seed
    out = {
        f"ours torch B={big} (NEXT_STEP)": lambda: OursVector(env_id, big, "torch", "NextStep", w, s),
        f"ours torch B={big} (DISABLED)": lambda: OursVector(env_id, big, "torch", "Disabled", w, s),
        f"ours numpy B={small} (NEXT_STEP)": lambda: OursVector(env_id, small, "numpy", "NextStep", w, s),
        f"SyncVectorEnv B={small} (NEXT_STEP)": lambda: SyncVector(env_id, small, w, s),
        "ours single env B=1": lambda: OursSingle(env_id, w, s),
        f"ours torch B={big} (NEXT_STEP, compiled)": lambda: OursVector(env_id, big, "torch", "NextStep", w, s, True),
        f"ours torch B={big} (DISABLED, compiled)": lambda: OursVector(env_id, big, "torch", "Disabled", w, s, True),
        "ours single env B=1 (compiled)": lambda: OursSingle(env_id, w, s, True),
    }
    if use_rl4co:
        out[f"RL4CO B={big}"] = lambda: RL4CO(problem, args.num_nodes, big, w, s)
        out["RL4CO B=1"] = lambda: RL4CO(problem, args.num_nodes, 1, w, s)
        out[f"RL4CO B={big} (resets timed)"] = lambda: RL4CO(problem, args.num_nodes, big, w, s, resets_timed=True)
    return {name: make() for name, make in out.items() if not args.only or any(t in name for t in args.only)}


def measure(runners: dict, rounds: int, window: float) -> dict:
    """name -> list of steps/s, one per window; windows interleaved across the contenders."""
    for r in runners.values():
        for _ in range(3):  # warm-up; a compiled step compiles in the first two calls (fresh and stepped states)
            r.run(min(0.05, window))
    rates: dict = {name: [] for name in runners}
    for _ in range(rounds):
        gc.collect()  # once per round, so that no contender inherits another's garbage
        for name, r in runners.items():
            steps, timed = r.run(window)
            rates[name].append(steps / timed)
    return rates


def verdict(value: float, target: float, at_least: bool) -> str:
    ok = value >= target if at_least else value <= target
    return "met" if ok else "missed"


def main(argv=None) -> None:
    global clock
    args = parse_args(argv)
    clock = CLOCKS[args.clock]
    torch.set_num_threads(args.threads)
    use_rl4co, note = (False, "RL4CO rows skipped (--no-rl4co)") if args.no_rl4co else rl4co_available()
    machine = machine_line(torch.get_num_threads(), note, f"{args.clock} clock")
    big, small = args.big_batch, args.small_batch
    results: dict = {}
    for problem in args.problems:
        runners = contenders(problem, args, use_rl4co)
        rates = measure(runners, args.rounds, args.window)
        results[problem] = {name: float(np.median(r)) for name, r in rates.items()}
        results[problem]["_spread"] = {name: float((max(r) - min(r)) / np.median(r)) for name, r in rates.items()}
        for r in runners.values():
            if hasattr(r.env, "close"):
                r.env.close()
        del runners

    print(f"Vector env throughput, n = {args.num_nodes} (env's own step only; median of {args.rounds} windows "
          f"of {args.window:g} s)\n{machine}\n")
    rows = []
    for problem, res in results.items():
        for name, rate in res.items():
            if name.startswith("_"):
                continue
            batch = int(name.split("B=")[1].split()[0])
            rows.append([problem, name, f"{rate:,.0f}", f"{rate / batch:,.0f}", f"{batch / rate * 1e6:,.1f}",
                         f"{100 * res['_spread'][name]:.0f}%"])
    print(markdown_table(["problem", "contender", "steps/s", "steps/s per instance", "µs per step call",
                          "spread"], rows, left=2))

    print(f"\nTargets: torch B={big} / RL4CO B={big} >= {TARGET_TORCH_VS_RL4CO:g}x; numpy B={small} / "
          f"SyncVectorEnv B={small} (per instance) >= {TARGET_NUMPY_VS_SYNC:g}x; single-env µs/step / RL4CO B=1 "
          f"µs/step <= {TARGET_SINGLE_VS_RL4CO:g}\n")
    columns = [(f"torch {mode} / RL4CO (B={big})", f"ours torch B={big} ({mode})", f"RL4CO B={big}", "x")
               for mode in ("NEXT_STEP", "DISABLED", "NEXT_STEP, compiled", "DISABLED, compiled")]
    columns.append((f"numpy / Sync (B={small})", f"ours numpy B={small} (NEXT_STEP)", f"SyncVectorEnv B={small} (NEXT_STEP)",
                    "x"))
    columns += [(f"single{c} / RL4CO B=1 (µs/step)", f"ours single env B=1{c}", "RL4CO B=1", "us") for c in ("", " (compiled)")]
    columns.append((f"torch NEXT_STEP, compiled / RL4CO, its resets timed (B={big}; no target)",
                    f"ours torch B={big} (NEXT_STEP, compiled)", f"RL4CO B={big} (resets timed)", "ratio"))
    columns = [c for c in columns if any(c[1] in res and c[2] in res for res in results.values())]
    rows = []
    for problem, res in results.items():
        row = [problem]
        for _, ours, theirs, kind in columns:
            if ours not in res or theirs not in res:
                row.append("n/a")
            elif kind == "ratio":
                row.append(f"{res[ours] / res[theirs]:.2f}x")
            elif kind == "x":
                x = res[ours] / res[theirs]
                target = TARGET_NUMPY_VS_SYNC if theirs.startswith("Sync") else TARGET_TORCH_VS_RL4CO
                row.append(f"{x:.2f}x {verdict(x, target, True)}")
            else:
                ours_us, theirs_us = 1e6 / res[ours], 1e6 / res[theirs]
                x = ours_us / theirs_us
                row.append(f"{ours_us:.0f} / {theirs_us:.0f} µs = {x:.2f} {verdict(x, TARGET_SINGLE_VS_RL4CO, False)}")
        rows.append(row)
    if columns:
        print(markdown_table(["problem", *(c[0] for c in columns)], rows))
    if not use_rl4co:
        print(f"\nNote: {note}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "args": vars(args), "steps_per_second": results}, f, indent=2)


if __name__ == "__main__":
    main()
