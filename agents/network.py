"""A permutation-equivariant actor-critic for GPUClusterEnv observations (SPEC §8).

Every (slot, placement) action is scored by the same small network from that slot's job features, that pair's
placement features and a pooled context (cluster groups, global features, the mean of the visible jobs'
embeddings); Wait is scored from the context alone. Permuting the visible jobs therefore permutes the logits the
same way. The value head reads the pooled context. The network only needs the observation's shapes, so it works
with any producer of these observations (the Python env today, a batched GPU simulator later).
"""

from __future__ import annotations

from typing import Any

import torch
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy
from torch import nn


def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class SlotScorer(nn.Module):
    """Turns the flattened observation into (K·P + 1 action scores, value latent)."""

    def __init__(self, observation_space: spaces.Dict, hidden: int = 64) -> None:
        super().__init__()
        # CombinedExtractor flattens the keys in the order of observation_space.spaces and concatenates them
        self.layout: list[tuple[str, tuple[int, ...], int, int]] = []
        offset = 0
        for key, box in observation_space.spaces.items():
            size = int(torch.tensor(box.shape).prod())
            self.layout.append((key, tuple(box.shape), offset, offset + size))
            offset += size
        shapes = {key: shape for key, shape, _, _ in self.layout}
        self.slots, self.rules, placement_features = shapes["placements"]
        job_features = shapes["jobs"][1]
        context_in = shapes["cluster"][0] * shapes["cluster"][1] + shapes["global"][0]
        self.job_encoder = _mlp([job_features, hidden, hidden])
        self.context_encoder = _mlp([context_in, hidden, hidden])
        # the scorer's first layer reads concat(job, placement, context); it is split into three projections so
        # that the job and context parts are computed once per slot and once per sample, not once per pair
        self.score_job = nn.Linear(hidden, hidden)
        self.score_placement = nn.Linear(placement_features, hidden, bias=False)
        self.score_context = nn.Linear(2 * hidden, hidden, bias=False)
        self.score_out = nn.Sequential(nn.ReLU(), nn.Linear(hidden, 1))
        # which rule a pair uses: two rules may give alike placement features yet different GPUs, and a policy
        # must be able to prefer one (with a single rule this would be a constant, so it is left out)
        self.score_rule = nn.Parameter(torch.zeros(self.rules, hidden)) if self.rules > 1 else None
        self.wait_scorer = _mlp([2 * hidden, hidden, 1])
        self.value_encoder = _mlp([2 * hidden, hidden])
        self.latent_dim_pi = self.slots * self.rules + 1
        self.latent_dim_vf = hidden

    def _split(self, features: torch.Tensor) -> dict[str, torch.Tensor]:
        return {key: features[:, a:b].reshape(-1, *shape) for key, shape, a, b in self.layout}

    def _encode(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        obs = self._split(features)
        jobs = self.job_encoder(obs["jobs"])  # (B, K, H)
        present = obs["jobs"][..., :1]  # (B, K, 1): 1 where the slot holds a job
        pooled = (jobs * present).sum(1) / present.sum(1).clamp(min=1.0)  # (B, H)
        context = self.context_encoder(torch.cat([obs["cluster"].flatten(1), obs["global"]], dim=1))
        return jobs, torch.cat([context, pooled], dim=1), obs

    def _actor(self, jobs: torch.Tensor, context: torch.Tensor, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        b = jobs.shape[0]
        hidden = (self.score_job(jobs).unsqueeze(2)  # (B, K, 1, H)
                  + self.score_placement(obs["placements"])  # (B, K, P, H)
                  + self.score_context(context)[:, None, None, :])  # (B, 1, 1, H)
        if self.score_rule is not None:
            hidden = hidden + self.score_rule  # (P, H)
        scores = self.score_out(hidden).reshape(b, self.slots * self.rules)
        return torch.cat([scores, self.wait_scorer(context)], dim=1)

    def forward_actor(self, features: torch.Tensor) -> torch.Tensor:
        return self._actor(*self._encode(features))

    def forward_critic(self, features: torch.Tensor) -> torch.Tensor:
        return self.value_encoder(self._encode(features)[1])

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        jobs, context, obs = self._encode(features)
        return self._actor(jobs, context, obs), self.value_encoder(context)


class SlotPolicy(MaskableMultiInputActorCriticPolicy):
    """MaskablePPO's multi-input policy with :class:`SlotScorer` in place of the MLP and the action head."""

    def __init__(self, *args: Any, hidden: int = 64, **kwargs: Any) -> None:
        self.hidden = hidden
        super().__init__(*args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = SlotScorer(self.observation_space, self.hidden)

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()  # the scorer's outputs are the logits: shared weights keep equivariance
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)
