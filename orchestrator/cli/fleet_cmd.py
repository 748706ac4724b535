"""`orch fleet validate|show|schema|import-gcloud|trust`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # the CLI imports core modules only when a verb runs
    from orchestrator.cli import Context


def register(main: click.Group) -> None:
    """Add `fleet` to the top-level group."""
    main.add_command(fleet)


@click.group()
def fleet() -> None:
    """Inspect and validate fleet.yaml."""


@fleet.command()
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON document: ok, and the counts or every problem (exit 2)."
)
@click.pass_obj
def validate(obj: Context, as_json: bool) -> None:
    """Validate fleet.yaml; every problem names file, line and YAML path."""
    if as_json:
        _validate_json(obj)
        return
    f = obj.fleet()
    lanes = ", ".join(f"{n} ({len(m)})" for n, m in f.lane_members.items()) or "none"
    click.echo(f"{f.path}: ok: {len(f.model.slices)} slice(s), {len(f.workers)} worker(s), lanes: {lanes}")


def _validate_json(obj: Context) -> None:
    """`fleet validate --json`: the problems go to stdout as data too, then exit 2 as without --json."""
    import sys

    from orchestrator.errors import ConfigError
    from orchestrator.fleet import find_fleet_path

    try:
        f = obj.fleet()
    except ConfigError as exc:
        try:
            path: str | None = str(find_fleet_path(obj.fleet_path))
        except ConfigError:
            path = obj.fleet_path
        problem: dict[str, Any] = {
            "schema_version": 1,
            "ok": False,
            "path": path,
            "problems": exc.problems,
            "hint": exc.hint,
        }
        click.echo(json.dumps(problem, indent=2))
        sys.exit(exc.exit_code)
    doc: dict[str, Any] = {
        "schema_version": 1,
        "ok": True,
        "path": str(f.path),
        "slices": {name: [w.name for w in f.workers if w.slice == name] for name in f.model.slices},
        "workers": [w.name for w in f.workers],
        "lanes": {name: list(members) for name, members in f.lane_members.items()},
    }
    click.echo(json.dumps(doc, indent=2))


@fleet.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def show(obj: Context, as_json: bool) -> None:
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

    from orchestrator.cli.render import cell

    table = Table(title=cell(f.path))
    for col in ("worker", "address", "user", "lane", "bundle", "platform", "runtime", "cache"):
        table.add_column(col)
    for w in f.workers:
        lane = f.model.lanes.get(w.lane) if w.lane else None
        table.add_row(
            w.name,
            cell(f"{w.host}{':' + str(w.port) if w.port and w.port != 22 else ''}"),
            cell(w.user or ""),
            w.lane or "-",
            lane.bundle if lane else "",
            lane.platform if lane else "",
            (lane.runtime or "") if lane else "",
            (lane.cache or "") if lane else "",
        )
    Console().print(table)


@fleet.command()
@click.argument("workers", nargs=-1, required=True, metavar="WORKER...")
@click.option("--yes", is_flag=True, help="Record without asking (after verifying the fingerprints another way).")
@click.option(
    "--fingerprint",
    "expected",
    multiple=True,
    metavar="SHA256:...",
    help="Record only if the worker offers this fingerprint (repeat for several workers).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (what was offered and recorded).")
@click.pass_obj
def trust(obj: Context, workers: tuple[str, ...], yes: bool, expected: tuple[str, ...], as_json: bool) -> None:
    """Record the host key a re-created worker offers now, after showing it: never automatic.

    WORKER is a name, glob or index range, as --workers takes. Only the key
    exchange runs (no login, no command on a host not yet trusted); each
    worker's old entries in known_hosts are replaced, every other line is kept.
    """
    from orchestrator.errors import HostKeyError
    from orchestrator.transport import trust as trusting

    f = obj.fleet()
    chosen = f.select(workers=",".join(workers))
    known_hosts = obj.transport(chosen).known_hosts_path
    offered = [
        trusting.scan(w, known_hosts, timeout=obj.connect_timeout or f.model.ssh.connect_timeout) for w in chosen
    ]
    unmatched = [o for o in offered if expected and o.fingerprint not in expected]
    new = [o for o in offered if not o.already_trusted and o not in unmatched]
    if not as_json:
        for o in offered:
            was = ", ".join(o.known) if o.known else "nothing (unknown host)"
            state = "already trusted" if o.already_trusted else "CHANGED" if o.changed else "new"
            click.echo(
                f"{o.worker} ({o.known_name}): offers {o.key_type} {o.fingerprint}; known_hosts has {was}: {state}"
            )
    if unmatched:
        raise HostKeyError(
            "refusing to record: "
            + "; ".join(f"{o.worker} offers {o.fingerprint}, not a --fingerprint given" for o in unmatched),
            hint="the key is not the one you verified: find out why before trusting it",
        )
    if new and not yes and not expected:
        if as_json or not click.confirm(f"Record {len(new)} key(s) in {known_hosts}?", default=False, err=True):
            raise HostKeyError(
                "nothing recorded",
                hint="verify the fingerprints out of band, then answer yes, pass --yes, or pass --fingerprint",
            )
    if new:
        trusting.record(known_hosts, new)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "known_hosts": str(known_hosts),
                    "offered": [o.to_dict() for o in offered],
                    "recorded": [o.worker for o in new],
                },
                indent=2,
            )
        )
    elif new:
        click.echo(f"recorded {len(new)} key(s) in {known_hosts}: {', '.join(o.worker for o in new)}", err=True)


@fleet.command()
def schema() -> None:
    """Print the JSON Schema of fleet.yaml (generated from the model)."""
    from orchestrator.fleet import json_schema

    click.echo(json.dumps(json_schema(), indent=2))


@fleet.command("import-gcloud")
@click.argument("file", type=click.Path(dir_okay=False, path_type=str))
@click.option("--slice", "slice_name", metavar="NAME", help="Slice name in fleet.yaml (default: the TPU's name).")
@click.option(
    "--fleet",
    "fleet_path",
    metavar="PATH",
    help="Fleet file to add the slice to with --write (same as `orch --fleet`; created if missing).",
)
@click.option("--write", is_flag=True, help="Add the slice to the fleet file and validate it (default: print it).")
@click.option("--json", "as_json", is_flag=True, help="The imported slice (and what --write did) as JSON.")
@click.option("--user", metavar="U", help="SSH user for the slice's workers.")
@click.option(
    "--identity-file", metavar="F", help="Private key for the slice's workers (e.g. ~/.ssh/google_compute_engine)."
)
@click.pass_obj
def import_gcloud(
    obj: Context,
    file: str,
    slice_name: str | None,
    fleet_path: str | None,
    write: bool,
    user: str | None,
    identity_file: str | None,
    as_json: bool,
) -> None:
    """Turn `gcloud compute tpus tpu-vm describe NAME --format=json` into a slice entry.

    \b
        gcloud compute tpus tpu-vm describe my-tpu --zone us-east5-b --format=json > tpu.json
        orch fleet import-gcloud tpu.json                 # print the entry
        orch fleet import-gcloud tpu.json --write --user tpu-ops

    One worker per network endpoint, in order. A worker with an external IP is
    reached there, and its internal address is what the other workers use.
    --write appends the slice to fleet.yaml (every other line unchanged),
    refuses an existing slice name, and validates the result.
    """
    import dataclasses
    import os
    from pathlib import Path

    from orchestrator.fleet import FLEET_ENV
    from orchestrator.gcloud import import_describe, render_snippet, write_slice

    imported = import_describe(file, name=slice_name, user=user, identity_file=identity_file)
    for warning in imported.warnings:
        click.echo(f"orch: warning: {warning}", err=True)
    doc = {"schema_version": 1, "slice": dataclasses.asdict(imported), "snippet": render_snippet(imported)}
    if not write:
        if as_json:
            click.echo(json.dumps(doc, indent=2))
        else:
            click.echo(render_snippet(imported), nl=False)
        return
    target = Path(fleet_path or obj.fleet_path or os.environ.get(FLEET_ENV) or "fleet.yaml")
    result = write_slice(target, imported)
    if as_json:
        written = {"path": str(result.path), "created": result.created, "workers": len(result.fleet.workers)}
        click.echo(json.dumps({**doc, "written": written}, indent=2))
        return
    action = "created" if result.created else "updated"
    click.echo(
        f"{result.path}: {action}: slice '{imported.name}' ({imported.accelerator_type}, "
        f"{len(imported.workers)} worker(s)); validated: {len(result.fleet.model.slices)} slice(s), "
        f"{len(result.fleet.workers)} worker(s)"
    )
