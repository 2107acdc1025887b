"""Model files, saved atomically and loaded without running anything they hold.

A model file (a run's ``model.zip``, ``best_model.zip`` or ``checkpoints/model_N_steps.zip``) is
stable-baselines3's zip archive: ``data`` (JSON: the algorithm's settings, with the entries JSON cannot hold
written as cloudpickle), ``policy.pth``, ``policy.optimizer.pth`` and ``pytorch_variables.pth`` (tensors) and two
text files. Loading unpickles nothing from it:

- every pickled entry of ``data`` is replaced by an object built here from the run folder's ``config.yaml`` (plain
  YAML data: :func:`envs.core.files.read_yaml`; :data:`REBUILT` lists them: the policy class
  (:class:`agents.network.SlotPolicy`), the spaces of the env the config describes, the learning-rate and
  clip-range schedules and the network width of its ``ppo:`` section, and ``None`` for the buffers and the last
  observation, which SB3 recreates);
- a pickled entry that is not in that list makes the load refuse (:class:`~envs.core.errors.ConfigError`);
- the tensors are read by torch with ``weights_only=True``, which refuses anything but tensors and plain containers.

What a load trusts is the run folder's YAML and the tensors' shapes; a corrupt or truncated file is a
``ConfigError`` naming it, and so is a file whose weights do not fit the network built for its config. The model is
rebuilt with the spaces of its training env, but no weight depends on the cluster's number of node groups, so it
runs on other clusters too (:class:`agents.adapter.ModelPolicy`). Saves write beside the target and then replace
it (:func:`save_model`), so a kill during a save leaves the previous file intact.
"""

from __future__ import annotations

import json
import pickle
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envs.core.errors import ConfigError
from envs.core.files import read_yaml, write_atomically
from envs.gymenv import EnvConfig, GPUClusterEnv
from envs.peer.env import PeerEnvConfig, peer_spaces
from envs.registration import PEER_ENV_ID

CONFIG_FILE = "config.yaml"
"""The run folder's resolved configuration; its ``env`` section is the config the model was trained with."""
CHECKPOINT_DIR = "checkpoints"
"""Folder of a run's periodic checkpoints (``RUN/checkpoints/model_N_steps.zip``)."""
_CHECKPOINT = re.compile(r"model_(\d+)_steps\.zip")


def checkpoint_path(run_dir: str | Path, steps: int) -> Path:
    """Where a run saves its checkpoint at ``steps`` steps."""
    return Path(run_dir) / CHECKPOINT_DIR / f"model_{steps}_steps.zip"


def checkpoints(run_dir: str | Path) -> dict[int, Path]:
    """A run's checkpoints by step count."""
    found = ((_CHECKPOINT.fullmatch(p.name), p) for p in (Path(run_dir) / CHECKPOINT_DIR).glob("model_*_steps.zip"))
    return {int(match[1]): path for match, path in found if match}

RECREATED = ("rollout_buffer_class", "_last_obs", "_last_episode_starts", "_last_original_obs", "ep_info_buffer",
             "ep_success_buffer")
"""Entries loaded as None: MaskablePPO picks its buffer for the spaces; training resets the env and makes fresh
episode statistics."""
REBUILT = ("policy_class", "observation_space", "action_space", "learning_rate", "lr_schedule", "clip_range",
           "clip_range_vf", "policy_kwargs", *RECREATED)
"""The pickled entries a load replaces (:func:`rebuilt_entries` says with what)."""


def rebuilt_entries(ppo: Mapping[str, Any], spaces: tuple[Any, Any]) -> dict[str, Any]:
    """The objects that replace a model file's pickled entries, from the run's ``ppo:`` section and env spaces."""
    from agents.network import SlotPolicy
    from agents.ppo import PPO_DEFAULTS, learning_rate, policy_kwargs

    entries = {
        "policy_class": SlotPolicy,
        "observation_space": spaces[0],
        "action_space": spaces[1],
        "learning_rate": learning_rate(ppo),
        "lr_schedule": learning_rate(ppo),  # SB3 rebuilds it from learning_rate on loading
        "clip_range": ppo.get("clip_range", PPO_DEFAULTS["clip_range"]),
        "clip_range_vf": ppo.get("clip_range_vf", PPO_DEFAULTS["clip_range_vf"]),
        "policy_kwargs": policy_kwargs(ppo),
    }
    return entries | dict.fromkeys(RECREATED)


def run_config_path(model_path: str | Path) -> Path:
    """Where the ``config.yaml`` of the train.py run folder holding ``model_path`` is (beside a model of the run
    folder, or beside the ``checkpoints`` folder of a checkpoint); it may not exist."""
    path = Path(model_path)
    config_path = path.with_name(CONFIG_FILE)
    if path.parent.name == CHECKPOINT_DIR and not config_path.exists():
        config_path = path.parent.with_name(CONFIG_FILE)
    return config_path


def run_config(model_path: str | Path) -> dict[str, Any]:
    """The resolved config (``config.yaml``) of the train.py run folder holding ``model_path`` (a model of the run
    folder or one of its checkpoints)."""
    path = Path(model_path)
    config_path = run_config_path(path)
    if not path.is_file():
        raise ConfigError(f"model {path}: no such file" if not path.exists() else f"model {path}: not a file")
    if not config_path.is_file():
        raise ConfigError(f"model {path}: {CONFIG_FILE} not found beside it (the run folder of train.py)")
    config = read_yaml(config_path, "train.py run config")
    if not isinstance(config, dict) or "env_id" not in config:
        raise ConfigError(f"{config_path}: not a train.py run config (no env_id)")
    return config


def model_spaces(run: Mapping[str, Any]) -> tuple[Any, Any]:
    """(observation space, action space) of the env that run config ``run`` trained on, built without a trace
    where the spaces do not depend on one (the peer-mode env)."""
    env = dict(run.get("env") or {})
    if run["env_id"] == PEER_ENV_ID:
        return peer_spaces(PeerEnvConfig.from_dict(env).slots)
    built = GPUClusterEnv(config=EnvConfig.from_dict(env))
    return built.observation_space, built.action_space


MAX_DATA_BYTES = 16 * 2**20
"""The largest ``data`` entry of a model file, uncompressed (SB3 writes a few KiB) [bytes]."""
MAX_MODEL_BYTES = 2**31
"""The most a model file's entries may hold, uncompressed (a zip bomb claims far more) [bytes]."""


def check_archive(path: str | Path) -> None:
    """Refuse a model file whose entries would unpack to more than :data:`MAX_MODEL_BYTES` (or whose ``data`` to
    more than :data:`MAX_DATA_BYTES`), before anything is unpacked, and anything but a regular file (a device
    such as ``/dev/zero`` would be read for ever); a :class:`ConfigError` naming it. A file that is no zip archive
    passes, for its loader to refuse."""
    if not Path(path).is_file():
        raise ConfigError(f"model {path}: no such file" if not Path(path).exists() else f"model {path}: not a file")
    try:
        with zipfile.ZipFile(path) as archive:
            sizes = {info.filename: info.file_size for info in archive.infolist()}
    except (zipfile.BadZipFile, OSError, EOFError):
        return  # not an archive at all: the loader says so in its own words
    if sizes.get("data", 0) > MAX_DATA_BYTES or sum(sizes.values()) > MAX_MODEL_BYTES:
        raise ConfigError(f"model {path}: its entries unpack to {sum(sizes.values()):,} bytes (data "
                          f"{sizes.get('data', 0):,}); more than a model file holds, refusing to unpack it")


def pickled_entries(path: str | Path) -> list[str]:
    """The entries of a model file's ``data`` that are pickled (read as JSON; nothing is unpickled), the archive's
    sizes checked first (:func:`check_archive`)."""
    check_archive(path)
    try:
        with zipfile.ZipFile(path) as archive:
            data = json.loads(archive.read("data").decode())
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError, json.JSONDecodeError, EOFError, RecursionError) as exc:
        raise ConfigError(f"model {path}: not a readable model file ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"model {path}: not a readable model file (its data is not a JSON object)")
    _check_entry_types(path, data)
    return sorted(k for k, v in data.items() if isinstance(v, dict) and ":serialized:" in v)


def _check_entry_types(path: str | Path, data: Mapping[str, Any]) -> None:
    """Refuse a ``data`` entry whose JSON type is not the one MaskablePPO writes (a number where it writes a number,
    a mapping or null for ``*_kwargs``): SB3 would fail on it deep inside, or later."""
    from agents.ppo import PPO_DEFAULTS

    kinds = {key: (bool,) if isinstance(default, bool) else (int,) if isinstance(default, int) else
             (int, float) if isinstance(default, float) else (dict, type(None))
             for key, default in PPO_DEFAULTS.items() if key.endswith("_kwargs") or isinstance(default, (int, float))}
    kinds |= {"num_timesteps": (int,), "_total_timesteps": (int,), "_n_updates": (int,)}
    for key, allowed in kinds.items():
        if key not in data:
            continue
        value = data[key]
        if isinstance(value, dict) and ":serialized:" in value:
            continue  # a pickled entry: rebuilt from the run's config, never unpickled
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            raise ConfigError(f"model {path}: entry {key!r} is {type(value).__name__} {value!r:.40}, not "
                              f"{' or '.join(t.__name__ for t in allowed)}; not a model file train.py wrote")


def load_model(path: str | Path, run: Mapping[str, Any], env: Any = None, device: str = "cpu") -> Any:
    """The MaskablePPO saved at ``path`` by the run whose config is ``run``, every pickled entry rebuilt (module
    docstring); ``env`` (to continue training) gives the spaces, else they come from the config."""
    unknown = [key for key in pickled_entries(path) if key not in REBUILT]
    if unknown:
        raise ConfigError(f"model {path}: entry {unknown[0]!r} holds pickled code that the project cannot rebuild; "
                          "refusing to load it")
    from sb3_contrib import MaskablePPO

    spaces = (env.observation_space, env.action_space) if env is not None else model_spaces(run)
    custom = rebuilt_entries(dict(run.get("ppo") or {}), spaces)
    try:
        return MaskablePPO.load(str(path), env=env, device=device, custom_objects=custom)
    except (ValueError, KeyError, RuntimeError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError) as exc:
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        if lines[0].startswith("Error(s) in loading state_dict") and len(lines) > 1:
            first = lines[1].strip()
            raise ConfigError(f"model {path}: its weights do not fit the network agents/network.py builds for its "
                              "config (saved by an earlier version of the network, e.g. before the cluster set "
                              f"encoder? retrain it): {first if len(first) <= 160 else first[:160] + '...'}") from None
        raise ConfigError(f"model {path}: cannot be loaded ({type(exc).__name__}: {lines[0]})") from None


def save_model(model: Any, path: str | Path) -> None:
    """Save ``model`` at ``path`` atomically."""
    write_atomically(path, lambda partial: model.save(str(partial)))
