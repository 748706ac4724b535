"""Start one worker's part of a run: `python3 -m hostside.launch_start < LAUNCH_DOCUMENT`.

Reads the launch document on stdin and writes it into the run directory it
names, owner-only (it holds the run's environment), refusing a run directory
that already holds a run or a stop; then starts the supervisor detached
(its own session, stdio away from the SSH channel), so the run outlives this SSH session: the controller watches it with
`hostside.launch_watch` and ends it with `hostside.launch_ctl stop`.
Prints one JSON document: the supervisor's and the user process's ids.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from hostside import SCHEMA_VERSION
from hostside import launch_proc as lp

START_WAIT = 15.0


def start(doc: dict[str, Any]) -> dict[str, Any]:
    """Write the run's launch file (owner-only: it holds the run's environment, credentials included)
    and start the supervisor; refuses a run directory that already holds a run, or a stopped run."""
    run_dir = doc["run_dir"]
    if os.path.exists(os.path.join(run_dir, lp.PID_FILE)):
        return {"ok": False, "error": f"run directory {run_dir} already holds a started run"}
    stopped = lp.read_json(os.path.join(run_dir, lp.STOP_FILE))
    if stopped:
        return {"ok": False, "error": f"the run was stopped before it started here ({stopped.get('reason', 'stop')})"}
    os.makedirs(run_dir, exist_ok=True)
    try:
        fd = os.open(os.path.join(run_dir, lp.LAUNCH_FILE), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return {"ok": False, "error": f"run directory {run_dir} already holds a launch file"}
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh, indent=1)
    hostside_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE",)}
    env["PYTHONPATH"] = hostside_root
    with open(os.path.join(run_dir, lp.SUPERVISOR_LOG), "ab") as log:
        sup = subprocess.Popen(
            [sys.executable, "-m", "hostside.launch_supervise", run_dir],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=env,
            start_new_session=True,
            close_fds=True,
            cwd=run_dir,
        )
    # The supervisor writes the pid file once the user process exists (or
    # exit.json when it could not start it); wait for either.
    deadline = time.monotonic() + START_WAIT
    while time.monotonic() < deadline:
        info = lp.read_json(os.path.join(run_dir, lp.PID_FILE))
        if info:
            return {"ok": True, **info}
        done = lp.read_json(os.path.join(run_dir, lp.EXIT_FILE))
        if done:
            return {"ok": False, "error": done.get("reason", "the user process could not be started"), "exit": done}
        if sup.poll() is not None:
            break
        time.sleep(0.01)
    tail = ""
    try:
        with open(os.path.join(run_dir, lp.SUPERVISOR_LOG), errors="replace") as fh:
            tail = fh.read()[-2000:]
    except OSError:
        pass
    code = sup.poll()
    if code is None:  # still starting when the wait ran out (the controller stops it with the others)
        error = f"the supervisor had not started the run after {START_WAIT:g}s (the worker is overloaded or slow)"
    else:
        error = f"the supervisor ended (exit {code}) without starting the run"
    return {"ok": False, "error": error, "log": tail}


def main(argv: list[str]) -> int:
    try:
        doc = json.load(sys.stdin)
    except ValueError as exc:
        print(
            json.dumps(
                {
                    "schema_version": SCHEMA_VERSION,
                    "job": "launch_start",
                    "ok": False,
                    "error": f"cannot read the launch document on stdin: {exc}",
                }
            )
        )
        return 1
    result = start(doc)
    print(json.dumps({"schema_version": SCHEMA_VERSION, "job": "launch_start", **result}))
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
