"""The run record after its controller is gone: `orch runs` says so, `orch status` asks the workers and
brings the record in line with them (the slice proof: tests/test_controller_lease_slice.py)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any

from test_gang_driver import WORKERS, FakeWorker, plan

from hostside import procfs
from orchestrator import runs
from orchestrator.launch import recorded
from orchestrator.transport import Result


def dead_controller() -> dict[str, Any]:
    """The identity of a process of this machine that has ended."""
    proc = subprocess.Popen(["sleep", "60"])
    st = procfs.stat(proc.pid)
    proc.kill()
    proc.wait()
    return {**runs.controller_identity(), "pid": proc.pid, "starttime": st["starttime"] if st else None}


def recorded_run(tmp_path, controller: dict[str, Any], state: str = "started") -> runs.RunRecord:
    record = runs.RunRecord.create(plan(), root=tmp_path)
    record.update(state=state, controller=controller)
    return record


def test_a_run_whose_controller_was_killed_is_listed_as_such_and_a_live_one_is_not(tmp_path):
    gone = recorded_run(tmp_path, dead_controller())
    (listed,) = runs.list_runs(tmp_path)
    assert listed["state"] == "started"
    assert "is gone" in listed["controller_gone"] and str(gone.info()["controller"]["pid"]) in listed["controller_gone"]

    recorded_run(tmp_path, runs.controller_identity())  # this process: alive
    assert runs.controller_gone(runs.RunRecord(tmp_path / "r").info()) is None


def test_only_an_active_record_of_this_machine_is_judged_and_a_reboot_counts_as_gone(tmp_path):
    dead = dead_controller()
    assert runs.controller_gone({"state": "succeeded", "controller": dead}) is None
    assert runs.controller_gone({"state": "detached", "controller": dead}) is None
    elsewhere = {**dead, "machine_id": "another-machine"}
    assert runs.controller_gone({"state": "running", "controller": elsewhere}) is None
    alive_earlier_boot = {**runs.controller_identity(), "boot_id": "an-earlier-boot"}
    assert "last boot" in (runs.controller_gone({"state": "running", "controller": alive_earlier_boot}) or "")
    # A record from before identities were kept (host and pid only) is not judged.
    assert runs.controller_gone({"state": "running", "controller": {"host": "h", "pid": 1}}) is None


@dataclass
class StatusTransport:
    """Answers `launch_ctl status` with each worker's scripted document."""

    answers: dict[str, dict[str, Any]]

    @property
    def workers(self) -> dict[str, FakeWorker]:
        return {w: FakeWorker(w) for w in WORKERS}

    @property
    def memo(self) -> dict[str, Any]:
        return {"hostside-ready": set(WORKERS)}

    def map(self, fn, hosts=None) -> dict[str, Result]:
        return {w: fn(self.workers[w]) for w in (hosts or WORKERS)}

    def run_one(self, name, argv, *, env=None, timeout=None, stdin=None, on_line=None) -> Result:
        assert "hostside.launch_ctl" in argv and "status" in argv, argv
        doc = {"schema_version": 1, "ok": True, **self.answers[name]}
        return Result(host=name, argv=("launch_ctl",), exit_code=0, stdout=json.dumps(doc))


GONE_EXIT = {"exit_code": None, "signal": 15, "stopped": True, "reason": "controller gone: its lease was not renewed"}


def test_status_after_the_controller_is_gone_records_what_the_workers_say_so_runs_agrees(tmp_path):
    record = recorded_run(tmp_path, dead_controller(), state="started")
    workers = {w: {"state": "exited", "exit": GONE_EXIT} for w in WORKERS}
    doc = recorded.status(record, StatusTransport(workers))  # type: ignore[arg-type]
    assert doc["state"] == "stopped" and doc["recorded"] == "started" and "is gone" in doc["controller_gone"]
    (listed,) = runs.list_runs(tmp_path)
    assert listed["state"] == "stopped" and "controller_gone" not in listed
    assert listed["ended_by"] == "controller gone" and listed["recorded_before"] == "started"
    assert "w0: controller gone" in listed["outcome"]["message"]


def test_a_run_still_running_on_its_workers_is_not_recorded_as_ended(tmp_path):
    record = recorded_run(tmp_path, dead_controller(), state="started")
    workers = {w: {"state": "running"} for w in WORKERS}
    doc = recorded.status(record, StatusTransport(workers))  # type: ignore[arg-type]
    assert doc["state"] == "running" and doc["controller_gone"]
    assert runs.list_runs(tmp_path)[0]["state"] == "started"  # still the controller's last word, flagged gone


def test_a_controller_killed_before_any_worker_started_leaves_a_run_the_workers_never_saw(tmp_path):
    record = recorded_run(tmp_path, dead_controller(), state="preflight")
    doc = recorded.status(record, StatusTransport({w: {"state": "absent"} for w in WORKERS}))  # type: ignore[arg-type]
    assert doc["state"] == "not-started"
    listed = runs.list_runs(tmp_path)[0]
    assert listed["state"] == "not-started" and "w0: never started" in listed["outcome"]["message"]
