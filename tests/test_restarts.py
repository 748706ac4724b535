"""Which failures restart a gang, decided from the run's own evidence (pure)."""

from __future__ import annotations

import pytest

from orchestrator.errors import LaunchError
from orchestrator.launch.outcome import LaunchOutcome, WorkerEnd
from orchestrator.launch.restarts import (
    DEFAULT_RESTART_ON,
    RestartPolicy,
    attempt_env,
    attempt_run_id,
    cause_of,
    decide,
    parse_restart_on,
)

POLICY = RestartPolicy(max_restarts=2)


def outcome(status="failed", first=None, diagnosis=None, message=""):
    return LaunchOutcome(
        run_id="r",
        status=status,
        plan=None,
        first_failure=first,
        diagnosis=diagnosis,
        message=message,  # type: ignore[arg-type]
    )


LOST = WorkerEnd("s-w1", 1, None, lost=True, reason="no word for 30s")
EXIT3 = WorkerEnd("s-w0", 0, 3)


@pytest.mark.parametrize(
    ("o", "layer", "restart"),
    [
        (outcome(first=LOST), "transport", True),
        (
            outcome(first=EXIT3, diagnosis={"layer": "collective", "line": "DEADLINE_EXCEEDED: barrier"}),
            "collective",
            True,
        ),
        (outcome(first=EXIT3, diagnosis={"layer": "device-ownership", "line": "TPU in use"}), "device-ownership", True),
        (outcome(first=EXIT3, diagnosis={"layer": "bundle-skew", "line": "version mismatch"}), "bundle-skew", False),
        (outcome(first=EXIT3), "user-code", False),
        (outcome(status="timed-out", message="reached --timeout 60s"), "timeout", False),
        (outcome(status="interrupted"), "interrupted", False),
    ],
)
def test_only_layers_a_restart_can_fix_are_restarted_by_default(o, layer, restart):
    cause = decide(o, POLICY, attempt=1)
    assert (cause.layer, cause.restart) == (layer, restart)


def test_a_user_failure_restarts_when_asked_and_ctrl_c_never_does_unless_named():
    asked = RestartPolicy(2, parse_restart_on(["user-code"]))
    assert decide(outcome(first=EXIT3), asked, 1).restart
    assert decide(outcome(status="interrupted"), asked, 1).why == "Ctrl-C stops retrying"


def test_restarts_stop_when_used_up_and_say_so():
    assert decide(outcome(first=LOST), POLICY, attempt=2).restart
    last = decide(outcome(first=LOST), POLICY, attempt=3)
    assert not last.restart and last.why == "--max-restarts 2 used up"


def test_the_cause_names_the_worker_and_its_evidence():
    assert cause_of(outcome(first=LOST)) == ("transport", "s-w1 lost: no word for 30s")
    assert cause_of(outcome(first=EXIT3)) == ("user-code", "s-w0: exit code 3")


def test_restart_on_takes_comma_lists_and_refuses_unknown_layers():
    assert parse_restart_on([]) == DEFAULT_RESTART_ON
    assert parse_restart_on(["transport,collective", "user-code"]) == ("transport", "collective", "user-code")
    with pytest.raises(LaunchError, match="--restart-on 'transprt'"):
        parse_restart_on(["transprt"])


def test_attempts_keep_the_run_id_and_tell_the_program_which_attempt_it_is():
    assert attempt_run_id("train-1", 1) == "train-1" and attempt_run_id("train-1", 3) == "train-1.a3"
    previous = decide(outcome(first=LOST), POLICY, 1)
    assert attempt_env(1, None) == {"ORCH_RESTART_ATTEMPT": "0"}
    assert attempt_env(2, previous) == {
        "ORCH_RESTART_ATTEMPT": "1",
        "ORCH_RESTART_PREVIOUS": "transport: s-w1 lost: no word for 30s",
    }
