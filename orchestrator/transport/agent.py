"""A connection holder's end of a worker's agent (hostside/agent.py): commands without a session each.

A held connection runs one agent on one session; a command is then a request
line and a few frames on that channel instead of a session's open, exec,
window and close messages, and on the worker one fork and exec instead of
sshd's session and a login shell. The agent takes argv as a JSON list (no
shell parses it), enforces the command's timeout itself (TERM to its process
group, KILL 3 s later) and ends every command it runs when its channel closes.
Commands with a stdin stream still get a session of their own (fabric.py).
"""

from __future__ import annotations

import codecs
import itertools
import json
import locale
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostside import agent as hostside_agent
from hostside.agent import EXIT, HEADER, HELLO, STDERR, STDOUT, VERSION
from orchestrator.transport.channel import Outcome
from orchestrator.transport.protocol import command_line

SOURCE = Path(hostside_agent.__file__).read_bytes()
# Reads exactly N bytes of source from stdin (no read-ahead: the requests follow) and runs them.
BOOT = (
    "import os,sys\n"
    "n=int(sys.argv[2]);s=b''\n"
    "while len(s)<n:\n"
    " c=os.read(0,n-len(s))\n"
    " if not c:sys.exit(3)\n"
    " s+=c\n"
    "exec(compile(s,'hostside/agent.py','exec'))"
)
START_TIMEOUT = 15.0  # seconds for an agent to say hello


class AgentGone(Exception):
    """The agent's channel ended; the message says what is known of why."""


@dataclass
class _Job:
    on_text: Callable[[str, str], object] | None
    keep_chunks: int | None
    decoders: dict[str, Any]
    captured: dict[str, list[str]] = field(default_factory=lambda: {"stdout": [], "stderr": []})
    done: threading.Event = field(default_factory=threading.Event)
    code: int = -1
    timed_out: bool = False
    gone: str | None = None

    def text(self, stream: str, data: bytes, final: bool = False) -> None:
        text = self.decoders[stream].decode(data, final=final)
        if not text:
            return
        chunks = self.captured[stream]
        chunks.append(text)
        if self.keep_chunks is not None and len(chunks) > 2 * self.keep_chunks:
            del chunks[: -self.keep_chunks]
        if self.on_text is not None:
            try:
                self.on_text(stream, text)
            except Exception:
                self.on_text = None  # the output's reader failed (its client is gone); keep reading the agent

    def outcome(self) -> Outcome:
        return Outcome(self.code, "".join(self.captured["stdout"]), "".join(self.captured["stderr"]), self.timed_out)


class JobHandle:
    """What an operation holds for a command it runs on an agent: closing it ends the command."""

    def __init__(self, agent: WorkerAgent, ident: int) -> None:
        self.agent, self.ident = agent, ident

    def close(self) -> None:
        self.agent.end(self.ident)


class WorkerAgent:
    """One worker's agent on a session of a held connection; `run` is safe from any thread."""

    def __init__(self, channel: Any, pid: int) -> None:
        self.channel = channel
        self.transport = channel.get_transport()
        self.pid = pid
        self.gone: str | None = None
        self._jobs: dict[int, _Job] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._encoding = locale.getpreferredencoding(False) or "utf-8"
        threading.Thread(target=self._read, daemon=True, name="orch-agent-reader").start()

    @classmethod
    def start(cls, transport: Any, python: str, timeout: float = START_TIMEOUT) -> WorkerAgent:
        """Start an agent on a new session of the open paramiko `transport`; raises AgentGone if it does not
        say hello within `timeout` seconds."""
        channel = transport.open_session(timeout=timeout)
        try:
            channel.settimeout(timeout)
            channel.exec_command(command_line([python, "-I", "-S", "-B", "-c", BOOT, "orch-agent", str(len(SOURCE))]))
            channel.sendall(SOURCE)
            ident, kind, data = _frame(channel)
            hello = json.loads(data) if kind == HELLO else {}
            if hello.get("agent") != VERSION:
                raise AgentGone(f"no agent hello (frame {kind}): {_stderr_of(channel) or data[:200]!r}")
            channel.settimeout(None)
            return cls(channel, int(hello.get("pid", 0)))
        except Exception as exc:
            reason = _stderr_of(channel)
            channel.close()
            if isinstance(exc, AgentGone):
                raise
            raise AgentGone(f"{exc.__class__.__name__}: {exc}" + (f" ({reason})" if reason else "")) from exc

    @property
    def alive(self) -> bool:
        return self.gone is None and self.transport is not None and self.transport.is_active()

    def run(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None,
        timeout: float,
        wait: float,
        *,
        on_text: Callable[[str, str], object] | None = None,
        keep_chunks: int | None = None,
        track: Callable[[JobHandle], None] | None = None,
    ) -> Outcome | None:
        """Run argv with `timeout` on the worker; its Outcome, or None when no end was reported within
        `wait` seconds (the caller gives up). Raises AgentGone when the agent's channel ends first."""
        decoders = {s: codecs.getincrementaldecoder(self._encoding)("replace") for s in ("stdout", "stderr")}
        job = _Job(on_text, keep_chunks, decoders)
        with self._lock:
            if self.gone is not None:
                raise AgentGone(self.gone)
            ident = next(self._ids)
            self._jobs[ident] = job
        if track is not None:
            track(JobHandle(self, ident))
        request = {"id": ident, "argv": [str(a) for a in argv], "env": dict(env or {}), "timeout": timeout}
        try:
            self._send(request)
        except Exception as exc:
            self._lost(f"{exc.__class__.__name__}: {exc}")
        if not job.done.wait(wait):
            with self._lock:
                self._jobs.pop(ident, None)
            return None
        if job.gone is not None:
            raise AgentGone(job.gone)
        return job.outcome()

    def end(self, ident: int) -> None:
        """End command `ident` as its timeout would (the agent ignores one that has ended)."""
        if self.gone is None:
            try:
                self._send({"id": ident, "end": True})
            except Exception:
                pass

    def close(self) -> None:
        """Close the agent's session: the agent ends every command it runs and exits."""
        self._lost("closed by the holder")
        try:
            self.channel.close()
        except Exception:
            pass

    def _send(self, doc: dict[str, Any]) -> None:
        line = (json.dumps(doc) + "\n").encode()
        with self._send_lock:
            self.channel.sendall(line)

    def _read(self) -> None:
        try:
            while True:
                ident, kind, data = _frame(self.channel)
                with self._lock:
                    job = self._jobs.get(ident)
                if job is None:
                    continue
                if kind in (STDOUT, STDERR):
                    job.text("stdout" if kind == STDOUT else "stderr", data)
                elif kind == EXIT:
                    end = json.loads(data)
                    for stream in ("stdout", "stderr"):
                        job.text(stream, b"", final=True)
                    job.code, job.timed_out = int(end["code"]), bool(end.get("timed_out"))
                    with self._lock:
                        self._jobs.pop(ident, None)
                    job.done.set()
        except Exception as exc:
            reason = _stderr_of(self.channel)
            status = self.channel.exit_status if self.channel.exit_status_ready() else None
            what = "its session ended" if isinstance(exc, EOFError) else f"{exc.__class__.__name__}: {exc}"
            self._lost(what + (f", exit {status}" if status is not None else "") + (f": {reason}" if reason else ""))

    def _lost(self, reason: str) -> None:
        with self._lock:
            if self.gone is None:
                self.gone = f"the worker's agent (pid {self.pid}) is gone: {reason}"
            jobs, self._jobs = list(self._jobs.values()), {}
        for job in jobs:
            job.gone = self.gone
            job.done.set()


def _frame(channel: Any) -> tuple[int, int, bytes]:
    ident, kind, size = HEADER.unpack(_exactly(channel, HEADER.size))
    return ident, kind, _exactly(channel, size)


def _exactly(channel: Any, n: int) -> bytes:
    parts, left = [], n
    while left:
        chunk = channel.recv(min(left, 1 << 16))
        if not chunk:
            raise EOFError("the agent's session ended")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _stderr_of(channel: Any) -> str:
    """What the agent's session wrote on stderr so far (a traceback, a missing interpreter), briefly."""
    out = b""
    try:
        while channel.recv_stderr_ready() and len(out) < 1 << 16:
            chunk = channel.recv_stderr(4096)
            if not chunk:
                break
            out += chunk
    except Exception:
        pass
    text = out.decode("utf-8", "replace").strip().splitlines()
    return " | ".join(text[-3:])[:300]
