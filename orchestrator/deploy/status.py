"""`orch deploy rollback` and `orch deploy status`: re-activate the previous
bundle, and report each worker's active bundle per lane (and where a lane's
workers disagree)."""

from __future__ import annotations

import json
from typing import Any

from orchestrator.fleet import Fleet, WorkerRef
from orchestrator.remote import job_document, run_hostside
from orchestrator.transport import Result, Transport


def rollback(fleet: Fleet, lane: str, transport: Transport) -> dict[str, dict[str, Any]]:
    """Re-activate the previous bundle on every worker of the lane."""

    def one(w: WorkerRef) -> Result:
        req = {"root": w.root, "lane": lane}
        return run_hostside(transport, w, "deploy", ["rollback"], stdin=json.dumps(req), timeout=60)

    return {n: _doc_or_error(r) for n, r in transport.map(one, [w.name for w in fleet.lane_workers(lane)]).items()}


def status(fleet: Fleet, transport: Transport, lanes: list[str]) -> dict[str, dict[str, Any]]:
    """Active/previous bundle per worker and lane, as the workers report it."""
    members = {ln: set(fleet.lane_members[ln]) for ln in lanes}
    names = sorted({n for m in members.values() for n in m}, key=lambda n: fleet.worker(n).index)

    def one(w: WorkerRef) -> Result:
        mine = [ln for ln in lanes if w.name in members[ln]]
        req = {"root": w.root, "lanes": mine}
        return run_hostside(transport, w, "deploy", ["status"], stdin=json.dumps(req), timeout=60)

    return {n: _doc_or_error(r) for n, r in transport.map(one, names).items()}


def _doc_or_error(res: Result) -> dict[str, Any]:
    if res.error:
        return {"ok": False, "error": res.error, "error_kind": res.error_kind}
    try:
        return job_document(res)
    except Exception as exc:
        return {"ok": False, "error": str(exc)}


def disagreements(
    fleet: Fleet, statuses: dict[str, dict[str, Any]], lanes: list[str]
) -> dict[str, dict[str, list[str]]]:
    """Per lane, {bundle_id: [workers]} when a lane's workers disagree (a mixed stack inside a lane)."""
    out = {}
    for ln in lanes:
        seen: dict[str, list[str]] = {}
        for name in fleet.lane_members[ln]:
            doc = statuses.get(name, {})
            active = (doc.get("lanes") or {}).get(ln, {}).get("active") if doc.get("ok") else "unreachable"
            seen.setdefault(active or "none", []).append(name)
        if len(seen) > 1:
            out[ln] = seen
    return out
