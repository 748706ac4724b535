"""`orch sandbox up|down|status|pause|resume|kill|replace`: the local pod slice."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # the CLI imports core modules only when a verb runs
    from orchestrator.sandbox import WorkerAction

# The sandbox's defaults as its help shows them, copied from orchestrator.sandbox.spec
# (not imported here: `--help` imports no core module); tests/test_cli_lazy.py keeps them equal.
DIR_ENV = "ORCH_SANDBOX_DIR"
DEFAULT_DIR = "/var/tmp/orch-sandbox"
DEFAULT_BASE_ADDRESS = "127.0.1.1"
READY_TIMEOUT = 20.0
MAX_WORKERS = 256
MAX_SLICES = 8

DIR_OPTION = click.option(
    "--dir",
    "dir_",
    metavar="DIR",
    default=None,
    help=f"Sandbox directory (default: ${DIR_ENV}, then {DEFAULT_DIR}).",
)


def register(main: click.Group) -> None:
    """Add `sandbox` to the top-level group."""
    main.add_command(sandbox_group)


@click.group("sandbox")
def sandbox_group() -> None:
    """A local pod slice: one real sshd per worker, in its own namespaces, on loopback."""


@sandbox_group.command()
@click.option(
    "--workers",
    type=click.IntRange(1, MAX_WORKERS),
    required=True,
    metavar="N",
    help="Number of workers (per slice, with --slices).",
)
@click.option(
    "--slices",
    type=click.IntRange(1, MAX_SLICES),
    default=1,
    show_default=True,
    metavar="K",
    help="Slices of N workers each, joined by one multislice lane cpu (MEGASCALE over loopback).",
)
@DIR_OPTION
@click.option(
    "--lane",
    "lanes",
    multiple=True,
    metavar="NAME:COUNT:PLATFORM:BUNDLE",
    help="Split the workers, in order, into lanes (repeat; counts add up to N). Default: one lane cpu:N:cpu:jax-cpu.",
)
@click.option(
    "--base-address",
    default=DEFAULT_BASE_ADDRESS,
    show_default=True,
    metavar="A",
    help="Loopback address of worker 0; worker i gets A+i.",
)
@click.option(
    "--timeout",
    type=float,
    default=READY_TIMEOUT,
    show_default=True,
    metavar="S",
    help="Seconds to wait for every sshd to answer.",
)
@click.option("--json", "as_json", is_flag=True, help="The sandbox's state as JSON.")
def up(
    workers: int,
    slices: int,
    dir_: str | None,
    lanes: tuple[str, ...],
    base_address: str,
    timeout: float,
    as_json: bool,
) -> None:
    """Start the workers and write DIR/fleet.yaml."""
    from orchestrator import sandbox

    state = sandbox.up(sandbox.sandbox_dir(dir_), workers, list(lanes), base_address, timeout=timeout, slices=slices)
    if as_json:
        doc = {**state.to_dict(), "already_running": state.already_running, "restarted": list(state.restarted)}
        click.echo(json.dumps(doc, indent=2))
        return
    first, last = state.workers[0].address, state.workers[-1].address
    span = first if first == last else f"{first}-{last}"
    if state.restarted:
        click.echo(f"sandbox already up in {state.dir}; started again: {', '.join(state.restarted)}")
    elif state.already_running:
        click.echo(f"sandbox already up in {state.dir} ({len(state.workers)} workers); nothing to do")
    else:
        click.echo(f"sandbox up: {len(state.workers)} workers on {span}:{state.port} in {state.dir}")
    click.echo(f"lanes: {', '.join(str(lane) for lane in state.lanes)}")
    click.echo(f"fleet: {state.fleet_path}")
    click.echo(f"export ORCH_FLEET={state.fleet_path}")


@sandbox_group.command()
@DIR_OPTION
@click.option("--json", "as_json", is_flag=True, help="What was stopped and removed, as JSON.")
def down(dir_: str | None, as_json: bool) -> None:
    """Stop every worker and remove the sandbox's files."""
    from dataclasses import asdict

    from orchestrator import sandbox

    result = sandbox.down(sandbox.sandbox_dir(dir_))
    if as_json:
        click.echo(json.dumps({"schema_version": 1, **asdict(result)}, indent=2))
        return
    if not result.stopped and not result.killed and not result.removed:
        click.echo(f"no sandbox in {result.dir}; nothing to do")
        return
    click.echo(
        f"sandbox down in {result.dir}: stopped {len(result.stopped)} worker(s) "
        f"({result.killed} process(es)), removed {len(result.removed)} path(s)"
    )


@sandbox_group.command()
@DIR_OPTION
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(dir_: str | None, as_json: bool) -> None:
    """Show each worker: address, hostname, sshd pid, running/paused/dead."""
    from orchestrator import sandbox

    st = sandbox.status(sandbox.sandbox_dir(dir_))
    if as_json:
        click.echo(json.dumps(st.to_dict(), indent=2))
        return
    if not st.up:
        click.echo(f"no sandbox in {st.dir}")
        return
    from rich.console import Console
    from rich.table import Table

    colors = {"running": "green", "paused": "yellow", "dead": "red"}
    table = Table(title=f"sandbox {st.dir}", caption=f"fleet: {st.fleet_path}")
    for col in ("worker", "address", "hostname", "sshd pid", "processes", "state"):
        table.add_column(col)
    for w in st.workers:
        table.add_row(
            w.name,
            f"{w.address}:{w.port}",
            w.hostname,
            str(w.pid),
            str(w.processes),
            f"[{colors[w.state]}]{w.state}[/]",
        )
    Console().print(table)


def _fault_command(name: str, past: str, doc: str) -> click.Command:
    """`orch sandbox NAME W`: the sandbox's fault of that name (pause, resume, kill) on worker W."""

    @sandbox_group.command(name, help=doc)
    @click.argument("worker", metavar="W")
    @DIR_OPTION
    @click.option("--json", "as_json", is_flag=True, help="The worker and the processes signalled, as JSON.")
    def command(worker: str, dir_: str | None, as_json: bool) -> None:
        from orchestrator import sandbox

        faults: dict[str, Callable[[Path, str], WorkerAction]] = {
            "pause": sandbox.pause,
            "resume": sandbox.resume,
            "kill": sandbox.kill,
        }
        action = faults[name](sandbox.sandbox_dir(dir_), worker)
        if as_json:
            doc = {"schema_version": 1, "worker": action.name, "action": action.action, "pids": list(action.pids)}
            click.echo(json.dumps(doc, indent=2))
            return
        click.echo(f"{action.name} {past} ({len(action.pids)} process(es))")

    return command


_fault_command(
    "pause",
    "paused",
    "SIGSTOP a worker's sshd and everything on it: a hung host. W is a name (slice-w2) or index.",
)
_fault_command("resume", "resumed", "SIGCONT a paused worker. W is a name or index.")
_fault_command("kill", "killed", "SIGKILL a worker's sshd and everything on it: a dead host. W is a name or index.")


@sandbox_group.command("replace")
@click.argument("worker", metavar="W")
@DIR_OPTION
@click.option("--json", "as_json", is_flag=True, help="The worker and its new host key, as JSON.")
def replace_(worker: str, dir_: str | None, as_json: bool) -> None:
    """Re-create worker W as the cloud re-creates a preempted VM: same address, new host key, empty disk.

    Clients refuse it until `orch fleet trust W`; `orch deploy` then sends it only what it lacks.
    """
    from orchestrator import sandbox

    state = sandbox.load_state(sandbox.sandbox_dir(dir_))
    name = state.worker(worker).name
    public = sandbox.replace(sandbox.sandbox_dir(dir_), worker)
    if as_json:
        doc = {"schema_version": 1, "worker": name, "action": "replaced", "host_key": public}
        click.echo(json.dumps(doc, indent=2))
        return
    click.echo(f"{name} replaced: new host key {public.split()[0]}, empty orch root, home and /tmp")
