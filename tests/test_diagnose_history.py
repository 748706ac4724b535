"""bench/diagnose_history.py: each blind set re-scored by the table it was held back from, out of the history."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.diagnose_blind import BLIND_SCORES

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench" / "diagnose_history.py"


def history(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=300)


def scored_with() -> dict[str, str]:
    sys.path.insert(0, str(BENCH.parent))
    try:
        import diagnose_history
    finally:
        sys.path.remove(str(BENCH.parent))
    return dict(diagnose_history.SCORED_WITH)


@pytest.fixture(scope="module")
def full_history() -> None:
    for commit in scored_with().values():
        known = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
        if known.returncode != 0:
            pytest.skip(f"commit {commit} is not in this clone (a shallow clone): the history cannot be re-run")


def test_each_blind_set_rescored_from_history_gives_the_figures_recorded_when_it_was_held_back(full_history, tmp_path):
    res = history("--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    recorded = {path.name: score for path, score in BLIND_SCORES}
    for name in scored_with():
        n, right, unknown, wrong = (sum(v[i] for v in recorded[name].values()) for i in range(4))
        assert doc["as scored"][name] == {"entries": n, "right": right, "unknown": unknown, "wrong": wrong}, name
    assert doc["as scored"]["all"]["entries"] == sum(doc["as scored"][n]["entries"] for n in scored_with())


def test_a_variant_runs_in_every_old_table_and_is_scored_beside_it(full_history, tmp_path):
    variant = tmp_path / "nothing_known.py"
    variant.write_text("import orchestrator.diagnose as d\nd.verdict = lambda text: d.Verdict(d.UNKNOWN, None)\n")
    doc = json.loads(history("--json", "--variant", str(variant)).stdout)
    every = doc["variant"]["all"]
    assert every["entries"] == doc["as scored"]["all"]["entries"] and every["wrong"] == 0
    assert every["right"] < doc["as scored"]["all"]["right"]  # only the `other` entries are right now


# the word rule fitted before each set, the wrapped-line rule, and the rule for where a log stops
@pytest.mark.parametrize("rule", ["words.py", "joined.py", "stall.py"])
def test_a_general_rule_adds_right_answers_and_no_wrong_one(full_history, rule):
    doc = json.loads(history("--json", "--variant", str(REPO / "bench" / "diagnose_variants" / rule)).stdout)
    for name in [*scored_with(), "all"]:
        was, now = doc["as scored"][name], doc["variant"][name]
        assert now["right"] >= was["right"] and now["wrong"] <= was["wrong"], name
    assert doc["variant"]["all"]["right"] > doc["as scored"]["all"]["right"]
