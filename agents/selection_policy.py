"""The network of the heuristic-selection env and trained selection models as policies.

:class:`SelectionNet` scores each candidate from its own row (what it proposes, which candidate it is) and a
context pooled from the cluster's node groups (mean and maximum, so any number of groups) and the global values;
the critic (its own encoder of the groups and global values) gives the value, so a critic trained alone leaves
the policy as it was. A model file (``model.zip``, written by :func:`save_model`) is a
``torch.save`` archive of tensors and plain values, read back with ``weights_only=True``: loading runs no code.
:class:`SelectionModelPolicy` runs a saved model on any simulator view with the rule of :mod:`agents.selection`.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from agents.model_file import check_archive
from agents.network import mlp
from agents.selection import Selection, alias_mask
from agents.selection_env import SelectionEncoder, selection_config
from baselines import make
from envs.core.errors import ConfigError
from envs.core.files import write_atomically
from envs.core.runtime import RuntimeConfig
from envs.gymenv.observation import ObservationEncoder
from envs.placement import PLACEMENT_RULES
from envs.sim import Action, View

OBS_KEYS = ("candidates", "cluster", "global")


def _mlp(sizes: list[int]) -> nn.Sequential:
    return mlp(sizes, nn.Tanh)


class SelectionNet(nn.Module):
    """Logits over the candidates and a value, from a selection env's observation (module docstring)."""

    def __init__(self, candidate_columns: int, group_columns: int, global_columns: int, hidden: int = 64) -> None:
        super().__init__()
        self.dims = {"candidate_columns": candidate_columns, "group_columns": group_columns,
                     "global_columns": global_columns, "hidden": hidden}
        self.actor = nn.ModuleDict({"groups": _mlp([group_columns, hidden, hidden]),
                                    "context": _mlp([2 * hidden + global_columns, hidden, hidden]),
                                    "rows": _mlp([candidate_columns, hidden, hidden]),
                                    "score": _mlp([2 * hidden, hidden, 1])})
        self.critic = nn.ModuleDict({"groups": _mlp([group_columns, hidden, hidden]),
                                     "context": _mlp([2 * hidden + global_columns, hidden, hidden]),
                                     "value": _mlp([hidden, hidden, 1])})

    @staticmethod
    def _context(part: nn.ModuleDict, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        groups = part["groups"](obs["cluster"])
        return part["context"](torch.cat([groups.mean(1), groups.amax(1), obs["global"]], dim=-1))

    def forward(self, obs: Mapping[str, torch.Tensor], mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(masked logits (B, H), values (B,)) for observations of batch B and masks (B, H)."""
        context = self._context(self.actor, obs)
        rows = self.actor["rows"](obs["candidates"])
        logits = self.actor["score"](torch.cat([rows, context[:, None, :].expand_as(rows)], dim=-1)).squeeze(-1)
        value = self.critic["value"](self._context(self.critic, obs)).squeeze(-1)
        return logits.masked_fill(~mask, -1e9), value


def batch(observations: list[dict[str, np.ndarray]], masks: list[np.ndarray]) -> tuple[dict[str, torch.Tensor],
                                                                                       torch.Tensor]:
    """Stack per-decision observations and masks into tensors."""
    return ({key: torch.as_tensor(np.stack([o[key] for o in observations])) for key in OBS_KEYS},
            torch.as_tensor(np.stack(masks)))


def save_model(path: str | Path, net: SelectionNet, meta: Mapping[str, Any]) -> None:
    """Write ``net`` and ``meta`` (the candidates, commit_s, env settings: plain values) to ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    saved = {"state": net.state_dict(), "dims": net.dims, "meta": dict(meta)}
    write_atomically(path, lambda partial: torch.save(saved, partial))


def load_model(path: str | Path) -> tuple[SelectionNet, dict[str, Any]]:
    """(the network, its meta) saved at ``path``; :class:`ConfigError` naming the file if it is not one."""
    check_archive(path)
    try:
        saved = torch.load(Path(path), map_location="cpu", weights_only=True)
        net = SelectionNet(**saved["dims"])
        net.load_state_dict(saved["state"])
        meta = dict(saved["meta"])
    except (OSError, RuntimeError, KeyError, TypeError, ValueError, pickle.UnpicklingError) as exc:
        raise ConfigError(f"model {path}: not a selection model ({' '.join(str(exc).split())[:200]})") from exc
    net.eval()
    return net, meta


def most_probable(net: SelectionNet, obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
    """The candidate ``net`` finds most probable at one decision (masked candidates never)."""
    with torch.no_grad():
        logits, _ = net(*batch([obs], [mask]))
    return int(logits[0].argmax())


class SelectionModelPolicy:
    """A trained selection model as a policy: the candidates propose, the model picks at contested decisions
    (the most probable candidate)."""

    def __init__(self, net: SelectionNet, meta: Mapping[str, Any], name: str) -> None:
        self.net, self.meta, self.name = net, dict(meta), name
        self.selection = Selection(list(self.meta["candidates"]), make, float(self.meta["commit_s"]))
        self.config = selection_config(dict(self.meta.get("env") or {}), {})
        self._encoder: SelectionEncoder | None = None

    @classmethod
    def load(cls, path: str | Path) -> SelectionModelPolicy:
        """The model saved at ``path``, named by its path."""
        net, meta = load_model(path)
        return cls(net, meta, str(path))

    def reset(self) -> None:
        self.selection.reset()
        if self._encoder is not None:
            self._encoder.encoder.start_episode()

    def act(self, view: View) -> Action:
        action, proposals = self.selection.decide(view)
        if action is not None:
            return action
        if self._encoder is None or self._encoder.encoder.cluster is not view.cluster:
            rules = [PLACEMENT_RULES[name] for name in self.config.placement_rules]
            runtime = RuntimeConfig.named(self.config.runtime_model)
            self._encoder = SelectionEncoder(ObservationEncoder(view.cluster, self.config, runtime, rules),
                                             len(self.selection.names))
        pick = most_probable(self.net, self._encoder.encode(view, proposals), alias_mask(proposals))
        return self.selection.choose(pick, view, proposals)
