"""`orch exec [--lane L | --workers SEL] [--json] -- CMD ARGS...`."""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import click

from orchestrator.cli import complete
from orchestrator.cli.render import print_summary


def register(main: click.Group) -> None:
    """Add `exec` to the top-level group."""
    main.add_command(exec_)


@click.command("exec", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--lane", shell_complete=complete.lanes, help="Only the workers of this lane.")
@click.option(
    "--workers",
    "selection",
    shell_complete=complete.workers,
    metavar="SEL",
    help="Names, globs or index ranges, comma-separated.",
)
@click.option("--timeout", type=float, metavar="S", help="Per-command timeout (default: fleet ssh.command_timeout).")
@click.option("--json", "as_json", is_flag=True, help="One JSON document with every host's result.")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_obj
def exec_(
    obj: Any, lane: str | None, selection: str | None, timeout: float | None, as_json: bool, argv: tuple[str, ...]
) -> None:
    """Run a command on workers in parallel; exit non-zero if any failed.

    The arguments after `--` reach the worker exactly as given (no remote shell
    interpretation). Use `-- sh -c '...'` when you want a shell. A command that
    times out is reported once it is ended on the worker (or as still being
    ended, when the worker does not answer in time to confirm it).
    """
    fleet = obj.fleet()
    workers = fleet.select(lane=lane, workers=selection)
    lock = threading.Lock()
    width = max(len(w.name) for w in workers)

    def stream(host: str, kind: str, line: str) -> None:
        with lock:
            out = sys.stderr if kind == "stderr" else sys.stdout
            out.write(f"{host:<{width}} | {line}\n")
            out.flush()

    with obj.transport(workers) as transport:
        results = transport.run(list(argv), timeout=timeout, on_line=None if as_json else stream, end_on_timeout=True)
    if as_json:
        click.echo(
            json.dumps(
                {"schema_version": 1, "argv": list(argv), "results": [r.to_dict() for r in results.values()]}, indent=2
            )
        )
    else:
        print_summary(results)
    if any(r.failed for r in results.values()):
        sys.exit(1)
