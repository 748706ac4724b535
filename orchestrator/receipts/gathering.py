"""Gather: copy every worker's receipt and logs of a run to the controller.

Parallel over workers and resumable: a file whose controller copy already has
the sha256 the worker reports is not copied again. A worker that cannot be
reached, or has no run directory, is reported as missing with the reason; a
worker that gave a complete copy before keeps it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hostside.files import sha256_file
from hostside.rundir import RECORD_FILE
from orchestrator.errors import OrchError
from orchestrator.receipts.copies import (
    GATHER_FILE,
    PlanFacts,
    RunRecordFacts,
    read_json,
    write_json,
)
from orchestrator.receipts.listing import ListedFile, Listing, inside, parse_listing
from orchestrator.receipts.schema import SCHEMA_VERSION, Doc

if TYPE_CHECKING:
    from orchestrator.fleet import WorkerRef
    from orchestrator.transport import Transport

GATHER_TIMEOUT = 120.0  # seconds for the worker's listing of its run directory


@dataclass(frozen=True)
class WorkerGather:
    """What gathering one worker's files did."""

    worker: str
    status: str  # complete | live | partial | missing
    copied: tuple[str, ...] = ()
    up_to_date: tuple[str, ...] = ()
    failed: Mapping[str, str] = field(default_factory=dict)
    unverified: tuple[str, ...] = ()  # copied from a live run while changing: sha256 differs from the listing
    error: str | None = None  # why the worker gave nothing (unreachable, no run directory)
    note: str | None = None
    bytes_copied: int = 0
    elapsed: float = 0.0

    def to_dict(self) -> Doc:
        return {
            "worker": self.worker,
            "status": self.status,
            "copied": list(self.copied),
            "up_to_date": list(self.up_to_date),
            "failed": dict(self.failed),
            "unverified": list(self.unverified),
            "error": self.error,
            "note": self.note,
            "bytes_copied": self.bytes_copied,
            "elapsed": round(self.elapsed, 3),
        }


@dataclass(frozen=True)
class GatherResult:
    """Every worker's gather, and where the copies are."""

    run_id: str
    dir: str
    workers: Mapping[str, WorkerGather]
    elapsed: float = 0.0

    @property
    def complete(self) -> bool:
        return all(w.status == "complete" for w in self.workers.values())

    @property
    def missing(self) -> list[str]:
        return [n for n, w in self.workers.items() if w.status != "complete"]

    def to_dict(self) -> Doc:
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "dir": self.dir,
            "complete": self.complete,
            "missing": self.missing,
            "elapsed": round(self.elapsed, 3),
            "workers": {n: w.to_dict() for n, w in self.workers.items()},
        }


def fetch_plan(
    listing: Mapping[str, ListedFile], local: Mapping[str, str | None]
) -> tuple[list[str], list[str], list[str]]:
    """(fetch, up_to_date, skipped): which of a worker's listed files to copy.

    `listing` is the worker's {name: {size, sha256, ...}}; `local` maps names to the
    sha256 of the controller's copy (None when absent). A file is up to date when the
    hashes match; a file the worker could not hash (too large, unreadable) is skipped.
    """
    fetch, same, skipped = [], [], []
    for name, meta in sorted(listing.items()):
        remote = meta.sha256
        if remote is None:
            skipped.append(name)
        elif local.get(name) == remote:
            same.append(name)
        else:
            fetch.append(name)
    return fetch, same, skipped


def gather(
    record: RunRecordFacts,
    transport: Transport,
    *,
    plan: PlanFacts | None = None,
    workers: Sequence[str] | None = None,
) -> GatherResult:
    """Copy every worker's receipt and logs of `record`'s run into `<run record>/<worker>/`.

    Parallel over workers; resumable (a file whose copy already matches the
    worker's sha256 is not copied again); a worker that cannot be reached or
    has no run directory is reported as missing with the reason, never
    skipped silently. A worker reached earlier keeps its complete copy.
    """
    from orchestrator.transport import Result

    plan = plan or record.plan()
    root = Path(record.dir)
    previous = read_json(root / GATHER_FILE) or {}
    t0 = time.monotonic()
    job = _WorkerJob(transport, plan, root, previous)
    # Transport.map returns what `fn` returns, or a Result when `fn` raised.
    results: Mapping[str, object] = transport.map(job, list(workers or plan.workers))  # type: ignore[arg-type]
    out = {}
    for name, res in results.items():
        if isinstance(res, Result):  # the transport's guard turned an exception into a Result
            out[name] = _unreachable(name, res.describe(), root / name, previous, res.elapsed)
        else:
            assert isinstance(res, WorkerGather)
            out[name] = res
    result = GatherResult(run_id=plan.run_id, dir=str(root), workers=out, elapsed=time.monotonic() - t0)
    write_json(root / GATHER_FILE, {**result.to_dict(), "gathered_at": time.time()})
    return result


@dataclass(frozen=True)
class _WorkerJob:
    """Gathering one worker, as a function the transport fans out."""

    transport: Transport
    plan: PlanFacts
    root: Path
    previous: Doc

    def __call__(self, worker: WorkerRef) -> WorkerGather:
        from orchestrator.remote import job_document, run_hostside

        start = time.monotonic()
        run_dir = self.plan.process(worker.name).run_dir
        dest = self.root / worker.name
        res = run_hostside(self.transport, worker, "gather", [run_dir], timeout=GATHER_TIMEOUT)
        try:
            doc = job_document(res) if res.ok else None
        except Exception:
            doc = None
        if doc is None:
            return _unreachable(worker.name, res.describe(), dest, self.previous, time.monotonic() - start)
        try:
            listing = parse_listing(doc, worker.name)
        except OrchError as exc:
            return WorkerGather(
                worker=worker.name, status="missing", elapsed=time.monotonic() - start, error=exc.message
            )
        if not listing.exists:
            return WorkerGather(
                worker=worker.name,
                status="missing",
                elapsed=time.monotonic() - start,
                error=f"no run directory {run_dir} on the worker (the run never started there?)",
            )
        copy = self._copy_files(worker.name, run_dir, dest, listing)
        return copy.outcome(worker.name, dest, live=listing.live, elapsed=time.monotonic() - start)

    def _copy_files(self, worker: str, run_dir: str, dest: Path, listing: Listing) -> _Copy:
        files = listing.files
        dest.mkdir(parents=True, exist_ok=True)
        fetch, same, skipped = fetch_plan(files, {name: _local_sha256(inside(dest, name)) for name in files})
        copy = _Copy(up_to_date=same)
        for name in fetch:
            want = files[name].sha256
            assert want is not None  # fetch_plan fetches hashed files only
            self._fetch_one(worker, f"{run_dir}/{name}", inside(dest, name), want, listing.live, copy)
        for name in skipped:
            copy.failed[name] = files[name].error or f"not copied: {files[name].size} bytes"
        return copy

    def _fetch_one(self, worker: str, remote: str, local: Path, want: str, live: bool, copy: _Copy) -> None:
        """Copy one file through a `.part` file, checking its sha256 (twice at most).

        Every copy is hashed. A live run's log grows while we copy it, so there a copy
        that differs from the listing is kept but named `unverified` (the next gather,
        after the run ends, copies it again: its hash differs from the final listing).
        """
        part = local.with_name(f".{local.name}.part")
        for attempt in (1, 2):
            got = self.transport.get_one(worker, remote, part)
            if not got.ok:
                copy.failed[local.name] = got.describe()
                break
            verified = _local_sha256(part) == want
            if verified or live:
                os.replace(part, local)
                copy.copied.append(local.name)
                if not verified:
                    copy.unverified.append(local.name)
                copy.nbytes += local.stat().st_size
                copy.failed.pop(local.name, None)
                break
            copy.failed[local.name] = f"sha256 differs after copying (attempt {attempt})"
        if part.exists():
            part.unlink()


@dataclass
class _Copy:
    """What copying one worker's files has done so far."""

    up_to_date: list[str]
    copied: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    nbytes: int = 0

    def outcome(self, worker: str, dest: Path, *, live: bool, elapsed: float) -> WorkerGather:
        if not (dest / RECORD_FILE).exists():
            status = "partial"
            self.failed.setdefault(RECORD_FILE, "the worker has no receipt for this run")
        elif self.failed:
            status = "partial"
        elif live:
            status = "live"
        else:
            status = "complete"
        return WorkerGather(
            worker=worker,
            status=status,
            copied=tuple(self.copied),
            up_to_date=tuple(self.up_to_date),
            failed=self.failed,
            unverified=tuple(self.unverified),
            bytes_copied=self.nbytes,
            elapsed=elapsed,
            note="the run is still live on this worker: gather again after it ends" if status == "live" else None,
        )


def _local_sha256(path: Path) -> str | None:
    """The sha256 of the controller's copy, or None when there is none (or it is unreadable)."""
    try:
        return sha256_file(str(path))
    except OSError:
        return None


def _unreachable(name: str, reason: str, dest: Path, previous: Doc, elapsed: float) -> WorkerGather:
    workers = previous.get("workers")
    before = workers.get(name) if isinstance(workers, dict) else None
    if isinstance(before, dict) and before.get("status") == "complete" and (dest / RECORD_FILE).exists():
        return WorkerGather(
            worker=name,
            status="complete",
            elapsed=elapsed,
            note=f"not reachable now ({reason}); kept the complete copy gathered before",
        )
    return WorkerGather(worker=name, status="missing", error=reason, elapsed=elapsed)
