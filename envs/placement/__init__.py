"""Placement rules: functions ``(view, job) -> GPUs`` to start the job on now, or None when it does not fit.

Both the heuristics (``baselines/``) and the Gymnasium env's action decoding use them, so a learned agent chooses
among exactly the placements the heuristics make. :mod:`~envs.placement.feasibility` holds the queries every rule
shares (which GPUs a job could use now), :mod:`~envs.placement.basic` the rules by free room and topology,
:mod:`~envs.placement.aware` those that weigh data locality and fragmentation. This module is the registry: each
rule by name, described by the first paragraph of its docstring (``python -m baselines`` lists them).
"""

from __future__ import annotations

import inspect

from envs.core.errors import ConfigError
from envs.placement.aware import fragmentation, locality
from envs.placement.basic import first_fit, pack, spread, topology
from envs.sim.view import PlacementRule

PLACEMENT_RULES: dict[str, PlacementRule] = {
    "firstfit": first_fit,
    "pack": pack,
    "spread": spread,
    "topology": topology,
    "locality": locality,
    "fragmentation": fragmentation,
}
"""The placement rules by name, in the order an env lists them."""

PLACEMENT_DOCS: dict[str, str] = {
    name: " ".join((inspect.getdoc(rule) or "").split("\n\n")[0].split()) for name, rule in PLACEMENT_RULES.items()
}
"""One line per rule (the first paragraph of its docstring), for command-line help and reports."""


def get_placement_rule(name: str) -> PlacementRule:
    """The placement rule registered as ``name``; raises :class:`ConfigError` naming the known rules."""
    rule = PLACEMENT_RULES.get(name)
    if rule is None:
        raise ConfigError(f"placement rule {name!r}: unknown (known: {', '.join(PLACEMENT_RULES)})")
    return rule


__all__ = ["PLACEMENT_DOCS", "PLACEMENT_RULES", "PlacementRule", "first_fit", "fragmentation", "get_placement_rule",
           "locality", "pack", "spread", "topology"]
