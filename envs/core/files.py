"""Files: YAML read safely (data only, never code); files written atomically: the content goes to a file of a
unique name beside the target, which then replaces it in one step, so a reader (or a run killed midway) sees the old
file or the new one, never a part of either, and two writers never share a temporary file; run folders that are
new (:func:`new_folder`) and held by one process at a time (:func:`folder_lock`)."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from envs.core.errors import ConfigError

MAX_YAML_BYTES = 10 * 2**20
"""The largest YAML file read (10 MiB; the project's own are a few KiB) [bytes]."""
MAX_YAML_NODES = 1_000_000
"""The most nodes a YAML document may hold with every alias expanded (a "billion laughs" document holds 10⁹)."""


def names_a_file(text: str) -> bool:
    """Whether a cluster, workload or scenario name refers to a file rather than a built-in preset: it ends in
    ``.yaml`` or ``.yml``, or it exists on disk (the rule every loader of those files follows)."""
    return text.endswith((".yaml", ".yml")) or Path(text).exists()


def check_regular(path: str | Path, what: str) -> None:
    """Refuse a folder, a device or a pipe given as a ``what`` (``/dev/zero`` would be read for ever) with a
    one-line :class:`ConfigError` naming it; a missing file is left to whoever opens it."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory, not a {what}")
    if path.exists() and not path.is_file():
        raise ConfigError(f"{path}: not a regular file (a device or a pipe), not a {what}")


def read_regular(path: str | Path, what: str, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (:func:`check_regular`), at most ``limit`` of them; a one-line
    :class:`ConfigError` naming the file for a larger file, or one that cannot be read."""
    path = Path(path)
    check_regular(path, what)
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise ConfigError(f"{path}: larger than {limit:,} bytes; not a {what}")
    return data


def read_yaml(path: str | Path, what: str) -> Any:
    """The data of the YAML file ``path`` (plain data, no objects: :func:`parse_yaml`), or a one-line
    :class:`ConfigError` naming the file, what it should hold (``what``, e.g. "cluster file") and why it cannot be
    read (also when it is larger than :data:`MAX_YAML_BYTES`)."""
    data = read_regular(path, what, MAX_YAML_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not a valid {what} (byte {exc.start} is not UTF-8 text)") from None
    return parse_yaml(text, f"{path}", what)


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader (plain data only) that refuses a key given twice in one mapping, where the plain
    loader keeps the last silently."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # "<<: *base": keys given here may override base's
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                repeated = key in seen
            except TypeError:  # an unhashable key: the base class says so
                break
            if repeated:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [item for pair in node.value for item in pair]
    return []


def _expanded_nodes(root: yaml.Node, where: str, what: str) -> int:
    """How many nodes the document ``root`` holds with every alias expanded (shared nodes counted at each use),
    computed without expanding anything: a depth-first walk that sizes each node once. An alias inside its own
    anchor (a document that contains itself) is a :class:`ConfigError`."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:  # a node is expanded once, and pushed once per reference to it: the loop ends
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(child)] for child in _children(node))
            continue
        if key in size:
            continue
        if key in on_path:
            raise ConfigError(f"{where}: not a valid {what} (an alias refers to a value that contains it)")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in size)
    return size[id(root)]


def parse_yaml(text: str, where: str, what: str) -> Any:
    """The plain data of YAML ``text`` (``where``: the file or flag it came from, for errors): no objects, no key
    given twice, at most :data:`MAX_YAML_NODES` nodes with aliases expanded, nesting as deep as Python's stack
    allows; anything else is a one-line :class:`ConfigError`."""
    loader = _UniqueKeyLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        if _expanded_nodes(root, where, what) > MAX_YAML_NODES:
            raise ConfigError(f"{where}: not a valid {what} (more than {MAX_YAML_NODES:,} values with its aliases "
                              "expanded)")
        return loader.construct_document(root)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not a valid {what} ({' '.join(str(exc).split())})") from None
    except RecursionError:
        raise ConfigError(f"{where}: not a valid {what} (nested too deeply)") from None
    finally:
        loader.dispose()


def write_atomically(path: str | Path, write: Callable[[Path], object]) -> None:
    """Call ``write(partial)`` to write the content to a new file of a unique name beside ``path``
    (``.NAME.PID-RANDOM.partial``, created with the usual permissions), then move it over ``path``.

    If ``write`` raises (or the process is interrupted), ``path`` is left as it was and the partial file removed;
    an ``OSError`` (a full disk, a missing folder) becomes a one-line :class:`ConfigError` naming ``path``.
    """
    target = Path(path)
    partial = target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.partial")
    try:
        write(partial)
        os.replace(partial, target)
    except OSError as exc:
        raise ConfigError(f"{target}: cannot write ({exc.strerror or exc})") from None
    finally:
        partial.unlink(missing_ok=True)


def write_text_atomically(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    write_atomically(path, lambda partial: partial.write_text(text, encoding="utf-8"))


NEW_FOLDER_TRIES = 1000
"""How many names :func:`new_folder` tries (``BASE``, ``BASE-2``, ...) before it gives up."""


def new_folder(base: str | Path) -> Path:
    """Create and return a folder that did not exist: ``base``, else ``base-2``, ``base-3``, ... (two processes
    that ask for the same ``base`` at once get different folders); a :class:`ConfigError` after
    :data:`NEW_FOLDER_TRIES` names or when the parent cannot be written."""
    base = Path(base)
    for i in range(1, NEW_FOLDER_TRIES + 1):
        folder = base if i == 1 else base.with_name(f"{base.name}-{i}")
        try:
            folder.mkdir(parents=True)
            return folder
        except FileExistsError:
            continue
        except OSError as exc:
            raise ConfigError(f"{folder}: cannot create the folder ({exc.strerror or exc})") from None
    raise ConfigError(f"{base}: {NEW_FOLDER_TRIES} folders of that name exist already")


LOCK_FILE = ".lock"
"""The file in a run folder that :func:`folder_lock` locks (empty; left in place)."""


@contextlib.contextmanager
def folder_lock(folder: str | Path, what: str) -> Iterator[None]:
    """Hold the run folder ``folder`` for this process while the block runs: a second process that asks for it
    gets a one-line :class:`ConfigError` (``what``: how the folder was named, e.g. "--out runs/x"). The lock is
    the operating system's (``flock``), so it ends with the process, even a killed one."""
    import fcntl

    path = Path(folder) / LOCK_FILE
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"{what}: in use by another process (it holds {path}); wait for it or choose "
                              "another folder") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
