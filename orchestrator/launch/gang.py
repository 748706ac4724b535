"""The gang rule as a pure state machine: `step(state, event) -> (state, decisions)`.

The driver (driver.py) owns threads, SSH and the clock; it turns what it
observes into events and carries out the decisions this module returns. Here
there is no I/O and no clock read: every instant arrives as event data (`now`
from time.monotonic(), `wall` from time.time(), both measured by the driver).

The rule:
- every worker reports ready, then all are released at one instant (unless the
  run was already released, as when attaching to a running one);
- the first worker that fails (exits non-zero, is killed, is lost, or is ended
  by someone else) makes the controller tear every worker down; so do an
  interrupt of the controller, the start timeout and the run's timeout;
- the gang is done when every worker has ended *and* its output stream closed
  (so the live output never loses its tail: an exit report can overtake the
  output backlog, and output and events travel on separate channels); a lost
  worker's stream may never close and is not waited for; after a teardown,
  exit reports are waited for `teardown_wait` seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from orchestrator.launch.outcome import WorkerEnd
from orchestrator.launch.timing import LaunchTiming

# -- events ---------------------------------------------------------------------


@dataclass(frozen=True)
class Ready:
    """A worker's launcher imported its frontends and waits for the release."""

    worker: str


@dataclass(frozen=True)
class Started:
    """A worker's user code started (after the release)."""

    worker: str
    started_at: float | None = None
    released_at: float | None = None
    release_at: float | None = None


@dataclass(frozen=True)
class Exited:
    """A worker's process ended; `report` is the worker's exit report."""

    worker: str
    report: Mapping[str, Any]
    wall: float


@dataclass(frozen=True)
class StreamClosed:
    """A worker's output stream ended: drained to the last line, or given up (the driver counts what is missing)."""

    worker: str


@dataclass(frozen=True)
class WatchLost:
    """A worker's watch broke and the worker did not answer again."""

    worker: str
    reason: str
    last_heard: float | None
    wall: float


@dataclass(frozen=True)
class Tick:
    """Time passed: `now` (monotonic), `wall` (epoch) and when each worker was last heard from."""

    now: float
    wall: float
    last_heard: Mapping[str, float]
    last_heard_wall: Mapping[str, float]


@dataclass(frozen=True)
class Interrupted:
    """The controller was interrupted (`what`: Ctrl-C, SIGTERM, SIGHUP)."""

    what: str
    wall: float


@dataclass(frozen=True)
class Released:
    """The release went out; `failed` names the workers it could not be delivered to."""

    failed: tuple[str, ...] = ()


@dataclass(frozen=True)
class TornDown:
    """The teardown the driver was asked for has been carried out (at monotonic `now`)."""

    now: float


Event = Ready | Started | Exited | StreamClosed | WatchLost | Tick | Interrupted | Released | TornDown

# -- decisions --------------------------------------------------------------------


@dataclass(frozen=True)
class Release:
    """Release every worker at wall-clock instant `at`."""

    at: float


@dataclass(frozen=True)
class Teardown:
    """End every process of the run: TERM, `grace`, KILL. `worker` is the one that caused it, if any."""

    reason: str
    grace: float
    worker: str | None = None


@dataclass(frozen=True)
class MarkLost:
    """A worker is declared lost (it is alive, as far as anyone knows, until `last_heard`)."""

    worker: str
    reason: str


@dataclass(frozen=True)
class Report:
    """A line of progress for the operator."""

    text: str


@dataclass(frozen=True)
class Done:
    """The gang is finished: nothing more will be watched."""


Decision = Release | Teardown | MarkLost | Report | Done

# -- state ----------------------------------------------------------------------------


@dataclass(frozen=True)
class GangState:
    """Everything the gang rule knows. Replaced, never mutated."""

    workers: tuple[str, ...]
    process_ids: Mapping[str, int]
    run_dirs: Mapping[str, str]
    timing: LaunchTiming
    started_mono: float
    run_timeout: float | None = None
    until: str = "exit"  # "exit": watch to the end; "started": stop watching once all started (detach)
    released_mono: float | None = None  # when the release went out (None: not yet)
    ready: frozenset[str] = frozenset()
    started: frozenset[str] = frozenset()
    closed: frozenset[str] = frozenset()
    lost: frozenset[str] = frozenset()  # declared lost here: their streams are not waited for
    ends: Mapping[str, WorkerEnd] = field(default_factory=dict)
    status: str = "running"  # running | failed | timed-out | interrupted
    message: str = ""
    failure_seen_at: float | None = None
    ready_elapsed: float | None = None
    release_at: float | None = None
    released_at: Mapping[str, float] = field(default_factory=dict)
    started_at: Mapping[str, float] = field(default_factory=dict)
    teardown_reason: str | None = None
    teardown_deadline: float | None = None  # monotonic; set once the teardown was carried out
    finished: bool = False

    @property
    def released(self) -> bool:
        return self.released_mono is not None

    @property
    def tearing_down(self) -> bool:
        return self.teardown_reason is not None


def initial(
    workers: tuple[str, ...],
    process_ids: Mapping[str, int],
    run_dirs: Mapping[str, str],
    timing: LaunchTiming,
    *,
    now: float,
    run_timeout: float | None = None,
    until: str = "exit",
    released: bool = False,
) -> GangState:
    """The gang before any event: `now` is the monotonic instant the watch began."""
    return GangState(
        workers=workers,
        process_ids=process_ids,
        run_dirs=run_dirs,
        timing=timing,
        started_mono=now,
        run_timeout=run_timeout,
        until=until,
        released_mono=now if released else None,
    )


Step = tuple[GangState, list[Decision]]


def step(state: GangState, event: Event) -> Step:
    """Apply one event; returns the new state and what the driver must do, in order."""
    if state.finished:
        return state, []
    state, decisions = _apply(state, event)
    if _all_finished(state) or _teardown_expired(state, event):
        state, last = _finish(state)
        decisions += last
    return state, decisions


def _apply(state: GangState, event: Event) -> Step:
    if isinstance(event, Ready):
        return replace(state, ready=state.ready | {event.worker}), []
    if isinstance(event, Started):
        return _on_started(state, event), []
    if isinstance(event, Exited):
        return _on_exit(state, event)
    if isinstance(event, StreamClosed):
        return _on_closed(state, event)
    if isinstance(event, WatchLost):
        reason = event.reason
        return _lose(state, event.worker, reason, event.last_heard or event.wall, event.wall, f"lost: {reason}")
    if isinstance(event, Tick):
        return _on_tick(state, event)
    if isinstance(event, Interrupted):
        return _on_interrupt(state, event)
    if isinstance(event, Released):
        return _on_released(state, event)
    if isinstance(event, TornDown):
        return replace(state, teardown_deadline=event.now + state.timing.teardown_wait), []
    raise TypeError(f"not a gang event: {event!r}")


# -- start ---------------------------------------------------------------------------


def _on_started(state: GangState, ev: Started) -> GangState:
    name = ev.worker
    started_at = {**state.started_at, name: ev.started_at} if ev.started_at else state.started_at
    released_at = {**state.released_at, name: ev.released_at} if ev.released_at else state.released_at
    return replace(
        state,
        started=state.started | {name},
        ready=state.ready | {name},
        started_at=started_at,
        released_at=released_at,
        release_at=ev.release_at or state.release_at,
    )


def _maybe_release(state: GangState, tick: Tick) -> Step:
    """The start barrier: once every worker is ready, release them all at one instant."""
    if state.released or state.tearing_down or len(state.ready) < len(state.workers):
        return state, []
    at = tick.wall + state.timing.release_margin
    state = replace(state, released_mono=tick.now, ready_elapsed=tick.now - state.started_mono, release_at=at)
    return state, [Release(at)]


def _on_released(state: GangState, ev: Released) -> Step:
    if ev.failed:
        return _teardown(state, f"release failed on {', '.join(ev.failed)}", failed=True)
    n = len(state.workers)
    return state, [Report(f"{n}/{n} ready after {state.ready_elapsed or 0.0:.1f}s; released")]


def _start_timeout(state: GangState, tick: Tick) -> Step:
    if state.released or state.tearing_down or tick.now - state.started_mono <= state.timing.start_timeout:
        return state, []
    missing = [w for w in state.workers if w not in state.ready]
    n, limit = len(state.workers), state.timing.start_timeout
    message = (
        f"{len(state.ready)}/{n} workers ready after {limit:g}s; not ready: {', '.join(missing)} "
        f"(log: {state.run_dirs.get(missing[0], '?')}/output.log on {missing[0]})"
    )
    state = replace(state, status="failed", message=message)
    return _teardown(state, f"start timeout: {', '.join(missing)} not ready", failed=True)


def _run_timeout(state: GangState, tick: Tick) -> Step:
    limit = state.run_timeout
    if limit is None or state.released_mono is None or state.tearing_down:
        return state, []
    if tick.now - state.released_mono <= limit:
        return state, []
    message = f"the run exceeded its timeout of {limit:g}s"
    state = replace(state, status="timed-out", message=message, failure_seen_at=tick.wall)
    return _teardown(state, f"timeout of {limit:g}s", failed=False)


# -- ends ------------------------------------------------------------------------------


def end_from_report(worker: str, process_id: int, report: Mapping[str, Any]) -> WorkerEnd:
    """A WorkerEnd from a worker's exit report (the tail is filled in by whoever holds the output)."""
    return WorkerEnd(
        worker=worker,
        process_id=process_id,
        exit_code=report.get("exit_code"),
        signal=report.get("signal"),
        signal_name=report.get("signal_name"),
        reason=report.get("reason", ""),
        stopped=bool(report.get("stopped")),
        lost=bool(report.get("lost")),
        ended_at=report.get("ended_at"),
        tail=report.get("tail") or "",
        lines=dict(report["lines"]) if isinstance(report.get("lines"), Mapping) else None,
    )


def _on_exit(state: GangState, ev: Exited) -> Step:
    end = end_from_report(ev.worker, state.process_ids[ev.worker], ev.report)
    state = replace(state, ends={**state.ends, ev.worker: end})
    if state.tearing_down or state.failure_seen_at is not None:
        return state, []
    if end.failed and not end.stopped:
        state = replace(state, failure_seen_at=ev.wall)
        first = Report(f"{ev.worker} (process {end.process_id}) ended first: {end.how()}")
        state, decisions = _teardown(state, f"{ev.worker} failed ({end.how()})", failed=True, worker=ev.worker)
        return state, [first, *decisions]
    if end.stopped:
        state = replace(state, failure_seen_at=ev.wall)
        if end.reason.startswith("timed out"):  # the supervisor's own timeout
            limit = state.run_timeout or 0.0
            state = replace(state, status="timed-out", message=f"the run exceeded its timeout of {limit:g}s")
        seen = Report(f"{ev.worker} (process {end.process_id}) was ended: {end.reason}")
        state, decisions = _teardown(state, f"{ev.worker}: {end.reason}", failed=False, worker=ev.worker)
        return state, [seen, *decisions]
    return state, []


def _on_closed(state: GangState, ev: StreamClosed) -> Step:
    # The output stream ends on its own channel once the worker's files are drained: it may close
    # before the exit report arrives on the events channel, and says nothing about the worker's fate.
    return replace(state, closed=state.closed | {ev.worker}), []


def _lose(state: GangState, name: str, reason: str, alive_until: float | None, wall: float | None, said: str) -> Step:
    """Declare `name` lost: alive until last heard from, so a lost host is a cause, never a consequence."""
    if name in state.ends:
        return state, []
    end = WorkerEnd(
        worker=name,
        process_id=state.process_ids[name],
        exit_code=None,
        lost=True,
        reason=reason,
        ended_at=alive_until if alive_until is not None else wall,
    )
    state = replace(state, ends={**state.ends, name: end}, lost=state.lost | {name})
    if state.tearing_down:
        return state, [MarkLost(name, reason)]
    state = replace(state, failure_seen_at=wall if wall is not None else state.failure_seen_at)
    lost: list[Decision] = [MarkLost(name, reason), Report(f"{name} {said}")]
    state, decisions = _teardown(state, f"{name} was lost", failed=True, worker=name)
    return state, [*lost, *decisions]


# -- time -----------------------------------------------------------------------------------


def _on_tick(state: GangState, tick: Tick) -> Step:
    decisions: list[Decision] = []
    for check in (_maybe_release, _start_timeout, _run_timeout, _silence):
        state, more = check(state, tick)
        decisions += more
    if state.teardown_deadline is not None and tick.now > state.teardown_deadline:
        state = _unreported_after_teardown(state)
    return state, decisions


def _silence(state: GangState, tick: Tick) -> Step:
    """A worker not heard from for `lost_after` is lost; one that already exited only gives up its stream."""
    limit = state.timing.lost_after
    for name in state.workers:
        if _worker_finished(state, name):
            continue
        heard = tick.last_heard.get(name, state.started_mono)
        if tick.now - heard <= limit:
            continue
        if name in state.ends:
            said = f"{name}: output silent for {limit:g}s after its exit; the live view may miss its tail (orch logs)"
            return replace(state, closed=state.closed | {name}), [Report(said)]
        if state.tearing_down:
            continue  # the teardown's own deadline decides about workers that do not report
        wall = tick.last_heard_wall.get(name)
        reason = f"silent for {limit:g}s"
        state, decisions = _lose(state, name, reason, wall, tick.wall, f"lost: no word for {limit:g}s")
        return state, decisions
    return state, []


def _unreported_after_teardown(state: GangState) -> GangState:
    missing = {
        w: WorkerEnd(
            worker=w,
            process_id=state.process_ids[w],
            exit_code=None,
            lost=True,
            reason="no exit report after teardown",
        )
        for w in state.workers
        if w not in state.ends
    }
    return replace(state, ends={**state.ends, **missing})


# -- interrupts and teardown -----------------------------------------------------------------


def _on_interrupt(state: GangState, ev: Interrupted) -> Step:
    state = replace(state, status="interrupted", message=f"interrupted ({ev.what}) on the controller")
    if state.tearing_down:
        return state, []
    state = replace(state, failure_seen_at=ev.wall)
    return _teardown(state, f"{ev.what} on the controller", failed=False)


def _teardown(state: GangState, reason: str, *, failed: bool, worker: str | None = None) -> Step:
    """Ask for the teardown once; later causes are consequences of the first."""
    if state.tearing_down:
        return state, []
    grace = state.timing.teardown_grace(failed)
    state = replace(state, teardown_reason=reason)
    return state, [
        Report(f"tearing down the gang: {reason} (TERM, KILL after {grace:g}s)"),
        Teardown(reason, grace, worker),
    ]


# -- done ----------------------------------------------------------------------------------------


def _worker_finished(state: GangState, name: str) -> bool:
    """Nothing more will come from this worker: it ended and its stream is drained (or it is lost)."""
    end = state.ends.get(name)
    if name in state.lost:
        return True
    if state.until == "started" and not state.tearing_down:
        return name in state.started and name in state.closed
    if state.until == "started":
        # A detached watch stops at the start: a worker whose watch closed has nothing more to say.
        return name in state.closed and (name in state.started or end is not None)
    return end is not None and name in state.closed


def _all_finished(state: GangState) -> bool:
    return all(_worker_finished(state, w) for w in state.workers)


def _teardown_expired(state: GangState, event: Event) -> bool:
    deadline = state.teardown_deadline
    return isinstance(event, Tick) and deadline is not None and event.now > deadline


def _finish(state: GangState) -> Step:
    return replace(state, finished=True), [Done()]
