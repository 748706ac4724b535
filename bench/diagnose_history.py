"""How the signature table generalised: each blind set scored by the table it was held back from.

Each blind set folded into tune (tests/data/diagnosis/blind-N.yaml) was scored once as the held-back part, with
the table of the commit named in `SCORED_WITH`, before anything was tuned on it. This benchmark
re-runs those scorings from the repository's history (`git archive` of that commit's
orchestrator/ into a temporary directory, classified in a fresh interpreter), so the figures
do not rest on the doc's word, and the sets together (several hundred entries) say more than one
held-back file of a few dozen.

Its use is to judge a *general* change to the classifier (a rule, not a signature written for an
entry) on data no table had seen: `--variant FILE` runs FILE's Python in each scoring
interpreter after the old table is importable and before anything is classified, so it can
patch the decision (orchestrator.diagnose) or the signature builder (orchestrator.diagnose_sig)
of every old table alike. The run prints, per blind set and in total, right, unknown and wrong
for the tables as they were, and with the variant beside them.

    .venv/bin/python bench/diagnose_history.py [--variant FILE] [--json]

Needs the repository's history (a full clone); a shallow clone says which commit is missing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orchestrator.diagnose_blind import DATA_DIR  # noqa: E402
from orchestrator.diagnose_corpus import load_corpus  # noqa: E402

# blind set -> the commit whose table scored it the one time it was held back (its file's header
# names the same commit for the sets that record one; for the others, the commit that recorded the
# score, or the one that added the set when the table did not change between the two).
SCORED_WITH = {
    "blind-1.yaml": "391b03b",
    "blind-2.yaml": "935f5c5",
    "blind-3.yaml": "fa758bd",
    "blind-4.yaml": "fc3a299",
    "blind-5.yaml": "d25f089",
    "blind-6.yaml": "d27bcee",
    "blind-7.yaml": "e15250b",
    "blind-8.yaml": "761d083",
    "blind-9.yaml": "da524fd",
    "blind-10.yaml": "79835ec",
    "blind-11.yaml": "14726c1",
    "blind-12.yaml": "83705e7",
    "blind-13.yaml": "621e9a2",
    "blind-14.yaml": "df1b74a",
    "blind-15.yaml": "d1c2e8b",
    "blind-16.yaml": "ce9fbe7",
    "blind-17.yaml": "2b530e4",
    "blind-18.yaml": "36f360c",
    "blind-19.yaml": "7d2dfa1",
    "blind-20.yaml": "11fd3f6",
    "blind-21.yaml": "5a2e0fe",
    "blind-22.yaml": "2e6f322",
    "blind-23.yaml": "97fe34f",
    "blind-24.yaml": "6b51538",
    "blind-25.yaml": "f987041",
    "blind-26.yaml": "f2ecb18",
    "blind-27.yaml": "9973ece",
    "blind-28.yaml": "0a34dee",
    "blind-29.yaml": "3c32946",
    "blind-30.yaml": "cf415bb",
    "blind-31.yaml": "d79ff49",
    "blind-32.yaml": "f1eeca7",
    "blind-33.yaml": "a1be131",
    "blind-34.yaml": "9d58085",
    "blind-35.yaml": "1260f52",
    "blind-36.yaml": "c72d206",
    "blind-37.yaml": "af7845e",
    "blind-38.yaml": "4a27b1a",
    "blind-39.yaml": "95f41bc",
    "blind-40.yaml": "0dc8706",
    "blind-41.yaml": "5025a22",
    "blind-42.yaml": "1aaae41",
    "blind-43.yaml": "cdbf5cb",
    "blind-44.yaml": "884023b",
}

# Run in the scoring interpreter: argv = [table dir, corpus file, variant file or ""]; prints
# {id: layer or "unknown"} for every entry of the corpus file.
CLASSIFY = """
import json, sys
sys.path.insert(0, sys.argv[1])
if sys.argv[3]:
    exec(compile(open(sys.argv[3]).read(), sys.argv[3], "exec"), {"__name__": "variant", "__file__": sys.argv[3]})
import yaml
import orchestrator.diagnose as diagnose
doc = yaml.safe_load(open(sys.argv[2]))
entries = doc["entries"] if isinstance(doc, dict) else doc
print(json.dumps({e["id"]: diagnose.verdict(e["excerpt"]).layer for e in entries}))
"""


def outcome(want: str, got: str) -> str:
    """right / unknown / wrong, as bench/diagnose.py scores (an `other` entry is right when unknown)."""
    if want == "other":
        return "right" if got in ("unknown", "other") else "wrong"
    if got == want:
        return "right"
    return "unknown" if got == "unknown" else "wrong"


def table_at(commit: str, into: Path) -> Path:
    """`commit`'s orchestrator/ package, extracted under `into`."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "orchestrator"], capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"commit {commit} is not in this clone's history ({archive.stderr.decode().strip()})")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def verdicts(table: Path, corpus: Path, variant: Path | None) -> dict[str, str]:
    res = subprocess.run(
        [sys.executable, "-c", CLASSIFY, str(table), str(corpus), str(variant or "")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if res.returncode != 0:
        raise SystemExit(f"classifying {corpus.name} with the table in {table} failed:\n{res.stderr[-3000:]}")
    out: dict[str, str] = json.loads(res.stdout)
    return out


def tally(corpus: Path, got: dict[str, str]) -> dict[str, int]:
    counts = {"entries": 0, "right": 0, "unknown": 0, "wrong": 0}
    for entry in load_corpus(corpus):
        counts["entries"] += 1
        counts[outcome(entry.layer, got[entry.id])] += 1
    return counts


def line(name: str, c: dict[str, int]) -> str:
    n = c["entries"]
    return (
        f"{name:<14}{n:>8}{c['right']:>7}{c['unknown']:>9}{c['wrong']:>7}{c['right'] / n:>10.1%}{c['wrong'] / n:>8.1%}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", type=Path, help="Python run before classifying, in every old table")
    parser.add_argument("--json", action="store_true", help="one JSON document instead of the tables")
    args = parser.parse_args()
    runs: dict[str, dict[str, dict[str, int]]] = {"as scored": {}}
    if args.variant:
        runs["variant"] = {}
    with tempfile.TemporaryDirectory(prefix="orch-diagnose-history-") as tmp:
        for name, commit in SCORED_WITH.items():
            table = table_at(commit, Path(tmp) / commit)
            corpus = DATA_DIR / name
            runs["as scored"][name] = tally(corpus, verdicts(table, corpus, None))
            if args.variant:
                runs["variant"][name] = tally(corpus, verdicts(table, corpus, args.variant.resolve()))
    for sets in runs.values():
        sets["all"] = {k: sum(c[k] for c in sets.values()) for k in ("entries", "right", "unknown", "wrong")}
    if args.json:
        print(json.dumps({"scored_with": SCORED_WITH, **runs}, indent=2))
        return 0
    for title, sets in runs.items():
        print(f"\n{title}{f' ({args.variant})' if title == 'variant' else ''}")
        print(f"{'set':<14}{'entries':>8}{'right':>7}{'unknown':>9}{'wrong':>7}{'accuracy':>10}{'wrong%':>8}")
        for name, counts in sets.items():
            print(line(name, counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
