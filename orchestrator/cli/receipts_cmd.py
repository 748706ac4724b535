"""`orch gather`, `orch report`, `orch compare`: a run's receipts, collected and read."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from orchestrator.cli import complete

if TYPE_CHECKING:
    from orchestrator.cli import Context
    from orchestrator.fleet import Fleet
    from orchestrator.launch import LaunchPlan
    from orchestrator.receipts import Comparison, GatherResult, Report
    from orchestrator.runs import RunRecord
    from orchestrator.transport import Transport


def register(main: click.Group) -> None:
    for command in (gather_, report_, compare_):
        main.add_command(command)


def _record_and_fleet(obj: Context, ref: str) -> tuple[RunRecord, Fleet]:
    from orchestrator import runs

    record = runs.find_run(ref)
    info = record.info()
    if obj.fleet_path is None and not os.environ.get("ORCH_FLEET") and info.get("fleet"):
        obj.fleet_path = info["fleet"]
    return record, obj.fleet()


def gather_lines(result: GatherResult) -> list[str]:
    """The gather result in a few lines (also used at the end of `orch launch`)."""
    done = [w for w in result.workers.values() if w.status == "complete"]
    copied = sum(len(w.copied) for w in result.workers.values())
    same = sum(len(w.up_to_date) for w in result.workers.values())
    nbytes = sum(w.bytes_copied for w in result.workers.values())
    lines = [
        f"gathered receipts and logs of {len(done)}/{len(result.workers)} workers into {result.dir}/ "
        f"({copied} files copied, {nbytes / 1024:.1f} KiB; {same} already up to date; "
        f"{result.elapsed:.2f}s)"
    ]
    for w in result.workers.values():
        if w.status == "missing":
            lines.append(f"  missing {w.worker}: {w.error}")
        elif w.status == "partial":
            lines.append(f"  partial {w.worker}: " + "; ".join(f"{n}: {why}" for n, why in w.failed.items()))
        elif w.status == "live":
            unverified = f" (copied while changing, not verified: {', '.join(w.unverified)})" if w.unverified else ""
            lines.append(f"  live    {w.worker}: {w.note}{unverified}")
        elif w.note:
            lines.append(f"  note    {w.worker}: {w.note}")
    if not result.complete:
        lines.append(
            f"  run `orch gather {result.run_id}` again to fetch what is missing "
            "(files already copied are not fetched twice)"
        )
    return lines


def run_gather(record: RunRecord, transport: Transport, plan: LaunchPlan | None = None) -> GatherResult:
    from orchestrator import receipts

    return receipts.gather(record, transport, plan=plan)


@click.command("gather")
@click.argument("run", shell_complete=complete.runs)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def gather_(obj: Context, run: str, as_json: bool) -> None:
    """Copy every worker's receipt and logs of RUN to runs/<run-id>/<worker>/.

    Parallel and resumable: files already copied are not fetched again. A
    worker that does not answer is named with the reason, and the command
    exits 1 until every worker's receipt is in.
    """
    record, fleet = _record_and_fleet(obj, run)
    plan = record.plan()
    with obj.transport([fleet.worker(n) for n in plan.workers]) as transport:
        result = run_gather(record, transport, plan)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    for line in gather_lines(result):
        click.echo(f"orch: {line}" if not line.startswith("  ") else line, err=True)
    if not result.complete:
        sys.exit(1)


# -- report ---------------------------------------------------------------------------


def _num(v: float | None, digits: int = 4) -> str:
    return "-" if v is None else f"{v:.{digits}g}"


def render_report(r: Report) -> str:
    """The report as text."""
    from orchestrator.receipts import STACK_KEYS

    lines = [
        f"run {r.run_id}: lane {r.lane}, bundle {r.bundle_label}, platform {r.platform}, "
        f"state {r.state}, {len(r.rows)} processes",
        f"program {' '.join(r.target)}",
    ]
    pythons = {x.worker: x.interpreter_text() for x in r.rows if x.interpreter}
    if len(set(pythons.values())) == 1:
        first = next(x.interpreter for x in r.rows if x.interpreter) or {}
        sha = f", sha256 {first['sha256']}" if first.get("sha256") else ""
        lines.append(f"interpreter {next(iter(pythons.values()))}{sha}")
        if first.get("build"):
            lines.append(f"  build {first['build']}")
    elif pythons:
        from orchestrator.receipts.model import describe_groups

        lines.append(f"interpreter mixed: {describe_groups(pythons)}")
    lines.append("")
    header: tuple[str, ...] = (
        "worker",
        "proc",
        "bundle",
        "device",
        "backend",
        "compile s",
        "step s",
        "steps",
        "user s",
        "cache",
        "exit",
    )
    slices = sorted({x.slice for x in r.rows if x.slice})
    multislice = len(slices) > 1  # rows come slice by slice (process order); a column says which
    rows = sorted(r.rows, key=lambda x: (slices.index(x.slice) if x.slice in slices else len(slices), x.process_id))
    if multislice:
        header = ("slice", *header)
    table: list[tuple[str, ...]] = [header]
    for x in rows if multislice else r.rows:
        table.append(
            (
                *((x.slice or "-",) if multislice else ()),
                x.worker,
                str(x.process_id),
                f"{x.bundle or '-'}@{(x.bundle_id or '?')[:8]}" if x.has_receipt else "-",
                x.device_text(),
                x.backend_text(),
                _num(x.compile_s),
                _num(x.step_s),
                str(x.steps),
                _num(x.user_code_s),
                x.cache_text(),
                x.exit_text(),
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    have = [x for x in r.rows if x.has_receipt]
    keys = [k for k in STACK_KEYS if any(x.versions.get(k) for x in have)] + sorted(
        {k for x in have for k in x.versions} - set(STACK_KEYS)
    )
    if have:
        lines += ["", "versions (installed; reported by the runtime where it says otherwise or more):"]
        extra = sorted({k for x in have for k in x.versions_reported if k not in keys})
        kw = max(len(k) for k in [*keys, *extra])
        for k in keys:
            vals = {x.worker: x.versions.get(k) for x in have}
            reported = {v for x in have if (v := x.versions_reported.get(k)) is not None} - set(vals.values())
            text = (
                vals[have[0].worker]
                if len(set(vals.values())) == 1
                else "; ".join(f"{w}: {v}" for w, v in vals.items())
            )
            lines.append(f"  {k:<{kw}}  {text}" + (f"  (reported {', '.join(sorted(reported))})" if reported else ""))
        for k in extra:
            seen = {x.versions_reported.get(k) for x in have}
            lines.append(f"  {k:<{kw}}  {', '.join(sorted(str(v) for v in seen))}  (reported)")
        metrics = sorted({m for x in have for m in x.metrics})
        if metrics:
            lines += ["", "metrics:"]
            for m in metrics:
                entries = {x.worker: x.metrics[m] for x in have if m in x.metrics}
                first = next(iter(entries.values()))
                hows = sorted(
                    {
                        (f"reduced by {e['reduced_by']}" + (f" over {e['over']} processes" if e.get("over") else ""))
                        if e.get("reduced_by")
                        else "NOT REDUCED"
                        for e in entries.values()
                    }
                )
                scopes = sorted({str(e.get("scope")) for e in entries.values()})
                values = sorted({_num(e.get("value"), 8) for e in entries.values()})
                lines.append(
                    f"  {m}: {'/'.join(scopes)}, {' / '.join(hows)}; value {' / '.join(values)}"
                    + (f" (step {first['step']})" if first.get("step") is not None else "")
                    + f" on {len(entries)} worker{'s' if len(entries) != 1 else ''}"
                )
        orders = {" -> ".join(x.startup) for x in have}
        lines += ["", "start-up order: " + " | ".join(sorted(orders))]
    lines += [""]
    if r.flags:
        lines.append(f"flags ({len(r.warnings)} warning{'s' if len(r.warnings) != 1 else ''}):")
        for f in r.flags:
            lines.append(f"  {'!' if f.level == 'warning' else '-'} [{f.kind}] {f.message}")
    else:
        lines.append("flags: none")
    return "\n".join(lines) + "\n"


@click.command("report")
@click.argument("run", shell_complete=complete.runs)
@click.option("--json", "as_json", is_flag=True, help="The report as JSON.")
@click.option(
    "--html",
    "html_file",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Also write a static HTML page with a plot of per-worker compile and step times.",
)
def report_(run: str, as_json: bool, html_file: str | None) -> None:
    """One view of RUN from its receipts: per worker versions, bundle, device, backend, timings, exit; flags.

    Reads the controller's copies (`orch gather RUN` fetches them; `orch launch`
    gathers by default). Flags: versions or bundle differ across workers, a
    global metric that was not reduced, CPU fallback on a TPU lane, backends
    that differ across workers.
    """
    from orchestrator import receipts, runs

    rep = receipts.report(runs.find_run(run))
    if html_file:
        Path(html_file).write_text(receipts.render_html(rep))
        click.echo(f"orch: wrote {html_file}", err=True)
    if as_json:
        click.echo(json.dumps(rep.to_dict(), indent=2))
    else:
        click.echo(render_report(rep), nl=False)


# -- compare -------------------------------------------------------------------------


def render_comparison(c: Comparison) -> str:
    from orchestrator.receipts import format_value

    la, lb = c.a.label, c.b.label
    width = max(len(la), len(lb)) + 4
    lines = [f"A  {c.a.run_id}  [{la}]", f"B  {c.b.run_id}  [{lb}]", ""]
    if c.cross_lane or c.differences:
        lines.append(
            "stack differences (A vs B)"
            + (": these runs come from different lanes or bundles" if c.cross_lane else "")
            + ":"
        )
        item_w = max((len(d.item) for d in c.differences), default=0)
        for d in c.differences:
            lines.append(f"  {d.item:<{item_w}}  A {d.a}")
            lines.append(f"  {'':<{item_w}}  B {d.b}")
        if not c.differences:
            lines.append("  none")
        lines.append("")
    lines.append("figures:")
    for f in c.figures:
        lines.append(f"  {f.name}" + (f" ({f.detail})" if f.detail else ""))
        lines.append(f"    {'A [' + la + ']':<{width}}  {format_value(f.a, f.unit)}")
        lines.append(f"    {'B [' + lb + ']':<{width}}  {format_value(f.b, f.unit)}")
    return "\n".join(lines) + "\n"


@click.command("compare")
@click.argument("run_a", shell_complete=complete.runs)
@click.argument("run_b", shell_complete=complete.runs)
@click.option(
    "--allow-cross-lane",
    is_flag=True,
    help="Compare runs from different lanes or bundles (the stack differences are printed first).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def compare_(run_a: str, run_b: str, allow_cross_lane: bool, as_json: bool) -> None:
    """Two runs side by side, every figure labelled with its lane and bundle.

    Runs from different lanes or bundles are not comparable by default:
    compare refuses them (exit 1) unless --allow-cross-lane is given.
    """
    from orchestrator import receipts, runs

    a = receipts.report(runs.find_run(run_a))
    b = receipts.report(runs.find_run(run_b))
    c = receipts.compare(a, b, allow_cross_lane=allow_cross_lane)
    if as_json:
        click.echo(json.dumps(c.to_dict(), indent=2))
    if c.refused:
        click.echo(f"orch: refusing to compare: {c.refused}", err=True)
        click.echo(
            "  hint: pass --allow-cross-lane to compare them anyway (the stack differences come first)", err=True
        )
        sys.exit(1)
    if not as_json:
        click.echo(render_comparison(c), nl=False)
