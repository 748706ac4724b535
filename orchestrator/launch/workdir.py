"""`--workdir`: make every worker's copy of the training code equal to the local one."""

from __future__ import annotations

import io
import json
import os
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.errors import LaunchError
from orchestrator.fleet import WorkerRef
from orchestrator.launch.control import ReportFn, quiet, reply
from orchestrator.launch.plan import LaunchPlan, Workdir
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
    sync = _Sync(plan.run_id, wd, manifest(wd.local), transport)
    out = _verified(wd, transport.map(sync.one, plan.workers))
    shipped = sum(len(d["changed"]) for d in out.values())
    report(
        f"workdir {wd.local} -> {wd.remote}: {len(sync.local)} files, {shipped} shipped over "
        f"{len(out)} workers, all verified"
    )
    return out


@dataclass
class _Sync:
    """One sync of a workdir: the local manifest, and the archives of changed files built so far."""

    run_id: str
    wd: Workdir
    local: dict[str, Any]
    transport: Transport
    archives: dict[tuple[str, ...], bytes] = field(default_factory=dict)

    def one(self, worker: WorkerRef) -> Result:
        """Compare the worker's manifest with the local one; ship and apply what differs."""
        res = run_hostside(self.transport, worker, "launch_sync", ["manifest", self.wd.remote], timeout=120)
        doc = reply(res)
        if doc is None:
            return res
        remote = doc["files"]
        changed = tuple(sorted(rel for rel, meta in self.local.items() if remote.get(rel) != meta))
        if not changed and set(remote) == set(self.local):
            return self._unchanged(worker)
        return self._ship(worker, changed)

    def _unchanged(self, worker: WorkerRef) -> Result:
        doc = {"schema_version": 1, "ok": True, "changed": [], "deleted": [], "verified": len(self.local)}
        stdout = json.dumps({**doc, "mismatches": []})
        return Result(host=worker.name, argv=("launch_sync",), exit_code=0, stdout=stdout)

    def _ship(self, worker: WorkerRef, changed: tuple[str, ...]) -> Result:
        # The manifest and the changed files travel over SFTP (no data on command lines).
        staging = f"{worker.root}/code/.sync-{self.run_id}"
        wanted = io.BytesIO(json.dumps({"files": self.local}).encode())
        put = self.transport.put_one(worker.name, wanted, f"{staging}.json")
        if not put.ok:
            return put
        args = ["apply", self.wd.remote, "--manifest", f"{staging}.json"]
        if changed:
            data = self.archives.get(changed)
            if data is None:
                data = self.archives[changed] = _tar(self.wd.local, changed)
            put = self.transport.put_one(worker.name, io.BytesIO(data), f"{staging}.tgz")
            if not put.ok:
                return put
            args += ["--archive", f"{staging}.tgz"]
        return run_hostside(self.transport, worker, "launch_sync", args, timeout=300)


def _verified(wd: Workdir, results: dict[str, Result]) -> dict[str, dict[str, Any]]:
    """Every worker's verified sync report, or a LaunchError naming each worker that differs."""
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
    return out


def _tar(root: str, files: Sequence[str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for rel in files:
            tar.add(os.path.join(root, rel), arcname=rel, recursive=False)
    return buf.getvalue()
