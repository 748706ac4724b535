"""Worker names, compacted for a summary: `slice-w0, slice-w1, slice-w2, slice-w7` -> `slice-w[0-2,7]`.

Shared by the terminal summaries and the HTML report, so 256 workers read as a
few spans rather than a wall of names. Imports nothing of orch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def compact_names(names: Iterable[str]) -> str:
    """Numbered names folded into spans per prefix (in first-seen prefix order); other names as they are."""
    groups: dict[str, list[int]] = {}
    plain: list[str] = []
    for name in names:
        m = _NUMBERED.match(name)
        if m and not (len(m.group(2)) > 1 and m.group(2).startswith("0")):
            groups.setdefault(m.group(1), []).append(int(m.group(2)))
        else:
            plain.append(name)
    parts = []
    for prefix, numbers in groups.items():
        spans = _spans(sorted(set(numbers)))
        parts.append(
            f"{prefix}{spans[0]}" if len(spans) == 1 and "-" not in spans[0] else f"{prefix}[{','.join(spans)}]"
        )
    return ", ".join(parts + plain)


def _spans(numbers: Sequence[int]) -> list[str]:
    spans: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return spans


def alike(pairs: Iterable[tuple[str, str]]) -> list[str]:
    """`(worker, message)` pairs as one line per distinct message, in first-seen order: `slice-w3:
    message` for one worker, `N x message: slice-w[0-2,7]` for several (a failure 256 workers share
    is one line, not 256)."""
    groups: dict[str, list[str]] = {}
    for worker, message in pairs:
        groups.setdefault(message, []).append(worker)
    return [
        f"{workers[0]}: {message}" if len(workers) == 1 else f"{len(workers)} x {message}: {compact_names(workers)}"
        for message, workers in groups.items()
    ]


def alike_lines(lines: Iterable[str], workers: Iterable[str]) -> list[str]:
    """`alike` for lines written `worker: message` (any other line is kept as it is, before them)."""
    known = set(workers)
    pairs: list[tuple[str, str]] = []
    other: list[str] = []
    for line in lines:
        worker, sep, message = line.partition(": ")
        if sep and worker in known:
            pairs.append((worker, message))
        else:
            other.append(line)
    return other + alike(pairs)
