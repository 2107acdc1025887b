"""What a run's result depends on beyond its arguments: the content of every file it names and the code version.

A run folder keeps each finished run under a key (``evaluate.run_key``). Arguments alone do not identify a result:
a trace, cluster file, scenario, policy config, workload config or model file edited at the same path, or a newer
version of the simulator, gives other rows. :func:`run_inputs` adds to the key a SHA-256 digest of each file the run
names and of the code (:func:`code_version`), so that a changed input runs again instead of reusing a stale row.

Files named by a run (the same rules the loaders use): the workload (a ``FORMAT:PATH`` trace, or a YAML path), the
cluster (a YAML path, or ``FORMAT:PATH`` of a node file), the dynamics scenario and the policy config (YAML paths),
and a model policy's file (``PATH.zip``, ``rls:PATH.zip[+ORDER@RATIO]``) with its run folder's ``config.yaml``.
Names without a path (presets, scenario names, ``swf:N``) are part of the code version, which covers the project's
packages and its ``configs`` (``*.py`` and ``*.yaml``). A cluster that a trace's loader finds beside the trace on its
own (no cluster given) is not digested.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from agents.model_file import run_config_path
from agents.peer_policy import is_model_name, parse_model_name
from baselines.registry import RLS_PREFIX
from envs.core.dynamics import NO_DYNAMICS
from envs.core.errors import ConfigError
from envs.core.files import names_a_file
from envs.scenario import CLUSTER_FILE_FORMATS, trace_spec

CODE_PACKAGES = ("envs", "baselines", "agents", "evaluation", "configs")
"""The packages whose ``*.py`` and ``*.yaml`` files make the code version."""
CHUNK_BYTES = 1 << 20
"""Bytes read at a time while digesting a file."""


def file_digest(path: str | Path) -> str:
    """The SHA-256 (hex) of a file's content, computed once per process for each (path, size, modification time);
    a :class:`ConfigError` naming the file when it cannot be read."""
    resolved = Path(path).resolve()
    try:
        stat = resolved.stat()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not resolved.is_file():
        raise ConfigError(f"{path}: not a regular file")
    return _digest(str(resolved), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=256)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    del size, mtime_ns  # part of the cache key only: a file rewritten in place is digested again
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(CHUNK_BYTES):
                digest.update(chunk)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return digest.hexdigest()


@lru_cache(maxsize=1)
def code_version() -> str:
    """A SHA-256 (hex) over the names and contents of the project's source and config files
    (:data:`CODE_PACKAGES`), in a fixed order: any change to the code or an embedded preset changes it."""
    digest = hashlib.sha256()
    for package in CODE_PACKAGES:
        root = Path(str(resources.files(package)))
        files = sorted(p for p in root.rglob("*") if p.suffix in (".py", ".yaml") and p.is_file()
                       and "__pycache__" not in p.parts)
        for path in files:
            digest.update(f"{package}/{path.relative_to(root).as_posix()}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _yaml_path(text: str | None) -> str | None:
    """The file a workload, cluster or scenario name refers to (:func:`envs.core.files.names_a_file`, the loaders'
    rule), else None (a preset or a built-in name)."""
    return text if text and names_a_file(text) else None


def _model_files(policy: str) -> list[str]:
    """A model policy's file and its run folder's ``config.yaml`` (when there is one)."""
    name = policy.strip()
    name = name[len(RLS_PREFIX):] if name.lower().startswith(RLS_PREFIX) else name
    if not is_model_name(name):
        return []
    path = Path(parse_model_name(name)[0])
    config = run_config_path(path)
    return [str(path), *([str(config)] if config.is_file() else [])]


def named_files(workload: str, cluster: str | None, dynamics: str, policy_config: str | None,
                policy: str) -> list[str]:
    """The files a run with these names reads (module docstring), in a fixed order."""
    trace = trace_spec(workload)
    files = [trace.path] if trace is not None else [f for f in [_yaml_path(workload)] if f]
    if cluster:
        fmt, colon, path = cluster.partition(":")
        if colon and fmt in CLUSTER_FILE_FORMATS:
            files.append(path)
        elif not cluster.startswith("swf:") and _yaml_path(cluster):
            files.append(cluster)
    if dynamics != NO_DYNAMICS and _yaml_path(dynamics):
        files.append(dynamics)
    if policy_config:
        files.append(policy_config)
    return [*files, *_model_files(policy)]


def run_inputs(spec: Any) -> dict[str, Any]:
    """The part of a run's key that its arguments do not give: ``{"files": {path: digest}, "code": version}`` for
    an :class:`~evaluation.runner.RunSpec`."""
    files = named_files(spec.workload, spec.cluster, spec.dynamics, spec.policy_config, spec.policy)
    return {"files": {path: file_digest(path) for path in files}, "code": code_version()}


def git_commit(root: Path) -> str | None:
    """The git commit checked out at ``root``, with ``-dirty`` when tracked files differ from it; None outside a git
    checkout or without git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode or dirty.returncode:
        return None
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def run_provenance(specs: Sequence[Any], command: str, keys: Sequence[str]) -> dict[str, Any]:
    """What an evaluation was, for run.json and the report: the ``command`` line, the code version
    (:func:`code_version`) and git commit of the project, every input file with its SHA-256, the seeds, and the
    ``keys`` of its runs in runs.jsonl (``evaluate.run_key``, as JSON text), in spec order."""
    inputs: dict[str, str] = {}
    for spec in specs:
        inputs.update(run_inputs(spec)["files"])
    return {"command": command, "code_version": code_version(),
            "git_commit": git_commit(Path(str(resources.files("evaluation"))).parent),
            "inputs": inputs, "seeds": sorted({spec.seed for spec in specs}), "run_keys": list(keys)}
