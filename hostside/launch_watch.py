"""Watch one worker's part of a run: `python3 -m hostside.launch_watch RUN_DIR [--offset N] [--until exit|started]`.

Streams the user process's output (`output.log`, from byte `--offset`) on
stdout, line by line, and reports the run's progress on stderr as lines
`@orch {json}`: `supervisor` (ids), `ready`, `started`, `exit` (status, reason,
log tail) and a heartbeat every second, so the controller can tell a quiet
worker from a lost one. Ends after `exit` (or after `started` with
`--until started`). Reading files only, it never touches the run itself:
the controller may drop this watch at any time and attach a new one later.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from hostside import launch_proc as lp

POLL = 0.05
HEARTBEAT = 1.0
TAIL_BYTES = 16384
TAIL_LINES = 60
START_WAIT = 30.0


def event(kind: str, **data: Any) -> None:
    sys.stderr.write("@orch " + json.dumps({"event": kind, "time": time.time(), **data}) + "\n")
    sys.stderr.flush()


def log_tail(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_BYTES))
            data = fh.read()
    except OSError:
        return ""
    lines = data.decode("utf-8", "replace").splitlines()
    return "\n".join(lines[-TAIL_LINES:])


class LogFollower:
    """Hands complete new lines of a growing file to stdout."""

    def __init__(self, path: str, offset: int):
        self.path = path
        self.offset = offset
        self.partial = b""

    def pump(self, final: bool = False) -> None:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return
        if not data and not (final and self.partial):
            return
        self.offset += len(data)
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = lines.pop()
        if final and self.partial:
            lines.append(self.partial)
            self.partial = b""
        if lines:
            sys.stdout.write("".join(line.decode("utf-8", "replace") + "\n" for line in lines))
            sys.stdout.flush()


def watch(run_dir: str, offset: int, until: str) -> int:
    paths = {name: os.path.join(run_dir, name) for name in (lp.PID_FILE, lp.LOG_FILE, lp.RECORD_FILE, lp.EXIT_FILE)}
    follower = LogFollower(paths[lp.LOG_FILE], offset)
    deadline = time.monotonic() + START_WAIT
    pidinfo = None
    while pidinfo is None:
        pidinfo = lp.read_json(paths[lp.PID_FILE])
        done = lp.read_json(paths[lp.EXIT_FILE])
        if pidinfo is None and done:
            follower.pump(final=True)
            event("exit", **done, tail=log_tail(paths[lp.LOG_FILE]))
            return 0
        if pidinfo is None and time.monotonic() > deadline:
            event(
                "exit",
                exit_code=None,
                signal=None,
                lost=True,
                reason=f"the run never started on this worker (no {paths[lp.PID_FILE]})",
                tail="",
            )
            return 0
        if pidinfo is None:
            time.sleep(POLL)
    event("supervisor", **{k: pidinfo.get(k) for k in ("pid", "pgid", "supervisor_pid", "started_at")})
    phases_seen: set[str] = set()
    record_sig: tuple[int, int, int] | None = None
    last_beat = 0.0
    supervisor_gone_since = None
    while True:
        follower.pump()
        # The launcher replaces record.json atomically (a new inode each time), and may write it
        # twice within one timestamp tick (cache-init, then ready): mtime alone can miss the second
        # write, and a missed "ready" stalls the whole gang until the start timeout.
        try:
            st = os.stat(paths[lp.RECORD_FILE])
            sig: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            sig = record_sig
        if sig != record_sig:
            record_sig = sig
            record = lp.read_json(paths[lp.RECORD_FILE]) or {}
            for phase, kind in (("ready", "ready"), ("running", "started")):
                if kind not in phases_seen and (
                    record.get(f"{phase}_at") if phase == "ready" else record.get("started_at")
                ):
                    phases_seen.add(kind)
                    event(
                        kind,
                        ready_at=record.get("ready_at"),
                        started_at=record.get("started_at"),
                        release_at=record.get("release_at"),
                        released_at=record.get("released_at"),
                    )
                    if kind == "started" and until == "started":
                        return 0
        done = lp.read_json(paths[lp.EXIT_FILE])
        if done:
            follower.pump(final=True)
            event("exit", **done, tail=log_tail(paths[lp.LOG_FILE]))
            return 0
        if not lp.alive(pidinfo.get("supervisor_pid"), pidinfo.get("supervisor_starttime")):
            # exit.json is written before the supervisor leaves; give a racing write a moment.
            supervisor_gone_since = supervisor_gone_since or time.monotonic()
            if time.monotonic() - supervisor_gone_since > 1.0:
                follower.pump(final=True)
                running = lp.alive(pidinfo.get("pid"), pidinfo.get("starttime"))
                event(
                    "exit",
                    exit_code=None,
                    signal=None,
                    lost=True,
                    still_running=running,
                    reason="the supervisor is gone"
                    + (" (the user process still runs)" if running else "; exit status unknown"),
                    tail=log_tail(paths[lp.LOG_FILE]),
                )
                return 0
        now = time.monotonic()
        if now - last_beat >= HEARTBEAT:
            last_beat = now
            event("hb")
        time.sleep(POLL)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="hostside.launch_watch")
    parser.add_argument("run_dir")
    parser.add_argument("--offset", type=int, default=0, help="byte offset in output.log; -1: from the end")
    parser.add_argument("--until", choices=("exit", "started"), default="exit")
    args = parser.parse_args(argv)
    offset = args.offset
    if offset < 0:
        try:
            offset = os.path.getsize(os.path.join(args.run_dir, lp.LOG_FILE))
        except OSError:
            offset = 0
    try:
        return watch(args.run_dir, offset, args.until)
    except BrokenPipeError:  # the controller went away; the run goes on
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
