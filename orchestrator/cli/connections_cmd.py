"""`orch connections [stop] [--json]`: the connection holders that keep SSH connections warm."""

from __future__ import annotations

import json
from typing import Any

import click


@click.group("connections", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="The holders as one JSON document.")
@click.pass_context
def connections(ctx: click.Context, as_json: bool) -> None:
    """Show the holders keeping fleets' SSH connections open (pid, fleet, workers held, idle time left).

    A holder starts with the first command that talks to a fleet's workers and
    exits once idle for the fleet's `ssh.persist` seconds (ORCH_SSH_PERSIST=0:
    a command connects itself and starts none).
    """
    if ctx.invoked_subcommand is not None:
        return
    from orchestrator import connections as wire

    found = wire.holders()
    if as_json:
        click.echo(json.dumps({"schema_version": 1, "holders": found}, indent=2))
        return
    if not found:
        click.echo("no connection holders")
        return
    for h in found:
        click.echo(
            f"pid {h['pid']}  {h['fleet']}  {len(h['held'])}/{h['workers']} workers held "
            f"({len(h.get('agents') or {})} with an agent)  "
            f"idle {_left(h)} left  {h['requests']} requests  ({h['host_key_policy']} host keys)"
        )


def _left(h: dict[str, Any]) -> str:
    return "(busy)" if h.get("active") else f"{h['idle_left']:.0f}s"


@connections.command("stop")
@click.option("--json", "as_json", is_flag=True, help="What was stopped as one JSON document.")
def stop(as_json: bool) -> None:
    """Stop every connection holder of this user (their connections close; the next command starts one again)."""
    from orchestrator import connections as wire

    stopped = wire.stop_holders()
    if as_json:
        click.echo(json.dumps({"schema_version": 1, "stopped": stopped}, indent=2))
        return
    if not stopped:
        click.echo("no connection holders")
    for s in stopped:
        click.echo(f"pid {s['pid']}: {'stopped' if s['stopped'] else 'still exiting'}")
