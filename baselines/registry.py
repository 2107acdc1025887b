"""Policy names: ``ORDER[+BACKFILL][/PLACEMENT][+preempt]`` for our own schedulers, ``rls:...`` for the
peer-compatible ones.

Examples: ``fcfs`` (= ``fcfs+none/firstfit``), ``sjf+easy``, ``fairshare+conservative/topology``,
``priority+easy/pack+preempt`` (the same scheduler, plus Kubernetes' preemption when its top job cannot be placed),
``tiresias`` or ``tiresias/pack`` (Tiresias' 2D-LAS, a whole scheduler of its own: ``NAME[/PLACEMENT]``),
``rls:wfp3-peer+rlsbackfill``, ``k8s:mostallocated`` or ``k8s:ratio+preempt`` (kube-scheduler's filter-and-score,
:mod:`baselines.kubernetes`), ``slurm`` or ``slurm/PLACEMENT`` (slurmctld's own rules, :mod:`baselines.slurm`).
Names are case-insensitive; unknown parts raise :class:`~envs.core.errors.ConfigError` listing the known ones.
"""

from __future__ import annotations

from typing import Any

from baselines.backfill import BACKFILL_DOCS, Scheduler
from baselines.kubernetes import KUBE_DOCS, KUBE_PARAM_DOCS, KUBE_PREFIX, kube_policy
from baselines.lookahead import PLANNER_DOCS, is_planner_name, planner_policy
from baselines.orders import ORDER_DOCS, make_order
from baselines.preemption import PREEMPT_DOC, PREEMPT_SUFFIX, Preemptive
from baselines.rls import RLS_DOCS, rls_policy
from baselines.slurm import SLURM_DOCS, SLURM_PREFIX, slurm_policy
from baselines.tiresias import TIRESIAS_DOCS, tiresias_policy
from envs.core.errors import ConfigError
from envs.placement import PLACEMENT_DOCS, get_placement_rule

RLS_PREFIX = "rls:"
"""Prefix of the peer-compatibility policies (RLScheduler semantics on SWF traces)."""


def parse(name: str) -> tuple[str, str, str]:
    """(order, backfill, placement) of an ``ORDER[+BACKFILL][/PLACEMENT][+preempt]`` name, defaults filled in (the
    ``+preempt`` suffix, if any, is :func:`make`'s)."""
    text = name.strip().lower().removesuffix(PREEMPT_SUFFIX)
    head, _, placement = text.partition("/")
    order, _, backfill = head.partition("+")
    placement, backfill = placement or "firstfit", backfill or "none"
    if order not in ORDER_DOCS:
        raise ConfigError(f"policy {name!r}: unknown order {order!r} (known: {', '.join(ORDER_DOCS)})")
    if backfill not in BACKFILL_DOCS:
        raise ConfigError(f"policy {name!r}: unknown backfilling {backfill!r} (known: {', '.join(BACKFILL_DOCS)})")
    if placement not in PLACEMENT_DOCS:
        raise ConfigError(f"policy {name!r}: unknown placement {placement!r} (known: {', '.join(PLACEMENT_DOCS)})")
    return order, backfill, placement


def make(name: str, **order_params: Any) -> Any:
    """The policy called ``name``; ``order_params`` go to the order (e.g. ``half_life_s`` for fair share).

    Our own names give a :class:`~baselines.backfill.Scheduler` (the common policy protocol, run on
    :class:`envs.sim.simulator.Simulator`); ``rls:`` names give a peer policy, run on :mod:`envs.peer.engine`;
    ``k8s:`` names give a :class:`~baselines.kubernetes.KubeScheduler`, ``order_params`` overriding its profile;
    ``slurm`` names a :class:`~baselines.slurm.SlurmScheduler`, ``order_params`` being ``slurm=`` (a policy config's
    ``slurm:`` section); ``lookahead...`` and ``hindsight...`` name a :class:`~baselines.lookahead.Planner`,
    ``order_params`` being ``futures=`` (a :class:`~envs.workload.futures.FutureModel`, which lookahead needs).
    """
    if is_planner_name(name):
        return planner_policy(name, make, **order_params)
    if name.strip().lower().partition("/")[0] == SLURM_PREFIX:
        return slurm_policy(name, **order_params)
    if name.strip().lower().startswith(KUBE_PREFIX):
        return kube_policy(name, **order_params)
    if name.strip().lower().startswith(RLS_PREFIX):
        return rls_policy(name.strip()[len(RLS_PREFIX):])
    scheduler_name, _, rule = name.strip().lower().partition("/")
    if scheduler_name in TIRESIAS_DOCS:
        if order_params:
            raise ConfigError(f"policy {name!r}: takes no order parameters")
        return tiresias_policy(scheduler_name, rule or "firstfit")
    order, backfill, placement = parse(name)
    canonical = order + ("" if backfill == "none" else f"+{backfill}") + ("" if placement == "firstfit"
                                                                         else f"/{placement}")
    scheduler = Scheduler(canonical, make_order(order, **order_params), backfill, get_placement_rule(placement))
    return Preemptive(scheduler) if name.strip().lower().endswith(PREEMPT_SUFFIX) else scheduler


def catalogue() -> str:
    """Every order, backfilling mode and placement rule, and the peer-compatible policies, one line each."""
    sections = [("Priority orders (ORDER; GPUs = GPU share, req = requested wall time, req′ = max(req, 0.1 s))",
                 ORDER_DOCS),
                ("Backfilling (+BACKFILL, default none)", BACKFILL_DOCS),
                ("Placement rules (/PLACEMENT, default firstfit)", PLACEMENT_DOCS),
                ("Preemption (a +preempt suffix, after the rest of the name)", {"+preempt": PREEMPT_DOC}),
                ("Preemptive schedulers of their own (NAME[/PLACEMENT])", TIRESIAS_DOCS),
                ("Kubernetes filter-and-score (k8s:NAME[+preempt])", KUBE_DOCS),
                ("Kubernetes parameters (make('k8s:NAME', key=value))", KUBE_PARAM_DOCS),
                ("Slurm (slurm[/PLACEMENT]; parameters from a policy config's slurm: section)", SLURM_DOCS),
                ("Planners over heuristics (lookahead[:KEY=VALUE]..., hindsight[:KEY=VALUE]...)", PLANNER_DOCS),
                ("Peer compatibility (rls:ORDER[/BY@FRACTION][+rlsbackfill], SWF traces only)", RLS_DOCS)]
    lines = ["Policy names: ORDER[+BACKFILL][/PLACEMENT][+preempt], e.g. sjf+easy/topology or "
             "priority+easy/pack+preempt; tiresias[/PLACEMENT] or yarn-cs[/PLACEMENT]; k8s:NAME[+preempt]; "
             "slurm[/PLACEMENT]; lookahead[:KEY=VALUE]... or hindsight[:KEY=VALUE]...; or "
             "rls:ORDER[/BY@FRACTION][+rlsbackfill]."]
    for title, docs in sections:
        lines.append(f"\n{title}:")
        width = max(map(len, docs))
        lines.extend(f"  {key:<{width}}  {text}" for key, text in docs.items())
    return "\n".join(lines)
