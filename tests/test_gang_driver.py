"""The gang driver against a scripted transport: what it carries out and what it prints.

A fake for logic only (the slice tests in test_launch_slice.py prove the driver on real sshd):
each worker's watch is a script of `@orch` events and output lines, played in the watch thread
the way the real transport plays a remote command's streams.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from fakes import launch_plan

from orchestrator.launch.driver import monitor
from orchestrator.launch.plan import LaunchPlan
from orchestrator.launch.timing import LaunchTiming
from orchestrator.transport import Result

WORKERS = ("w0", "w1")
LINES = 2000  # the output backlog each worker still has when its exit report arrives


@dataclass(frozen=True)
class FakeWorker:
    name: str
    root: str = "/r"
    python: str = "python3"


@dataclass
class ScriptedTransport:
    """Plays launch_watch and answers launch_ctl; unknown commands fail the test."""

    exit_codes: dict[str, int]
    released: threading.Event = field(default_factory=threading.Event)
    exited: dict[str, threading.Event] = field(default_factory=lambda: {w: threading.Event() for w in WORKERS})
    shown: int = LINES  # lines the output stream delivers (of LINES written)
    calls: list[tuple[str, str]] = field(default_factory=list)
    memo: dict[str, Any] = field(default_factory=lambda: {"hostside-ready": set(WORKERS)})

    @property
    def workers(self) -> dict[str, FakeWorker]:
        return {w: FakeWorker(w) for w in WORKERS}

    def map(self, fn, hosts=None) -> dict[str, Result]:
        return {w: fn(self.workers[w]) for w in (hosts or WORKERS)}

    def run_each(self, commands, *, timeout, on_result) -> None:
        for name, argv in commands.items():
            on_result(self.run_one(name, argv, timeout=timeout))

    def run_one(self, name, argv, *, env=None, timeout=None, stdin=None, on_line=None) -> Result:
        if list(argv[:2]) == ["sh", "-c"] and argv[3] == "orch-renew":  # the controller lease, until the release
            self.calls.append((name, "renew"))
            return Result(host=name, argv=tuple(argv), exit_code=0)
        if list(argv[:2]) == ["sh", "-c"] and argv[3] == "orch-release":
            self.calls.append((name, "release"))
            self.released.set()
            return self._doc(name, {"ok": True})
        i = list(argv).index("-m") + 1  # python [interpreter options] -m hostside.JOB ARGS
        job, verb = argv[i], argv[i + 1]
        self.calls.append((name, f"{job} {verb}" if job == "hostside.launch_ctl" else job))
        if job == "hostside.launch_watch" and argv[argv.index("--stream") + 1] == "events":
            return self._watch(name, on_line)
        if job == "hostside.launch_watch" and argv[argv.index("--stream") + 1] == "output":
            return self._output(name, on_line)
        if job == "hostside.launch_ctl" and verb == "release":
            self.released.set()
            return self._doc(name, {"ok": True})
        if job == "hostside.launch_ctl" and verb == "stop":
            return self._doc(name, {"ok": True, "term": [], "kill": [], "left": [], "elapsed": 0.0})
        raise AssertionError(f"unexpected command on {name}: {argv}")

    def _watch(self, name: str, on_line) -> Result:
        def event(kind: str, **data: Any) -> None:
            on_line(name, "stderr", "@orch " + json.dumps({"event": kind, **data}))

        event("ready")
        assert self.released.wait(30), "never released"
        event("started", started_at=1.0, released_at=1.0, release_at=1.0)
        lines = {"stdout": LINES, "stderr": LINES // 10}
        event("exit", exit_code=self.exit_codes[name], ended_at=2.0, tail="", lines=lines)
        self.exited[name].set()
        return Result(host=name, argv=("launch_watch",), exit_code=0)

    def _output(self, name: str, on_line) -> Result:
        # The exit report comes first (events travel apart from the output backlog), the output after it.
        assert self.exited[name].wait(30), "never exited"
        for i in range(self.shown):
            on_line(name, "stdout", f"line {i}")
            if i % 10 == 0:
                on_line(name, "stderr", f"err {i}")
        return Result(host=name, argv=("launch_watch",), exit_code=0)

    def _doc(self, name: str, doc: dict[str, Any]) -> Result:
        return Result(host=name, argv=("launch_ctl",), exit_code=0, stdout=json.dumps({"schema_version": 1, **doc}))


def plan() -> LaunchPlan:
    return launch_plan(WORKERS)


def watch(transport: ScriptedTransport, lost_after: float = 30) -> tuple[Any, dict[str, list[str]], list[str]]:
    lines: dict[str, list[str]] = {w: [] for w in WORKERS}
    errors: dict[str, list[str]] = {w: [] for w in WORKERS}
    reports: list[str] = []
    outcome = monitor(
        plan(),
        transport,  # type: ignore[arg-type]
        timing=LaunchTiming(start_timeout=30, lost_after=lost_after),
        on_output=lambda w, line: lines[w].append(line),
        on_stderr=lambda w, line: errors[w].append(line),
        report=reports.append,
    )
    assert all(line.startswith("err ") for got in errors.values() for line in got)
    return outcome, lines, reports


def test_the_gang_ends_only_after_every_line_of_output_arrived():
    outcome, lines, reports = watch(ScriptedTransport(exit_codes={"w0": 0, "w1": 0}))
    assert outcome.status == "succeeded"
    assert {w: len(got) for w, got in lines.items()} == {w: LINES for w in WORKERS}
    assert all(got[-1] == f"line {LINES - 1}" for got in lines.values())
    assert all(end.live_missed is None for end in outcome.ends.values())
    assert not [r for r in reports if "missed" in r]


def test_lines_the_live_view_did_not_show_are_counted_and_reported_per_worker():
    outcome, _, reports = watch(ScriptedTransport(exit_codes={"w0": 0, "w1": 0}, shown=LINES - 5))
    assert outcome.status == "succeeded"
    assert {w: e.live_missed for w, e in outcome.ends.items()} == {w: {"stdout": 5} for w in WORKERS}
    assert sum("the live view missed 5 of 2000 stdout lines" in r for r in reports) == 2


def test_a_failing_worker_is_named_and_the_gang_torn_down_once():
    transport = ScriptedTransport(exit_codes={"w0": 0, "w1": 3})
    outcome, lines, reports = watch(transport)
    assert outcome.status == "failed"
    assert outcome.message == "w1 (process 1) failed first: exit code 3"
    assert [c for c in transport.calls if c[1] == "hostside.launch_ctl stop"] == [
        ("w0", "hostside.launch_ctl stop"),
        ("w1", "hostside.launch_ctl stop"),
    ]
    assert any(r.startswith("tearing down the gang: w1 failed (exit code 3)") for r in reports)
    assert {w: len(got) for w, got in lines.items()} == {w: LINES for w in WORKERS}


def test_a_reader_that_blocks_longer_than_lost_after_is_not_taken_for_a_silent_worker():
    """The controller's own stdout is stuck (a pipe nobody reads): the output waits on us, not on the
    worker, so the gang neither loses the worker nor gives up its stream."""
    transport = ScriptedTransport(exit_codes={"w0": 0, "w1": 0})
    lines: dict[str, list[str]] = {w: [] for w in WORKERS}
    unblocked = threading.Event()
    reports: list[str] = []

    def stuck_reader(worker: str, line: str) -> None:
        if line == "line 0":
            unblocked.wait(3.0)  # three times --lost-after: the pause is the condition under test
        lines[worker].append(line)

    outcome = monitor(
        plan(),
        transport,  # type: ignore[arg-type]
        timing=LaunchTiming(start_timeout=30, lost_after=1.0),
        on_output=stuck_reader,
        report=reports.append,
    )
    assert outcome.status == "succeeded", reports
    # Without on_stderr, the workers' stderr lines come to on_output too.
    assert {w: len(got) for w, got in lines.items()} == {w: LINES + LINES // 10 for w in WORKERS}
    assert not [r for r in reports if "silent" in r or "lost" in r or "missed" in r]
