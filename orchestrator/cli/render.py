"""Terminal rendering shared by verbs: per-host summaries."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # the CLI imports core modules only when a verb runs
    from orchestrator.transport import Result


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
