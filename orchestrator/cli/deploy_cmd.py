"""`orch deploy` and `orch rollback`."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from orchestrator.cli import complete
from orchestrator.cli.render import verbose_option

if TYPE_CHECKING:  # the CLI imports core modules only when a verb runs
    from orchestrator.cli import Context
    from orchestrator.deploy import DeployReport, WorkerOutcome


def register(main: click.Group) -> None:
    """Add `deploy` and `rollback` to the top-level group."""
    main.add_command(deploy)
    main.add_command(rollback)


@click.command()
@click.option("--lane", shell_complete=complete.lanes, required=True, help="Lane to deploy its bundle to.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document with every worker's outcome.")
@click.option("--dry-run", is_flag=True, help="Print the plan; touch no worker.")
@click.option("--no-relay", is_flag=True, help="Push every wheel from the controller to every worker.")
@verbose_option
@click.pass_obj
def deploy(obj: Context, lane: str, as_json: bool, dry_run: bool, no_relay: bool, verbose: bool) -> None:
    """Push the lane's locked bundle to its workers, install it, switch atomically.

    Only missing wheels travel; the controller sends each once (to a seed
    worker) and the others fetch it from there. A worker where anything fails
    keeps its previous bundle. Exit 1 if any worker failed.
    """
    from orchestrator import deploy as core

    fleet = obj.fleet()
    plan = core.plan_deploy(fleet, lane, relay=not no_relay, fetch=not dry_run)
    if dry_run:
        click.echo(json.dumps(plan.to_dict(), indent=2))
        return
    if not as_json:
        for line in plan.repaired:  # said before the deploy starts (in --json: the report's `repaired`)
            click.echo(f"controller cache: {line}", err=True)
    with obj.transport(plan.workers) as transport:
        if as_json:
            report = core.execute(plan, transport)
        else:
            from orchestrator.cli.progress import WorkerBoard

            with WorkerBoard(
                [w.name for w in plan.workers], f"deploy {plan.bundle} ({plan.bundle_id}) -> lane {lane}", verbose
            ) as board:
                report = core.execute(plan, transport, progress=board.update)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        for line in render(report, verbose):
            click.echo(line)
        mib = 2**20
        click.echo(
            f"bundle {plan.bundle} {plan.bundle_id}: {plan.bundle_bytes / mib:.1f} MiB; controller sent "
            f"{report.controller_bytes / mib:.1f} MiB"
            + (f" (seed {report.seed}, peers fetched from it)" if report.relay_used else "")
            + f" in {report.elapsed:.1f}s",
            err=True,
        )
    if not report.ok:
        sys.exit(1)


def render(report: DeployReport, verbose: bool = False) -> list[str]:
    """A line per worker; above the summary threshold, counts, the slowest and the failures by reason."""
    from orchestrator.cli.render import Row, summarize, summary_lines

    outcomes = report.outcomes.values()
    recovered = [o for o in outcomes if o.recovered_lock or o.rebuilt]
    if summarize(len(report.outcomes), verbose):
        rows = [Row(o.worker, o.status, o.status == "failed", o.reason or "", o.elapsed or None) for o in outcomes]
        lines = summary_lines(rows, states=("installed", "unchanged", "failed"))
        if recovered:  # rare and worth a line each: a deploy died holding the lock or left an env incomplete
            lines[-1:-1] = ["  " + _line(o) for o in recovered]
        return lines
    return [_line(o) for o in outcomes]


def _line(o: WorkerOutcome) -> str:
    line = f"{o.worker}: {o.status}"
    if o.reason:
        line += f": {o.reason}"
    if o.recovered_lock:
        h = o.recovered_lock
        holder = f"{h.get('user', '?')}@{h.get('controller', '?')} pid {h.get('pid', '?')}"
        line += f" (recovered a stale deploy lock of {holder})"
    if o.rebuilt:
        line += f" (rebuilt: the environment there was incomplete: {o.rebuilt})"
    return line


@click.command()
@click.option("--lane", shell_complete=complete.lanes, required=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON document with every worker's result.")
@click.pass_obj
def rollback(obj: Context, lane: str, as_json: bool) -> None:
    """Re-activate the previous bundle on every worker of the lane."""
    from orchestrator import deploy as core

    fleet = obj.fleet()
    with obj.transport(fleet.lane_workers(lane)) as transport:
        docs = core.rollback(fleet, lane, transport)
    if as_json:
        click.echo(json.dumps(docs, indent=2))
    else:
        for name, doc in docs.items():
            click.echo(
                f"{name}: "
                + (
                    f"active {doc['active']} (was {doc['previous']})"
                    if doc.get("ok")
                    else f"failed: {doc.get('error')}"
                )
            )
    if not all(d.get("ok") for d in docs.values()):
        sys.exit(1)
