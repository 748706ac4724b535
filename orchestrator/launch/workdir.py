"""`--workdir`: make every worker's copy of the training code equal to the local one."""

from __future__ import annotations

import io
import json
import os
import tarfile
from collections.abc import Sequence
from typing import Any

from orchestrator.errors import LaunchError
from orchestrator.fleet import WorkerRef
from orchestrator.launch.control import ReportFn, quiet, reply
from orchestrator.launch.plan import LaunchPlan
from orchestrator.remote import run_hostside
from orchestrator.transport import Result, Transport


def sync_workdir(plan: LaunchPlan, transport: Transport, report: ReportFn = quiet) -> dict[str, dict[str, Any]]:
    """Make every worker's copy of --workdir equal to the local one (changed files only, verified)."""
    from hostside.launch_sync import manifest

    wd = plan.workdir
    if wd is None:
        raise LaunchError("the plan has no --workdir to sync")
    if not os.path.isdir(wd.local):
        raise LaunchError(f"--workdir {wd.local} is not a directory")
    if plan.target.kind == "script" and not os.path.isfile(os.path.join(wd.local, str(plan.target.path))):
        raise LaunchError(f"script {plan.target.path} not found in --workdir {wd.local}")
    local = manifest(wd.local)
    archives: dict[tuple[str, ...], bytes] = {}

    def one(worker: WorkerRef) -> Result:
        res = run_hostside(transport, worker, "launch_sync", ["manifest", wd.remote], timeout=120)
        doc = reply(res)
        if doc is None:
            return res
        remote = doc["files"]
        changed = tuple(sorted(rel for rel, meta in local.items() if remote.get(rel) != meta))
        if not changed and set(remote) == set(local):
            return Result(
                host=worker.name,
                argv=("launch_sync",),
                exit_code=0,
                stdout=json.dumps(
                    {
                        "schema_version": 1,
                        "ok": True,
                        "changed": [],
                        "deleted": [],
                        "verified": len(local),
                        "mismatches": [],
                    }
                ),
            )
        # The manifest and the changed files travel over SFTP (no data on command lines).
        staging = f"{worker.root}/code/.sync-{plan.run_id}"
        put = transport.put_one(worker.name, io.BytesIO(json.dumps({"files": local}).encode()), f"{staging}.json")
        if not put.ok:
            return put
        args = ["apply", wd.remote, "--manifest", f"{staging}.json"]
        if changed:
            data = archives.get(changed)
            if data is None:
                data = _tar(wd.local, changed)
                archives[changed] = data
            put = transport.put_one(worker.name, io.BytesIO(data), f"{staging}.tgz")
            if not put.ok:
                return put
            args += ["--archive", f"{staging}.tgz"]
        return run_hostside(transport, worker, "launch_sync", args, timeout=300)

    results = transport.map(one, plan.workers)
    problems, out = [], {}
    for name, res in results.items():
        doc = reply(res)
        if doc is None or not doc.get("ok"):
            detail = f"files differ after sync: {', '.join(doc['mismatches'][:5])}" if doc else res.describe()
            problems.append(f"{name}: {detail}")
        else:
            out[name] = doc
    if problems:
        raise LaunchError(f"--workdir {wd.local} could not be synced to every worker:\n  " + "\n  ".join(problems))
    shipped = sum(len(d["changed"]) for d in out.values())
    report(
        f"workdir {wd.local} -> {wd.remote}: {len(local)} files, {shipped} shipped over "
        f"{len(out)} workers, all verified"
    )
    return out


def _tar(root: str, files: Sequence[str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for rel in files:
            tar.add(os.path.join(root, rel), arcname=rel, recursive=False)
    return buf.getvalue()
