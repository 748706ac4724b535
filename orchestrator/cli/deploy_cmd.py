"""`orch deploy` and `orch rollback`."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # the CLI imports core modules only when a verb runs
    from orchestrator.cli import Context


def register(main: click.Group) -> None:
    """Add `deploy` and `rollback` to the top-level group."""
    main.add_command(deploy)
    main.add_command(rollback)


@click.command()
@click.option("--lane", required=True, help="Lane to deploy its bundle to.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document with every worker's outcome.")
@click.option("--dry-run", is_flag=True, help="Print the plan; touch no worker.")
@click.option("--no-relay", is_flag=True, help="Push every wheel from the controller to every worker.")
@click.pass_obj
def deploy(obj: Context, lane: str, as_json: bool, dry_run: bool, no_relay: bool) -> None:
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
    with obj.transport(plan.workers) as transport:
        if as_json:
            report = core.execute(plan, transport)
        else:
            from orchestrator.cli.progress import WorkerBoard

            with WorkerBoard(
                [w.name for w in plan.workers], f"deploy {plan.bundle} ({plan.bundle_id}) -> lane {lane}"
            ) as board:
                report = core.execute(plan, transport, progress=board.update)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        for name, o in report.outcomes.items():
            line = f"{name}: {o.status}"
            if o.reason:
                line += f": {o.reason}"
            if o.recovered_lock:
                h = o.recovered_lock
                line += (
                    f" (recovered a stale deploy lock of {h.get('user', '?')}@{h.get('controller', '?')} "
                    f"pid {h.get('pid', '?')})"
                )
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


@click.command()
@click.option("--lane", required=True)
@click.option("--json", "as_json", is_flag=True)
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
