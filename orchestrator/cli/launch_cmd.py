"""`orch launch`, and the verbs for runs: `runs`, `status`, `logs`, `attach`, `stop`."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from orchestrator.cli import complete
from orchestrator.cli.render import Row, summarize, summary_lines, verbose_option

if TYPE_CHECKING:  # the CLI imports core modules only when a verb runs
    from orchestrator.cli import Context
    from orchestrator.fleet import Fleet, WorkerRef
    from orchestrator.launch import LaunchOutcome, LaunchPlan
    from orchestrator.runs import RunRecord
    from orchestrator.transport import Transport


def register(main: click.Group) -> None:
    """Add `launch`, `runs`, `status`, `logs`, `attach` and `stop` to the top-level group."""
    for command in (launch, runs_, status, logs, attach, stop):
        main.add_command(command)


def _env_pairs(values: Iterable[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--env")
        env[key] = value
    return env


class _Printer:
    """Worker-prefixed output: the workers' stdout on stdout, their stderr and orch's progress on stderr.

    Each stream has its own lock, so a reader that is slow on one (a pipe nobody reads yet) never
    holds up the other."""

    def __init__(self, workers: Iterable[str], to_stderr: bool = False) -> None:
        self.width = max((len(w) for w in workers), default=0)
        self.out_lock = threading.Lock()
        self.err_lock = threading.Lock()
        self.to_stderr = to_stderr  # --detach keeps stdout for the run id alone

    def output(self, worker: str, line: str) -> None:
        if self.to_stderr:
            self.error_output(worker, line)
            return
        with self.out_lock:
            sys.stdout.write(f"{worker:<{self.width}} | {line}\n")
            sys.stdout.flush()

    def error_output(self, worker: str, line: str) -> None:
        with self.err_lock:
            sys.stderr.write(f"{worker:<{self.width}} | {line}\n")
            sys.stderr.flush()

    def report(self, text: str) -> None:
        with self.err_lock:
            click.echo(f"orch: {text}", err=True)


def _render_outcome(outcome: LaunchOutcome, printer: _Printer, run_id_to_stdout: bool = True) -> None:
    o = outcome
    if o.status == "detached":
        printer.report(
            f"run {o.run_id} is running detached "
            f"(start skew {_ms(o.start_skew)}); follow it with `orch attach {o.run_id}` or "
            f"`orch logs {o.run_id} -f`, end it with `orch stop {o.run_id}`"
        )
        if run_id_to_stdout:  # with --json the document on stdout carries it
            click.echo(o.run_id)
        return
    timing = []
    if o.start_skew is not None:
        timing.append(f"start skew {_ms(o.start_skew)}")
    if o.teardown_latency is not None:
        timing.append(f"teardown {o.teardown_latency:.2f}s after the failure")
    suffix = f" ({', '.join(timing)})" if timing else ""
    if o.ok:
        printer.report(f"run {o.run_id} succeeded: {o.message}{suffix}; record: {o.run_dir}")
        return
    printer.report(f"run {o.run_id} {o.status}: {o.message}{suffix}")
    if o.diagnosis:
        d = o.diagnosis
        printer.report(f"diagnosis ({d['layer']}): {d['line'].strip()}")
        printer.report(f"  remedy: {d['remedy']}")
    elif o.first_failure and o.first_failure.tail:
        last = [ln for ln in o.first_failure.tail.splitlines() if ln.strip()][-3:]
        for ln in last:
            printer.report(f"  {o.first_failure.worker} | {ln}")
    printer.report(f"record: {o.run_dir}")


def _ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.0f} ms"


_F = TypeVar("_F", bound=Callable[..., Any])

_GANG_TIMING_OPTIONS = (
    click.option(
        "--grace",
        type=float,
        default=5.0,
        show_default=True,
        metavar="S",
        help="Seconds between TERM and KILL when the gang is torn down.",
    ),
    click.option(
        "--failure-grace",
        type=float,
        default=1.0,
        show_default=True,
        metavar="S",
        help="After a worker failed: seconds the survivors get between TERM and KILL.",
    ),
    click.option(
        "--lost-after",
        type=float,
        default=30.0,
        show_default=True,
        metavar="S",
        help="A worker silent this long (no output, no heartbeat) counts as lost.",
    ),
)


def _gang_timing_options(fn: _F) -> _F:
    """--grace, --failure-grace, --lost-after: how a watching controller ends a gang (launch and attach alike)."""
    for option in reversed(_GANG_TIMING_OPTIONS):
        fn = option(fn)
    return fn


@click.command("launch", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--lane",
    required=True,
    shell_complete=complete.lanes,
    help="The lane whose workers run the gang (one process per worker).",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False),
    help="Sync this local directory to every worker (changed files only, verified) and run from there.",
)
@click.option("--dry-run", is_flag=True, help="Print the plan and touch no worker.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="With --dry-run: the plan as JSON. Otherwise: the outcome as JSON on stdout at the end.",
)
@click.option("--timeout", type=float, metavar="S", help="End the whole gang after S seconds of running.")
@click.option("--name", help="A name for the run (prefix of the run id; `orch attach NAME` finds it).")
@click.option(
    "--env",
    "env_items",
    multiple=True,
    metavar="KEY=VALUE",
    help="Extra environment, applied with the lane's policy before any import (repeatable).",
)
@click.option("--detach", is_flag=True, help="Return once every worker started; the run id goes to stdout.")
@click.option(
    "--reclaim",
    is_flag=True,
    help="First end processes of earlier orch runs on these workers (TERM, grace, KILL); never anyone else's.",
)
@_gang_timing_options
@click.option(
    "--start-timeout",
    type=float,
    default=300.0,
    show_default=True,
    metavar="S",
    help="Seconds for every worker to become ready (imports done) before the run is abandoned.",
)
@click.option(
    "--port",
    type=int,
    help="Coordinator port (default: derived from the run id; the next port is torch's MASTER_PORT).",
)
@click.option(
    "--no-gather",
    is_flag=True,
    help="Do not copy the workers' receipts and logs to the controller at the end (`orch gather RUN` does it later).",
)
@click.option(
    "--stdin",
    "stdin_to",
    flag_value="0",
    help="Forward this command's stdin to process 0 (its stdin ends when ours does); others read /dev/null.",
)
@click.option("--stdin-all", "stdin_to", flag_value="all", help="Forward this command's stdin to every process.")
@click.option(
    "--max-restarts",
    type=click.IntRange(0, 100),
    default=0,
    show_default=True,
    metavar="N",
    help="Run the gang again up to N times after a failure a restart can fix (see --restart-on).",
)
@click.option(
    "--restart-on",
    "restart_on",
    multiple=True,
    metavar="LAYERS",
    help="Owning layers that restart the gang, comma-separated (default: transport,device-ownership,collective; "
    "also: user-code, timeout, and every diagnosis layer).",
)
@click.option(
    "--backoff",
    type=float,
    default=10.0,
    show_default=True,
    metavar="S",
    help="Seconds between a failed attempt and the next.",
)
@click.option("--run-id", "run_id", hidden=True, help="Use this run id (reproducible plans).")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_obj
def launch(
    obj: Context,
    lane: str,
    workdir: str | None,
    dry_run: bool,
    as_json: bool,
    timeout: float | None,
    name: str | None,
    env_items: tuple[str, ...],
    detach: bool,
    reclaim: bool,
    grace: float,
    failure_grace: float,
    lost_after: float,
    start_timeout: float,
    port: int | None,
    no_gather: bool,
    stdin_to: str | None,
    max_restarts: int,
    restart_on: tuple[str, ...],
    backoff: float,
    run_id: str | None,
    argv: tuple[str, ...],
) -> None:
    """Launch one process per worker of a lane, together, as a gang.

    \b
        orch launch --lane cpu -- train.py --steps 100
        orch launch --lane cpu --workdir . -- -m mypkg.train

    The script runs under the lane's active bundle Python. If one worker fails
    (or is lost), every other worker's processes are ended; Ctrl-C and
    --timeout do the same. At the end every worker's receipt and logs are
    gathered into the run's record (unless --no-gather). Workers' stdout
    comes out on stdout, their stderr on stderr, each line prefixed with the
    worker's name; the processes read /dev/null unless --stdin or --stdin-all.
    """
    from orchestrator import launch as core
    from orchestrator import runs
    from orchestrator.launch import restarts

    if stdin_to and detach:
        raise click.UsageError("--stdin and --stdin-all need a watching controller; they cannot go with --detach")
    if max_restarts and (detach or stdin_to):
        raise click.UsageError("--max-restarts needs a watching controller and no --stdin: it cannot go with those")
    policy = restarts.RestartPolicy(max_restarts, restarts.parse_restart_on(restart_on), backoff)
    fleet = obj.fleet()
    env = _env_pairs(env_items)

    def plan_attempt(attempt: int, previous: restarts.Cause | None) -> LaunchPlan:
        return core.plan_launch(
            fleet,
            lane,
            list(argv),
            run_id=run_id if attempt == 1 else restarts.attempt_run_id(first.run_id, attempt),
            name=name,
            port=port,
            workdir=workdir,
            timeout=timeout,
            extra_env={**env, **(restarts.attempt_env(attempt, previous) if max_restarts else {})},
            restart_count=attempt - 1,
            max_restarts=max_restarts,
        )

    plan = first = plan_attempt(1, None)
    if dry_run:
        if as_json:
            click.echo(json.dumps(plan.to_dict(), indent=2))
        else:
            click.echo(core.render_plan(plan), nl=False)
        return
    printer = _Printer(plan.workers, to_stderr=detach)
    record = first_record = runs.RunRecord.create(plan, fleet_path=fleet.path)
    printer.report(
        f"run {plan.run_id}: {' '.join(plan.target.shown_argv())} on lane {lane} ({plan.num_processes} workers)"
    )
    workers = fleet.lane_workers(lane)
    if not detach:
        core.interrupt_on_termination()
    attempts: list[dict[str, Any]] = []
    attempt, cause = 1, None
    while True:
        with obj.transport(workers) as transport:
            outcome = core.execute(
                plan,
                transport,
                reclaim=reclaim or attempt > 1,
                detach=detach,
                on_output=None if as_json else printer.output,
                on_stderr=None if as_json else printer.error_output,
                report=printer.report,
                timing=core.LaunchTiming(
                    grace=grace, failure_grace=failure_grace, lost_after=lost_after, start_timeout=start_timeout
                ),
                record=record,
                stdin_to=stdin_to,
            )
            gathered = None if (detach or no_gather) else _gather_receipts(record, transport, outcome.plan)
        if not max_restarts:
            break
        cause = None if outcome.ok else restarts.decide(outcome, policy, attempt)
        attempts.append(
            {"attempt": attempt, "run_id": plan.run_id, "status": outcome.status, "cause": cause and cause.to_dict()}
        )
        first_record.update(attempts=attempts)
        if cause is None or not cause.restart:
            break
        _render_outcome(outcome, printer)
        for line in gathered or ():
            printer.report(line)
        printer.report(f"restarting in {backoff:g}s: {cause.why} ({cause.layer}: {cause.reason})")
        try:
            time.sleep(max(0.0, backoff))
        except KeyboardInterrupt:
            printer.report("interrupted while waiting to restart; no further attempt")
            break
        attempt += 1
        plan = plan_attempt(attempt, cause)
        record = runs.RunRecord.create(plan, fleet_path=fleet.path)
        record.update(attempt=attempt, first_run=first.run_id)
        printer.report(f"run {plan.run_id}: attempt {attempt} of run {first.run_id}")
    if as_json:
        doc = outcome.to_dict()
        if max_restarts:
            doc["attempts"] = attempts
        click.echo(json.dumps(doc, indent=2))
    _render_outcome(outcome, printer, run_id_to_stdout=not as_json)
    if gathered:
        for line in gathered:
            printer.report(line)
    if cause is not None and not cause.restart:
        printer.report(f"not restarted: {cause.why}")
    if not outcome.ok:
        sys.exit(outcome.exit_code)


def _gather_receipts(record: RunRecord, transport: Transport, plan: LaunchPlan) -> list[str]:
    """Copy the receipts and logs of the run that just ended; a summary, plus the report's warnings."""
    from orchestrator import receipts
    from orchestrator.cli.receipts_cmd import gather_lines

    try:
        result = receipts.gather(record, transport, plan=plan)
        lines = gather_lines(result)
        rep = receipts.report(record)
    except Exception as exc:  # the run's outcome stands whatever gathering does
        return [f"could not gather the receipts: {exc.__class__.__name__}: {exc} (`orch gather {plan.run_id}`)"]
    warnings = rep.warnings
    if warnings:
        lines.append(f"report: {len(warnings)} flag{'s' if len(warnings) != 1 else ''} (`orch report {plan.run_id}`)")
        lines += [f"  ! [{f.kind}] {f.message}" for f in warnings[:5]]
    return lines


def _record_and_fleet(obj: Context, ref: str) -> tuple[RunRecord, Fleet]:
    from orchestrator import runs

    record = runs.find_run(ref)
    info = record.info()
    if obj.fleet_path is None and not os.environ.get("ORCH_FLEET") and info.get("fleet"):
        obj.fleet_path = info["fleet"]
    return record, obj.fleet()


def _workers_of(fleet: Fleet, plan: LaunchPlan) -> list[WorkerRef]:
    return [fleet.worker(name) for name in plan.workers]


@click.command("runs")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def runs_(as_json: bool) -> None:
    """List the runs recorded on this controller (newest first)."""
    from orchestrator import runs

    items = runs.list_runs()
    if as_json:
        click.echo(json.dumps({"schema_version": 1, "root": str(runs.runs_root()), "runs": items}, indent=2))
        return
    if not items:
        click.echo(f"no runs recorded in {runs.runs_root()}", err=True)
        return
    for r in items:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.get("created_at") or 0))
        outcome = (r.get("outcome") or {}).get("message") or ""
        state = r.get("state", "?")
        if r.get("controller_gone"):
            # The record stopped where its controller did; the workers know the rest.
            state, outcome = "controller-gone", f"{r['controller_gone']} while {state}; `orch status` asks the workers"
        click.echo(
            f"{r['run_id']:<40} {state:<12} {r.get('lane', '?'):<10} {len(r.get('workers') or [])}w  {when}  {outcome}"
        )


@click.command("status")
@click.argument("run", shell_complete=complete.runs)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@verbose_option
@click.pass_obj
def status(obj: Context, run: str, as_json: bool, verbose: bool) -> None:
    """Show a run's state on every worker (live, from the workers)."""
    from orchestrator.launch import recorded

    record, fleet = _record_and_fleet(obj, run)
    plan = record.plan()
    with obj.transport(_workers_of(fleet, plan)) as transport:
        doc = recorded.status(record, transport)
    attempts = record.info().get("attempts") or []
    if attempts:
        doc["attempts"] = attempts
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    for line in status_lines(doc, verbose):
        click.echo(line)
    if doc["state"] not in ("running", "succeeded"):
        sys.exit(1)


def status_lines(doc: dict[str, Any], verbose: bool = False) -> list[str]:
    """The run's state, then a line per worker; above the summary threshold, counts and the workers that ended badly."""
    lines = [f"run {doc['run_id']} (lane {doc['lane']}): {doc['state']}"]
    if doc.get("controller_gone"):
        lines.append(f"  {doc['controller_gone']} (it had recorded the run as {doc.get('recorded')})")
    for a in doc.get("attempts") or []:
        cause = a.get("cause") or {}
        why = f": {cause.get('layer')}: {cause.get('reason')} ({cause.get('why')})" if cause else ""
        lines.append(f"  attempt {a.get('attempt')}  {a.get('run_id')}  {a.get('status')}{why}")
    workers: dict[str, dict[str, Any]] = doc["workers"]
    if summarize(len(workers), verbose):
        rows = []
        for name, w in workers.items():
            ex = w.get("exit") or {}
            listed = (ex.get("exit_code") not in (0, None)) if ex else w.get("state") not in ("running", "ready")
            why = str(ex.get("reason") or "") if ex else str(w.get("error") or "")
            rows.append(Row(name, str(w.get("state", "?")), listed, why))
        return lines + [f"  {line}" for line in summary_lines(rows, states=("running", "exited"))]
    width = max(len(w) for w in workers)
    for name, w in workers.items():
        ex = w.get("exit") or {}
        detail = ex.get("reason") if ex else (f"pid {w.get('pid')}" if w.get("pid") else w.get("error", ""))
        procs = len(w.get("processes") or [])
        lines.append(
            f"  {name:<{width}}  {w.get('state', '?'):<10} {detail}" + (f"  ({procs} live processes)" if procs else "")
        )
    return lines


@click.command("logs")
@click.argument("run", shell_complete=complete.runs)
@click.option(
    "--worker",
    "worker_sel",
    metavar="W",
    shell_complete=complete.workers,
    help="Only this worker (name, index or glob).",
)
@click.option("-f", "--follow", is_flag=True, help="Keep streaming until the processes end.")
@click.option("--tail", type=int, metavar="N", help="Only the last N lines of each log.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON document with every worker's lines; with -f, one JSON object per line as it arrives.",
)
@click.pass_obj
def logs(obj: Context, run: str, worker_sel: str | None, follow: bool, tail: int | None, as_json: bool) -> None:
    """Print a run's output logs from the workers, worker-prefixed."""
    from orchestrator import runs
    from orchestrator.fleet import select_workers

    record, fleet = _record_and_fleet(obj, run)
    plan = record.plan()
    workers = _workers_of(fleet, plan)
    if worker_sel:
        workers = select_workers(workers, worker_sel, fleet_path=fleet.path)
    printer = _Printer([w.name for w in workers])
    with obj.transport(workers) as transport:
        if follow:
            on_line = _json_line if as_json else printer.output
            runs.follow_logs(record, transport, [w.name for w in workers], on_line)
            return
        texts = {w.name: runs.log_text(record, transport, w.name, tail=tail) for w in workers}
    if as_json:
        doc = {"schema_version": 1, "run_id": plan.run_id, "workers": {w: t.splitlines() for w, t in texts.items()}}
        click.echo(json.dumps(doc, indent=2))
        return
    for name, text in texts.items():
        for line in text.splitlines():
            printer.output(name, line)


_json_lock = threading.Lock()


def _json_line(worker: str, line: str) -> None:
    """`orch logs -f --json`: one object per output line, as it arrives."""
    with _json_lock:
        click.echo(json.dumps({"worker": worker, "line": line}))


@click.command("attach")
@click.argument("run", shell_complete=complete.runs)
@_gang_timing_options
@click.option("--no-gather", is_flag=True, help="Do not copy the workers' receipts and logs at the end.")
@click.option("--json", "as_json", is_flag=True, help="The outcome as JSON on stdout at the end (as launch --json).")
@click.pass_obj
def attach(
    obj: Context, run: str, grace: float, failure_grace: float, lost_after: float, no_gather: bool, as_json: bool
) -> None:
    """Resume watching a detached run: stream its output and apply the gang rule again.

    When the run ends, every worker's receipt and logs are gathered (unless --no-gather).
    """
    record, fleet = _record_and_fleet(obj, run)
    plan = record.plan()
    printer = _Printer(plan.workers)
    printer.report(f"attached to run {plan.run_id} on lane {plan.lane} ({plan.num_processes} workers)")
    from orchestrator.launch import LaunchTiming, interrupt_on_termination, recorded

    interrupt_on_termination()
    with obj.transport(_workers_of(fleet, plan)) as transport:
        outcome = recorded.attach(
            record,
            transport,
            on_output=None if as_json else printer.output,
            on_stderr=None if as_json else printer.error_output,
            report=printer.report,
            timing=LaunchTiming(grace=grace, failure_grace=failure_grace, lost_after=lost_after),
        )
        gathered = None if no_gather else _gather_receipts(record, transport, outcome.plan)
    if as_json:
        click.echo(json.dumps(outcome.to_dict(), indent=2))
    _render_outcome(outcome, printer)
    for line in gathered or []:
        printer.report(line)
    if not outcome.ok:
        sys.exit(outcome.exit_code)


@click.command("stop")
@click.argument("run", shell_complete=complete.runs)
@click.option("--grace", type=float, default=5.0, show_default=True, metavar="S", help="Seconds between TERM and KILL.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document with every worker's result.")
@click.pass_obj
def stop(obj: Context, run: str, grace: float, as_json: bool) -> None:
    """End every process of a run on every worker (TERM, grace, KILL)."""
    from orchestrator.launch import recorded

    record, fleet = _record_and_fleet(obj, run)
    plan = record.plan()
    with obj.transport(_workers_of(fleet, plan)) as transport:
        result = recorded.stop(record, transport, grace=grace)
    bad = {w: r for w, r in result["workers"].items() if r.get("left") or r.get("error")}
    if as_json:
        click.echo(json.dumps({"schema_version": 1, "run_id": plan.run_id, "ok": not bad, **result}, indent=2))
    ended = sum(len(r.get("term") or []) for r in result["workers"].values())
    click.echo(
        f"orch: run {plan.run_id}: ended {ended} process(es) on {len(result['workers'])} workers "
        f"in {result['elapsed']:.2f}s",
        err=True,
    )
    for w, r in bad.items():
        click.echo(f"  FAILED {w}: {r.get('error') or 'still alive: ' + str(r.get('left'))}", err=True)
    if bad:
        sys.exit(1)
