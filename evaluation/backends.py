"""Where runs execute: local processes (default) or Ray tasks on an existing cluster. Each result is handed to an
``on_result`` callback as soon as its run finishes (so a caller can keep it before the others end); the returned
list is in the order of the specs whatever the backend or the number of workers."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any

from envs.core.errors import ConfigError
from evaluation.runner import RunSpec, run

Result = tuple[dict[str, Any], dict[str, Any], dict[str, float]]
OnResult = Callable[[int, Result], None]
BACKENDS = ("local", "ray")


def execute(specs: Sequence[RunSpec], workers: int = 1, backend: str = "local", ray_address: str | None = None,
            progress: bool = True, on_result: OnResult | None = None) -> list[Result]:
    """Run every spec; (row, trace, timing) per spec, in spec order. ``on_result(i, result)`` is called as run ``i``
    finishes. At most ``len(specs)`` workers are started."""
    if backend not in BACKENDS:
        raise ConfigError(f"backend {backend!r}: unknown (known: {', '.join(BACKENDS)})")
    if workers < 1:
        raise ConfigError(f"workers: must be >= 1, got {workers}")
    workers = max(1, min(workers, len(specs)))
    if backend == "ray":
        _connect_ray(workers, ray_address)
    results: dict[int, Result] = {}
    bar = _progress(len(specs), progress)

    def finished(i: int, result: Result) -> None:
        results[i] = result
        if on_result is not None:
            on_result(i, result)
        bar.update()

    if backend == "ray":
        _ray(specs, finished)
    elif workers == 1:
        for i, spec in enumerate(specs):
            finished(i, run(spec))
    else:
        with ProcessPoolExecutor(max_workers=workers, initializer=_worker_start) as pool:
            futures = {pool.submit(run, spec): i for i, spec in enumerate(specs)}
            while futures:
                done, _ = wait(futures, return_when=FIRST_COMPLETED)
                for future in done:
                    finished(futures.pop(future), future.result())
    bar.close()
    return [results[i] for i in range(len(specs))]


PARENT_POLL_S = 0.5
"""How often a worker checks that the process that started it is still alive [s]."""


def _worker_start() -> None:
    """A forked worker runs one simulation: torch (when the parent loaded it, for a model) on one thread. Its
    thread pool does not survive the fork, and a forked child that uses it hangs (a model row never finished).
    And it exits when its parent does, even a killed one (no orphan keeps computing)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True, name="exit-with-parent").start()


def _exit_with_parent(parent: int) -> None:
    """End this process as soon as its parent ``parent`` is gone (it is then adopted: its parent id changes)."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


def _connect_ray(workers: int, address: str | None) -> None:
    """Join the Ray cluster at ``address`` (or start a local one of ``workers`` CPUs), or raise naming it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("the ray backend needs Ray: pip install 'gpusched[ray]'") from exc
    if address:
        _check_reachable(address)
    if ray.is_initialized():
        return
    try:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = f"--ray-address {address}" if address else "a local Ray cluster"
        raise ConfigError(f"{where}: cannot connect ({' '.join(str(exc).split())[:200]})") from None


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Raise unless something listens at ``address`` (``HOST:PORT`` or ``ray://HOST:PORT``): Ray itself would wait
    minutes before giving up. Other forms (``auto``) are left to Ray."""
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    if not colon or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ConfigError(f"--ray-address {address}: cannot connect ({exc.strerror or exc})") from None


def _ray(specs: Sequence[RunSpec], finished: OnResult) -> None:
    import ray

    remote_run = ray.remote(run)
    pending = {remote_run.remote(spec): i for i, spec in enumerate(specs)}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            finished(pending.pop(ref), ray.get(ref))


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
