"""The scripted transport itself: strict about order, loud about surprises, honest about leftovers."""

from __future__ import annotations

import pytest
from fakes import ScriptedTransport, UnexpectedCall, exits, worker

from orchestrator.transport import Transport


def test_the_fake_is_a_transport():
    fake: Transport = ScriptedTransport([worker(0)])  # mypy checks the protocol (tests/fakes.py too)
    assert set(fake.workers) == {"w0"}


def test_an_unexpected_call_raises_where_it_happens_and_is_reported_by_verify():
    fake = ScriptedTransport([worker(0)])
    fake.expect_run("w0", ["true"])
    with pytest.raises(UnexpectedCall, match=r"w0: run false \(expected run true"):
        fake.run_one("w0", ["false"])
    with pytest.raises(AssertionError, match="unexpected call w0: run false"):
        fake.verify()


def test_an_unexpected_call_swallowed_by_the_code_under_test_still_fails_verify():
    fake = ScriptedTransport([worker(0), worker(1)])
    fake.expect_run("w0", ["true"])
    results = fake.run(["true"])  # w1 was never scripted; map turns the raise into a failed Result
    assert results["w0"].ok and results["w1"].error_kind == "local"
    with pytest.raises(AssertionError, match="unexpected call w1: run true"):
        fake.verify()


def test_expected_calls_that_never_came_fail_verify():
    fake = ScriptedTransport([worker(0)])
    fake.expect_run("w0", ["true"]).expect_run("w0", ["uname"], reply=exits(0, "Linux\n"))
    assert fake.run_one("w0", ["true"]).ok
    with pytest.raises(AssertionError, match="w0: never called: run uname"):
        fake.verify()


def test_calls_on_one_worker_must_come_in_script_order():
    fake = ScriptedTransport([worker(0)])
    fake.expect_run("w0", ["a"]).expect_run("w0", ["b"])
    with pytest.raises(UnexpectedCall):
        fake.run_one("w0", ["b"])


def test_streamed_lines_reach_the_callback_with_their_host_and_stream():
    fake = ScriptedTransport([worker(0)])
    fake.expect_run("w0", ["sh"], reply=exits(0, "one\ntwo\n", "warn\n"))
    seen: list[tuple[str, str, str]] = []
    fake.run_one("w0", ["sh", "-c", "..."], on_line=lambda h, s, line: seen.append((h, s, line)))
    assert seen == [("w0", "stdout", "one"), ("w0", "stdout", "two"), ("w0", "stderr", "warn")]
    fake.verify()
