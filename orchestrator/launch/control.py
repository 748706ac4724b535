"""Worker control for one run: start, release, stop, status and the workers' records.

Each call runs one hostside job on every worker of the plan, in parallel, and
returns per-worker results; none of them decides anything about the gang.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from hostside.launch_ctl import renew_argv
from hostside.lease import CONTROLLER_RENEW_EVERY
from orchestrator.fleet import WorkerRef
from orchestrator.launch.plan import LaunchPlan
from orchestrator.launch.signals import shielded
from orchestrator.launch.timing import DEFAULT_GRACE
from orchestrator.remote import job_document, run_hostside
from orchestrator.transport import Result, Transport

OutputFn = Callable[[str, str], None]  # (worker, line)
ReportFn = Callable[[str], None]  # controller progress, one line


def quiet(_text: str) -> None:
    """A ReportFn that reports nothing."""


def reply(result: Result) -> dict[str, Any] | None:
    """The JSON document a hostside job printed, or None when it printed none."""
    try:
        return job_document(result)
    except Exception:
        return None


def start_workers(
    plan: LaunchPlan,
    transport: Transport,
    *,
    grace: float,
    ready_timeout: float,
    stdin_to: Sequence[str] = (),
    attached: bool = False,
) -> dict[str, Result]:
    """Send each worker its launch document (on stdin, never a command line; the worker writes it
    owner-only, since it holds the run's environment) and start its supervisor. The processes of
    `stdin_to` read their stdin from the controller (orchestrator.launch.stdin), the others /dev/null.
    An `attached` run ends on the workers when this controller stops renewing its lease after the
    release too (hostside/launch_supervise.py); a detached one outlives it."""

    def one(worker: WorkerRef) -> Result:
        doc = plan.launch_doc(plan.process(worker.name), grace=grace, ready_timeout=ready_timeout)
        doc["attached"] = attached
        if worker.name in stdin_to:
            doc["stdin"] = True
        return run_hostside(transport, worker, "launch_start", stdin=json.dumps(doc), timeout=60)

    return transport.map(one, plan.workers)


def release(
    plan: LaunchPlan, transport: Transport, at: float, workers: Sequence[str] | None = None
) -> dict[str, Result]:
    """Release every waiting launcher at the controller's wall-clock instant `at`, sent as a delay
    from now (each worker counts it from the message's arrival on its own clock, capped there)."""

    def one(worker: WorkerRef) -> Result:
        run_dir = plan.process(worker.name).run_dir
        delay = max(0.0, at - time.time())
        return run_hostside(transport, worker, "launch_ctl", ["release", run_dir, "--in", repr(delay)], timeout=30)

    return transport.map(one, workers or plan.workers)


class LeaseRenewer:
    """Renews the controller lease in every worker's run directory until `stop`: a launcher waiting
    for its release, and an attached run's supervisor after it, end themselves when renewals stop
    (hostside.lease's bound).
    One thread per worker and renewal, never joined, so a hung worker delays no other; a worker
    whose previous renewal is still in flight is skipped."""

    def __init__(self, plan: LaunchPlan, transport: Transport, every: float = CONTROLLER_RENEW_EVERY):
        self.plan, self.transport, self.every = plan, transport, every
        self.stopped = threading.Event()
        self.busy: set[str] = set()
        self.guard = threading.Lock()
        self.count = 0  # renewals sent: the value each one writes (only its change is judged)
        self.started = False

    def start(self) -> LeaseRenewer:
        """Begin renewing (once: a second call changes nothing)."""
        with self.guard:
            if self.started:
                return self
            self.started = True
        threading.Thread(target=self._loop, daemon=True, name="orch-controller-lease").start()
        return self

    def stop(self) -> None:
        self.stopped.set()

    def _loop(self) -> None:
        while not self.stopped.is_set():
            for name in self.plan.workers:
                with self.guard:
                    if name in self.busy:
                        continue
                    self.busy.add(name)
                threading.Thread(target=self._renew, args=(name,), daemon=True, name=f"orch-lease-{name}").start()
            self.stopped.wait(self.every)

    def _renew(self, name: str) -> None:
        try:
            with self.guard:
                self.count += 1
                count = self.count
            self.transport.run_one(name, renew_argv(self.plan.process(name).run_dir, count), timeout=30)
        except Exception:
            pass  # a missed renewal is retried; the lease's ttl is four renewals long
        finally:
            with self.guard:
                self.busy.discard(name)


def stop_workers(
    plan: LaunchPlan,
    transport: Transport,
    *,
    reason: str,
    grace: float = DEFAULT_GRACE,
    workers: Sequence[str] | None = None,
) -> dict[str, Any]:
    """TERM then KILL every process of the run on `workers` (default: all), in parallel.

    Returns {"reason", "workers": {name: stop report}, "started_at", "done_at", "elapsed"}.
    """
    t0 = time.time()

    def one(worker: WorkerRef) -> Result:
        run_dir = plan.process(worker.name).run_dir
        args = ["stop", run_dir, "--grace", f"{grace:g}", "--reason", reason]
        return run_hostside(transport, worker, "launch_ctl", args, timeout=grace + 20)

    results = shielded(lambda: transport.map(one, workers or plan.workers))
    out: dict[str, dict[str, Any]] = {}
    for name, res in results.items():
        doc = reply(res)
        out[name] = {k: doc.get(k) for k in ("term", "kill", "left", "elapsed")} if doc else {"error": res.describe()}
    done = time.time()
    return {"reason": reason, "workers": out, "started_at": t0, "done_at": done, "elapsed": round(done - t0, 3)}


def collect_records(plan: LaunchPlan, transport: Transport) -> dict[str, dict[str, Any]]:
    """Each worker's pid file, record and exit status (for the controller's run record)."""
    return _ask_each(plan, transport, "collect", {})


def worker_status(plan: LaunchPlan, transport: Transport) -> dict[str, dict[str, Any]]:
    """Each worker's live state of the run (`unreachable` when it does not answer)."""
    return _ask_each(plan, transport, "status", {"state": "unreachable"})


def _ask_each(
    plan: LaunchPlan, transport: Transport, verb: str, unanswered: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    def one(worker: WorkerRef) -> Result:
        return run_hostside(transport, worker, "launch_ctl", [verb, plan.process(worker.name).run_dir], timeout=30)

    out: dict[str, dict[str, Any]] = {}
    for name, res in transport.map(one, plan.workers).items():
        doc = reply(res)
        out[name] = doc if doc is not None else {**unanswered, "error": res.describe()}
    return out
