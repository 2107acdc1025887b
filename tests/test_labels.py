"""Labels for figures, tables and reports: metric titles and units, short policy names, wrapped names and the
metrics window's caption (evaluation/labels.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evaluation.aggregate import METRIC_KEYS_DOC
from evaluation.labels import (
    DIMENSIONLESS,
    metric_label,
    metric_title,
    metric_unit,
    policy_label,
    policy_labels,
    window_label,
    wrap_label,
)


@pytest.mark.parametrize(("key", "unit"), [
    ("mean_wait_s", "s"), ("mean_bsld", DIMENSIONLESS), ("utilization", "fraction"), ("n_jobs", "count"),
    ("lost_gpu_hours", "GPU-hours"), ("decision_p99_us", "µs"), ("jain_fairness", "1/n .. 1"), ("no_such_key", ""),
])
def test_metric_unit_is_the_trailing_brackets_of_the_metric_doc(key, unit):
    assert metric_unit(key) == unit


@pytest.mark.parametrize(("key", "title", "label"), [
    ("mean_wait_s", "Mean wait", "Mean wait [s]"),
    ("p95_wait_s", "P95 wait", "P95 wait [s]"),
    ("median_jct_s", "Median JCT", "Median JCT [s]"),
    ("mean_bsld", "Mean bounded slowdown", "Mean bounded slowdown"),
    ("utilization", "GPU utilization", "GPU utilization [fraction]"),
    ("lost_gpu_hours", "Lost GPU-hours", "Lost GPU-hours [GPU-hours]"),
    ("mean_wait_s_top_class", "Mean wait, top priority class", "Mean wait, top priority class [s]"),
    ("decision_p50_us", "Decision latency, median", "Decision latency, median [µs]"),
    ("rejected_cpu_ram", "Rejected CPU RAM", "Rejected CPU RAM [count]"),
    ("queue_len_s", "Queue len", "Queue len"),  # an undocumented key: its words, no unit
])
def test_metric_title_and_label(key, title, label):
    assert (metric_title(key), metric_label(key)) == (title, label)


def test_every_documented_metric_has_a_unit_and_a_short_distinct_title():
    titles = {key: metric_title(key) for key in METRIC_KEYS_DOC}
    assert all(metric_unit(key) for key in METRIC_KEYS_DOC)
    assert all("_" not in title and len(title) <= 40 and title[0].isupper() for title in titles.values())
    assert len(set(titles.values())) == len(titles)


@pytest.mark.parametrize(("name", "label"), [
    ("fifo", "fifo"),
    ("sjf+easy/pack", "sjf+easy/pack"),
    ("rls:wfp3-peer+rlsbackfill", "rls:wfp3-peer+rlsbackfill"),
    ("/home/ann/gpusched/runs/train-default-20261201-101010/model.zip", "train-default-20261201-101010"),
    ("runs/x/best_model.zip", "x (best)"),
    ("rls:runs/x/model.zip+sjf@0.5", "rls:x+sjf@0.5"),
    ("RLS:runs/x/best_model.zip", "RLS:x (best)"),
    ("runs/x/checkpoints/model_2000_steps.zip", "x (2000 steps)"),
    ("runs/x/final.zip", "x (final)"),
    ("model.zip", "model"),
    ("rls:runs/x/model.zip+sjf", "rls:runs/x/model.zip+sjf"),  # a malformed decoding: the name as it is
])
def test_policy_label_names_a_model_by_its_run_folder(name, label):
    assert policy_label(name) == label


def test_policy_labels_keep_colliding_models_apart_with_more_folders():
    names = ["a/x/model.zip", "b/x/model.zip", "b/x/best_model.zip", "fifo", "runs/fifo/model.zip"]
    assert policy_labels(names) == {"a/x/model.zip": "a/x", "b/x/model.zip": "b/x", "b/x/best_model.zip": "x (best)",
                                    "fifo": "fifo", "runs/fifo/model.zip": "runs/fifo"}


def test_policy_labels_fall_back_to_the_full_name_when_folders_run_out():
    labels = policy_labels(["/w/x/model.zip", "w/x/model.zip", "w/x/model.zip"])
    assert labels == {"/w/x/model.zip": "/w/x/model.zip", "w/x/model.zip": "w/x/model.zip"}


_FOLDER = st.sampled_from(["runs", "x", "y", "train-a", "checkpoints", "fifo"])
_MODEL = st.builds(lambda prefix, folders, file, suffix: prefix + "/".join([*folders, file]) + suffix,
                   st.sampled_from(["", "rls:", "/"]), st.lists(_FOLDER, max_size=3),
                   st.sampled_from(["model.zip", "best_model.zip", "model_100_steps.zip"]),
                   st.sampled_from(["", "+sjf@0.5"]))


@given(st.lists(st.one_of(_MODEL, st.sampled_from(["fifo", "x", "x (best)", "rls:x", "runs/x"])), max_size=12))
def test_policy_labels_are_distinct_for_distinct_names(names):
    labels = policy_labels(names)
    assert list(labels) == list(dict.fromkeys(names))
    assert len(set(labels.values())) == len(labels)


@pytest.mark.parametrize(("text", "width", "wrapped"), [
    ("philly_trace.csv.gz[100000:102000]@30 (high)", 20, "philly_trace.csv.gz\n[100000:102000]@30\n(high)"),
    ("openb_pod_list_default.csv[4000:6000]", 16, "openb_pod_list_\ndefault.csv\n[4000:6000]"),
    ("small", 3, "sma\nll"),
    ("small", 40, "small"),
    ("", 5, ""),
])
def test_wrap_label_breaks_where_names_allow(text, width, wrapped):
    assert wrap_label(text, width) == wrapped


@given(st.text(alphabet="ab_[]:@(.)+", max_size=60), st.integers(min_value=1, max_value=30))
def test_wrap_label_keeps_every_character_within_the_width(text, width):
    lines = wrap_label(text, width).split("\n")
    assert "".join(lines) == text
    assert all(len(line) <= width for line in lines)


@pytest.mark.parametrize(("window", "text"), [
    ((0.0, 0.0), ""),
    ((0.1, 0.1), "first 10% and last 10% of the jobs by submit time left out"),
    ((0.0, 0.05), "last 5% of the jobs by submit time left out"),
    ((0.125, 0.0), "first 12.5% of the jobs by submit time left out"),
])
def test_window_label_says_what_the_metrics_window_left_out(window, text):
    assert window_label(window) == text
