"""The gang rule as a pure state machine, driven from tables of events: no threads, no SSH, no clock."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from orchestrator.launch import gang
from orchestrator.launch.gang import (
    Done,
    Exited,
    Interrupted,
    MarkLost,
    Ready,
    Release,
    Released,
    Report,
    Started,
    StreamClosed,
    Teardown,
    Tick,
    TornDown,
    WatchLost,
)
from orchestrator.launch.timing import LaunchTiming

WORKERS = ("w0", "w1", "w2")
TIMING = LaunchTiming(grace=5.0, failure_grace=1.0, start_timeout=60.0, lost_after=30.0, teardown_wait=10.0)
T0 = 1000.0  # monotonic instant the watch began
WALL = 1.7e9  # epoch at T0


def tick(at: float) -> Tick:
    """`at` seconds after the watch began; every worker heard from just now."""
    heard = {w: T0 + at for w in WORKERS}
    return Tick(T0 + at, WALL + at, heard, {w: WALL + at for w in WORKERS})


def silent(at: float, worker: str, since: float) -> Tick:
    """`at` seconds in; `worker` last heard from at `since`, the others just now."""
    heard = {w: T0 + (since if w == worker else at) for w in WORKERS}
    return Tick(T0 + at, WALL + at, heard, {w: WALL + (since if w == worker else at) for w in WORKERS})


def exit_(worker: str, code: int | None = 0, at: float = 5.0, **report: object) -> Exited:
    return Exited(worker, {"exit_code": code, "ended_at": WALL + at, **report}, WALL + at)


def all_ready() -> list[gang.Event]:
    return [Ready(w) for w in WORKERS]


def all_started(at: float = 1.0) -> list[gang.Event]:
    return [Started(w, WALL + at, WALL + at, WALL + at) for w in WORKERS]


def all_exit_0(at: float = 5.0) -> list[gang.Event]:
    return [exit_(w, 0, at) for w in WORKERS]


def all_closed() -> list[gang.Event]:
    return [StreamClosed(w) for w in WORKERS]


def fresh(until: str = "exit", run_timeout: float | None = None) -> gang.GangState:
    return gang.initial(
        WORKERS,
        {w: i for i, w in enumerate(WORKERS)},
        {w: f"/var/lib/orch/runs/r/{w}" for w in WORKERS},
        TIMING,
        now=T0,
        run_timeout=run_timeout,
        until=until,
    )


def run(events: list[gang.Event], state: gang.GangState | None = None) -> tuple[gang.GangState, list[gang.Decision]]:
    """Feed every event; the last state and every decision, in order."""
    state = state or fresh()
    decisions: list[gang.Decision] = []
    for event in events:
        state, more = gang.step(state, event)
        decisions += more
    return state, decisions


def kinds(decisions: list[gang.Decision]) -> list[str]:
    """The decisions without the progress lines."""
    return [type(d).__name__ for d in decisions if not isinstance(d, Report)]


@dataclass(frozen=True)
class Case:
    name: str
    events: list[gang.Event]
    decisions: list[str]  # kinds, Report lines left out
    status: str  # the state's status when the table ends
    finished: bool
    teardown_by: str | None = None  # the worker a Teardown names
    lost: tuple[str, ...] = ()


CASES = [
    Case(
        "all ready, released, all exit 0 and drained: done",
        [*all_ready(), tick(1), Released(), *all_started(), *all_exit_0(), *all_closed()],
        ["Release", "Done"],
        "running",
        True,
    ),
    Case(
        "not released before every worker is ready",
        [Ready("w0"), Ready("w1"), tick(1), tick(2)],
        [],
        "running",
        False,
    ),
    Case(
        "one fails before the release: teardown named after it, no release",
        [Ready("w0"), exit_("w1", 3, at=0.5), tick(1), Ready("w2"), tick(2)],
        ["Teardown"],
        "running",
        False,
        teardown_by="w1",
    ),
    Case(
        "one fails after the release: one teardown, done once the rest report and drain",
        [
            *all_ready(),
            tick(1),
            Released(),
            *all_started(),
            exit_("w2", 3, at=4),
            TornDown(T0 + 5),
            exit_("w0", None, at=5, stopped=True, signal=15),
            exit_("w1", None, at=5, stopped=True, signal=15),
            *all_closed(),
        ],
        ["Release", "Teardown", "Done"],
        "running",
        True,
        teardown_by="w2",
    ),
    Case(
        "one goes silent: marked lost, the gang torn down",
        [*all_ready(), tick(1), Released(), *all_started(), tick(20), silent(40, "w1", since=5)],
        ["Release", "MarkLost", "Teardown"],
        "running",
        False,
        teardown_by="w1",
        lost=("w1",),
    ),
    Case(
        "a broken watch of a worker that does not answer: lost",
        [*all_ready(), tick(1), Released(), WatchLost("w0", "the SSH channel closed", WALL + 2, WALL + 3)],
        ["Release", "MarkLost", "Teardown"],
        "running",
        False,
        teardown_by="w0",
        lost=("w0",),
    ),
    Case(
        "Ctrl-C: teardown with the full grace, interrupted",
        [*all_ready(), tick(1), Released(), *all_started(), Interrupted("Ctrl-C", WALL + 3)],
        ["Release", "Teardown"],
        "interrupted",
        False,
    ),
    Case(
        "a second interrupt during the teardown asks for nothing more",
        [*all_ready(), tick(1), Released(), Interrupted("Ctrl-C", WALL + 3), Interrupted("SIGTERM", WALL + 4)],
        ["Release", "Teardown"],
        "interrupted",
        False,
    ),
    Case(
        "start timeout: not every worker ready in time",
        [Ready("w0"), Ready("w2"), tick(30), tick(61)],
        ["Teardown"],
        "failed",
        False,
    ),
    Case(
        "run timeout: counted from the release",
        [*all_ready(), tick(1), Released(), tick(20), tick(22)],
        ["Release", "Teardown"],
        "timed-out",
        False,
    ),
    Case(
        "a late start after the stop is never released",
        [Ready("w0"), Interrupted("Ctrl-C", WALL + 1), TornDown(T0 + 2), Ready("w1"), Ready("w2"), tick(3)],
        ["Teardown"],
        "interrupted",
        False,
    ),
    Case(
        "a stop seen before the start (another controller's `orch stop`): teardown, nobody released",
        [Ready("w0"), exit_("w1", None, at=1, stopped=True, reason="stopped by orch (orch stop)"), tick(2)],
        ["Teardown"],
        "running",
        False,
        teardown_by="w1",
    ),
    Case(
        "output not drained after the exits: not done yet",
        [*all_ready(), tick(1), Released(), *all_started(), *all_exit_0(), StreamClosed("w0"), tick(6)],
        ["Release"],
        "running",
        False,
    ),
    Case(
        "after the teardown, workers that never report are lost once the wait is over",
        [Ready("w0"), Interrupted("Ctrl-C", WALL + 1), TornDown(T0 + 2), tick(5), tick(12.5)],
        ["Teardown", "Done"],
        "interrupted",
        True,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_gang_rule(case: Case):
    state = fresh(run_timeout=20.0 if "run timeout" in case.name else None)
    state, decisions = run(case.events, state)
    assert kinds(decisions) == case.decisions
    assert state.status == case.status
    assert state.finished is case.finished
    teardowns = [d for d in decisions if isinstance(d, Teardown)]
    assert len(teardowns) <= 1, "a gang is torn down once"
    if case.teardown_by:
        assert teardowns[0].worker == case.teardown_by
    assert sorted(w for w, e in state.ends.items() if e.lost and "after teardown" not in e.reason) == list(case.lost)


def test_release_happens_at_one_instant_a_margin_after_the_last_ready():
    _, decisions = run([*all_ready(), tick(2)])
    (release,) = [d for d in decisions if isinstance(d, Release)]
    assert release.at == WALL + 2 + TIMING.release_margin


def test_a_failed_release_tears_the_gang_down():
    state, decisions = run([*all_ready(), tick(1), Released(failed=("w1",))])
    (teardown,) = [d for d in decisions if isinstance(d, Teardown)]
    assert teardown.reason == "release failed on w1"
    assert state.tearing_down


def test_a_failure_gets_the_short_grace_an_interrupt_the_full_one():
    _, failed = run([*all_ready(), tick(1), Released(), exit_("w0", 1)])
    _, interrupted = run([*all_ready(), tick(1), Released(), Interrupted("SIGTERM", WALL + 2)])
    assert [d.grace for d in failed if isinstance(d, Teardown)] == [TIMING.failure_grace]
    assert [d.grace for d in interrupted if isinstance(d, Teardown)] == [TIMING.grace]
    assert any(isinstance(d, Report) and "SIGTERM on the controller" in d.text for d in interrupted)


def test_done_waits_for_the_output_stream_not_for_the_exit_report():
    """An exit report can overtake the output backlog: the gang is done only when the stream closed."""
    state, _ = run([*all_ready(), tick(1), Released(), *all_started(), *all_exit_0(), tick(6)])
    assert not state.finished
    state, decisions = run([StreamClosed("w0"), StreamClosed("w1"), tick(7)], state)
    assert not state.finished and decisions == []
    state, decisions = run([StreamClosed("w2")], state)
    assert state.finished and decisions == [Done()]


def test_an_exited_worker_whose_stream_stays_silent_is_given_up_not_lost():
    state, _ = run([*all_ready(), tick(1), Released(), *all_started(), *all_exit_0(), *all_closed()[:2]])
    state, decisions = run([silent(40, "w2", since=5)], state)
    assert state.finished
    assert not any(isinstance(d, (Teardown, MarkLost)) for d in decisions)
    assert not state.ends["w2"].lost


def test_a_lost_worker_is_not_waited_for_and_counts_from_when_it_was_last_heard():
    events = [*all_ready(), tick(1), Released(), *all_started(), silent(40, "w1", since=5)]
    state, _ = run(events)
    assert state.ends["w1"].lost and state.ends["w1"].ended_at == WALL + 5
    state, decisions = run([TornDown(T0 + 41), *(exit_(w, None, 41, stopped=True) for w in ("w0", "w2"))], state)
    state, decisions = run([StreamClosed("w0"), StreamClosed("w2")], state)
    assert state.finished  # w1's stream never closed


def test_a_detached_watch_is_done_once_every_worker_started_and_its_watch_closed():
    state = fresh(until="started")
    state, _ = run([*all_ready(), tick(1), Released(), *all_started()], state)
    assert not state.finished
    state, decisions = run(all_closed(), state)
    assert state.finished and kinds(decisions) == ["Done"]
    assert state.ends == {}


def test_an_output_stream_that_drains_before_the_exit_report_arrives_waits_for_the_report():
    """Output and events travel on separate channels: either may finish first."""
    state, decisions = run([*all_ready(), tick(1), Released(), *all_started(), *all_closed()])
    assert state.ends == {} and not state.finished
    assert "MarkLost" not in kinds(decisions)
    state, decisions = run(all_exit_0(), state)
    assert state.finished and state.status == "running" and kinds(decisions) == ["Done"]


def test_the_supervisors_own_timeout_is_reported_as_timed_out():
    state, decisions = run(
        [*all_ready(), tick(1), Released(), exit_("w0", None, 20, stopped=True, reason="timed out after 20s")],
        fresh(run_timeout=20.0),
    )
    assert state.status == "timed-out" and state.message == "the run exceeded its timeout of 20s"
    assert [d.grace for d in decisions if isinstance(d, Teardown)] == [TIMING.grace]


def test_nothing_happens_after_done():
    state, _ = run([*all_ready(), tick(1), Released(), *all_exit_0(), *all_closed()])
    assert state.finished
    again, decisions = gang.step(state, Interrupted("Ctrl-C", WALL + 9))
    assert again is state and decisions == []


def test_a_worker_reporting_its_own_supervisor_gone_still_has_its_output_drained():
    """Lost as the worker reports it (its watch still streams) is not lost as declared here."""
    gone = exit_("w1", None, 5, lost=True, reason="the supervisor is gone; exit status unknown")
    state, _ = run([*all_ready(), tick(1), Released(), *all_started(), gone, TornDown(T0 + 6)])
    state, _ = run([exit_("w0", None, 6, stopped=True), exit_("w2", None, 6, stopped=True)], state)
    state, _ = run([StreamClosed("w0"), StreamClosed("w2"), tick(7)], state)
    assert not state.finished
    state, decisions = run([StreamClosed("w1")], state)
    assert state.finished and decisions == [Done()]
