"""Runs on the controller: one record per launch, and reading a recorded run's logs.

Every `orch launch` keeps a record under `./runs/<run-id>/` (or
`$ORCH_RUNS_DIR/<run-id>/`):

    plan.json            the plan as executed (after any port change)
    run.json             state, timestamps, the fleet file, the outcome
    workers/<name>.json  each worker's pid file, launcher record and exit status

The workers keep the authoritative files (`<root>/runs/<run-id>/`); this copy
lets `orch runs`, `status`, `logs`, `attach` and `stop` find a run's workers
again, and is where receipts are gathered.

This module is the record store: it imports the launch plan and nothing above
it. Operations that drive a run's workers (status, stop, attach) live in
orchestrator/launch/recorded.py.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hostside import procfs
from hostside.files import write_atomic
from orchestrator.errors import OrchError
from orchestrator.launch.plan import LaunchPlan
from orchestrator.yamlsrc import did_you_mean

if TYPE_CHECKING:
    from orchestrator.transport import Result, Transport

RUNS_ENV = "ORCH_RUNS_DIR"
SCHEMA_VERSION = 1
# The record's states while its controller still works on the run; any other state is final
# (or "detached": the controller left on purpose).
ACTIVE_STATES = frozenset({"planned", "preflight", "starting", "started", "running"})


def runs_root() -> Path:
    """Where run records live: $ORCH_RUNS_DIR, else ./runs."""
    return Path(os.environ.get(RUNS_ENV) or "runs").absolute()


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(doc, indent=2, default=str) + "\n")


@dataclass
class RunRecord:
    """The controller's record of one run."""

    dir: Path

    @property
    def run_id(self) -> str:
        return self.dir.name

    @classmethod
    def create(
        cls, plan: LaunchPlan, fleet_path: str | os.PathLike[str] | None = None, root: Path | None = None
    ) -> RunRecord:
        """A new record for `plan` under `root` (default: runs_root()), with its plan saved."""
        record = cls((root or runs_root()) / plan.run_id)
        record.dir.mkdir(parents=True, exist_ok=True)
        record.save_plan(plan)
        _write_json(
            record.dir / "run.json",
            {
                "schema_version": SCHEMA_VERSION,
                "run_id": plan.run_id,
                "name": plan.name,
                "lane": plan.lane,
                "fleet": str(fleet_path) if fleet_path else None,
                "workers": plan.workers,
                "target": plan.target.shown_argv(),
                "created_at": time.time(),
                "controller": controller_identity(),
                "state": "planned",
            },
        )
        return record

    def save_plan(self, plan: LaunchPlan) -> None:
        """Save the plan as executed (again, after a port change)."""
        _write_json(self.dir / "plan.json", plan.to_dict())

    def plan(self) -> LaunchPlan:
        """The plan as executed (after any port change)."""
        return LaunchPlan.from_dict(json.loads((self.dir / "plan.json").read_text()))

    def info(self) -> dict[str, Any]:
        """The run's run.json (state, timestamps, outcome), or an `unknown` state when unreadable."""
        try:
            doc: dict[str, Any] = json.loads((self.dir / "run.json").read_text())
            return doc
        except (OSError, ValueError):
            return {"run_id": self.run_id, "state": "unknown"}

    def update(self, **fields: Any) -> dict[str, Any]:
        """Merge `fields` into run.json."""
        doc = {**self.info(), **fields, "updated_at": time.time()}
        _write_json(self.dir / "run.json", doc)
        return doc

    def save_workers(self, docs: dict[str, dict[str, Any]]) -> None:
        """Save each worker's pid file, record and exit status."""
        for name, doc in docs.items():
            _write_json(self.dir / "workers" / f"{name}.json", doc)


def controller_identity() -> dict[str, Any]:
    """Who this controller is: hostname (shown only), machine and boot id, pid and its start time."""
    me = procfs.stat(os.getpid())
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "starttime": me["starttime"] if me else None,
        **procfs.host_identity(),
    }


def controller_gone(info: dict[str, Any], here: dict[str, str] | None = None) -> str | None:
    """Why the controller of a run still recorded as active is gone, or None (it is alive, the
    record is final, or it ran on another machine, which this controller cannot see).

    Judged by identity, never by a clock: the same machine and boot with the pid gone (or reused
    by another process), or the same machine under another boot."""
    if info.get("state") not in ACTIVE_STATES:
        return None
    ctl = info.get("controller")
    if not isinstance(ctl, dict) or not ctl.get("machine_id"):
        return None  # a record from before the identity was kept: nothing to judge by
    here = here or procfs.host_identity()
    if ctl.get("machine_id") != here.get("machine_id"):
        return None
    who = f"{ctl.get('host')} pid {ctl.get('pid')}"
    if ctl.get("boot_id") != here.get("boot_id"):
        return f"its controller ({who}) ran before this machine's last boot"
    if not procfs.alive(ctl.get("pid"), ctl.get("starttime")):
        return f"its controller ({who}) is gone"
    return None


def list_runs(root: Path | None = None) -> list[dict[str, Any]]:
    """Every recorded run, newest first. A run still recorded as active whose controller is gone
    (SIGKILLed, its machine rebooted) carries `controller_gone`, why: its `state` is the last one
    that controller recorded, not what the workers do (`orch status` asks them, and records it)."""
    root = root or runs_root()
    out: list[dict[str, Any]] = []
    if not root.is_dir():
        return out
    here = procfs.host_identity()
    for path in root.iterdir():
        if (path / "run.json").exists():
            info = RunRecord(path).info()
            gone = controller_gone(info, here)
            if gone:
                info["controller_gone"] = gone
            out.append(info)
    return sorted(out, key=lambda d: d.get("created_at") or 0, reverse=True)


def find_run(ref: str, root: Path | None = None) -> RunRecord:
    """A run by id, unique id prefix, or name (the newest run of that name); `last` is the newest run."""
    root = root or runs_root()
    if (root / ref / "run.json").exists():
        return RunRecord(root / ref)
    runs = list_runs(root)
    if ref == "last" and runs:
        return RunRecord(root / runs[0]["run_id"])
    matches = [r for r in runs if r["run_id"].startswith(ref)] or [r for r in runs if r.get("name") == ref]
    if len({r["run_id"] for r in matches}) == 1 or (matches and all(r.get("name") == ref for r in matches)):
        return RunRecord(root / matches[0]["run_id"])
    if matches:
        raise OrchError(f"run '{ref}' is ambiguous: {', '.join(r['run_id'] for r in matches[:6])}")
    known = [r["run_id"] for r in runs]
    raise OrchError(
        f"no run '{ref}' in {root}{did_you_mean(ref, known)}",
        hint="`orch runs` lists the recorded runs (set ORCH_RUNS_DIR if they live elsewhere)",
    )


# -- a recorded run's logs (status, stop and attach need the gang: orchestrator/launch/recorded.py)


def log_text(record: RunRecord, transport: Transport, worker: str, tail: int | None = None) -> str:
    """One worker's output log (or its last `tail` lines)."""
    from orchestrator.remote import run_hostside

    plan = record.plan()
    p = plan.process(worker)
    args = ["log", p.run_dir] + (["--tail", str(tail)] if tail else [])
    res = run_hostside(transport, transport.workers[worker], "launch_ctl", args, timeout=60)
    if not res.ok:
        raise OrchError(f"cannot read the log of run {plan.run_id}: {res.describe()}", host=worker)
    return res.stdout


def follow_logs(
    record: RunRecord, transport: Transport, workers: list[str], on_line: Callable[[str, str], None]
) -> dict[str, Result]:
    """Stream the workers' logs from the start until each worker's process ends (no gang rule)."""
    import threading

    from orchestrator.remote import run_hostside

    plan = record.plan()
    results: dict[str, Result] = {}

    def one(name: str) -> None:
        def line(host: str, stream: str, text: str) -> None:
            if stream == "stderr" and text.startswith("@orch "):
                return
            on_line(name, text)

        results[name] = run_hostside(
            transport,
            transport.workers[name],
            "launch_watch",
            [plan.process(name).run_dir],
            timeout=10**7,
            on_line=line,
        )

    threads = [threading.Thread(target=one, args=(w,), daemon=True) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.2)
    return results
