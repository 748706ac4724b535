"""A launch from plan to outcome: sync, preflight, start together, watch as a gang, record.

`execute(plan, transport)` carries a plan out:

1. sync `--workdir` to every worker (only changed files, verified);
2. preflight on every worker, all-or-nothing: one active bundle across the
   lane, no foreign holder of the libtpu lockfile or a chip, a free
   coordinator port (`reclaim` first ends processes of earlier orch runs);
3. start: the launch file goes into each worker's run directory and a
   detached supervisor starts the launcher (see hostside/launch_start.py);
4. start together: each launcher imports its frontends and reports ready;
   when every worker is ready, all are released at one wall-clock instant;
5. watch as a gang (driver.py, gang.py): the first worker that exits non-zero
   (or is lost) makes the controller end every other worker's processes
   (TERM to the process group, grace, KILL). Ctrl-C and the timeout do the
   same. The outcome names the first failure, how it ended and the diagnosis
   of its log tail.

A detached run keeps running when its controller goes away; `monitor` resumes
watching it, which `orch attach` uses (recorded.py). An attached run ends on
its workers within the controller lease's bound once its controller is gone
(docs/reliability.md).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import orchestrator.launch.stdin as stdin
from orchestrator import runs
from orchestrator.errors import LaunchError
from orchestrator.launch.control import (
    LeaseRenewer,
    OutputFn,
    ReportFn,
    collect_records,
    quiet,
    reply,
    start_workers,
    stop_workers,
)
from orchestrator.launch.driver import monitor
from orchestrator.launch.outcome import LaunchOutcome
from orchestrator.launch.plan import LaunchPlan, with_ports
from orchestrator.launch.preflight import preflight, reach
from orchestrator.launch.signals import interruption, shielded
from orchestrator.launch.timing import DEFAULT_GRACE, LaunchTiming
from orchestrator.launch.workdir import sync_workdir
from orchestrator.names import alike, alike_lines
from orchestrator.transport import Transport


def execute(
    plan: LaunchPlan,
    transport: Transport,
    *,
    timing: LaunchTiming | None = None,
    reclaim: bool = False,
    detach: bool = False,
    on_output: OutputFn | None = None,
    on_stderr: OutputFn | None = None,
    report: ReportFn = quiet,
    record: runs.RunRecord | None = None,
    stdin_to: str | None = None,
) -> LaunchOutcome:
    """Carry out `plan` on the workers of `transport`: sync, preflight, start together, watch as a gang.

    Raises LaunchError when preflight or the start refuses (nothing is left
    running then); otherwise returns the outcome, which names the first
    failing worker. `record` keeps the controller's copy (a new one by default).
    `stdin_to` ("0" or "all") forwards the controller's stdin to process 0 or to every process.
    """
    timing = timing or LaunchTiming()
    record = record or runs.RunRecord.create(plan)
    record.update(state="preflight")
    try:
        plan = prepare(plan, transport, record, reclaim=reclaim, grace=timing.grace, report=report)
    except KeyboardInterrupt:
        record.update(state="interrupted")
        raise LaunchError("interrupted during preflight; nothing was started") from None
    forwarding = None
    # Renewing begins before the first launcher starts waiting for its release: starting a wide gang
    # takes longer than the lease's bound (256 workers of one 2-core machine: over a minute), and the
    # first launchers would otherwise see no renewal and end themselves before the last one started.
    renewer = LeaseRenewer(plan, transport).start()
    try:
        feed = stdin.targets(plan, stdin_to)
        start(plan, transport, record, timing, stdin_to=feed, attached=not detach)
        forwarding = stdin.forward(plan, transport, feed, report=report) if feed else None
        until = "started" if detach else "exit"
        outcome = monitor(
            plan,
            transport,
            timing=timing,
            on_output=on_output,
            on_stderr=on_stderr,
            report=report,
            until=until,
            renewer=renewer,
        )
    except KeyboardInterrupt as exc:
        outcome = interrupted(plan, transport, exc, grace=timing.grace)
    finally:
        renewer.stop()
        if forwarding is not None:
            forwarding.close()  # the run is over: the workers' input ends, and their forwarding jobs
    return finish(plan, transport, outcome, record)


def prepare(
    plan: LaunchPlan, transport: Transport, record: runs.RunRecord, *, reclaim: bool, grace: float, report: ReportFn
) -> LaunchPlan:
    """Sync the workdir and preflight every worker; the plan to start (its port may have moved)."""
    if plan.workdir:
        sync_workdir(plan, transport, report)
    pf = preflight(plan, transport, reclaim=reclaim, grace=grace)
    for line in pf.reclaimed:
        report(line)
    for line in pf.warnings:
        report(f"warning: {line}")
    if pf.problems:
        record.update(state="refused", problems=pf.problems)
        n = len(pf.problems)
        raise LaunchError(
            f"preflight refused run {plan.run_id} on lane '{plan.lane}' "
            f"({n} problem{'s' if n != 1 else ''}):\n  - " + "\n  - ".join(alike_lines(pf.problems, plan.workers))
        )
    if pf.suggested_ports:
        report(
            f"coordinator port {plan.coordinator_port} is taken on {plan.processes[0].worker}; "
            f"using {pf.suggested_ports[0]}"
        )
        plan = with_ports(plan, pf.suggested_ports[0])
        record.save_plan(plan)
    if plan.multislice:
        blocked = reach(plan, transport)
        if blocked:
            record.update(state="refused", problems=blocked)
            raise LaunchError(
                f"preflight refused run {plan.run_id} on lane '{plan.lane}': the gang's ports are not "
                f"reachable:\n  - " + "\n  - ".join(alike_lines(blocked, plan.workers))
            )
    bundle = next(iter(pf.bundles.values()), None)
    record.update(state="starting", bundle_env=bundle)
    report(
        f"preflight ok on {plan.num_processes} workers (bundle {os.path.basename(bundle or '?')}); "
        f"coordinator {plan.coordinator}"
    )
    return plan


def start(
    plan: LaunchPlan,
    transport: Transport,
    record: runs.RunRecord,
    timing: LaunchTiming,
    stdin_to: Sequence[str] = (),
    attached: bool = False,
) -> None:
    """Start every worker's supervisor; if any start fails, stop them all and raise LaunchError."""
    started = start_workers(
        plan, transport, grace=timing.grace, ready_timeout=timing.start_timeout, stdin_to=stdin_to, attached=attached
    )
    bad = {}
    for name, res in started.items():
        doc = reply(res)
        if doc is None or not doc.get("ok"):
            bad[name] = (doc or {}).get("error") or res.describe()
    if bad:
        stop_workers(plan, transport, reason="the start failed on another worker", grace=timing.grace)
        record.update(state="start-failed", problems=[f"{w}: {m}" for w, m in bad.items()])
        raise LaunchError(
            "the run could not be started on every worker (nothing is left running):\n  - "
            + "\n  - ".join(alike(bad.items()))
        )
    record.update(state="started", pids={w: reply(r) for w, r in started.items()})


def interrupted(
    plan: LaunchPlan, transport: Transport, exc: KeyboardInterrupt, *, grace: float = DEFAULT_GRACE
) -> LaunchOutcome:
    """Tear the gang down after an interrupt that came before (or around) the gang's own watch."""
    what = interruption(exc)
    teardown = stop_workers(plan, transport, reason=f"{what} on the controller", grace=grace)
    return LaunchOutcome(
        run_id=plan.run_id,
        status="interrupted",
        plan=plan,
        teardown=teardown,
        message=f"interrupted ({what}) on the controller",
    )


def finish(plan: LaunchPlan, transport: Transport, outcome: LaunchOutcome, record: runs.RunRecord) -> LaunchOutcome:
    """Save the outcome (and, unless detached, every worker's record) in the controller's run record."""
    outcome.run_dir = str(record.dir)
    if outcome.status != "detached":
        records = shielded(lambda: collect_records(plan, transport))
        record.save_workers(records)
        for name, doc in records.items():
            rec = (doc or {}).get("record") or {}
            if rec.get("released_at") and name not in outcome.released_at:
                outcome.released_at[name] = rec["released_at"]
            if rec.get("started_at") and name not in outcome.started_at:
                outcome.started_at[name] = rec["started_at"]
    record.update(state=outcome.status, outcome=outcome.to_dict(), ended_at=time.time())
    return outcome
