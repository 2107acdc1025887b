"""Peer-mode models decoded by sampling, as the peer's own evaluation decodes, beside their most probable job.

    python benchmarks/peer_sampling.py runs/RUN/model.zip [MODEL ...] [--draws 3] [--workers 2]

RLScheduler's evaluation script (``compare-pick-jobs.py`` in DIR-LAB/deep-batch-scheduler) samples each action from
the policy. This prints, for each saved model of ``train.py`` on ``gpusched/RLSched-v0``, the mean average bounded
slowdown on the peer's 10 test sequences of 1024 jobs when it commits its most probable job and when it samples
(``--draws`` seeded draws: seed d samples with ``numpy.random.default_rng(d)``), so the two decodings can be compared.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.peer_policy import PeerModelPolicy, evaluate_model_peer  # noqa: E402
from envs.peer.env import PeerSchedEnv  # noqa: E402


class SampledPolicy(PeerModelPolicy):
    """A peer-mode model that samples each action from its masked probabilities (seeded)."""

    def __init__(self, model_path: Path, seed: int) -> None:
        super().__init__(model_path)
        self.rng = np.random.default_rng(seed)

    def act(self, env: PeerSchedEnv, obs: dict[str, np.ndarray]) -> int:
        probs = self.probabilities(env, obs).astype(np.float64)
        return int(self.rng.choice(probs.size, p=probs / probs.sum()))


def score(path: Path, seed: int | None) -> float:
    """The model's mean avg bounded slowdown on the peer's test protocol: most probable job (``seed`` None) or
    sampled with ``seed``."""
    torch.set_num_threads(1)  # one process per core
    policy = PeerModelPolicy(path) if seed is None else SampledPolicy(path, seed)
    return float(np.mean(evaluate_model_peer(policy, policy.env_values["trace"]).avg_bsld))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="+", type=Path, help="model.zip files of train.py on gpusched/RLSched-v0")
    parser.add_argument("--draws", type=int, default=3, help="seeded sampling draws per model (default 3)")
    parser.add_argument("--workers", type=int, default=2, help="parallel processes (default 2)")
    args = parser.parse_args(argv)
    if args.draws < 1:
        parser.error(f"--draws: at least 1 sampling draw, got {args.draws}")
    seeds: list[int | None] = [None, *range(args.draws)]
    jobs = [(path, seed) for path in args.models for seed in seeds]
    with ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        scores = list(pool.map(score, *zip(*jobs, strict=True)))
    print("| model | most probable job | sampled (each draw) | sampled mean |\n|---|---:|---|---:|")
    for i, path in enumerate(args.models):
        mine = scores[i * len(seeds) : (i + 1) * len(seeds)]
        print(f"| {path} | {mine[0]:.2f} | {', '.join(f'{s:.2f}' for s in mine[1:])} | {np.mean(mine[1:]):.2f} |")


if __name__ == "__main__":
    main()
