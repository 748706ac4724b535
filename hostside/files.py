"""File helpers shared by both sides: content hashes and atomic writes (the only ones in orch)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import select
import shutil
import stat
import tempfile
from typing import IO, Any

CHUNK = 1 << 20


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_atomic(path: str | os.PathLike[str], data: str | bytes, mode: int | None = None) -> None:
    """Write `data` so readers see the old or the new file, never half of one (owner-only unless `mode`).

    No fsync: these files coordinate live processes, and an fsync can stall for
    seconds behind other writers' dirty data (a journal commit).
    """
    copy_atomic(path, io.BytesIO(data.encode() if isinstance(data, str) else data), mode)


def copy_atomic(path: str | os.PathLike[str], src: IO[bytes], mode: int | None = None) -> None:
    """`write_atomic` of what `src` holds, streamed (for files too large to hold in memory)."""
    path = os.fspath(path)
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            shutil.copyfileobj(src, fh, CHUNK)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json_atomic(path: str | os.PathLike[str], doc: Any, mode: int | None = None) -> None:
    """`write_atomic` of one JSON document (indented, newline-terminated)."""
    write_atomic(path, json.dumps(doc, indent=1) + "\n", mode)


def read_json(path: str | os.PathLike[str]) -> Any:
    """The JSON value at `path`, or None when absent or (still) unreadable. Validate what you get."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


# -- a doorbell: wake a waiting process without it polling ---------------------------------------


def open_bell(path: str | os.PathLike[str]) -> int | None:
    """A doorbell at `path`: a FIFO (owner-only) opened for reading and writing, non-blocking.

    `wait_bell` on it sleeps until `ring(path)` or its timeout; the waiter keeps a
    writer end itself, because a FIFO whose last writer left reads as end-of-file and
    would wake every select at once. The file a waiter checks stays the truth: the
    bell only says "look now". None where no FIFO can be made (the caller polls).
    """
    try:
        os.mkfifo(path, 0o600)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    if not stat.S_ISFIFO(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def wait_bell(fd: int, timeout: float) -> None:
    """Sleep until the bell `fd` rings or `timeout` seconds pass; swallow the rings."""
    ready, _, _ = select.select([fd], [], [], max(timeout, 0.0))
    while ready:
        try:
            if not os.read(fd, 512):
                return
        except BlockingIOError:
            return


def ring(path: str | os.PathLike[str]) -> None:
    """Wake whoever waits on the doorbell at `path`; nothing when no one does (never blocks)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)  # ENXIO: no reader; ENOENT: no bell
    except OSError:
        return
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.write(fd, b"!")
    except OSError:
        pass  # the pipe is full: it rings already
    finally:
        os.close(fd)


def close_bell(fd: int, path: str | os.PathLike[str]) -> None:
    """Stop listening and remove the bell (a later ring finds none and does nothing)."""
    os.close(fd)
    try:
        os.unlink(path)
    except OSError:
        pass
