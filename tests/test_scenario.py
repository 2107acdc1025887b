"""Spec strings into a world (envs/scenario.py): workload and cluster specs, the natural cluster of a trace, the
default runtime model, and errors that say what to give."""

from __future__ import annotations

from pathlib import Path

import pytest
from paths import LUBLIN, ROOT, require

from envs.core import ConfigError, RuntimeConfig
from envs.scenario import (
    DEFAULT_CLUSTER,
    TraceSpec,
    default_runtime_model,
    load_cluster,
    load_trace_once,
    scenario,
    scenario_cluster,
    trace_spec,
)

SWF = """; MaxProcs: 4
1 0 -1 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1
2 5 -1 30 4 -1 -1 4 40 -1 1 2 1 -1 -1 -1 -1 -1
3 9 -1 5 1 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1 -1
"""


@pytest.fixture
def swf(tmp_path: Path) -> Path:
    path = tmp_path / "four.swf"
    path.write_text(SWF)
    return path


@pytest.mark.parametrize(("text", "expected"), [
    ("default", None),
    ("configs/workloads/small.yaml", None),
    ("swf:a/b.swf", TraceSpec("swf", "a/b.swf")),
    ("philly:x.csv.gz", TraceSpec("philly", "x.csv.gz")),
    ("openb:p.csv", TraceSpec("openb", "p.csv")),
    ("tiresias:60_job.csv", TraceSpec("tiresias", "60_job.csv")),
    ("c:/windows/path.yaml", None),  # not a trace format: a synthetic spec
])
def test_trace_spec_tells_traces_from_synthetic_workloads(text, expected):
    assert trace_spec(text) == expected


def test_a_trace_spec_without_a_path_says_what_to_give():
    with pytest.raises(ConfigError, match="swf: needs a trace path"):
        trace_spec("swf:")


@pytest.mark.parametrize(("spec", "nodes", "gpus"), [
    ("tiny", 2, 8), ("swf:16", 1, 16), (str(ROOT / "configs" / "clusters" / "tiny.yaml"), 2, 8)])
def test_cluster_specs(spec, nodes, gpus):
    cluster = load_cluster(spec)
    assert (cluster.n_nodes, cluster.n_gpus) == (nodes, gpus)


@pytest.mark.parametrize(("spec", "message"), [("swf:many", "expected swf:N"), ("nope", "no such preset"),
                                               ("", "empty name")])
def test_bad_cluster_specs_are_errors_naming_them(spec, message):
    with pytest.raises(ConfigError, match=message):
        load_cluster(spec)


def test_auto_or_no_cluster_is_the_traces_own_machine_or_the_default(swf):
    trace = trace_spec(f"swf:{swf}")
    jobs = load_trace_once(str(swf), "swf")
    for cluster in (None, "", "auto"):
        assert scenario_cluster(cluster, trace, jobs).n_gpus == 4  # the MaxProcs header
        assert scenario_cluster(cluster, None, None).name == DEFAULT_CLUSTER
    assert scenario_cluster("tiny", trace, jobs).name == "tiny"


def test_a_trace_that_does_not_name_its_machine_needs_a_cluster(tmp_path):
    path = tmp_path / "headless.swf"
    path.write_text(SWF.split("\n", 1)[1])
    with pytest.raises(ConfigError, match=r"cannot tell which cluster .* no MaxProcs/MaxNodes header.*give a cluster"):
        scenario_cluster(None, trace_spec(f"swf:{path}"), load_trace_once(str(path), "swf"))


def test_swf_traces_run_rigid_and_everything_else_full():
    assert default_runtime_model(TraceSpec("swf", "x")) == "rigid"
    assert default_runtime_model(TraceSpec("philly", "x")) == default_runtime_model(None) == "full"
    assert RuntimeConfig.named("rigid") == RuntimeConfig.rigid() and RuntimeConfig.named("full") == RuntimeConfig()
    with pytest.raises(ConfigError, match="runtime model 'fast'"):
        RuntimeConfig.named("fast")


def test_a_trace_scenario_is_windowed_compressed_and_rigid(swf):
    world = scenario(f"swf:{swf}", window=(1, 2), load=2.0)
    assert [j.job_id for j in world.workload.jobs] == [2, 3]
    assert [j.submit_time_s for j in world.workload.jobs] == [5.0, 7.0]  # submits kept, gaps halved
    assert world.runtime == RuntimeConfig.rigid() and world.cluster.n_gpus == 4


def test_a_synthetic_scenario_is_generated_for_its_cluster_and_seed():
    a, b = scenario("small", "tiny", seed=3), scenario("small", "tiny", seed=3)
    assert a.workload.jobs == b.workload.jobs and a.cluster.name == "tiny" and a.runtime == RuntimeConfig()
    assert scenario("small", "tiny", seed=4).workload.jobs != a.workload.jobs


def test_traces_are_loaded_once_per_process():
    require(LUBLIN)
    assert load_trace_once(str(LUBLIN), "swf") is load_trace_once(str(LUBLIN.parent / "." / LUBLIN.name), "swf")
