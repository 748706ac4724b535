"""`orch fleet validate|show|schema`."""

from __future__ import annotations

import json

import click


def register(main: click.Group) -> None:
    main.add_command(fleet)


@click.group()
def fleet():
    """Inspect and validate fleet.yaml."""


@fleet.command()
@click.pass_obj
def validate(obj):
    """Validate fleet.yaml; every problem names file, line and YAML path."""
    f = obj.fleet()
    lanes = ", ".join(f"{n} ({len(m)})" for n, m in f.lane_members.items()) or "none"
    click.echo(f"{f.path}: ok: {len(f.model.slices)} slice(s), {len(f.workers)} worker(s), lanes: {lanes}")


@fleet.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def show(obj, as_json):
    """Show slices, workers and lanes as orch resolved them."""
    f = obj.fleet()
    if as_json:
        doc = f.model.model_dump(mode="json")
        doc["resolved_workers"] = [w.__dict__ for w in f.workers]
        doc["lane_members"] = {k: list(v) for k, v in f.lane_members.items()}
        click.echo(json.dumps(doc, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=str(f.path))
    for col in ("worker", "address", "user", "lane", "bundle", "platform", "runtime", "cache"):
        table.add_column(col)
    for w in f.workers:
        lane = f.model.lanes.get(w.lane) if w.lane else None
        table.add_row(w.name, f"{w.host}{':' + str(w.port) if w.port and w.port != 22 else ''}", w.user or "",
                      w.lane or "-", lane.bundle if lane else "", lane.platform if lane else "",
                      (lane.runtime or "") if lane else "", (lane.cache or "") if lane else "")
    Console().print(table)


@fleet.command()
def schema():
    """Print the JSON Schema of fleet.yaml (generated from the model)."""
    from orchestrator.fleet import json_schema

    click.echo(json.dumps(json_schema(), indent=2))
