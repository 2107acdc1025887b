"""What planning costs: forks/s, rollouts/s and the lookahead planner's decision time at the default size.

On ``whole-gpu`` / ``hetero-64`` (2,000 jobs) at ``--load`` (default 1.5), run ``sjf+greedy/topology`` to the
middle of the episode by simulated time, then measure:

- ``forks_per_s``: :meth:`Simulator.fork <envs.sim.fork.Forking.fork>` with the true future kept, beside
  ``deepcopies_per_s``, a plain ``copy.deepcopy`` of the simulator (what a fork avoids);
- ``resampled_forks_per_s``: drawing a resampled future (:class:`~envs.workload.futures.FutureModel`, the 8
  default training seeds) and forking with it, as the planner does;
- ``rollouts_per_s``: a fork rolled to the end of the episode under ``sjf+greedy/topology``, and the same to a
  4-hour horizon;
- ``decision_s``: one planning instant of ``lookahead`` (4 candidates × ``m`` futures, to the end and to 4 h);
- ``episode_s``: whole episodes of ``lookahead`` and ``hindsight`` (``--episodes`` of them), beside the base
  heuristic's.

Prints one JSON object; each figure is the median of ``--repeat`` measurements (wall clock, one process).

    python benchmarks/bench_planner.py [--load 1.5] [--repeat 5] [--episodes 1]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from collections.abc import Callable

import numpy as np

from baselines import make
from baselines.lookahead import rollout_cost
from envs.scenario import scenario
from envs.sim import Simulator, simulate
from envs.sim.loop import apply_action
from envs.workload.futures import FutureModel
from evaluation.runner import DEFAULT_TRAIN_SEEDS

BASE = "sjf+greedy/topology"
CANDIDATES = f"{BASE}|saf+greedy/pack|sjf+easy/topology|hold15m"


def median_s(run: Callable[[], object], repeat: int) -> float:
    """Median wall-clock time of ``run()`` over ``repeat`` calls [s]."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def mid_episode(load: float) -> tuple[Simulator, FutureModel]:
    """A run of the base heuristic stopped at the middle of its episode (by submit time), and the future model."""
    world = scenario("whole-gpu", "hetero-64", seed=2000, load=load)
    sim = Simulator(world.cluster, world.workload, world.runtime, world.dynamics)
    policy = make(BASE)
    policy.reset()
    middle_s = world.workload.jobs[len(world.workload.jobs) // 2].submit_time_s
    while sim.time_s < middle_s:
        apply_action(sim, policy.act(sim.view))
    futures = FutureModel([scenario("whole-gpu", "hetero-64", seed=s, load=load).workload for s in DEFAULT_TRAIN_SEEDS])
    return sim, futures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load", type=float, default=1.5)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=1)
    args = parser.parse_args()
    sim, futures = mid_episode(args.load)
    planner = make(f"lookahead:c={CANDIDATES}:m=4", futures=futures)
    rng = np.random.default_rng(0)
    fork_s = median_s(lambda: sim.fork(None), args.repeat * 4)
    deepcopy_s = median_s(lambda: copy.deepcopy(sim), args.repeat)
    resampled_s = median_s(lambda: sim.fork(planner.draw_future(sim.view, rng)), args.repeat)
    rollout_end_s = median_s(lambda: rollout_cost(sim.fork(None), make(BASE), float("inf")), args.repeat)
    rollout_4h_s = median_s(lambda: rollout_cost(sim.fork(None), make(BASE), 4 * 3600.0), args.repeat)
    decisions = {}
    for label, horizon in (("end", "inf"), ("4h", "4h")):
        planner = make(f"lookahead:c={CANDIDATES}:m=4:h={horizon}", futures=futures)
        decisions[label] = median_s(lambda p=planner: p.plan(sim.view), max(1, args.repeat // 2))
    world = scenario("whole-gpu", "hetero-64", seed=2000, load=args.load)
    episodes = {}
    for name in (BASE, f"lookahead:c={CANDIDATES}:m=4", f"hindsight:c={CANDIDATES}"):
        policy = make(name, futures=futures) if name.startswith("lookahead") else make(name)
        episodes[name] = median_s(lambda p=policy: simulate(world.cluster, world.workload, p, world.runtime),
                                  args.episodes)
    print(json.dumps({
        "load": args.load, "jobs": len(world.workload.jobs), "pending_at_fork": len(sim.view.pending),
        "running_at_fork": len(sim.view.running),
        "forks_per_s": round(1 / fork_s, 1), "deepcopies_per_s": round(1 / deepcopy_s, 1),
        "resampled_forks_per_s": round(1 / resampled_s, 1),
        "rollouts_per_s": {"to_end": round(1 / rollout_end_s, 2), "to_4h": round(1 / rollout_4h_s, 2)},
        "decision_s": {"to_end": round(decisions["end"], 2), "to_4h": round(decisions["4h"], 2)},
        "episode_s": {name: round(s, 2) for name, s in episodes.items()},
    }, indent=2))


if __name__ == "__main__":
    main()
