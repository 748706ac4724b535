"""Diagnosis accuracy benchmark: the signature table scored on the real-log corpora.

Scores every entry of the tune part (tests/data/diagnosis/corpus.yaml and the
blind sets folded into it, blind-*.yaml; see TUNE_PATHS) and of the held-back part (tests/data/diagnosis/heldback.yaml,
collected blind to the signature table; see orchestrator/diagnose_corpus.py)
with `verdict()` and prints, per part, a per-layer table of entries, right,
unknown and wrong answers, and the overall accuracy (for tune, also per file).
Exits 1 when the held-back accuracy is below 90 %, when more than 3 % of either
part's answers name a wrong layer with confidence, or when the held-back file
is missing (then it says so and prints the tune figures only).

    .venv/bin/python bench/diagnose.py [--smoke] [--misses] [--json] [--write-doc]

--misses lists the tune part's misses only (the held-back part is read as
totals, never entry by entry); --smoke prints just the totals and exits 0
whatever they are, with or without the held-back file (it proves the benchmark
runs; the bar is the full run's); --write-doc rebuilds the word model
(orchestrator/data/diagnose_words.json) from the tune part and regenerates
docs/troubleshooting.md with the current numbers (without the held-back file
it shows the tune figures and says the held-back ones come from the full run).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orchestrator import diagnose_words  # noqa: E402
from orchestrator.diagnose import render_troubleshooting_markdown  # noqa: E402
from orchestrator.diagnose_blind import HELDBACK_PATH, TUNE_PATHS  # noqa: E402
from orchestrator.diagnose_corpus import (  # noqa: E402
    MAX_WRONG_RATE,
    MIN_HELD_ACCURACY,
    CorpusError,
    Score,
    by_file,
    corpus_markdown,
    load_parts,
    score,
    score_parts,
    table_rows,
    words_model,
)

DOC_PATH = ROOT / "docs" / "troubleshooting.md"
COUNTS = ("entries", "right", "unknown", "wrong")


def print_table(part: Score) -> None:
    title = "tune" if part.split == "tune" else "held back"
    print(f"\n{title} ({part.total.entries} entries)")
    print(f"  {'layer':<17}{'entries':>8}{'right':>7}{'unknown':>9}{'wrong':>7}{'accuracy':>10}")
    for layer, entries, right, unknown, wrong, accuracy in table_rows(part):
        print(f"  {layer:<17}{entries:>8}{right:>7}{unknown:>9}{wrong:>7}{accuracy:>10}")
    if part.split == "tune":
        for file, entries in by_file(o.entry for o in part.outcomes).items():
            t = score(entries, "tune").total
            print(f"  {file}: {t.right}/{t.entries} right ({t.accuracy:.1%}), {t.unknown} unknown, {t.wrong} wrong")


def print_misses(part: Score) -> None:
    misses = [o for o in part.outcomes if o.result != "right"]
    print(f"\ntune misses ({len(misses)})")
    for o in misses:
        got = o.verdict.layer
        extra = f" candidates={','.join(o.verdict.candidates)}" if o.verdict.candidates else ""
        via = f" via {o.verdict.finding.signature_id}" if o.verdict.finding else ""
        print(f"  {o.entry.file}: {o.entry.id}: want {o.entry.layer}, got {got}{via}{extra}")


def _summary(p: Score) -> dict[str, object]:
    return {
        "entries": p.total.entries,
        "right": p.total.right,
        "unknown": p.total.unknown,
        "wrong": p.total.wrong,
        "accuracy": round(p.total.accuracy, 4),
        "wrong_rate": round(p.total.wrong_rate, 4),
        "per_layer": {r[0]: dict(zip(COUNTS, r[1:5], strict=True)) for r in table_rows(p)},
        "per_file": {
            file: dict(zip(COUNTS, (t.entries, t.right, t.unknown, t.wrong), strict=True))
            for file, entries in by_file(o.entry for o in p.outcomes).items()
            for t in [score(entries, p.split).total]
        },
    }


def shown(path: Path) -> str:
    """`path` relative to the repository when it is inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def failures(tune: Score, held: Score | None, held_path: Path) -> list[str]:
    """Why the full run fails the bar (empty when it passes)."""
    out = []
    if not tune.few_wrong:
        out.append(f"tune part: wrong {tune.total.wrong_rate:.1%} (need <= {MAX_WRONG_RATE:.0%})")
    if held is None:
        out.append(f"the held-back set is missing ({shown(held_path)}): no generalisation figure")
    elif not held.passes:
        out.append(
            f"held-back accuracy {held.total.accuracy:.1%} (need >= {MIN_HELD_ACCURACY:.0%}), "
            f"wrong {held.total.wrong_rate:.1%} (need <= {MAX_WRONG_RATE:.0%})"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpus",
        type=Path,
        action="append",
        help=f"a tune file (repeatable; default: {', '.join(shown(p) for p in TUNE_PATHS)})",
    )
    parser.add_argument("--heldback", type=Path, default=HELDBACK_PATH, help="the held-back part")
    parser.add_argument("--smoke", action="store_true", help="print only the totals, exit 0")
    parser.add_argument("--misses", action="store_true", help="list the tune part's misses")
    parser.add_argument("--json", action="store_true", help="one JSON document")
    parser.add_argument("--write-doc", action="store_true", help=f"regenerate {DOC_PATH.relative_to(ROOT)}")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    try:
        entries = load_parts(args.corpus or TUNE_PATHS, args.heldback)
    except CorpusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.write_doc:  # the word model first: the verdicts below use it
        diagnose_words.MODEL_PATH.write_text(words_model(entries["tune"] or []).to_json())
        diagnose_words.model.cache_clear()
        print(f"wrote {diagnose_words.MODEL_PATH.relative_to(ROOT)}")
    parts = score_parts(entries)
    elapsed = time.perf_counter() - t0
    tune, held = parts["tune"], parts["held"]
    assert tune is not None
    failed = failures(tune, held, args.heldback)
    missing = f"held-back set {shown(args.heldback)} is missing: tune figures only"

    if args.json:
        doc = {name: (_summary(p) if p is not None else None) for name, p in parts.items()}
        print(json.dumps({"ok": not failed, "seconds": round(elapsed, 3), "failures": failed, **doc}, indent=2))
    elif args.smoke:
        for name, p in parts.items():
            if p is None:
                print(f"{name}: {missing}")
                continue
            t = p.total
            print(f"{name}: {t.right}/{t.entries} right ({t.accuracy:.1%}), {t.unknown} unknown, {t.wrong} wrong")
    else:
        n = sum(len(e) for e in entries.values() if e is not None)
        print(f"{n} corpus entries scored in {elapsed * 1000:.0f} ms")
        print_table(tune)
        if held is not None:
            print_table(held)
        else:
            print(f"\n{missing}")
        if args.misses:
            print_misses(tune)
    if args.write_doc:
        section = corpus_markdown(entries["tune"] or [], entries["held"], args.corpus or TUNE_PATHS, args.heldback)
        DOC_PATH.write_text(render_troubleshooting_markdown(section))
        print(f"wrote {DOC_PATH.relative_to(ROOT)}")
    if failed and not args.smoke:
        for reason in failed:
            print(f"FAIL: {reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
