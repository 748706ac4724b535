"""The worker agent (hostside/agent.py) and its holder-side client (transport/agent.py), on a local process.

The agent runs here as it does on a worker, started by the same boot line with its source on stdin;
only sshd's session is replaced by a pipe to a local process (the local slice's tests in
test_warm_slice.py run it on real sshd workers through the holder).
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
import time

import pytest
from waiting import wait_for

from hostside import agent as hostside_agent
from orchestrator.transport import agent as client


class LocalSession:
    """A paramiko channel's surface, over a local `sh -c LINE` with pipes."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.timeout: float | None = None

    # paramiko's Transport, as far as WorkerAgent uses it
    def open_session(self, timeout: float | None = None) -> LocalSession:
        return self

    def is_active(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def get_transport(self) -> LocalSession:
        return self

    # paramiko's Channel
    def settimeout(self, timeout: float | None) -> None:
        self.timeout = timeout

    def exec_command(self, line: str) -> None:
        self.proc = subprocess.Popen(
            ["sh", "-c", line], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )

    def sendall(self, data: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def recv(self, n: int) -> bytes:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        if self.timeout is not None and not select.select([fd], [], [], self.timeout)[0]:
            raise TimeoutError("no data")
        return os.read(fd, n)

    def recv_stderr_ready(self) -> bool:
        assert self.proc is not None and self.proc.stderr is not None
        return bool(select.select([self.proc.stderr.fileno()], [], [], 0)[0])

    def recv_stderr(self, n: int) -> bytes:
        assert self.proc is not None and self.proc.stderr is not None
        return os.read(self.proc.stderr.fileno(), n)

    def exit_status_ready(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    @property
    def exit_status(self) -> int:
        assert self.proc is not None
        return self.proc.returncode

    def close(self) -> None:
        if self.proc is not None and self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass


@pytest.fixture
def agent():
    session = LocalSession()
    a = client.WorkerAgent.start(session, sys.executable)
    try:
        yield a
    finally:
        a.close()
        assert session.proc is not None
        session.proc.wait(timeout=30)


def gone(tag: str) -> bool:
    return subprocess.run(["pgrep", "-f", tag], capture_output=True).returncode != 0


def in_thread(a: client.WorkerAgent, argv: list[str], timeout: float) -> tuple[threading.Thread, list[BaseException]]:
    """Run argv on `a` in a thread of its own (started); the list gets the AgentGone it raises."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            a.run(argv, None, timeout, 300)
        except client.AgentGone as exc:
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, raised


def test_a_command_gets_its_exit_code_its_two_streams_and_its_env(agent):
    out = agent.run(["sh", "-c", 'echo "out $X"; echo err >&2; exit 7'], {"X": "y z"}, 30, 40)
    assert (out.exited, out.stdout, out.stderr, out.timed_out) == (7, "out y z\n", "err\n", False)
    assert agent.run(["true"], None, 30, 40).exited == 0
    shell_like = agent.run(["sh", "-c", "kill -KILL $$"], None, 30, 40)
    assert shell_like.exited == -1  # a signal's end, as an SSH session reports it
    missing = agent.run(["no-such-program-here"], None, 30, 40)
    assert missing.exited == 127 and "no-such-program-here" in missing.stderr
    quoted = agent.run(["printf", "%s|", "a b", "$HOME", "'; rm -rf /'"], None, 30, 40)
    assert quoted.stdout == "a b|$HOME|'; rm -rf /'|"  # argv as given: no shell on the way


def test_a_command_reads_end_of_file_on_stdin_and_big_output_arrives_whole(agent):
    assert agent.run(["cat"], None, 30, 40).stdout == ""
    big = agent.run(["sh", "-c", "head -c 5000000 /dev/zero | tr '\\0' x; echo; seq 1 20000 >&2"], None, 60, 70)
    assert big.stdout == "x" * 5_000_000 + "\n"
    assert big.stderr.splitlines() == [str(i) for i in range(1, 20001)]


def test_output_streams_as_it_comes_and_undecodable_bytes_are_replaced(agent):
    seen: list[tuple[str, str]] = []
    out = agent.run(
        ["sh", "-c", "echo one; printf '\\377\\n'; echo two >&2"],
        None,
        30,
        40,
        on_text=lambda s, t: seen.append((s, t)),
    )
    assert "".join(t for s, t in seen if s == "stdout") == out.stdout == "one\n\ufffd\n"
    assert out.stderr == "two\n"


def test_a_timeout_ends_the_commands_whole_process_group(agent):
    child, command = f"sleep 300.{os.getpid()}", f"sleep 301.{os.getpid()}"  # unique: found by pgrep
    seen: list[bool] = []
    watcher = threading.Timer(0.3, lambda: seen.append(not gone(child) and not gone(command)))
    watcher.start()
    out = agent.run(["sh", "-c", f"{child} & {command}"], None, 1.0, 10)
    watcher.join()
    assert seen == [True], "both ran before the timeout"
    assert out is not None and out.timed_out
    wait_for(lambda: gone(child) and gone(command), 10, "the command and its child ended")


@pytest.mark.parametrize(
    ("ran_for", "timeout", "timed_out"),
    [
        (5.0, 1.0, True),  # `timeout` ended it at the deadline, before the agent's own look at the clock
        (0.0, 30.0, False),  # the command's own exit 124, long before the deadline
    ],
)
def test_an_exit_124_is_the_timeouts_only_when_it_comes_at_the_deadline(ran_for, timeout, timed_out):
    proc = subprocess.Popen(["sh", "-c", "exit 124"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.wait()
    job = hostside_agent.Job(7, proc, timeout, started=time.monotonic() - ran_for, wrapped=True)
    job.reap()
    assert job.code == 124 and job.timed_out is timed_out
    for _, pipe in job.streams.values():
        pipe.close()
    if job.pidfd is not None:
        os.close(job.pidfd)


def test_a_command_that_ignores_term_is_killed_after_the_grace(agent):
    out = agent.run(["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"], None, 0.3, 20)
    assert out is not None and out.timed_out


def test_commands_run_at_once_and_each_gets_its_own_answer(agent):
    answers: dict[int, object] = {}

    def one(i: int) -> None:
        answers[i] = agent.run(["sh", "-c", f"sleep 0.$((RANDOM % 3)) 2>/dev/null; echo {i}"], None, 30, 40)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {i: a.stdout for i, a in answers.items()} == {i: f"{i}\n" for i in range(24)}  # type: ignore[attr-defined]


def test_a_caller_that_gives_up_gets_none_and_ending_the_command_stops_it(agent):
    tag = f"sleep 302.{os.getpid()}"
    handles: list[client.JobHandle] = []
    assert agent.run(tag.split(), None, 300, 0.3, track=handles.append) is None
    assert not gone(tag)
    handles[0].close()
    wait_for(lambda: gone(tag), 10, "the ended command gone")
    assert agent.run(["echo", "still here"], None, 30, 40).stdout == "still here\n"


def test_closing_the_agent_ends_what_it_runs_and_a_later_run_says_it_is_gone():
    session = LocalSession()
    a = client.WorkerAgent.start(session, sys.executable)
    tag = f"sleep 303.{os.getpid()}"
    waiting, raised = in_thread(a, tag.split(), 300)
    wait_for(lambda: not gone(tag), 10, "the command running")
    a.close()
    waiting.join(10)
    assert not waiting.is_alive() and "closed by the holder" in str(raised[0])
    assert session.proc is not None and session.proc.wait(timeout=30) == 0
    assert gone(tag)
    with pytest.raises(client.AgentGone, match="closed by the holder"):
        a.run(["true"], None, 30, 40)
    assert not a.alive


def test_an_agent_that_dies_fails_its_running_commands_and_they_still_end_at_their_timeout():
    session = LocalSession()
    a = client.WorkerAgent.start(session, sys.executable)
    tag = f"sleep 304.{os.getpid()}"
    t, result = in_thread(a, tag.split(), 2.0)
    wait_for(lambda: not gone(tag), 10, "the command running")
    os.kill(a.pid, 9)  # nothing is left to end the command but its `timeout -k` wrapper
    t.join(10)
    assert result and "is gone" in str(result[0])
    assert not a.alive
    wait_for(lambda: gone(tag), 15, "the command ended by its timeout")


def test_an_interpreter_that_cannot_run_the_agent_is_reported():
    with pytest.raises(client.AgentGone, match="no-such-python"):
        client.WorkerAgent.start(LocalSession(), "no-such-python", timeout=5)
