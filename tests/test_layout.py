"""The architecture, read from the code's own imports (``ast``, nothing is run but the cheap-import check).

Layers under ``envs/`` import only downwards: core ← workload ← scenario, sim ← placement ← gymenv, peer ←
registration; packages of one layer do not import each other. Around ``envs/`` the project runs one way too:
envs ← baselines ← agents ← evaluation ← bridges ← evaluate.py ← train.py ← benchmarks/, and only benchmarks/
imports bridges/ (the live Slurm harness runs the steering daemon). Every import counts, those inside
functions and ``TYPE_CHECKING`` blocks included (an import made by ``importlib`` at run time is not seen), and the
module graph has no circle. Importing ``a.b.c`` also runs the packages ``a`` and ``a.b``: the graph has those edges
too, except to the importer's own packages (already running when it runs).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

ENVS_LAYERS = {
    "envs.core": 0,
    "envs.workload": 1,
    "envs.scenario": 2,
    "envs.sim": 2,
    "envs.placement": 3,
    "envs.gymenv": 4,
    "envs.peer": 4,
    "envs.registration": 5,
    "envs.vec": 5,  # the batched engine: reads the env's config, observation encoder and episode source
    "envs": 6,  # the package's __init__ alone: it only registers the ids
}
"""Each part of ``envs/`` and its layer: a module may import its own part and parts of lower layers only. A key is a
package or a module; ``envs`` stands for ``envs/__init__.py`` only."""

PROJECT_LAYERS = {"envs": 0, "baselines": 1, "agents": 2, "evaluation": 3, "bridges": 4, "evaluate": 5, "train": 6,
                  "benchmarks": 7}
"""The project's top-level parts, in the order they may import each other."""

HEAVY = ("gymnasium", "torch", "stable_baselines3", "sb3_contrib")
LIGHT_PARTS = ("envs.core", "envs.workload", "envs.scenario", "envs.sim", "envs.placement", "envs.peer.engine",
               "envs.peer.swf", "envs.peer.joblog")
"""Parts whose modules import none of :data:`HEAVY`, directly or through other modules of the project (``envs``'s
own ``__init__`` aside: it registers the ids with Gymnasium; the cheap-import test checks that no torch comes in)."""


def module_files() -> dict[str, Path]:
    """Every project module (tests excepted) by dotted name."""
    files = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ("tests", "build") or any(part.startswith(".") or part == "venv" for part in rel.parts):
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


MODULES = module_files()


def imports_of(name: str) -> tuple[set[str], set[str]]:
    """(project modules, other top-level packages) that module ``name`` imports, anywhere in its code."""
    tops = {m.split(".")[0] for m in MODULES}
    project, other = set(), set()
    for node in ast.walk(ast.parse(MODULES[name].read_text(), str(MODULES[name]))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{name} line {node.lineno}: a relative import (the project writes absolute ones)"
            targets = [node.module or ""]
            targets += [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES]
        else:
            continue
        for target in targets:
            if target.split(".")[0] in tops:
                assert target in MODULES, f"{name} imports {target}, which is no module of the project"
                project.add(target)
                parts = target.split(".")
                project |= {".".join(parts[:k]) for k in range(1, len(parts))} - packages_of(name)
            else:
                other.add(target.split(".")[0])
    return project - {name}, other


def packages_of(name: str) -> set[str]:
    """The packages above module ``name`` (``a`` and ``a.b`` for ``a.b.c``), and ``name`` itself when it is one."""
    parts = name.split(".")
    above = {".".join(parts[:k]) for k in range(1, len(parts))}
    return above | ({name} if MODULES[name].name == "__init__.py" else set())


GRAPH = {name: imports_of(name)[0] for name in MODULES}


def part_of(name: str, layers: dict[str, int]) -> str | None:
    """The longest key of ``layers`` that is ``name`` or a package above it; in :data:`ENVS_LAYERS`, ``envs``
    stands for itself only."""
    exact = {"envs"} if layers is ENVS_LAYERS else set()
    candidates = [p for p in layers if name == p or (p not in exact and name.startswith(p + "."))]
    return max(candidates, key=len) if candidates else None


def test_the_module_graph_has_no_circle():
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(GRAPH[name]):
            if state.get(target) == 1:
                circle = [*path[path.index(target):], target]
                pytest.fail("import circle: " + " -> ".join(circle))
            if target not in state:
                visit(target, [*path, target])
        state[name] = 2

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [name])


@pytest.mark.parametrize(("layers", "where"), [(ENVS_LAYERS, "envs"), (PROJECT_LAYERS, "project")])
def test_no_import_runs_back_up_a_layer(layers, where):
    wrong = []
    for name, targets in GRAPH.items():
        source = part_of(name, layers)
        if source is None:
            continue
        for target in targets:
            dest = part_of(target, layers)
            if dest is not None and dest != source and layers[dest] >= layers[source]:
                wrong.append(f"{name} -> {target} ({source}, layer {layers[source]} -> {dest}, layer {layers[dest]})")
    assert not wrong, f"{where}: imports that run up or across a layer:\n" + "\n".join(sorted(wrong))


def test_only_benchmarks_import_the_bridges():
    importers = sorted(name for name, targets in GRAPH.items() if any(part_of(t, PROJECT_LAYERS) == "bridges"
                                                                      for t in targets)
                       and part_of(name, PROJECT_LAYERS) not in ("bridges", "benchmarks"))
    assert importers == []


def test_every_envs_module_belongs_to_a_layer():
    assert [name for name in MODULES if name.startswith("envs") and part_of(name, ENVS_LAYERS) is None] == []


def test_the_light_parts_import_no_heavy_package():
    for start in [name for name in MODULES if part_of(name, dict.fromkeys(LIGHT_PARTS, 0))]:
        seen, todo = {start}, [start]
        while todo:
            name = todo.pop()
            heavy = imports_of(name)[1] & set(HEAVY)
            assert not heavy, f"{start} imports {', '.join(sorted(heavy))} through {name}"
            todo += [t for t in GRAPH[name] if t not in seen and t != "envs"]
            seen |= GRAPH[name]


def test_import_envs_registers_the_ids_without_importing_an_env_or_torch():
    code = ("import sys, envs; import envs.core.job; import gymnasium as gym; "
            "assert 'torch' not in sys.modules; "
            "loaded = sorted(m for m in sys.modules if m == 'envs' or m.startswith('envs.')); "
            "assert all(m in ('envs', 'envs.registration') or m.startswith('envs.core') for m in loaded), loaded; "
            "assert 'gpusched/GPUCluster-v0' in gym.registry and 'gpusched/RLSched-v0' in gym.registry")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True)
