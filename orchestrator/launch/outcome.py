"""How a launch ended: per worker (`WorkerEnd`) and as a whole (`LaunchOutcome`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrator.launch.plan import SCHEMA_VERSION, LaunchPlan


@dataclass
class WorkerEnd:
    """How one worker's process ended."""

    worker: str
    process_id: int
    exit_code: int | None
    signal: int | None = None
    signal_name: str | None = None
    reason: str = ""
    stopped: bool = False  # ended by orch (gang teardown, stop, timeout)
    lost: bool = False  # the worker or its supervisor stopped answering
    ended_at: float | None = None
    tail: str = ""
    lines: dict[str, int] | None = None  # lines the process wrote, per stream (from the worker)
    live_missed: dict[str, int] | None = None  # of those, lines the live view did not show

    @property
    def failed(self) -> bool:
        return (
            self.lost
            or self.signal is not None
            or (self.exit_code not in (0, None))
            or (self.exit_code is None and not self.stopped)
        )

    def how(self) -> str:
        if self.lost:
            return f"lost ({self.reason})"
        if self.signal:
            return f"killed by signal {self.signal} ({self.signal_name or '?'})"
        if self.exit_code is not None:
            return f"exit code {self.exit_code}"
        return self.reason or "unknown"

    def to_dict(self) -> dict[str, Any]:
        return {
            "worker": self.worker,
            "process_id": self.process_id,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "signal_name": self.signal_name,
            "reason": self.reason,
            "stopped": self.stopped,
            "lost": self.lost,
            "ended_at": self.ended_at,
            "how": self.how(),
            "lines": self.lines,
            "live_missed": self.live_missed,
        }


@dataclass
class LaunchOutcome:
    """What a launch (or an attach) ended with."""

    run_id: str
    status: str  # succeeded | failed | timed-out | interrupted | stopped | detached
    plan: LaunchPlan
    ends: dict[str, WorkerEnd] = field(default_factory=dict)
    first_failure: WorkerEnd | None = None
    diagnosis: dict[str, Any] | None = None
    message: str = ""
    ready_elapsed: float | None = None
    release_at: float | None = None
    released_at: dict[str, float] = field(default_factory=dict)
    started_at: dict[str, float] = field(default_factory=dict)
    failure_seen_at: float | None = None
    teardown: dict[str, Any] | None = None
    run_dir: str | None = None

    @property
    def ok(self) -> bool:
        return self.status in ("succeeded", "detached")

    @property
    def start_skew(self) -> float | None:
        vals = list(self.released_at.values())
        return max(vals) - min(vals) if len(vals) > 1 else (0.0 if vals else None)

    @property
    def user_start_skew(self) -> float | None:
        vals = list(self.started_at.values())
        return max(vals) - min(vals) if len(vals) > 1 else (0.0 if vals else None)

    @property
    def teardown_latency(self) -> float | None:
        """Seconds from the first failure's exit (worker clock) to every worker torn down."""
        if not (self.first_failure and self.first_failure.ended_at and self.teardown):
            return None
        done_at: float = self.teardown["done_at"]
        return done_at - self.first_failure.ended_at

    @property
    def exit_code(self) -> int:
        return {"succeeded": 0, "detached": 0, "timed-out": 124, "interrupted": 130}.get(self.status, 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "status": self.status,
            "ok": self.ok,
            "message": self.message,
            "lane": self.plan.lane,
            "num_processes": self.plan.num_processes,
            "ends": {w: e.to_dict() for w, e in self.ends.items()},
            "first_failure": self.first_failure.to_dict() if self.first_failure else None,
            "first_failure_tail": self.first_failure.tail if self.first_failure else None,
            "diagnosis": self.diagnosis,
            "ready_elapsed": self.ready_elapsed,
            "release_at": self.release_at,
            "released_at": self.released_at,
            "started_at": self.started_at,
            "start_skew": self.start_skew,
            "user_start_skew": self.user_start_skew,
            "failure_seen_at": self.failure_seen_at,
            "teardown": self.teardown,
            "teardown_latency": self.teardown_latency,
        }


def diagnose_tail(text: str) -> dict[str, Any] | None:
    """The diagnosis of a failing worker's log tail (the probe's signature table), if any."""
    if not text:
        return None
    try:
        from orchestrator.diagnose import diagnose
    except ImportError:
        return None
    finding = diagnose(text)
    if finding is None:
        return None
    return {"layer": finding.layer, "line": finding.line, "remedy": finding.remedy}


def conclude(out: LaunchOutcome, *, detached_watch: bool) -> LaunchOutcome:
    """Decide the status and name the first failure (the earliest end that orch did not cause).

    `detached_watch`: the watch stopped at the start (`--detach`), so a clean one means "detached".
    """
    failures = [e for e in out.ends.values() if e.failed and not e.stopped]
    stopped = [e for e in out.ends.values() if e.stopped]
    if failures:
        out.first_failure = min(failures, key=lambda e: (e.ended_at or float("inf"), e.process_id))
        out.diagnosis = diagnose_tail(out.first_failure.tail)
    if out.status == "running":  # not already timed-out, interrupted or failed to start
        if out.first_failure is not None:
            out.status = "failed"
        elif stopped:
            out.status = "stopped"
        elif detached_watch and out.teardown is None:
            out.status = "detached"
        else:
            out.status = "succeeded"
    f = out.first_failure
    if out.status == "failed" and f is not None:
        out.message = f"{f.worker} (process {f.process_id}) failed first: {f.how()}" + (
            f"; {f.reason}" if f.reason and not f.lost and f.reason not in f.how() else ""
        )
    elif out.status == "stopped":
        first = min(stopped, key=lambda e: e.ended_at or float("inf"))
        out.message = f"{first.worker}: {first.reason}"
    elif out.status == "detached":
        out.message = f"run {out.run_id} started on {out.plan.num_processes} workers"
    elif out.status == "succeeded":
        out.message = f"all {out.plan.num_processes} processes exited 0"
    return out
