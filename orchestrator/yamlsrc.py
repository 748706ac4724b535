"""YAML loading that remembers where every value came from.

PyYAML's plain `safe_load` forgets line numbers and silently keeps the last
of two duplicate keys. Operators need `fleet.yaml:14 lanes.validation.bundle`
in an error, so we compose the node graph ourselves and record the line of
every mapping key and sequence item by its path.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator.errors import ConfigError

# Mapping keys (str, or another YAML scalar) and sequence indices (int), outermost first.
PathKey = tuple[object, ...]


def format_path(path: Iterable[object]) -> str:
    """Render ('lanes', 'cpu', 'workers', 2) as lanes.cpu.workers[2]."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """A '; did you mean 'x'?' suffix when a close match exists, else ''."""
    match = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean '{match[0]}'?" if match else ""


@dataclass
class Located:
    """A loaded document together with the line of every path in it."""

    data: Any  # plain data as PyYAML constructs it (its constructors are typed Any)
    file: Path
    lines: dict[PathKey, int] = field(default_factory=dict)

    def line(self, path: Iterable[object]) -> int:
        """Line of the deepest recorded prefix of `path` (1-based)."""
        key: PathKey = tuple(path)
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key[:-1]
        return self.lines.get((), 1)

    def where(self, path: Iterable[object]) -> str:
        """`file:line yaml.path` for error messages."""
        key = tuple(path)
        return f"{self.file.name}:{self.line(key)} {format_path(key)}"


def load(path: Path, *, what: str = "file") -> Located:
    """Load a YAML file, tracking lines; errors name the file and line."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {what}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror}") from None
    return loads(text, path)


def loads(text: str, path: Path) -> Located:
    """Parse YAML text as if read from `path`."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        raise ConfigError(f"{path.name}:{line} not valid YAML: {exc.problem or exc}") from None
    located = Located(data=None, file=path)
    if node is None:
        located.data = {}
        return located
    located.lines[()] = node.start_mark.line + 1
    located.data = _Builder(located, path).build(node, ())
    return located


class _Builder:
    """Turns a composed node graph into plain data, recording lines by path."""

    def __init__(self, located: Located, file: Path) -> None:
        self.located = located
        self.file = file
        self.loader = yaml.SafeLoader("")

    def build(self, node: yaml.Node, path: PathKey) -> Any:
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            items = []
            for i, item in enumerate(node.value):
                self.located.lines[path + (i,)] = item.start_mark.line + 1
                items.append(self.build(item, path + (i,)))
            return items
        return self.loader.construct_object(node, deep=True)

    def _mapping(self, node: yaml.MappingNode, path: PathKey) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        name = self.file.name
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise ConfigError(
                    f"{name}:{line} {format_path(path)}: YAML merge keys ('<<') are not supported; write the values out"
                )
            if not isinstance(key_node, yaml.ScalarNode):
                raise ConfigError(f"{name}:{line} {format_path(path)}: mapping keys must be plain scalars")
            key = self.loader.construct_object(key_node)
            child = path + (key,)
            if key in out:
                raise ConfigError(
                    f"{name}:{line} {format_path(child)}: duplicate key '{key}' "
                    f"(first defined on line {self.located.lines[child]})"
                )
            self.located.lines[child] = line
            out[key] = self.build(value_node, child)
        return out
