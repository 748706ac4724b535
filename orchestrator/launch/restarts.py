"""Gang restarts by owning layer (pure): which failures a restart can fix, and how attempts are named.

`orch launch --max-restarts N` runs the gang again after a failure only when
the failure's owning layer is one a restart can fix: a worker that was lost
(`transport`: preempted, rebooted, its network gone), a chip held by a crashed
process (`device-ownership`, reclaimed before the next attempt) or a collective
that timed out (`collective`). A bundle skew, a program's own non-zero exit
(`user-code`), a timeout or Ctrl-C never restart unless `--restart-on` names
them. Each attempt is a run of its own (`RUN`, `RUN.a2`, `RUN.a3`, ...) with its
own record, receipts and verdict; the first run's record lists every attempt.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from orchestrator.diagnose_table import LAYERS
from orchestrator.errors import LaunchError
from orchestrator.launch.outcome import LaunchOutcome

DEFAULT_RESTART_ON = ("transport", "device-ownership", "collective")
# Causes beyond the diagnosis layers: a program's own failure, --timeout, Ctrl-C.
EXTRA_CAUSES = ("user-code", "timeout", "interrupted")
CAUSES = (*LAYERS, *EXTRA_CAUSES)
ATTEMPT_ENV = "ORCH_RESTART_ATTEMPT"
PREVIOUS_ENV = "ORCH_RESTART_PREVIOUS"


@dataclass(frozen=True)
class RestartPolicy:
    """--max-restarts, --restart-on, --backoff."""

    max_restarts: int = 0
    restart_on: tuple[str, ...] = DEFAULT_RESTART_ON
    backoff: float = 10.0


@dataclass(frozen=True)
class Cause:
    """Why an attempt failed: its owning layer, in one line, and whether a restart follows."""

    layer: str
    reason: str
    restart: bool
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"layer": self.layer, "reason": self.reason, "restart": self.restart, "why": self.why}


def parse_restart_on(values: Iterable[str]) -> tuple[str, ...]:
    """`--restart-on transport,collective` (repeatable) -> layers, or LaunchError naming the unknown one."""
    out: list[str] = []
    for value in values:
        for item in (v.strip() for v in value.split(",")):
            if not item:
                continue
            if item not in CAUSES:
                raise LaunchError(f"--restart-on {item!r}: expected one of {', '.join(CAUSES)}")
            out.append(item)
    return tuple(dict.fromkeys(out)) or DEFAULT_RESTART_ON


def cause_of(outcome: LaunchOutcome) -> tuple[str, str]:
    """(owning layer, one line) of a failed attempt, from the run's own evidence."""
    if outcome.status == "interrupted":
        return "interrupted", "stopped by the operator"
    if outcome.status == "timed-out":
        return "timeout", outcome.message or "the run reached --timeout"
    first = outcome.first_failure
    if first is not None and first.lost:
        return "transport", f"{first.worker} lost: {first.reason}"
    if outcome.diagnosis and outcome.diagnosis.get("layer") in LAYERS:
        line = str(outcome.diagnosis.get("line") or "").strip()
        where = f"{first.worker}: " if first else ""
        return str(outcome.diagnosis["layer"]), f"{where}{line}"[:300]
    if first is not None:
        return "user-code", f"{first.worker}: {first.how()}"
    return "other", outcome.message or outcome.status


def decide(outcome: LaunchOutcome, policy: RestartPolicy, attempt: int) -> Cause:
    """Whether failed attempt `attempt` (1-based) is followed by another, and why (or why not)."""
    layer, reason = cause_of(outcome)
    if layer == "interrupted" and "interrupted" not in policy.restart_on:
        return Cause(layer, reason, False, "Ctrl-C stops retrying")
    if layer not in policy.restart_on:
        listed = ", ".join(policy.restart_on)
        return Cause(layer, reason, False, f"a {layer} failure is not restarted (--restart-on: {listed})")
    if attempt > policy.max_restarts:
        return Cause(layer, reason, False, f"--max-restarts {policy.max_restarts} used up")
    return Cause(layer, reason, True, f"{layer} is restartable; attempt {attempt + 1} of {policy.max_restarts + 1}")


def attempt_run_id(run_id: str, attempt: int) -> str:
    """The run id of attempt `attempt` (1-based): the first keeps the run's own id."""
    return run_id if attempt == 1 else f"{run_id}.a{attempt}"


def attempt_env(attempt: int, previous: Cause | None) -> dict[str, str]:
    """What the program sees of its attempt: 0 on the first, and the previous attempt's cause after."""
    env = {ATTEMPT_ENV: str(attempt - 1)}
    if previous is not None:
        env[PREVIOUS_ENV] = f"{previous.layer}: {previous.reason}"[:500]
    return env
