"""The connection holder: a fleet's SSH connections kept open between commands.

`python -m orchestrator.transport.persist --dir D --key K --fleet F` loads
the fleet, listens on `D/K.sock` (0600, in a 0700 directory, see `wire`) and
runs the run/put/get operations commands send it on a `FabricTransport` of
its own, so the connections it opened (every one checked against known_hosts
by the same host-key policy as a command's own) serve the next command too.

- Only this user: every connection's peer uid (SO_PEERCRED) must be ours.
- One holder per key: it holds `D/K.lock` (flock) for its whole life.
- A connection found dead is reconnected once; a failure then is the worker's
  Result, as without the holder. A changed known_hosts or ssh_config file
  drops every held connection (the next use reconnects and checks again).
- A command that goes away mid-operation has its channels closed, as its own
  SSH connection closing would have.
- It exits when no operation has run for the fleet's `ssh.persist` seconds,
  on `orch connections stop`, or on SIGTERM.
"""

from __future__ import annotations

import argparse
import fcntl
import io
import json
import logging
import os
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from orchestrator import connections as wire
from orchestrator.transport.held import HeldTransport, _still_trusted, current
from orchestrator.transport.protocol import Result, StdinSource

log = logging.getLogger("orchestrator.transport.persist")


class _QueueStdin:
    """A StdinSource fed by the command's `stdin` frames."""

    def __init__(self) -> None:
        self._chunks: list[str] = []
        self._cond = threading.Condition()
        self._ended = False

    def feed(self, text: str) -> None:
        with self._cond:
            if text:
                self._chunks.append(text)
            else:
                self._ended = True
            self._cond.notify_all()

    def read(self, n: int, /) -> str:
        with self._cond:
            self._cond.wait_for(lambda: self._chunks or self._ended)
            if not self._chunks:
                return ""
            chunk = self._chunks.pop(0)
            if len(chunk) > n:
                self._chunks.insert(0, chunk[n:])
                chunk = chunk[:n]
            return chunk


class _Operation:
    """One request's state: its client socket, its channels, whether the client went away."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.channels: list[Any] = []
        self.gone = threading.Event()
        self.done = threading.Event()
        self._send_lock = threading.Lock()

    def send(self, doc: dict[str, Any]) -> None:
        if self.gone.is_set():
            return
        try:
            with self._send_lock:
                wire.send(self.sock, doc)
        except OSError:
            self.abandon()

    def abandon(self) -> None:
        """The client is gone: end its commands as its own connection closing would."""
        if self.done.is_set() or self.gone.is_set():
            return
        self.gone.set()
        for ch in list(self.channels):
            try:
                ch.close()
            except Exception:
                pass

    def watch(self, stdin: _QueueStdin | None) -> None:
        """Read the client's side until it closes: stdin frames, then the end of the connection."""
        try:
            for doc in wire.frames(self.sock):
                if doc.get("t") == "stdin" and stdin is not None:
                    stdin.feed(str(doc.get("d", "")))
        except (OSError, wire.WireError):
            pass
        if stdin is not None:
            stdin.feed("")
        self.abandon()


class Holder:
    def __init__(self, directory: Path, key: str, fleet_path: Path, overrides: dict[str, Any]) -> None:
        from orchestrator.fleet import load_fleet

        self.directory = directory
        self.key = key
        self.fleet_path = fleet_path
        content = fleet_path.read_bytes()
        if wire.holder_key(fleet_path, content, overrides) != key:
            raise SystemExit(f"{fleet_path} changed before the holder started")
        self.fleet = load_fleet(fleet_path)
        if fleet_path.read_bytes() != content:
            raise SystemExit(f"{fleet_path} changed while the holder started")
        self.persist = wire.persist_override() or float(self.fleet.model.ssh.persist)
        if overrides.get("known_hosts"):  # a path, sent as text
            overrides = {**overrides, "known_hosts": Path(overrides["known_hosts"])}
        self.transport = HeldTransport(
            self.fleet.workers, self.fleet.model.ssh, base_dir=self.fleet.base_dir, **overrides
        )
        self.started = time.time()
        self.last = time.monotonic()
        self.active = 0
        self.requests = 0
        self.refused = 0
        self._lock = threading.Lock()
        self._files = self._file_signature()
        self.stopping = threading.Event()

    # -- bookkeeping ---------------------------------------------------------

    def _file_signature(self) -> tuple[Any, ...]:
        sig: list[Any] = []
        for path in (self.transport.known_hosts_path, self.transport.ssh_config_path):
            try:
                st = os.stat(path) if path else None
            except OSError:
                st = None
            sig.append((st.st_ino, st.st_size, st.st_mtime_ns) if st else None)
        return tuple(sig)

    def _check_files(self) -> None:
        """known_hosts changed: drop each held connection whose host keys it no longer vouches for
        (the others may carry other commands' sessions). ssh_config changed: drop them all."""
        sig = self._file_signature()
        if sig == self._files:
            return
        t = self.transport
        if sig[1] != self._files[1]:
            log.info("ssh_config changed: dropping every held connection")
            t.drop_all()
        else:
            for name in t.held():
                if not _still_trusted(t, name):
                    log.info("%s: known_hosts no longer vouches for its held connection: dropped", name)
                    t._drop(name)
        self._files = sig

    def idle_left(self) -> float:
        with self._lock:
            if self.active:
                return self.persist
            return self.persist - (time.monotonic() - self.last)

    def status(self) -> dict[str, Any]:
        t = self.transport
        return {
            "pid": os.getpid(),
            "key": self.key,
            "fleet": str(self.fleet_path),
            "socket": str(wire.socket_path(self.directory, self.key)),
            "started": round(self.started, 3),
            "persist": self.persist,
            "idle_left": round(max(0.0, self.idle_left()), 1),
            "active": self.active,
            "requests": self.requests,
            "refused": self.refused,
            "host_key_policy": t.host_key_policy,
            "known_hosts": str(t.known_hosts_path),
            "workers": len(t.workers),
            "held": t.held(),
            "agents": t.agents(),
            "connects": dict(t.connects),
            "reconnects": dict(t.reconnects),
        }

    # -- serving ---------------------------------------------------------------

    def serve(self) -> None:
        path = wire.socket_path(self.directory, self.key)
        path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(str(path))
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        # A fan-out through the holder opens one client connection per worker at once (up to
        # ssh.max_parallel, at most 1024): a full backlog would refuse the rest (EAGAIN).
        listener.listen(wire.BACKLOG)
        log.info(
            "holding %s (%d workers) on %s, idle limit %gs",
            self.fleet_path,
            len(self.fleet.workers),
            path,
            self.persist,
        )
        try:
            while True:
                left = self.idle_left()
                if left <= 0:
                    log.info("idle for %gs: exiting", self.persist)
                    return
                listener.settimeout(min(left, 60.0))
                try:
                    client, _ = listener.accept()
                except TimeoutError:
                    continue
                if self.stopping.is_set():
                    client.close()
                    log.info("stopped")
                    return
                threading.Thread(target=self._client, args=(client,), daemon=True).start()
        finally:
            path.unlink(missing_ok=True)
            listener.close()
            self.transport.drop_all()

    def stop(self) -> None:
        """Make the accept loop end (it wakes on a connection of our own)."""
        self.stopping.set()
        waker = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        waker.setblocking(False)
        try:
            waker.connect(str(wire.socket_path(self.directory, self.key)))
        except OSError:
            pass
        finally:
            waker.close()

    def _client(self, sock: socket.socket) -> None:
        with sock:
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            pid, uid, _gid = struct.unpack("3i", creds)
            if uid != os.getuid():
                with self._lock:
                    self.refused += 1
                log.warning("refused a connection from pid %d uid %d (not uid %d)", pid, uid, os.getuid())
                try:
                    wire.send(sock, {"ok": False, "error": f"uid {uid} is not this holder's user"})
                except OSError:
                    pass
                return
            try:
                wire.send(sock, {"ok": True, "protocol": wire.PROTOCOL, "pid": os.getpid()})
                got = wire.receive(sock)
            except (OSError, wire.WireError):
                return
            if got is None:
                return
            request, blob = got
            if request.get("op") in ("status", "stop"):  # asking about the holder is not using it
                self._dispatch(sock, request, blob)
                return
            with self._lock:
                self.active += 1
                self.requests += 1
            try:
                self._dispatch(sock, request, blob)
            except Exception as exc:  # a bad request answers with an error, the holder carries on
                log.exception("request failed")
                try:
                    wire.send(sock, {"t": "error", "message": f"{type(exc).__name__}: {exc}"})
                except OSError:
                    pass
            finally:
                with self._lock:
                    self.active -= 1
                    self.last = time.monotonic()

    def _dispatch(self, sock: socket.socket, request: dict[str, Any], blob: bytes | None) -> None:
        op = request.get("op")
        if op == "status":
            wire.send(sock, {"ok": True, "status": self.status()})
        elif op == "stop":
            wire.send(sock, {"ok": True, "pid": os.getpid()})
            self.stop()
        elif op in ("run", "put", "get"):
            self._operation(sock, op, request, blob)
        else:
            wire.send(sock, {"t": "error", "message": f"unknown operation {op!r}"})

    def _hosts(self, request: dict[str, Any]) -> list[str]:
        if "select" in request:
            sel = request["select"]
            return [w.name for w in self.fleet.select(lane=sel.get("lane"), workers=sel.get("workers"))]
        hosts = [str(h) for h in request.get("hosts") or ()]
        unknown = [h for h in hosts if h not in self.transport.workers]
        if unknown:
            raise ValueError(f"not workers of {self.fleet_path}: {', '.join(unknown)}")
        return hosts

    def _operation(self, sock: socket.socket, op: str, request: dict[str, Any], blob: bytes | None) -> None:
        from orchestrator.errors import OrchError

        try:
            hosts = self._hosts(request)
        except OrchError as exc:
            wire.send(sock, {"t": "error", "message": str(exc), "exit_code": exc.exit_code})
            return
        self._check_files()
        t = self.transport
        seen_keys = len(t.accepted_keys)
        work = _Operation(sock)
        stdin = _QueueStdin() if op == "run" and request.get("stdin_stream") else None
        work.send({"t": "accepted", "hosts": hosts})
        threading.Thread(target=work.watch, args=(stdin,), daemon=True).start()
        act = self._action(op, request, blob, work, stdin)

        def one(w: Any) -> Result:
            current.channels = work.channels
            try:
                reused = t.is_held(w.name)
                r = act(w.name)
                lost = reused and r.error_kind == "connect" and not t.is_held(w.name)
                if lost and not (r.stdout or r.stderr) and not work.gone.is_set():
                    with t._conn_lock:
                        t.reconnects[w.name] = t.reconnects.get(w.name, 0) + 1
                    log.info("%s: held connection lost (%s); reconnecting once", w.name, r.error)
                    r = act(w.name)
            finally:
                current.channels = None
            doc = {
                "host": r.host,
                "argv": list(r.argv),
                "exit_code": r.exit_code,
                "stdout": r.stdout,
                "stderr": r.stderr,
                "elapsed": r.elapsed,
                "error": r.error,
                "error_kind": r.error_kind,
            }
            work.send({"t": "result", "r": doc})
            return r

        # Each command brings its own parallelism, as it would to its own connections: one worker
        # runs on this request's thread, a fan-out on a pool of its own (a shared pool would let
        # one command's long-running operations hold back every other command's).
        workers = [t.workers[h] for h in hosts]
        if len(workers) == 1:
            t._guard(one, workers[0])
        elif workers:
            with ThreadPoolExecutor(max_workers=min(t.max_parallel, len(workers))) as pool:
                list(pool.map(lambda w: t._guard(one, w), workers))
        keys = t.accepted_keys[seen_keys:]
        if keys:
            self._files = self._file_signature()  # our own write to known_hosts
        work.send({"t": "done", "accepted_keys": [list(k) for k in keys], "known_hosts": t.known_hosts_display})
        work.done.set()

    def _action(
        self, op: str, request: dict[str, Any], blob: bytes | None, work: _Operation, stdin: _QueueStdin | None
    ) -> Callable[[str], Result]:
        t = self.transport
        if op == "run":
            feed: str | StdinSource | None = stdin if stdin is not None else request.get("stdin")
            stream = bool(request.get("stream"))

            def on_line(host: str, kind: str, line: str) -> None:
                work.send({"t": "line", "h": host, "s": kind, "l": line})

            def run(name: str) -> Result:
                return t.run_one(
                    name,
                    [str(a) for a in request["argv"]],
                    env=request.get("env") or None,
                    timeout=request.get("timeout"),
                    stdin=feed,
                    on_line=on_line if stream else None,
                    end_on_timeout=bool(request.get("end_on_timeout")),
                )

            return run
        if op == "put":
            remote = str(request["remote"])
            local = request.get("local")
            if blob is not None:
                data = blob
                return lambda name: t.put_one(name, io.BytesIO(data), remote)
            return lambda name: t.put_one(name, str(local), remote)
        pairs = {str(k): str(v) for k, v in dict(request["pairs"]).items()}
        remote = str(request["remote"])
        return lambda name: t.get_one(name, remote, pairs[name])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.transport.persist")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--fleet", required=True)
    parser.add_argument("--overrides", default="{}")
    parser.add_argument("--detach", action="store_true", help="fork, the parent returning at once")
    args = parser.parse_args(argv)
    directory = Path(args.dir)
    if args.detach and os.fork():
        os._exit(0)  # the command that started us reaps this parent; the holder is nobody's child
    logging.basicConfig(
        filename=str(directory / f"{args.key}.log"),
        level=logging.INFO,
        format=f"%(asctime)s holder[{os.getpid()}] %(levelname)s %(message)s",
    )
    if wire.holder_dir(create=False) != directory:
        log.error("%s is not this user's holder directory", directory)
        return 2
    lock = open(directory / f"{args.key}.lock", "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log.info("another holder serves %s", args.key)
        return 0
    holder: Holder | None = None

    def terminate(_signo: int, _frame: Any) -> None:
        if holder is not None:
            holder.stop()
        else:
            raise SystemExit(0)

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        holder = Holder(directory, args.key, Path(args.fleet), json.loads(args.overrides))
        holder.serve()
    except Exception:
        log.exception("holder failed")
        return 1
    log.info("exited")
    return 0


if __name__ == "__main__":
    sys.exit(main())
