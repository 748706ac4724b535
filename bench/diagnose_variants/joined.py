"""A bench/diagnose_history.py variant: today's rule for a line a console wrapped
(orchestrator.diagnose.classify and _joined), applied to each old table.

Where neither of two neighbouring lines matches a signature alone, the first is at least
MIN_WRAPPED_LINE characters long and the pair looks wrapped, the pair is matched as one line: joined
with a space when the second is indented under the first, joined as they are when the first is as
wide as the log's widest line (a fixed-width cut). The old table's own classify matches the joined
line, so every table keeps its signatures. Today's bound on the pairs one log reads again
(orchestrator.diagnose.MAX_UNWRAPPED) is left out: no corpus excerpt comes near it.

    .venv/bin/python bench/diagnose_history.py --variant bench/diagnose_variants/joined.py
"""

import dataclasses

import orchestrator.diagnose as old  # the table this blind set was held back from

MIN_WRAPPED_LINE = 60  # orchestrator.diagnose.MIN_WRAPPED_LINE
as_it_was = old.classify


def classify(text):
    found = as_it_was(text)
    matched = {f.line_number for f in found}
    lines = text.splitlines()
    width = max(map(len, lines), default=0)
    extra = []
    for i in range(len(lines) - 1):
        first, second = lines[i], lines[i + 1]
        if i + 1 in matched or i + 2 in matched or len(first) < MIN_WRAPPED_LINE:
            continue
        if second[:1].isspace():
            joined = f"{first.rstrip()} {second.strip()}"
        elif len(first) == width:
            joined = first + second
        else:
            continue
        hits = as_it_was(joined)
        if hits:
            extra.append(dataclasses.replace(hits[0], line=joined, line_number=i + 1))
    return sorted(found + extra, key=lambda f: f.line_number)


old.classify = classify
