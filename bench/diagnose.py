"""Diagnosis accuracy benchmark: the signature table scored on the real-log corpus.

Scores every entry of tests/data/diagnosis/corpus.yaml with `verdict()` and
prints, for the tune part and the held-back part (see
orchestrator/diagnose_corpus.py for the split), a per-layer table of entries,
right, unknown and wrong answers, and the overall accuracy. Exits 1 when the
held-back accuracy is below 90 % or more than 3 % of its answers name a wrong
layer with confidence.

    .venv/bin/python bench/diagnose.py [--smoke] [--misses] [--json] [--write-doc]

--misses lists the tune part's misses only (the held-back part is read as
totals, never entry by entry); --smoke prints just the two totals and exits 0
whatever they are (it proves the benchmark runs; the bar is the full run's);
--write-doc regenerates docs/troubleshooting.md with the current numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orchestrator.diagnose import render_troubleshooting_markdown  # noqa: E402
from orchestrator.diagnose_corpus import (  # noqa: E402
    CORPUS_PATH,
    MAX_WRONG_RATE,
    MIN_HELD_ACCURACY,
    SPLITS,
    Score,
    corpus_markdown,
    load_corpus,
    score,
    table_rows,
)

DOC_PATH = ROOT / "docs" / "troubleshooting.md"
COUNTS = ("entries", "right", "unknown", "wrong")


def print_table(part: Score) -> None:
    title = "tune" if part.split == "tune" else "held back"
    print(f"\n{title} ({part.total.entries} entries)")
    print(f"  {'layer':<17}{'entries':>8}{'right':>7}{'unknown':>9}{'wrong':>7}{'accuracy':>10}")
    for layer, entries, right, unknown, wrong, accuracy in table_rows(part):
        print(f"  {layer:<17}{entries:>8}{right:>7}{unknown:>9}{wrong:>7}{accuracy:>10}")


def print_misses(part: Score) -> None:
    misses = [o for o in part.outcomes if o.result != "right"]
    print(f"\ntune misses ({len(misses)})")
    for o in misses:
        got = o.verdict.layer
        extra = f" candidates={','.join(o.verdict.candidates)}" if o.verdict.candidates else ""
        via = f" via {o.verdict.finding.signature_id}" if o.verdict.finding else ""
        print(f"  {o.entry.id}: want {o.entry.layer}, got {got}{via}{extra}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS_PATH)
    parser.add_argument("--smoke", action="store_true", help="print only the two totals")
    parser.add_argument("--misses", action="store_true", help="list the tune part's misses")
    parser.add_argument("--json", action="store_true", help="one JSON document")
    parser.add_argument("--write-doc", action="store_true", help=f"regenerate {DOC_PATH.relative_to(ROOT)}")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    entries = load_corpus(args.corpus)
    parts = {name: score(entries, name) for name in SPLITS}
    elapsed = time.perf_counter() - t0
    held = parts["held"]
    ok = held.passes

    if args.json:
        doc = {
            name: {
                "entries": p.total.entries,
                "right": p.total.right,
                "unknown": p.total.unknown,
                "wrong": p.total.wrong,
                "accuracy": round(p.total.accuracy, 4),
                "wrong_rate": round(p.total.wrong_rate, 4),
                "per_layer": {r[0]: dict(zip(COUNTS, r[1:5], strict=True)) for r in table_rows(p)},
            }
            for name, p in parts.items()
        }
        print(json.dumps({"ok": ok, "seconds": round(elapsed, 3), **doc}, indent=2))
    elif args.smoke:
        for name, p in parts.items():
            t = p.total
            print(f"{name}: {t.right}/{t.entries} right ({t.accuracy:.1%}), {t.unknown} unknown, {t.wrong} wrong")
    else:
        print(f"{len(entries)} corpus entries scored in {elapsed * 1000:.0f} ms")
        for name in SPLITS:
            print_table(parts[name])
        if args.misses:
            print_misses(parts["tune"])
    if args.write_doc:
        DOC_PATH.write_text(render_troubleshooting_markdown(corpus_markdown(entries)))
        print(f"wrote {DOC_PATH.relative_to(ROOT)}")
    if not ok and not args.smoke:
        print(
            f"FAIL: held-back accuracy {held.total.accuracy:.1%} (need >= {MIN_HELD_ACCURACY:.0%}), "
            f"wrong {held.total.wrong_rate:.1%} (need <= {MAX_WRONG_RATE:.0%})",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
