"""A permutation-equivariant actor-critic for GPUClusterEnv observations (SPEC §8), for clusters of any size.

Every (slot, placement) action is scored by the same small network from that slot's job features, that pair's
placement features and a pooled context; Wait is scored from the context alone, and, with preemption, every
running slot's Preempt from that slot's features and the context. The context pools three sets: the cluster's
node groups (:class:`ClusterEncoder`), the visible jobs and (with preemption) the running jobs. Permuting the
visible jobs therefore permutes the Start logits the same way, permuting the running slots permutes the Preempt
logits, and permuting the node groups changes nothing. Since the node groups are pooled, not flattened, the
number of groups is free: a model trained on one cluster runs on another with the same observation columns
(:func:`reads`). The value head reads the pooled context. The network only needs the observation's shapes, so it
works with any producer of these observations (the Python env, the batched engine of :mod:`envs.vec`).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy
from torch import nn

from envs.gymenv.observation import GROUP_FEATURES

SIZE_COLUMN = GROUP_FEATURES.index("size")
"""The cluster column that holds a node group's share of the cluster's GPUs: the weight of its row."""


def mlp(sizes: list[int], activation: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    """Linear layers of the given widths with ``activation`` between them (none after the last)."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(activation())
    return nn.Sequential(*layers)


def _masked_mean(rows: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
    """The mean of the (B, N, H) ``rows`` over those whose (B, N, 1) ``present`` is 1; zeros where none is."""
    return (rows * present).sum(1) / present.sum(1).clamp(min=1.0)


def reads(trained: spaces.Dict, observations: spaces.Dict) -> bool:
    """Whether a :class:`SlotPolicy` built for ``trained`` observations reads ``observations``: the same keys and
    shapes, except that the ``cluster`` rows (node groups) may be any number, with the same columns."""
    if list(trained.spaces) != list(observations.spaces):
        return False
    for key, box in trained.spaces.items():
        shape, other = tuple(box.shape), tuple(observations[key].shape)
        if shape != other and not (key == "cluster" and len(other) == 2 and other[0] >= 1 and other[1:] == shape[1:]):
            return False
    return True


class _Encoded(NamedTuple):
    """What the scorer's heads read: the held slots (flat indices b·K + k, ascending), their samples and job
    embeddings (S, H), the running jobs' embeddings (B, R, H) or None, the context (B, C) and the held slots'
    placement features (S, P, features)."""

    held: torch.Tensor
    owner: torch.Tensor
    jobs: torch.Tensor
    running: torch.Tensor | None
    context: torch.Tensor
    placements: torch.Tensor


class ClusterEncoder(nn.Module):
    """A set encoder of the ``cluster`` rows: one MLP shared by every node group (reading all its columns), then two
    pools over the groups, so that the result is the same for any order and any number of groups.

    The pools are the mean weighted by each group's ``size`` (its share of the cluster's GPUs) and the maximum:

    - the weighted mean is an average over the cluster's GPUs of their group's embedding, so a group counts by the
      GPUs it holds (a plain mean would let a one-node group weigh as much as a rack of 16 nodes, and a cluster
      described in more, finer groups would shift it); for the ``free_gpus`` column it is the cluster's free share;
    - the maximum sees the best single group (where a large job fits now, the fastest free GPUs), which a mean
      dilutes on a large cluster.

    Neither grows with the number of groups (a cluster described twice over, every row repeated, gives the same
    result), which a sum would: that is what lets a model trained on a 2-group cluster run on a 5-group one. Where
    the sizes sum to 0 (an observation whose size column means something else, such as the peer-mode env's single
    row) the mean is unweighted; with one row both pools are that row's embedding.
    """

    def __init__(self, columns: int, hidden: int) -> None:
        super().__init__()
        self.row_encoder = mlp([columns, hidden, hidden])
        self.out_dim = 2 * hidden

    def forward(self, cluster: torch.Tensor) -> torch.Tensor:
        """(B, G, columns) group rows, any G ≥ 1 → (B, 2·hidden) pooled features."""
        rows = self.row_encoder(cluster)  # (B, G, H)
        weight = cluster[..., SIZE_COLUMN:SIZE_COLUMN + 1]  # (B, G, 1)
        total = weight.sum(1, keepdim=True)
        weight = torch.where(total > 0, weight / total.clamp(min=1e-12), 1.0 / cluster.shape[1])
        return torch.cat([(rows * weight).sum(1), rows.amax(1)], dim=1)


class SlotScorer(nn.Module):
    """Turns the flattened observation into (K·P + R + 1 action scores, value latent); R = 0 without preemption.

    It reads the layout of SB3's ``CombinedExtractor`` (each key flattened, in the order of the observation space's
    keys, concatenated) with any number of ``cluster`` rows: the other keys have fixed sizes, so the rows are what
    the width leaves.
    """

    def __init__(self, observation_space: spaces.Dict, hidden: int = 64) -> None:
        super().__init__()
        self.shapes = {key: tuple(box.shape) for key, box in observation_space.spaces.items()}
        self.cluster_columns = self.shapes["cluster"][1]
        self._fixed_width = sum(math.prod(s) for key, s in self.shapes.items() if key != "cluster")
        self.slots, self.rules, placement_features = self.shapes["placements"]
        job_features = self.shapes["jobs"][1]
        self.running_slots = self.shapes["running"][0] if "running" in self.shapes else 0
        self.job_encoder = mlp([job_features, hidden, hidden])
        self.cluster_encoder = ClusterEncoder(self.cluster_columns, hidden)
        self.context_encoder = mlp([self.cluster_encoder.out_dim + self.shapes["global"][0], hidden, hidden])
        # the context: cluster and global features, the visible jobs' mean embedding and, with preemption, the
        # running jobs' mean embedding
        context_dim = (3 if self.running_slots else 2) * hidden
        # the scorer's first layer reads concat(job, placement, context); it is split into three projections so
        # that the job and context parts are computed once per slot and once per sample, not once per pair
        self.score_job = nn.Linear(hidden, hidden)
        self.score_placement = nn.Linear(placement_features, hidden, bias=False)
        self.score_context = nn.Linear(context_dim, hidden, bias=False)
        self.score_out = nn.Sequential(nn.ReLU(), nn.Linear(hidden, 1))
        # which rule a pair uses: two rules may give alike placement features yet different GPUs, and a policy
        # must be able to prefer one (with a single rule this would be a constant, so it is left out)
        self.score_rule = nn.Parameter(torch.zeros(self.rules, hidden)) if self.rules > 1 else None
        if self.running_slots:  # Preempt of running slot r, from its job's embedding and the context
            self.running_encoder = mlp([self.shapes["running"][1], hidden, hidden])
            self.preempt_scorer = mlp([hidden + context_dim, hidden, 1])
        self.wait_scorer = mlp([context_dim, hidden, 1])
        self.value_encoder = mlp([context_dim, hidden])
        self.latent_dim_pi = self.slots * self.rules + self.running_slots + 1
        self.latent_dim_vf = hidden

    def _split(self, features: torch.Tensor) -> dict[str, torch.Tensor]:
        rows, extra = divmod(features.shape[1] - self._fixed_width, self.cluster_columns)
        if rows < 1 or extra:
            raise ValueError(f"SlotScorer: {features.shape[1]} features are not the fixed keys' {self._fixed_width} "
                             f"plus node groups of {self.cluster_columns} columns")
        obs, offset = {}, 0
        for key, shape in self.shapes.items():
            shape = (rows, self.cluster_columns) if key == "cluster" else shape
            size = math.prod(shape)
            obs[key] = features[:, offset:offset + size].reshape(-1, *shape)
            offset += size
        return obs

    def _encode(self, features: torch.Tensor) -> _Encoded:
        """The visible jobs' embeddings (computed for the slots that hold a job only: the first K pending jobs fill
        a prefix of the slots, often a short one), the running jobs' embeddings and the pooled context."""
        obs = self._split(features)
        jobs = obs["jobs"]
        b = jobs.shape[0]
        held = (jobs[..., 0].reshape(-1) > 0).nonzero().squeeze(1)  # column 0 of a slot: 1 where it holds a job
        owner = held // self.slots  # the sample of each held slot
        embedded = self.job_encoder(jobs.reshape(-1, jobs.shape[2]).index_select(0, held))  # (S, H)
        count = torch.zeros(b, 1, dtype=embedded.dtype, device=embedded.device).index_add(
            0, owner, torch.ones_like(embedded[:, :1]))
        pooled = torch.zeros(b, embedded.shape[1], dtype=embedded.dtype, device=embedded.device).index_add(
            0, owner, embedded) / count.clamp(min=1.0)
        cluster = self.cluster_encoder(obs["cluster"])  # (B, 2H)
        parts = [self.context_encoder(torch.cat([cluster, obs["global"]], dim=1)), pooled]
        running = None
        if self.running_slots:
            running = self.running_encoder(obs["running"])
            parts.append(_masked_mean(running, obs["running"][..., :1]))
        placements = obs["placements"]
        placements = placements.reshape(-1, *placements.shape[2:]).index_select(0, held)  # (S, P, features)
        return _Encoded(held, owner, embedded, running, torch.cat(parts, dim=1), placements)

    def _actor(self, encoded: _Encoded) -> torch.Tensor:
        """Start logits (0 for the slots that hold no job: those are always masked), Preempt logits, Wait."""
        context = encoded.context
        b = context.shape[0]
        hidden = (self.score_job(encoded.jobs).unsqueeze(1)  # (S, 1, H)
                  + self.score_placement(encoded.placements)  # (S, P, H)
                  + self.score_context(context).index_select(0, encoded.owner)[:, None, :])  # (S, 1, H)
        if self.score_rule is not None:
            hidden = hidden + self.score_rule  # (P, H)
        held_scores = self.score_out(hidden).squeeze(2)  # (S, P)
        starts = torch.zeros(b * self.slots, self.rules, dtype=held_scores.dtype, device=held_scores.device)
        scores = [starts.index_copy(0, encoded.held, held_scores).reshape(b, self.slots * self.rules)]
        if encoded.running is not None:
            running = encoded.running
            pairs = torch.cat([running, context[:, None, :].expand(-1, running.shape[1], -1)], dim=2)
            scores.append(self.preempt_scorer(pairs).squeeze(2))  # (B, R)
        return torch.cat([*scores, self.wait_scorer(context)], dim=1)

    def forward_actor(self, features: torch.Tensor) -> torch.Tensor:
        return self._actor(self._encode(features))

    def forward_critic(self, features: torch.Tensor) -> torch.Tensor:
        return self.value_encoder(self._encode(features).context)

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        encoded = self._encode(features)
        return self._actor(encoded), self.value_encoder(encoded.context)


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
