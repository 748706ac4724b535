"""`orch diagnose RUN`: which worker failed first, which layer owns it, and who only followed.

A gathered run directory (`runs/<run-id>/`, see orchestrator/runs.py and
orchestrator/receipts.py) holds one directory per worker with the copies
`orch gather` made: `output.log` (the process's output), `exit.json` (the
supervisor's exit status: code, signal, reason, whether orch stopped it, when)
and `record.json` (the receipt, whose `exit` completes `exit.json`).

Every worker's log is classified on its own (`verdict`). In a gang, one
failure usually brings the others down: their logs show a lost peer (heartbeat
timeouts, a closed gloo pair, a collective that timed out) or they were torn
down by orch. Those lines are marked `consequence` in the signature table; a
worker whose only confident findings are consequences, or that was stopped, is
a *follower*. The *first failure* is the failed worker with a cause of its own
(a non-consequence finding, or a crash without one) that ended first; the run's
layer is that worker's. When every failed worker only followed, the earliest
one to end is named, with its layer as it stands.

Reads files only; no transport, no writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.diagnose import CONFIDENT_PRIORITY, UNKNOWN, Finding, Verdict, classify, verdict, winner
from orchestrator.errors import OrchError

LOG_FILE = "output.log"
EXIT_FILE = "exit.json"
RECEIPT_FILE = "record.json"
MAX_LOG_BYTES = 64 << 20  # read at most the last 64 MiB of a worker's log
SIGTERM = 15


@dataclass(frozen=True)
class WorkerDiagnosis:
    """One worker of a run: how it ended and what its log says."""

    worker: str
    status: str  # ok | failed | running | missing
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    stopped: bool = False  # torn down by orch (stop, SIGTERM, timeout), not a failure of its own
    ended_at: float | None = None
    verdict: Verdict | None = None  # None when no log was gathered
    cause: Finding | None = None  # its own (non-consequence) confident finding, if any
    followed: bool = False  # its log shows a lost peer (a consequence line), or orch stopped it
    role: str = "ok"  # first-failure | follower | failed | ok | running | missing
    because_of: str | None = None  # for a follower: the worker that failed first

    @property
    def layer(self) -> str | None:
        """The layer its own evidence names (None when it has no log)."""
        if self.cause is not None:
            return self.cause.layer
        return self.verdict.layer if self.verdict is not None else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields, with the deciding line (`cause`, else the verdict's finding)."""
        finding = self.cause or (self.verdict.finding if self.verdict is not None else None)
        return {
            "worker": self.worker,
            "status": self.status,
            "role": self.role,
            "because_of": self.because_of,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "reason": self.reason,
            "stopped": self.stopped,
            "ended_at": self.ended_at,
            "layer": self.layer,
            "candidates": list(self.verdict.candidates) if self.verdict is not None else [],
            "finding": finding.to_dict() if finding is not None else None,
        }


@dataclass(frozen=True)
class RunDiagnosis:
    """A whole run: every worker, the first failure and the layer that owns the run's failure."""

    run_id: str
    dir: str
    workers: tuple[WorkerDiagnosis, ...]
    first_failure: str | None = None
    layer: str | None = None  # None when nothing failed; UNKNOWN when the first failure is unrecognised
    finding: Finding | None = None
    candidates: tuple[str, ...] = field(default=())

    @property
    def failed(self) -> list[str]:
        """The workers that failed (first failure and followers included)."""
        return [w.worker for w in self.workers if w.status == "failed"]

    @property
    def followers(self) -> list[str]:
        """The workers that failed only because another one did."""
        return [w.worker for w in self.workers if w.role == "follower"]

    def to_dict(self) -> dict[str, Any]:
        """One JSON document for scripts."""
        return {
            "schema_version": 1,
            "run_id": self.run_id,
            "dir": self.dir,
            "first_failure": self.first_failure,
            "layer": self.layer,
            "finding": self.finding.to_dict() if self.finding is not None else None,
            "candidates": list(self.candidates),
            "failed": self.failed,
            "followers": self.followers,
            "workers": [w.to_dict() for w in self.workers],
        }


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _read_log(path: Path) -> str | None:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - MAX_LOG_BYTES))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return None


def run_workers(run_dir: Path) -> list[str]:
    """The run's workers in process order: from run.json or plan.json, else the worker directories."""
    for name in ("run.json", "plan.json"):
        doc = _read_json(run_dir / name) or {}
        workers = doc.get("workers")
        if isinstance(workers, list) and workers and all(isinstance(w, str) for w in workers):
            return list(workers)
    return sorted(
        p.name
        for p in run_dir.iterdir()
        if p.is_dir() and any((p / f).exists() for f in (LOG_FILE, EXIT_FILE, RECEIPT_FILE))
    )


def _own_cause(findings: list[Finding]) -> Finding | None:
    """The winning confident finding that is not a consequence of another worker's failure."""
    return winner([f for f in findings if f.priority >= CONFIDENT_PRIORITY and not f.consequence])


def diagnose_worker(run_dir: Path, worker: str) -> WorkerDiagnosis:
    """One worker's ending and log, before the run-wide roles are assigned."""
    wdir = run_dir / worker
    text = _read_log(wdir / LOG_FILE)
    exit_doc = _read_json(wdir / EXIT_FILE) or {}
    receipt_exit = (_read_json(wdir / RECEIPT_FILE) or {}).get("exit")
    if not isinstance(receipt_exit, dict):  # a receipt of the wrong shape says nothing about the exit
        receipt_exit = {}
    if not exit_doc and not receipt_exit and text is None:
        return WorkerDiagnosis(worker=worker, status="missing", role="missing")
    code = exit_doc.get("exit_code", receipt_exit.get("code"))
    sig = exit_doc.get("signal", receipt_exit.get("signal"))
    reason = exit_doc.get("reason") or receipt_exit.get("reason")
    ended = exit_doc.get("ended_at", receipt_exit.get("ended_at"))
    stopped = bool(exit_doc.get("stopped")) or str(reason or "").startswith("stopped") or sig == SIGTERM
    findings = classify(text) if text is not None else []
    followed = stopped or any(f.consequence for f in findings)
    v = verdict(text) if text is not None else None
    cause = _own_cause(findings)
    ended_known = bool(exit_doc or receipt_exit)
    if ended_known and code == 0 and not sig:
        status = "ok"
    elif ended_known:
        status = "failed"
    elif v is not None and v.known and v.finding is not None:
        status = "failed"  # no exit status gathered, but a line of the log shows a failure
    else:
        status = "running"
    return WorkerDiagnosis(
        worker=worker,
        status=status,
        exit_code=code if isinstance(code, int) else None,
        signal=sig if isinstance(sig, int) else None,
        reason=reason if isinstance(reason, str) else None,
        stopped=stopped,
        ended_at=float(ended) if isinstance(ended, (int, float)) else None,
        verdict=v,
        cause=cause,
        followed=followed,
        role=status,
    )


def _with_role(w: WorkerDiagnosis, role: str, because_of: str | None = None) -> WorkerDiagnosis:
    return WorkerDiagnosis(**{**w.__dict__, "role": role, "because_of": because_of})


def diagnose_run(run_dir: Path) -> RunDiagnosis:
    """Diagnose a gathered run directory (every worker's log and exit status)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise OrchError(f"{run_dir} is not a run directory")
    names = run_workers(run_dir)
    workers = [diagnose_worker(run_dir, name) for name in names]
    if not any(w.status != "missing" for w in workers):
        raise OrchError(
            f"no gathered worker logs in {run_dir}",
            hint="`orch gather RUN` copies every worker's log and exit status into the run's record",
        )
    failed = [w for w in workers if w.status == "failed"]
    order = {w.worker: i for i, w in enumerate(workers)}

    def first_ended(ws: list[WorkerDiagnosis]) -> WorkerDiagnosis:
        return min(ws, key=lambda w: (w.ended_at is None, w.ended_at or 0.0, order[w.worker]))

    # A cause of its own: a non-consequence finding, or a crash that shows no lost peer and no stop.
    causes = [w for w in failed if w.cause is not None or not w.followed]
    first = first_ended(causes) if causes else (first_ended(failed) if failed else None)
    out: list[WorkerDiagnosis] = []
    for w in workers:
        if first is not None and w.worker == first.worker:
            out.append(_with_role(w, "first-failure"))
        elif first is not None and w.status == "failed" and w.cause is None and w.followed:
            out.append(_with_role(w, "follower", first.worker))
        else:
            out.append(w)
    if first is None:
        return RunDiagnosis(run_id=run_dir.name, dir=str(run_dir), workers=tuple(out))
    layer: str = UNKNOWN
    finding: Finding | None = None
    cands: tuple[str, ...] = ()
    if first.cause is not None:
        layer, finding = first.cause.layer, first.cause
    elif first.verdict is not None:
        layer, finding, cands = first.verdict.layer, first.verdict.finding, first.verdict.candidates
    return RunDiagnosis(
        run_id=run_dir.name,
        dir=str(run_dir),
        workers=tuple(out),
        first_failure=first.worker,
        layer=layer,
        finding=finding,
        candidates=cands,
    )
