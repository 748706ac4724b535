"""A bench/diagnose_history.py variant: today's rule for a line a console wrapped
(orchestrator/diagnose_wrapped.py), applied to each old table as orchestrator.diagnose.classify applies it.

Where neither of two neighbouring lines matches a signature alone and the pair looks wrapped, the
old table's own classify matches the joined line, so every table keeps its signatures. Today's bound
on the pairs one log reads again (orchestrator.diagnose.MAX_UNWRAPPED) is left out: no corpus
excerpt comes near it.

    .venv/bin/python bench/diagnose_history.py --variant bench/diagnose_variants/joined.py
"""

import dataclasses
import sys
from pathlib import Path

import orchestrator.diagnose as old  # the table this blind set was held back from

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _today  # noqa: E402

wrapped = _today.load("diagnose_wrapped")
as_it_was = old.classify


def classify(text):
    found = as_it_was(text)
    matched = {f.line_number for f in found}
    lines = text.splitlines()
    width = max(map(len, lines), default=0)
    extra = []
    for i in range(len(lines) - 1):
        joined = None if {i + 1, i + 2} & matched else wrapped.joined(lines[i], lines[i + 1], width)
        hits = as_it_was(joined) if joined is not None else []
        if hits:
            extra.append(dataclasses.replace(hits[0], line=joined, line_number=i + 1))
    return sorted(found + extra, key=lambda f: f.line_number)


old.classify = classify
