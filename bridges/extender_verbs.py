"""What the kube-scheduler extender (:mod:`bridges.extender`) answers: kube-scheduler's ``filter`` and ``prioritize``
requests read and answered in its wire format, from a gpusched placement rule, within a time budget.

**Wire format** (kubernetes/kubernetes ``staging/src/k8s.io/kube-scheduler/extender/v1/types.go``; the client is
``HTTPExtender`` in ``pkg/scheduler/extender.go``): kube-scheduler POSTs JSON to ``urlPrefix + "/" + verb``. Those
types carry no JSON tags, so Go's ``encoding/json`` names fields by their Go names and writes nil ones as ``null``:
``ExtenderArgs`` is ``{"Pod": v1.Pod, "Nodes": v1.NodeList | null, "NodeNames": [string] | null}`` (``NodeNames``
when ``nodeCacheCapable``, else ``Nodes``). Go matches JSON keys case-insensitively, and so does this reader
(:func:`go_field`), so the lowercase tags of the older ``pkg/scheduler/api/v1`` types (``pod``, ``nodes``,
``nodenames``) are read too; the v1.Pod and v1.Node inside keep the API's own names. The answers are written as Go
writes those types:

- ``filter`` → ``ExtenderFilterResult`` ``{"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes",
  "Error"}``: the candidates on which the rule can place the pod's GPUs now on that one node (a pod is on one node),
  in the request's order, as ``NodeNames`` or, for a ``Nodes`` request, as a NodeList of the same Node objects; a
  node where the pod's GPUs are busy is in ``FailedNodes`` (preemption may help), one that can never take them (an
  unknown node, one without enough devices) in ``FailedAndUnresolvableNodes``, each with a one-line reason. A pod
  asking for no ``nvidia.com/gpu`` passes every node unchanged (the unknown ones too: there is nothing to judge).
- ``prioritize`` → ``HostPriorityList`` ``[{"Host", "Score"}]``, one per candidate, scores 0..10
  (``MaxExtenderPriority``): the nodes that pass the filter are ranked by asking the rule where it would place the
  pod, taking that node out and asking again; its first choice scores 10, its last 1, evenly between rounded down
  (:func:`priority`; a single node scores 10), and a node that does not pass scores 0 (every node, for a pod asking
  for no GPU). kube-scheduler multiplies a score by the extender's ``weight`` and by 10
  (``MaxNodeScore / MaxExtenderPriority``) and adds it to its score plugins'.
- ``preempt`` is not served: with no ``preemptVerb``, kube-scheduler's DefaultPreemption leaves the extender out.

**Time budget** (``budget_s``; ``--budget-ms``, default :data:`DEFAULT_BUDGET_MS`): an answer not ready within it is,
for ``filter``, ``{"Error": "gpusched extender: no answer within the ... ms budget"}`` (kube-scheduler then fails the
pod's scheduling attempt, or skips the extender when it is ``ignorable``) and, for ``prioritize``, an empty list
(kube-scheduler ignores a failed prioritize: the other scores decide). A ``--nodes`` or ``--pods`` file that cannot be
read is answered the same way, with its error. The work left behind stops at its next check of the budget (between
two calls of the rule). A request that is not ``ExtenderArgs`` is a :class:`BadRequest` (HTTP 400).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from baselines.kubernetes import KUBE_PREFIX, KubeScheduler, kube_policy
from bridges.kube_view import (
    ClusterFileError,
    GpuNodes,
    WatchedFile,
    gpu_nodes,
    read_gpu_nodes,
    read_held_gpus,
    state_of,
)
from envs.core.errors import ConfigError, GpuschedError, TraceFormatError
from envs.core.job import Job
from envs.placement import get_placement_rule
from envs.sim.resources import ResourceState
from envs.sim.view import PlacementRule
from envs.workload.operators.kube_objects import pod_gpus
from envs.workload.operators.kubectl_nodes import GPU_RESOURCE

MAX_EXTENDER_PRIORITY = 10
"""The highest score of a prioritize answer (``MaxExtenderPriority`` of the upstream types)."""

VERBS = ("filter", "prioritize")
"""The verbs served: the last segment of the request path."""

DEFAULT_BUDGET_MS = 1000
"""Time to answer one request [ms]: a fifth of kube-scheduler's default ``httpTimeout`` (5 s), half the example
config's (2 s), and far more than the rules need on thousands of nodes."""

WORKERS = 4
"""Requests computed at once; more wait their turn (within their budget)."""

log = logging.getLogger(__name__)


class BadRequest(GpuschedError):
    """A request that is not the ``ExtenderArgs`` it should be; the message says what is wrong."""


class OutOfTime(GpuschedError):
    """A request's time budget ran out before its answer was ready."""


@dataclass(frozen=True)
class ExtenderArgs:
    """What a filter or prioritize request asks: the pod's GPUs and the candidate nodes."""

    pod_gpus: int  # nvidia.com/gpu the pod asks for (whole devices)
    names: list[str]  # the candidate nodes, in the request's order
    nodes: list[dict[str, Any]] | None  # their Node objects (a Nodes request), None for a NodeNames request


def go_field(data: dict[str, Any], name: str) -> Any:
    """``data[name]`` matched as Go's ``encoding/json`` matches keys: the exact key, else one equal but for case."""
    if name in data:
        return data[name]
    return next((value for key, value in data.items() if key.lower() == name.lower()), None)


def parse_args(body: bytes) -> ExtenderArgs:
    """The :class:`ExtenderArgs` of a request body; :class:`BadRequest` says what is wrong with one."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from None
    except RecursionError:
        raise BadRequest("the body is JSON nested too deeply to be ExtenderArgs") from None
    if not isinstance(data, dict):
        raise BadRequest("the body is not an ExtenderArgs object")
    pod = go_field(data, "Pod")
    if not isinstance(pod, dict):
        raise BadRequest("Pod is missing" if pod is None else "Pod is not an object")
    metadata = pod.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    what = f"Pod {name!r}" if isinstance(name, str) else "Pod"
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        raise BadRequest(f"{what} has no spec object")
    try:
        gpus, _ = pod_gpus(spec, what, "request", 1)
    except TraceFormatError as exc:
        raise BadRequest(exc.reason) from None
    names = go_field(data, "NodeNames")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise BadRequest("NodeNames is not a list of node names")
        return ExtenderArgs(gpus, names, None)
    node_list = go_field(data, "Nodes")
    if node_list is None:
        raise BadRequest("neither NodeNames nor Nodes: no candidate node")
    items = node_list.get("items") if isinstance(node_list, dict) else None
    items = [] if isinstance(node_list, dict) and items is None else items  # Go writes an empty list as null
    if not isinstance(items, list) or not all(isinstance(n, dict) and isinstance(n.get("metadata"), dict)
                                              and isinstance(n["metadata"].get("name"), str) for n in items):
        raise BadRequest("Nodes is not a NodeList: an object whose items are Nodes with a metadata.name")
    return ExtenderArgs(gpus, [n["metadata"]["name"] for n in items], items)


def priority(rank: int, ranked: int) -> int:
    """The prioritize score of the rule's ``rank``-th choice (0: its first) among ``ranked`` nodes: 10 for the
    first, 1 for the last, evenly between rounded down; 10 when there is one."""
    if ranked == 1:
        return MAX_EXTENDER_PRIORITY
    return 1 + (MAX_EXTENDER_PRIORITY - 1) * (ranked - 1 - rank) // (ranked - 1)


def placement_rule(name: str) -> PlacementRule:
    """The rule called ``name``: a placement rule of :data:`~envs.placement.PLACEMENT_RULES`, or ``k8s:PROFILE``
    (the scored placement of a :mod:`baselines.kubernetes` profile); else :class:`ConfigError`."""
    if not name.strip().lower().startswith(KUBE_PREFIX):
        return get_placement_rule(name)
    policy = kube_policy(name)
    if not isinstance(policy, KubeScheduler):
        raise ConfigError(f"rule {name!r}: preemption is kube-scheduler's own (DefaultPreemption): name the profile "
                          "alone")
    return policy.rule


def pod_job(gpus: int) -> Job:
    """The job the rules place for a pod asking for ``gpus`` devices."""
    return Job(job_id=0, submit_time_s=0.0, runtime_s=1.0, runtime_estimate_s=1.0, n_gpus=gpus)


def _check(deadline: float) -> None:
    if time.monotonic() > deadline:
        raise OutOfTime("the time budget ran out")


class Extender:
    """The verbs over a cluster: the nodes of ``nodes_path`` (a ``NodeNames`` request) or of the request (a
    ``Nodes`` request), the devices the pods of ``pods_path`` hold (None: nothing is held), and placement ``rule``
    (called ``rule_name`` in reasons); each answer within ``budget_s`` [s]."""

    def __init__(self, nodes_path: str | Path, pods_path: str | Path | None, rule: PlacementRule, rule_name: str,
                 budget_s: float = DEFAULT_BUDGET_MS / 1000, workers: int = WORKERS) -> None:
        self.nodes = WatchedFile(nodes_path, read_gpu_nodes)
        self.pods = WatchedFile(pods_path, read_held_gpus) if pods_path is not None else None
        self.rule, self.rule_name, self.budget_s = rule, rule_name, budget_s
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="extender")
        self._verbs: dict[str, Callable[[ExtenderArgs, float], Any]] = {"filter": self.filter,
                                                                        "prioritize": self.prioritize}

    def close(self) -> None:
        """Stop the workers (a computation under way ends at its next budget check)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def answer(self, verb: str, body: bytes) -> tuple[int, Any]:
        """(HTTP status, JSON answer) of a request to ``verb`` (one of :data:`VERBS`) with ``body``, within the
        budget (module docstring)."""
        deadline = time.monotonic() + self.budget_s
        try:
            args = parse_args(body)
        except BadRequest as exc:
            return 400, {"Error": str(exc)}
        future = self._pool.submit(self._verbs[verb], args, deadline)
        try:
            return 200, future.result(timeout=max(deadline - time.monotonic(), 0.0))
        except BadRequest as exc:
            return 400, {"Error": str(exc)}
        except (FutureTimeout, OutOfTime):
            future.cancel()  # when it waits for a worker
            reason = f"no answer within the {self.budget_s * 1000:.0f} ms budget"
        except ClusterFileError as exc:
            reason = str(exc)
        except Exception as exc:  # a fault of the rule or of this code: one answer fails, the server keeps serving
            log.exception("%s failed", verb)
            return 500, {"Error": f"gpusched extender: {type(exc).__name__}: {' '.join(str(exc).split())}"}
        log.warning("%s: %s", verb, reason)
        if verb == "filter":
            return 200, {**_filter_result(None, [], {}, {}), "Error": f"gpusched extender: {reason}"}
        return 200, []

    def health(self) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON) of a health check: 200 with the rule and the GPU nodes when both files read, else 503
        with the error."""
        try:
            nodes = self.nodes.current()
            held = self.pods.current() if self.pods is not None else {}
        except ClusterFileError as exc:
            return 503, {"Error": str(exc)}
        return 200, {"rule": self.rule_name, "gpu_nodes": len(nodes.index),
                     "held_gpus": sum(min(held.get(name, 0), nodes.devices(name)) for name in nodes.index)}

    def filter(self, args: ExtenderArgs, deadline: float) -> dict[str, Any]:
        """The ``ExtenderFilterResult`` of ``args`` (module docstring)."""
        if not args.pod_gpus:
            return _filter_result(args.nodes, args.names, {}, {})
        nodes, state = self._cluster(args, deadline)
        hosting, failed, unresolvable = self._judge(nodes, state, args, deadline)
        passed = [name for name in args.names if name in hosting]
        if args.nodes is not None:
            return _filter_result([node for node in args.nodes if node["metadata"]["name"] in hosting], passed,
                                  failed, unresolvable)
        return _filter_result(None, passed, failed, unresolvable)

    def prioritize(self, args: ExtenderArgs, deadline: float) -> list[dict[str, Any]]:
        """The ``HostPriorityList`` of ``args`` (module docstring)."""
        scores = dict.fromkeys(args.names, 0)
        if args.pod_gpus:
            nodes, state = self._cluster(args, deadline)
            hosting, _, _ = self._judge(nodes, state, args, deadline)
            ranked = self._ranking(nodes, state, hosting, args.pod_gpus, deadline)
            for rank, name in enumerate(ranked):
                scores[name] = priority(rank, len(ranked))
        return [{"Host": name, "Score": score} for name, score in scores.items()]

    def _cluster(self, args: ExtenderArgs, deadline: float) -> tuple[GpuNodes, ResourceState | None]:
        """The nodes of a request (the ``--nodes`` file's for a ``NodeNames`` request) and their free devices (None
        when no node has any)."""
        _check(deadline)  # a request that waited for a worker past its budget reads nothing
        if args.nodes is None:
            nodes = self.nodes.current()
        else:
            try:
                nodes = gpu_nodes({"items": args.nodes}, "request")
            except TraceFormatError as exc:
                raise BadRequest(f"Nodes: {exc.reason}") from None
        held = self.pods.current() if self.pods is not None else {}
        return nodes, nodes.free_state(held) if nodes.view is not None else None

    def _judge(self, nodes: GpuNodes, state: ResourceState | None, args: ExtenderArgs,
               deadline: float) -> tuple[dict[str, int], dict[str, str], dict[str, str]]:
        """(node -> its index, for the candidates the rule can place the pod on alone; busy node -> reason; node
        that can never take the pod -> reason)."""
        n, job = args.pod_gpus, pod_job(args.pod_gpus)
        hosting: dict[str, int] = {}
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        for name in args.names:
            _check(deadline)
            devices = nodes.devices(name)
            if name not in nodes.listed:
                unresolvable[name] = "unknown node"
            elif devices < n:
                unresolvable[name] = f"{devices} {GPU_RESOURCE} allocatable, the pod asks for {n}"
            else:
                assert state is not None, "a node with devices has a state"
                i = nodes.index[name]
                if self.rule(state.on_node(i), job) is None:
                    failed[name] = (f"{self.rule_name}: no room for {n} {GPU_RESOURCE} "
                                    f"({int(state.node_free_gpus[i])} of {devices} free)")
                else:
                    hosting[name] = i
        return hosting, failed, unresolvable

    def _ranking(self, nodes: GpuNodes, state: ResourceState | None, hosting: Mapping[str, int], gpus: int,
                 deadline: float) -> list[str]:
        """The ``hosting`` nodes in the rule's order of preference: where it places the pod among them, then among
        the others, ...; the nodes of a placement over several nodes by GPUs taken (ties: index)."""
        if not hosting:
            return []
        assert nodes.view is not None and state is not None, "hosting nodes have devices"
        c, job = nodes.view.cluster, pod_job(gpus)
        keep = np.zeros(c.n_nodes, dtype=bool)
        keep[list(hosting.values())] = True
        free = np.where(keep[c.gpu_node], state.gpu_free_milli, 0)
        ranked: list[str] = []
        for _ in hosting:  # each placement takes at least one node out
            _check(deadline)
            placed = self.rule(state_of(nodes.view, free), job)
            if placed is None:
                break
            taken = np.bincount(c.gpu_node[placed], minlength=c.n_nodes)
            order = np.lexsort((np.arange(c.n_nodes), -taken))[: int(np.count_nonzero(taken))]
            ranked += [c.nodes[i].name for i in order]
            free = np.where(taken[c.gpu_node] > 0, 0, free)
        return ranked


def _filter_result(nodes: list[dict[str, Any]] | None, names: list[str], failed: dict[str, str],
                   unresolvable: dict[str, str]) -> dict[str, Any]:
    """An ``ExtenderFilterResult`` as Go writes it: the passing nodes as a NodeList for a ``Nodes`` request
    (``nodes``), else as names."""
    return {"Nodes": {"metadata": {}, "items": nodes} if nodes is not None else None,
            "NodeNames": names if nodes is None else None,
            "FailedNodes": failed, "FailedAndUnresolvableNodes": unresolvable, "Error": ""}
