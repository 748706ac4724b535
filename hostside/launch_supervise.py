"""The supervisor of one worker's user process: `python3 -m hostside.launch_supervise RUN_DIR`.

Starts the launcher under the lane's bundle Python in its own session and
process group, with the launch file's environment set at exec time (so every
process of the run carries ORCH_RUN_ID from birth), its stdout and stderr
copied as they come into `output.log` and `streams/` (hostside.launch_output),
and a pid file naming the group. Then it waits: when the user
process ends it writes `exit.json` at once (the controller's gang rule reacts
to that), then ends whatever the process left behind in its group. It also
enforces the run's timeout on its own, so a detached run is bounded even when
no controller watches it.

An attached run (`attached` in the launch file: `orch launch` without
`--detach`) belongs to the controller that watches it: after the release the
supervisor keeps watching the controller lease (`controller.lease`, renewed by
the controller every 5 s) and, when it has not changed for
CONTROLLER_LEASE_TTL seconds of this worker's monotonic clock, ends the run as
`orch stop` would, recording that the controller is gone (docs/reliability.md).
A detached run is never ended that way: it outlives its controller on purpose.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from types import FrameType
from typing import Any

from hostside import SCHEMA_VERSION, launch_output, launch_stdin, lease
from hostside import launch_proc as lp
from hostside.rundir import CONTROLLER_LEASE_FILE

LEFTOVER_GRACE = 3.0
DRAIN_IDLE = 0.2  # after the process ended: output still arriving this often is still copied
DRAIN_LIMIT = 5.0
TIMEOUT_SLACK = 2.0
LEASE_EVERY = 0.5  # seconds between two readings of an attached run's controller lease


def _log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} supervisor: {msg}", file=sys.stderr, flush=True)


def child_env(doc: dict[str, Any], hostside_root: str) -> dict[str, Any]:
    """The user process's environment: the worker's, minus orch's plumbing, plus the plan's."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env.update(doc["env"])
    # The launcher needs hostside importable; it puts PYTHONPATH back to the
    # plan's value before any user code runs.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (hostside_root, doc["env"].get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env["ORCH_HOSTSIDE"] = hostside_root
    return env


def supervise(run_dir: str) -> int:
    doc = lp.read_json(os.path.join(run_dir, lp.LAUNCH_FILE))
    if doc is None:
        _log(f"no launch file in {run_dir}")
        return 2
    exit_path = os.path.join(run_dir, lp.EXIT_FILE)
    hostside_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cwd = doc.get("cwd") or os.path.expanduser("~")
    fds = {stream: os.pipe() for stream in launch_output.STREAMS}
    stdin, stdin_holder = _stdin(run_dir, doc)
    try:
        proc = subprocess.Popen(
            [doc["python"], "-m", "hostside.launcher", os.path.join(run_dir, lp.LAUNCH_FILE)],
            cwd=cwd,
            env=child_env(doc, hostside_root),
            stdin=stdin,
            stdout=fds["stdout"][1],
            stderr=fds["stderr"][1],
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        reason = f"cannot start {doc['python']} in {cwd}: {exc.strerror or exc}"
        for r, w in fds.values():
            os.close(r)
            os.close(w)
        _release_stdin(stdin_holder if stdin == subprocess.DEVNULL else [*stdin_holder, stdin])
        with open(os.path.join(run_dir, lp.LOG_FILE), "ab") as log:
            log.write(f"orch launcher: {reason}\n".encode())
        lp.write_json_atomic(
            exit_path,
            {
                "schema_version": SCHEMA_VERSION,
                "exit_code": 127,
                "signal": None,
                "reason": reason,
                "ended_at": time.time(),
            },
        )
        return 1
    for _, w in fds.values():
        os.close(w)  # the user process holds the write ends: EOF once it (and what it left) is gone
    if stdin != subprocess.DEVNULL:
        os.close(stdin)
    output = launch_output.OutputPump(run_dir, {stream: r for stream, (r, _) in fds.items()})
    st = lp.stat(proc.pid)
    me = lp.stat(os.getpid())
    pidinfo = {
        "schema_version": SCHEMA_VERSION,
        "run_id": doc["run_id"],
        "worker": doc["worker"],
        "pid": proc.pid,
        "pgid": proc.pid,
        "sid": proc.pid,
        "starttime": st["starttime"] if st else None,
        "supervisor_pid": os.getpid(),
        "supervisor_starttime": me["starttime"] if me else None,
        "started_at": time.time(),
        "python": doc["python"],
        "cwd": cwd,
    }
    lp.write_json_atomic(os.path.join(run_dir, lp.PID_FILE), pidinfo)

    stop_requested: list[int] = []

    def on_term(signum: int, frame: FrameType | None) -> None:  # `kill` of the supervisor itself ends the run too
        stop_requested.append(signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)

    status, ended_by = _wait(proc, run_dir, doc, stop_requested, pidinfo, output, stdin_holder)
    # What the process wrote before it ended is on disk before exit.json says it ended (all of it is
    # in the pipes by now; what processes it left behind write later is copied after exit.json).
    output.pump()
    code, sig = (None, -status) if status < 0 else (status, None)
    stop = lp.read_json(os.path.join(run_dir, lp.STOP_FILE))
    if ended_by == "timeout":
        reason = f"timed out after {doc.get('timeout'):g}s"
    elif ended_by.startswith("controller"):
        reason = ended_by
    elif stop:
        reason = f"stopped by orch ({stop.get('reason', 'stop')})"
    elif stop_requested:
        reason = "stopped: the supervisor received SIGTERM"
    elif sig:
        reason = f"killed by signal {sig} ({_signame(sig)})"
    else:
        reason = f"exit code {code}"
    lp.write_json_atomic(
        exit_path,
        {
            "schema_version": SCHEMA_VERSION,
            "exit_code": code,
            "signal": sig,
            "signal_name": _signame(sig) if sig else None,
            "reason": reason,
            "stopped": bool(stop or stop_requested or ended_by),
            "controller_gone": ended_by.startswith("controller"),
            "ended_at": time.time(),
            "lines": output.counts(),
        },
    )
    _finish_record(run_dir, code, sig, reason)
    # The leader is reaped: its group id is no longer ours to signal, the environment still is.
    leftovers = lp.terminate(
        lambda: lp.run_members(doc["run_id"], doc["worker"], pidinfo), grace=LEFTOVER_GRACE, pgid=None
    )
    if leftovers["term"]:
        _log(f"ended leftover processes of the run: {leftovers}")
    output.drain(idle=DRAIN_IDLE, limit=DRAIN_LIMIT)  # what the leftovers wrote, still into output.log
    output.close()
    return 0


def _wait(
    proc: subprocess.Popen[bytes],
    run_dir: str,
    doc: dict[str, Any],
    stop_requested: list[int],
    pidinfo: dict[str, Any],
    output: launch_output.OutputPump,
    stdin_holder: list[int],
) -> tuple[int, str]:
    """Wait for the user process; end its group on timeout, on our own SIGTERM, or (an attached run,
    after its release) when the controller lease goes silent. Returns (status, what ended it: "" when
    the process ended by itself, "timeout", or the controller's reason)."""
    timeout = doc.get("timeout")
    deadline = None
    controller: lease.Observer | None = None
    lease_path, lease_checked = os.path.join(run_dir, CONTROLLER_LEASE_FILE), 0.0
    gone = ""
    pidfd = None
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pass
    while True:
        status = proc.poll()
        if status is not None:
            _release_stdin(stdin_holder)
            return status, ""
        if stdin_holder and os.path.exists(os.path.join(run_dir, launch_stdin.EOF_MARK)):
            _release_stdin(stdin_holder)  # the controller's input ended: the process reads EOF
        if (deadline is None and timeout) or (controller is None and doc.get("attached")):
            release = lp.read_json(os.path.join(run_dir, lp.RELEASE_FILE))
            if release and timeout and deadline is None:
                # A backstop for detached runs: a watching controller ends the run first.
                deadline = release.get("release_at", time.time()) + timeout + TIMEOUT_SLACK
            if release and doc.get("attached") and controller is None:
                controller = lease.Observer(lease.CONTROLLER_LEASE_TTL)  # a full ttl from now
        if controller is not None and not gone and time.monotonic() - lease_checked >= LEASE_EVERY:
            lease_checked = time.monotonic()
            if not controller.see(lp.read_json(lease_path)):
                gone = (
                    f"controller gone: its lease was not renewed for {controller.silent_for():.0f}s "
                    f"(bound {lease.CONTROLLER_LEASE_TTL:g}s); an attached run ends with its controller"
                )
                _log(gone)
        if (deadline is not None and time.time() > deadline) or stop_requested or gone:
            ended_by = gone or ("" if stop_requested else "timeout")
            # End the group in a thread: output written while it ends (a handler's last words) is copied.
            ending = threading.Thread(
                target=lp.terminate,
                args=(lambda: lp.run_members(doc["run_id"], doc["worker"], pidinfo),),
                kwargs={"grace": doc.get("grace", 5.0), "pgid": lp.verified_pgid(pidinfo)},
                daemon=True,
            )
            ending.start()
            while ending.is_alive() or proc.poll() is None:
                output.drain(idle=0.05, limit=0.05)
                ending.join(0.01)
            proc.wait()
            _release_stdin(stdin_holder)
            return proc.returncode, ended_by
        try:
            watched = [*output.watched(), *([pidfd] if pidfd is not None else [])]
            ready, _, _ = select.select(watched, [], [], 0.5 if pidfd is not None else 0.02)
            output.pump(ready)
        except InterruptedError:
            pass


def _stdin(run_dir: str, doc: dict[str, Any]) -> tuple[Any, list[int]]:
    """The user process's stdin: /dev/null, or with `stdin` in the launch file the read end of a FIFO
    that hostside.launch_stdin fills (and a write end we hold until its end of input)."""
    if not doc.get("stdin"):
        return subprocess.DEVNULL, []
    path = os.path.join(run_dir, launch_stdin.FIFO)
    os.mkfifo(path, 0o600)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    holder = os.open(path, os.O_WRONLY)
    os.set_blocking(reader, True)
    return reader, [holder]


def _release_stdin(holder: list[int]) -> None:
    while holder:
        os.close(holder.pop())


def _finish_record(run_dir: str, code: int | None, sig: int | None, reason: str) -> None:
    """Complete the record's exit status when the launcher could not (killed, or never started)."""
    path = os.path.join(run_dir, lp.RECORD_FILE)
    record = lp.read_json(path)
    if record is None:
        return
    if record.get("exit") and record["exit"].get("source") == "launcher" and not sig:
        return
    record["exit"] = {
        **(record.get("exit") or {}),
        "code": code,
        "signal": sig,
        "reason": reason,
        "ended_at": time.time(),
        "source": "supervisor",
    }
    record["phase"] = "exited"
    lp.write_json_atomic(path, record)


def _signame(sig: int | None) -> str | None:
    if not sig:
        return None
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def main(argv: list[str]) -> int:
    return supervise(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
