"""The lane's deploy lock on a worker: take it, keep it fresh, check it, release it.

The lock is a heartbeat lease (hostside.lease); every read-modify-write of it
happens under the lane's mutex (an flock), so a heartbeat cannot resurrect a
lock that was just released or overwrite one another deploy just took.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from hostside import lease
from hostside.deploy_store import DeployFailure, _complete, _env_id, _stored
from hostside.layout import Layout

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
    return (
        f"held by {holder.get('user', '?')}@{holder.get('controller', '?')} pid {holder.get('pid', '?')} "
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
    """Check the lane: refuse if another deploy holds it, say `unchanged` if
    the bundle is already active, else take the lock and list missing wheels."""
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
    if active == bundle_id and _complete(layout, bundle_id):
        return {"state": "unchanged", "active": active, "recovered_lock": recovered}
    if not lease.create(lock_path, dict(req["holder"], heartbeat=now)):  # only an older hostside, without the mutex
        return {"state": "locked", "holder": _holder(_read_lock(lock_path)), "heartbeat_age": 0.0}
    missing = [w for w in req["wheels"] if not _stored(layout, w)]
    return {
        "state": "locked-by-us",
        "active": active,
        "missing": missing,
        "recovered_lock": recovered,
        "env_complete": _complete(layout, bundle_id),
        "disk_free_bytes": shutil.disk_usage(req["root"]).free,
    }


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


@contextlib.contextmanager
def _heartbeating(req: dict[str, Any], every: float) -> Iterator[None]:
    """Refresh the heartbeat from a daemon thread every `every` seconds while the
    body runs: one install or download can outlast the stale-lock timeout."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every):
            try:
                _heartbeat(req)
            except Exception as exc:  # a missed beat is retried; it must not break the action
                print(f"heartbeat failed: {exc}", file=sys.stderr)

    thread = threading.Thread(target=beat, name="deploy-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)
