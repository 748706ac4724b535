"""The lane's deploy lock on a worker: take it, keep it fresh, check it, release it.

The lock is a heartbeat lease (hostside.lease); every read-modify-write of it
happens under the lane's mutex (an flock), so a heartbeat cannot resurrect a
lock that was just released or overwrite one another deploy just took.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from hostside import lease
from hostside.deploy_interpreter import system_problem
from hostside.deploy_store import DeployFailure, _env_id, _stored, env_problem
from hostside.layout import RENEWED_FILE, Layout

# The deploy lock is a heartbeat lease (hostside.lease) with these field names on disk.
LOCK_FIELDS = lease.Fields(token="token", heartbeat="heartbeat")


def _read_lock(path: str) -> lease.Reading:
    """The lane's lock file, as read (never raises on its content)."""
    return lease.read(path, LOCK_FIELDS)


def _holder(reading: lease.Reading) -> dict[str, Any] | None:
    """The lock's holder as the controller sees it; an unreadable lock shows as such, with its mtime."""
    if reading.state == "absent":
        return None
    if reading.state == "unreadable":
        return {"holder": "unreadable lock file", "reason": reading.reason, "heartbeat": reading.mtime}
    return reading.doc


@contextlib.contextmanager
def _lane_mutex(layout: Layout, lane: str) -> Iterator[None]:
    """Serialise every read-modify-write of a lane's lock file (take, refresh,
    check, release) across processes, so a heartbeat cannot resurrect a lock
    that was just released or overwrite one another deploy just took."""
    os.makedirs(layout.lane_dir(lane), exist_ok=True)
    # Read-only is enough for flock, so another user's deploy can take the mutex too.
    fd = os.open(os.path.join(layout.lane_dir(lane), ".deploy-mutex"), os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # drops the flock


def describe_holder(holder: dict[str, Any] | None) -> str:
    """Who holds a lane's lock, for messages (the controller uses it too)."""
    if not holder:
        return "no deploy holds it now"
    if "token" not in holder:
        return f"held by an {holder.get('holder', 'unknown holder')}"
    return f"held by {holder_name(holder)}"


def holder_name(holder: dict[str, Any]) -> str:
    """`user@host pid N (bundle B)`: the holder of a lock, as people read it."""
    if "token" not in holder:
        return str(holder.get("holder", "an unknown holder"))
    return (
        f"{holder.get('user', '?')}@{holder.get('controller', '?')} pid {holder.get('pid', '?')} "
        f"(bundle {holder.get('bundle_id', '?')})"
    )


class _LockLost(DeployFailure):
    """The lane's lock no longer carries our token: another deploy took it."""


def _require_lock(layout: Layout, req: dict[str, Any], step: str) -> None:
    """Raise unless the lane's lock still carries this deploy's token (call
    under the lane mutex when acting on the answer)."""
    reading = _read_lock(layout.deploy_lock(req["lane"]))
    if not reading.is_ours(req["holder"]["token"]):
        raise _LockLost(
            f"this deploy no longer holds lane {req['lane']}'s deploy lock ({describe_holder(_holder(reading))}); "
            f"not {step}, the previous bundle stays active"
        )


# -- actions ------------------------------------------------------------------


def begin(req: dict[str, Any]) -> dict[str, Any]:
    """Check the lane: refuse if another deploy holds it, else take the lock and
    say `unchanged` if the bundle is already active, or list missing wheels
    (`lock_only`: just take the lock, as a rollback does)."""
    layout = Layout(req["root"])
    with _lane_mutex(layout, req["lane"]):
        return _begin(layout, req)


def _begin(layout: Layout, req: dict[str, Any]) -> dict[str, Any]:
    lane, bundle_id = req["lane"], req["bundle_id"]
    lock_path = layout.deploy_lock(lane)
    now = time.time()
    recovered = None
    reading = _read_lock(lock_path)
    if reading.state != "absent":
        verdict = lease.judge(reading, now=now, ttl=float(req.get("stale_after", 300)), unreadable="age-by-mtime")
        stolen = reading.token is not None and reading.token in req.get("steal", [])
        if verdict.state == "live" and not stolen:
            return {"state": "locked", "holder": _holder(reading), "heartbeat_age": round(verdict.age or 0.0, 1)}
        recovered = _holder(reading)
        lease.remove_stale(lock_path, LOCK_FIELDS, reading, str(os.getpid()))
    active = _env_id(layout, layout.active(lane))
    # The lock is taken even when nothing changes here: a lane is locked on all
    # its workers or on none, so a racing deploy is refused at the first one.
    if not lease.create(lock_path, dict(req["holder"], heartbeat=now)):  # only an older hostside, without the mutex
        return {"state": "locked", "holder": _holder(_read_lock(lock_path)), "heartbeat_age": 0.0}
    if req.get("lock_only"):
        return {"state": "locked-by-us", "active": active, "recovered_lock": recovered}
    # `unchanged` only for an environment found intact now, not for a marker or a link alone.
    problem = env_problem(layout.env(bundle_id), bundle_id)
    if active == bundle_id and problem is None:
        return {"state": "unchanged", "active": active, "recovered_lock": recovered}
    if req.get("python") and not req.get("interpreter") and problem is not None:
        problem = system_problem(str(req["python"]))
        if problem:
            _release(layout, req)
            raise DeployFailure(problem)
    swept = _sweep_incoming(layout, float(req.get("stale_after", 300)))
    missing = [w for w in req["wheels"] if not _stored(layout, w)]
    return {
        "swept": swept,
        "state": "locked-by-us",
        "active": active,
        "missing": missing,
        "recovered_lock": recovered,
        "env_complete": problem is None,
        # an environment there but incomplete (an install cut short, files lost): install rebuilds it
        "env_problem": problem if problem not in (None, "not installed") else None,
        "disk_free_bytes": shutil.disk_usage(req["root"]).free,
    }


def _sweep_incoming(layout: Layout, idle: float) -> list[str]:
    """Remove partial uploads and downloads no one has written for `idle` seconds (their deploy died;
    a live transfer keeps its file's mtime fresh). Judged by this worker's clock, which wrote the mtimes."""
    incoming = os.path.join(layout.store, ".incoming")
    swept: list[str] = []
    try:
        names = os.listdir(incoming)
    except OSError:
        return swept
    now = time.time()
    for name in names:
        path = os.path.join(incoming, name)
        try:
            if now - os.lstat(path).st_mtime > idle:
                os.unlink(path)
                swept.append(name)
        except OSError:
            pass
    return swept


def unlock(req: dict[str, Any]) -> dict[str, Any]:
    """Release the lane's deploy lock if we (this token) hold it."""
    layout = Layout(req["root"])
    with _lane_mutex(layout, req["lane"]):
        return {"released": _release(layout, req)}


def _release(layout: Layout, req: dict[str, Any]) -> bool:
    return lease.release(layout.deploy_lock(req["lane"]), LOCK_FIELDS, req["holder"]["token"])


def heartbeat(req: dict[str, Any]) -> dict[str, Any]:
    """Refresh our lock's heartbeat (the controller calls this while it uploads,
    when no hostside action runs); says who holds the lock if it is not us."""
    return _heartbeat(req)


def _heartbeat(req: dict[str, Any]) -> dict[str, Any]:
    """Refresh our deploy lock's heartbeat so a long step is not taken for a dead deploy."""
    if "lane" not in req or "holder" not in req:
        return {"refreshed": False, "holder": None}
    layout = Layout(req["root"])
    path = layout.deploy_lock(req["lane"])
    with _lane_mutex(layout, req["lane"]):
        reading = lease.refresh(path, LOCK_FIELDS, str(req["holder"].get("token")), now=time.time())
    if reading.is_ours(req["holder"].get("token")):
        return {"refreshed": True, "holder": None}
    return {"refreshed": False, "holder": _holder(reading)}


# -- the controller lease --------------------------------------------------------
#
# Only the controller renews a deploy's lock (its `heartbeat` calls, every few
# seconds). A long action on the worker watches that the heartbeat keeps
# changing, on this host's monotonic clock; when it stops (the controller was
# killed, its network is gone) or the lock is no longer ours, the action ends
# itself within CONTROLLER_LEASE_TTL plus one poll: it kills what it started,
# removes its temporary files and records why in the lane's deploy receipts.

CONTROLLER_LEASE_TTL = lease.CONTROLLER_LEASE_TTL  # seconds without a renewal before a worker gives up
WATCH_EVERY = 1.0

# Renews the controller lease: rewrites the lane's RENEWED_FILE with the deploy's token
# ("$2") and the controller's count ("$3"), atomically. A shell command of a few ms of a
# worker's CPU, where a `heartbeat` action (Python, the lane mutex, the lock's JSON) costs
# about 100 ms: at 256 workers every few seconds, that alone outran a 2-core machine
# hosting them and starved the renewals it carried. The lock's own heartbeat (what another
# deploy judges staleness by, over STALE_AFTER) is refreshed by `heartbeat`, less often.
RENEW_SCRIPT = (
    '[ -d "$1" ] || exit 1; umask 022; '
    'printf \'{"token": "%s", "renewed": %d}\\n\' "$2" "$3" > "$1/.$4.$2.tmp" && mv -f "$1/.$4.$2.tmp" "$1/$4"'
)


def renew_argv(root: str, lane: str, token: str, count: int) -> list[str]:
    """The command that renews deploy `token`'s controller lease on lane `lane` with the controller's `count`."""
    return ["sh", "-c", RENEW_SCRIPT, "orch-renew", Layout(root).lane_dir(lane), token, str(int(count)), RENEWED_FILE]


def watch_lease(layout: Layout, req: dict[str, Any], *, ttl: float, on_lost: Callable[[str], None]) -> Any:
    """Watch the deploy's controller lease on its lane (renewed by its lock's heartbeat or by
    `renew_argv`); `on_lost(why)` once it lapses. Returns the event that stops watching."""
    return lease.watch(
        layout.deploy_lock(req["lane"]),
        LOCK_FIELDS,
        str(req["holder"].get("token")),
        ttl=ttl,
        every=WATCH_EVERY,
        on_lost=on_lost,
        renewals=layout.deploy_renewed(req["lane"]),
    )


_children: set[subprocess.Popen[str]] = set()
_cleanups: list[Callable[[], None]] = []
_abandoning = threading.Event()
_commit = threading.Lock()  # held while a finished result is moved into place; `abandon` waits for it


@contextlib.contextmanager
def committing() -> Iterator[None]:
    """Move a finished result into place (a rename) without `abandon` running beside it.

    `abandon` runs on the lease watcher's thread while the action's own thread
    goes on; its cleanups remove the action's build directory. Were that
    removal under way while the action renamed the directory into place, it
    would go on deleting files inside the renamed directory (it works through
    open directory descriptors), leaving a marked-complete environment without
    some of its files. Here the two exclude each other: once abandoning, no
    commit starts (this thread waits for the process to end); a commit under
    way finishes before the cleanups run."""
    _commit.acquire()
    if _abandoning.is_set():
        _commit.release()
        threading.Event().wait()  # `abandon` is ending this process
    try:
        yield
    finally:
        _commit.release()


def run_child(argv: list[str], env: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """subprocess.run in its own process group, killed with us when the controller lease ends."""
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    _children.add(proc)
    try:
        out, err = proc.communicate()
    finally:
        _children.discard(proc)
    if _abandoning.is_set():
        threading.Event().wait()  # killed by `abandon`, which ends this process
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def abandon(layout: Layout, req: dict[str, Any], action: str, why: str) -> None:
    """End this process: the controller is gone. Record why, clean up, kill children, exit 3."""
    _abandoning.set()  # a child killed below must not let the action carry on and exit 0 first
    record = {
        "event": "abandoned",
        "lane": req.get("lane"),
        "action": action,
        "bundle_id": req.get("bundle_id"),
        "token": (req.get("holder") or {}).get("token"),
        "why": why,
        "time": time.time(),
    }
    with contextlib.suppress(OSError):
        path = layout.deploy_receipts(req["lane"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a") as fh:
            fh.write(json.dumps(record, sort_keys=True) + "\n")
    print(f"{action}: abandoned, {why}", file=sys.stderr)
    for proc in list(_children):
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
    with _commit:  # never beside a rename into place (see `committing`)
        for cleanup in reversed(list(_cleanups)):
            with contextlib.suppress(Exception):
                cleanup()
        os._exit(3)


@contextlib.contextmanager
def _watched(req: dict[str, Any], action: str, ttl: float = CONTROLLER_LEASE_TTL) -> Iterator[None]:
    """Run the body while the controller keeps renewing our lock; `abandon` otherwise."""
    layout = Layout(req["root"])
    stop = watch_lease(layout, req, ttl=ttl, on_lost=lambda why: abandon(layout, req, action, why))
    try:
        yield
    finally:
        stop.set()
