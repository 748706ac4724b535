"""The worker's end of a held connection: one process that runs the holder's commands.

A connection holder (orchestrator.transport.persist) starts this once per held
connection, on a session of its own, and then sends it commands instead of
opening an SSH session for each. A session costs the worker sshd's session
setup and a login shell (6-10 ms of CPU for `true`); a command here costs
one fork and exec (about 1.3 ms). The same pattern as mitogen's or Ansible's
persistent remote interpreters, kept to what `orch` needs.

Protocol (stdin: requests, stdout: frames; nothing else is read or written):

- request, one JSON object per line:
  `{"id": N, "argv": [...], "env": {...}, "timeout": S}` runs argv (no shell) in a
  session and process group of its own, stdin /dev/null, the agent's
  environment updated with `env`; `{"id": N, "end": true}` ends command N as
  its timeout would.
- frame: `>IBI` (id, kind, length) then `length` bytes. Kinds: HELLO (id 0,
  JSON `{"agent": VERSION, "pid": P}`), STDOUT, STDERR (bytes as written), EXIT
  (JSON `{"code": C, "timed_out": bool}`; C is -1 for a command a signal ended,
  as an SSH session reports it; 127 when argv[0] cannot be found, 126 when it
  cannot be run, as a shell says).

A command's end is reported once it exited and both its streams are closed.
At its timeout its process group gets TERM, and KILL `KILL_AFTER` seconds later
if the command is still there; it also runs under `timeout -k` (when the worker
has coreutils' `timeout`), as a session's command does, so the bound holds even
for an agent that was SIGKILLed. When stdin ends (the
holder closed the session, or its connection died) every running command's
group gets TERM, then KILL, and the agent exits: nothing outlives the
connection that asked for it.

Started by the holder as `python3 -I -S -B -c BOOT orch-agent N` with this
file's N bytes first on stdin (it needs nothing shipped to the worker).
Standard library only.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import time
from typing import Any

VERSION = 1
HEADER = struct.Struct(">IBI")
HELLO, STDOUT, STDERR, EXIT = 0, 1, 2, 3
KILL_AFTER = 3.0  # seconds from TERM to KILL, as the sessions' `timeout -k 3`
# `timeout` exits 124 when it ends a command (a command may exit 124 on its own): an exit 124 that
# comes no sooner than the timeout after the start, less this much for clock granularity, is the
# wrapper's, whichever of the two noticed the deadline first.
TIMEOUT_SLACK = 0.1
READ = 1 << 16
WAKE = 0.5  # seconds: how often a job without a pidfd is looked at
TIMEOUT = shutil.which("timeout")  # coreutils' timeout, when the worker has it


def send(kind: int, ident: int, data: bytes) -> None:
    out = HEADER.pack(ident, kind, len(data)) + data
    while out:
        out = out[os.write(1, out) :]


class Job:
    def __init__(
        self, ident: int, proc: subprocess.Popen[bytes], timeout: float | None, started: float, wrapped: bool
    ) -> None:
        self.ident = ident
        self.proc = proc
        # from before the start: `timeout` (when `wrapped` in it) started after `started`, so it ends
        # the command at this instant at the earliest
        self.deadline = started + timeout if timeout else None
        self.wrapped = wrapped
        self.kill_at: float | None = None
        self.timed_out = False
        # fd -> (frame kind, the pipe's file object, which owns and closes the fd)
        pipes: list[tuple[int, Any]] = [(STDOUT, proc.stdout), (STDERR, proc.stderr)]
        self.streams: dict[int, tuple[int, Any]] = {pipe.fileno(): (kind, pipe) for kind, pipe in pipes}
        self.code: int | None = None
        self.pidfd: int | None = None
        try:
            self.pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            pass

    def signal_group(self, signo: int) -> None:
        try:
            os.killpg(self.proc.pid, signo)
        except OSError:
            pass

    def end(self) -> None:
        """TERM now and KILL later, as at the timeout."""
        if self.kill_at is None:
            self.signal_group(signal.SIGTERM)
            self.kill_at = time.monotonic() + KILL_AFTER

    def reap(self) -> None:
        if self.code is None:
            status = self.proc.poll()
            if status is not None:
                self.code = status if status >= 0 else -1
                at = self.deadline
                if status == 124 and self.wrapped and at is not None and time.monotonic() + TIMEOUT_SLACK >= at:
                    self.timed_out = True  # `timeout` saw the deadline before this agent did

    def finished(self) -> bool:
        return not self.streams and self.code is not None


class Agent:
    def __init__(self) -> None:
        self.jobs: dict[int, Job] = {}
        self.by_fd: dict[int, Job] = {}
        self.poller = select.poll()
        self.poller.register(0, select.POLLIN)
        self.pending = b""

    def start(self, request: dict[str, Any]) -> None:
        ident = int(request["id"])
        argv = [str(a) for a in request["argv"]]
        env = dict(os.environ)
        env.update({str(k): str(v) for k, v in (request.get("env") or {}).items()})
        timeout = request.get("timeout")
        # Under `timeout -k` as well, as a session's command is: that bound holds even if this agent
        # is SIGKILLed and cannot end the command itself.
        wrapped = [TIMEOUT, "-k", f"{KILL_AFTER:g}", f"{float(timeout):g}", *argv] if timeout and TIMEOUT else argv
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                wrapped,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        except (FileNotFoundError, NotADirectoryError):
            send(STDERR, ident, f"{argv[0] if argv else ''}: command not found\n".encode())
            send(EXIT, ident, b'{"code": 127, "timed_out": false}')
            return
        except (PermissionError, OSError) as exc:
            send(STDERR, ident, f"{argv[0] if argv else ''}: {exc.strerror or exc}\n".encode())
            send(EXIT, ident, b'{"code": 126, "timed_out": false}')
            return
        job = Job(ident, proc, float(timeout) if timeout else None, started, wrapped is not argv)
        self.jobs[ident] = job
        for fd in job.streams:
            os.set_blocking(fd, False)
            self.by_fd[fd] = job
            self.poller.register(fd, select.POLLIN)
        if job.pidfd is not None:
            self.by_fd[job.pidfd] = job
            self.poller.register(job.pidfd, select.POLLIN)

    def requests(self, data: bytes) -> None:
        self.pending += data
        while b"\n" in self.pending:
            line, self.pending = self.pending.split(b"\n", 1)
            request = json.loads(line)
            if request.get("end"):
                job = self.jobs.get(int(request["id"]))
                if job is not None:
                    job.end()
            else:
                self.start(request)

    def output(self, fd: int, job: Job) -> None:
        if fd == job.pidfd:
            job.reap()
            self.poller.unregister(fd)
            del self.by_fd[fd]
            os.close(fd)
            job.pidfd = None
            return
        try:
            data = os.read(fd, READ)
        except BlockingIOError:
            return
        if data:
            send(job.streams[fd][0], job.ident, data)
            return
        self.poller.unregister(fd)
        del self.by_fd[fd]
        job.streams.pop(fd)[1].close()

    def tick(self) -> float:
        """Timeouts, exits and ends; seconds until something needs a look again."""
        now = time.monotonic()
        wait = 60.0
        for ident, job in list(self.jobs.items()):
            if job.pidfd is None:
                job.reap()
            if job.deadline is not None and now >= job.deadline and job.kill_at is None:
                job.timed_out = True
                job.end()
            if job.kill_at is not None and now >= job.kill_at and (job.code is None or job.streams):
                job.signal_group(signal.SIGKILL)
                job.kill_at = now + KILL_AFTER  # again, should anything have survived
            if job.finished():
                del self.jobs[ident]
                doc = {"code": job.code, "timed_out": job.timed_out}
                send(EXIT, ident, json.dumps(doc).encode())
                continue
            if job.pidfd is None and job.code is None:
                wait = min(wait, WAKE)
            for instant in (job.deadline if job.kill_at is None else None, job.kill_at):
                if instant is not None:
                    wait = min(wait, max(instant - now, 0.0))
        return wait

    def serve(self) -> None:
        send(HELLO, 0, json.dumps({"agent": VERSION, "pid": os.getpid()}).encode())
        while True:
            wait = self.tick()
            for fd, _ in self.poller.poll(wait * 1000):
                if fd == 0:
                    data = os.read(0, READ)
                    if not data:
                        return
                    self.requests(data)
                else:
                    job = self.by_fd.get(fd)
                    if job is not None:
                        self.output(fd, job)

    def end_all(self) -> None:
        """The holder is gone: end every running command (TERM, then KILL)."""
        for job in self.jobs.values():
            job.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + KILL_AFTER
        while time.monotonic() < deadline and any(j.proc.poll() is None for j in self.jobs.values()):
            time.sleep(0.05)
        for job in self.jobs.values():
            job.signal_group(signal.SIGKILL)
            job.proc.poll()


def main() -> int:
    agent = Agent()
    try:
        agent.serve()
    finally:
        agent.end_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
