"""Processes and files of a launched run, as seen on one worker (stdlib, Linux /proc).

A run's directory on a worker (`<root>/runs/<run-id>/`) holds:

    launch.json    the per-worker launch file (written by launch_start)
    pid            {pid, pgid, sid, starttime, supervisor_pid, ...} of the user process
    output.log     the user process's stdout and stderr
    record.json    what the launcher did, in order, with timestamps
    ready / release / stop / exit.json   the start barrier and the end of the run
    supervisor.log the supervisor's own messages

Which processes belong to a run: the user process is a session and
process-group leader (the supervisor starts it with `setsid`), so its pgid and
sid catch everything it forks; anything that left both carries
`ORCH_RUN_ID` and `ORCH_WORKER` in its environment from exec time. Matching
the worker name as well keeps a run's processes on one worker apart from the
same run's processes on another worker in a shared pid namespace (the local
slice).
"""

from __future__ import annotations

import json
import os
import signal
import time

LAUNCH_FILE = "launch.json"
PID_FILE = "pid"
LOG_FILE = "output.log"
RECORD_FILE = "record.json"
READY_FILE = "ready"
RELEASE_FILE = "release"
STOP_FILE = "stop"
EXIT_FILE = "exit.json"
SUPERVISOR_LOG = "supervisor.log"


def write_json_atomic(path: str, doc: dict) -> None:
    """Write a JSON document so readers see the old or the new file, never half of one."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=False)
        fh.write("\n")
    # No fsync: these files coordinate live processes, and an fsync can stall
    # for seconds behind other writers' dirty data (a journal commit).
    os.replace(tmp, path)


def read_json(path: str) -> dict | None:
    """The JSON document at `path`, or None when absent or (still) unreadable."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


# -- /proc -------------------------------------------------------------------


def stat(pid: int) -> dict | None:
    """state, ppid, pgid, sid and starttime (clock ticks since boot) of `pid`, or None."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            text = fh.read()
    except OSError:
        return None
    rest = text[text.rfind(")") + 2 :].split()
    return {
        "state": rest[0],
        "ppid": int(rest[1]),
        "pgid": int(rest[2]),
        "sid": int(rest[3]),
        "starttime": int(rest[19]),
    }


def alive(pid: int | None, starttime: int | None = None) -> bool:
    """True when `pid` runs (not a zombie) and, if given, started at `starttime` (no pid reuse)."""
    if not pid:
        return False
    st = stat(pid)
    if st is None or st["state"] in ("Z", "X"):
        return False
    return starttime is None or st["starttime"] == starttime


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def environ(pid: int) -> dict | None:
    """The environment `pid` was exec'd with, or None when not readable."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def pids() -> list[int]:
    return sorted(int(p) for p in os.listdir("/proc") if p.isdigit())


def describe(pid: int) -> dict:
    """pid, command line and, if it belongs to an orch run, that run's id."""
    env = environ(pid) or {}
    return {
        "pid": pid,
        "command": cmdline(pid)[:300],
        "orch_run": env.get("ORCH_RUN_ID"),
        "orch_worker": env.get("ORCH_WORKER"),
    }


def verified_pgid(pidinfo: dict | None) -> int | None:
    """The run's process group id, only while its leader is the process we started.

    Once the leader is gone its pid (and so the group id) may be reused by
    anyone; then only the environment identifies the run's processes.
    """
    info = pidinfo or {}
    if info.get("pgid") and alive(info.get("pid"), info.get("starttime")):
        return info["pgid"]
    return None


def run_members(run_id: str, worker: str, pidinfo: dict | None) -> list[int]:
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


def terminate(find, *, grace: float, pgid: int | None = None, poll: float = 0.02) -> dict:
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


def lock_holders(path: str) -> list[dict]:
    """Processes holding a POSIX/flock lock on `path` (from /proc/locks, matched by device and inode)."""
    try:
        st = os.stat(path)
    except OSError:
        return []
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    holders: dict[int, dict] = {}
    try:
        with open("/proc/locks") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    for line in lines:
        parts = line.split()
        if "->" in parts:  # a blocked waiter, not a holder
            continue
        try:
            i = next(k for k, p in enumerate(parts) if p.count(":") == 2 and k > 3)
            major, minor, inode = parts[i].split(":")
            key = (int(major, 16), int(minor, 16), int(inode))
            pid = int(parts[i - 1])
        except (StopIteration, ValueError):
            continue
        if key == want and pid > 0 and pid != os.getpid():
            holders[pid] = {**describe(pid), "lock": parts[1] if len(parts) > 1 else "?"}
    return list(holders.values())


DEVICE_PREFIXES = ("/dev/accel", "/dev/vfio/")


def device_holders() -> list[dict]:
    """Processes with a TPU chip device open (/dev/accel*, /dev/vfio/N)."""
    out = []
    for pid in pids():
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        held = set()
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith(DEVICE_PREFIXES) and target != "/dev/vfio/vfio":
                held.add(target)
        if held:
            out.append({**describe(pid), "devices": sorted(held)})
    return out
