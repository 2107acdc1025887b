"""Where runs execute: local processes (default) or Ray tasks on an existing cluster. Results come back in the
order of the specs whatever the backend or the number of workers."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from envs.core import ConfigError
from evaluation.runner import RunSpec, run

Result = tuple[dict[str, Any], dict[str, Any], dict[str, float]]
BACKENDS = ("local", "ray")


def execute(specs: Sequence[RunSpec], workers: int = 1, backend: str = "local", ray_address: str | None = None,
            progress: bool = True) -> list[Result]:
    """Run every spec; (row, trace, timing) per spec, in spec order."""
    if backend not in BACKENDS:
        raise ConfigError(f"backend {backend!r}: unknown (known: {', '.join(BACKENDS)})")
    if workers < 1:
        raise ConfigError(f"workers: must be >= 1, got {workers}")
    if backend == "ray":
        return _ray(specs, workers, ray_address)
    bar = _progress(len(specs), progress)
    results: list[Result] = []
    if workers == 1:
        for spec in specs:
            results.append(run(spec))
            bar.update()
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for result in pool.map(run, specs):
                results.append(result)
                bar.update()
    bar.close()
    return results


def _ray(specs: Sequence[RunSpec], workers: int, address: str | None) -> list[Result]:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("the ray backend needs Ray: pip install 'gpusched[ray]'") from exc
    if not ray.is_initialized():
        if address:
            ray.init(address=address)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    remote_run = ray.remote(run)
    return ray.get([remote_run.remote(spec) for spec in specs])


class _NoBar:
    def update(self) -> None:
        """Nothing to show."""

    def close(self) -> None:
        """Nothing to close."""


def _progress(total: int, show: bool) -> Any:
    """A tqdm progress bar on stderr, or a silent stand-in."""
    if not show:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, unit="run", leave=False)
