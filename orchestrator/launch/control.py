"""Worker control for one run: start, release, stop, status and the workers' records.

Each call runs one hostside job on every worker of the plan, in parallel, and
returns per-worker results; none of them decides anything about the gang.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hostside.launch_ctl import release_argv, renew_argv
from hostside.lease import CONTROLLER_RENEW_EVERY
from orchestrator.fleet import WorkerRef
from orchestrator.launch.plan import LaunchPlan
from orchestrator.launch.signals import shielded
from orchestrator.launch.timing import DEFAULT_GRACE
from orchestrator.remote import job_document, run_hostside
from orchestrator.transport import Result, Transport

OutputFn = Callable[[str, str], None]  # (worker, line)
ReportFn = Callable[[str], None]  # controller progress, one line
RELEASE_TIMEOUT = 30.0
RENEW_TIMEOUT = 30.0  # one renewal's bound; a worker whose renewal is still out is skipped meanwhile
ANSWER_SLACK = 10.0  # beyond a command's own timeout, for its Result to come back


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
    from now (each worker counts it from the message's arrival on its own clock, capped there).
    A shell command each (`release_argv`), sent as one `run_each`: through a connection holder, one
    request for the whole gang."""
    delay = max(0.0, at - time.time())
    commands = {n: release_argv(plan.process(n).run_dir, delay) for n in (workers or plan.workers)}
    return run_all(transport, commands, timeout=RELEASE_TIMEOUT)


def run_all(transport: Transport, commands: Mapping[str, Sequence[str]], *, timeout: float) -> dict[str, Result]:
    """`Transport.run_each`, waited for: every worker's Result, in the order of `commands`."""
    got: dict[str, Result] = {}
    guard = threading.Lock()
    done = threading.Event()

    def heard(result: Result) -> None:
        with guard:
            got[result.host] = result
            if len(got) >= len(commands):
                done.set()

    if commands:
        transport.run_each(commands, timeout=timeout, on_result=heard)
        done.wait(timeout + ANSWER_SLACK)
    silent = f"no answer within {timeout:g}s"
    with guard:
        return {
            n: got.get(n) or Result(host=n, argv=tuple(argv), exit_code=None, error=silent, error_kind="timeout")
            for n, argv in commands.items()
        }


class LeaseRenewer:
    """Renews the controller lease in every worker's run directory until `stop`: a launcher waiting
    for its release, and an attached run's supervisor after it, end themselves when renewals stop
    (hostside.lease's bound).
    Each round is one `Transport.run_each` (through a connection holder: one request for the whole
    gang), never waited for, so a hung worker delays no other; a worker whose previous renewal is
    still in flight is skipped."""

    def __init__(self, plan: LaunchPlan, transport: Transport, every: float = CONTROLLER_RENEW_EVERY):
        self.plan, self.transport, self.every = plan, transport, every
        self.stopped = threading.Event()
        self.busy: set[str] = set()
        self.guard = threading.Lock()
        self.count = 0  # rounds sent: the value each renewal writes (only its change is judged)
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
            with self.guard:
                self.count += 1
                due = [n for n in self.plan.workers if n not in self.busy]
                self.busy.update(due)
            commands = {n: renew_argv(self.plan.process(n).run_dir, self.count) for n in due}
            try:
                self.transport.run_each(commands, timeout=RENEW_TIMEOUT, on_result=self._answered)
            except Exception:
                with self.guard:  # a missed round is retried; the lease's ttl is four renewals long
                    self.busy.difference_update(due)
            self.stopped.wait(self.every)

    def _answered(self, result: Result) -> None:
        with self.guard:
            self.busy.discard(result.host)


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
