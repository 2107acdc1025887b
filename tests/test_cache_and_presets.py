"""The dataset cache and the cluster presets: LRU behaviour, round-off safety, and errors that name the key."""

from __future__ import annotations

import pytest

from envs.core import ConfigError
from envs.core.cache import LRUCache
from envs.core.presets import cluster_from_dict, preset_names
from envs.scenario import load_cluster


def test_lru_evicts_least_recently_used_and_survives_float_round_off():
    cache = LRUCache(0.6)
    assert not cache.touch("a", 0.1) and not cache.touch("b", 0.3)
    assert cache.touch("a", 0.1)  # hit: "a" is now the most recent
    assert not cache.touch("c", 0.6)  # needs the whole cache: evicts "b" then "a" (0.1 + 0.3 leaves round-off)
    assert cache.datasets() == ("c",) and cache.used_gib == pytest.approx(0.6)
    assert not cache.touch("huge", 5.0) and "huge" not in cache  # larger than the cache: never cached


def test_every_preset_loads_and_has_the_documented_shape():
    sizes = {name: load_cluster(name) for name in preset_names()}
    assert {"tiny", "dgx-a100-16", "hetero-64", "philly-like"} <= set(sizes)
    assert (sizes["tiny"].n_nodes, sizes["tiny"].n_gpus) == (2, 8)
    assert (sizes["dgx-a100-16"].n_gpus, sizes["dgx-a100-16"].n_racks) == (128, 2)
    hetero = sizes["hetero-64"]
    assert (hetero.n_nodes, hetero.n_gpus, hetero.n_racks) == (64, 512, 4)
    assert set(hetero.type_names) == {"V100", "A100-40GB", "A100-80GB", "H100"}
    assert [sum(n.rack == r for n in hetero.nodes) for r in range(4)] == [16, 16, 16, 16]
    assert {n.n_gpus for n in sizes["philly-like"].nodes} == {2, 4, 8}


def group(**overrides):
    base = {"count": 2, "gpu_type": "V100", "gpus": 4}
    return {"name": "c", "node_groups": [base | overrides]}


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"name": "c", "node_groups": [{"count": 1, "gpu_type": "V100", "gpus": 4, "gpu": 3}]}, "node_groups[0].gpu"),
        ({"name": "c", "nodes": []}, "nodes"),
        (group(gpus=0), "node_groups[0].gpus"),
        (group(count=-1), "node_groups[0].count"),
        (group(gpu_type="V1OO"), "gpu_type"),
        (group(island_size=3), "island_size"),
        (group(islands=[[0, 1.9], [2, 3]]), "node_groups[0].islands"),
        (group(islands=[[0, 1], [1, 2, 3]]), "islands"),
        (group(rack=True), "node_groups[0].rack"),
        (group(cpus=-4), "node_groups[0].cpus"),
        ({"name": "c", "gpu_types": {"X": {"memory_gib": 8}}, "node_groups": []}, "gpu_types.X"),
    ],
)
def test_bad_preset_is_an_error_naming_the_key(data, key):
    with pytest.raises(ConfigError, match=key.replace("[", r"\[").replace("]", r"\]")):
        cluster_from_dict(data, where="c.yaml")


def test_unknown_preset_name_lists_the_known_ones():
    with pytest.raises(ConfigError, match="hetero-64"):
        load_cluster("no-such-cluster")


def test_racks_spread_nodes_in_near_equal_blocks():
    cluster = cluster_from_dict(group(count=5, racks=[0, 1, 2, 3]))
    assert [n.rack for n in cluster.nodes] == [0, 0, 1, 2, 3]
