"""Warm connections: where a connection holder lives, how it is named, and how to talk to it.

A holder (`python -m orchestrator.transport.persist`) keeps a fleet's
authenticated SSH connections open between commands and runs their
operations; commands reach it over a unix socket. This module is the part
both sides share, stdlib-only so that a command can hand a request over
before importing pydantic or paramiko (see `cli/exec_fast.py`):

- the directory: `$ORCH_PERSIST_DIR`, else `$XDG_RUNTIME_DIR/orch`, else
  `/tmp/orch-<uid>`; created 0700 and refused unless it is a real directory
  owned by this user with no access for anyone else;
- the key: a digest of the fleet file's path and content, the settings given
  on the command line (host-key policy, connect timeout) and this code's
  protocol version, so a changed fleet or host-key policy gets its own holder;
- the framing: a 4-byte big-endian length and a UTF-8 JSON object, optionally
  followed by `blob` raw bytes (a file object passed to `put`).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import struct
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

PROTOCOL = 1
PERSIST_ENV = "ORCH_SSH_PERSIST"
DIR_ENV = "ORCH_PERSIST_DIR"
FLEET_ENV = "ORCH_FLEET"
# No honest request or reply comes near this; a bigger length is a broken peer.
MAX_FRAME = 256 << 20
# The holder's listen backlog (ssh.max_parallel is at most 1024), and the pause between
# connects a full backlog refused.
BACKLOG = 1024
BACKLOG_RETRY = 0.005
_LEN = struct.Struct(">I")


class WireError(Exception):
    """The holder could not be reached, refused us, or broke the protocol."""


def persist_disabled() -> bool:
    """`ORCH_SSH_PERSIST=0` turns warm connections off for one command."""
    return os.environ.get(PERSIST_ENV, "").strip() in ("0", "0.0", "off", "no", "false")


def persist_override() -> float | None:
    """Seconds of idle time from `ORCH_SSH_PERSIST`, when it holds a positive number."""
    try:
        value = float(os.environ.get(PERSIST_ENV, ""))
    except ValueError:
        return None
    return value if value > 0 else None


def holder_dir(create: bool = True) -> Path:
    """The per-user directory of holder sockets, checked private (0700, ours, a real directory)."""
    if os.environ.get(DIR_ENV):
        path = Path(os.path.abspath(os.environ[DIR_ENV]))
    elif os.environ.get("XDG_RUNTIME_DIR"):
        path = Path(os.environ["XDG_RUNTIME_DIR"]) / "orch"
    else:
        path = Path(f"/tmp/orch-{os.getuid()}")
    if create:
        try:
            path.mkdir(mode=0o700, parents=False)
        except FileExistsError:
            pass
        except FileNotFoundError:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise WireError(
            f"{path} is not a private directory of this user (it must be a directory owned by uid "
            f"{os.getuid()}, mode 0700); warm connections are off until it is"
        )
    return path


def fleet_file(explicit: str | os.PathLike[str] | None) -> Path | None:
    """The fleet file as `load_fleet` finds it (--fleet, $ORCH_FLEET, ./fleet.yaml), resolved; None if none."""
    if explicit:
        path = Path(explicit)
    elif os.environ.get(FLEET_ENV):
        path = Path(os.environ[FLEET_ENV])
    else:
        path = Path("fleet.yaml")
    try:
        return path.resolve(strict=True)
    except OSError:
        return None


def holder_key(fleet_path: Path, content: bytes, overrides: Mapping[str, Any]) -> str:
    """The holder's name: fleet path and content, command-line SSH settings, protocol, interpreter."""
    h = hashlib.sha256()
    for part in (
        str(PROTOCOL),
        sys.executable,
        str(fleet_path),
        hashlib.sha256(content).hexdigest(),
        json.dumps({k: v for k, v in sorted(overrides.items()) if v is not None}, sort_keys=True),
    ):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:20]


def socket_path(directory: Path, key: str) -> Path:
    return directory / f"{key}.sock"


# -- framing -----------------------------------------------------------------


def send(sock: socket.socket, doc: Mapping[str, Any], blob: bytes | None = None) -> None:
    """One frame: the JSON document (with `blob` set to the payload's size when there is one)."""
    if blob is not None:
        doc = {**doc, "blob": len(blob)}
    data = json.dumps(doc, separators=(",", ":")).encode()
    sock.sendall(_LEN.pack(len(data)) + data + (blob or b""))


def _exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks: list[bytes] = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            if chunks:
                raise WireError("the connection ended in the middle of a frame")
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def receive(sock: socket.socket) -> tuple[dict[str, Any], bytes | None] | None:
    """The next frame and its payload; None when the peer closed cleanly between frames."""
    head = _exactly(sock, _LEN.size)
    if head is None:
        return None
    (size,) = _LEN.unpack(head)
    if size > MAX_FRAME:
        raise WireError(f"frame of {size} bytes (limit {MAX_FRAME})")
    data = _exactly(sock, size)
    if data is None:
        raise WireError("the connection ended in the middle of a frame")
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise WireError(f"not a JSON frame: {exc}") from None
    if not isinstance(doc, dict):
        raise WireError("a frame must be a JSON object")
    blob = None
    if "blob" in doc:
        size = doc["blob"]
        if not isinstance(size, int) or not 0 <= size <= MAX_FRAME:
            raise WireError(f"bad payload size {size!r}")
        blob = _exactly(sock, size) if size else b""
        if blob is None:
            raise WireError("the connection ended before the payload")
    return doc, blob


def frames(sock: socket.socket) -> Iterator[dict[str, Any]]:
    """Every frame until the peer closes (payloads are not expected here)."""
    while True:
        got = receive(sock)
        if got is None:
            return
        yield got[0]


def connect(path: Path, timeout: float | None = 5.0) -> socket.socket:
    """A connection to the holder at `path`, past its greeting (which says whether it accepts us).

    A unix socket whose backlog is full refuses a connect with a timeout at once (EAGAIN)
    rather than waiting: that is retried until `timeout`, as a blocking connect would wait."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
            break
        except BlockingIOError:
            sock.close()
            if deadline is not None and time.monotonic() >= deadline:
                raise
            time.sleep(BACKLOG_RETRY)
        except BaseException:
            sock.close()
            raise
    try:
        got = receive(sock)
        if got is None:
            raise WireError(f"{path}: the holder closed the connection without a greeting")
        hello = got[0]
        if not hello.get("ok"):
            raise WireError(f"{path}: refused: {hello.get('error', 'no reason given')}")
        if hello.get("protocol") != PROTOCOL:
            raise WireError(f"{path}: protocol {hello.get('protocol')}, expected {PROTOCOL}")
        sock.settimeout(None)
        return sock
    except BaseException:
        sock.close()
        raise


def ask(path: Path, request: Mapping[str, Any], timeout: float = 5.0) -> dict[str, Any]:
    """One request, one reply (status, stop)."""
    try:
        sock = connect(path, timeout)
    except OSError as exc:
        raise WireError(f"{path}: {exc}") from None
    with sock:
        sock.settimeout(timeout)
        send(sock, request)
        got = receive(sock)
    if got is None:
        raise WireError(f"{path}: no reply")
    return got[0]


# -- the holders of this user ------------------------------------------------------


def holders(directory: Path | None = None) -> list[dict[str, Any]]:
    """Every live holder in this user's directory, as its status; dead sockets are removed."""
    try:
        directory = directory or holder_dir(create=False)
    except (OSError, WireError):
        return []
    found = []
    for path in sorted(directory.glob("*.sock")):
        try:
            reply = ask(path, {"op": "status"})
        except (OSError, WireError):
            if _unlocked(directory / (path.stem + ".lock")):
                path.unlink(missing_ok=True)  # its holder is gone
            continue
        if reply.get("ok"):
            found.append(reply["status"])
    return found


def _unlocked(lock: Path) -> bool:
    import fcntl

    try:
        with open(lock, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def stop_holders(directory: Path | None = None, timeout: float = 10.0) -> list[dict[str, Any]]:
    """Ask every live holder to exit and wait until each has let go of its lock; what each said."""
    import time

    try:
        directory = directory or holder_dir(create=False)
    except (OSError, WireError):
        return []
    stopped = []
    for path in sorted(directory.glob("*.sock")):
        try:
            reply = ask(path, {"op": "stop"})
        except (OSError, WireError):
            continue
        deadline = time.monotonic() + timeout
        pid = int(reply.get("pid") or 0)
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        stopped.append({"key": path.stem, "pid": pid, "stopped": _gone(pid)})
    return stopped


def _gone(pid: int) -> bool:
    """Whether process `pid` has exited (a zombie waiting for its reaper counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True
