"""Actions are validated: every refusal is an ActionRefused with a typed reason and leaves the state untouched."""

from __future__ import annotations

import numpy as np
import pytest

from envs.core import ActionRefused, Job, RefusalReason, SimulationStalled
from envs.scenario import load_cluster
from envs.sim import Simulator


@pytest.fixture
def sim() -> Simulator:
    # tiny: GPUs 0-3 A100 on node 0, 4-7 V100 on node 1; nodes have 32 cores.
    jobs = [
        Job(1, 0, 100, 100, n_gpus=2),
        Job(2, 0, 100, 100, gpu_types=frozenset({"V100"})),
        Job(3, 0, 100, 100, gpu_milli=600),
        Job(4, 0, 100, 100, cpu_milli_per_gpu=20_000, n_gpus=2),
        Job(5, 50, 100, 100),
    ]
    return Simulator(load_cluster("tiny"), jobs)


@pytest.mark.parametrize(
    ("job_id", "gpus", "reason"),
    [
        (99, [0], RefusalReason.UNKNOWN_JOB),
        (5, [0], RefusalReason.NOT_PENDING),  # not submitted yet at t = 0
        (1, [0], RefusalReason.WRONG_GPU_COUNT),
        (1, [0, 0], RefusalReason.BAD_GPU_INDEX),
        (1, [0, 8], RefusalReason.BAD_GPU_INDEX),
        (1, [-1, 0], RefusalReason.BAD_GPU_INDEX),
        (1, [0.5, 1.5], RefusalReason.BAD_GPU_INDEX),
        (2, [0], RefusalReason.GPU_TYPE),  # A100 for a V100-only job
    ],
)
def test_invalid_start_is_refused_with_reason(sim, job_id, gpus, reason):
    before = sim.view.gpu_free_milli.copy()
    with pytest.raises(ActionRefused) as info:
        sim.start(job_id, gpus)
    assert info.value.reason is reason
    assert f"job {job_id}" in str(info.value)
    assert (sim.view.gpu_free_milli == before).all() and len(sim.view.pending) == 4


def test_busy_gpu_and_shared_gpu_capacity(sim):
    sim.start(1, [0, 1])
    with pytest.raises(ActionRefused) as info:
        sim.start(3, [1])
    assert info.value.reason is RefusalReason.GPU_BUSY
    sim.start(3, [2])  # 600 milli of GPU 2; 400 left
    assert sim.view.gpu_free_milli[2] == 400 and sim.view.node_free_gpus[0] == 1


def test_started_job_cannot_start_twice(sim):
    sim.start(1, [0, 1])
    with pytest.raises(ActionRefused) as info:
        sim.start(1, [2, 3])
    assert info.value.reason is RefusalReason.NOT_PENDING


def test_cpu_shortage_on_a_node_is_refused(sim):
    # Job 4 needs 20 cores per GPU: two GPUs on one 32-core node need 40 cores.
    with pytest.raises(ActionRefused) as info:
        sim.start(4, [0, 1])
    assert info.value.reason is RefusalReason.CPU_RAM
    sim.start(4, [0, 4])  # one GPU on each node: 20 cores each
    assert list(sim.view.node_free_cpu_milli) == [12_000, 12_000]


def test_view_cannot_change_the_state(sim):
    with pytest.raises(ValueError):
        sim.view.gpu_free_milli[0] = 0
    with pytest.raises(TypeError):
        sim.view.pending[1] = None  # type: ignore[index]


def test_waiting_forever_raises_stalled():
    sim = Simulator(load_cluster("tiny"), [Job(1, 0, 10, 10)])
    with pytest.raises(SimulationStalled):
        sim.wait()


def test_decision_points_follow_events():
    # Arrivals at 0 and 5; the first job ends at 10: decision points at t = 0, 5 and 10.
    sim = Simulator(load_cluster("tiny"), [Job(1, 0, 10, 10, n_gpus=8), Job(2, 5, 10, 10)])
    assert sim.time_s == 0 and list(sim.view.pending) == [1]
    sim.start(1, list(range(8)))
    sim.wait()
    assert sim.time_s == 5 and list(sim.view.pending) == [2]
    assert sim.view.running[1].expected_end_s == 10
    sim.wait()
    assert sim.time_s == 20 and not sim.view.running  # 8 GPUs, slowest V100 at 0.5: 10 / 0.5 = 20 s
    sim.start(2, [0])
    sim.wait()
    assert sim.done and sim.time_s == 30


def test_simulator_keeps_its_own_copy_of_the_allocation():
    # A policy that reuses its buffer after a start must not change what the started job holds.
    sim = Simulator(load_cluster("tiny"), [Job(1, 0, 10, 10, n_gpus=2), Job(2, 0, 10, 10, n_gpus=2)])
    buffer = np.array([0, 2])
    sim.start(1, buffer)
    buffer[:] = [1, 3]
    sim.start(2, buffer)
    assert sim.view.running[1].gpus == (0, 2) and sim.view.running[2].gpus == (1, 3)
    with pytest.raises(ValueError):
        sim.view.running[2].gpus.index[0] = 5  # read-only


def test_ragged_allocation_is_refused_as_bad_index():
    sim = Simulator(load_cluster("tiny"), [Job(1, 0, 10, 10, n_gpus=2)])
    with pytest.raises(ActionRefused) as info:
        sim.start(1, [[0, 1], [2]])
    assert info.value.reason is RefusalReason.BAD_GPU_INDEX
