"""Policy configs: one YAML file that sets every order's parameters, the Kubernetes profiles' weights, and the
cluster's partitions and quotas (``evaluate.py --policy-config FILE``).

A policy config holds (every section optional)::

    orders:                          # keyword parameters of each priority order, by order name
      fairshare: {half_life_s: 86400, by: team, shares: {vision: 2, nlp: 1}}
      multifactor: {w_age: 1000, w_fairshare: 10000, max_age_s: 604800}
      fairtree: {accounts: {ml: {shares: 2}, vision: {shares: 1, parent: ml}}}
    kubernetes:                      # keyword parameters of each k8s: profile, by profile name
      mostallocated: {fit_weight: 1, balanced_weight: 0}
    governance:                      # partitions and quotas, as in a cluster preset (envs.core.governance)
      partitions: [...]
      quotas: {limits: {teams: {vision: 8}}}
    slurm:                           # slurm.conf's scheduling parameters, for the slurm policies
      SchedulerParameters: bf_interval=1,bf_resolution=1        # (baselines.slurm_conf)
      PriorityType: priority/multifactor

A policy whose order (or k8s profile) is named gets those parameters, a ``slurm`` policy the ``slurm`` section;
others run with their defaults. Governance
replaces the cluster's own partitions and quotas (those of its preset), for every policy of the evaluation.
Everything is checked when the file is read: unknown sections, orders, profiles, parameters and bad values raise
:class:`~envs.core.errors.ConfigError` naming the file and the key. Loading runs no code from the file (YAML data
only).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from baselines.kubernetes import KUBE_PREFIX, KUBE_PROFILES
from baselines.orders import ORDERS, make_order
from baselines.preemption import PREEMPT_SUFFIX
from baselines.registry import make
from baselines.slurm import SLURM_PREFIX, slurm_policy_params
from envs.core.cluster import ClusterSpec
from envs.core.dynamics import GovernanceFile
from envs.core.errors import ConfigError, check_keys
from envs.core.files import read_yaml
from envs.core.governance import governance_from_dict
from envs.core.schema import FileModel, validated


@dataclass(frozen=True)
class PolicyConfig:
    """A parsed policy config (module docstring); ``where`` names its file in errors."""

    orders: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    kubernetes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    governance: Mapping[str, Any] | None = None
    slurm: Mapping[str, Any] = field(default_factory=dict)
    where: str = "policy config"

    def make(self, name: str) -> Any:
        """The policy called ``name`` with this config's parameters for its order or k8s profile."""
        text = name.strip().lower()
        if text.startswith(KUBE_PREFIX):
            profile = text[len(KUBE_PREFIX):].removesuffix(PREEMPT_SUFFIX)
            return make(name, **self.kubernetes.get(profile, {}))
        if text.partition("/")[0] == SLURM_PREFIX:
            return make(name, slurm=self.slurm)
        order = text.removesuffix(PREEMPT_SUFFIX).partition("/")[0].partition("+")[0]
        return make(name, **self.orders.get(order, {}))

    def apply(self, cluster: ClusterSpec) -> ClusterSpec:
        """``cluster`` with this config's partitions and quotas (``cluster`` itself without a governance section)."""
        if self.governance is None:
            return cluster
        governance = governance_from_dict(self.governance, tuple(n.name for n in cluster.nodes),
                                          f"{self.where}: governance")
        try:
            return dataclasses.replace(cluster, governance=governance)
        except ConfigError as exc:
            raise ConfigError(f"{self.where}: governance: {exc}") from exc


Params = Annotated[dict[str, Any] | None, Field(description="parameter: value (the defaults where empty)")]


class PolicyConfigFile(FileModel):
    """A policy config file (module docstring): orders' and k8s profiles' parameters, partitions and quotas, and a
    ``slurm:`` section (checked by :func:`baselines.slurm.slurm_policy_params`)."""

    orders: dict[Literal[tuple(ORDERS)], Params] | None = None  # type: ignore[valid-type]
    kubernetes: dict[Literal[tuple(KUBE_PROFILES)], Params] | None = None  # type: ignore[valid-type]
    governance: GovernanceFile | None = None
    slurm: dict[str, Any] | None = None


def policy_config_from_dict(data: Any, where: str = "policy config") -> PolicyConfig:
    """Parse and check the mapping a policy config file holds (:class:`PolicyConfigFile`, then each order's and
    profile's parameters by building it)."""
    validated(PolicyConfigFile, data, where)
    data = data or {}
    orders = _sections(data.get("orders"), ORDERS, f"{where}: orders")
    for name, params in orders.items():
        try:
            make_order(name, **params)
        except (ConfigError, TypeError) as exc:
            raise ConfigError(f"{where}: orders.{name}: {exc}") from None
    kubernetes = _sections(data.get("kubernetes"), KUBE_PROFILES, f"{where}: kubernetes")
    for name, params in kubernetes.items():
        try:
            make(f"{KUBE_PREFIX}{name}", **params)
        except (ConfigError, TypeError) as exc:
            raise ConfigError(f"{where}: kubernetes.{name}: {exc}") from None
    governance = data.get("governance")
    slurm = data.get("slurm") or {}
    slurm_policy_params(slurm, f"{where}: slurm")  # checks the section
    return PolicyConfig(orders, kubernetes, governance, dict(slurm), where)


@lru_cache(maxsize=8)
def load_policy_config(path: str) -> PolicyConfig:
    """Read and check a policy config file (cached per process: every run of an evaluation shares it)."""
    return policy_config_from_dict(read_yaml(Path(path), "policy config"), where=path)


def _sections(data: Any, known: Mapping[str, Any], where: str) -> dict[str, dict[str, Any]]:
    if data is None:
        return {}
    check_keys(data, known, where)
    out = {}
    for name, params in data.items():
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            raise ConfigError(f"{where}.{name}: must be a mapping of parameter to value, got {params!r}")
        out[str(name)] = dict(params)
    return out
