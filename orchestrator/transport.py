"""The transport seam: run, put, get, close and fan-out, over SSH (Fabric/paramiko).

`Transport` is the protocol orch's logic talks to workers through;
`FabricTransport` is the real implementation (tests of logic use a scripted
fake, tests of capabilities use real sshd on the local slice). Every call
returns one frozen `Result` per worker and never stops at the first failure.

Host keys are checked strictly by default: Fabric's own default is
paramiko's AutoAddPolicy with no known_hosts loaded, so we replace the
policy and load the right known_hosts on every connection, including every
ProxyJump hop (Fabric would build those itself, unchecked). Remote commands
are argument lists, turned into a command line in exactly one place
(`command_line`).
"""

from __future__ import annotations

import io
import logging
import os
import secrets
import shlex
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol, Self

from orchestrator.errors import HostKeyError, OrchError
from orchestrator.fleet import Fleet, SshSettings, WorkerRef

TAIL_LINES = 20
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
# The remote `timeout` sends KILL this long after TERM to a command that ignores TERM.
KILL_AFTER = 3
# A command run with `end_on_timeout` carries `ORCH_TASK=<token>` in its
# `timeout` wrapper's arguments, so the controller can find it again on the
# worker and end its process group and session when the client gave up first.
TASK_TAG = "ORCH_TASK"
# Seconds the controller spends ending such a command (TERM, KILL, confirm)
# before it reports the command as still being ended.
ENDING_TIMEOUT = 5.0

# Where a copy reads from: a local path or an open binary file object.
LocalSource = str | os.PathLike[str] | IO[bytes]
LocalPath = str | os.PathLike[str]
LineCallback = Callable[[str, str, str], None]  # (host, "stdout"|"stderr", line)


@dataclass(frozen=True)
class Result:
    """What one remote operation did on one worker."""

    host: str
    argv: tuple[str, ...]
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    elapsed: float = 0.0
    error: str | None = None  # transport-level failure, when there is no exit code
    # "timeout", "connect", "host-key", "auth": the worker could not be talked to;
    # "remote": it answered with an error (e.g. SFTP: disk full, no such directory);
    # "local": the controller's side failed (e.g. the local file is missing).
    error_kind: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.exit_code == 0

    @property
    def failed(self) -> bool:
        return not self.ok

    def tail(self, stream: str = "stderr", lines: int = TAIL_LINES) -> str:
        text = self.stderr if stream == "stderr" else self.stdout
        return "\n".join(text.rstrip("\n").splitlines()[-lines:])

    def describe(self) -> str:
        """One line for a summary: why this host failed (or 'ok')."""
        if self.ok:
            return "ok"
        if self.error:
            return self.error
        last = self.tail("stderr", 1) or self.tail("stdout", 1)
        return f"exit {self.exit_code}" + (f": {last}" if last else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "argv": list(self.argv),
            "ok": self.ok,
            "exit_code": self.exit_code,
            "stdout_tail": self.tail("stdout"),
            "stderr_tail": self.tail("stderr"),
            "elapsed": round(self.elapsed, 3),
            "error": self.error,
            "error_kind": self.error_kind,
        }


def command_line(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """The one place an argument list becomes a remote command line."""
    argv = [str(a) for a in argv]
    if not argv:
        raise OrchError("empty remote command")
    if env:
        argv = ["env", *[f"{k}={v}" for k, v in env.items()], *argv]
    return shlex.join(argv)


class Transport(Protocol):
    """How orch's logic talks to workers: run, put, get, close, and fan-out over them.

    Every method returns a `Result` per worker (a fan-out: a dict in the order
    asked, one entry per worker) and never raises for one worker's failure.
    `FabricTransport` is the real one; `tests/fakes.py` holds a scripted fake.
    """

    @property
    def workers(self) -> Mapping[str, WorkerRef]:
        """The workers this transport reaches, by name, in fleet order."""
        ...

    @property
    def memo(self) -> dict[str, Any]:
        """Per-transport caches of callers (e.g. which workers already have hostside)."""
        ...

    def run_one(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: str | None = None,
        on_line: LineCallback | None = None,
        end_on_timeout: bool = False,
    ) -> Result:
        """Run one command (an argument list) on one worker."""
        ...

    def run(
        self,
        argv: Sequence[str],
        hosts: Iterable[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: str | None = None,
        on_line: LineCallback | None = None,
        end_on_timeout: bool = False,
    ) -> dict[str, Result]:
        """Run the same command on many workers (default: all) in parallel."""
        ...

    def put_one(self, name: str, local: LocalSource, remote: str) -> Result:
        """Copy a local file (or binary file object) to `remote` on one worker."""
        ...

    def put(self, local: LocalSource, remote: str, hosts: Iterable[str] | None = None) -> dict[str, Result]:
        """Copy one local file (or binary file object) to `remote` on many workers."""
        ...

    def get_one(self, name: str, remote: str, local: LocalPath) -> Result:
        """Copy `remote` from one worker to a local path."""
        ...

    def get(
        self, remote: str, local_for: Callable[[WorkerRef], LocalPath], hosts: Iterable[str] | None = None
    ) -> dict[str, Result]:
        """Copy `remote` from many workers, each to the local path `local_for(worker)`."""
        ...

    def map(self, fn: Callable[[WorkerRef], Result], hosts: Iterable[str] | None = None) -> dict[str, Result]:
        """Apply `fn` to each worker in parallel; an exception in `fn` becomes that worker's failed Result."""
        ...

    def close(self) -> None:
        """Close every connection."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


class _LineWriter(io.TextIOBase):
    """A stream that hands complete lines to a callback (for prefixed streaming)."""

    def __init__(self, callback: Callable[[str], None]) -> None:
        self._callback = callback
        self._buf = ""

    def write(self, text: str) -> int:
        self._buf += text
        while "\n" in self._buf:
            line, self._buf = self._buf.split("\n", 1)
            self._callback(line)
        return len(text)

    def flush_rest(self) -> None:
        if self._buf:
            self._callback(self._buf)
            self._buf = ""


def _remote_runner_class() -> type:
    """Fabric's remote runner, reading stdin in whole chunks.

    invoke reads a non-tty stdin one byte per loop iteration with a 10 ms
    sleep in between (made for interactive terminals): a 1.6 KB JSON request
    took 16 s. We only ever pass complete documents, so read them at once.
    """
    from fabric.runners import Remote

    class ChunkedStdinRemote(Remote):  # type: ignore[misc]  # fabric has no type hints
        def read_our_stdin(self, input_: IO[str]) -> str:
            return input_.read(1 << 16)

    return ChunkedStdinRemote


class _HostKeyPolicy:
    """Refuse unknown keys (strict) or record them (accept-new); never auto-add silently."""

    def __init__(self, transport: FabricTransport, worker: WorkerRef, role: str = "") -> None:
        self.transport = transport
        self.worker = worker
        self.role = role  # "jump host " for a ProxyJump hop on the way to `worker`

    def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:  # paramiko's policy interface
        t = self.transport
        fingerprint = key.fingerprint
        if t.host_key_policy == "accept-new" and t.known_hosts_path is not None:
            with t._known_hosts_lock:
                t.known_hosts_path.parent.mkdir(parents=True, exist_ok=True)
                with open(t.known_hosts_path, "a") as fh:
                    fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
            t.accepted_keys.append((self.worker.name, hostname, fingerprint))
            return
        raise HostKeyError(
            f"host key for {self.role}{hostname} is not in {t.known_hosts_display} ({key.get_name()} {fingerprint}); "
            "refusing to connect",
            host=self.worker.name,
            hint=f"verify that fingerprint out of band, then add it: {_keyscan_fix(hostname, t.known_hosts_display)}"
            " (or run once with --host-key-policy accept-new)",
        )


def _keyscan_fix(known_name: str, known_hosts: str) -> str:
    host, port = known_name, "22"
    if known_name.startswith("["):
        host, port = known_name[1:].split("]:")
    return f"ssh-keyscan -p {port} {shlex.quote(host)} >> {shlex.quote(known_hosts)}"


class FabricTransport:
    """The real `Transport`: parallel SSH to a set of workers, one reused connection per worker."""

    def __init__(
        self,
        workers: Iterable[WorkerRef],
        settings: SshSettings | None = None,
        *,
        known_hosts: Path | None = None,
        base_dir: Path | None = None,
        host_key_policy: str | None = None,
        connect_timeout: float | None = None,
        command_timeout: float | None = None,
        max_parallel: int | None = None,
        transfer_timeout: float | None = None,
    ) -> None:
        settings = settings or SshSettings.model_validate({})
        self.workers = {w.name: w for w in workers}
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
        with self._conn_lock:
            self._connections[name] = conn
        return conn

    def _build_connection(self, name: str) -> Any:
        """An unopened Fabric connection to a worker, with its gateway chain, every hop checked."""
        from fabric import Config

        w = self.workers[name]
        key_file = None
        if w.identity_file:
            key = Path(os.path.expanduser(w.identity_file))
            key_file = str(key if key.is_absolute() else self.base_dir / key)
        overrides = {"runners": {"remote": _remote_runner_class()}}
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
        conn.client.set_missing_host_key_policy(_HostKeyPolicy(self, w, role))
        if self.known_hosts_path.exists():
            conn.client.load_host_keys(str(self.known_hosts_path))
            conn.client._host_keys_filename = None  # never let paramiko rewrite the file
        return conn

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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        stdin: str | None = None,
        on_line: LineCallback | None = None,
        end_on_timeout: bool = False,
    ) -> Result:
        """Run one command on one worker. `on_line(host, stream, line)` streams output.

        With `end_on_timeout`, a command that outlives its timeout is reported
        only once it is ended on the worker (its process group and ssh session
        are sent TERM, then KILL, and found gone), or the error says it is
        still being ended (the worker did not answer in time to confirm).
        """
        from invoke.exceptions import CommandTimedOut

        timeout = self.command_timeout if timeout is None else timeout
        wrapper = ["timeout", "-k", str(KILL_AFTER), f"{timeout:g}"]
        tag = secrets.token_hex(8) if end_on_timeout else None
        if tag is not None:
            wrapper += ["env", f"{TASK_TAG}={tag}"]
        line = command_line([*wrapper, *argv], env)
        start = time.monotonic()
        writers: dict[str, _LineWriter] = {}
        conn = None
        try:
            conn = self._connection(name)
            kwargs: dict[str, Any] = dict(
                hide=True,
                warn=True,
                pty=False,
                timeout=timeout + CLIENT_GRACE,
                in_stream=io.StringIO(stdin) if stdin is not None else False,
            )
            if on_line:
                callback = on_line
                writers = {
                    s: _LineWriter(lambda text, s=s: callback(name, s, text))  # type: ignore[misc]
                    for s in ("stdout", "stderr")
                }
                kwargs.update(hide=False, out_stream=writers["stdout"], err_stream=writers["stderr"])
            res = conn.run(line, **kwargs)
        except CommandTimedOut as exc:
            # The client gave up first (the remote `timeout` may not have acted
            # yet, e.g. the command started late on a loaded worker).
            ending = self._end_task(conn, tag) if tag is not None else ""
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

    def _end_task(self, conn: Any, tag: str) -> str:
        """End the command tagged `tag` on the connection's worker; the report's suffix.

        Runs on the worker's existing connection (a healthy worker answers in
        milliseconds), in a thread given `ENDING_TIMEOUT`: a hung worker is
        reported as still ending the command, and its connection is dropped
        (which ends the attempt) by the caller.
        """
        outcome: dict[str, Any] = {}
        # The tag travels as two arguments, so this command's own line never carries it whole.
        line = command_line(["sh", "-c", _END_TASK, "orch-end", TASK_TAG, tag, "10", "10"])

        def attempt() -> None:
            try:
                outcome["result"] = conn.run(
                    line, hide=True, warn=True, pty=False, in_stream=False, timeout=ENDING_TIMEOUT
                )
            except Exception as exc:
                outcome["error"] = exc

        worker = threading.Thread(target=attempt, name="orch-end-task", daemon=True)
        worker.start()
        worker.join(ENDING_TIMEOUT)
        res = outcome.get("result")
        if res is not None and res.exited == 0:
            return "; ended on the worker"
        if res is not None:
            why = (res.stdout.strip() or res.stderr.strip() or f"exit {res.exited}").splitlines()[-1]
        elif "error" in outcome:
            why = f"{outcome['error'].__class__.__name__}: {outcome['error']}"
        else:
            why = f"no answer within {ENDING_TIMEOUT:g}s"
        return f"; still being ended on the worker (its timeout wrapper kills it within {KILL_AFTER}s; {why})"

    def run(
        self,
        argv: Sequence[str],
        hosts: Iterable[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: str | None = None,
        on_line: LineCallback | None = None,
        end_on_timeout: bool = False,
    ) -> dict[str, Result]:
        """Run the same command on many workers in parallel."""
        return self.map(
            lambda w: self.run_one(
                w.name, argv, env=env, timeout=timeout, stdin=stdin, on_line=on_line, end_on_timeout=end_on_timeout
            ),
            hosts,
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
        return self.map(lambda w: self.put_one(w.name, local, remote), hosts)

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

    def get(
        self, remote: str, local_for: Callable[[WorkerRef], LocalPath], hosts: Iterable[str] | None = None
    ) -> dict[str, Result]:
        """Copy `remote` from many workers in parallel, each to `local_for(worker)`."""
        return self.map(lambda w: self.get_one(w.name, remote, local_for(w)), hosts)


def source_name(local: LocalSource) -> str:
    """How a put names its source: the path, or a file object's name."""
    if isinstance(local, (str, os.PathLike)):
        return os.fspath(local)
    return str(getattr(local, "name", "<stream>"))


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


def _sftp_refusal(exc: BaseException) -> str | None:
    """The SFTP server's own error for a request it refused, or None if it did not refuse one.

    paramiko raises the server's status replies (no such file, permission
    denied, the generic "Failure" of a full disk) as IOError/OSError, the same
    types as a broken socket; only where they were raised tells them apart.
    """
    import paramiko

    if isinstance(exc, paramiko.SFTPError):
        return str(exc)
    if isinstance(exc, OSError) and str(exc).startswith("size mismatch in put"):
        return f"{exc} (the worker stored fewer bytes than were sent: disk full?)"
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "_convert_status" and code.co_filename.endswith("sftp_client.py"):
            text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            if text.strip().lower() == "failure":
                return "Failure (the SFTP server gives no detail; usually a full disk or quota)"
            return text
        tb = tb.tb_next
    return None


def classify_exception(exc: BaseException, transport: FabricTransport, name: str) -> tuple[str, str]:
    """(error_kind, human text) for an exception raised while talking to a worker."""
    import socket

    import paramiko

    w = transport.workers.get(name)
    target = f"{w.host}:{w.port or 22}" if w else name
    if isinstance(exc, HostKeyError):
        return "host-key", f"{exc.message} -- {exc.hint}"
    if isinstance(exc, paramiko.BadHostKeyException):
        known = exc.hostname
        return "host-key", (
            f"HOST KEY CHANGED for {known}: known_hosts has {exc.expected_key.get_name()} "
            f"{exc.expected_key.fingerprint}, the worker offered {exc.key.get_name()} {exc.key.fingerprint}; "
            f"refusing to connect -- if the worker was really rebuilt, remove the old key: "
            f"ssh-keygen -f {shlex.quote(transport.known_hosts_display)} -R {shlex.quote(known)}"
        )
    if isinstance(exc, paramiko.AuthenticationException):
        return "auth", f"authentication failed for {w.user if w and w.user else 'the ssh user'}@{target}: {exc}"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timeout", f"connect to {target} timed out after {transport.connect_timeout:g}s"
    if isinstance(exc, paramiko.SSHException) and (
        "banner" in str(exc).lower() or "no existing session" in str(exc).lower()
    ):
        return "timeout", (
            f"no SSH banner from {target} within {transport.connect_timeout:g}s (host hung or overloaded)"
        )
    if isinstance(exc, paramiko.SSHException) and "timeout opening channel" in str(exc).lower():
        return "timeout", (
            f"{target} opened no SSH channel within {transport.connect_timeout:g}s (host hung or overloaded)"
        )
    if isinstance(exc, (ConnectionRefusedError,)):
        return "connect", f"connection to {target} refused (sshd not running?)"
    if isinstance(exc, (OSError, paramiko.SSHException, EOFError)):
        return "connect", f"cannot reach {target}: {exc.__class__.__name__}: {exc}"
    if isinstance(exc, OrchError):
        return "local", str(exc)
    return "local", f"{exc.__class__.__name__}: {exc}"


def for_fleet(fleet: Fleet, workers: Iterable[WorkerRef], **overrides: Any) -> FabricTransport:
    """A FabricTransport for some of a fleet's workers, with the fleet's SSH settings."""
    return FabricTransport(workers, fleet.model.ssh, base_dir=fleet.base_dir, **overrides)


# Ends the process group, and the ssh session, of the command whose `timeout`
# wrapper carries the tag "$1=$2": TERM, KILL after $3 polls, gone within $4
# more (a poll is at least 0.1 s). Zombies are gone already. Prints "ended"
# (exit 0) or what is left (exit 1). The session counts when the wrapper, or
# the shell sshd started for it, leads it (sshd gives every command its own).
_END_TASK = r"""
set -u
tag="$1=$2" term_polls=$3 kill_polls=$4
table() { ps -ww -eo pid=,ppid=,pgid=,sid=,stat=,args=; }
ids=$(table | TAG="$tag" awk '
    $5 !~ /^Z/ && index($0, ENVIRON["TAG"]) {
        print "g" $3
        if ($4 == $1 || $4 == $2) print "s" $4
    }')
members() {
    table | IDS="$ids" awk '
        BEGIN { n = split(ENVIRON["IDS"], a); for (i = 1; i <= n; i++) want[a[i]] = 1 }
        $5 !~ /^Z/ && (("g" $3) in want || ("s" $4) in want) { print $1 }'
}
[ -n "$ids" ] || { echo ended; exit 0; }
pids=$(members)
[ -z "$pids" ] || kill -TERM $pids 2>/dev/null
i=0
while pids=$(members); [ -n "$pids" ]; do
    i=$((i + 1))
    [ "$i" -ne "$term_polls" ] || kill -KILL $pids 2>/dev/null
    [ "$i" -lt $((term_polls + kill_polls)) ] || { echo "left:" $pids; exit 1; }
    sleep 0.1
done
echo ended
"""
