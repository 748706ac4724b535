"""The lane's deploy lock, controller side: who we are (the holder identity a
lock records), how long a lock lives without a heartbeat, the thread that keeps
ours fresh (which is also the controller lease the workers' long actions and
relay watch), and telling a dead holder on this host from a live one (the
liveness file a running deploy keeps flock'd).

A lane is locked all or nothing: `execute` and `rollback` take the lock on the
lane's first worker (by index) before any other, so of two racing deploys the
loser is refused there, and anyone refused anywhere releases everything taken."""

from __future__ import annotations

import getpass
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hostside.lease import CONTROLLER_RENEW_EVERY
from hostside.procfs import host_identity

STALE_AFTER = 300.0  # seconds without a heartbeat before another deploy may take a lock over
# Seconds between refreshes of our locks' heartbeat. The workers' long actions and
# the wheel relay end themselves when it stops changing for CONTROLLER_LEASE_TTL
# (hostside.lease, 20 s), so this must stay well below that.
HEARTBEAT_EVERY = CONTROLLER_RENEW_EVERY
HEARTBEAT_TIMEOUT = 60.0  # a timed-out call drops the worker's connection (and any upload on it): be patient
# Every this many beats, from the first, a beat refreshes the lock itself (its heartbeat,
# and who holds it) instead of the cheap renewal: every 30 s, well inside STALE_AFTER.
LOCK_REFRESH_EVERY = 6


def controller_identity(token: str, bundle_id: str | None) -> dict[str, Any]:
    """The holder record a lock carries: machine id + boot id + pid + user identify
    this process exactly (the hostname is only for people to read)."""
    return {
        "token": token,
        **host_identity(),
        "pid": os.getpid(),
        "user": getpass.getuser(),
        "controller": socket.gethostname(),
        "bundle_id": bundle_id,
        "started": time.time(),
        "liveness": str(_liveness_path(token)),
    }


class _Heartbeat:
    """Calls `beat` every `every` seconds from a daemon thread while the `with`
    block runs, and stops when it ends (on failure and Ctrl-C too)."""

    def __init__(self, beat: Callable[[], None], every: float):
        self.beat, self.every = beat, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="orch-deploy-heartbeat", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.beat()
            except Exception:  # a missed beat is retried on the next one
                pass

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        # A beat in flight is harmless after this: the worker refreshes only a
        # lock that still carries our token, under the lane's mutex.
        self._thread.join(timeout=5)


def _liveness_path(token: str) -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "orch" / "deploys" / f"{token}.lock"


class _liveness:
    """While a deploy runs, it holds an flock on a file named by its lock token on
    the controller; the kernel drops it when the process dies, so a later deploy
    from this host can tell a dead holder from a live one exactly."""

    def __init__(self, token: str):
        self.path = _liveness_path(token)

    def __enter__(self) -> _liveness:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open(self.path, "w")
        fcntl.flock(self.fh, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        self.path.unlink(missing_ok=True)
        self.fh.close()


def _holder_is_dead(holder: dict[str, Any] | None) -> bool:
    """A lock taken from this controller host by a deploy that is no longer running.

    A holder is on this host when its machine id is ours (never judged by
    hostname: two hosts may share one); one recorded under another boot id
    is gone. Otherwise the holder's liveness file is exact proof: flock'd
    while it runs, removed when it ends. The lock names that file (it may live
    under another user's home or XDG_STATE_HOME). When the file cannot be
    seen (unreadable), only a vanished pid proves the holder dead; a live pid
    leaves it to the heartbeat. A holder without a machine id is left to the
    heartbeat too."""
    import fcntl

    token = str(holder.get("token") or "") if holder else ""
    me = host_identity()
    if not holder or not me["machine_id"] or holder.get("machine_id") != me["machine_id"]:
        return False
    if not re.fullmatch(r"[0-9a-f]+", token):
        return False
    if holder.get("boot_id") and me["boot_id"] and holder.get("boot_id") != me["boot_id"]:
        return True  # this host rebooted since: no process of that boot runs
    named = _named_liveness(holder, token)
    path = named or _liveness_path(token)
    try:
        fh = open(path)
    except FileNotFoundError:
        return True if named else _pid_is_gone(holder.get("pid"))
    except OSError:
        return _pid_is_gone(holder.get("pid"))
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass
    return True


def _named_liveness(holder: dict[str, Any], token: str) -> Path | None:
    """The liveness file a lock names, if it has the shape `_liveness_path` gives
    (a lock file is worker data: never let it point us at another file)."""
    named = holder.get("liveness")
    if not isinstance(named, str):
        return None
    path = Path(named)
    if (
        path.is_absolute()
        and ".." not in path.parts
        and path.name == f"{token}.lock"
        and path.parent.parts[-2:] == ("orch", "deploys")
    ):
        return path
    return None


def _pid_is_gone(pid: object) -> bool:
    """Whether no process with this pid exists on this host."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # another user's process
    except OverflowError:
        return False  # not a pid; the heartbeat decides
    return False
