"""Processes and files of a launched run, as seen on one worker (stdlib, Linux /proc).

The run directory's layout is `hostside.rundir` (its names are re-exported
here for older callers); who holds what comes from `hostside.procfs`.

Which processes belong to a run: the user process is a session and
process-group leader (the supervisor starts it with `setsid`), so its pgid and
sid catch everything it forks; anything that left both carries
`ORCH_RUN_ID` and `ORCH_WORKER` in its environment from exec time. Matching
the worker name as well keeps a run's processes on one worker apart from the
same run's processes on another worker in a shared pid namespace (the local
slice).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

from hostside import files, procfs

# Re-exported (`X as X`): callers of this module use these names.
from hostside.procfs import alive as alive
from hostside.procfs import cmdline as cmdline
from hostside.procfs import environ as environ
from hostside.procfs import pids as pids
from hostside.procfs import stat as stat
from hostside.rundir import EXIT_FILE as EXIT_FILE
from hostside.rundir import LAUNCH_FILE as LAUNCH_FILE
from hostside.rundir import LOG_FILE as LOG_FILE
from hostside.rundir import PID_FILE as PID_FILE
from hostside.rundir import READY_FILE as READY_FILE
from hostside.rundir import RECORD_FILE as RECORD_FILE
from hostside.rundir import RELEASE_BELL as RELEASE_BELL
from hostside.rundir import RELEASE_FILE as RELEASE_FILE
from hostside.rundir import STOP_FILE as STOP_FILE
from hostside.rundir import SUPERVISOR_LOG as SUPERVISOR_LOG

# Run files are read by the same user's jobs and by `orch gather`; not secrets.
RUN_FILE_MODE = 0o644


def write_json_atomic(path: str, doc: dict[str, Any]) -> None:
    """Write a JSON document so readers see the old or the new file, never half of one (hostside.files)."""
    files.write_json_atomic(path, doc, mode=RUN_FILE_MODE)


def read_json(path: str) -> Any:
    """The JSON document at `path`, or None when absent or (still) unreadable (hostside.files)."""
    return files.read_json(path)


# -- processes of a run ----------------------------------------------------------


def describe(pid: int) -> dict[str, Any]:
    """pid, command line and, if it belongs to an orch run, that run's id."""
    env = environ(pid) or {}
    return {
        "pid": pid,
        "command": cmdline(pid)[:300],
        "orch_run": env.get("ORCH_RUN_ID"),
        "orch_worker": env.get("ORCH_WORKER"),
    }


def verified_pgid(pidinfo: dict[str, Any] | None) -> int | None:
    """The run's process group id, only while its leader is the process we started.

    Once the leader is gone its pid (and so the group id) may be reused by
    anyone; then only the environment identifies the run's processes.
    """
    info = pidinfo or {}
    pgid = info.get("pgid")
    if isinstance(pgid, int) and pgid and alive(info.get("pid"), info.get("starttime")):
        return pgid
    return None


def run_members(run_id: str, worker: str, pidinfo: dict[str, Any] | None) -> list[int]:
    """Live processes of run `run_id` on `worker`: its verified group and session, or its environment."""
    me = os.getpid()
    pgid = verified_pgid(pidinfo)
    sid = (pidinfo or {}).get("sid") if pgid else None
    out = []
    for pid in pids():
        if pid == me:
            continue
        st = stat(pid)
        if st is None or st["state"] in ("Z", "X"):
            continue
        if pgid and (st["pgid"] == pgid or st["sid"] == sid):
            out.append(pid)
            continue
        env = environ(pid)
        if env and env.get("ORCH_RUN_ID") == run_id and env.get("ORCH_WORKER") == worker:
            out.append(pid)
    return out


def terminate(
    find: Callable[[], list[int]], *, grace: float, pgid: int | None = None, poll: float = 0.02
) -> dict[str, Any]:
    """TERM what `find()` returns (and the process group), wait up to `grace`, then KILL the rest.

    Returns {"term": [...], "kill": [...], "left": [...], "elapsed": s}.
    """
    start = time.monotonic()
    first = find()
    report = {"term": first, "kill": [], "left": [], "elapsed": 0.0}
    if not first:
        return report
    _signal_all(first, signal.SIGTERM, pgid)
    deadline = start + grace
    left = first
    while left and time.monotonic() < deadline:
        time.sleep(poll)
        left = find()
    if left:
        report["kill"] = left
        end = time.monotonic() + 5.0
        while left and time.monotonic() < end:
            # By now the group leader may be gone and its id reusable: KILL only what `find` names.
            _signal_all(left, signal.SIGKILL, None)
            time.sleep(poll)
            left = find()
    report["left"] = left
    report["elapsed"] = round(time.monotonic() - start, 3)
    return report


def _signal_all(targets: list[int], sig: int, pgid: int | None) -> None:
    if pgid:
        try:
            os.killpg(pgid, sig)
        except OSError:
            pass
    for pid in targets:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


# -- locks and devices ---------------------------------------------------------


def lock_holders(path: str) -> list[dict[str, Any]]:
    """Processes holding a lock on `path` (hostside.procfs's rule), each described as by `describe`."""
    return [describe(pid) for pid in procfs.lock_holders(path)]


def device_holders() -> list[dict[str, Any]]:
    """Processes with a TPU chip device open (/dev/accel*, /dev/vfio/N), each with its devices."""
    scan = procfs.device_holders()
    return [{**describe(pid), "devices": devices} for pid, devices in sorted(scan.holders.items())]
