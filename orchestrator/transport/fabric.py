"""The real Transport over SSH (Fabric/paramiko): run, put, get, close and fan-out.

`FabricTransport` keeps one reused connection per worker, runs commands in a
thread pool, and turns every failure into that worker's `Result`. Every
connection, including every ProxyJump hop, is checked against known_hosts by
`hostkeys._HostKeyPolicy`; a command the client gave up on is ended on the
worker by `ending.end_task`.
"""

from __future__ import annotations

import io
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from orchestrator.errors import OrchError
from orchestrator.transport.algorithms import transport_class
from orchestrator.transport.channel import Outcome, exec_command, supported
from orchestrator.transport.ending import KILL_AFTER, TASK_TAG, end_task
from orchestrator.transport.failures import _sftp_refusal, classify_exception
from orchestrator.transport.hostkeys import _HostKeyPolicy, read_known_hosts
from orchestrator.transport.limits import ensure_open_files
from orchestrator.transport.output import STREAMED_KEEP_CHUNKS, LineWriter, line_writers, remote_runner_class
from orchestrator.transport.protocol import (
    FanOut,
    LineCallback,
    LocalPath,
    LocalSource,
    Result,
    Stdin,
    command_line,
    source_name,
)
from orchestrator.transport.replay import DirectConnection, record
from orchestrator.workers import WorkerRef

if TYPE_CHECKING:  # the fleet model imports pydantic: a replayed `orch exec` (replay.py) never needs it
    from orchestrator.fleet import Fleet

# paramiko logs connection failures itself (e.g. "Exception (client): Error
# reading SSH protocol banner"); we report them per host instead.
logging.getLogger("paramiko").setLevel(logging.CRITICAL)
# The remote `timeout` normally ends a slow command; the client gives up on
# the channel itself this much later (a hung host never answers at all).
CLIENT_GRACE = 0.5
# `timeout` exits 124 when it ends a command, but a command may exit 124 on
# its own: only an exit that comes at the deadline (less this much for clock
# granularity) is the wrapper's.
TIMEOUT_SLACK = 0.1
# Like OpenSSH's ServerAliveInterval: idle reused connections survive NAT and
# firewall idle limits, and a dead peer breaks the transport between
# operations instead of at the next one.
KEEPALIVE_INTERVAL = 15
# SFTP copies have no total limit (a torch wheel is GBs on a slow link) but a
# limit on silence: a healthy sshd answers every SFTP request (open, write
# ack, stat, close) in well under a second, so this long without a byte
# means the worker is hung (SIGSTOPped, stalled kernel, dead link).
TRANSFER_IDLE_TIMEOUT = 30.0


class _ClientGaveUp(Exception):
    """`channel.exec_command` reached the client's deadline (invoke raises CommandTimedOut)."""

    def __init__(self, result: Outcome) -> None:
        super().__init__("timed out")
        self.result = result


class SshOptions(Protocol):
    """The fleet's `ssh:` settings a transport reads (the pydantic `SshSettings`, or a replayed copy)."""

    @property
    def connect_timeout(self) -> float: ...

    @property
    def command_timeout(self) -> float: ...

    @property
    def max_parallel(self) -> int: ...

    @property
    def host_key_policy(self) -> str: ...

    @property
    def known_hosts(self) -> str | None: ...

    @property
    def config_file(self) -> str | None: ...


def _run_invoke(conn: Any, line: str, kwargs: dict[str, Any]) -> Any:
    """`conn.run` (invoke's runner: commands with stdin); its client timeout raised as `_ClientGaveUp`."""
    from invoke.exceptions import CommandTimedOut

    try:
        return conn.run(line, **kwargs)
    except CommandTimedOut as exc:
        raise _ClientGaveUp(Outcome(-1, exc.result.stdout, exc.result.stderr, timed_out=True)) from None


class FabricTransport(FanOut):
    """The real `Transport`: parallel SSH to a set of workers, one reused connection per worker."""

    def __init__(
        self,
        workers: Iterable[WorkerRef],
        settings: SshOptions | None = None,
        *,
        known_hosts: Path | None = None,
        base_dir: Path | None = None,
        host_key_policy: str | None = None,
        connect_timeout: float | None = None,
        command_timeout: float | None = None,
        max_parallel: int | None = None,
        transfer_timeout: float | None = None,
        replay: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        if settings is None:
            from orchestrator.fleet import SshSettings

            settings = SshSettings.model_validate({})
        self.workers = {w.name: w for w in workers}
        ensure_open_files(len(self.workers))
        self.base_dir = base_dir or Path.cwd()
        self.connect_timeout = connect_timeout or settings.connect_timeout
        self.command_timeout = command_timeout or settings.command_timeout
        self.max_parallel = max_parallel or settings.max_parallel
        # seconds an SFTP copy may go without a byte from the worker (see TRANSFER_IDLE_TIMEOUT)
        self.transfer_timeout = transfer_timeout or max(TRANSFER_IDLE_TIMEOUT, self.connect_timeout)
        self.host_key_policy = host_key_policy or settings.host_key_policy
        if known_hosts is None and settings.known_hosts:
            known_hosts = Path(os.path.expanduser(settings.known_hosts))
            if not known_hosts.is_absolute():
                known_hosts = self.base_dir / known_hosts
        self.known_hosts_path = known_hosts or Path(os.path.expanduser("~/.ssh/known_hosts"))
        self.ssh_config_path: str | None = None
        if settings.config_file:
            path = Path(os.path.expanduser(settings.config_file))
            self.ssh_config_path = str(path if path.is_absolute() else self.base_dir / path)
        self.known_hosts_display = str(self.known_hosts_path)
        self.accepted_keys: list[tuple[str, str, str]] = []
        self.memo: dict[str, Any] = {}  # per-command caches of callers (e.g. which workers have hostside)
        self._known_hosts_lock = threading.Lock()
        self._connections: dict[str, Any] = {}
        self._conn_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=self.max_parallel, thread_name_prefix="orch-ssh")
        # worker -> what Fabric resolved for it: given (a replayed `orch exec`, replay.py), or
        # recorded here from each direct connection made, for the next command to replay
        self.replay = dict(replay or {})
        self.resolved: dict[str, dict[str, Any]] = {}

    # -- connections -------------------------------------------------------

    def _connection(self, name: str) -> Any:
        with self._conn_lock:
            conn = self._connections.get(name)
        if conn is not None and conn.is_connected:
            return conn
        conn = self._build_connection(name)
        try:
            conn.open()
            for c in _chain(conn):
                c.transport.set_keepalive(KEEPALIVE_INTERVAL)
        except BaseException:
            _close_chain(conn)
            raise
        resolved = record(conn) if name not in self.replay else None
        with self._conn_lock:
            self._connections[name] = conn
            if resolved is not None:
                self.resolved[name] = resolved
        return conn

    def _build_connection(self, name: str) -> Any:
        """An unopened Fabric connection to a worker, with its gateway chain, every hop checked
        (a replayed worker's: a `DirectConnection`, checked the same way)."""
        w = self.workers[name]
        if name in self.replay:
            direct = DirectConnection(self.replay[name])
            self._check_keys(direct, w, "")
            return direct
        from fabric import Config

        key_file = None
        if w.identity_file:
            key = Path(os.path.expanduser(w.identity_file))
            key_file = str(key if key.is_absolute() else self.base_dir / key)
        overrides = {"runners": {"remote": remote_runner_class()}}
        config = (
            Config(runtime_ssh_path=self.ssh_config_path, overrides=overrides)
            if self.ssh_config_path
            else Config(overrides=overrides)
        )
        conn = self._checked_connection(w.host, w, config, user=w.user, port=w.port, key_file=key_file)
        conn.gateway = self._gateway(conn, w, config, ())
        return conn

    def _checked_connection(
        self,
        host: str,
        w: WorkerRef,
        config: Any,
        *,
        user: str | None = None,
        port: int | None = None,
        key_file: str | None = None,
        role: str = "",
    ) -> Any:
        """A Connection with our host-key policy, known_hosts and timeouts (no gateway yet)."""
        from fabric import Connection

        connect_kwargs: dict[str, Any] = {
            "banner_timeout": self.connect_timeout,
            "auth_timeout": self.connect_timeout,
            "channel_timeout": self.connect_timeout,
            "transport_factory": transport_class(),  # cheapest secure algorithms first (algorithms.py)
        }
        if key_file:
            connect_kwargs["key_filename"] = key_file
            connect_kwargs["look_for_keys"] = False
        # gateway=False: Fabric must not build a gateway from ssh_config itself (unchecked hops).
        conn = Connection(
            host,
            user=user,
            port=port,
            config=config,
            gateway=False,
            connect_timeout=max(1, int(round(self.connect_timeout))),
            connect_kwargs=connect_kwargs,
        )
        self._check_keys(conn, w, role)
        return conn

    def _check_keys(self, conn: Any, w: WorkerRef, role: str) -> None:
        """Our host-key policy and known_hosts on `conn`'s client (read here, not by paramiko: a bad
        line is skipped and named, @revoked and @cert-authority honoured)."""
        known = read_known_hosts(self.known_hosts_path, self.memo)
        conn.client.set_missing_host_key_policy(_HostKeyPolicy(self, w, role, known))
        known.add_host_to(conn.client.get_host_keys(), conn.host, conn.port)

    def _gateway(self, conn: Any, w: WorkerRef, config: Any, via: tuple[str, ...]) -> Any:
        """How `conn` is reached: False (directly), a ProxyCommand string, or a checked hop Connection.

        ProxyJump hops are connected in the order given (the first directly, or
        through its own ssh_config gateway, as OpenSSH does), each with the same
        host-key policy, known_hosts and timeouts as the workers. A hop logs in
        with its own ssh_config (User, IdentityFile, agent), not the worker's
        identity_file, again as OpenSSH does.
        """
        jump = conn.ssh_config.get("proxyjump")
        if jump and jump.strip().lower() != "none":
            hops = [h.strip() for h in jump.split(",") if h.strip()]
            prev = None
            for hop in hops:
                hop_conn = self._checked_connection(hop, w, config.clone(), role="jump host ")
                if {hop_conn.original_host, hop_conn.host} & {conn.original_host, conn.host}:
                    return False  # a wildcard Host block that names the jump host itself
                if hop_conn.original_host in via:
                    loop = " -> ".join((*via, conn.original_host, hop_conn.original_host))
                    raise OrchError(f"ProxyJump loop in ssh config: {loop}", host=w.name)
                hop_conn.gateway = (
                    prev if prev is not None else self._gateway(hop_conn, w, config, (*via, conn.original_host))
                )
                prev = hop_conn
            return prev
        if conn.ssh_config.get("proxycommand"):
            # OpenSSH's own process makes that hop (and checks its host key).
            return conn.ssh_config["proxycommand"]
        return False

    def _open_session(self, conn: Any) -> Any:
        """A new session on `conn` for one command read directly (a holder records it, see persist.py).

        On an open connection without agent forwarding this is paramiko's `open_session`, which is
        all Fabric's `create_session` does then; Fabric's goes through a signature-binding decorator
        (`inspect`) that cost a holder about 15 % of its CPU in a 256-worker fan-out."""
        transport = getattr(conn, "transport", None)
        if transport is None or not transport.active or getattr(conn, "forward_agent", False):
            return conn.create_session()
        return transport.open_session()

    def _drop(self, name: str) -> None:
        with self._conn_lock:
            conn = self._connections.pop(name, None)
        if conn is not None:
            _close_chain(conn)

    def close(self) -> None:
        """Close every connection and the worker pool."""
        for name in list(self._connections):
            self._drop(name)
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- fan-out -----------------------------------------------------------

    def map(self, fn: Callable[[WorkerRef], Result], hosts: Iterable[str] | None = None) -> dict[str, Result]:
        """Apply `fn` to each worker in parallel (bounded); one Result per worker, in fleet order."""
        names = list(hosts) if hosts is not None else list(self.workers)
        futures = {n: self._pool.submit(self._guard, fn, self.workers[n]) for n in names}
        return {n: futures[n].result() for n in names}

    def _guard(self, fn: Callable[[WorkerRef], Result], worker: WorkerRef) -> Result:
        start = time.monotonic()
        try:
            return fn(worker)
        except Exception as exc:  # one worker's failure never stops the others
            return self.failure(worker.name, (), exc, time.monotonic() - start)

    def failure(self, name: str, argv: Sequence[str], exc: BaseException, elapsed: float) -> Result:
        """Translate paramiko/socket/invoke exceptions into a Result with a clear reason."""
        kind, text = classify_exception(exc, self, name)
        if kind in ("connect", "timeout", "host-key", "auth"):
            self._drop(name)
        return Result(host=name, argv=tuple(argv), exit_code=None, elapsed=elapsed, error=text, error_kind=kind)

    # -- the three I/O methods --------------------------------------------

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
        """Run one command on one worker. `on_line(host, stream, line)` streams output.

        With `end_on_timeout`, a command that outlives its timeout is reported
        only once it is ended on the worker (its process group and ssh session
        are sent TERM, then KILL, and found gone), or the error says it is
        still being ended (the worker did not answer in time to confirm).
        """
        timeout = self.command_timeout if timeout is None else timeout
        wrapper = ["timeout", "-k", str(KILL_AFTER), f"{timeout:g}"]
        tag = secrets.token_hex(8) if end_on_timeout else None
        if tag is not None:
            wrapper += ["env", f"{TASK_TAG}={tag}"]
        line = command_line([*wrapper, *argv], env)
        start = time.monotonic()
        writers: dict[str, LineWriter] = {}
        conn = None
        try:
            conn = self._connection(name)
            kwargs: dict[str, Any] = dict(
                hide=True,
                warn=True,
                pty=False,
                timeout=timeout + CLIENT_GRACE,
                in_stream=io.StringIO(stdin) if isinstance(stdin, str) else (stdin if stdin is not None else False),
            )
            if on_line:
                writers = line_writers(name, on_line)
                kwargs.update(hide=False, out_stream=writers["stdout"], err_stream=writers["stderr"])
            session = self._open_session(conn) if stdin is None else None
            if session is not None and supported(session):
                try:
                    res = exec_command(
                        session,
                        line,
                        timeout + CLIENT_GRACE,
                        on_text=(lambda s, text: writers[s].write(text)) if writers else None,
                        keep_chunks=STREAMED_KEEP_CHUNKS if writers else None,
                    )
                finally:
                    session.close()
                if res.timed_out:
                    raise _ClientGaveUp(res)
            else:
                if session is not None:
                    session.close()
                res = _run_invoke(conn, line, kwargs)
        except _ClientGaveUp as exc:
            # The client gave up first (the remote `timeout` may not have acted
            # yet, e.g. the command started late on a loaded worker).
            ending = end_task(conn, tag) if tag is not None else ""
            self._drop(name)
            return Result(
                host=name,
                argv=tuple(argv),
                exit_code=None,
                stdout=exc.result.stdout,
                stderr=exc.result.stderr,
                elapsed=time.monotonic() - start,
                error=f"timed out after {timeout:g}s{ending}",
                error_kind="timeout",
            )
        except Exception as exc:
            return self.failure(name, argv, exc, time.monotonic() - start)
        finally:
            for w in writers.values():
                w.flush_rest()
        elapsed = time.monotonic() - start
        if res.exited == 124 and elapsed + TIMEOUT_SLACK >= timeout:
            # `timeout` signalled the command's process group and waited for the command itself.
            return Result(
                host=name,
                argv=tuple(argv),
                exit_code=None,
                stdout=res.stdout,
                stderr=res.stderr,
                elapsed=elapsed,
                error=f"timed out after {timeout:g}s" + ("; ended on the worker" if tag is not None else ""),
                error_kind="timeout",
            )
        return Result(
            host=name, argv=tuple(argv), exit_code=res.exited, stdout=res.stdout, stderr=res.stderr, elapsed=elapsed
        )

    def put_one(self, name: str, local: LocalSource, remote: str) -> Result:
        """Copy a local file (or file object) to `remote` on one worker over SFTP."""
        argv = ("put", source_name(local), remote)
        return self._copy(name, argv, remote, lambda conn: conn.put(local, remote))

    def put(self, local: LocalSource, remote: str, hosts: Iterable[str] | None = None) -> dict[str, Result]:
        """Copy one local file (or file object) to `remote` on many workers in parallel."""
        if not isinstance(local, (str, os.PathLike)):
            # Fabric seeks and reads the object itself: threads sharing one would interleave.
            pos = local.tell()
            local.seek(0)
            data: bytes | str = local.read()
            local.seek(pos)
            data = data if isinstance(data, bytes) else data.encode()
            return self.map(lambda w: self.put_one(w.name, io.BytesIO(data), remote), hosts)
        return super().put(local, remote, hosts)

    def get_one(self, name: str, remote: str, local: LocalPath) -> Result:
        """Copy `remote` from one worker to a local path over SFTP."""
        argv = ("get", remote, str(local))
        try:
            Path(local).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return Result(
                host=name, argv=argv, exit_code=None, error=f"cannot create local directory: {exc}", error_kind="local"
            )
        return self._copy(name, argv, remote, lambda conn: conn.get(remote, str(local)))

    def _copy(self, name: str, argv: tuple[str, ...], remote: str, transfer: Callable[[Any], object]) -> Result:
        """Run one SFTP transfer, every failure a Result.

        A silent worker costs at most two `transfer_timeout`s: Fabric's put first
        stats the remote path and takes a timeout there for "not a directory".
        """
        start = time.monotonic()
        try:
            conn = self._connection(name)
        except Exception as exc:
            return self.failure(name, argv, exc, time.monotonic() - start)
        try:
            self._sftp(conn)
            transfer(conn)
        except Exception as exc:
            return self._copy_failure(name, argv, remote, exc, time.monotonic() - start)
        return Result(host=name, argv=argv, exit_code=0, elapsed=time.monotonic() - start)

    def _sftp(self, conn: Any) -> Any:
        """The connection's SFTP session, its channel limited to `transfer_timeout` of silence
        (opened and configured once per connection; Fabric's put/get reuse it)."""

        if getattr(conn, "_orch_sftp", None) is not None:
            return conn._orch_sftp

        # Opening the channel is bounded (channel_timeout) but paramiko then waits
        # for the subsystem reply with no limit: close the connection if it never comes.
        gave_up = threading.Event()

        def give_up() -> None:
            gave_up.set()
            conn.client.close()

        timer = threading.Timer(self.transfer_timeout, give_up)
        timer.daemon = True
        timer.start()
        try:
            sftp = conn.sftp()
        except Exception:
            if gave_up.is_set():
                raise TimeoutError(f"no SFTP session within {self.transfer_timeout:g}s") from None
            raise
        finally:
            timer.cancel()
        if gave_up.is_set():  # opened just as the timer closed the connection
            raise TimeoutError(f"no SFTP session within {self.transfer_timeout:g}s")
        sftp.get_channel().settimeout(self.transfer_timeout)
        conn._orch_sftp = sftp
        return sftp

    def _copy_failure(
        self, name: str, argv: tuple[str, ...], remote: str, exc: BaseException, elapsed: float
    ) -> Result:
        """Why a started copy failed: the worker went silent, the SFTP server refused, or our side."""
        import socket

        w = self.workers[name]
        what = f"SFTP {argv[0]} {'to' if argv[0] == 'put' else 'from'} {name}:{remote}"
        reason = _sftp_refusal(exc)
        if isinstance(exc, (socket.timeout, TimeoutError)):
            self._drop(name)  # the SFTP session is mid-request: unusable
            kind, text = (
                "timeout",
                (
                    f"{what} timed out: {w.host}:{w.port or 22} sent nothing for "
                    f"{self.transfer_timeout:g}s (worker hung?)"
                ),
            )
        elif reason is not None:
            # The worker answered: the connection is fine, keep it.
            kind, text = "remote", f"{what} failed on the worker: {reason}"
        elif isinstance(exc, OSError) and not isinstance(exc, ConnectionError) and exc.errno is not None:
            kind, text = "local", f"{what} failed on this machine: {exc}"
        else:
            return self.failure(name, argv, exc, elapsed)
        return Result(host=name, argv=argv, exit_code=None, elapsed=elapsed, error=text, error_kind=kind)


def _chain(conn: Any) -> list[Any]:
    """`conn` and the Connections of its ProxyJump hops, target first."""
    out: list[Any] = []
    while conn is not None and conn is not False and not isinstance(conn, str) and not any(c is conn for c in out):
        out.append(conn)
        conn = conn.gateway
    return out


def _close_chain(conn: Any) -> None:
    for c in _chain(conn):
        try:
            c.close()
        except Exception:
            pass


def for_fleet(fleet: Fleet, workers: Iterable[WorkerRef], **overrides: Any) -> FabricTransport:
    """A FabricTransport for some of a fleet's workers, with the fleet's SSH settings."""
    return FabricTransport(workers, fleet.model.ssh, base_dir=fleet.base_dir, **overrides)
