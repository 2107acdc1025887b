"""Pieces of Kubernetes objects that the pod and Kueue loaders (and the extender) read alike: the objects of a
``kubectl get -o json`` file, RFC 3339 times, the GPUs a pod spec asks for, and the node pool it names."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from envs.core.errors import TraceFormatError
from envs.workload.operators.kubectl_nodes import (
    GPU_RESOURCE,
    MIG_RESOURCE_PREFIX,
    NODE_POOL_LABELS,
    json_object,
    line_of,
    read_json,
    whole_count,
)
from envs.workload.reader import show

_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})")
SEVERAL_MIG = "several"
"""The MIG mark of a pod asking for several MIG instances, or for MIG and whole GPUs (not modelled)."""


def kubectl_items(path: str | Path, kind: str, expected: str) -> Iterator[tuple[dict[str, Any], str, int]]:
    """(object, its ``metadata.name``, its line) for each object of a ``kubectl get ... -o json`` file: the items of
    a List, or the file itself when it is one object of ``kind``. Not JSON, no items list (``expected`` says what
    was expected instead) and an item without a name are :class:`TraceFormatError`."""
    where = str(path)
    text, starts, data = read_json(path)
    items = data.get("items") if isinstance(data, dict) else None
    if isinstance(data, dict) and data.get("kind") == kind:
        items = [data]
    if not isinstance(items, list):
        raise TraceFormatError(where, 1, f"expected {expected}")
    search_from = 0  # where the next object's name is looked for in the text
    for number, item in enumerate(items):
        metadata = item.get("metadata") if isinstance(item, dict) else None
        name = metadata.get("name") if isinstance(metadata, dict) else None
        if not isinstance(name, str) or not name:
            raise TraceFormatError(where, 1, f"items[{number}] has no metadata.name")
        line, search_from = line_of(text, name, search_from, starts)
        yield item, name, line


def rfc3339_s(value: Any, what: str, where: str, line: int) -> float:
    """An RFC 3339 time (``2026-11-30T08:00:00Z``) as seconds since 1970-01-01 UTC."""
    if not isinstance(value, str) or _TIME.fullmatch(value) is None:
        raise TraceFormatError(where, line, f"{what} {show(str(value))} is not an RFC 3339 time like "
                                            "2026-11-30T08:00:00Z")
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise TraceFormatError(where, line, f"{what} {show(value)} is not a valid date") from None


def pod_gpus(spec: dict[str, Any], what: str, where: str, line: int) -> tuple[int, str]:
    """(whole GPUs, MIG resource) a pod spec asks for: over ``spec.containers``, ``resources.limits`` (else
    ``requests``) of ``nvidia.com/gpu`` summed; one ``nvidia.com/mig-PROFILE: 1`` instance gives that resource name,
    several instances or MIG beside whole GPUs give :data:`SEVERAL_MIG`; no MIG gives ``""``."""
    gpus, mig = 0, ""
    containers = spec.get("containers") or []
    if not isinstance(containers, list):
        raise TraceFormatError(where, line, f"{what} spec.containers is not a list")
    for container in containers:
        resources = json_object(container, "resources", f"{what} container resources", where, line)
        limits = json_object(resources, "limits", f"{what} resources.limits", where, line)
        requests = json_object(resources, "requests", f"{what} resources.requests", where, line)
        for key, value in {**requests, **limits}.items():
            if key == GPU_RESOURCE:
                gpus += whole_count(value, f"{what} {key}", where, line)
            elif key.startswith(MIG_RESOURCE_PREFIX):
                instances = whole_count(value, f"{what} {key}", where, line)
                if instances:
                    mig = SEVERAL_MIG if mig or instances > 1 else key
    return gpus, SEVERAL_MIG if mig and gpus else mig


def node_pool(spec: dict[str, Any], what: str, where: str, line: int) -> str:
    """The node pool a pod spec's ``nodeSelector`` names with one of
    :data:`~envs.workload.operators.kubectl_nodes.NODE_POOL_LABELS` (the first present), else ``""``: the partition
    of its job (the ``kubectl:`` cluster makes a partition of each pool)."""
    selector = json_object(spec, "nodeSelector", f"{what} spec.nodeSelector", where, line)
    pool = next((selector[label] for label in NODE_POOL_LABELS if label in selector), "")
    if not isinstance(pool, str):
        raise TraceFormatError(where, line, f"{what} node pool selector {show(str(pool))} is not a string")
    return pool
