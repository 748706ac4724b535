"""The compilation-cache policy on a worker: set up before the first computation, evidence at exit.

The launcher calls `init(doc, rec)` after importing the lane's frontends and
before the start barrier (so before any computation), and `close()` on its
way out. For this process's cache plan (the launch file's
`cache.processes[<worker>]`, made by orchestrator/cache.py) it:

1. resolves the `{bundle_id}` in the planned paths from the bundle
   environment it runs in (the lane's active bundle);
2. single-writer writer: takes the writer lease on the shared mount
   (`<cache dir>/writer.lease`: holder worker, hostname, pid, run id, bundle,
   heartbeat). A live lease held by another process refuses the start, naming
   the holder; a lease whose holder is gone (same host: its pid no longer
   runs) or whose heartbeat is older than the TTL is reclaimed, and the
   record says from whom and why. A daemon thread rewrites the heartbeat
   while the process runs; `close()` removes the lease;
3. JAX: registers `jax.monitoring` listeners (before any user code), then
   sets `jax_compilation_cache_dir` to the JAX root with
   `jax_persistent_cache_min_compile_time_secs=0` and
   `jax_persistent_cache_min_entry_size_bytes=-1` (cache every executable);
4. torch_xla: `torch_xla.runtime.initialize_cache(root, readonly=...)`.

What "read-only" means for a reader, in fact (no read-only bind mount is
available to the launcher, and readers run as the same user as the writer):

- JAX never writes from a process whose id is not 0, and a JAX lane's
  writer is process 0 by validation, so every JAX reader is such a process.
  On top of that the launcher replaces JAX's `put_executable_and_time` in a
  reader with a function that refuses (and counts) writes, and sets
  `jax_compilation_cache_max_size=-1` so reads touch no access-time files.
- torch_xla gets `readonly=True`: its cache never writes an entry then.
- A reader whose root does not exist yet (the writer has not warmed it) runs
  without a persistent cache rather than creating the directory.

The process's record gets a `cache` section:

    {"policy": mode, "role": writer|reader|private|off, "roots": {"jax": path, "torch_xla": path},
     "lease": {...} | null, "evidence": {"jax": {...}, "torch_xla": {...}}, ...}

with, per frontend, cache_hits, cache_misses, compile_time_saved_sec,
compile_time_sec, entries_before and entries_after (and what each frontend
adds: JAX's compile count and refused writes, torch_xla's deserialize
failures).

Run as a job (`python3 -m hostside.launch_cache VERB --request JSON`):

    status   every bundle's caches under a lane directory: entries, bytes,
             last write, and the writer lease's state
    clear    remove them (a cache whose writer lease is live is refused)

This module keeps the launcher's entry points (init, close) and the job's
command line; the pieces live by concept in hostside.cache_lease (the writer
lease), hostside.cache_evidence (entries on disk, the frontends' counters)
and hostside.cache_jobs (status and clear).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from typing import Any, Protocol

from hostside import SCHEMA_VERSION, procfs, receipt_facts
from hostside.cache_evidence import (
    ENTRY_SUFFIX,
    FRONTENDS,
    JAX_COMPILE,
    JAX_HITS,
    JAX_MISSES,
    JAX_REQUESTS,
    JAX_RETRIEVAL,
    JAX_SAVED,
    JAX_USING,
    JaxEvidence,
    count_entries,
    torch_xla_evidence,
)
from hostside.cache_jobs import CHECKS_DIR, _lease_view, clear, status
from hostside.cache_lease import (
    LEASE_ATTEMPTS,
    LEASE_FIELDS,
    LEASE_FILE,
    CacheRefusal,
    Lease,
    describe_holder,
    judge_lease,
)

__all__ = [
    "BUNDLE_PLACEHOLDER",
    "CHECKS_DIR",
    "ENTRY_SUFFIX",
    "FRONTENDS",
    "JAX_COMPILE",
    "JAX_HITS",
    "JAX_MISSES",
    "JAX_REQUESTS",
    "JAX_RETRIEVAL",
    "JAX_SAVED",
    "JAX_USING",
    "LEASE_ATTEMPTS",
    "LEASE_FIELDS",
    "LEASE_FILE",
    "CacheRefusal",
    "JaxEvidence",
    "Lease",
    "RecordLike",
    "Session",
    "_lease_view",
    "_stop_writing",
    "bundle_id_of_this_python",
    "clear",
    "close",
    "count_entries",
    "describe_holder",
    "init",
    "judge_lease",
    "main",
    "status",
    "torch_xla_evidence",
]

BUNDLE_PLACEHOLDER = "{bundle_id}"


# ---------------------------------------------------------------------------
# The launcher's session


class RecordLike(Protocol):
    """The launcher's per-process record, as far as the cache policy writes to it."""

    data: dict[str, Any]

    def step(self, name: str, status: str, started: float, detail: str = "", **extra: Any) -> None: ...

    def note(self, text: str) -> None: ...

    def save(self) -> None: ...


class Session:
    """What init() set up in this process, for close()."""

    def __init__(self, rec: RecordLike, state: dict[str, Any], frontends: list[str]):
        self.rec = rec
        self.state = state
        self.frontends = frontends
        self.jax: JaxEvidence | None = None
        self.lease: Lease | None = None


_SESSION: Session | None = None
_CACHE_ENV = ("JAX_COMPILATION_CACHE_DIR", "XLA_PERSISTENT_CACHE_PATH", "XLA_PERSISTENT_CACHE_READ_ONLY")


def _own_starttime() -> int | None:
    st = procfs.stat(os.getpid())
    return st["starttime"] if st else None


def bundle_id_of_this_python() -> str | None:
    """The bundle id of the environment this process runs in (<root>/envs/<bundle-id>), if it is one."""
    return receipt_facts.bundle_id()


def init(doc: dict[str, Any], rec: RecordLike) -> dict[str, Any]:
    """Apply this process's cache plan before the first computation; returns the record's `cache` section."""
    global _SESSION
    t0 = time.time()
    cache = doc.get("cache") or {}
    mode = cache.get("mode") or "off"
    plan = (cache.get("processes") or {}).get(doc["worker"]) or {}
    role = plan.get("role") or "off"
    bundle_id = bundle_id_of_this_python()

    def fill(path: str | None) -> str | None:
        return path.replace(BUNDLE_PLACEHOLDER, bundle_id or BUNDLE_PLACEHOLDER) if path else None

    # A root the plan leaves out is None; the frontend setup below then fails loudly, as it should.
    roots: dict[str, Any] = {f: fill((plan.get("roots") or {}).get(f)) for f in FRONTENDS}
    frontends = [f for f in doc.get("frontends", []) if f in FRONTENDS]
    state: dict[str, Any] = {
        "policy": mode,
        "name": cache.get("name"),
        "role": role,
        "roots": roots,
        "lease": None,
        "evidence": {},
        "bundle_id": bundle_id,
        "base": fill(plan.get("base")),
        "shared": plan.get("shared"),
        "writer": plan.get("writer"),
        "scope": cache.get("scope"),
        "frontends": frontends,
        "configured": {f: False for f in frontends},
        "enforcement": [],
        "caveats": [],
    }
    session = Session(rec, state, frontends)
    _SESSION = session
    rec.data["cache"] = state
    if mode != "off" and not plan:
        state["role"] = role = "off"
        state["caveats"].append(f"the launch plan has no cache plan for {doc['worker']}: no cache configured")
    elif mode != "off" and bundle_id is None:
        # Cache entries are keyed by bundle id so two stacks never share them; without one, none.
        state["role"] = role = "off"
        state["caveats"].append(
            f"{os.path.realpath(sys.prefix)} is not a deployed bundle environment "
            "(<root>/envs/<bundle-id>): no bundle id to key the cache by, so this process "
            "runs without a persistent compilation cache"
        )
    inherited = {k: os.environ[k] for k in _CACHE_ENV if os.environ.get(k)}
    if inherited and role != "off":
        # Unset, not merely outranked: a reader whose root does not exist yet configures nothing,
        # and the frontend would otherwise fall back to the inherited (possibly writable) path.
        for k in inherited:
            os.environ.pop(k, None)
        state["caveats"].append(
            "the environment sets "
            + ", ".join(f"{k}={v}" for k, v in inherited.items())
            + "; the lane's cache policy replaces it (unset for this process)"
        )
    elif inherited:
        state["caveats"].append(
            "the environment sets "
            + ", ".join(f"{k}={v}" for k, v in inherited.items())
            + ": a cache orch does not manage (the lane's cache policy is off)"
        )

    if "jax" in frontends:
        session.jax = _listen_to_jax(state)
    if role != "off" and not frontends:
        state["caveats"].append(
            "the bundle has no frontend with a persistent compilation cache (jax or torch_xla); nothing to configure"
        )
    if role == "writer" and frontends:
        ttl = float(cache.get("lease_ttl") or 20.0)
        interval = float(cache.get("heartbeat_interval") or 2.0)
        holder = {
            "worker": doc["worker"],
            "hostname": socket.gethostname(),
            **procfs.host_identity(),
            "pid": os.getpid(),
            "starttime": _own_starttime(),
            "run_id": doc["run_id"],
            "lane": doc["lane"],
            "bundle_id": bundle_id,
            "process_id": doc["process_id"],
        }
        lease_path = fill(plan.get("lease"))
        if not lease_path:
            raise CacheRefusal(f"the cache plan for {doc['worker']} is a writer's but names no writer lease")
        lease = Lease(lease_path, holder, ttl=ttl, interval=interval)
        try:
            lease.acquire()
        except CacheRefusal:
            state["lease"] = {**lease.summary(), "state": "refused"}
            rec.step("cache-init", "refused", t0, "another writer holds the cache's lease")
            raise
        session.lease = lease
        lease.on_lost = lambda lost: _stop_writing(lost, state, session)
        lease.start()
        state["lease"] = lease.summary()
        if lease.reclaimed_from:
            prev = lease.reclaimed_from
            text = f"cache writer lease {lease.path} reclaimed from {describe_holder(prev)}: {prev['reason']}"
            rec.note(text)
            print(f"orch launcher: {text}", file=sys.stderr, flush=True)
    for frontend in frontends:
        state["evidence"].setdefault(frontend, {})["entries_before"] = count_entries(roots[frontend], frontend)[
            "entries"
        ]
    try:
        if "torch_xla" in frontends and role != "off":
            _setup_torch_xla(roots["torch_xla"], role, state)
        if "jax" in frontends and role != "off":
            _setup_jax(roots["jax"], role, state, session.jax, doc)
    except CacheRefusal:
        rec.step("cache-init", "failed", t0, "the cache policy could not be applied before the first computation")
        close()
        raise
    if role == "off":
        detail = "lane cache policy off: no persistent compilation cache configured by orch"
        status = "skipped"
    else:
        detail = f"{mode} cache, role {role}: " + "; ".join(state["enforcement"] or ["nothing to configure"])
        status = "done"
    rec.step("cache-init", status, t0, detail)
    return state


def _listen_to_jax(state: dict[str, Any]) -> JaxEvidence | None:
    evidence = JaxEvidence()
    try:
        import jax.monitoring as monitoring

        monitoring.register_event_listener(evidence.on_event)
        monitoring.register_event_duration_secs_listener(evidence.on_duration)
    except Exception as exc:  # a jax without these hooks: no evidence, said so
        state["caveats"].append(
            f"jax.monitoring listeners unavailable ({exc.__class__.__name__}: {exc}); no JAX compile evidence"
        )
        return None
    return evidence


def _setup_jax(root: str, role: str, state: dict[str, Any], evidence: JaxEvidence | None, doc: dict[str, Any]) -> None:
    import jax
    from jax._src import compilation_cache as cc

    # (cc.is_initialized() only says "enabled" nowadays; these say "already used".)
    if getattr(cc, "_cache_initialized", False) or getattr(cc, "_cache_checked", False):
        raise CacheRefusal(
            "JAX's compilation cache was already initialised before the launcher could apply the "
            "lane's policy (something compiled during import)"
        )
    if role == "reader" and not os.path.isdir(root):
        state["caveats"].append(
            f"jax: {root} does not exist yet (the writer has not warmed it); this reader "
            "runs without a persistent cache rather than create it"
        )
        # jax read JAX_COMPILATION_CACHE_DIR when it was imported; that path is not this lane's.
        if jax.config.jax_compilation_cache_dir is not None:
            jax.config.update("jax_compilation_cache_dir", None)
        return
    if role != "reader":
        os.makedirs(root, exist_ok=True)
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", root)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    line = f"jax: jax_compilation_cache_dir={root}, min_compile_time_secs=0, min_entry_size_bytes=-1"
    if role == "reader":
        # A reader never writes: JAX writes only from process 0 (and a JAX
        # writer is process 0); the launcher also refuses writes in-process.
        jax.config.update("jax_compilation_cache_max_size", -1)
        _refuse_jax_writes(evidence)
        line += "; reader: writes refused in-process, no eviction (reads touch no file)"
    elif int(doc.get("num_processes") or 1) > 1 and int(doc.get("process_id") or 0) != 0:
        state["caveats"].append(
            f"jax writes its persistent cache only from process 0: this process "
            f"({doc.get('process_id')}) leaves its private cache {root} empty"
        )
    state["configured"]["jax"] = True
    state["enforcement"].append(line)


def _refuse_jax_writes(evidence: JaxEvidence | None) -> None:
    """From now on this process reads JAX's persistent cache and never writes it."""
    from jax._src import compilation_cache as cc

    original = cc.put_executable_and_time
    if getattr(original, "__orch_refuses__", False):
        return

    def put_executable_and_time(*_args: Any, **_kwargs: Any) -> None:
        """orch: this process reads the cache and never writes it."""
        if evidence is not None:
            evidence.writes_refused += 1
        return None

    setattr(put_executable_and_time, "__wrapped__", original)  # noqa: B010 (a function attribute mypy does not know)
    setattr(put_executable_and_time, "__orch_refuses__", True)  # noqa: B010
    cc.put_executable_and_time = put_executable_and_time


def _stop_writing(lease: Lease, state: dict[str, Any], session: Session) -> None:
    """A writer that lost its lease (paused past the TTL and reclaimed, say) must not go on writing
    beside the new holder: JAX writes are refused from here on; torch_xla cannot be made read-only
    once initialised, which the record says."""
    text = f"cache writer lease lost ({lease.lost_reason})"
    if state["configured"].get("jax"):
        _refuse_jax_writes(session.jax)
        text += ": jax writes refused from now on"
    if state["configured"].get("torch_xla"):
        text += "; torch_xla's cache stays writable in this process (it cannot be made read-only after init)"
    state["caveats"].append(text)
    print(f"orch launcher: {text}", file=sys.stderr, flush=True)


def _setup_torch_xla(root: str, role: str, state: dict[str, Any]) -> None:
    import torch_xla.runtime as xr

    readonly = role == "reader"
    if readonly and not os.path.isdir(root):
        state["caveats"].append(
            f"torch_xla: {root} does not exist yet (the writer has not warmed it); this "
            "reader runs without a persistent cache rather than create it"
        )
        return
    if not readonly:
        os.makedirs(root, exist_ok=True)
    try:
        xr.initialize_cache(root, readonly=readonly)
    except Exception as exc:
        raise CacheRefusal(
            f"torch_xla.runtime.initialize_cache({root!r}, readonly={readonly}) failed: "
            f"{exc.__class__.__name__}: {exc} (the runtime was initialised before the launcher "
            "could apply the lane's cache policy)"
        ) from exc
    state["configured"]["torch_xla"] = True
    state["enforcement"].append(f"torch_xla: initialize_cache({root}, readonly={readonly})")


def close() -> None:
    """Record the evidence and release the writer lease (the launcher's exit path; never raises)."""
    global _SESSION
    session, _SESSION = _SESSION, None
    if session is None:
        return
    state = session.state
    try:
        for frontend in session.frontends:
            ev = state["evidence"].setdefault(frontend, {})
            try:
                if frontend == "jax" and session.jax is not None:
                    ev.update(session.jax.summary())
                elif frontend == "torch_xla" and "torch_xla" in sys.modules:
                    ev.update(torch_xla_evidence())
            except Exception as exc:
                ev["error"] = f"{exc.__class__.__name__}: {exc}"
            ev["entries_after"] = count_entries(state["roots"].get(frontend), frontend)["entries"]
        _note_overrides(state)
        if session.lease is not None:
            session.lease.release()
            state["lease"] = session.lease.summary()
        state["closed_at"] = time.time()
        session.rec.data["cache"] = state
        session.rec.save()
    except Exception as exc:
        print(
            f"orch launcher: recording the cache evidence failed: {exc.__class__.__name__}: {exc}",
            file=sys.stderr,
            flush=True,
        )


def _note_overrides(state: dict[str, Any]) -> None:
    """Say so when the program pointed a frontend's cache somewhere else than the policy did."""
    configured = state.get("configured") or {}
    if configured.get("jax") and "jax" in sys.modules:
        try:
            now = sys.modules["jax"].config.jax_compilation_cache_dir
        except Exception:
            now = state["roots"]["jax"]
        if now != state["roots"]["jax"]:
            state["caveats"].append(
                f"the program set jax_compilation_cache_dir to {now!r}: it overrode the "
                f"lane's cache policy ({state['roots']['jax']})"
            )
    if configured.get("torch_xla"):
        now = os.environ.get("XLA_PERSISTENT_CACHE_PATH")
        if now != state["roots"]["torch_xla"]:
            state["caveats"].append(
                f"XLA_PERSISTENT_CACHE_PATH is {now!r} at exit: the program changed the "
                f"lane's torch_xla cache ({state['roots']['torch_xla']})"
            )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="hostside.launch_cache")
    parser.add_argument("verb", choices=("status", "clear"))
    parser.add_argument("--request", required=True, help="the request as one JSON document")
    args = parser.parse_args(argv)
    req = json.loads(args.request)
    try:
        result = status(req) if args.verb == "status" else clear(req)
    except OSError as exc:
        result = {"ok": False, "error": f"{exc.__class__.__name__}: {exc}"}
    print(json.dumps({"schema_version": SCHEMA_VERSION, "job": f"launch_cache.{args.verb}", **result}))
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
