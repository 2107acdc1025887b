"""The speed page's script (docs/results/speed.py): which goals it calls met, from hand-made measurements."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def speed() -> Any:
    spec = importlib.util.spec_from_file_location("speed_page", ROOT / "docs" / "results" / "speed.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _latency(policy: str, gpus: int, per_s: float, p99_us: float) -> dict[str, Any]:
    return {"policy": policy, "gpus": gpus, "decisions": 100, "decisions_per_s": per_s, "p50_us": 100.0,
            "p99_us": p99_us, "first_call_us": 1000.0}


def _raw(speed: Any, slurm_ratio: float, easy_p99_us: float) -> dict[str, Any]:
    latency = [_latency(p, 10_000, 1500.0, 1000.0) for p in speed.EASY_FAMILY + speed.K8S_FAMILY]
    latency[0]["p99_us"] = easy_p99_us
    latency += [_latency(p, 4096, 150.0, 1000.0) for p in speed.HEAVY_FAMILY if p != "fcfs+conservative"]
    latency.append({"policy": "fcfs+conservative", "gpus": 4096, "decisions": 0, "first_call_us": 9.9e6})
    return {"machine": "test", "commit": "abc1234",
            "slurm": {"old_s": 100.0, "new_s": 100.0 / slurm_ratio, "fcfs_easy_s": 1.0, "ratio": slurm_ratio},
            "latency": latency,
            "rlscheduler": {"runs": 200, "wall_s": 601.0, "sim_s_by_kind": {"peer orders": 1.0}},
            "vec": {"event_steps_per_s": 1000, "vec_steps_per_s": 30000, "ratio": 30.0, "breakdown": {}},
            "env": {"pairs": [{"old": 1.0, "new": 1.0}], "ratio_median": 1.0, "ratio_min": 1.0, "ratio_max": 1.0},
            "peer": [{"mode": "no backfill", "jobs": 10, "jobs_per_s": 100, "peer_jobs_per_s": 10, "ratio": 10.0},
                     {"mode": "rlsbackfill", "jobs": 10, "jobs_per_s": 100}],
            "simulator": {"sim_wall_s": 10.0}, "profiles": {}}


def test_goals_are_met_at_their_thresholds_and_missed_past_them(speed: Any) -> None:
    goals = {g["part"]: g for g in speed.goals(_raw(speed, slurm_ratio=20.0, easy_p99_us=5000.0))}
    met = {part for part, g in goals.items() if g["met"]}
    assert any("`slurm`" in part for part in met)  # exactly 20x
    assert any("`fcfs+easy`" in part for part in met)  # p99 exactly 5 ms
    assert any("batched engine" in part for part in met)  # exactly 30x
    assert any("event env" in part for part in met)  # exactly as fast
    assert any("no backfill" in part for part in met)  # exactly 10x
    missed = {part for part, g in goals.items() if not g["met"]}
    assert any("`fcfs+conservative`" in part for part in missed)  # no decision after the first call
    assert any("rlscheduler" in part for part in missed)  # 10 min and 1 s
    assert any("100,000 jobs" in part for part in missed)  # not under 10 s
    unmeasured = next(g for part, g in goals.items() if "rlsbackfill" in part)  # no peer beside it
    assert not unmeasured["met"] and unmeasured["profile"] is None and "not measured" in unmeasured["now"]


def test_a_goal_just_past_its_threshold_is_missed(speed: Any) -> None:
    goals = speed.goals(_raw(speed, slurm_ratio=19.99, easy_p99_us=5000.1))
    missed = [g["part"] for g in goals if not g["met"]]
    assert any("`slurm`" in part for part in missed)
    assert any("`fcfs+easy`" in part for part in missed)


def test_the_page_counts_the_goals_and_names_every_missed_profile(speed: Any) -> None:
    raw = _raw(speed, slurm_ratio=25.0, easy_p99_us=1000.0)
    text = speed.page(raw, "2026-12-02")
    goals = speed.goals(raw)
    assert f"**{sum(g['met'] for g in goals)} of {len(goals)} goals met.**" in text
    assert "### `fcfs+conservative` at 4,096 GPUs" in text and "Not profiled." in text


@pytest.mark.parametrize(("content", "says"), [(None, "cannot read"), ('{"x":', "cannot read"),
                                               ('{"machine": "m"}', "lacks commit, slurm")])
def test_a_bad_saved_measurement_is_a_one_line_error(tmp_path, content, says):
    raw = tmp_path / "speed.json"
    if content is not None:
        raw.write_text(content)
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "results" / "speed.py"), "--from-raw", "--raw",
                           str(raw), "--date", "1999-01-01"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) <= 3  # usage line(s), then the error
    assert done.stderr.strip().splitlines()[-1].startswith("speed.py: error: argument --raw:") and says in done.stderr
    assert not (ROOT / "docs" / "results" / "1999-01-01-speed.md").exists()
