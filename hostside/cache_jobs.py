"""The cache jobs a controller runs on a worker (`python3 -m hostside.launch_cache VERB`):

    status   every bundle's caches under a lane directory: entries, bytes,
             last write, and the writer lease's state
    clear    remove them (a cache whose writer lease is live is refused)

hostside.launch_cache keeps the command line and dispatches here.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from typing import Any

from hostside import lease
from hostside.cache_evidence import FRONTENDS, count_entries
from hostside.cache_lease import LEASE_FIELDS, LEASE_FILE, describe_holder, judge_lease

CHECKS_DIR = ".checks"


def _bundle_dirs(lane_dir: str | None) -> list[str]:
    if not lane_dir or not os.path.isdir(lane_dir):
        return []
    return sorted(e for e in os.listdir(lane_dir) if not e.startswith(".") and os.path.isdir(os.path.join(lane_dir, e)))


def _lease_view(path: str, ttl: float) -> dict[str, Any]:
    reading = lease.read(path, LEASE_FIELDS)
    state, why = judge_lease(reading, now=time.time(), hostname=socket.gethostname(), ttl=ttl)
    out: dict[str, Any] = {"state": state, "reason": why, "path": path}
    if reading.state == "held":
        out.update(
            {
                "holder": reading.doc.get("holder"),
                "heartbeat_at": reading.heartbeat,
                "acquired_at": reading.doc.get("acquired_at"),
            }
        )
    return out


def status(req: dict[str, Any]) -> dict[str, Any]:
    lane_dir, ttl = req.get("lane_dir"), float(req.get("ttl") or 20.0)
    active = req.get("active")
    active_id = os.path.basename(os.path.realpath(active)) if active and os.path.exists(active) else None
    bundles = []
    for bundle_id in _bundle_dirs(lane_dir):
        base = os.path.join(str(lane_dir), bundle_id)
        bundles.append(
            {
                "bundle_id": bundle_id,
                "active": bundle_id == active_id,
                "base": base,
                "frontends": {f: count_entries(os.path.join(base, f), f) for f in FRONTENDS},
                "lease": _lease_view(os.path.join(base, LEASE_FILE), ttl),
            }
        )
    checks_dir = req.get("checks_dir")
    checks = sorted(os.listdir(checks_dir)) if isinstance(checks_dir, str) and os.path.isdir(checks_dir) else []
    return {
        "ok": True,
        "lane_dir": lane_dir,
        "exists": isinstance(lane_dir, str) and os.path.isdir(lane_dir),
        "active_bundle": active_id,
        "bundles": bundles,
        "checks": checks,
    }


def _size(path: str) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def clear(req: dict[str, Any]) -> dict[str, Any]:
    ttl = float(req.get("ttl") or 20.0)
    scope_dir = req.get("scope_dir")
    if scope_dir:
        if f"/{CHECKS_DIR}/" not in scope_dir:
            return {"ok": False, "error": f"refusing to remove {scope_dir}: not a restart-check directory"}
        if not os.path.isdir(scope_dir):
            return {"ok": True, "removed": [], "freed": 0, "refused": []}
        freed = _size(scope_dir)
        shutil.rmtree(scope_dir, ignore_errors=True)
        try:
            os.rmdir(os.path.dirname(scope_dir))  # .checks, once no check is left
        except OSError:
            pass
        return {"ok": not os.path.exists(scope_dir), "removed": [scope_dir], "freed": freed, "refused": []}
    lane_dir = req.get("lane_dir")
    removed, refused, freed = [], [], 0
    for bundle_id in _bundle_dirs(lane_dir):
        base = os.path.join(str(lane_dir), bundle_id)
        lease = _lease_view(os.path.join(base, LEASE_FILE), ttl)
        if lease["state"] in ("live", "remote"):  # a remote holder is never judged stale by timestamps
            refused.append(
                f"{base}: its writer is running: {describe_holder(lease.get('holder') or {})}, {lease['reason']}"
            )
            continue
        freed += _size(base)
        shutil.rmtree(base, ignore_errors=True)
        removed.append(base)
    if lane_dir and os.path.isdir(lane_dir) and not os.listdir(lane_dir):
        os.rmdir(lane_dir)
    return {"ok": not refused, "removed": removed, "freed": freed, "refused": refused}
