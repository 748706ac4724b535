"""YAML loading that remembers where every value came from.

PyYAML's plain `safe_load` forgets line numbers and silently keeps the last
of two duplicate keys. Operators need `fleet.yaml:14 lanes.validation.bundle`
in an error, so we compose the node graph ourselves and record the line of
every mapping key and sequence item by its path.

A YAML file is untrusted input, so before composing we walk its events once
(PyYAML's parser is iterative, its composer recursive): nesting deeper than
`MAX_DEPTH` is refused, and so is a document whose aliases would expand to
more than `MAX_NODES` nodes (a "billion laughs" file is refused in
milliseconds, naming the line of the alias that crosses the limit), or an
alias that refers to itself. Every decoding, syntax, tag and value error
becomes `path/to/file.yaml:LINE yaml.path: message`, never a traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from orchestrator.errors import ConfigError

MAX_DEPTH = 64  # nested collections; a fleet file needs six
MAX_NODES = 200_000  # nodes after alias expansion; a 4096-worker fleet needs about 30 000
MAX_DIGITS = 100  # digits in one integer

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
        return f"{self.file}:{self.line(key)} {format_path(key)}"


def load(path: Path, *, what: str = "file") -> Located:
    """Load a YAML file, tracking lines; errors name the file and line."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {what}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror}") from None
    return loads(decode(data, path), path)


def decode(data: bytes, path: Path) -> str:
    """`data` as UTF-8 text, or a ConfigError naming the line of the first bad byte."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(f"{path}:1 the file is UTF-16; save it as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{path}:{line} not valid UTF-8 (byte {data[exc.start]:#04x}); save the file as UTF-8"
        ) from None


def loads(text: str, path: Path) -> Located:
    """Parse YAML text as if read from `path`."""
    node = _compose_fast(text, path)
    if node is False:
        node = _compose(text, path)
    located = Located(data=None, file=path)
    if node is None:
        located.data = {}
        return located
    located.lines[()] = node.start_mark.line + 1
    located.data = _Builder(located, path).build(node, ())
    return located


# libyaml's parser, when PyYAML was built with it: 20-30 times faster than the pure-Python one (a
# 256-worker fleet file parses in milliseconds instead of a third of a second). Same YAML 1.1, same
# resolver and constructors, same marks. A document it refuses is parsed again by the pure-Python
# parser, whose errors (and lines) are the ones orch reports.
_FAST_LOADER: Any = getattr(yaml, "CSafeLoader", None)


def _compose_fast(text: str, path: Path) -> yaml.Node | None | Literal[False]:
    """The node graph by libyaml, or False when libyaml is missing or refuses the document."""
    if _FAST_LOADER is None:
        return False
    try:
        _check_events(text, path, _FAST_LOADER)
        node: yaml.Node | None = yaml.compose(text, Loader=_FAST_LOADER)
    except (yaml.YAMLError, ConfigError):
        return False
    return node


def _compose(text: str, path: Path) -> yaml.Node | None:
    """The node graph by the pure-Python parser (limits checked first), every YAML error a ConfigError."""
    try:
        _check_events(text, path, yaml.SafeLoader)
        node: yaml.Node | None = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        raise ConfigError(f"{path}:{line} not valid YAML: {exc.problem or exc}") from None
    except yaml.reader.ReaderError as exc:
        line = text[: exc.position].count("\n") + 1
        code = ord(exc.character) if isinstance(exc.character, str) else int(exc.character)
        raise ConfigError(
            f"{path}:{line} not valid YAML: character U+{code:04X} is not allowed (control characters "
            "and NUL cannot appear in a YAML file)"
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}:1 not valid YAML: {exc}") from None
    return node


def _check_events(text: str, path: Path, loader: Any) -> None:
    """Refuse deep nesting and alias expansion beyond the limits, from the parser's events alone."""
    sizes: dict[str, int] = {}  # anchor -> nodes its value expands to
    # One entry per open collection: [anchor or None, nodes so far].
    stack: list[list[Any]] = [[None, 0]]
    for event in yaml.parse(text, Loader=loader):
        line = event.start_mark.line + 1 if event.start_mark else 1
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            if len(stack) > MAX_DEPTH:
                raise ConfigError(f"{path}:{line} nested deeper than {MAX_DEPTH} levels; a fleet file needs a few")
            stack.append([event.anchor, 1])
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            anchor, count = stack.pop()
            if anchor is not None:
                sizes[anchor] = count
            stack[-1][1] += count
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor is not None:
                sizes[event.anchor] = 1
            stack[-1][1] += 1
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor not in sizes:
                open_anchors = {a for a, _ in stack}
                what = "refers to itself" if event.anchor in open_anchors else "is not defined before this point"
                raise ConfigError(f"{path}:{line} not valid YAML: alias *{event.anchor} {what}")
            stack[-1][1] += sizes[event.anchor]
        else:
            continue
        if sum(count for _, count in stack) > MAX_NODES:
            raise ConfigError(
                f"{path}:{line} aliases expand this document past {MAX_NODES} values; "
                "write the values out instead of nesting aliases"
            )


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
        return self._construct(node, path)

    def _construct(self, node: yaml.Node, path: PathKey) -> Any:
        """A scalar's value; a bad tag or an unreadable value names its file, line and path."""
        line = node.start_mark.line + 1
        if node.tag == "tag:yaml.org,2002:int" and len(str(node.value)) > MAX_DIGITS:
            raise ConfigError(
                f"{self.file}:{line} {format_path(path)}: integer of {len(node.value)} digits is too large"
            )
        try:
            return self.loader.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError:
            raise ConfigError(
                f"{self.file}:{line} {format_path(path)}: unknown tag {node.tag!r}; "
                "write plain strings, numbers, lists and mappings"
            ) from None
        except (ValueError, TypeError, OverflowError) as exc:
            raise ConfigError(f"{self.file}:{line} {format_path(path)}: cannot read value: {exc}") from None

    def _mapping(self, node: yaml.MappingNode, path: PathKey) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        name = str(self.file)
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise ConfigError(
                    f"{name}:{line} {format_path(path)}: YAML merge keys ('<<') are not supported; write the values out"
                )
            if not isinstance(key_node, yaml.ScalarNode):
                raise ConfigError(f"{name}:{line} {format_path(path)}: mapping keys must be plain scalars")
            key = self._construct(key_node, path)
            try:
                hash(key)
            except TypeError:
                raise ConfigError(f"{name}:{line} {format_path(path)}: mapping keys must be plain scalars") from None
            child = path + (key,)
            if key in out:
                raise ConfigError(
                    f"{name}:{line} {format_path(child)}: duplicate key '{key}' "
                    f"(first defined on line {self.located.lines[child]})"
                )
            self.located.lines[child] = line
            out[key] = self.build(value_node, child)
        return out
