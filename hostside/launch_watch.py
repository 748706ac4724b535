"""Watch one worker's part of a run: `python3 -m hostside.launch_watch RUN_DIR [--stream log|events|output]`.

The run's progress goes to stderr as lines `@orch {json}`: `supervisor` (ids),
`ready`, `started`, `exit` (status, reason, line counts, log tail) and a
heartbeat every second, so the controller can tell a quiet worker from a lost
one. What goes with it depends on `--stream`:

- `log` (the default): `output.log`, both streams in one, on stdout (`orch logs -f`);
- `events`: nothing else. The controller watches a run's progress on a channel
  of its own, so output it is slow to read never holds up a heartbeat;
- `output`: the user process's stdout on stdout and its stderr on stderr,
  as written (hostside.launch_output), and no events; `--skip OUT ERR` skips
  the lines a broken watch already delivered, `--offset -1` starts at the end.

Every mode ends after the process's exit (or after its start with `--until
started`), once what it wrote is drained. Reading files only, a watch never
touches the run itself: the controller may drop it at any time and attach a
new one later; while the controller reads slowly, the files are the buffer.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import IO, Any

from hostside import launch_output
from hostside import launch_proc as lp
from hostside.rundir import STREAMS_DIR

POLL = 0.05  # seconds between looks while the run moves
IDLE_POLL = 0.25  # ... and at most this while nothing does (doubling from POLL)
HEARTBEAT = 1.0
TAIL_BYTES = 16384
TAIL_LINES = 60
START_WAIT = 30.0
READ_LIMIT = 1 << 20  # bytes read from a log per pass, so a long backlog streams instead of loading whole


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
    """Hands complete new lines of a growing file to `out` (bytes, as written), skipping the first `skip`."""

    def __init__(self, path: str, offset: int, out: IO[bytes], skip: int = 0):
        self.path = path
        self.offset = offset
        self.out = out
        self.skip = skip
        self.partial = b""

    def pump(self, final: bool = False) -> bool:
        """Hand on what is new; whether anything was."""
        moved = False
        while True:
            try:
                with open(self.path, "rb") as fh:
                    fh.seek(self.offset)
                    data = fh.read(READ_LIMIT)
            except OSError:
                return moved
            self.offset += len(data)
            moved = moved or bool(data)
            pending = self.partial + data
            cut = pending.rfind(b"\n") + 1
            whole, self.partial = pending[:cut], pending[cut:]
            more = len(data) == READ_LIMIT
            if final and not more and self.partial:
                whole, self.partial = whole + self.partial + b"\n", b""
            if self.skip and whole:
                whole = self._skipped(whole)
            if whole:
                self.out.write(whole)
                self.out.flush()
            if not more:
                return moved

    def _skipped(self, whole: bytes) -> bytes:
        at = 0
        while self.skip and at < len(whole):
            at = whole.index(b"\n", at) + 1
            self.skip -= 1
        return whole[at:]


def follower_for(run_dir: str, stream: str, offset: int, skip: int) -> LogFollower:
    """A follower of `output.log` (stream "log") or of one of the user process's streams."""
    out = sys.stderr.buffer if stream == "stderr" else sys.stdout.buffer
    path = os.path.join(run_dir, lp.LOG_FILE) if stream == "log" else launch_output.stream_path(run_dir, stream)
    if offset < 0:
        try:
            offset = os.path.getsize(path)
        except OSError:
            offset = 0
    return LogFollower(path, offset, out, skip)


def watch(run_dir: str, mode: str, until: str, offset: int = 0, skip: tuple[int, int] = (0, 0)) -> int:
    """Watch the run in `mode`: "log" (output.log and events), "events" alone, "output" (stdout and stderr apart)."""
    paths = {name: os.path.join(run_dir, name) for name in (lp.PID_FILE, lp.LOG_FILE, lp.RECORD_FILE, lp.EXIT_FILE)}
    followers: list[LogFollower] = []
    say = event if mode != "output" else _silent

    def start_following() -> None:
        if mode == "log" or (mode == "output" and not os.path.isdir(os.path.join(run_dir, STREAMS_DIR))):
            followers.append(follower_for(run_dir, "log", offset, skip[0]))  # a run started by an older orch
        elif mode == "output":
            followers.extend(
                follower_for(run_dir, s, offset, n) for s, n in zip(launch_output.STREAMS, skip, strict=True)
            )

    def pump(final: bool = False) -> bool:
        moved = False
        for f in followers:
            moved = f.pump(final) or moved
        return moved

    deadline = time.monotonic() + START_WAIT
    pidinfo = None
    while pidinfo is None:
        pidinfo = lp.read_json(paths[lp.PID_FILE])
        done = lp.read_json(paths[lp.EXIT_FILE])
        if pidinfo is None and done:
            start_following()
            pump(final=True)
            say("exit", **done, tail=log_tail(paths[lp.LOG_FILE]))
            return 0
        if pidinfo is None and time.monotonic() > deadline:
            say(
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
    start_following()
    say("supervisor", **{k: pidinfo.get(k) for k in ("pid", "pgid", "supervisor_pid", "started_at")})
    phases_seen: set[str] = set()
    record_sig: tuple[int, int, int] | None = None
    last_beat = 0.0
    supervisor_gone_since = None
    pause = POLL
    while True:
        moved = pump()
        # The launcher replaces record.json atomically (a new inode each time), and may write it
        # twice within one timestamp tick (cache-init, then ready): mtime alone can miss the second
        # write, and a missed "ready" stalls the whole gang until the start timeout.
        try:
            st = os.stat(paths[lp.RECORD_FILE])
            sig: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            sig = record_sig
        if sig != record_sig:
            record_sig, moved = sig, True
            record = lp.read_json(paths[lp.RECORD_FILE]) or {}
            for phase, kind in (("ready", "ready"), ("running", "started")):
                if kind not in phases_seen and (
                    record.get(f"{phase}_at") if phase == "ready" else record.get("started_at")
                ):
                    phases_seen.add(kind)
                    say(
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
            pump(final=True)
            say("exit", **done, tail=log_tail(paths[lp.LOG_FILE]))
            return 0
        if not lp.alive(pidinfo.get("supervisor_pid"), pidinfo.get("supervisor_starttime")):
            # exit.json is written before the supervisor leaves; give a racing write a moment.
            supervisor_gone_since = supervisor_gone_since or time.monotonic()
            if time.monotonic() - supervisor_gone_since > 1.0:
                pump(final=True)
                running = lp.alive(pidinfo.get("pid"), pidinfo.get("starttime"))
                say(
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
            say("hb")
        # Back off while nothing moves (a gang waiting for its release, a quiet program): 256 watches
        # of one 2-core machine looking 20 times a second cost it most of a core.
        pause = POLL if moved else min(pause * 2, IDLE_POLL)
        time.sleep(pause)


def _silent(kind: str, **data: Any) -> None:
    """The output watch says nothing of its own: its stderr is the user process's."""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="hostside.launch_watch")
    parser.add_argument("run_dir")
    parser.add_argument(
        "--stream",
        choices=("log", "events", "output"),
        default="log",
        help="log: output.log on stdout, events on stderr; events: events alone; "
        "output: the user process's stdout on stdout and its stderr on stderr, no events",
    )
    parser.add_argument("--offset", type=int, default=0, help="0: from the start; -1: from the end")
    parser.add_argument(
        "--skip", type=int, nargs=2, default=(0, 0), metavar=("OUT", "ERR"), help="lines already received"
    )
    parser.add_argument("--until", choices=("exit", "started"), default="exit")
    args = parser.parse_args(argv)
    try:
        return watch(args.run_dir, args.stream, args.until, min(args.offset, 0), tuple(args.skip))
    except BrokenPipeError:  # the controller went away; the run goes on
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
