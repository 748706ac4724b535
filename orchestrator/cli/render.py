"""Terminal rendering shared by verbs: per-host summaries that stay readable at 256 workers.

Up to `SUMMARY_THRESHOLD` workers a verb prints one row per worker. Above it,
it prints a summary instead: counts by state, the slowest workers, and every
failure, grouped by reason with the workers' names compacted
(`slice-w[3,17-19]`); `--verbose` brings back every row.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # the CLI imports core modules only when a verb runs
    from rich.text import Text

    from orchestrator.transport import Result

# Control characters (an ESC starts a terminal sequence that could recolour or hide output).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(value: object) -> str:
    """`value` as text that a terminal shows and does not act on: control characters escaped."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))


def cell(value: object, style: str = "") -> Text:
    """A rich table cell showing `value` exactly: never read as markup (`[/bold]`, `[link=...]`
    from a worker stay text), control characters escaped."""
    from rich.text import Text

    return Text(shown(value), style=style)


# More workers than this: a summary instead of one row each (unless --verbose).
SUMMARY_THRESHOLD = 16
SLOWEST = 3

VERBOSE_HELP = f"Every worker's row, also above {SUMMARY_THRESHOLD} workers (default there: a summary)."


def verbose_option(fn: click.decorators.FC) -> click.decorators.FC:
    """`--verbose`/`-v`: one row per worker however many there are."""
    return click.option("-v", "--verbose", is_flag=True, help=VERBOSE_HELP)(fn)


def summarize(count: int, verbose: bool) -> bool:
    """Whether `count` rows collapse to a summary."""
    return count > SUMMARY_THRESHOLD and not verbose


@dataclass(frozen=True)
class Row:
    """One worker's outcome, as a summary sees it."""

    worker: str
    state: str
    listed: bool  # a failure (or a warning): named in the summary, grouped by state and detail
    detail: str = ""
    elapsed: float | None = None


def compact_names(names: Iterable[str]) -> str:
    """`slice-w0, slice-w1, slice-w2, slice-w7` -> `slice-w[0-2,7]` (see orchestrator.names)."""
    from orchestrator.names import compact_names as compact

    return compact(names)


def summary_lines(
    rows: Sequence[Row], what: str = "workers", verbose_hint: bool = True, states: Sequence[str] = ()
) -> list[str]:
    """Counts by state (in the order of `states`, then good before listed), the slowest workers,
    and the listed rows grouped by state and reason."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.state] = counts.get(r.state, 0) + 1
    known = {s: i for i, s in enumerate(states)}
    order = sorted(
        counts,
        key=lambda s: (known.get(s, len(known)), any(r.listed for r in rows if r.state == s), -counts[s], s),
    )
    lines = [f"{len(rows)} {what}: " + ", ".join(f"{counts[s]} {s}" for s in order)]
    timed = sorted((r for r in rows if r.elapsed is not None), key=lambda r: r.elapsed or 0.0, reverse=True)
    if timed:
        lines.append("  slowest: " + ", ".join(f"{r.worker} {r.elapsed:.1f}s" for r in timed[:SLOWEST]))
    # details that differ only in their numbers (a clock offset, an address) are one reason
    by_state: dict[str, dict[str, list[Row]]] = {}
    for r in rows:
        if r.listed:
            by_state.setdefault(r.state, {}).setdefault(_NUMBER.sub("#", r.detail), []).append(r)
    for state in order:
        if state not in by_state:
            continue
        lines.append(f"  {state} ({counts[state]}):")
        for group in sorted(by_state[state].values(), key=lambda g: -len(g)):
            detail = merge_details([r.detail for r in group])
            names = compact_names(r.worker for r in group)
            lines.append(shown(f"    {len(group):>3} x {detail or state}: {names}"))
    if verbose_hint:
        lines.append("  (--verbose: one row per worker)")
    return lines


_NUMBER = re.compile(r"\d+(?:\.\d+)*")


def merge_details(details: Sequence[str]) -> str:
    """Details that differ only in their numbers, as one: `by +2.0s..+2.8s`, `cannot reach 10.0.0.*`."""
    literals = _NUMBER.split(details[0])
    columns = list(zip(*(_NUMBER.findall(d) for d in details), strict=True))
    out = [literals[0]]
    for literal, values in zip(literals[1:], columns, strict=True):
        distinct = sorted(set(values), key=lambda v: [int(x) for x in v.split(".")] if v.count(".") > 1 else float(v))
        if len(distinct) == 1:
            out.append(distinct[0])
        elif all(v.count(".") <= 1 for v in distinct):
            out.append(f"{distinct[0]}..{distinct[-1]}")
        else:  # addresses, versions: too many parts for a range
            out.append("*")
        out.append(literal)
    return "".join(out)


def print_summary(results: Mapping[str, Result], what: str = "hosts", verbose: bool = False) -> None:
    """`N/M ok` plus the failed hosts, on stderr: one line each, or grouped by reason above the threshold."""
    failed = {h: r for h, r in results.items() if r.failed}
    total = len(results)
    slowest = max(results.values(), key=lambda r: r.elapsed, default=None)
    line = f"{total - len(failed)}/{total} {what} ok"
    if slowest is not None:
        line += f" (slowest {slowest.host} {slowest.elapsed:.2f}s)"
    click.echo(line, err=True)
    if summarize(len(failed), verbose):
        rows = [Row(h, "FAILED", True, r.describe()) for h, r in failed.items()]
        for text in summary_lines(rows, what)[1:]:
            click.echo(text, err=True)
        return
    for host, r in failed.items():
        click.echo(f"  FAILED {host}: {r.describe()}", err=True)
