"""Act on one worker's part of a run: `python3 -m hostside.launch_ctl VERB RUN_DIR [...]`.

    release RUN_DIR --in D        start the user code D seconds (at most RELEASE_CAP) after this arrives
    release RUN_DIR --at T        the same at this worker's wall-clock instant T (by hand only)
    stop RUN_DIR [--grace S] [--reason R]
                                  TERM every process of the run, KILL after S
    status RUN_DIR                pid file, phase, exit status, live processes
    collect RUN_DIR               pid file, record and exit status, for the controller's run record
    log RUN_DIR [--tail N]        the output log (or its last N lines) on stdout

Each verb prints one JSON document on stdout (`log` prints the log itself).

The controller lease (which a launcher waiting for its release, and an attached
run's supervisor, watch) is renewed by a shell command, `renew_argv`, not a
verb here: see RENEW_SCRIPT. The controller releases a gang with the shell
form of `release --in`, `release_argv`: see RELEASE_SCRIPT.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from hostside import SCHEMA_VERSION, files
from hostside import launch_proc as lp
from hostside.rundir import CONTROLLER_LEASE_FILE


def _files(run_dir: str) -> dict[str, Any]:
    return {
        "launch": lp.read_json(os.path.join(run_dir, lp.LAUNCH_FILE)),
        "pid": lp.read_json(os.path.join(run_dir, lp.PID_FILE)),
        "record": lp.read_json(os.path.join(run_dir, lp.RECORD_FILE)),
        "exit": lp.read_json(os.path.join(run_dir, lp.EXIT_FILE)),
    }


RELEASE_CAP = 10.0  # seconds: a release never asks a launcher to wait longer than this


def release(run_dir: str, at: float) -> dict[str, Any]:
    lp.write_json_atomic(os.path.join(run_dir, lp.RELEASE_FILE), {"release_at": at, "written_at": time.time()})
    files.ring(os.path.join(run_dir, lp.RELEASE_BELL))
    return {"ok": True, "release_at": at}


def release_in(run_dir: str, delay: float) -> dict[str, Any]:
    """Release `delay` seconds after this message arrived, capped, on this worker's clock alone:
    no decision compares the controller's clock with this one."""
    return release(run_dir, time.time() + min(max(delay, 0.0), RELEASE_CAP))


# The controller's release is `release_in` as a shell command, `release_argv`, for the reason the
# renewal is one (below): it reaches every worker of the gang at the one moment all of them wait, and
# a Python job each (about 90 ms of a worker's CPU) started 128 interpreters at once on the local
# slice's 2 cores, which held the controller's renewals back past the lease's bound on some workers.
# The same document (release_at: this worker's clock now plus the delay, capped at RELEASE_CAP;
# written_at), written the same way (a temp file renamed), the same bell rung (a FIFO opened
# read-write never blocks, whether or not a launcher waits on it), and the same reply.
RELEASE_SCRIPT = (
    'umask 022; [ -d "$1" ] || { echo "no run directory $1 on this worker" >&2; exit 1; }; '
    "now=$(date +%s.%N) || exit 1; "
    'at=$(awk -v d="$2" -v now="$now" -v cap="$4" '
    "'BEGIN { d += 0; if (d < 0) d = 0; if (d > cap + 0) d = cap + 0; printf \"%.6f\", now + d }') || exit 1; "
    'printf \'{"release_at": %s, "written_at": %s}\\n\' "$at" "$now" > "$1/.$3.tmp" && mv -f "$1/.$3.tmp" "$1/$3" '
    "|| exit 1; "
    '[ -p "$1/$5" ] && [ ! -L "$1/$5" ] && printf "!" 1<>"$1/$5"; '
    'printf \'{"schema_version": %d, "ok": true, "release_at": %s}\\n\' "$6" "$at"'
)


def release_argv(run_dir: str, delay: float) -> list[str]:
    """The command that releases the launcher in `run_dir` `delay` seconds after it arrives."""
    args = [run_dir, repr(float(delay)), lp.RELEASE_FILE, repr(RELEASE_CAP), lp.RELEASE_BELL, str(SCHEMA_VERSION)]
    return ["sh", "-c", RELEASE_SCRIPT, "orch-release", *args]


# The controller is alive: it writes {"renewed": N} (N its count of renewals) into the run's controller
# lease, and the launcher and supervisor judge that by seeing the value change on their own clock. The
# controller renews every worker every CONTROLLER_RENEW_EVERY seconds for a whole attached run, so the
# write is a shell command of a few ms, not a Python job: with the interpreter start and this package's
# imports (compiled from source, -B) that cost a worker about 90 ms of CPU each time, and 256 workers
# of one 2-core machine could not keep up (the lease lapsed before the release). It writes the temp
# file beside the lease and renames it, as hostside.files does: readers see the old or the new document.
RENEW_SCRIPT = (
    'umask 022; [ -d "$1" ] || mkdir -p "$1" || exit 1; '
    'printf \'{"renewed": %d}\\n\' "$2" > "$1/.$3.tmp" && mv -f "$1/.$3.tmp" "$1/$3"'
)


def renew_argv(run_dir: str, count: int) -> list[str]:
    """The command that renews the controller lease in `run_dir` with the controller's `count`."""
    return ["sh", "-c", RENEW_SCRIPT, "orch-renew", run_dir, str(int(count)), CONTROLLER_LEASE_FILE]


def stop(run_dir: str, grace: float, reason: str) -> dict[str, Any]:
    f = _files(run_dir)
    launch = f["launch"]
    stop_path = os.path.join(run_dir, lp.STOP_FILE)
    if not os.path.exists(stop_path):
        # Also when nothing started here yet: a start that arrives after the stop (Ctrl-C while
        # the gang was starting) must find it and refuse, not wait alone for a release.
        os.makedirs(run_dir, exist_ok=True)
        lp.write_json_atomic(stop_path, {"reason": reason, "time": time.time()})
        files.ring(os.path.join(run_dir, lp.RELEASE_BELL))  # a launcher waiting for its release refuses now
    if launch is None:
        return {
            "ok": True,
            "note": f"no run in {run_dir} yet; a later start of it will refuse",
            "term": [],
            "kill": [],
            "left": [],
        }
    pidinfo = f["pid"] or {}
    report = lp.terminate(
        lambda: lp.run_members(launch["run_id"], launch["worker"], pidinfo), grace=grace, pgid=lp.verified_pgid(pidinfo)
    )
    # The supervisor writes exit.json once the user process is reaped; wait for it briefly.
    deadline = time.monotonic() + 3.0
    while (
        lp.alive(pidinfo.get("supervisor_pid"), pidinfo.get("supervisor_starttime"))
        and not os.path.exists(os.path.join(run_dir, lp.EXIT_FILE))
        and time.monotonic() < deadline
    ):
        time.sleep(0.02)
    return {"ok": not report["left"], **report, "exit": lp.read_json(os.path.join(run_dir, lp.EXIT_FILE))}


def status(run_dir: str) -> dict[str, Any]:
    f = _files(run_dir)
    launch, pidinfo, record, done = f["launch"], f["pid"] or {}, f["record"] or {}, f["exit"]
    members = lp.run_members(launch["run_id"], launch["worker"], pidinfo) if launch else []
    if launch is None:
        state = "absent"
    elif done:
        state = "exited"
    elif not pidinfo:
        state = "starting"
    elif not lp.alive(pidinfo.get("supervisor_pid"), pidinfo.get("supervisor_starttime")):
        state = "orphaned" if members else "lost"
    else:
        state = {"ready": "ready", "running": "running", "exited": "exiting"}.get(str(record.get("phase")), "starting")
    try:
        log_size = os.path.getsize(os.path.join(run_dir, lp.LOG_FILE))
    except OSError:
        log_size = 0
    return {
        "ok": True,
        "state": state,
        "phase": record.get("phase"),
        "pid": pidinfo.get("pid"),
        "supervisor_pid": pidinfo.get("supervisor_pid"),
        "processes": [lp.describe(p) for p in members],
        "exit": done,
        "started_at": record.get("started_at"),
        "log_bytes": log_size,
    }


def collect(run_dir: str) -> dict[str, Any]:
    f = _files(run_dir)
    return {"ok": f["launch"] is not None, "pid": f["pid"], "record": f["record"], "exit": f["exit"]}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="hostside.launch_ctl")
    parser.add_argument("verb", choices=("release", "stop", "status", "collect", "log"))
    parser.add_argument("run_dir")
    parser.add_argument("--at", type=float)
    parser.add_argument("--in", dest="delay", type=float)
    parser.add_argument("--grace", type=float, default=5.0)
    parser.add_argument("--reason", default="orch stop")
    parser.add_argument("--tail", type=int)
    args = parser.parse_args(argv)
    if args.verb == "log":
        path = os.path.join(args.run_dir, lp.LOG_FILE)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            print(f"no log: {exc}", file=sys.stderr)
            return 1
        if args.tail is not None:
            data = b"\n".join(data.rstrip(b"\n").split(b"\n")[-args.tail :]) + b"\n"
        sys.stdout.buffer.write(data)
        return 0
    if args.verb == "release" and args.delay is not None:
        result = release_in(args.run_dir, args.delay)
    elif args.verb == "release":
        result = release(args.run_dir, args.at if args.at is not None else time.time())
    elif args.verb == "stop":
        result = stop(args.run_dir, args.grace, args.reason)
    elif args.verb == "status":
        result = status(args.run_dir)
    else:
        result = collect(args.run_dir)
    print(json.dumps({"schema_version": SCHEMA_VERSION, "job": f"launch_ctl.{args.verb}", **result}))
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
