"""The kube-scheduler extender over real HTTP on localhost: requests written in the upstream wire format
(``staging/src/k8s.io/kube-scheduler/extender/v1/types.go``; no kube-scheduler binary can be installed here), answers
computed by hand from the fixtures, bad requests, the time budget, files read again, and the example config.

The cluster (``tests/data/exports/kubectl_nodes.json``, in its order) and what ``tests/data/extender/pods.json``
holds on it, in ``nvidia.com/gpu`` devices:

=============================  =======  ====  =====================================================
node                           devices  free  held by
=============================  =======  ====  =====================================================
gke-a100-pool-7f3c-0           8        2     train-big 4 (Running), train-bound 2 (Pending, bound)
gke-t4-pool-19ab-0             1        1     (cordoned: kube-scheduler's business, not the extender's)
gke-cpu-pool-2d1e-0            0        0     web (no GPU)
gke-mig-pool-5c2a-0            28       8     mig-sweep 12 + 8 (single strategy: 28 1g.5gb instances)
ip-10-0-3-17.ec2.internal      6        1     h100-job 5; h100-notebook's MIG instance is not a device
=============================  =======  ====  =====================================================

Not held: train-done (Succeeded), train-waiting (no node); old-node-pod's node is not in the cluster.
"""

from __future__ import annotations

import copy
import http.client
import json
import os
import shutil
import threading
import time
from urllib.parse import urlparse

import pytest
import yaml
from paths import ROOT

from bridges.extender import ExtenderServer, main
from bridges.extender_verbs import VERBS, Extender, placement_rule
from envs.core.errors import ConfigError
from envs.placement import pack

DATA = ROOT / "tests" / "data" / "extender"
NODES = ROOT / "tests" / "data" / "exports" / "kubectl_nodes.json"
CONFIG = ROOT / "configs" / "kube-scheduler" / "extender.yaml"
A100, T4, CPU, MIG, H100 = ("gke-a100-pool-7f3c-0", "gke-t4-pool-19ab-0", "gke-cpu-pool-2d1e-0",
                            "gke-mig-pool-5c2a-0", "ip-10-0-3-17.ec2.internal")


def fixture(name: str) -> dict:
    return json.loads((DATA / name).read_text())


@pytest.fixture
def serve():
    """``serve(rule=..., pods=..., budget_s=..., max_body_bytes=...)`` starts an extender on a free port of
    127.0.0.1 in a thread and returns the port; every server is stopped after the test."""
    running = []

    def start(rule="pack", pods=DATA / "pods.json", budget_s=2.0, rule_name=None, **server_options):
        rule_fn = placement_rule(rule) if isinstance(rule, str) else rule
        extender = Extender(NODES, pods, rule_fn, rule_name or str(rule), budget_s)
        server = ExtenderServer(("127.0.0.1", 0), extender, **server_options)
        thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)  # quick to stop
        thread.start()
        running.append((server, thread))
        return server.server_address[1]

    yield start
    for server, thread in running:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def post(port: int, verb: str, body, prefix: str = "/gpusched") -> tuple[int, object]:
    """(status, JSON answer) of POSTing ``body`` (bytes, or an object sent as JSON) to ``prefix/verb``."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", f"{prefix}/{verb}", body=data, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_filter_of_node_names_keeps_the_nodes_with_room_and_says_why_the_others_fail(serve):
    status, answer = post(serve(), "filter", fixture("filter_nodenames.json"))  # the pod asks for 2 GPUs
    assert status == 200
    assert answer == {
        "Nodes": None,
        "NodeNames": [A100, MIG],  # 2 and 8 free, in the request's order
        "FailedNodes": {H100: "pack: no room for 2 nvidia.com/gpu (1 of 6 free)"},  # preemption could help
        "FailedAndUnresolvableNodes": {T4: "1 nvidia.com/gpu allocatable, the pod asks for 2",
                                       CPU: "0 nvidia.com/gpu allocatable, the pod asks for 2",
                                       "gke-new-pool-9f00-0": "unknown node"},
        "Error": "",
    }


def test_filter_of_node_objects_reads_their_allocatable_and_returns_them_unchanged(serve):
    request = fixture("filter_nodes.json")  # the H100 node now reports 8 full GPUs (MIG switched off): 3 free
    status, answer = post(serve(), "filter", request)
    assert status == 200
    a100, _, h100 = request["Nodes"]["items"]  # the T4 node cannot take 2
    assert answer == {"Nodes": {"metadata": {}, "items": [a100, h100]}, "NodeNames": None, "FailedNodes": {},
                      "FailedAndUnresolvableNodes": {T4: "1 nvidia.com/gpu allocatable, the pod asks for 2"},
                      "Error": ""}


@pytest.mark.parametrize("rule, scores", [
    # free: a100 2, t4 1, mig 8, h100 1; the rule's choices in order score 10, 7, 4, 1; the CPU node cannot
    ("pack", {A100: 4, T4: 10, CPU: 0, MIG: 1, H100: 7}),  # fewest free first, ties by node order
    ("spread", {A100: 7, T4: 4, CPU: 0, MIG: 10, H100: 1}),  # most free first
    ("firstfit", {A100: 10, T4: 7, CPU: 0, MIG: 4, H100: 1}),  # node order
    # stranded GPUs of the default mix change by -5 (h100), -1 (a100), 0 (t4), +7 (mig): least first
    ("fragmentation", {A100: 7, T4: 4, CPU: 0, MIG: 1, H100: 10}),
    # MostAllocated on the GPU alone (CPU and memory are kube-scheduler's): t4, h100 100 %, a100 87, mig 75
    ("k8s:mostallocated", {A100: 4, T4: 10, CPU: 0, MIG: 1, H100: 7}),
    ("k8s:leastallocated", {A100: 7, T4: 4, CPU: 0, MIG: 10, H100: 1}),
])
def test_prioritize_scores_the_rules_order_of_preference_from_10_down_to_1(serve, rule, scores):
    status, answer = post(serve(rule), "prioritize", fixture("prioritize_nodenames.json"))  # the pod asks for 1
    assert status == 200
    assert answer == [{"Host": host, "Score": score} for host, score in scores.items()]


def test_a_pod_asking_for_no_gpu_passes_every_node_and_scores_zero(serve):
    request = fixture("filter_nodenames.json")
    for container in request["Pod"]["spec"]["containers"]:
        for resources in container["resources"].values():
            del resources["nvidia.com/gpu"]
    port = serve()
    status, answer = post(port, "filter", request)
    assert status == 200
    assert answer["NodeNames"] == request["NodeNames"]  # the unknown node too: the extender has nothing to judge
    assert answer["FailedNodes"] == answer["FailedAndUnresolvableNodes"] == {}
    status, scores = post(port, "prioritize", request)
    assert [s["Score"] for s in scores] == [0] * len(request["NodeNames"])


def test_unknown_nodes_are_unresolvable_and_keys_are_matched_as_go_matches_them(serve):
    status, answer = post(serve(), "filter", fixture("unknown_nodes.json"))  # "pod", "nodenames": the old tags
    assert status == 200
    assert answer["NodeNames"] == []
    assert answer["FailedAndUnresolvableNodes"] == {"gke-retired-0": "unknown node", "gke-retired-1": "unknown node"}


def _without_pod(request):
    del request["Pod"]
    return request


def _names_as_text(request):
    request["NodeNames"] = A100
    return request


def _no_candidates(request):
    request["NodeNames"] = None
    return request


@pytest.mark.parametrize("body, message", [
    ((DATA / "bad_request.json").read_bytes(), "Pod 'broken' nvidia.com/gpu 'two' is not a whole number >= 0"),
    (b"{\"Pod\": ", "the body is not JSON: Expecting value: line 1 column 9 (char 8)"),
    (b"\xff\xfe", "the body is not JSON"),
    (b"[]", "the body is not an ExtenderArgs object"),
    (_without_pod(fixture("filter_nodenames.json")), "Pod is missing"),
    (_names_as_text(fixture("filter_nodenames.json")), "NodeNames is not a list of node names"),
    (_no_candidates(fixture("filter_nodenames.json")), "neither NodeNames nor Nodes: no candidate node"),
    ({"Pod": {"spec": []}, "NodeNames": [A100]}, "Pod has no spec object"),
    ({"Pod": {"spec": {}}, "Nodes": {"items": [{"kind": "Node"}]}}, "Nodes is not a NodeList"),
], ids=["bad-gpu-count", "truncated", "not-utf8", "not-an-object", "no-pod", "names-not-a-list", "no-candidates",
        "spec-not-an-object", "node-without-name"])
@pytest.mark.parametrize("verb", VERBS)
def test_a_bad_request_gets_400_and_one_line_naming_what_is_wrong(serve, body, message, verb):
    status, answer = post(serve(), verb, body)
    assert status == 400
    assert list(answer) == ["Error"] and answer["Error"].startswith(message) and "\n" not in answer["Error"]


def test_malformed_node_objects_are_a_bad_request(serve):
    request = fixture("filter_nodes.json")
    request["Nodes"]["items"][0]["status"]["allocatable"]["nvidia.com/gpu"] = "-1"
    status, answer = post(serve(), "filter", request)
    assert (status, answer) == (400, {"Error": "Nodes: node 'gke-a100-pool-7f3c-0' nvidia.com/gpu '-1' is not a "
                                               "whole number >= 0"})


def test_unknown_verbs_bodies_without_length_or_over_the_limit_are_refused(serve):
    port = serve(max_body_bytes=1024)
    assert post(port, "preempt", fixture("filter_nodenames.json"))[0] == 404
    status, answer = post(port, "filter", fixture("filter_nodes.json"))  # 9 kB
    assert status == 413 and "over the limit of 1,024" in answer["Error"]
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.putrequest("POST", "/gpusched/filter")
    connection.endheaders()  # no Content-Length
    assert connection.getresponse().status == 411
    connection.close()
    assert post(port, "filter", fixture("unknown_nodes.json"))[0] == 200  # the server still serves


def test_a_rule_that_fails_fails_one_answer_and_the_server_keeps_serving(serve):
    def broken(view, job):
        raise ValueError("no GPU\nat all")

    port = serve(broken, rule_name="broken")
    assert post(port, "filter", fixture("filter_nodenames.json")) == (
        500, {"Error": "gpusched extender: ValueError: no GPU at all"})
    assert post(port, "filter", fixture("unknown_nodes.json"))[0] == 200  # no rule needed there


def test_an_answer_not_ready_within_the_budget_is_an_error_for_filter_and_no_scores_for_prioritize(serve):
    def slow_pack(view, job):
        time.sleep(0.3)
        return pack(view, job)

    port = serve(slow_pack, rule_name="slow", budget_s=0.05)
    for verb, expected in [("filter", None), ("prioritize", [])]:
        began = time.monotonic()
        status, answer = post(port, verb, fixture("filter_nodenames.json"))
        took_s = time.monotonic() - began
        assert status == 200 and took_s < 0.25  # answered at the budget, not when the rule is done
        if expected is None:
            assert answer["Error"] == "gpusched extender: no answer within the 50 ms budget"
        else:
            assert answer == expected


def test_the_pods_file_is_read_again_when_it_changes_and_an_unreadable_one_is_an_error(serve, tmp_path):
    pods = tmp_path / "pods.json"
    shutil.copy(DATA / "pods.json", pods)
    port = serve(pods=pods)
    request = fixture("filter_nodenames.json")
    assert post(port, "filter", request)[1]["NodeNames"] == [A100, MIG]

    snapshot = json.loads(pods.read_text())
    snapshot["items"] = [p for p in snapshot["items"] if p["metadata"]["name"] != "h100-job"]  # it finished
    pods.write_text(json.dumps(snapshot))
    os.utime(pods, ns=(time.time_ns(), time.time_ns() + 10**9))  # a new modification time, however coarse the clock
    assert post(port, "filter", request)[1]["NodeNames"] == [A100, MIG, H100]

    pods.write_text("{\"items\": [")  # half written
    status, answer = post(port, "filter", request)
    assert status == 200 and answer["Error"].startswith(f"gpusched extender: {pods} line 1: not JSON")
    assert post(port, "prioritize", request) == (200, [])


def test_a_missing_nodes_file_is_an_error_of_the_filter_and_the_health_check(serve, tmp_path):
    nodes = tmp_path / "nodes.json"
    shutil.copy(NODES, nodes)
    extender = Extender(nodes, DATA / "pods.json", pack, "pack")
    assert extender.health() == (200, {"rule": "pack", "gpu_nodes": 4, "held_gpus": 6 + 20 + 5})
    nodes.unlink()
    assert extender.health() == (503, {"Error": f"{nodes}: No such file or directory"})
    status, answer = extender.answer("filter", json.dumps(fixture("filter_nodenames.json")).encode())
    assert status == 200 and answer["Error"] == f"gpusched extender: {nodes}: No such file or directory"
    extender.close()


def test_rules_are_named_as_in_the_catalogue_and_preemption_is_refused():
    assert placement_rule("spread").__name__ == "spread"
    assert type(placement_rule("k8s:ratio")).__name__ == "KubePlacement"
    with pytest.raises(ConfigError, match="preemption is kube-scheduler's own"):
        placement_rule("k8s:mostallocated+preempt")
    with pytest.raises(ConfigError, match="unknown"):
        placement_rule("best")


def test_the_command_line_refuses_a_bad_file_in_one_line(tmp_path, capsys):
    assert main(["--nodes", str(tmp_path / "none.json"), "--port", "0"]) == 2
    assert capsys.readouterr().err == (f"python -m bridges.extender: error: {tmp_path / 'none.json'}: No such file "
                                       "or directory\n")


def test_the_example_config_is_a_scheduler_configuration_whose_extender_is_this_server(serve):
    config = yaml.safe_load(CONFIG.read_text())
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    (extender,) = config["extenders"]
    assert {extender["filterVerb"], extender["prioritizeVerb"]} == set(VERBS)
    assert "preemptVerb" not in extender and "bindVerb" not in extender  # it never preempts nor binds
    assert extender["managedResources"] == [{"name": "nvidia.com/gpu", "ignoredByScheduler": False}]
    assert extender["ignorable"] is True and extender["nodeCacheCapable"] is True and extender["weight"] >= 1
    assert extender["httpTimeout"] == "2s"  # twice the default budget
    url = urlparse(extender["urlPrefix"])
    assert (url.scheme, url.hostname, url.port) == ("http", "127.0.0.1", 8888)
    port = serve()
    for verb in VERBS:  # kube-scheduler POSTs to urlPrefix + "/" + verb
        request = copy.deepcopy(fixture("prioritize_nodenames.json"))
        assert post(port, extender[f"{verb}Verb"], request, prefix=url.path)[0] == 200
