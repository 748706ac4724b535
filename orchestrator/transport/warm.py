"""The client side of warm connections: a FabricTransport whose operations a holder runs.

`for_fleet` (the one place commands build a transport) asks `warm_transport`, which
finds or starts the fleet's connection holder (`persist`) and returns a
`WarmTransport`; when warm connections are off (`ssh.persist: 0`,
`ORCH_SSH_PERSIST=0`) or the holder cannot be reached or started, it returns
None and the command talks to its workers itself, as it always did: the
holder never fails a command. Why it was not used is logged (the `warm.log`
in the holder directory, and this module's logger).

A `WarmTransport` is a `FabricTransport` (same settings, same attributes);
its run/put/get go to the holder, a whole fan-out as one request. Should the
holder be unreachable at the time of a request, that request and the rest of
the command run on the command's own connections.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator import connections as wire
from orchestrator.fleet import Fleet, WorkerRef
from orchestrator.transport.fabric import FabricTransport
from orchestrator.transport.fabric import for_fleet as direct_for_fleet
from orchestrator.transport.protocol import (
    LineCallback,
    LocalPath,
    LocalSource,
    Result,
    ResultCallback,
    Stdin,
    source_name,
)

log = logging.getLogger("orchestrator.transport.warm")
# The settings that change how a holder connects: a different value is a different holder.
KEYED_OVERRIDES = ("host_key_policy", "connect_timeout", "known_hosts", "transfer_timeout", "max_parallel")
START_TIMEOUT = 15.0


def note(directory: Path | None, message: str) -> None:
    """Say why warm connections were not used: quietly, in the holder directory's warm.log."""
    log.info("%s", message)
    if directory is None:
        return
    try:
        with open(directory / "warm.log", "a") as f:
            f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} pid {os.getpid()}: {message}\n")
    except OSError:
        pass


def keyed(overrides: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in overrides.items() if k in KEYED_OVERRIDES and v}


def locate(fleet_path: Path, overrides: Mapping[str, Any]) -> tuple[Path, str]:
    """The holder directory and this fleet's key (raises WireError or OSError)."""
    directory = wire.holder_dir()
    return directory, wire.holder_key(fleet_path, fleet_path.read_bytes(), keyed(overrides))


def ensure_holder(directory: Path, key: str, fleet_path: Path, overrides: Mapping[str, Any]) -> Path:
    """The socket of a live holder for `key`, started (detached, its own session) when there is none."""
    path = wire.socket_path(directory, key)
    try:
        wire.connect(path).close()
        return path
    except (OSError, wire.WireError):
        pass
    argv = [
        sys.executable,
        "-m",
        "orchestrator.transport.persist",
        "--detach",
        "--dir",
        str(directory),
        "--key",
        key,
        "--fleet",
        str(fleet_path),
        "--overrides",
        json.dumps(keyed(overrides)),
    ]
    with open(directory / f"{key}.log", "ab") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            close_fds=True,
            cwd="/",
            env={**os.environ, wire.DIR_ENV: str(directory)},  # as this command found it, from any cwd
        )
    proc.wait(timeout=START_TIMEOUT)  # the detaching parent: it forks and returns at once
    deadline = time.monotonic() + START_TIMEOUT
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            wire.connect(path).close()
            return path
        except (OSError, wire.WireError) as exc:
            last = exc
            time.sleep(0.02)
    raise wire.WireError(f"the holder did not answer on {path} within {START_TIMEOUT:g}s: {last}")


def warm_transport(fleet: Fleet, workers: Iterable[WorkerRef], overrides: Mapping[str, Any]) -> WarmTransport | None:
    """A transport through the fleet's connection holder, or None (warm connections off or unreachable)."""
    if wire.persist_disabled() or not fleet.model.ssh.persist:
        return None
    directory: Path | None = None
    try:
        directory, key = locate(fleet.path, overrides)
        path = ensure_holder(directory, key, fleet.path, overrides)
    except (OSError, wire.WireError, subprocess.SubprocessError) as exc:
        note(directory, f"warm connections unavailable, connecting directly: {exc}")
        return None
    return WarmTransport(workers, fleet.model.ssh, holder=path, base_dir=fleet.base_dir, **overrides)


def for_fleet(fleet: Fleet, workers: Iterable[WorkerRef], **overrides: Any) -> FabricTransport:
    """A transport for some of a fleet's workers with the fleet's SSH settings: through the fleet's
    connection holder when warm connections are on, else direct (`fabric.for_fleet`)."""
    workers = list(workers)
    warm = warm_transport(fleet, workers, overrides)
    return warm if warm is not None else direct_for_fleet(fleet, workers, **overrides)


def result_of(doc: Mapping[str, Any]) -> Result:
    return Result(
        host=str(doc["host"]),
        argv=tuple(doc.get("argv") or ()),
        exit_code=doc.get("exit_code"),
        stdout=doc.get("stdout") or "",
        stderr=doc.get("stderr") or "",
        elapsed=float(doc.get("elapsed") or 0.0),
        error=doc.get("error"),
        error_kind=doc.get("error_kind"),
    )


class WarmTransport(FabricTransport):
    """A FabricTransport whose run/put/get the connection holder at `holder` carries out."""

    def __init__(self, workers: Iterable[WorkerRef], settings: Any = None, *, holder: Path, **kwargs: Any) -> None:
        super().__init__(workers, settings, **kwargs)
        self.holder = holder
        self._holder_up = True

    # -- talking to the holder ---------------------------------------------------

    def _open(self, request: dict[str, Any], blob: bytes | None = None) -> socket.socket | None:
        """The request sent and accepted, or None (the caller runs it on its own connections)."""
        if not self._holder_up:
            return None
        try:
            sock = wire.connect(self.holder)
            wire.send(sock, request, blob)
            return sock
        except (OSError, wire.WireError) as exc:
            self._holder_up = False
            note(self.holder.parent, f"holder {self.holder.name} unreachable, connecting directly: {exc}")
            return None

    def _exchange(
        self,
        sock: socket.socket,
        hosts: Sequence[str],
        argv: tuple[str, ...],
        on_line: LineCallback | None = None,
        pump: Callable[[socket.socket], None] | None = None,
        on_result: ResultCallback | None = None,
    ) -> dict[str, Result] | None:
        """Every host's Result from the holder's frames (each also to `on_result` as it comes, the
        missing ones at the end); None when it refused before starting."""
        results: dict[str, Result] = {}
        accepted = False
        problem = "the holder ended the connection"
        with sock:
            try:
                for doc in wire.frames(sock):
                    kind = doc.get("t")
                    if kind == "line" and on_line is not None:
                        on_line(str(doc["h"]), str(doc["s"]), str(doc["l"]))
                    elif kind == "result":
                        r = result_of(doc["r"])
                        results[r.host] = r
                        if on_result is not None:
                            on_result(r)
                    elif kind == "accepted":
                        accepted = True
                        if pump is not None:
                            threading.Thread(target=pump, args=(sock,), daemon=True).start()
                    elif kind == "done":
                        self.accepted_keys.extend(tuple(k) for k in doc.get("accepted_keys") or ())
                        break
                    elif kind == "error":
                        problem = f"the holder refused the operation: {doc.get('message')}"
                        break
            except (OSError, wire.WireError) as exc:
                problem = f"lost the holder mid-operation: {exc}"
        if not accepted:
            self._holder_up = False
            note(self.holder.parent, f"holder {self.holder.name}: {problem}; connecting directly")
            return None
        for h in hosts:
            if h not in results:
                results[h] = Result(host=h, argv=argv, exit_code=None, error=problem, error_kind="connect")
                if on_result is not None:
                    on_result(results[h])
        return {h: results[h] for h in hosts}

    @staticmethod
    def _pump_from(stdin: Any) -> Callable[[socket.socket], None]:
        def pump(sock: socket.socket) -> None:
            try:
                while True:
                    chunk = stdin.read(1 << 16)
                    wire.send(sock, {"t": "stdin", "d": chunk})
                    if not chunk:
                        return
            except OSError:
                return

        return pump

    def _run_request(
        self,
        hosts: list[str],
        argv: Sequence[str],
        env: Mapping[str, str] | None,
        timeout: float | None,
        stdin: Stdin,
        on_line: LineCallback | None,
        end_on_timeout: bool,
        on_result: ResultCallback | None = None,
    ) -> dict[str, Result] | None:
        request: dict[str, Any] = {
            "op": "run",
            "hosts": hosts,
            "argv": [str(a) for a in argv],
            "env": dict(env) if env else None,
            "timeout": self.command_timeout if timeout is None else timeout,
            "stream": on_line is not None,
            "end_on_timeout": end_on_timeout,
        }
        pump = None
        if isinstance(stdin, str):
            request["stdin"] = stdin
        elif stdin is not None:
            request["stdin_stream"] = True
            pump = self._pump_from(stdin)
        sock = self._open(request)
        if sock is None:
            return None
        return self._exchange(sock, hosts, tuple(str(a) for a in argv), on_line, pump, on_result)

    # -- the Transport's operations ------------------------------------------------

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
        got = self._run_request([name], argv, env, timeout, stdin, on_line, end_on_timeout)
        if got is None:
            return super().run_one(
                name, argv, env=env, timeout=timeout, stdin=stdin, on_line=on_line, end_on_timeout=end_on_timeout
            )
        return got[name]

    def run(
        self,
        argv: Sequence[str],
        hosts: Iterable[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: Stdin = None,
        on_line: LineCallback | None = None,
        end_on_timeout: bool = False,
    ) -> dict[str, Result]:
        names = list(hosts) if hosts is not None else list(self.workers)
        if stdin is None or isinstance(stdin, str):  # one request for the whole fan-out
            got = self._run_request(names, argv, env, timeout, stdin, on_line, end_on_timeout)
            if got is not None:
                return got
        return super().run(
            argv, names, env=env, timeout=timeout, stdin=stdin, on_line=on_line, end_on_timeout=end_on_timeout
        )

    def run_each(self, commands: Mapping[str, Sequence[str]], *, timeout: float, on_result: ResultCallback) -> None:
        """One holder request per distinct command (a lease's renewals: one per slice root), each
        on a thread of its own; what the holder cannot take runs on this command's own connections."""
        groups: dict[tuple[str, ...], list[str]] = {}
        for name, argv in commands.items():
            groups.setdefault(tuple(str(a) for a in argv), []).append(name)

        def one(argv: tuple[str, ...], names: list[str]) -> None:
            answered: set[str] = set()

            def heard(r: Result) -> None:
                answered.add(r.host)
                on_result(r)

            if self._run_request(names, argv, None, timeout, None, None, False, heard) is None:
                left = {n: argv for n in names if n not in answered}
                FabricTransport.run_each(self, left, timeout=timeout, on_result=on_result)

        for argv, names in groups.items():
            threading.Thread(target=one, args=(argv, names), daemon=True, name="orch-each").start()

    def _put_request(self, names: list[str], local: LocalSource, remote: str) -> dict[str, Result] | None:
        request: dict[str, Any] = {"op": "put", "hosts": names, "remote": remote}
        blob = None
        if isinstance(local, (str, os.PathLike)):
            request["local"] = os.path.abspath(os.fspath(local))
        else:
            pos = local.tell()
            local.seek(0)
            data: bytes | str = local.read()
            local.seek(pos)
            blob = data if isinstance(data, bytes) else data.encode()
        sock = self._open(request, blob)
        if sock is None:
            return None
        return self._exchange(sock, names, ("put", source_name(local), remote))

    def put_one(self, name: str, local: LocalSource, remote: str) -> Result:
        got = self._put_request([name], local, remote)
        return super().put_one(name, local, remote) if got is None else got[name]

    def put(self, local: LocalSource, remote: str, hosts: Iterable[str] | None = None) -> dict[str, Result]:
        names = list(hosts) if hosts is not None else list(self.workers)
        got = self._put_request(names, local, remote)
        return super().put(local, remote, names) if got is None else got

    def _get_request(self, pairs: dict[str, LocalPath], remote: str) -> dict[str, Result] | None:
        request = {
            "op": "get",
            "hosts": list(pairs),
            "remote": remote,
            "pairs": {n: os.path.abspath(os.fspath(p)) for n, p in pairs.items()},
        }
        sock = self._open(request)
        if sock is None:
            return None
        return self._exchange(sock, list(pairs), ("get", remote, ""))

    def get_one(self, name: str, remote: str, local: LocalPath) -> Result:
        got = self._get_request({name: local}, remote)
        return super().get_one(name, remote, local) if got is None else got[name]

    def get(
        self, remote: str, local_for: Callable[[WorkerRef], LocalPath], hosts: Iterable[str] | None = None
    ) -> dict[str, Result]:
        names = list(hosts) if hosts is not None else list(self.workers)
        got = self._get_request({n: local_for(self.workers[n]) for n in names}, remote)
        return super().get(remote, local_for, names) if got is None else got
