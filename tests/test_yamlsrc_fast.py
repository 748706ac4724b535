"""The libyaml fast path reads a document exactly as the pure-Python parser does, and errors still come
from the pure-Python parser (its line and message)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from orchestrator import yamlsrc
from orchestrator.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = sorted([ROOT / "fleet.yaml", *(ROOT / "examples").rglob("*.yaml"), *(ROOT / "playbooks").rglob("*.yaml")])


def slow_loads(text: str, path: Path, monkeypatch: pytest.MonkeyPatch) -> yamlsrc.Located:
    with monkeypatch.context() as m:
        m.setattr(yamlsrc, "_FAST_LOADER", None)
        return yamlsrc.loads(text, path)


@pytest.mark.skipif(not hasattr(yaml, "CSafeLoader"), reason="PyYAML built without libyaml")
@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_fast_parser_gives_the_same_data_and_lines_as_the_pure_python_one(path, monkeypatch):
    text = path.read_text()
    fast, slow = yamlsrc.loads(text, path), slow_loads(text, path, monkeypatch)
    assert fast.data == slow.data
    assert fast.lines == slow.lines


def test_a_large_fleet_file_parses_with_a_line_for_every_worker():
    rows = "\n".join(f"      - {{index: {i}, address: 10.0.{i // 256}.{i % 256}}}" for i in range(1024))
    text = f"version: 1\nslices:\n  s:\n    workers:\n{rows}\n"
    located = yamlsrc.loads(text, Path("fleet.yaml"))
    assert len(located.data["slices"]["s"]["workers"]) == 1024
    assert located.line(("slices", "s", "workers", 1023)) == 5 + 1023


@pytest.mark.parametrize(
    "text, line, words",
    [
        ("a: 1\nb: [1, 2\n", 3, "not valid YAML"),
        ("a: 1\nb: \x07\n", 2, "U+0007"),
        ("a: 1\na: 2\n", 2, "duplicate key 'a'"),
        ("a: &x [1]\nb: *y\n", 2, "alias *y is not defined"),
    ],
)
def test_a_refused_document_is_reported_with_the_pure_python_parsers_line_and_message(text, line, words, monkeypatch):
    with pytest.raises(ConfigError) as fast:
        yamlsrc.loads(text, Path("f.yaml"))
    with pytest.raises(ConfigError) as slow:
        slow_loads(text, Path("f.yaml"), monkeypatch)
    assert str(fast.value) == str(slow.value)
    assert str(fast.value).startswith(f"f.yaml:{line} ") and words in str(fast.value)
