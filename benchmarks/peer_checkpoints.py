"""Every saved model of peer-mode training runs on validation sequences and on the peer's test protocol.

    python benchmarks/peer_checkpoints.py runs/RUN [runs/RUN ...] [--validation 40] [--length 512] [--workers 2]
                                          [--decode sjf@0.3] [--from-step 100000]

For each run folder of ``train.py`` on ``gpusched/RLSched-v0`` it scores every checkpoint
(``checkpoints/model_N_steps.zip``) from ``--from-step`` steps on, ``best_model.zip`` and ``model.zip``: the mean
average bounded slowdown on ``--validation`` sequences of ``--length`` jobs drawn (seeded) outside the test windows,
and on the peer's 10 test sequences of 1024 jobs. It shows how far apart neighbouring models of one run land on the
test windows and whether validation ranks them as the test does (Spearman rank correlation per run). Prints a
Markdown table and the distribution of their test scores: mean, median, range and the share below ``--target``.
``--decode ORDER@RATIO`` decodes every model with that :class:`~agents.peer_policy.Shortlist` instead of its most
probable job.
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

from agents.model_file import checkpoints, run_config  # noqa: E402
from agents.peer_policy import PeerModelPolicy, Shortlist, evaluate_model_peer  # noqa: E402
from envs.peer.env import PeerEnvConfig, peer_trace_once, training_starts  # noqa: E402

VALIDATION_SEED = 7
"""Seed of the validation sequences' draw (fixed, so every model sees the same ones)."""


def models(run_dir: Path) -> list[tuple[Path, int | None]]:
    """The run's checkpoints in step order, then best_model.zip and model.zip; each with its step (None: not
    in the file name)."""
    ordered: list[tuple[Path, int | None]] = [(path, n) for n, path in sorted(checkpoints(run_dir).items())]
    return ordered + [(run_dir / name, None) for name in ("best_model.zip", "model.zip") if (run_dir / name).exists()]


def validation_starts(path: Path, count: int, length: int) -> list[int]:
    """``count`` first-job indices of ``length``-job sequences sharing no job with the test windows."""
    env = run_config(path).get("env") or {}
    config = PeerEnvConfig.from_dict({**env, "sequence_jobs": length, "sampling": "outside_test"})
    starts = training_starts(len(peer_trace_once(str(Path(config.trace).resolve())).jobs), config)
    return sorted(int(s) for s in np.random.default_rng(VALIDATION_SEED).choice(starts, count, replace=False))


def score(path: Path, starts: list[int], length: int, decode: Shortlist | None) -> dict[str, float]:
    """The model's mean avg bounded slowdown on the validation starts and on the peer's test protocol."""
    torch.set_num_threads(1)  # one process per core
    policy = PeerModelPolicy(path, decode=decode)
    trace = policy.env_values["trace"]
    validation = [policy.run_window(trace, s, length)[0].avg_bsld for s in starts]
    test = evaluate_model_peer(policy, trace).avg_bsld
    return {"validation": float(np.mean(validation)), "test": float(np.mean(test))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders of train.py on gpusched/RLSched-v0")
    parser.add_argument("--validation", type=int, default=40, help="validation sequences (default 40)")
    parser.add_argument("--length", type=int, default=512, help="jobs per validation sequence (default 512)")
    parser.add_argument("--workers", type=int, default=2, help="parallel processes (default 2)")
    parser.add_argument("--decode", default="", help="ORDER@RATIO: decode with a shortlist (default: most probable)")
    parser.add_argument("--from-step", type=int, default=100_000, help="first checkpoint scored (default 100k)")
    parser.add_argument("--target", type=float, default=58.64, help="score to count models below (default 58.64, "
                        "the published agent with the peer's backfill)")
    args = parser.parse_args(argv)
    decode = Shortlist.parse(args.decode) if args.decode else None
    jobs = []
    for run_dir in args.runs:
        starts = validation_starts(run_dir / "model.zip", args.validation, args.length)
        jobs += [(run_dir, path, step, starts) for path, step in models(run_dir)
                 if step is None or step >= args.from_step]
    with ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        scores = list(pool.map(score, [j[1] for j in jobs], [j[3] for j in jobs], [args.length] * len(jobs),
                               [decode] * len(jobs)))
    print("| run | model | steps | validation | test |\n|---|---|---:|---:|---:|")
    for (run_dir, path, step, _), s in zip(jobs, scores, strict=True):
        print(f"| {run_dir} | {path.name} | {step or ''} | {s['validation']:.2f} | {s['test']:.2f} |")
    print("\nSpearman rank correlation of validation and test, per run:")
    for run_dir in args.runs:
        mine = [s for (r, *_), s in zip(jobs, scores, strict=True) if r == run_dir]
        print(f"  {run_dir}: {spearman([s['validation'] for s in mine], [s['test'] for s in mine]):+.2f}")
    test = np.array([s["test"] for s in scores])
    print(f"\ntest, {test.size} models (from {args.from_step:,} steps, best and last; decoding "
          f"{args.decode or 'most probable'}): mean {test.mean():.2f}, median {np.median(test):.2f}, "
          f"range {test.min():.2f}-{test.max():.2f}, {(test < args.target).mean():.0%} below {args.target:g}")


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation of two equally long samples (ties ranked by position)."""
    ranks = [np.argsort(np.argsort(x)) for x in (a, b)]
    return float(np.corrcoef(*ranks)[0, 1])


if __name__ == "__main__":
    main()
