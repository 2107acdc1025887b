"""The network of the heuristic-selection env and trained selection models as policies.

:class:`SelectionNet` scores each candidate from its own row (what it proposes, which candidate it is) and a
context pooled from the cluster's node groups (mean and maximum, so any number of groups) and the global values;
the critic (its own encoder of the groups and global values) gives the value, so a critic trained alone leaves
the policy as it was. A model file (``model.zip``, written by :func:`save_model`) is a
``torch.save`` archive of tensors and plain values, read back with ``weights_only=True``: loading runs no code.
:class:`SelectionModelPolicy` runs a saved model on any simulator view with the rule of :mod:`agents.selection`.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from agents.network import mlp
from agents.selection import Selection, alias_mask
from agents.selection_env import SelectionEncoder, selection_config
from baselines import make
from envs.core.errors import ConfigError
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
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        torch.save({"state": net.state_dict(), "dims": net.dims, "meta": dict(meta)}, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load_model(path: str | Path) -> tuple[SelectionNet, dict[str, Any]]:
    """(the network, its meta) saved at ``path``; :class:`ConfigError` naming the file if it is not one."""
    try:
        saved = torch.load(Path(path), map_location="cpu", weights_only=True)
        net = SelectionNet(**saved["dims"])
        net.load_state_dict(saved["state"])
        meta = dict(saved["meta"])
    except (OSError, RuntimeError, KeyError, TypeError, ValueError, pickle.UnpicklingError) as exc:
        raise ConfigError(f"model {path}: not a selection model ({' '.join(str(exc).split())[:200]})") from exc
    net.eval()
    return net, meta


class SelectionModelPolicy:
    """A trained selection model as a policy: the candidates propose, the model picks at contested decisions
    (the most probable candidate)."""

    def __init__(self, path: str | Path, net: SelectionNet | None = None, meta: Mapping[str, Any] | None = None,
                 name: str | None = None) -> None:
        if net is None or meta is None:
            net, meta = load_model(path)
        self.net, self.meta = net, dict(meta)
        self.name = name or str(path)
        self.selection = Selection(list(self.meta["candidates"]), make, float(self.meta["commit_s"]))
        self.config = selection_config(dict(self.meta.get("env") or {}), {})
        self._encoders: dict[int, SelectionEncoder] = {}

    def reset(self) -> None:
        self.selection.reset()
        for encoder in self._encoders.values():
            encoder.encoder.start_episode()

    def _encoder(self, view: View) -> SelectionEncoder:
        encoder = self._encoders.get(id(view.cluster))
        if encoder is None:
            rules = [PLACEMENT_RULES[name] for name in self.config.placement_rules]
            runtime = RuntimeConfig.named(self.config.runtime_model)
            encoder = SelectionEncoder(ObservationEncoder(view.cluster, self.config, runtime, rules),
                                       len(self.selection.names))
            self._encoders[id(view.cluster)] = encoder
        return encoder

    def act(self, view: View) -> Action:
        action, proposals = self.selection.decide(view)
        if action is not None:
            return action
        return self.selection.choose(self.pick(view, proposals), view, proposals)

    def pick(self, view: View, proposals: list[Action]) -> int:
        """The most probable unmasked candidate at this contested decision."""
        obs = self._encoder(view).encode(view, proposals)
        mask = alias_mask(proposals)
        with torch.no_grad():
            logits, _ = self.net(*batch([obs], [mask]))
        return int(logits[0].argmax())
