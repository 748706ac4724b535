"""bench/diagnose_known.py: the threads a new blind set must not reuse."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from orchestrator.diagnose_blind import DATA_DIR
from orchestrator.diagnose_corpus import load_corpus

BENCH = Path(__file__).resolve().parent.parent / "bench" / "diagnose_known.py"


def bench_module():
    sys.path.insert(0, str(BENCH.parent))
    try:
        import diagnose_known
    finally:
        sys.path.remove(str(BENCH.parent))
    return diagnose_known


def test_one_thread_has_one_spelling():
    normalise = bench_module().normalise
    spellings = [
        "https://github.com/Owner/Repo/pull/12",
        "http://www.github.com/owner/repo/issues/12#issuecomment-99",
        "github.com/owner/repo/issues/12/",
    ]
    assert {normalise(s) for s in spellings} == {"github.com/owner/repo/issues/12"}
    assert normalise("https://Stackoverflow.com/questions/70074789/cuda-oom#answer-1") == (
        "stackoverflow.com/questions/70074789/cuda-oom"
    )


def test_every_quoted_source_and_every_cited_thread_is_known():
    known = set(bench_module().known())
    corpus = [
        e for path in sorted(DATA_DIR.glob("*.yaml")) if path.name != "held-scores.yaml" for e in load_corpus(path)
    ]
    module = bench_module()
    assert {module.normalise(e.source) for e in corpus} <= known
    # a thread cited only in a comment, as owner/repo#N (orchestrator/diagnose_table_bundle.py)
    assert "github.com/prefix-dev/pixi/issues/3949" in known


def test_the_count_is_printed_alone():
    res = subprocess.run([sys.executable, str(BENCH), "--count"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert int(res.stdout) == len(bench_module().known())
