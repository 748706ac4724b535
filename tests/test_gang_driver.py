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

from orchestrator.launch.driver import monitor
from orchestrator.launch.plan import LaunchPlan, ProcessPlan, Target
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
    calls: list[tuple[str, str]] = field(default_factory=list)
    memo: dict[str, Any] = field(default_factory=lambda: {"hostside-ready": set(WORKERS)})

    @property
    def workers(self) -> dict[str, FakeWorker]:
        return {w: FakeWorker(w) for w in WORKERS}

    def map(self, fn, hosts=None) -> dict[str, Result]:
        return {w: fn(self.workers[w]) for w in (hosts or WORKERS)}

    def run_one(self, name, argv, *, env=None, timeout=None, stdin=None, on_line=None) -> Result:
        job, verb = argv[2], argv[3]
        self.calls.append((name, f"{job} {verb}" if job == "hostside.launch_ctl" else job))
        if job == "hostside.launch_watch":
            return self._watch(name, on_line)
        if job == "hostside.launch_ctl" and verb == "release":
            self.released.set()
            return self._doc(name, {"ok": True})
        if job == "hostside.launch_ctl" and verb == "renew":  # the controller lease, until the release
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
        # The exit report comes first (stderr overtakes the stdout backlog), the output after it.
        event("exit", exit_code=self.exit_codes[name], ended_at=2.0, tail="")
        for i in range(LINES):
            on_line(name, "stdout", f"line {i}")
        return Result(host=name, argv=("launch_watch",), exit_code=0)

    def _doc(self, name: str, doc: dict[str, Any]) -> Result:
        return Result(host=name, argv=("launch_ctl",), exit_code=0, stdout=json.dumps({"schema_version": 1, **doc}))


def plan() -> LaunchPlan:
    procs = tuple(
        ProcessPlan(process_id=i, worker=w, index=i, address=f"10.0.0.{i}", python="py", run_dir=f"/r/{w}", env={})
        for i, w in enumerate(WORKERS)
    )
    return LaunchPlan(
        run_id="r",
        name=None,
        lane="cpu",
        slice="s",
        bundle="b",
        platform="cpu",
        profile=None,
        distributions=(),
        frontends=(),
        contract=(),
        target=Target("script", "t.py", None, ()),
        workdir=None,
        coordinator_address="10.0.0.0",
        coordinator_port=20000,
        master_port=20001,
        port_given=False,
        timeout=None,
        forbid=(),
        cache={},
        processes=procs,
    )


def watch(transport: ScriptedTransport) -> tuple[Any, dict[str, list[str]], list[str]]:
    lines: dict[str, list[str]] = {w: [] for w in WORKERS}
    reports: list[str] = []
    outcome = monitor(
        plan(),
        transport,  # type: ignore[arg-type]
        timing=LaunchTiming(start_timeout=30, lost_after=30),
        on_output=lambda w, line: lines[w].append(line),
        report=reports.append,
    )
    return outcome, lines, reports


def test_the_gang_ends_only_after_every_line_of_output_arrived():
    outcome, lines, _ = watch(ScriptedTransport(exit_codes={"w0": 0, "w1": 0}))
    assert outcome.status == "succeeded"
    assert {w: len(got) for w, got in lines.items()} == {w: LINES for w in WORKERS}
    assert all(got[-1] == f"line {LINES - 1}" for got in lines.values())


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
