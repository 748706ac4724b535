"""Switching a lane's active bundle on a worker: activate (while the deploy lock is
ours), roll back to the previous one, and report each lane's state.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from hostside import SCHEMA_VERSION, lease
from hostside.deploy_lock import _holder, _lane_mutex, _read_lock, _release, _require_lock, describe_holder
from hostside.deploy_store import MANIFEST, DeployFailure, _complete, _env_id
from hostside.layout import Layout


def activate(req: dict[str, Any]) -> dict[str, Any]:
    """Point the lane at the bundle atomically (symlink swap), record a receipt,
    release the lock (kept with `keep_lock`: the deploy releases it once every
    worker has switched); only while the lock is still ours."""
    layout = Layout(req["root"])
    with _lane_mutex(layout, req["lane"]):
        _require_lock(layout, req, "activating")
        return _activate(layout, req)


def _activate(layout: Layout, req: dict[str, Any]) -> dict[str, Any]:
    lane, bundle_id = req["lane"], req["bundle_id"]
    if not _complete(layout, bundle_id):
        raise DeployFailure(f"environment {bundle_id} is not complete; not activating")
    previous = _env_id(layout, layout.active(lane))
    if previous != bundle_id:
        _swap(layout.active(lane), bundle_id)
        if previous:
            _swap(layout.previous(lane), previous)
    receipt = {
        "schema_version": SCHEMA_VERSION,
        "event": "deploy",
        "lane": lane,
        "bundle": req["bundle"],
        "bundle_id": bundle_id,
        "lock_digest": req.get("lock_digest"),
        "previous": previous,
        "time": time.time(),
        "controller": req.get("holder", {}).get("controller"),
    }
    _append(layout.deploy_receipts(lane), receipt)
    if not req.get("keep_lock"):  # a deploy switching every worker keeps it until all have switched
        _release(layout, req)
    return {"active": bundle_id, "previous": previous, "receipt": receipt}


def _swap(link: str, bundle_id: str) -> None:
    tmp = f"{link}.new-{os.getpid()}"
    os.symlink(os.path.join("..", "..", "envs", bundle_id), tmp)
    os.replace(tmp, link)


def _append(path: str, record: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as fh:
        fh.write(json.dumps(record, sort_keys=True) + "\n")


def rollback(req: dict[str, Any]) -> dict[str, Any]:
    """Re-activate the previous bundle (and remember the current one as previous),
    under the lane's mutex and only while the requester holds the lane's deploy
    lock (which it then releases); without a holder, only while no deploy holds it."""
    layout = Layout(req["root"])
    lane = req["lane"]
    with _lane_mutex(layout, lane):
        if "holder" in req:
            _require_lock(layout, req, "rolling back")
        else:
            reading = _read_lock(layout.deploy_lock(lane))
            if reading.state != "absent":
                held = describe_holder(_holder(reading))
                raise DeployFailure(f"a deploy holds lane {lane} ({held}); not rolling back")
        out = _rollback(layout, lane)
        if "holder" in req:
            _release(layout, req)
    return out


def _rollback(layout: Layout, lane: str) -> dict[str, Any]:
    current, previous = _env_id(layout, layout.active(lane)), _env_id(layout, layout.previous(lane))
    if not previous:
        raise DeployFailure(f"lane {lane} has no previous bundle to roll back to")
    if not _complete(layout, previous):
        raise DeployFailure(f"previous bundle {previous} is no longer installed")
    _swap(layout.active(lane), previous)
    if current:
        _swap(layout.previous(lane), current)
    _append(
        layout.deploy_receipts(lane),
        {
            "schema_version": SCHEMA_VERSION,
            "event": "rollback",
            "lane": lane,
            "bundle_id": previous,
            "previous": current,
            "time": time.time(),
        },
    )
    return {"active": previous, "previous": current}


def status(req: dict[str, Any]) -> dict[str, Any]:
    """Active and previous bundle of each requested lane, with their manifests."""
    layout = Layout(req["root"])
    lanes = {}
    for lane in req["lanes"]:
        active = _env_id(layout, layout.active(lane))
        manifest = None
        if active:
            try:
                with open(os.path.join(layout.env(active), MANIFEST)) as fh:
                    manifest = json.load(fh)
            except (OSError, ValueError):
                manifest = None
        lanes[lane] = {
            "active": active,
            "previous": _env_id(layout, layout.previous(lane)),
            "complete": active is not None and _complete(layout, active),
            "bundle": (manifest or {}).get("bundle"),
            "lock": _holder(reading := _read_lock(layout.deploy_lock(lane))),
            # judged here, on this worker's clock, which also wrote the heartbeat
            "lock_state": lease.judge(
                reading, now=time.time(), ttl=float(req.get("stale_after", 300)), unreadable="age-by-mtime"
            ).state,
        }
    return {"lanes": lanes}
