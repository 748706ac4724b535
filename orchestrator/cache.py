"""Compilation caches: where they live, who writes them, and what is in them.

One function, `cache_plan(fleet, lane, worker, bundle_id)`, decides every
cache path and role; probe, launch, `orch cache` and `orch restart-check` all
use it, so they never disagree about a path.

Layout (a lane's cache directory holds one subdirectory per frontend, so JAX
and torch_xla never share a root, and the lane and bundle id key every path,
so two stacks never share entries):

    per-host       <policy root | <worker root>/cache>/<lane>/<bundle-id>/{jax,torch_xla}
                   on each worker's own disk; role `private` (each worker writes its own)
    single-writer  <policy root>/<lane>/<bundle-id>/{jax,torch_xla}
                   on the shared mount; the writer (default: the lane's first
                   worker, process 0) has role `writer`, every other worker `reader`;
                   the writer holds <lane dir>/<bundle-id>/writer.lease while it runs
    off            no cache is configured by orch (role `off`)

A restart check puts its caches under `<base>/.checks/<check-id>/` instead of
`<base>/`, so proving reuse never touches (or clears) the lane's real cache.

The bundle id is only known on the worker (the lane's active bundle), so
planned paths carry the `{bundle_id}` placeholder until the worker resolves them.

`status` and `clear` are the controller's side of `orch cache`; they run
`hostside.launch_cache` on the workers that can see each cache.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from orchestrator.errors import ConfigError, OrchError
from orchestrator.fleet import Fleet, WorkerRef
from orchestrator.transport import Result, Transport

SCHEMA_VERSION = 1
FRONTENDS = ("jax", "torch_xla")
BUNDLE_PLACEHOLDER = "{bundle_id}"
LEASE_FILE = "writer.lease"
CHECKS_DIR = ".checks"
# The writer's launcher rewrites its lease every HEARTBEAT_INTERVAL seconds; a
# lease not rewritten for LEASE_TTL seconds counts as abandoned (wall clocks of
# the workers are assumed to agree to well within that, as NTP keeps them).
HEARTBEAT_INTERVAL = 2.0
LEASE_TTL = 20.0
ROLES = ("writer", "reader", "private", "off")


@dataclass(frozen=True)
class CachePlan:
    """The caches one worker of a lane uses, and its role for them."""

    lane: str
    worker: str
    index: int
    policy: str | None  # the cache policy's name in fleet.yaml
    mode: str  # per-host | single-writer | off
    role: str  # writer | reader | private | off
    base: str | None  # the lane's cache directory for this bundle: <root>/<lane>/<bundle-id>
    roots: dict[str, str | None]
    shared: bool  # on the slice's shared mount
    writer: str | None  # single-writer: the writer's worker name
    lease: str | None  # single-writer: the writer lease file

    @property
    def writes(self) -> bool:
        return self.role in ("writer", "private")

    def resolve(self, bundle_id: str) -> CachePlan:
        """The same plan with the bundle id filled in."""

        def fill(p: str | None) -> str | None:
            return p.replace(BUNDLE_PLACEHOLDER, bundle_id) if p else p

        return replace(
            self, base=fill(self.base), roots={f: fill(p) for f, p in self.roots.items()}, lease=fill(self.lease)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "lane": self.lane,
            "worker": self.worker,
            "index": self.index,
            "policy": self.policy,
            "mode": self.mode,
            "role": self.role,
            "base": self.base,
            "roots": dict(self.roots),
            "shared": self.shared,
            "writer": self.writer,
            "lease": self.lease,
        }


def _join(first: str | None, *rest: str | None) -> str:
    """Worker paths joined with '/' (empty parts skipped); `first` is a root a caller has checked is set."""
    if first is None:
        raise ValueError("no cache root to join under (the lane's cache policy is off)")
    return "/".join([first.rstrip("/")] + [p.strip("/") for p in rest if p])


def base_root(fleet: Fleet, lane: str, worker: WorkerRef) -> str | None:
    """The policy's root directory as seen from `worker` (None when the policy is off)."""
    policy = fleet.cache_policy(lane)
    if policy.mode == "off":
        return None
    if policy.mode == "per-host":
        return policy.root or _join(worker.root, "cache")
    return policy.root


def writer_index(fleet: Fleet, lane: str) -> int | None:
    """single-writer: the writer's worker index (default: the lane's first worker, process 0)."""
    policy = fleet.cache_policy(lane)
    if policy.mode != "single-writer":
        return None
    members = fleet.lane_workers(lane)
    return policy.writer if policy.writer is not None else min(w.index for w in members)


def lane_dir(fleet: Fleet, lane: str, worker: WorkerRef, scope: str | None = None) -> str | None:
    """<base>/<lane> (or <base>/.checks/<scope>/<lane>): every bundle's caches of the lane."""
    base = base_root(fleet, lane, worker)
    if base is None:
        return None
    return _join(base, CHECKS_DIR, scope, lane) if scope else _join(base, lane)


def cache_plan(
    fleet: Fleet, lane: str, worker: WorkerRef, bundle_id: str = BUNDLE_PLACEHOLDER, *, scope: str | None = None
) -> CachePlan:
    """Every cache path and the role of `worker` in `lane` (pure; the single source of truth)."""
    lane_model = fleet.lane(lane)
    policy = fleet.cache_policy(lane)
    if worker.name not in fleet.lane_members.get(lane, ()):
        raise ConfigError(f"{fleet.path.name}: worker {worker.name} is not in lane '{lane}'")
    if policy.mode == "off":
        return CachePlan(
            lane=lane,
            worker=worker.name,
            index=worker.index,
            policy=lane_model.cache,
            mode="off",
            role="off",
            base=None,
            roots={f: None for f in FRONTENDS},
            shared=False,
            writer=None,
            lease=None,
        )
    base = _join(lane_dir(fleet, lane, worker, scope), bundle_id)
    roots: dict[str, str | None] = {f: _join(base, f) for f in FRONTENDS}
    if policy.mode == "per-host":
        return CachePlan(
            lane=lane,
            worker=worker.name,
            index=worker.index,
            policy=lane_model.cache,
            mode="per-host",
            role="private",
            base=base,
            roots=roots,
            shared=False,
            writer=None,
            lease=None,
        )
    windex = writer_index(fleet, lane)
    writer = next(w.name for w in fleet.lane_workers(lane) if w.index == windex)
    return CachePlan(
        lane=lane,
        worker=worker.name,
        index=worker.index,
        policy=lane_model.cache,
        mode="single-writer",
        role="writer" if worker.index == windex else "reader",
        base=base,
        roots=roots,
        shared=True,
        writer=writer,
        lease=_join(base, LEASE_FILE),
    )


def launch_cache(fleet: Fleet, lane: str, *, scope: str | None = None) -> dict[str, Any]:
    """The `cache` section of a launch plan: the policy and every process's cache plan."""
    policy = fleet.cache_policy(lane)
    workers = fleet.lane_workers(lane)
    return {
        "name": fleet.lane(lane).cache,
        **policy.model_dump(mode="json"),
        "scope": scope,
        "heartbeat_interval": HEARTBEAT_INTERVAL,
        "lease_ttl": LEASE_TTL,
        "processes": {w.name: cache_plan(fleet, lane, w, scope=scope).to_dict() for w in workers},
    }


def describe(cache: dict[str, Any]) -> str:
    """One line for `orch launch --dry-run`: the policy and who writes."""
    mode = cache.get("mode") or "off"
    name = cache.get("name") or "off"
    procs = cache.get("processes") or {}
    if mode == "off" or not procs:
        return f"lane cache policy {name} (mode {mode}): orch configures no compilation cache"
    first = next(iter(procs.values()))
    where = first["base"].rsplit("/", 1)[0] + "/<bundle-id>/{jax,torch_xla}"
    if mode == "per-host":
        return f"cache policy {name}: per-host, every worker writes its own {where}"
    readers = sum(1 for p in procs.values() if p["role"] == "reader")
    return (
        f"cache policy {name}: single-writer, {first['writer']} writes {where} under a lease, "
        f"{readers} reader{'s' if readers != 1 else ''} only read"
    )


# ---------------------------------------------------------------------------
# orch cache status / clear


@dataclass(frozen=True)
class CacheRow:
    """One cache root of a lane: where, whose, how full, and its writer lease."""

    lane: str
    policy: str | None
    mode: str
    location: str  # the worker whose disk holds it, or "shared"
    seen_from: str  # the worker that looked
    bundle_id: str
    active: bool  # the lane's active bundle on `seen_from`
    frontend: str
    path: str
    writer: str  # a worker name, or "each worker"
    lease: dict[str, Any] | None  # {"state": live|stale|none, "holder": {...}, "reason": ...}
    entries: int
    bytes: int
    last_write: float | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class CacheStatus:
    lane: str
    policy: str | None
    mode: str
    rows: list[CacheRow] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    checks: dict[str, list[str]] = field(default_factory=dict)  # leftover restart-check dirs per worker

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "lane": self.lane,
            "policy": self.policy,
            "mode": self.mode,
            "rows": [r.to_dict() for r in self.rows],
            "errors": dict(self.errors),
            "leftover_checks": dict(self.checks),
        }


def _viewers(fleet: Fleet, lane: str) -> list[WorkerRef]:
    """The workers whose view of the lane's caches counts: the writer (shared) or every worker."""
    policy = fleet.cache_policy(lane)
    workers = fleet.lane_workers(lane)
    if policy.mode == "single-writer":
        windex = writer_index(fleet, lane)
        return [w for w in workers if w.index == windex]
    return workers


def _job(transport: Transport, worker: WorkerRef, verb: str, request: dict[str, Any], timeout: float = 120) -> Result:
    from orchestrator.remote import run_hostside

    return run_hostside(
        transport,
        worker,
        "launch_cache",
        [verb, "--request", json.dumps(request, separators=(",", ":"))],
        python=worker.python,
        timeout=timeout,
    )


def _document(res: Result) -> dict[str, Any] | None:
    from orchestrator.remote import job_document

    try:
        return job_document(res)
    except OrchError:
        return None


def status(fleet: Fleet, lane: str, transport: Transport) -> CacheStatus:
    """Every cache root of `lane` (all bundle ids), as the workers that hold them see it."""
    policy = fleet.cache_policy(lane)
    out = CacheStatus(lane=lane, policy=fleet.lane(lane).cache, mode=policy.mode)
    if policy.mode == "off":
        return out
    viewers = _viewers(fleet, lane)

    def one(w: WorkerRef) -> Result:
        return _job(
            transport,
            w,
            "status",
            {
                "lane": lane,
                "lane_dir": lane_dir(fleet, lane, w),
                "checks_dir": _join(base_root(fleet, lane, w), CHECKS_DIR),
                "active": f"{w.root}/lanes/{lane}/active",
                "ttl": LEASE_TTL,
            },
        )

    results = transport.map(one, [w.name for w in viewers])
    windex = writer_index(fleet, lane)
    writer_name = next((w.name for w in viewers if w.index == windex), None)
    for w in viewers:
        res = results[w.name]
        doc = _document(res)
        if doc is None or not doc.get("ok"):
            out.errors[w.name] = (doc or {}).get("error") or res.describe()
            continue
        if doc.get("checks"):
            out.checks[w.name] = doc["checks"]
        for b in doc.get("bundles", []):
            present = {f: info for f, info in b["frontends"].items() if info["exists"]}
            if not present:  # only a lease (or nothing yet): one row keeps it visible
                present = {"-": {"path": _join(b["base"], "-"), "entries": 0, "bytes": 0, "last_write": None}}
            for frontend, info in present.items():
                out.rows.append(
                    CacheRow(
                        lane=lane,
                        policy=out.policy,
                        mode=policy.mode,
                        location="shared" if policy.mode == "single-writer" else w.name,
                        seen_from=w.name,
                        bundle_id=b["bundle_id"],
                        active=b["active"],
                        frontend=frontend,
                        path=info["path"],
                        writer=writer_name or "each worker",
                        lease=b.get("lease"),
                        entries=info["entries"],
                        bytes=info["bytes"],
                        last_write=info["last_write"],
                    )
                )
    return out


@dataclass
class ClearResult:
    lane: str
    removed: dict[str, list[str]] = field(default_factory=dict)  # worker -> paths
    freed: dict[str, int] = field(default_factory=dict)  # worker -> bytes
    refused: dict[str, list[str]] = field(default_factory=dict)  # worker -> reasons (live writers)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.refused and not self.errors

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "lane": self.lane,
            "ok": self.ok,
            "removed": self.removed,
            "freed": self.freed,
            "refused": self.refused,
            "errors": self.errors,
        }


def clear(fleet: Fleet, lane: str, transport: Transport, *, scope: str | None = None) -> ClearResult:
    """Remove the lane's caches (every bundle id), or one restart check's (`scope`).

    A cache whose writer lease is live is left alone and reported: its writer
    is running.
    """
    policy = fleet.cache_policy(lane)
    out = ClearResult(lane=lane)
    if policy.mode == "off":
        return out
    viewers = _viewers(fleet, lane)

    def one(w: WorkerRef) -> Result:
        return _job(
            transport,
            w,
            "clear",
            {
                "lane_dir": lane_dir(fleet, lane, w, scope),
                "ttl": LEASE_TTL,
                "scope_dir": _join(base_root(fleet, lane, w), CHECKS_DIR, scope) if scope else None,
            },
        )

    results = transport.map(one, [w.name for w in viewers])
    for w in viewers:
        res = results[w.name]
        doc = _document(res)
        if doc is None:
            out.errors[w.name] = res.describe()
            continue
        if doc.get("error"):
            out.errors[w.name] = doc["error"]
        out.removed[w.name] = doc.get("removed", [])
        out.freed[w.name] = doc.get("freed", 0)
        if doc.get("refused"):
            out.refused[w.name] = doc["refused"]
    return out
