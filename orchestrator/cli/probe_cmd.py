"""`orch probe [--lane L] [--workers SEL] [--json] [--shallow] [--timeout S]`."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from orchestrator.cli import complete
from orchestrator.cli.render import Row, compact_names, summarize, summary_lines, verbose_option

if TYPE_CHECKING:  # the CLI imports core modules only when a verb runs
    from orchestrator.cli import Context
    from orchestrator.probe import ProbeReport, WorkerProbe


def register(main: click.Group) -> None:
    """Add `probe` to the top-level group."""
    main.add_command(probe)


VERDICT_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}


@click.command("probe")
@click.option("--lane", shell_complete=complete.lanes, help="Only the workers of this lane.")
@click.option(
    "--workers",
    "selection",
    shell_complete=complete.workers,
    metavar="SEL",
    help="Names, globs or index ranges, comma-separated.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON document with every worker's checks.")
@click.option("--shallow", is_flag=True, help="Skip the runtime check (no frontend is imported).")
@click.option(
    "--timeout",
    type=float,
    metavar="S",
    help="Seconds each worker's probe may take (default 90, shallow 30); a worker that does not "
    "answer in time is reported as transport.",
)
@click.option("--plan", "show_plan", is_flag=True, help="Print the requests that would be sent, contact nothing.")
@verbose_option
@click.pass_obj
def probe(
    obj: Context,
    lane: str | None,
    selection: str | None,
    as_json: bool,
    shallow: bool,
    timeout: float | None,
    show_plan: bool,
    verbose: bool,
) -> None:
    """Prove on every worker that the runtime answers from the intended device.

    Checks host, bundle, device ownership, the runtime (a real import, device
    list and computation under the lane's policy) and caches. Exits 1 when any
    worker fails; the table names the owning layer and a remedy.
    """
    from orchestrator import probe as core

    fleet = obj.fleet()
    workers = fleet.select(lane=lane, workers=selection)
    probe_plan = core.plan(fleet, workers, deep=not shallow, timeout=timeout)
    if show_plan:
        click.echo(json.dumps(probe_plan.to_dict(), indent=2))
        return
    overrides = {}
    if timeout:
        # A worker that cannot even be reached must not take longer than its probe may.
        connect = obj.connect_timeout or fleet.model.ssh.connect_timeout
        overrides["connect_timeout"] = min(connect, timeout)
    with obj.transport(workers, **overrides) as transport:
        report = core.sweep(probe_plan, transport)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        render(report, verbose)
    if report.failed:
        sys.exit(1)


def render(report: ProbeReport, verbose: bool = False) -> None:
    """The per-worker table (above the threshold: a summary), then each failing layer's workers and remedy."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    if summarize(len(report.rows), verbose):
        click.echo(f"orch probe ({'deep' if report.deep else 'shallow'}, {report.elapsed:.1f}s)")
        rows = [Row(r.worker, r.verdict, r.verdict != "ok", _detail(r), r.elapsed) for r in report.rows]
        for line in summary_lines(rows, states=("ok", "warn", "fail")):
            click.echo(line)
        _clock(report)
        _remedies(report, compact=True)
        return

    from orchestrator.cli.render import cell

    console = Console(soft_wrap=False)
    table = Table(title=f"orch probe ({'deep' if report.deep else 'shallow'}, {report.elapsed:.1f}s)", show_lines=False)
    for col, kw in (
        ("worker", {"no_wrap": True}),
        ("lane", {}),
        ("bundle", {}),
        ("answered", {}),
        ("verdict", {}),
        ("layer", {}),
        ("evidence", {"overflow": "fold"}),
    ):
        table.add_column(col, **kw)
    for r in report.rows:
        answered = r.answered or "-"
        if r.platform and r.answered and r.platform.lower() not in r.answered.lower():
            answered = f"{r.answered} (want {r.platform})"
        table.add_row(
            r.worker,
            r.lane or "-",
            cell(r.bundle_id or "-"),
            cell(answered),
            Text(r.verdict, style=VERDICT_STYLE.get(r.verdict, "")),
            cell(r.layer or ""),
            cell(r.evidence[:400]),
        )
    console.print(table)
    s = report.summary()
    line = f"{s['ok']} ok, {s['warn']} warn, {s['fail']} fail of {s['workers']} worker(s)"
    click.echo(line)
    _clock(report)
    _remedies(report, compact=False)


def _clock(report: ProbeReport) -> None:
    """The workers' clock offsets from the controller's, as information (no decision uses them)."""
    c = report.clock()
    if c:
        click.echo(
            f"clock: {c['workers']} worker(s) {c['min_offset']:+.3f}..{c['max_offset']:+.3f}s from the controller "
            f"(each ± at most {c['uncertainty']:.3f}s; spread {c['spread']:.3f}s)"
        )


def _detail(r: WorkerProbe) -> str:
    """A row's reason, as the summary groups it: its layer and evidence (first line, shortened)."""
    evidence = (r.evidence.splitlines() or [""])[0][:160]
    return f"[{r.layer}] {evidence}" if r.layer else evidence


def _remedies(report: ProbeReport, compact: bool) -> None:
    """Each failing layer: its workers and the remedy."""
    remedies: dict[str | None, str | None] = {}
    for r in report.rows:
        if r.failed:
            remedies.setdefault(r.layer, r.remedy)
    for layer, names in report.summary()["layers"].items():
        click.echo(f"  {layer}: {compact_names(names) if compact else ', '.join(names)}")
        if remedies.get(layer):
            click.echo(f"    remedy: {remedies[layer]}")
