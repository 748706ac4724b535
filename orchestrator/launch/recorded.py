"""Operations on a recorded run that reach its workers: status, stop, attach.

They live here, not in orchestrator/runs.py, because they need worker control
and the gang driver; runs.py is the record store and imports only the plan.
"""

from __future__ import annotations

import time
from typing import Any

from orchestrator.launch.control import OutputFn, ReportFn, collect_records, quiet, stop_workers, worker_status
from orchestrator.launch.driver import monitor
from orchestrator.launch.lifecycle import finish, interrupted
from orchestrator.launch.outcome import LaunchOutcome
from orchestrator.launch.timing import LaunchTiming
from orchestrator.runs import SCHEMA_VERSION, RunRecord, controller_gone
from orchestrator.transport import Transport

# The workers' word for a run that no longer runs anywhere (overall_state).
ENDED_STATES = frozenset({"succeeded", "failed", "stopped", "not-started"})


def status(record: RunRecord, transport: Transport) -> dict[str, Any]:
    """Each worker's live state of the run (state, pid, exit status, processes).

    When the record still says the run is active but its controller is gone (SIGKILLed), the
    workers are the truth: once they say the run ended, the record is brought in line with them
    (`ended_by: controller gone`), so `orch runs` and `orch status` say the same thing."""
    plan = record.plan()
    workers = worker_status(plan, transport)
    info = record.info()
    state = overall_state(workers)
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "run_id": plan.run_id,
        "lane": plan.lane,
        "state": state,
        "recorded": info.get("state"),
        "workers": workers,
    }
    gone = controller_gone(info)
    if gone:
        doc["controller_gone"] = gone
        if state in ENDED_STATES:
            record.update(
                state=state,
                ended_by="controller gone",
                recorded_before=info.get("state"),
                outcome={"status": state, "message": f"{gone} ({worker_summary(workers)})"},
            )
    return doc


def worker_summary(workers: dict[str, dict[str, Any]]) -> str:
    """The workers' end, in a few words: the first worker that did not exit 0 and why, else all exited 0."""
    for name, d in workers.items():
        ex = d.get("exit") or {}
        if d.get("state") == "absent":
            return f"{name}: never started"
        if ex.get("exit_code") != 0:
            return f"{name}: {ex.get('reason') or d.get('state')}"
    return "every worker exited 0"


def overall_state(workers: dict[str, dict[str, Any]]) -> str:
    """One word for the run from its workers' states."""
    states = {d.get("state") for d in workers.values()}
    if states == {"absent"}:
        return "not-started"  # its controller stopped before any worker was started
    if states <= {"exited", "absent"}:  # some ended, the others never started: nothing runs
        exits = [d.get("exit") or {} for d in workers.values()]
        if all(e.get("exit_code") == 0 for e in exits):
            return "succeeded"
        return "stopped" if any(e.get("stopped") for e in exits) else "failed"
    if states & {"running", "ready", "starting", "exiting"}:
        return "running"
    return "degraded"


def stop(record: RunRecord, transport: Transport, *, grace: float, reason: str = "orch stop") -> dict[str, Any]:
    """End every process of the run on every worker (TERM, grace, KILL)."""
    plan = record.plan()
    result = stop_workers(plan, transport, reason=reason, grace=grace)
    record.save_workers(collect_records(plan, transport))
    record.update(state="stopped", stopped=result)
    return result


def attach(
    record: RunRecord,
    transport: Transport,
    *,
    timing: LaunchTiming | None = None,
    on_output: OutputFn | None = None,
    on_stderr: OutputFn | None = None,
    report: ReportFn = quiet,
) -> LaunchOutcome:
    """Resume watching a run under the gang rule (output from now on); returns its LaunchOutcome."""
    timing = timing or LaunchTiming()
    plan = record.plan()
    try:
        states = worker_status(plan, transport)
        released = any((d.get("started_at") or d.get("state") in ("running", "exited")) for d in states.values())
        record.update(state="running", attached_at=time.time())
        outcome = monitor(
            plan,
            transport,
            timing=timing,
            on_output=on_output,
            on_stderr=on_stderr,
            report=report,
            from_end=True,
            release_needed=not released,
        )
    except KeyboardInterrupt as exc:
        # Attached means watched: the interrupt ends the run as it would a launch's.
        outcome = interrupted(plan, transport, exc, grace=timing.grace)
    return finish(plan, transport, outcome, record)
