"""`orch deploy rollback` and `orch deploy status`: re-activate the previous
bundle, and report each worker's active bundle per lane (and where a lane's
workers disagree)."""

from __future__ import annotations

import json
from typing import Any

from hostside.deploy_lock import holder_name
from orchestrator.fleet import Fleet, WorkerRef
from orchestrator.remote import job_document, run_hostside
from orchestrator.transport import Result, Transport


def rollback(fleet: Fleet, lane: str, transport: Transport) -> dict[str, dict[str, Any]]:
    """Re-activate the previous bundle on every worker of the lane, under the lane's
    deploy lock taken all or nothing (first worker first, as a deploy takes it):
    refused anywhere, it rolls back nowhere and says who holds the lane."""
    import secrets

    from orchestrator.deploy.lane_lock import _liveness, controller_identity

    workers = sorted(fleet.lane_workers(lane), key=lambda w: w.index)
    token = secrets.token_hex(8)
    holder = controller_identity(token, None)
    docs: dict[str, dict[str, Any]] = {}
    taken: set[str] = set()

    def call(w: WorkerRef, action: str, extra: dict[str, Any] | None = None) -> Result:
        req = {"root": w.root, "lane": lane, "holder": holder, **(extra or {})}
        return run_hostside(transport, w, "deploy", [action], stdin=json.dumps(req), timeout=60)

    def take(w: WorkerRef) -> Result:
        res = call(w, "begin", {"bundle_id": None, "wheels": [], "lock_only": True})
        doc = _doc_or_error(res)
        if doc.get("ok") and doc.get("state") == "locked-by-us":
            taken.add(w.name)
        elif doc.get("ok"):
            h = doc.get("holder") or {}
            doc = {"ok": False, "error": f"another deploy holds lane {lane}: {holder_name(h)}"}
        docs[w.name] = doc
        return res

    def roll(w: WorkerRef) -> Result:
        res = call(w, "rollback")
        docs[w.name] = _doc_or_error(res)
        if docs[w.name].get("ok"):
            taken.discard(w.name)  # rollback released it
        return res

    def unlock(w: WorkerRef) -> Result:
        return call(w, "unlock")

    with _liveness(token):
        try:
            transport.map(take, [workers[0].name])
            if workers[0].name in taken:
                transport.map(take, [w.name for w in workers[1:]])
            refused = [w.name for w in workers if w.name not in taken]
            if refused:
                first = refused[0]
                for w in workers:
                    if w.name in taken or w.name not in docs:
                        docs[w.name] = {
                            "ok": False,
                            "error": f"not rolled back: lane {lane} could not be locked on every worker "
                            f"({first}: {docs[first].get('error')})",
                        }
                return {w.name: docs[w.name] for w in workers}
            transport.map(roll, [w.name for w in workers])
        finally:
            if taken:
                transport.map(unlock, sorted(taken))
    return {w.name: docs[w.name] for w in workers}


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
