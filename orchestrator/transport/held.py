"""The connection holder's transport: held connections, shared by the commands it serves, and the
worker agents that run their commands (hostside/agent.py, transport/agent.py).

`HeldTransport` is a `FabricTransport` that counts the connections it opens,
lets one operation's channels (and agent commands) be closed when its client
goes away (`current`), shares one connection and one SFTP session per worker
between commands, and runs a command without stdin on the worker's agent once
that is up (started beside the connection's first command).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from orchestrator.transport.agent import AgentGone, WorkerAgent
from orchestrator.transport.ending import KILL_AFTER
from orchestrator.transport.fabric import CLIENT_GRACE, FabricTransport, _chain
from orchestrator.transport.failures import classify_exception
from orchestrator.transport.hostkeys import read_known_hosts
from orchestrator.transport.output import STREAMED_KEEP_CHUNKS, line_writers, remote_runner_class
from orchestrator.transport.protocol import LineCallback, Result, Stdin

log = logging.getLogger("orchestrator.transport.persist")

# Agents (hostside/agent.py) run the held connections' commands unless this is "0" in the holder's environment.
AGENT_ENV = "ORCH_SSH_AGENT"
# A worker whose agent failed to start, or ended on its own, this many times gets sessions only.
AGENT_TRIES = 3
# Agents starting at once: each is an interpreter's start on its worker (about 20 ms of CPU), and a
# 256-worker fleet's first command should not wait behind 256 of them on a machine of few cores.
AGENT_STARTS = 8
current = threading.local()  # the channels of the operation this thread works for


def _tracked_runner_class() -> type:
    """The transport's remote runner, recording each channel it opens for the operation at hand."""
    base = remote_runner_class()

    class TrackedRemote(base):  # type: ignore[misc,valid-type]  # fabric has no type hints
        def start(self, command: str, shell: str, env: dict[str, str], timeout: float | None = None) -> None:
            super().start(command, shell, env, timeout=timeout)
            channels = getattr(current, "channels", None)
            if channels is not None:
                channels.append(self.channel)

    return TrackedRemote


class HeldTransport(FabricTransport):
    """A FabricTransport that counts the connections it opens and lets an operation's channels be closed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connects: dict[str, int] = {}
        self.reconnects: dict[str, int] = {}
        self._runner = _tracked_runner_class()
        self._opening: dict[str, threading.Lock] = {}
        self._copying: dict[str, threading.Lock] = {}
        self.use_agents = os.environ.get(AGENT_ENV, "1") != "0"
        self._agents: dict[str, WorkerAgent] = {}
        self._agent_starting: set[str] = set()
        self._agent_failures: dict[str, int] = {}
        self._agent_starts = threading.Semaphore(AGENT_STARTS)

    def _connection(self, name: str) -> Any:
        # Commands share the holder: two asking for the same worker at once open one connection.
        with self._conn_lock:
            lock = self._opening.setdefault(name, threading.Lock())
        with lock:
            conn = super()._connection(name)
        self._agent(name, conn)  # a new connection's agent starts beside its first command
        return conn

    # -- agents ----------------------------------------------------------------

    def run_one(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: Stdin = None,
        on_line: LineCallback | None = None,
        end_on_timeout: bool = False,
    ) -> Result:
        """On the worker's agent when it has one (a command with stdin gets a session: fabric.py)."""
        with self._conn_lock:
            conn = self._connections.get(name)
        agent = self._agent(name, conn) if stdin is None and conn is not None else None
        if agent is None:
            return super().run_one(
                name, argv, env=env, timeout=timeout, stdin=stdin, on_line=on_line, end_on_timeout=end_on_timeout
            )
        timeout = self.command_timeout if timeout is None else timeout
        start = time.monotonic()
        writers = line_writers(name, on_line) if on_line is not None else {}
        channels = getattr(current, "channels", None)

        def failed(error: str, kind: str) -> Result:
            return Result(name, tuple(argv), None, elapsed=time.monotonic() - start, error=error, error_kind=kind)

        try:
            res = agent.run(
                argv,
                env,
                timeout,
                timeout + KILL_AFTER + CLIENT_GRACE,  # its agent TERMs at the timeout and KILLs 3 s later
                on_text=(lambda s, text: writers[s].write(text)) if writers else None,
                keep_chunks=STREAMED_KEEP_CHUNKS if writers else None,
                track=channels.append if channels is not None else None,
            )
        except AgentGone as exc:
            if not agent.transport.is_active():  # the connection itself died: as a session's command would see
                self._drop(name)
                return failed(f"the connection to {name} was lost mid-command ({exc})", "connect")
            return failed(str(exc), "remote")
        finally:
            for w in writers.values():
                w.flush_rest()
        if res is None:
            # No end within the timeout and the agent's KILL: the worker does not answer. Dropping the
            # connection closes the agent's session; the agent ends its commands when it sees that.
            self._drop(name)
            return failed(
                f"timed out after {timeout:g}s; still being ended on the worker "
                "(its agent ends every command it runs when its connection closes)",
                "timeout",
            )
        elapsed = time.monotonic() - start
        if res.timed_out:
            return Result(
                host=name,
                argv=tuple(argv),
                exit_code=None,
                stdout=res.stdout,
                stderr=res.stderr,
                elapsed=elapsed,
                error=f"timed out after {timeout:g}s; ended on the worker",
                error_kind="timeout",
            )
        return Result(
            host=name, argv=tuple(argv), exit_code=res.exited, stdout=res.stdout, stderr=res.stderr, elapsed=elapsed
        )

    def _agent(self, name: str, conn: Any) -> WorkerAgent | None:
        """The agent on `conn` when it is up; else None, starting one in the background if it may."""
        transport = getattr(conn, "transport", None)
        if not self.use_agents or transport is None or getattr(conn, "forward_agent", False):
            return None  # agent forwarding is asked for per session: such a worker gets sessions
        with self._conn_lock:
            agent = self._agents.get(name)
            if agent is not None and agent.alive and agent.transport is transport:
                return agent
            if agent is not None:
                del self._agents[name]
                if transport.is_active() and agent.transport is transport:
                    self._agent_failures[name] = self._agent_failures.get(name, 0) + 1  # it ended on its own
            if name in self._agent_starting or self._agent_failures.get(name, 0) >= AGENT_TRIES:
                return None
            if not transport.is_active():
                return None
            self._agent_starting.add(name)
        threading.Thread(target=self._start_agent, args=(name, transport), daemon=True, name="orch-agent-start").start()
        return None

    def _start_agent(self, name: str, transport: Any) -> None:
        try:
            with self._agent_starts:
                agent = WorkerAgent.start(transport, self.workers[name].python)
        except Exception as exc:
            log.info("%s: no agent, commands get sessions (%s)", name, exc)
            with self._conn_lock:
                self._agent_failures[name] = self._agent_failures.get(name, 0) + 1
                self._agent_starting.discard(name)
            return
        with self._conn_lock:
            self._agent_starting.discard(name)
            conn = self._connections.get(name)
            if getattr(conn, "transport", None) is transport:
                self._agents[name] = agent
                return
        agent.close()  # its connection was dropped meanwhile

    def agents(self) -> dict[str, int]:
        """The workers whose agent is up, with its pid on the worker."""
        with self._conn_lock:
            return {n: a.pid for n, a in sorted(self._agents.items()) if a.alive}

    def _drop(self, name: str) -> None:
        with self._conn_lock:
            agent = self._agents.pop(name, None)
        if agent is not None:
            agent.close()
        super()._drop(name)

    def _copy(self, name: str, argv: tuple[str, ...], remote: str, transfer: Callable[[Any], object]) -> Result:
        # A held connection has one SFTP session, and commands share it: one transfer at a time.
        with self._conn_lock:
            lock = self._copying.setdefault(name, threading.Lock())
        with lock:
            return super()._copy(name, argv, remote, transfer)

    def failure(self, name: str, argv: Sequence[str], exc: BaseException, elapsed: float) -> Result:
        import paramiko

        if isinstance(exc, paramiko.ChannelException) and self.is_held(name):
            # The worker refused one more session on a live connection (sshd's MaxSessions): the
            # connection carries other commands' sessions, so it is kept.
            kind, text = classify_exception(exc, self, name)
            text += " (the worker refused another session on the held connection; sshd MaxSessions?)"
            return Result(host=name, argv=tuple(argv), exit_code=None, elapsed=elapsed, error=text, error_kind=kind)
        return super().failure(name, argv, exc, elapsed)

    def _open_session(self, conn: Any) -> Any:
        # A command read on its session directly: its channel is the operation's, as TrackedRemote's.
        session = super()._open_session(conn)
        channels = getattr(current, "channels", None)
        if channels is not None:
            channels.append(session)
        return session

    def _build_connection(self, name: str) -> Any:
        conn = super()._build_connection(name)
        conn.config.runners.remote = self._runner
        with self._conn_lock:
            self.connects[name] = self.connects.get(name, 0) + 1
        return conn

    def held(self) -> list[str]:
        with self._conn_lock:
            return sorted(n for n, c in self._connections.items() if c.is_connected)

    def is_held(self, name: str) -> bool:
        with self._conn_lock:
            conn = self._connections.get(name)
        return conn is not None and conn.is_connected

    def drop_all(self) -> None:
        for name in list(self._connections):
            self._drop(name)


def _still_trusted(t: HeldTransport, name: str) -> bool:
    """Whether known_hosts, as it is now, still accepts every host key of `name`'s held connection chain."""
    import paramiko

    try:
        with t._conn_lock:
            conn = t._connections.get(name)
        if conn is None:
            return False
        known = read_known_hosts(t.known_hosts_path)
        keys = paramiko.HostKeys()
        known.add_to(keys)
        for c in _chain(conn):
            transport = c.client.get_transport()
            if transport is None or not transport.is_active():
                return False
            key = transport.get_remote_server_key()
            port = c.port or 22
            # the name paramiko looks a server up by in known_hosts
            looked_up = c.host if port == 22 else f"[{c.host}]:{port}"
            if known.revoked_line(key) is not None or not keys.check(looked_up, key):
                return False
        return True
    except Exception:
        return False
