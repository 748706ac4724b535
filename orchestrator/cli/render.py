"""Terminal rendering shared by verbs: per-host summaries."""

from __future__ import annotations

import re
from collections.abc import Mapping
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


def print_summary(results: Mapping[str, Result], what: str = "hosts") -> None:
    """`N/M ok` plus one line per failed host, on stderr."""
    failed = {h: r for h, r in results.items() if r.failed}
    total = len(results)
    slowest = max(results.values(), key=lambda r: r.elapsed, default=None)
    line = f"{total - len(failed)}/{total} {what} ok"
    if slowest is not None:
        line += f" (slowest {slowest.host} {slowest.elapsed:.2f}s)"
    click.echo(line, err=True)
    for host, r in failed.items():
        click.echo(f"  FAILED {host}: {r.describe()}", err=True)
