"""The literal index that lets `orch diagnose` skip most regex searches never changes an answer."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator import diagnose as diag
from orchestrator.diagnose_corpus import load_tune
from orchestrator.diagnose_literals import LiteralIndex, required_literals
from orchestrator.diagnose_table import MAX_LINE_SEARCH, SIGNATURES


def searched(line: str) -> diag.Signature | None:
    """match_line without the index: every signature searched on every line (the reference)."""
    text = line[:MAX_LINE_SEARCH]
    bare = diag._LAUNCHER_PREFIX.sub("", text, count=1)
    best = None
    for sig in SIGNATURES:
        if (best is None or sig.priority > best.priority) and any(sig.pattern.search(t) for t in {text, bare}):
            best = sig
    return best


@pytest.mark.parametrize(
    ("pattern", "literals"),
    [
        (r"Host key verification failed\.", {"Host key verification failed."}),
        (r"ab(c|de)+\bfoo", {"foo"}),  # runs split at the group and at \b; short runs are not kept
        (r"abc|xyz", {"abc", "xyz"}),
        (r"(?i)No Space left", None),  # case-blind: nothing is required as written
        (r"(?i:abcd)efg", {"efg"}),  # only the case-sensitive part
        (r"(ENOSPC|[Nn]o space left)", {"ENOSPC", "o space left"}),  # a character class ends a run
        (r"(?:foo)+ bar", {" bar"}),  # of two runs every match holds, the longer
        (r"caf\u00e9 au lait", {"caf\u00e9 au lait"}),
        (r"x?", None),
        (r"(abc)?def", {"def"}),
        (r"(abc|d)", None),  # one alternative has no usable literal: nothing is known
        (r"\d+ \w+", None),
    ],
)
def test_the_required_literals_of_a_pattern(pattern, literals):
    got = required_literals(re.compile(pattern))
    assert (None if got is None else set(got)) == literals


def test_every_signature_has_literals_and_its_example_passes_the_index():
    index = LiteralIndex([required_literals(s.pattern) for s in SIGNATURES])
    for position, sig in enumerate(SIGNATURES):
        literals = required_literals(sig.pattern)
        assert literals is not None, sig.id
        for line in sig.example.splitlines():
            if sig.pattern.search(line):
                assert LiteralIndex([literals]).candidates(line) == [0], sig.id
                assert position in index.candidates(line), sig.id


def test_every_line_of_the_corpus_gets_the_same_signature_as_with_every_search():
    lines = {line for entry in load_tune() for line in entry.excerpt.splitlines()}
    assert len(lines) > 3000
    for line in lines:
        assert diag.match_line(line) is searched(line), line


# Lines built around real messages: case changed, a launcher's prefix, noise on both sides.
_messages = st.sampled_from([line for s in SIGNATURES for line in s.example.splitlines() if line.strip()])
_noise = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)


@settings(max_examples=300, deadline=None)
@given(
    message=_messages,
    before=_noise,
    after=_noise,
    case=st.sampled_from([str, str.upper, str.lower, str.swapcase]),
    prefix=st.sampled_from(["", "[rank3]: ", "(pid=12, ip=10.0.0.2) ", "2020-07-11 06:43:09 10.164.0.3 [2] "]),
)
def test_a_real_message_in_any_case_and_company_gets_the_same_answer(message, before, after, case, prefix):
    line = prefix + before + case(message) + after
    assert diag.match_line(line) is searched(line)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=200))
def test_any_text_gets_the_same_answer(line):
    assert diag.match_line(line) is searched(line)


@pytest.mark.parametrize(
    ("pattern", "line"),
    [
        (r"(?i)kiss", "\u212ai\u017f\u017f"),  # KELVIN SIGN and LONG S match k and s when case is ignored
        (r"(?i:ixy) failed", "\u0130xy failed"),  # a dotted capital I matches i; folded it is two characters
    ],
)
def test_a_case_blind_pattern_or_group_is_always_searched(pattern, line):
    compiled = re.compile(pattern)
    assert compiled.search(line)
    assert LiteralIndex([required_literals(compiled)]).candidates(line) == [0]
