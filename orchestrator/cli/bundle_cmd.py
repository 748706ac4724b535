"""`orch bundle lock|check NAME`."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from orchestrator.cli import complete

if TYPE_CHECKING:
    from orchestrator.cli import Context

F = TypeVar("F", bound=Callable[..., object])


def register(main: click.Group) -> None:
    """Add `bundle` to the top-level group."""
    main.add_command(bundle)


def _fleet_option(fn: F) -> F:
    """`--fleet` after the verb too (`orch bundle lock NAME --fleet PATH`)."""

    def remember(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
        if value:
            from orchestrator.cli import Context

            context = ctx.find_object(Context)
            assert context is not None  # the `orch` group always sets one
            context.fleet_path = value
        return value

    return click.option(
        "--fleet",
        "fleet_path",
        metavar="PATH",
        expose_value=False,
        callback=remember,
        help="fleet.yaml (same as `orch --fleet`).",
    )(fn)


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)


@click.group()
def bundle() -> None:
    """Lock and check bundles: exact wheels for a pinned stack."""


def _bundle_name(obj: Context, name: str | None, lane: str | None) -> str:
    """NAME, or the bundle of --lane (exactly one of them must be given)."""
    if name and not lane:
        return name
    if lane and not name:
        return obj.fleet().lane(lane).bundle
    raise click.UsageError("give a bundle NAME or --lane LANE (one of them)")


@bundle.command()
@click.argument("name", required=False)
@click.option("--lane", shell_complete=complete.lanes, help="Lock the bundle of this lane (instead of NAME).")
@_fleet_option
@click.option(
    "--python",
    "interpreter",
    metavar="EXE",
    help="Run pip with this interpreter (default: one of the bundle's Python version if found).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
@click.pass_obj
def lock(obj: Context, name: str | None, lane: str | None, interpreter: str | None, as_json: bool) -> None:
    """Resolve bundle NAME with pip and write its lock file next to fleet.yaml.

    Every wheel, dependencies included, is fetched into the controller's wheel
    cache and verified by sha256 and size. Locking again with nothing changed
    leaves the file byte-identical.
    """
    from orchestrator.bundle import lock_bundle

    name = _bundle_name(obj, name, lane)
    result = lock_bundle(obj.fleet(), name, interpreter=interpreter)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
        return
    lk = result.lock
    width = max(len(w.project) for w in lk.wheels)
    for w in lk.wheels:
        click.echo(f"  {w.project:<{width}}  {w.version:<16} {_size(w.size):>9}  {w.sha256[:12]}  {w.source}")
    if lk.interpreter is not None:
        i = lk.interpreter
        click.echo(f"  {'python':<{width}}  {i.version:<16} {_size(i.size):>9}  {i.sha256[:12]}  {i.source} ({i.abi})")
    state = "written" if result.written else "unchanged"
    if result.written and result.previous_id and result.previous_id != lk.bundle_id:
        state += f", was {result.previous_id}"
    click.echo(f"bundle {name}: {len(lk.wheels)} wheels, {_size(lk.total_size)}, bundle id {lk.bundle_id}")
    click.echo(f"  lock {result.path} ({state})")
    click.echo(
        f"  wheel cache {result.cache_root}: fetched {_size(result.fetched_bytes)}, "
        f"reused {_size(result.reused_bytes)} ({result.elapsed:.1f}s)"
    )
    for note in result.notes:
        click.echo(f"  note: {note}")


@bundle.command()
@click.argument("name", required=False)
@click.option("--lane", shell_complete=complete.lanes, help="Check the bundle of this lane (instead of NAME).")
@_fleet_option
@click.option("--python", "interpreter", metavar="EXE", help="Run pip with this interpreter (unlocked bundles).")
@click.option("--json", "as_json", is_flag=True, help="One JSON document with every finding.")
@click.pass_obj
def check(obj: Context, name: str | None, lane: str | None, interpreter: str | None, as_json: bool) -> None:
    """Cross-check the wheels of bundle NAME against each other; exit 1 on any error.

    Reads the lock when there is one; otherwise each pin's own wheel metadata,
    without dependencies, so conflicting pins can still be checked.
    """
    from orchestrator.bundle.check import check_bundle

    name = _bundle_name(obj, name, lane)
    report = check_bundle(obj.fleet(), name, interpreter=interpreter)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        for finding in report.findings:
            click.echo(str(finding))
        source = (
            f"lock {report.lock_path}, bundle id {report.bundle_id}"
            if report.metadata_from == "lock"
            else "pins' own metadata, no lock yet"
        )
        verdict = "ok" if report.ok else "FAILED"
        click.echo(
            f"bundle {name}: {verdict}: {len(report.errors)} error(s), {len(report.warnings)} warning(s), "
            f"{len(report.wheels)} wheels, Python {report.python} ({source})"
        )
    if not report.ok:
        sys.exit(1)


@bundle.group()
def interpreter() -> None:
    """A bundle's own Python: pack a relocatable CPython for `interpreter:` in fleet.yaml."""


@interpreter.command()
@click.argument("prefix", type=click.Path(exists=True, file_okay=False))
@click.option(
    "-o", "--output", "out", metavar="OUT", help="Archive to write (default: ./cpython-X.Y.Z-linux-x86_64-orch.tar.gz)."
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
def pack(prefix: str, out: str | None, as_json: bool) -> None:
    """Pack the CPython installed at PREFIX into a relocatable, reproducible .tar.gz.

    Copies the installation without byte code, tests and site-packages, rewrites
    RUNPATHs to $ORIGIN and makes sysconfig follow the interpreter's location;
    packing the same installation again gives the same sha256.
    """
    from pathlib import Path

    from orchestrator.bundle.interpreter_pack import pack as pack_interpreter

    result = pack_interpreter(Path(prefix), Path(out) if out else None)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
        return
    click.echo(
        f"packed CPython {result.info.version} ({result.info.abi}) from {result.prefix}: "
        f"{result.files} files, {_size(result.size)}, {len(result.relocated)} RUNPATH(s) made relative"
    )
    click.echo(f"  {result.path}")
    click.echo(f"  sha256 {result.sha256}")
    click.echo("in fleet.yaml, under the bundle:")
    click.echo(f"    interpreter: {{path: {result.path}, sha256: {result.sha256}}}")


@bundle.command()
@click.option(
    "--lane",
    "lane_options",
    shell_complete=complete.lanes,
    multiple=True,
    help="Only this lane (repeatable; default: every lane).",
)
@_fleet_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def status(obj: Context, lane_options: tuple[str, ...], as_json: bool) -> None:
    """Show the active bundle on every worker; flag lanes whose workers disagree.

    A lane whose workers run different bundles (a mixed stack inside one lane)
    makes this exit 1.
    """
    from orchestrator import deploy as core

    fleet = obj.fleet()
    lanes = list(lane_options) or list(fleet.model.lanes)
    for ln in lanes:
        fleet.lane(ln)
    workers = [w for ln in lanes for w in fleet.lane_workers(ln)]
    with obj.transport(workers) as transport:
        docs = core.status(fleet, transport, lanes)
    mixed = core.disagreements(fleet, docs, lanes)
    expected: dict[str, str] = {}
    for ln in lanes:
        path = fleet.lock_path(fleet.lane(ln).bundle)
        if path.exists():
            from orchestrator.bundle import read_lock

            expected[ln] = read_lock(path).bundle_id
    if as_json:
        click.echo(json.dumps({"schema_version": 1, "workers": docs, "mixed": mixed, "locked": expected}, indent=2))
    else:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        from orchestrator.cli.render import cell, shown

        table = Table(show_edge=False)
        for col in ("lane", "worker", "bundle", "active", "previous", "note"):
            table.add_column(col)
        for ln in lanes:
            for w in fleet.lane_workers(ln):
                doc = docs.get(w.name, {})
                if not doc.get("ok"):
                    table.add_row(ln, w.name, "", "", "", cell(f"unreachable: {doc.get('error')}", "red"))
                    continue
                info = doc["lanes"].get(ln, {})
                note: list[str | tuple[str, str]] = []
                if info.get("active") and info.get("active") != expected.get(ln):
                    note.append("not the locked bundle" if ln in expected else "")
                if info.get("lock"):
                    note.append(shown(lock_note(info)))
                if ln in mixed:
                    note.append(("lane is mixed", "red"))
                parts = [n for n in note if n]
                table.add_row(
                    ln,
                    w.name,
                    cell(info.get("bundle") or ""),
                    cell(info.get("active") or "-"),
                    cell(info.get("previous") or "-"),
                    Text("; ").join(Text(n) if isinstance(n, str) else Text(*n) for n in parts),
                )
        Console().print(table)
        for ln, groups in mixed.items():
            click.echo(
                f"lane {ln} is mixed: " + "; ".join(f"{bid}: {', '.join(ws)}" for bid, ws in groups.items()), err=True
            )
    if mixed:
        sys.exit(1)


def lock_note(info: dict[str, Any]) -> str:
    """What a lane's deploy lock on one worker means: a deploy in progress, or a stale lock of a holder gone."""
    from hostside.deploy_lock import holder_name
    from orchestrator.deploy import _holder_is_dead

    h = info["lock"]
    if not isinstance(h, dict):  # what a worker says is checked before it is read
        return "damaged deploy lock (unreadable); stale once old enough, or remove it"
    if "token" not in h:
        return f"damaged deploy lock ({h.get('reason', 'unreadable')}); stale once old enough, or remove it"
    if info.get("lock_state") == "stale" or _holder_is_dead(h):
        return f"stale deploy lock (holder gone): {holder_name(h)}; the next deploy takes it over"
    return f"deploy in progress by {holder_name(h)}"
