"""`orch cache status|clear` and `orch restart-check`."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import click

from orchestrator.cli import complete

if TYPE_CHECKING:  # the CLI imports core modules only when a verb runs
    from orchestrator.cli import Context
    from orchestrator.fleet import Fleet


def register(main: click.Group) -> None:
    """Add `cache` and `restart-check` to the top-level group."""
    main.add_command(cache)
    main.add_command(restart_check)


@click.group("cache")
def cache() -> None:
    """Compilation caches: who writes them, what is in them."""


def _lanes(fleet: Fleet, lane: str | None) -> list[str]:
    if lane:
        fleet.lane(lane)
        return [lane]
    return list(fleet.model.lanes)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "never"


def _lease_text(lease: dict[str, Any] | None) -> str:
    if not lease or lease.get("state") == "none":
        return "no lease"
    holder = lease.get("holder") or {}
    who = f"{holder.get('worker', '?')} pid {holder.get('pid', '?')} run {holder.get('run_id', '?')}"
    return f"{lease['state']}: {who} ({lease.get('reason')})"


@cache.command("status")
@click.option("--lane", shell_complete=complete.lanes, help="Only this lane (default: every lane).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def status(obj: Context, lane: str | None, as_json: bool) -> None:
    """Per cache root: policy, writer, lease state, entries, size, last write."""
    from orchestrator import cache as core

    fleet = obj.fleet()
    results = []
    for name in _lanes(fleet, lane):
        with obj.transport(fleet.lane_workers(name)) as transport:
            results.append(core.status(fleet, name, transport))
    if as_json:
        click.echo(
            json.dumps({"schema_version": core.SCHEMA_VERSION, "lanes": [r.to_dict() for r in results]}, indent=2)
        )
    else:
        for r in results:
            click.echo(f"lane {r.lane}: cache policy {r.policy or 'off'} ({r.mode})")
            if r.mode == "off":
                click.echo("  no compilation cache configured")
            groups: dict[tuple[str, str], list[Any]] = {}
            for row in r.rows:
                groups.setdefault((row.location, row.bundle_id), []).append(row)
            for (location, bundle_id), rows in groups.items():
                first = rows[0]
                where = "shared mount" if location == "shared" else f"on {location}"
                active = ", the lane's active bundle" if first.active else ""
                click.echo(f"  {first.path.rsplit('/', 1)[0]}  [{where}; bundle {bundle_id}{active}]")
                click.echo(f"    writer {first.writer}; lease {_lease_text(first.lease)}")
                for row in rows:
                    click.echo(
                        f"    {row.frontend:<10} {row.entries:>6} entries  {_size(row.bytes):>10}  "
                        f"last write {_when(row.last_write)}"
                    )
            if r.mode != "off" and not r.rows and not r.errors:
                click.echo("  no cache written yet")
            for w, checks in r.checks.items():
                click.echo(f"  {w}: {len(checks)} restart-check root(s) left behind: {', '.join(checks)}")
            for w, err in r.errors.items():
                click.echo(f"  FAILED {w}: {err}", err=True)
    if any(r.errors for r in results):
        sys.exit(1)


@cache.command("clear")
@click.option(
    "--lane", shell_complete=complete.lanes, required=True, help="The lane whose caches (every bundle id) are removed."
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="What was removed, freed, refused and failed, as JSON.")
@click.pass_obj
def clear(obj: Context, lane: str, yes: bool, as_json: bool) -> None:
    """Remove a lane's compilation caches (a cache whose writer is running is left alone)."""
    from orchestrator import cache as core

    fleet = obj.fleet()
    policy = fleet.cache_policy(lane)
    if policy.mode == "off":
        click.echo(f"orch: lane {lane} has no cache (policy off); nothing to clear", err=True)
        if as_json:
            click.echo(json.dumps(core.ClearResult(lane=lane).to_dict(), indent=2))
        return
    where = "the shared mount" if policy.mode == "single-writer" else "every worker of the lane"
    if not yes:
        if not sys.stdin.isatty():
            raise click.UsageError(f"clearing lane {lane}'s caches on {where} needs --yes when not interactive")
        click.confirm(f"Remove every compilation cache of lane {lane} on {where}?", abort=True)
    with obj.transport(fleet.lane_workers(lane)) as transport:
        result = core.clear(fleet, lane, transport)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    freed = sum(result.freed.values())
    removed = sum(len(v) for v in result.removed.values())
    click.echo(
        f"orch: lane {lane}: removed {removed} cache director{'y' if removed == 1 else 'ies'}, freed {_size(freed)}",
        err=True,
    )
    for w, reasons in result.refused.items():
        for reason in reasons:
            click.echo(f"  REFUSED {w}: {reason}", err=True)
    for w, err in result.errors.items():
        click.echo(f"  FAILED {w}: {err}", err=True)
    if not result.ok:
        sys.exit(1)


def _env_pairs(values: Iterable[str]) -> dict[str, str]:
    env = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--env")
        env[key] = value
    return env


@click.command("restart-check", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--lane",
    shell_complete=complete.lanes,
    required=True,
    help="The lane to launch on (its cache policy is what is checked).",
)
@click.option(
    "--threshold",
    type=float,
    metavar="R",
    # the default is restart_check.DEFAULT_THRESHOLD (not imported here: `--help` imports no core
    # module); tests/test_cli_lazy.py keeps this text equal to it
    help="A process reused its cache when warm/cold compile time <= R (and it had cache hits).  [default: 0.5]",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False),
    help="Sync this local directory to every worker and run from there (as orch launch).",
)
@click.option(
    "--env",
    "env_items",
    multiple=True,
    metavar="KEY=VALUE",
    help="Extra environment for both runs, applied before any import (repeatable).",
)
@click.option("--timeout", type=float, metavar="S", help="End a run after S seconds.")
@click.option("--keep", is_flag=True, help="Keep the check's cache root afterwards (default: removed).")
@click.option("--json", "as_json", is_flag=True, help="The verdicts as JSON on stdout.")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_obj
def restart_check(
    obj: Context,
    lane: str,
    threshold: float | None,
    workdir: str | None,
    env_items: tuple[str, ...],
    timeout: float | None,
    keep: bool,
    as_json: bool,
    argv: tuple[str, ...],
) -> None:
    """Launch the same command cold, then warm, and say per process whether the cache was reused.

    \b
        orch restart-check --lane cpu --workdir examples -- jax_compile_heavy.py

    Both runs use a cache root of the check's own (under the policy's root, in
    .checks/<check-id>/), so the lane's real cache is neither read nor cleared.
    Exit 0 only if every process expected to reuse the cache did.
    """
    from orchestrator import restart_check as core
    from orchestrator.cli.launch_cmd import _Printer

    fleet = obj.fleet()
    workers = fleet.lane_workers(lane)
    printer = _Printer([w.name for w in workers], to_stderr=as_json)
    from orchestrator.launch import interrupt_on_termination

    interrupt_on_termination()
    with obj.transport(workers) as transport:
        check = core.run(
            fleet,
            lane,
            list(argv),
            transport,
            threshold=core.DEFAULT_THRESHOLD if threshold is None else threshold,
            workdir=workdir,
            extra_env=_env_pairs(env_items),
            timeout=timeout,
            keep=keep,
            report=printer.report,
            on_output=printer.output,
        )
    if as_json:
        click.echo(json.dumps(check.to_dict(), indent=2))
    else:
        click.echo(core.render(check), nl=False)
    sys.exit(check.exit_code)
