"""Literal text a signature's pattern cannot match without: a cheap test that skips most regex searches.

`orch diagnose` searches every line of a worker's log with every signature; on a large log
almost no line matches anything, and the regex searches are the whole cost. For each
pattern, `required_literals` reads the regular expression's parse tree and returns a set of
plain strings of which every match must contain at least one (the pattern's literal runs,
through groups, alternatives and repeats that occur at least once), or None when it cannot
tell. `LiteralIndex` then answers with substring tests on the line, which are far cheaper
than the searches: a pattern it leaves out cannot match the line; one it names only may.

Literals are taken only where the pattern is case-sensitive: a pattern that ignores case
has no requirement, and a group that ignores case gives none, since case-blind matching
pairs characters (the Kelvin sign and k, a dotted capital I and i) that no folding of the
line keeps in one piece. Lines are then compared as they are. Pure: no I/O.
"""

from __future__ import annotations

import re
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]
from typing import Any

# Shorter runs than this are too common to be worth testing (a test costs about as much as it saves).
MIN_LITERAL = 3

# A requirement: at least one of these strings occurs in every match (None: nothing known).
Requirement = frozenset[str] | None

_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT}


def _better(a: Requirement, b: Requirement) -> Requirement:
    """The more selective of two requirements that both hold: the one whose shortest literal is longer."""
    if a is None:
        return b
    if b is None:
        return a
    return a if min(map(len, a)) >= min(map(len, b)) else b


def _usable(req: Requirement) -> Requirement:
    return req if req and min(map(len, req)) >= MIN_LITERAL else None


def _sequence(items: Any) -> Requirement:
    """The best requirement of a sequence of parse items, all of which every match passes through."""
    best: Requirement = None
    run: list[str] = []

    def close_run() -> None:
        nonlocal best
        if run:
            best = _better(best, _usable(frozenset({"".join(run)})))
        run.clear()

    for op, arg in items:
        if op == sre.LITERAL:
            run.append(chr(arg))
            continue
        close_run()
        if op == sre.SUBPATTERN:
            if not arg[1] & re.IGNORECASE:  # the group's added flags: a case-blind group tells nothing
                best = _better(best, _sequence(arg[-1]))
        elif op == sre.ATOMIC_GROUP:
            best = _better(best, _sequence(arg))
        elif op in _REPEATS and arg[0] >= 1:
            best = _better(best, _sequence(arg[2]))
        elif op == sre.BRANCH:
            best = _better(best, _branch(arg[1]))
    close_run()
    return best


def _branch(alternatives: Any) -> Requirement:
    """A requirement of an alternation: each alternative's, joined; none when one alternative has none."""
    found: set[str] = set()
    for alternative in alternatives:
        req = _sequence(alternative)
        if req is None:
            return None
        found |= req
    return frozenset(found)


def required_literals(pattern: re.Pattern[str]) -> Requirement:
    """Strings one of which every match of `pattern` contains, or None if none are known."""
    if pattern.flags & re.IGNORECASE:
        return None
    try:
        return _usable(_sequence(_parser.parse(pattern.pattern, pattern.flags)))
    except Exception:  # noqa: BLE001 - a parser of another Python release: fall back to searching
        return None


class LiteralIndex:
    """Which of many patterns may match a line, found from the line's 3-character pieces.

    Built from the patterns' requirements (in table order); `candidates` returns, in that
    order, the positions of the patterns that may match: those without a requirement and
    those one of whose literals the line contains, found in one pass over the line instead
    of a test per literal.
    """

    def __init__(self, requirements: list[Requirement]) -> None:
        self._always = [i for i, req in enumerate(requirements) if req is None]
        self._by_literal: dict[str, list[int]] = {}
        for i, req in enumerate(requirements):
            for literal in req or ():
                self._by_literal.setdefault(literal, []).append(i)
        self._by_head: dict[str, list[str]] = {}
        for literal in self._by_literal:
            self._by_head.setdefault(literal[:MIN_LITERAL], []).append(literal)

    def candidates(self, line: str) -> list[int]:
        """Positions (ascending) of the patterns that may match this line."""
        heads = {line[i : i + MIN_LITERAL] for i in range(len(line) - MIN_LITERAL + 1)}
        found = set(self._always)
        for head in heads.intersection(self._by_head):
            for literal in self._by_head[head]:
                if literal in line:
                    found.update(self._by_literal[literal])
        return sorted(found)
