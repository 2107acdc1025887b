"""Slurm node lists into a :class:`~envs.core.cluster.ClusterSpec`: ``scontrol show node`` and ``sinfo`` output.

**scontrol** (:func:`load_scontrol_cluster`), the output of ``scontrol show node --oneliner`` (one node per line;
the multi-line form without ``--oneliner``, one ``NodeName=`` record per paragraph, is read too). A record is
``KEY=VALUE`` words; a word without ``=`` continues the value before it (``OS=Linux 5.15.0 #1 SMP ...``,
``Reason=Not responding [slurm@...]``). Mapping:

- ``NodeName`` → the node's name.
- ``Gres`` → GPU count and type: the ``gpu`` entries of a comma-separated list, ``gpu:TYPE:N`` or ``gpu:N``
  (untyped: the type ``gpu``, :data:`~envs.workload.operators.node_inventory.UNTYPED_GPU`), a socket suffix
  ``(S:0-1)`` ignored, other gres (``mps:400``, ``shard:8``) ignored, ``(null)`` = none. TYPE resolves to the
  GPU-type table by :func:`~envs.workload.operators.node_inventory.gpu_type_for` (``a100`` → ``A100-40GB``,
  ``v100`` → ``V100``; an unknown name becomes a new type of unknown memory). Two GPU types in one node are
  malformed (a node has one type here).
- ``CPUTot`` → CPUs [cores] (× 1000 milli-cores); ``RealMemory`` → RAM [MiB] (Slurm's MB are MiB).
- ``Partitions`` → the node's partitions (comma-separated; absent or ``(null)``: none). ``scontrol show node`` does
  not say which partition is the default, so the cluster has none: jobs naming no partition run anywhere.
- ``State`` is not used: DOWN, DRAIN(ED) and FAIL nodes are kept, as they are part of the cluster (the simulator's
  failures come from a dynamics scenario, not from the snapshot). Every other key is ignored.

**sinfo** (:func:`load_sinfo_cluster`), the output of::

    sinfo -N -o "%N %P %c %m %G"

with its header line ``NODELIST PARTITION CPUS MEMORY GRES`` (columns found by name, in any order; others, such as
``STATE``, ignored): one line per node and partition (``-N``); a node listed in several partitions is one node in
all of them. ``NODELIST`` may be a hostlist expression (``gpu[01-04,07]``, ``gpu[1-2]-ib``, ``a,b``), expanded with
the zero-padding of each range's start; a node listed more than once must have the same CPUS, MEMORY and GRES each
time. ``PARTITION`` ends with ``*`` for the default partition, which becomes the cluster's default; ``n/a`` is no
partition. ``CPUS`` [cores], ``MEMORY`` [MiB] and ``GRES`` map as CPUTot, RealMemory and Gres above. Without
``-N`` sinfo groups nodes and prints the smallest of differing values with a ``+`` (``64+``): that is malformed
(use ``-N``, or ``-e``).

Nodes left out (counted in :attr:`~envs.workload.operators.node_inventory.NodeInventory.skipped`, see
:func:`read_scontrol_nodes` / :func:`read_sinfo_nodes`): ``no_gpus`` (no gpu gres, or a count of 0: CPU nodes),
``mig_gres`` (gpu gres whose type names a MIG profile, ``a100_3g.20gb`` or ``1g.5gb``: Slurm then counts GPU
instances, not GPUs, so the GPUs cannot be read; model such nodes with a preset and ``mig: true``).

Malformed (:class:`~envs.core.errors.TraceFormatError` naming the file and line): a line outside a ``NodeName=``
record, a record without NodeName, CPUTot, RealMemory or Gres, a repeated key, a count that is not a whole number
>= 0, a gres entry that is not ``NAME[:TYPE]:COUNT``, two GPU types in a node, a bad hostlist, a sinfo header without
the five columns or a line with another field count, a repeated node (scontrol), and an export without a GPU node.
The cluster itself (islands, racks, partitions) is built as :mod:`envs.workload.operators.node_inventory` describes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from envs.core.cluster import MAX_NODES, ClusterSpec
from envs.core.errors import TraceFormatError
from envs.core.gpu_types import GPUType
from envs.workload.operators.node_inventory import GpuNode, NodeInventory, new_inventory
from envs.workload.reader import read_lines, show, whole

SINFO_COMMAND = 'sinfo -N -o "%N %P %c %m %G"'
"""The sinfo command whose output :func:`load_sinfo_cluster` reads."""

SINFO_COLUMNS = ("NODELIST", "PARTITION", "CPUS", "MEMORY", "GRES")
"""The columns a sinfo header must name (the headers of %N, %P, %c, %m and %G)."""

SCONTROL_KEYS = ("NodeName", "CPUTot", "RealMemory", "Gres")
"""The keys every ``scontrol show node`` record must have."""

_KEY = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)=(.*)$")
_MIG_TYPE = re.compile(r"(?:^|[_-])[1-7]g\.[0-9]+gb$", re.IGNORECASE)
_NO_VALUE = ("", "(null)")
_INDEX = re.compile(r"[0-9]{1,9}")  # a hostlist index: ASCII digits, short enough that no range is huge


def load_scontrol_cluster(path: str | Path, gpu_types: Mapping[str, GPUType] | None = None) -> ClusterSpec:
    """The cluster of the GPU nodes of a ``scontrol show node --oneliner`` output (``gpu_types``: the type table,
    default built-in)."""
    return read_scontrol_nodes(path, gpu_types).cluster()


def load_sinfo_cluster(path: str | Path, gpu_types: Mapping[str, GPUType] | None = None) -> ClusterSpec:
    """The cluster of the GPU nodes of a ``sinfo -N -o "%N %P %c %m %G"`` output (``gpu_types`` as above)."""
    return read_sinfo_nodes(path, gpu_types).cluster()


def read_scontrol_nodes(path: str | Path, gpu_types: Mapping[str, GPUType] | None = None) -> NodeInventory:
    """The GPU nodes of a ``scontrol show node`` output, and the nodes left out by reason."""
    inventory = new_inventory(path, gpu_types)
    where = inventory.source
    for fields in _scontrol_records(read_lines(path), where, inventory):
        start = fields["NodeName"][1]
        missing = [key for key in SCONTROL_KEYS if key not in fields]
        if missing:
            raise TraceFormatError(where, start, f"node record lacks {', '.join(k + '=' for k in missing)}")
        name = fields["NodeName"][0]
        if not name:
            raise TraceFormatError(where, start, "NodeName= is empty")
        cpus = whole(fields["CPUTot"][0], where, fields["CPUTot"][1], "CPUTot", minimum=0)
        ram_mib = whole(fields["RealMemory"][0], where, fields["RealMemory"][1], "RealMemory", minimum=0)
        gres_text, gres_line = fields["Gres"]
        partitions_text = fields.get("Partitions", ("", start))[0]
        partitions = () if partitions_text in _NO_VALUE else tuple(p for p in partitions_text.split(",") if p)
        _add_node(inventory, name, gres_text, gres_line, cpus, ram_mib, partitions, start)
    return inventory


def read_sinfo_json(data: object, where: str, gpu_types: Mapping[str, GPUType] | None = None) -> NodeInventory:
    """The GPU nodes of ``sinfo --json`` output already parsed from JSON (``where``: the source, for messages): per
    entry of ``nodes``, ``name``, ``cpus``, ``real_memory`` [MiB], ``gres`` (read as ``Gres`` above) and
    ``partitions``. JSON carries no line numbers: errors point at line 1 and name the node."""
    inventory = new_inventory(where, gpu_types)
    nodes = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(nodes, list):
        raise TraceFormatError(where, 1, "expected sinfo --json output: an object with a nodes list")
    for index, node in enumerate(nodes):
        name = node.get("name") if isinstance(node, dict) else None
        if not isinstance(name, str) or not name:
            raise TraceFormatError(where, 1, f"nodes[{index}] has no name")
        values = [node.get(key, 0) for key in ("cpus", "real_memory")]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
            raise TraceFormatError(where, 1, f"node {show(name)}: cpus and real_memory must be whole numbers >= 0")
        partitions = node.get("partitions") or []
        gres = node.get("gres", "")
        if not isinstance(gres, str) or not isinstance(partitions, list) or not all(
                isinstance(p, str) for p in partitions):
            raise TraceFormatError(where, 1, f"node {show(name)}: gres must be a string and partitions a list of "
                                             "names")
        _add_node(inventory, name, gres, 1, values[0], values[1], tuple(partitions), 1)
    return inventory


def _scontrol_records(lines: list[str], where: str, inventory: NodeInventory) -> list[dict[str, tuple[str, int]]]:
    """Each ``NodeName=`` record as {key: (value, line)}."""
    records: list[dict[str, tuple[str, int]]] = []
    last_key = ""
    for lineno, text in enumerate(lines, start=1):
        words = text.split()
        if not words:
            continue
        inventory.last_line = lineno
        if words[0].startswith("NodeName="):
            records.append({})
            last_key = ""
        elif not records:
            raise TraceFormatError(
                where, lineno, f"expected a node record starting with NodeName=, got {show(text.strip())}"
            )
        record = records[-1]
        for word in words:
            match = _KEY.match(word)
            if match:
                last_key = match.group(1)
                if last_key in record:
                    raise TraceFormatError(
                        where, lineno, f"key {last_key}= repeats in the record of line {record['NodeName'][1]}"
                    )
                record[last_key] = (match.group(2), lineno)
            elif last_key:
                value, line = record[last_key]
                record[last_key] = (f"{value} {word}", line)
            else:
                raise TraceFormatError(where, lineno, f"{show(word)} is not KEY=VALUE")
    return records


def read_sinfo_nodes(path: str | Path, gpu_types: Mapping[str, GPUType] | None = None) -> NodeInventory:
    """The GPU nodes of a ``sinfo -N -o "%N %P %c %m %G"`` output, and the nodes left out by reason."""
    inventory = new_inventory(path, gpu_types)
    where = inventory.source
    lines = read_lines(path)
    start = next((i for i, text in enumerate(lines) if text.strip()), 0)
    header = lines[start].split() if lines else []
    missing = [c for c in SINFO_COLUMNS if c not in header]
    if missing:
        raise TraceFormatError(
            where,
            start + 1,
            f"header lacks column(s) {', '.join(missing)}; expected the output "
            f"of {SINFO_COMMAND}, whose header is {' '.join(SINFO_COLUMNS)}",
        )
    index = [header.index(c) for c in SINFO_COLUMNS]
    seen: dict[str, tuple[tuple[str, str, str], int, list[str]]] = {}  # name -> ((cpus, mem, gres), line, parts)
    for lineno, text in enumerate(lines[start + 1 :], start=start + 2):
        words = text.split()
        if not words:
            continue
        inventory.last_line = lineno
        if len(words) != len(header):
            raise TraceFormatError(where, lineno, f"{len(words)} fields, but the header has {len(header)}")
        nodelist, partition, cpus, memory, gres = (words[i] for i in index)
        if partition.endswith("*"):
            partition = partition[:-1]
            if inventory.default_partition not in ("", partition):
                raise TraceFormatError(
                    where, lineno, f"two default partitions: {inventory.default_partition} and {partition}"
                )
            inventory.default_partition = partition
        for value, what in ((cpus, "CPUS"), (memory, "MEMORY")):
            if value.endswith("+"):
                raise TraceFormatError(
                    where,
                    lineno,
                    f"{what} {show(value)} is the smallest of a group of nodes; list nodes one by one: {SINFO_COMMAND}",
                )
        for name in expand_hostlist(nodelist, where, lineno):
            config = (cpus, memory, gres)
            if name not in seen:
                seen[name] = (config, lineno, [])
            elif seen[name][0] != config:
                raise TraceFormatError(
                    where,
                    lineno,
                    f"node {show(name)}: CPUS MEMORY GRES {' '.join(config)} "
                    f"differ from line {seen[name][1]} ({' '.join(seen[name][0])})",
                )
            if partition != "n/a" and partition not in seen[name][2]:
                seen[name][2].append(partition)
    for name, ((cpus, memory, gres), lineno, partitions) in seen.items():
        n_cpus = whole(cpus, where, lineno, "CPUS", minimum=0)
        ram_mib = whole(memory, where, lineno, "MEMORY", minimum=0)
        _add_node(inventory, name, gres, lineno, n_cpus, ram_mib, tuple(partitions), lineno)
    return inventory


def _add_node(
    inventory: NodeInventory,
    name: str,
    gres: str,
    gres_line: int,
    cpus: int,
    ram_mib: int,
    partitions: tuple[str, ...],
    line: int,
) -> None:
    """One node of a Slurm export: kept when it has GPUs, else counted by reason."""
    model, n_gpus, mig = parse_gres(gres, inventory.source, gres_line)
    if mig:
        inventory.skip("mig_gres")
    elif n_gpus == 0:
        inventory.skip("no_gpus")
    else:
        inventory.nodes.append(
            GpuNode(
                name=name,
                gpu_type=inventory.resolve(model),
                n_gpus=n_gpus,
                cpu_milli=cpus * 1000,
                ram_mib=ram_mib,
                line=line,
                partitions=partitions,
            )
        )


def parse_gres(text: str, where: str, line: int) -> tuple[str, int, bool]:
    """(GPU type name, "" when untyped; GPU count; True when a gpu entry names a MIG profile) of a Slurm gres list
    such as ``gpu:a100:8(S:0-1),mps:400``."""
    if text in _NO_VALUE:
        return "", 0, False
    models: dict[str, int] = {}
    mig = False
    for entry in _top_level_split(text, where, line):
        spec = re.sub(r"\([^()]*\)$", "", entry)  # the socket (S:0-1) or index (IDX:0-7) suffix
        parts = spec.split(":")
        if parts[0] != "gpu":
            continue
        if len(parts) not in (2, 3) or not all(parts):
            raise TraceFormatError(where, line, f"gres {show(entry)} is not gpu:COUNT or gpu:TYPE:COUNT")
        count = whole(parts[-1], where, line, f"gres {show(entry)} count", minimum=0)
        model = parts[1] if len(parts) == 3 else ""
        mig = mig or bool(_MIG_TYPE.search(model))
        models[model] = models.get(model, 0) + count
    if mig:
        return "", 0, True
    typed = {m: n for m, n in models.items() if n > 0}
    if len(typed) > 1:
        raise TraceFormatError(
            where,
            line,
            f"gres {show(text)} holds GPUs of {len(typed)} types ({', '.join(typed)}); a node has one GPU type",
        )
    model, n_gpus = next(iter(typed.items()), ("", 0))
    return model, n_gpus, False


def _top_level_split(text: str, where: str, line: int, opening: str = "(", closing: str = ")") -> list[str]:
    """``text`` split on the commas outside ``opening``/``closing`` pairs (``gpu:2(S:0,1),mps:4`` has two entries)."""
    parts: list[str] = []
    depth = 0
    current = ""
    for char in text:
        if char == opening:
            depth += 1
        elif char == closing:
            depth -= 1
            if depth < 0:
                break
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if depth != 0:
        raise TraceFormatError(where, line, f"unbalanced {opening}{closing} in {show(text)}")
    parts.append(current)
    if not all(parts):
        raise TraceFormatError(where, line, f"empty entry in the list {show(text)}")
    return parts


def expand_hostlist(text: str, where: str, line: int) -> list[str]:
    """The node names of a Slurm hostlist expression: ``gpu[01-03,07]`` → gpu01, gpu02, gpu03, gpu07."""
    names: list[str] = []
    for part in _top_level_split(text, where, line, "[", "]"):
        names.extend(_expand_one(part, where, line))
        if len(names) > MAX_NODES:
            raise TraceFormatError(where, line, f"hostlist {show(text)} names more than {MAX_NODES:,} nodes")
    return names


def _expand_one(text: str, where: str, line: int) -> list[str]:
    opening = text.find("[")
    if opening < 0:
        if "]" in text:
            raise TraceFormatError(where, line, f"hostlist {show(text)} has ']' without '['")
        return [text]
    closing = text.find("]", opening)
    if closing < 0:
        raise TraceFormatError(where, line, f"hostlist {show(text)} has '[' without ']'")
    prefix, ranges, rest = text[:opening], text[opening + 1 : closing], text[closing + 1 :]
    numbers: list[str] = []
    for item in ranges.split(","):
        low, dash, high = item.partition("-")
        if not _INDEX.fullmatch(low) or (dash and not _INDEX.fullmatch(high)) or (dash and int(high) < int(low)):
            raise TraceFormatError(where, line, f"hostlist range {show(item)} in {show(text)} is not N or N-M (M >= N)")
        if int(high or low) - int(low) + len(numbers) >= MAX_NODES:
            raise TraceFormatError(where, line, f"hostlist {show(text)} names more than {MAX_NODES:,} nodes")
        numbers.extend(str(n).zfill(len(low)) for n in range(int(low), int(high or low) + 1))
    tails = _expand_one(rest, where, line)
    if len(numbers) * len(tails) > MAX_NODES:  # each bracket bounded, their product too
        raise TraceFormatError(where, line, f"hostlist {show(text)} names more than {MAX_NODES:,} nodes")
    return [prefix + number + tail for number in numbers for tail in tails]
