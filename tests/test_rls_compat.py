"""Peer compatibility mode: RLScheduler's heuristic results reproduced job for job (envs/peer/engine.py).

The reference (``../shared/reference``) holds what the unmodified peer simulator computes; see its SEMANTICS.md.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from paths import LUBLIN, REFERENCE, TRACES, require

from baselines.rls import RLS_DOCS, rls_policy, sjf_key, static_order, unicep_peer_key, wfp3_peer_key
from envs.core.errors import ConfigError, SimulationStalled, TraceFormatError
from envs.peer.engine import evaluate_peer, gym_seed_words, peer_start_indices, run_sequence
from envs.peer.swf import PeerJob, PeerMachine, divide_submits, load_swf_peer

NASA = TRACES / "pwa-nasa-ipsc" / "NASA-iPSC-1993-3.1-cln.swf.gz"
TRACE_FILES = {"lublin256": LUBLIN, "nasa_submitdiv2": NASA, "nasa_submitdiv60": NASA}
SUBMIT_DIVISORS = {"nasa_submitdiv2": 2, "nasa_submitdiv60": 60}
"""The derived references: every submit time replaced by ``submit // divisor`` (div60: many same-second submits)."""
PEER_NAMES = {"FCFS": "fcfs", "SJF": "sjf", "F1": "f1", "WFP3": "wfp3-peer", "UNICEP": "unicep-peer"}
MODES = {False: ("no_backfill", "avg_bsld"), True: ("backfill_rlscheduler", "avg_bsld_backfill_rlscheduler")}
README_LUBLIN1 = {  # the peer's published Lublin-1 row (reference README)
    False: {"FCFS": 7273.77, "SJF": 277.35, "WFP3": 19753.53, "UNICEP": 22274.74, "F1": 258.37},
    True: {"FCFS": 235.82, "SJF": 73.31, "WFP3": 133.87, "UNICEP": 307.23, "F1": 75.07},
}


@pytest.fixture(scope="module")
def peer_data() -> dict[str, dict]:
    """Per reference trace: the peer-read trace, the reference JSON and the all-starts JSON (loaded once)."""
    require(REFERENCE, *TRACE_FILES.values())
    data = {}
    for stem, path in TRACE_FILES.items():
        trace = load_swf_peer(path)
        data[stem] = {
            "trace": divide_submits(trace, SUBMIT_DIVISORS[stem]) if stem in SUBMIT_DIVISORS else trace,
            "reference": json.loads((REFERENCE / f"{stem}_reference.json").read_text()),
            "starts": json.loads((REFERENCE / f"{stem}_all_starts.json").read_text()),
        }
    return data


def test_gym_seeding_hashes_the_seed_with_sha512():
    assert gym_seed_words(1) == [2739863373, 598274112]


@pytest.mark.parametrize("stem", TRACE_FILES)
def test_sequence_start_indices_match_the_reference(peer_data, stem):
    ref = peer_data[stem]["reference"]
    trace = peer_data[stem]["trace"]
    assert len(trace.jobs) == ref["n_parsed_jobs"]
    assert (trace.machine.nodes, trace.machine.procs_per_node) == (ref["cluster_nodes"], ref["procs_per_node"])
    assert list(peer_start_indices(len(trace.jobs))) == [s["start_index"] for s in ref["sequences"]]


@pytest.mark.parametrize("backfill", [False, True], ids=["nobackfill", "rlsbackfill"])
@pytest.mark.parametrize("heuristic", PEER_NAMES)
@pytest.mark.parametrize("stem", TRACE_FILES)
def test_every_sequence_matches_the_peer_job_for_job(peer_data, stem, heuristic, backfill):
    mode, avg_key = MODES[backfill]
    ref, starts = peer_data[stem]["reference"], peer_data[stem]["starts"][mode][heuristic]
    choose, _ = rls_policy(PEER_NAMES[heuristic])
    evaluation = evaluate_peer(peer_data[stem]["trace"], choose, backfill)
    for result, sequence, expected_starts in zip(evaluation.results, ref["sequences"], starts, strict=True):
        assert result.avg_bsld == pytest.approx(sequence[avg_key][heuristic], rel=1e-12, abs=0)
        assert list(result.start_times) == expected_starts
    assert evaluation.mean_avg_bsld == pytest.approx(ref[f"mean_{avg_key}"][heuristic], rel=1e-12, abs=0)
    if stem == "lublin256":
        assert round(evaluation.mean_avg_bsld, 2) == README_LUBLIN1[backfill][heuristic]


@pytest.mark.parametrize("heuristic", ["FCFS", "SJF"])
@pytest.mark.parametrize("stem", ["lublin256", "nasa_submitdiv2"])  # the references with sequence 0's job rows
def test_start_order_of_sequence_0_matches_the_peer(peer_data, stem, heuristic):
    ref = peer_data[stem]["reference"]
    rows = ref[f"{heuristic.lower()}_seq0_jobs"]
    start = ref["sequences"][0]["start_index"]
    jobs = peer_data[stem]["trace"].jobs[start : start + len(rows)]
    result = run_sequence(jobs, peer_data[stem]["trace"].machine, rls_policy(PEER_NAMES[heuristic])[0])
    assert [r["swf_job_id"] for r in rows] == [j.job_id for j in jobs]
    assert [result.start_order.index(i) for i in range(len(rows))] == [r["start_order"] for r in rows]


@pytest.mark.parametrize(
    ("name", "backfill", "expected"),
    [("wfp3", False, 337.34), ("wfp3", True, 126.50), ("unicep", False, 381.71), ("unicep", True, 103.10)],
)
def test_textbook_orders_give_the_clean_room_means_on_lublin(peer_data, name, backfill, expected):
    choose, _ = rls_policy(name)
    assert round(evaluate_peer(peer_data["lublin256"]["trace"], choose, backfill).mean_avg_bsld, 2) == expected


# --- small hand-computed cases (machine of 4 one-processor nodes) -----------------------------------------------

MACHINE = PeerMachine(nodes=4, procs_per_node=1.0)
SJF = static_order(sjf_key)


def jobs_of(*rows: tuple[int, int, int, int]) -> list[PeerJob]:
    """Jobs from (submit, run, request, procs) rows, numbered from 1 [s]."""
    return [PeerJob(i, s, run, req, procs) for i, (s, run, req, procs) in enumerate(rows, start=1)]


def test_backfill_pass_tries_equal_submits_in_the_order_the_key_sort_left():
    # Three one-processor nodes, SJF with the peer's backfill. Jobs (submit, run = request, procs):
    # 1 (0, 8, 3) starts at 0 alone. 2 (0, 20, 1) is decided alone next and blocks (shadow 8, job 1's end); 3 (0, 2,
    # 3), 4 (2, 8, 1) and 5 (2, 3, 2) arrive meanwhile, and no pass can start them (no node is free until 8, and at
    # 8 no estimate ends before the shadow). At 8 job 1 ends and job 2 starts (2 nodes free). The decision at 8
    # sorts the queue [3, 4, 5] by (request, submit) in place: [3, 5, 4]; 3 (3 nodes) blocks, with shadow 28 (job
    # 2's end). The pass sorts [5, 4] by submit: both submitted at 2, so the order stays [5, 4]: job 5 (8 + 3 < 28,
    # 2 nodes) starts at 8 and job 4 no longer fits. Job 5 ends at 11: job 4 (11 + 8 < 28) starts at 11.
    # In arrival order the pass would have tried 4 first: 4 at 8, then 5 at 16 (4 ends at 16).
    machine = PeerMachine(nodes=3, procs_per_node=1.0)
    jobs = jobs_of((0, 8, 8, 3), (0, 20, 20, 1), (0, 2, 2, 3), (2, 8, 8, 1), (2, 3, 3, 2))
    assert run_sequence(jobs, machine, SJF, backfill=True).start_times == (0, 8, 28, 11, 8)


def test_a_key_order_sorts_the_queue_in_place_and_keeps_ties_in_list_order():
    by_request = static_order(lambda job: job.request)
    jobs = jobs_of((0, 5, 5, 1), (1, 9, 9, 1), (2, 5, 5, 1), (3, 1, 1, 1))
    queue = [3, 2, 1, 0]  # positions, as earlier sorts may have left them
    by_request.sorter(jobs)(queue, 10)
    assert queue == [3, 2, 0, 1]  # request 1, then the two 5 s jobs in the order they were (2 before 0), then 9
    assert by_request([jobs[p] for p in [1, 2, 0]], 10) == 1  # as a plain choose: the first smallest key (job 2)


def test_committed_job_keeps_its_choice_when_a_better_newcomer_arrives():
    # A holds 3 nodes until 100; B (2 nodes) is committed at 10 and blocks; C (1 node, shorter) fits at 20 and
    # ranks first for SJF, but the choice is not revisited: C starts after B.
    jobs = jobs_of((0, 100, 100, 3), (10, 50, 50, 2), (20, 5, 5, 1))
    result = run_sequence(jobs, MACHINE, SJF)
    assert result.start_times == (0, 100, 100)
    assert result.start_order == (0, 1, 2)


def test_simultaneous_arrivals_into_an_empty_queue_are_decided_one_at_a_time():
    # B and C both arrive at 10 into an empty queue; B, first in the trace, is decided on alone and blocks,
    # although SJF would rank C (which fits) first if both were ranked together.
    jobs = jobs_of((0, 100, 100, 2), (10, 50, 50, 3), (10, 1, 1, 1))
    assert run_sequence(jobs, MACHINE, SJF).start_times == (0, 100, 100)


def test_shadow_is_computed_once_per_blocking_episode():
    # X (2 nodes, est. end 50) and A (2 nodes, est. end 101, but done at 11) run; C (3 nodes) blocks at 2 with
    # shadow 101. After A ends early a recomputed shadow would be 50 and D (11 + 60 >= 50) would wait; with the
    # shadow fixed at 101, D backfills at 11 and, holding 2 nodes until 71, delays C past X's end.
    jobs = jobs_of((0, 50, 50, 2), (1, 10, 100, 2), (2, 10, 10, 3), (5, 60, 60, 2))
    assert run_sequence(jobs, MACHINE, SJF, backfill=True).start_times == (0, 1, 71, 11)
    assert run_sequence(jobs, MACHINE, SJF).start_times == (0, 1, 50, 60)


def test_arrival_is_processed_before_a_completion_at_the_same_instant():
    # With backfilling the order is visible. At 10, D and E arrive before A's completion: the pass after E's
    # arrival sees 1 free node, so E (1 node) backfills and D (2 nodes) does not; A's completion then lets D
    # backfill, also at 10. Completions first would have started D before E.
    jobs = jobs_of((0, 10, 10, 2), (0, 100, 100, 1), (1, 10, 10, 4), (10, 20, 20, 2), (10, 5, 5, 1))
    result = run_sequence(jobs, MACHINE, SJF, backfill=True)
    assert result.start_times == (0, 0, 100, 10, 10)
    assert result.start_order == (0, 1, 4, 3, 2)


def test_a_job_larger_than_the_machine_stalls():
    with pytest.raises(SimulationStalled, match="needs 5 nodes"):
        run_sequence(jobs_of((0, 10, 10, 5)), MACHINE, SJF)


def test_bounded_slowdown_is_floored_at_one_and_uses_a_ten_second_threshold():
    # Job 2 waits 10 s behind job 1 and runs 5 s: (10 + 5) / 10 = 1.5; job 1 runs 5 s without waiting: 1.
    result = run_sequence(jobs_of((0, 10, 10, 4), (0, 5, 5, 4)), MACHINE, SJF)
    assert result.start_times == (0, 10)
    assert result.avg_bsld == pytest.approx((1 + 1.5) / 2)


# --- reading rules and names ------------------------------------------------------------------------------------

SWF_TEXT = """; MaxNodes: 8
; MaxProcs: 16
3 30 -1 100 2 -1 -1 4 -1 -1 1 1 1 -1 0 -1 -1 -1
1 10 -1 0 1 -1 -1 1 50 -1 1 1 1 -1 0 x -1 -1
2 20 -1 -1 3 1.5 -1 1 -1 -1 1 1 1 -1 0 -1 -1 -1
4 40 -1 7 1 -1 -1 -1 5 -1 1 1 1 -1 0 -1 -1 -1 99
"""


def test_peer_reading_rules(tmp_path):
    path = tmp_path / "t.swf"
    path.write_text(SWF_TEXT)
    trace = load_swf_peer(path)
    assert trace.machine == PeerMachine(nodes=8, procs_per_node=2.0)
    assert trace.skipped == {"zero_runtime": 1}
    rows = [(j.job_id, j.submit, j.run, j.request, j.procs) for j in trace.jobs]
    assert rows == [(2, 20, 10, -1, 3), (3, 30, 100, 100, 4), (4, 40, 7, 5, 1)]  # sorted by id; -1 run reads as 10
    assert [trace.machine.nodes_for(j.procs) for j in trace.jobs] == [2, 2, 1]
    assert [j.submit for j in divide_submits(trace, 2).jobs] == [10, 15, 20]


RECORD = "7 0 -1 10 1 -1 -1 1 -1 -1 1 1 1 -1 0 -1 -1 -1\n"  # a valid record: job 7, run 10 s, 1 processor


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("; MaxNodes: 4\n" + RECORD.replace(" -1\n", "\n"), "line 2: 17 fields"),
        ("; MaxNodes: 4\n" + RECORD.replace(" 10 ", " 10.5 "), "line 2: field 4 '10.5'"),
        ("; MaxNodes: 4\n\n" + RECORD, "line 2: 0 fields"),
        ("; MaxNodes: many\n", "line 1: header MaxNodes"),
        ("; MaxProcs: 4\n" + RECORD, "no '; MaxNodes:' header"),
        ("; MaxNodes: 4\n" + RECORD * 2, "line 3: job id 7 repeats the id of line 2"),
    ],
)
def test_what_the_peer_cannot_read_is_a_trace_format_error(tmp_path, text, message):
    path = tmp_path / "bad.swf"
    path.write_text(text)
    with pytest.raises(TraceFormatError, match=message):
        load_swf_peer(path)


def test_peer_static_keys_reproduce_the_bug():
    early, late = PeerJob(1, 0, 10, 100, 4), PeerJob(2, 1000, 10, 100, 4)
    assert wfp3_peer_key(early) < wfp3_peer_key(late)  # ((s + 1) / r)^3 * n: earlier submit first, whatever the clock
    assert unicep_peer_key(PeerJob(3, 0, 10, 100, 1)) > unicep_peer_key(late)  # one-processor jobs go last


@pytest.mark.parametrize("name", ["fcfs", "rls:sjf+rlsbackfill", "WFP3-peer+rlsbackfill", "unicep"])
def test_rls_policy_parses_names_with_or_without_prefix(name):
    choose, backfill = rls_policy(name)
    assert callable(choose)
    assert backfill == name.endswith("+rlsbackfill")


@pytest.mark.parametrize("name", ["easy", "fcfs+easy", "fcfs+rlsbackfill+x", "rls:"])
def test_unknown_rls_policy_names_list_the_known_ones(name):
    with pytest.raises(ConfigError, match="known orders: fcfs, sjf, f1, wfp3-peer, unicep-peer, wfp3, unicep, saf"):
        rls_policy(name)


def test_every_order_and_the_backfill_have_a_one_line_doc():
    assert set(RLS_DOCS) == {"fcfs", "sjf", "f1", "wfp3-peer", "unicep-peer", "wfp3", "unicep", "saf",
                             "ORDER/BY@FRACTION", "rlsbackfill"}
    assert all(doc and "\n" not in doc for doc in RLS_DOCS.values())


# --- orders of ours in the peer's world: smallest area first and two-stage orders ----------------------------------

def test_two_stage_orders_pick_by_hand():
    # (submit, run, request, procs): areas 800, 640, 100, 320; requests 100, 10, 50, 20
    queue = jobs_of((0, 1, 100, 8), (1, 1, 10, 64), (2, 1, 50, 2), (3, 1, 20, 16))
    picks = {name: rls_policy(name)[0](queue, 10) for name in
             ("sjf", "saf", "sjf/saf@0.5", "sjf/saf@0.75", "saf/sjf@0.25", "sjf/saf@0.01")}
    # SAF's first half is {C, D}: SJF's first of them is D; three quarters add B, the shortest of all
    assert picks == {"sjf": 1, "saf": 2, "sjf/saf@0.5": 3, "sjf/saf@0.75": 1, "saf/sjf@0.25": 1, "sjf/saf@0.01": 2}


def test_two_stage_orders_reduce_to_one_stage_at_the_ends():
    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        queue = jobs_of(*[(int(rng.integers(0, 50)), 1, int(rng.integers(1, 30)), int(rng.integers(1, 9)))
                          for _ in range(n)])
        now = 60
        for order, by in (("sjf", "f1"), ("f1", "saf"), ("wfp3", "sjf")):
            assert rls_policy(f"{order}/{by}@1")[0](queue, now) == rls_policy(order)[0](queue, now)
            assert rls_policy(f"{order}/{by}@1e-6")[0](queue, now) == rls_policy(by)[0](queue, now)


@pytest.mark.parametrize(("name", "message"), [
    ("sjf/f1", "unknown"), ("sjf/nope@0.5", "unknown"), ("sjf/f1@0", "fraction must be"),
    ("sjf/f1@1.5", "fraction must be"), ("sjf/f1@half", "not a number"), ("sjf/f1@0.5+easy", "unknown"),
])
def test_two_stage_order_names_are_checked(name, message):
    with pytest.raises(ConfigError, match=message):
        rls_policy(name)
