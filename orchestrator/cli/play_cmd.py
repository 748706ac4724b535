"""`orch play PLAYBOOK [--lane L] [--from STEP] [--json]`."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from orchestrator.cli import complete

if TYPE_CHECKING:  # the CLI imports core modules only when a verb runs
    from orchestrator.play import CommandShape, Rung


def register(main: click.Group) -> None:
    """Add `play` to the top-level group."""
    main.add_command(play)


def command_shapes(main: click.Group) -> dict[str, CommandShape]:
    """What every verb accepts, read from the CLI itself (so playbooks and commands never drift)."""
    from orchestrator.play import CommandShape

    shapes = {}
    ctx = click.Context(main)

    def add(path: str, cmd: click.Command | None) -> None:
        if cmd is None:
            return
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                add(f"{path} {name}".strip(), cmd.get_command(ctx, name))
            return
        options, flags, multiple, positionals = {}, set(), set(), []
        for p in cmd.params:
            if isinstance(p, click.Argument):
                positionals.append(p.name)
            elif isinstance(p, click.Option) and p.expose_value and p.name not in ("as_json", "help"):
                key = p.opts[0].lstrip("-").replace("-", "_")
                long = next((o for o in p.opts if o.startswith("--")), p.opts[0])
                options[key] = long
                if p.is_flag:
                    flags.add(key)
                if p.multiple:
                    multiple.add(key)
        names = {p.name for p in cmd.params}
        shapes[path] = CommandShape(
            options=options,
            flags=frozenset(flags),
            multiple=frozenset(multiple),
            positionals=tuple(positionals),
            has_json="as_json" in names,
            has_lane="lane" in options,
        )

    for name in main.list_commands(ctx):
        if name in ("play", "sandbox", "attach", "logs"):
            continue  # interactive or not part of a ladder
        add(name, main.get_command(ctx, name))
    return shapes


@click.command()
@click.argument("playbook", type=click.Path(dir_okay=False))
@click.option("--lane", shell_complete=complete.lanes, help="Lane for steps that name none (default: the playbook's).")
@click.option("--from", "start", metavar="STEP", help="Start at this step (name or 1-based position).")
@click.option("--json", "as_json", is_flag=True, help="The ladder record as JSON on stdout.")
@click.pass_context
def play(ctx: click.Context, playbook: str, lane: str | None, start: str | None, as_json: bool) -> None:
    """Run a playbook's steps in order; stop at the first failing rung.

    Each rung is an orch verb with its own options (see the playbook). The
    ladder record (rungs, durations, verdicts, and for a failure the owning
    layer and remedy) is written under the runs directory.
    """
    from orchestrator import play as core
    from orchestrator.runs import runs_root

    obj = ctx.obj
    main = ctx.find_root().command
    assert isinstance(main, click.Group)
    shapes = command_shapes(main)
    book = core.load_playbook(playbook, shapes)
    orch = core.orch_command()
    fleet_path = obj.fleet_path
    if fleet_path:
        from pathlib import Path

        orch += ["--fleet", str(Path(fleet_path).resolve())]
    if obj.host_key_policy:
        orch += ["--host-key-policy", obj.host_key_policy]
    if obj.connect_timeout:
        orch += ["--connect-timeout", str(obj.connect_timeout)]

    def on_line(step: str, line: str) -> None:
        if not as_json:
            click.echo(f"[{step}] {line}", err=True)

    def on_rung(rung: Rung) -> None:
        if as_json:
            return
        text = f"rung {rung.name}: {rung.verdict} in {rung.elapsed:.1f}s"
        text += "".join(f"\n  {line}" for line in rung.summary)
        if rung.verdict == "failed":
            text += f" -- layer {rung.layer}: {rung.evidence}\n  remedy: {rung.remedy}"
        click.secho(text, err=True, fg="green" if rung.verdict == "passed" else "red", bold=True)

    if not as_json:
        click.echo(f"playbook {book.name}: {len(book.steps)} steps on lane {lane or book.lane}", err=True)
    ladder = core.run_playbook(
        book, shapes, orch=orch, lane=lane, start=start, runs_dir=runs_root(), on_line=on_line, on_rung=on_rung
    )
    if as_json:
        click.echo(json.dumps(ladder.to_dict(), indent=2))
    else:
        stop = ladder.stopped_at
        if ladder.ok:
            verdict = "ladder passed"
        else:
            verdict = f"ladder stopped at {stop.name}: layer {stop.layer}" if stop else "ladder failed"
        click.echo(
            verdict + f" ({ladder.elapsed:.1f}s); record: {ladder.record_path}",
            err=True,
        )
        for r in ladder.rungs:
            if r.run_id:
                click.echo(f"  {r.name}: run {r.run_id}", err=True)
            for kind, run_id in r.runs.items():
                click.echo(f"  {r.name}: {kind} run {run_id}", err=True)
    if not ladder.ok:
        sys.exit(1)
