"""The gang's driver: threads, SSH and the clock around the pure state machine in gang.py.

Two threads per worker, each on an SSH channel of its own: the watch turns the
worker's `@orch` events (heartbeats included) into gang events on a queue, and
the output stream hands the worker's stdout and stderr lines to `on_output` and
`on_stderr`. A slow reader of the output holds up only the output stream (the
worker's files are its buffer), never the events: a worker is not lost because
the controller's terminal is slow, and the gang is done only when every
worker's stream has drained. Lines the live view did not show are counted
against the worker's own counts and reported. The main
thread takes events off the queue, adds a `Tick` with the time, feeds each one
to `gang.step` and carries out the decisions: the release, the teardown, the
operator's progress lines. Interrupts (Ctrl-C, SIGTERM, SIGHUP) become events
too: one that lands while decisions are carried out waits until they are done,
and one that lands during a teardown is dropped (the teardown is what it asks for).
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import orchestrator.launch.gang as gang
from orchestrator.launch.control import LeaseRenewer, OutputFn, ReportFn, quiet, release, reply, stop_workers
from orchestrator.launch.outcome import LaunchOutcome, conclude
from orchestrator.launch.plan import LaunchPlan
from orchestrator.launch.signals import deferred, interruption, never_raising, shielded
from orchestrator.launch.timing import LaunchTiming
from orchestrator.remote import run_hostside
from orchestrator.transport import Result, Transport

WATCH_FOREVER = 10**7  # seconds; the remote `timeout` wrapper needs a number
TAIL_KEEP = 200
POLL = 0.1  # seconds between ticks when no event arrives
RECONNECTS = 2  # a broken watch is resumed this often before the worker counts as lost
BEHIND_EVERY = 10.0  # seconds between reports of how far the live view is behind exited workers


class OutputStreams:
    """What the live view received of each worker's stdout and stderr, and what it is delivering now."""

    def __init__(self, workers: Sequence[str]):
        self.received = {w: {"stdout": 0, "stderr": 0} for w in workers}
        self.writing: dict[str, int] = {w: 0 for w in workers}  # lines being handed to our reader now
        self.uncounted: set[str] = set()  # attached from the end: counts say nothing of what came before
        self.broken: dict[str, str] = {}
        self.said_behind = 0.0
        self.lock = threading.Lock()

    def deliver(self, name: str, stream: str, line: str, write: OutputFn | None) -> None:
        with self.lock:
            self.writing[name] += 1
        try:
            if write:
                write(name, line)
        finally:
            with self.lock:
                self.writing[name] -= 1
                self.received[name][stream] += 1

    def delivering(self) -> list[str]:
        """Workers whose output is waiting on the controller's own reader right now."""
        with self.lock:
            return [w for w, n in self.writing.items() if n]

    def skip(self, name: str) -> tuple[int, int]:
        got = self.received[name]
        return got["stdout"], got["stderr"]

    def shown(self, name: str) -> str:
        got = self.received[name]
        return f"{got['stdout']} (stdout) / {got['stderr']} (stderr)"

    def owed(self, name: str, written: Mapping[str, int]) -> int:
        if name in self.uncounted:
            return 0
        got = self.received[name]
        return sum(max(0, int(written.get(s) or 0) - got[s]) for s in got)

    def missed(self, name: str, written: Mapping[str, int] | None) -> dict[str, int] | None:
        """Lines the worker wrote that the live view did not show, per stream (None: all shown, or unknown)."""
        if not written or name in self.uncounted:
            return None
        got = self.received[name]
        gap = {s: int(written.get(s) or 0) - got[s] for s in got}
        gap = {s: n for s, n in gap.items() if n > 0}
        return gap or None


def monitor(
    plan: LaunchPlan,
    transport: Transport,
    *,
    timing: LaunchTiming | None = None,
    on_output: OutputFn | None = None,
    on_stderr: OutputFn | None = None,
    report: ReportFn = quiet,
    until: str = "exit",
    from_end: bool = False,
    release_needed: bool = True,
    renewer: LeaseRenewer | None = None,
) -> LaunchOutcome:
    """Watch a started run under the gang rule until every worker ended (or, `until="started"`, started).

    The workers' stdout lines go to `on_output`, their stderr lines to `on_stderr` (by default
    `on_output` too); either may block (a slow terminal) without holding up the gang rule. `renewer`:
    the controller lease's renewals when they began before the start (lifecycle.execute); else the
    watch begins them."""
    timing = timing or LaunchTiming()
    driver = Driver(
        plan,
        transport,
        timing,
        on_output=on_output,
        on_stderr=on_stderr,
        report=report,
        until=until,
        released=not release_needed,
        renewer=renewer,
    )
    return driver.run(from_end=from_end)


class Driver:
    """Carries out the gang rule for one run: watch threads in, decisions out."""

    def __init__(
        self,
        plan: LaunchPlan,
        transport: Transport,
        timing: LaunchTiming,
        *,
        on_output: OutputFn | None,
        report: ReportFn,
        until: str,
        released: bool = False,
        on_stderr: OutputFn | None = None,
        renewer: LeaseRenewer | None = None,
    ):
        self.plan = plan
        self.renewer = renewer or LeaseRenewer(plan, transport)
        self.transport = transport
        self.timing = timing
        self.until = until
        self.on_output = never_raising(on_output)
        self.on_stderr = never_raising(on_stderr) or self.on_output
        self.report = never_raising(report) or quiet
        self.events: queue.Queue[gang.Event] = queue.Queue()
        self.tails: dict[str, deque[str]] = {w: deque(maxlen=TAIL_KEEP) for w in plan.workers}
        self.heard = {w: time.monotonic() for w in plan.workers}
        self.heard_wall = {w: time.time() for w in plan.workers}  # a lost worker was alive until then
        self.abandoned: set[str] = set()  # lost workers: their watch is not resumed
        self.stream = OutputStreams(plan.workers)
        self.closing = threading.Event()
        self.teardown: dict[str, Any] | None = None
        self.state = gang.initial(
            tuple(plan.workers),
            {p.worker: p.process_id for p in plan.processes},
            {p.worker: p.run_dir for p in plan.processes},
            timing,
            now=time.monotonic(),
            run_timeout=plan.timeout,
            until=until,
            released=released,
        )

    # -- the loop -----------------------------------------------------------------------

    def run(self, *, from_end: bool) -> LaunchOutcome:
        """Start the watch threads, then feed events until the state machine says done."""
        # The launchers wait for their release only while this controller renews its lease, and an
        # attached run's supervisors keep watching it after the release (a detached run's ignore it).
        if not self.state.released or self.until == "exit":
            self.renewer.start()
        for name in self.plan.workers:
            args = (name, from_end)
            threading.Thread(target=self._watch, args=(name,), daemon=True, name=f"orch-watch-{name}").start()
            if self.until == "exit":
                threading.Thread(target=self._stream, args=args, daemon=True, name=f"orch-output-{name}").start()
        interrupt: KeyboardInterrupt | None = None
        while not self.state.finished:
            try:
                if interrupt is not None:
                    pending, interrupt = interrupt, None
                    self._feed_interrupt(pending)
                    continue
                deferred(self._feed_next)
            except KeyboardInterrupt as exc:
                interrupt = exc
        self.closing.set()
        self.renewer.stop()
        self._report_missed()
        return self._outcome()

    def _feed_next(self) -> None:
        """Feed the next worker event (if one arrives within POLL), then a tick.

        Run deferred: an interrupt waits (at most POLL) until the event taken off the queue and
        every decision it led to are done, so it can neither lose an event nor skip a decision."""
        try:
            event: gang.Event | None = self.events.get(timeout=POLL)
        except queue.Empty:
            event = None
        if event is not None:
            self._feed(event)
        self._feed(self._tick())

    def _feed_interrupt(self, exc: KeyboardInterrupt) -> None:
        event = gang.Interrupted(interruption(exc), time.time())
        deferred(lambda: self._feed(event))

    def _tick(self) -> gang.Tick:
        now, wall = time.monotonic(), time.time()
        heard, heard_wall = dict(self.heard), dict(self.heard_wall)
        for name in self.stream.delivering():
            # Its output waits on our own reader (a paused pipe, a slow terminal): nothing the worker did.
            heard[name], heard_wall[name] = now, wall
        self._say_behind(now)
        return gang.Tick(now, wall, heard, heard_wall)

    def _feed(self, event: gang.Event) -> None:
        self.state, decisions = gang.step(self.state, event)
        for decision in decisions:
            self._carry_out(decision)

    # -- decisions ----------------------------------------------------------------------

    def _carry_out(self, decision: gang.Decision) -> None:
        if isinstance(decision, gang.Report):
            self.report(decision.text)
        elif isinstance(decision, gang.Release):
            results = release(self.plan, self.transport, decision.at)
            if self.until != "exit":
                self.renewer.stop()
            self._feed(gang.Released(tuple(w for w, r in results.items() if not r.ok)))
        elif isinstance(decision, gang.Teardown):
            shielded(lambda: self._tear_down(decision))
            self._feed(gang.TornDown(time.monotonic()))
        elif isinstance(decision, gang.MarkLost):
            self.abandoned.add(decision.worker)

    def _tear_down(self, decision: gang.Teardown) -> None:
        n = len(self.plan.workers)
        self.teardown = stop_workers(self.plan, self.transport, reason=decision.reason, grace=decision.grace)
        problems = [
            f"{w}: "
            + (f"could not be reached ({r['error']})" if r.get("error") else f"processes {r['left']} survived KILL")
            for w, r in self.teardown["workers"].items()
            if r.get("left") or r.get("error")
        ]
        if problems:
            self.report("teardown incomplete: " + "; ".join(problems))
        else:
            self.report(f"every process of the run ended on {n} workers ({self.teardown['elapsed']:.2f}s)")

    # -- the outcome ----------------------------------------------------------------------

    def _outcome(self) -> LaunchOutcome:
        s = self.state
        ends = {
            w: replace(e, tail=e.tail or "\n".join(self.tails[w]), live_missed=self.stream.missed(w, e.lines))
            for w, e in s.ends.items()
        }
        out = LaunchOutcome(
            run_id=self.plan.run_id,
            status=s.status,
            plan=self.plan,
            ends=ends,
            message=s.message,
            ready_elapsed=s.ready_elapsed,
            release_at=s.release_at,
            released_at=dict(s.released_at),
            started_at=dict(s.started_at),
            failure_seen_at=s.failure_seen_at,
            teardown=self.teardown,
        )
        return conclude(out, detached_watch=self.until == "started")

    # -- watch threads ----------------------------------------------------------------------

    def _watch(self, name: str) -> None:
        """Watch one worker's events until its exit; resume a broken watch, or report the worker lost."""
        attempts = 0
        while True:
            got_exit: list[dict[str, Any]] = []
            res = self._watch_once(name, got_exit)
            if got_exit or (res.ok and self.until == "started") or self.closing.is_set():
                break
            attempts += 1
            ended = res.error or f"the SSH channel closed with status {res.exit_code}"
            lost = self._resume_or_lose(name, ended, attempts)
            if lost is not None:
                self.events.put(lost)
                return
        if self.until == "started":
            self.events.put(gang.StreamClosed(name))  # a detached watch streams no output of its own

    def _watch_once(self, name: str, got_exit: list[dict[str, Any]]) -> Result:
        """One watch of a worker's events (its own channel: output back-pressure never delays them)."""
        p = self.plan.process(name)

        def on_line(_host: str, stream: str, line: str) -> None:
            self._heard(name)
            if stream == "stderr" and line.startswith("@orch "):
                self._on_event_line(name, line[6:], got_exit)

        return run_hostside(
            self.transport,
            self.transport.workers[name],
            "launch_watch",
            [p.run_dir, "--stream", "events", "--until", self.until],
            timeout=WATCH_FOREVER,
            on_line=on_line,
        )

    def _heard(self, name: str) -> None:
        self.heard[name] = time.monotonic()
        self.heard_wall[name] = time.time()

    def _stream(self, name: str, from_end: bool) -> None:
        """Stream one worker's stdout and stderr to the end, resuming a broken stream where it broke."""
        attempts = 0
        broken = None
        while not self.closing.is_set():
            res = self._stream_once(name, from_end and attempts == 0)
            if res.ok:
                broken = None
                break
            broken = res.error or f"the SSH channel closed with status {res.exit_code}"
            attempts += 1
            if attempts > RECONNECTS or name in self.abandoned or self.closing.is_set():
                break
            self.report(f"{name}: output stream interrupted ({broken}); resuming after line {self.stream.shown(name)}")
            time.sleep(0.5)  # pacing between reconnects to a worker whose channel just broke
        if broken:
            self.stream.broken[name] = broken
        self.events.put(gang.StreamClosed(name))

    def _stream_once(self, name: str, from_end: bool) -> Result:
        p = self.plan.process(name)
        # Resumed by line counts; a stream attached at the end (counts unknown) resumes at the end again.
        from_end = from_end or name in self.stream.uncounted
        where = ["--offset", "-1"] if from_end else ["--skip", *map(str, self.stream.skip(name))]

        def on_line(_host: str, stream: str, line: str) -> None:
            self._heard(name)
            self.tails[name].append(line)
            write = self.on_stderr if stream == "stderr" else self.on_output
            self.stream.deliver(name, stream, line, write)
            self._heard(name)

        if from_end:
            self.stream.uncounted.add(name)
        return run_hostside(
            self.transport,
            self.transport.workers[name],
            "launch_watch",
            [p.run_dir, "--stream", "output", *where],
            timeout=WATCH_FOREVER,
            on_line=on_line,
        )

    def _say_behind(self, now: float) -> None:
        """Every BEHIND_EVERY seconds while exited workers' output is still on its way: by how much."""
        if now - self.stream.said_behind < BEHIND_EVERY:
            return
        behind = []
        for name, end in self.state.ends.items():
            if name in self.state.closed or name in self.state.lost or not end.lines:
                continue
            owed = self.stream.owed(name, end.lines)
            if owed:
                behind.append(f"{name} {owed} lines")
        if behind:
            self.stream.said_behind = now
            self.report("the live view is behind (output.log on each worker is complete): " + ", ".join(behind))

    def _report_missed(self) -> None:
        for name, end in self.state.ends.items():
            written = end.lines or {}
            missed = self.stream.missed(name, written)
            if not missed:
                continue
            said = ", ".join(f"{n} of {written.get(s)} {s} lines" for s, n in missed.items())
            why = self.stream.broken.get(name) or "its stream ended short"
            self.report(
                f"{name}: the live view missed {said} ({why}); "
                f"the run's output is complete in the log (`orch logs {self.plan.run_id}`)"
            )

    def _on_event_line(self, name: str, text: str, got_exit: list[dict[str, Any]]) -> None:
        try:
            ev = json.loads(text)
        except ValueError:
            return
        if not isinstance(ev, dict):
            return
        event = worker_event(name, ev, time.time())
        if ev.get("event") == "exit":
            got_exit.append(ev)
        if event is not None:
            self.events.put(event)

    def _resume_or_lose(self, name: str, ended: str, attempts: int) -> gang.WatchLost | None:
        """After a broken watch: None when the worker still answers (watch again), else the loss."""
        last_heard = self.heard_wall[name]
        if attempts > RECONNECTS or name in self.abandoned:
            return gang.WatchLost(name, ended, last_heard, time.time())
        time.sleep(0.5)  # pacing between reconnects to a worker whose channel just broke
        worker = self.transport.workers[name]
        probe = run_hostside(
            self.transport, worker, "launch_ctl", ["status", self.plan.process(name).run_dir], timeout=15
        )
        if reply(probe) is None:
            reason = f"{ended}, and the worker does not answer: {probe.describe()}"
            return gang.WatchLost(name, reason, last_heard, time.time())
        self.report(f"{name}: watch interrupted ({ended}); reconnected")
        return None


def worker_event(name: str, ev: dict[str, Any], wall: float) -> gang.Event | None:
    """The gang event for one `@orch` event line of a worker's watch (None for heartbeats and the like)."""
    kind = ev.get("event")
    if kind == "ready":
        return gang.Ready(name)
    if kind == "started":
        return gang.Started(name, ev.get("started_at"), ev.get("released_at"), ev.get("release_at"))
    if kind == "exit":
        return gang.Exited(name, ev, wall)
    return None
