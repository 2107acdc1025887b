"""A trained model as a policy of the common protocol, so the harness runs it like any heuristic.

The model decides through the env's own observation encoder and action decoding: at each decision point it sees
the first K pending jobs and the P placement rules' candidates, exactly as in training. It runs on any cluster: the
network pools the cluster's node groups (:class:`agents.network.ClusterEncoder`), so a cluster with more or fewer
groups than the training one only changes the number of ``cluster`` rows; every other shape must match.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents.model_file import load_model, run_config
from envs.core import ConfigError, RuntimeConfig
from envs.gymenv import EnvConfig
from envs.gymenv.actions import PreemptSlot, action_mask, decode_action
from envs.gymenv.observation import ObservationEncoder
from envs.placement import PLACEMENT_RULES
from envs.registration import PEER_ENV_ID
from envs.sim import WAIT, Action, Policy, Preempt, Start, View


class ModelPolicy:
    """Acts with a saved MaskablePPO model (deterministic, masked) on any simulator view."""

    def __init__(self, model_path: str | Path, run: dict[str, Any], device: str = "cpu") -> None:
        env_config = EnvConfig.from_dict(run.get("env") or {})
        if env_config.backfill_assist:
            raise ConfigError(f"model {model_path}: trained with backfill_assist, which the policy adapter does not "
                              "replay yet")
        self.name = str(model_path)
        self.config = env_config
        self.model = load_model(model_path, run, device=device)
        self._rules = [PLACEMENT_RULES[name] for name in env_config.placement_rules]
        self._runtime = RuntimeConfig.named(env_config.runtime_model)
        self._encoder: ObservationEncoder | None = None

    def reset(self) -> None:
        """Forget the per-job feature cache."""
        if self._encoder is not None:
            self._encoder.start_episode()

    def act(self, view: View) -> Action:
        """The model's choice among the legal (slot, rule) starts and, for a model trained with preemption, the
        legal preemptions of its running slots now; Wait when none is legal."""
        if self._encoder is None or self._encoder.cluster is not view.cluster:
            self._encoder = ObservationEncoder(view.cluster, self.config, self._runtime, self._rules)
            from agents.network import reads

            here = self._encoder.space
            if not reads(self.model.observation_space, here):
                trained = {k: box.shape for k, box in self.model.observation_space.spaces.items()}
                shapes = {k: box.shape for k, box in here.spaces.items()}
                raise ConfigError(f"model {self.name}: trained on observations {trained}; cluster "
                                  f"{view.cluster.name!r} gives {shapes} (only the number of cluster rows, the node "
                                  "groups, may differ from training)")
            self.model.policy.observation_space = here  # SB3 checks each observation's shapes against it
        slot_jobs = self._encoder.visible(view)
        plans = self._encoder.plan(view, slot_jobs)
        running = self._encoder.running(view) if self.config.preemption else []
        mask = action_mask(self.config, plans, view.events_left, running=running, view=view)
        if not mask[:-1].any():
            return WAIT
        obs = self._encoder.encode(view, slot_jobs, plans)
        action, _ = self.model.predict(obs, action_masks=mask, deterministic=True)
        choice = decode_action(self.config, int(action))
        if choice is None:
            return WAIT
        if isinstance(choice, PreemptSlot):
            return Preempt(running[choice.slot].job.job_id)
        slot, rule = choice
        return Start(slot_jobs[slot].job_id, plans[slot][rule])


def load(model_path: str | Path, device: str = "cpu") -> Policy:
    """The model saved at ``model_path`` (``RUN/model.zip``), with the env config of its run folder: a selection
    model of a recipe (:mod:`agents.selection_policy`) or a MaskablePPO model."""
    path = Path(model_path)
    run = run_config(path)
    if run.get("recipe"):
        from agents.selection_policy import SelectionModelPolicy

        return SelectionModelPolicy.load(path)
    if run.get("env_id") == PEER_ENV_ID:
        raise ConfigError(f"model {path}: trained on {PEER_ENV_ID} (peer mode); run it as rls:{path} on an SWF trace")
    return ModelPolicy(path, run, device)
