"""Receipts: what every process of a run actually ran, gathered, reported and compared.

Each process of an `orch launch` run leaves a receipt (`record.json`, written
by the hostside launcher, documented by `schema/receipt.schema.json`) in its
worker's run directory. This module:

- `validate(doc)`      checks a receipt against the shipped schema (no extra dependency);
- `gather(...)`        copies every worker's receipt and logs to `runs/<run-id>/<worker>/`
                       in parallel, resumably, and says which workers are missing and why;
- `load_run(record)`   reads a run's receipts from the controller (gathered copies first);
- `build_report(run)`  one view of a run: per-worker stack, device, backend, timings,
                       exit, and the flags (stack differences across workers, unreduced
                       "global" metrics, CPU fallback on a TPU lane, differing backends);
- `compare(a, b)`      two runs side by side, every figure labelled with lane and
                       bundle; refused across lanes or bundles unless explicitly allowed,
                       and then the stack differences come first;
- `render_html(report)` a static, self-contained page with an inline SVG plot.

Plain functions returning result objects; the CLI renders them.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import os
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

SCHEMA_PATH = Path(__file__).resolve().parent / "schema" / "receipt.schema.json"
RECEIPT_FILE = "record.json"
GATHER_FILE = "gather.json"
SCHEMA_VERSION = 1
# The start-up order every receipt should show (FIELD-GUIDE section 3): policy before any
# import, caches before the first computation, SPMD / distributed init before user code.
STARTUP_RANK = {
    "policy": 0,
    "import": 1,
    "cache-init": 2,
    "wait-release": 3,
    "spmd-init": 4,
    "distributed-init": 4,
    "user-code": 5,
}
STACK_KEYS = ("python", "torch", "torch_xla", "jax", "jaxlib", "libtpu", "torch_tpu")
REL_TOL = 1e-6


# ---------------------------------------------------------------------------
# Schema


@lru_cache(maxsize=1)
def load_schema() -> dict:
    """The shipped receipt schema (JSON Schema 2020-12)."""
    return json.loads(SCHEMA_PATH.read_text())


# The JSON Schema keywords `validate` understands; a test keeps the schema within them.
SUPPORTED_KEYWORDS = {
    "$schema",
    "$id",
    "$ref",
    "$defs",
    "title",
    "description",
    "type",
    "enum",
    "required",
    "properties",
    "additionalProperties",
    "items",
    "minimum",
}
_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def validate(doc, schema: dict | None = None) -> list[str]:
    """Problems of `doc` against the receipt schema, as `path: what` lines (empty when valid)."""
    root = schema or load_schema()
    problems: list[str] = []
    _check(doc, root, root, "$", problems)
    return problems


def _check(value, schema: dict, root: dict, path: str, out: list[str]) -> None:
    if "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/$defs/"):
            raise ValueError(f"unsupported $ref {ref}")
        _check(value, root["$defs"][ref.split("/")[-1]], root, path, out)
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        if not any(_TYPES[t](value) for t in types):
            out.append(f"{path}: expected {' or '.join(types)}, got {_json_type(value)}")
            return
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: expected one of {schema['enum']}, got {value!r}")
    if "minimum" in schema and _TYPES["number"](value) and value < schema["minimum"]:
        out.append(f"{path}: {value} is below the minimum {schema['minimum']}")
    if isinstance(value, dict):
        for name in schema.get("required", []):
            if name not in value:
                out.append(f"{path}: missing required key {name!r}")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in props:
                _check(item, props[name], root, f"{path}.{name}", out)
            elif extra is False:
                out.append(f"{path}: unexpected key {name!r}")
            elif isinstance(extra, dict):
                _check(item, extra, root, f"{path}.{name}", out)
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _check(item, schema["items"], root, f"{path}[{i}]", out)


def _json_type(value) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPES[name](value):
            return name
    return type(value).__name__


# ---------------------------------------------------------------------------
# Gather


@dataclass(frozen=True)
class WorkerGather:
    """What gathering one worker's files did."""

    worker: str
    status: str  # complete | live | partial | missing
    copied: tuple[str, ...] = ()
    up_to_date: tuple[str, ...] = ()
    failed: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None  # why the worker gave nothing (unreachable, no run directory)
    note: str | None = None
    bytes_copied: int = 0
    elapsed: float = 0.0

    def to_dict(self) -> dict:
        return {
            "worker": self.worker,
            "status": self.status,
            "copied": list(self.copied),
            "up_to_date": list(self.up_to_date),
            "failed": dict(self.failed),
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

    def to_dict(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "dir": self.dir,
            "complete": self.complete,
            "missing": self.missing,
            "elapsed": round(self.elapsed, 3),
            "workers": {n: w.to_dict() for n, w in self.workers.items()},
        }


def file_sha256(path: Path) -> str | None:
    try:
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        return digest.hexdigest()
    except OSError:
        return None


def fetch_plan(
    listing: Mapping[str, Mapping], local: Mapping[str, str | None]
) -> tuple[list[str], list[str], list[str]]:
    """(fetch, up_to_date, skipped): which of a worker's listed files to copy.

    `listing` is the worker's {name: {size, sha256, ...}}; `local` maps names to the
    sha256 of the controller's copy (None when absent). A file is up to date when the
    hashes match; a file the worker could not hash (too large, unreadable) is skipped.
    """
    fetch, same, skipped = [], [], []
    for name, meta in sorted(listing.items()):
        remote = meta.get("sha256")
        if remote is None:
            skipped.append(name)
        elif local.get(name) == remote:
            same.append(name)
        else:
            fetch.append(name)
    return fetch, same, skipped


def gather(record, transport, *, plan=None, workers: Sequence[str] | None = None) -> GatherResult:
    """Copy every worker's receipt and logs of `record`'s run into `<run record>/<worker>/`.

    Parallel over workers; resumable (a file whose copy already matches the
    worker's sha256 is not copied again); a worker that cannot be reached or
    has no run directory is reported as missing with the reason, never
    skipped silently. A worker reached earlier keeps its complete copy.
    """
    from orchestrator.remote import job_document, run_hostside
    from orchestrator.transport import Result

    plan = plan or record.plan()
    names = list(workers or plan.workers)
    root = Path(record.dir)
    previous = _read_json(root / GATHER_FILE) or {}
    t0 = time.monotonic()

    def one(worker) -> WorkerGather:
        start = time.monotonic()
        p = plan.process(worker.name)
        dest = root / worker.name
        res = run_hostside(transport, worker, "gather", [p.run_dir], timeout=120)
        try:
            doc = job_document(res) if res.ok else None
        except Exception:
            doc = None
        if doc is None:
            return _unreachable(worker.name, res.describe(), dest, previous, time.monotonic() - start)
        if not doc.get("exists"):
            return WorkerGather(
                worker=worker.name,
                status="missing",
                elapsed=time.monotonic() - start,
                error=f"no run directory {p.run_dir} on the worker (the run never started there?)",
            )
        listing = doc.get("files") or {}
        local = {name: file_sha256(dest / name) for name in listing}
        fetch, same, skipped = fetch_plan(listing, local)
        copied, failed, nbytes = [], {}, 0
        dest.mkdir(parents=True, exist_ok=True)
        for name in fetch:
            want = listing[name]["sha256"]
            part = dest / f".{name}.part"
            for attempt in (1, 2):
                got: Result = transport.get_one(worker.name, f"{p.run_dir}/{name}", part)
                if not got.ok:
                    failed[name] = got.describe()
                    break
                have = file_sha256(part)
                if have == want or doc.get("live"):  # a live run's log grows while we copy it
                    os.replace(part, dest / name)
                    copied.append(name)
                    nbytes += (dest / name).stat().st_size
                    failed.pop(name, None)
                    break
                failed[name] = f"sha256 differs after copying (attempt {attempt})"
            if part.exists():
                part.unlink()
        for name in skipped:
            failed[name] = listing[name].get("error") or f"not copied: {listing[name].get('size')} bytes"
        has_receipt = (dest / RECEIPT_FILE).exists()
        if not has_receipt:
            status = "partial"
            failed.setdefault(RECEIPT_FILE, "the worker has no receipt for this run")
        elif failed:
            status = "partial"
        elif doc.get("live"):
            status = "live"
        else:
            status = "complete"
        return WorkerGather(
            worker=worker.name,
            status=status,
            copied=tuple(copied),
            up_to_date=tuple(same),
            failed=failed,
            bytes_copied=nbytes,
            elapsed=time.monotonic() - start,
            note="the run is still live on this worker: gather again after it ends" if status == "live" else None,
        )

    results = transport.map(one, names)
    out = {}
    for name, res in results.items():
        if isinstance(res, WorkerGather):
            out[name] = res
        else:  # the transport's guard turned an exception into a Result
            out[name] = _unreachable(name, res.describe(), root / name, previous, res.elapsed)
    result = GatherResult(run_id=plan.run_id, dir=str(root), workers=out, elapsed=time.monotonic() - t0)
    _write_json(root / GATHER_FILE, {**result.to_dict(), "gathered_at": time.time()})
    return result


def _unreachable(name: str, reason: str, dest: Path, previous: dict, elapsed: float) -> WorkerGather:
    before = (previous.get("workers") or {}).get(name) or {}
    if before.get("status") == "complete" and (dest / RECEIPT_FILE).exists():
        return WorkerGather(
            worker=name,
            status="complete",
            elapsed=elapsed,
            note=f"not reachable now ({reason}); kept the complete copy gathered before",
        )
    return WorkerGather(worker=name, status="missing", error=reason, elapsed=elapsed)


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def _write_json(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    os.replace(tmp, path)


# ---------------------------------------------------------------------------
# A run's receipts, as the controller holds them


@dataclass(frozen=True)
class RunReceipts:
    """A run's plan facts and each worker's receipt (None when the controller has none)."""

    run_id: str
    lane: str
    bundle: str | None
    platform: str | None
    target: tuple[str, ...]
    state: str | None
    start_skew: float | None
    workers: tuple[str, ...]  # in process order
    process_ids: Mapping[str, int]
    receipts: Mapping[str, dict | None]
    sources: Mapping[str, str | None]  # gathered | launch-collect | None
    gather: dict | None = None
    dir: str | None = None


def load_run(record) -> RunReceipts:
    """The receipts of a recorded run: gathered copies first, else what the launch collected."""
    plan = record.plan()
    info = record.info()
    root = Path(record.dir)
    receipts, sources = {}, {}
    for name in plan.workers:
        doc = _read_json(root / name / RECEIPT_FILE)
        source = "gathered" if doc is not None else None
        if doc is None:
            doc = (_read_json(root / "workers" / f"{name}.json") or {}).get("record")
            source = "launch-collect" if doc else None
        receipts[name] = doc
        sources[name] = source
    outcome = info.get("outcome") or {}
    return RunReceipts(
        run_id=plan.run_id,
        lane=plan.lane,
        bundle=plan.bundle,
        platform=plan.platform,
        target=tuple(plan.target.argv()),
        state=info.get("state"),
        start_skew=outcome.get("start_skew"),
        workers=tuple(plan.workers),
        process_ids={p.worker: p.process_id for p in plan.processes},
        receipts=receipts,
        sources=sources,
        gather=_read_json(root / GATHER_FILE),
        dir=str(root),
    )


# ---------------------------------------------------------------------------
# Report


@dataclass(frozen=True)
class Flag:
    """Something a reader of the run must not miss."""

    kind: str
    message: str
    workers: tuple[str, ...] = ()
    level: str = "warning"  # warning | info

    def to_dict(self) -> dict:
        return {"kind": self.kind, "level": self.level, "message": self.message, "workers": list(self.workers)}


@dataclass(frozen=True)
class WorkerRow:
    """One worker's line of the report."""

    worker: str
    process_id: int
    source: str | None
    problems: tuple[str, ...]
    bundle: str | None
    bundle_id: str | None
    versions: Mapping[str, str | None]
    versions_reported: Mapping[str, str | None]
    device: Mapping | None
    backends: Mapping[str, str]
    compile_s: float | None
    compile_source: str | None
    step_s: float | None  # median
    step_min: float | None
    step_max: float | None
    steps: int
    user_code_s: float | None
    exit: Mapping | None
    metrics: Mapping[str, Mapping]
    startup: tuple[str, ...]
    cache: Mapping | None

    @property
    def has_receipt(self) -> bool:
        return self.source is not None

    def exit_text(self) -> str:
        if not self.has_receipt:
            return "no receipt"
        e = self.exit
        if not e:
            return "running (no exit yet)"
        if e.get("signal"):
            return f"signal {e['signal']}"
        return f"exit {e.get('code')}"

    def device_text(self) -> str:
        d = self.device
        if not d:
            return "-"
        text = f"{d.get('kind') or '?'} x{d.get('count') if d.get('count') is not None else '?'}"
        if d.get("local_count") is not None and d.get("local_count") != d.get("count"):
            text += f" ({d['local_count']} local)"
        return text

    def cache_text(self) -> str:
        """`policy/role` and, per frontend, the cache hits and misses the launcher observed."""
        c = self.cache
        if not c:
            return "-"
        policy = c.get("policy")
        if isinstance(policy, dict):
            policy = policy.get("name") or policy.get("mode")
        text = "/".join(str(x) for x in (policy, c.get("role")) if x)
        for fe, ev in (c.get("evidence") or {}).items():
            if isinstance(ev, dict) and (ev.get("cache_hits") is not None or ev.get("cache_misses") is not None):
                text += f" {fe} {ev.get('cache_hits', '?')}h/{ev.get('cache_misses', '?')}m"
        return text or "-"

    def backend_text(self) -> str:
        if not self.backends:
            return "-"
        if list(self.backends) == ["main"]:
            return self.backends["main"]
        return ", ".join(f"{c}={n}" for c, n in self.backends.items())

    def to_dict(self) -> dict:
        return {
            "worker": self.worker,
            "process_id": self.process_id,
            "source": self.source,
            "problems": list(self.problems),
            "bundle": self.bundle,
            "bundle_id": self.bundle_id,
            "versions": dict(self.versions),
            "versions_reported": dict(self.versions_reported),
            "device": dict(self.device) if self.device else None,
            "backends": dict(self.backends),
            "compile_s": self.compile_s,
            "compile_source": self.compile_source,
            "step_s": self.step_s,
            "step_min": self.step_min,
            "step_max": self.step_max,
            "steps": self.steps,
            "user_code_s": self.user_code_s,
            "exit": dict(self.exit) if self.exit else None,
            "exit_text": self.exit_text(),
            "metrics": {k: dict(v) for k, v in self.metrics.items()},
            "startup": list(self.startup),
            "cache": self.cache,
        }


@dataclass(frozen=True)
class Report:
    """One view of a run."""

    run_id: str
    lane: str
    bundle: str | None
    bundle_ids: tuple[str, ...]
    platform: str | None
    target: tuple[str, ...]
    state: str | None
    start_skew: float | None
    rows: tuple[WorkerRow, ...]
    flags: tuple[Flag, ...]

    @property
    def bundle_label(self) -> str:
        ids = [i[:8] for i in self.bundle_ids]
        return f"{self.bundle or '?'}@{ids[0] if len(ids) == 1 else ('mixed:' + '+'.join(ids) if ids else '?')}"

    @property
    def label(self) -> str:
        """`lane/bundle@id`: what every figure of this run is labelled with."""
        return f"{self.lane}/{self.bundle_label}"

    @property
    def warnings(self) -> list[Flag]:
        return [f for f in self.flags if f.level == "warning"]

    def to_dict(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "lane": self.lane,
            "bundle": self.bundle,
            "bundle_ids": list(self.bundle_ids),
            "label": self.label,
            "platform": self.platform,
            "target": list(self.target),
            "state": self.state,
            "start_skew": self.start_skew,
            "workers": [r.to_dict() for r in self.rows],
            "flags": [f.to_dict() for f in self.flags],
        }


def _row(name: str, pid: int, doc: dict | None, source: str | None) -> WorkerRow:
    if doc is None:
        return WorkerRow(
            worker=name,
            process_id=pid,
            source=None,
            problems=(),
            bundle=None,
            bundle_id=None,
            versions={},
            versions_reported={},
            device=None,
            backends={},
            compile_s=None,
            compile_source=None,
            step_s=None,
            step_min=None,
            step_max=None,
            steps=0,
            user_code_s=None,
            exit=None,
            metrics={},
            startup=(),
            cache=None,
        )
    training = doc.get("training") or {}
    timings = training.get("timings") or {}
    compile_s, compile_source = None, None
    evidence = (doc.get("cache") or {}).get("evidence") or {}
    observed = [(fe, (ev or {}).get("compile_time_sec")) for fe, ev in evidence.items()]
    observed = [(fe, v) for fe, v in observed if isinstance(v, (int, float))]
    if observed:
        compile_s = float(sum(v for _, v in observed))
        compile_source = "cache evidence (" + ", ".join(fe for fe, _ in observed) + ")"
    elif "compile" in timings:
        compile_s = float(timings["compile"]["total"])
        compile_source = "training code"
    step = timings.get("step") or {}
    samples = [s for s in step.get("samples") or [] if isinstance(s, (int, float))]
    user = next((s for s in doc.get("steps") or [] if s.get("name") == "user-code"), None)
    user_s = (user["ended"] - user["started"]) if user else None
    if user_s is None and doc.get("started_at") and (doc.get("exit") or {}).get("ended_at"):
        user_s = doc["exit"]["ended_at"] - doc["started_at"]
    return WorkerRow(
        worker=name,
        process_id=pid,
        source=source,
        problems=tuple(validate(doc)),
        bundle=doc.get("bundle"),
        bundle_id=doc.get("bundle_id"),
        versions=doc.get("versions") or {},
        versions_reported=doc.get("versions_reported") or {},
        device=(doc.get("devices") or {}).get("summary"),
        backends={c: b.get("name") for c, b in (training.get("backends") or {}).items()},
        compile_s=compile_s,
        compile_source=compile_source,
        step_s=statistics.median(samples) if samples else None,
        step_min=min(samples) if samples else None,
        step_max=max(samples) if samples else None,
        steps=int(step.get("count") or 0),
        user_code_s=user_s,
        exit=doc.get("exit"),
        metrics=training.get("metrics") or {},
        startup=tuple(s.get("name", "?") for s in doc.get("steps") or []),
        cache=doc.get("cache"),
    )


def _groups(values: Mapping[str, object]) -> dict:
    """{value: [workers]} in first-seen order."""
    out: dict = {}
    for worker, value in values.items():
        out.setdefault(json.dumps(value, sort_keys=True, default=str), (value, []))[1].append(worker)
    return {k: v for k, v in out.items()}


def _describe_groups(values: Mapping[str, object]) -> str:
    groups = sorted(_groups(values).values(), key=lambda g: -len(g[1]))
    return "; ".join(f"{_show(v)} on {', '.join(ws)}" for v, ws in groups)


def _show(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _same_number(values: Sequence[float]) -> bool:
    return all(math.isclose(v, values[0], rel_tol=REL_TOL, abs_tol=1e-12) for v in values)


def _startup_rank(step: str) -> int | None:
    base = step.split(" ", 1)[0]
    return STARTUP_RANK.get(base)


def build_report(run: RunReceipts) -> Report:
    """The report of a run from its receipts (pure)."""
    rows = tuple(
        _row(w, run.process_ids.get(w, i), run.receipts.get(w), run.sources.get(w)) for i, w in enumerate(run.workers)
    )
    have = [r for r in rows if r.has_receipt]
    flags: list[Flag] = []
    missing = [r.worker for r in rows if not r.has_receipt]
    if missing:
        flags.append(
            Flag(
                "missing-receipt",
                f"no receipt from {', '.join(missing)}: the report covers "
                f"{len(have)} of {len(rows)} processes (`orch gather {run.run_id}` copies them once "
                "the workers answer)",
                tuple(missing),
            )
        )
    for r in have:
        if r.problems:
            flags.append(
                Flag(
                    "invalid-receipt",
                    f"{r.worker}: the receipt does not match the schema: "
                    + "; ".join(r.problems[:3])
                    + (" ..." if len(r.problems) > 3 else ""),
                    (r.worker,),
                )
            )

    bundles = {r.worker: (r.bundle, r.bundle_id) for r in have}
    if len(_groups(bundles)) > 1:
        flags.append(
            Flag(
                "bundle-differs",
                "workers ran different bundles: "
                + _describe_groups({w: f"{b}@{(i or '?')[:12]}" for w, (b, i) in bundles.items()}),
                tuple(bundles),
            )
        )
    for table, what in (("versions", "installed"), ("versions_reported", "reported by the runtime")):
        keys = sorted({k for r in have for k in getattr(r, table)})
        for k in keys:
            vals = {r.worker: getattr(r, table).get(k) for r in have}
            if len(_groups(vals)) > 1:
                flags.append(
                    Flag(
                        "versions-differ",
                        f"{k} ({what}) differs across workers: " + _describe_groups(vals),
                        tuple(vals),
                    )
                )

    metric_names = sorted({m for r in have for m in r.metrics})
    for m in metric_names:
        entries = {r.worker: r.metrics[m] for r in have if m in r.metrics}
        # A one-process run's numbers are global by construction; otherwise "global" needs a collective.
        unreduced = [
            w
            for w, e in entries.items()
            if e.get("scope") == "global"
            and not e.get("reduced_by")
            and (run.receipts[w] or {}).get("num_processes", len(rows)) > 1
        ]
        if unreduced:
            flags.append(
                Flag(
                    "unreduced-metric",
                    f"metric '{m}' is recorded as global but was not reduced "
                    f"across processes on {_workers_text(unreduced, len(have))}: it may be one "
                    "process's local number",
                    tuple(unreduced),
                )
            )
        reduced = {w: e for w, e in entries.items() if e.get("scope") == "global" and e.get("reduced_by")}
        partial = [
            w
            for w, e in reduced.items()
            if isinstance(e.get("over"), int) and e["over"] < (run.receipts[w] or {}).get("num_processes", len(rows))
        ]
        if partial:
            over = sorted({reduced[w]["over"] for w in partial})
            flags.append(
                Flag(
                    "partial-reduction",
                    f"metric '{m}' was reduced over {', '.join(map(str, over))} "
                    f"of {len(rows)} processes on {', '.join(partial)}",
                    tuple(partial),
                )
            )
        values = {
            w: e.get("value")
            for w, e in entries.items()
            if e.get("scope") == "global" and isinstance(e.get("value"), (int, float))
        }
        steps = {e.get("step") for w, e in entries.items() if w in values}
        if len(values) > 1 and len(steps) == 1 and not _same_number(list(values.values())):
            flags.append(
                Flag(
                    "global-metric-differs",
                    f"metric '{m}' is global but its value differs across workers: {_describe_groups(values)}",
                    tuple(values),
                )
            )

    if (run.platform or "").lower() == "tpu":
        fallback = [r.worker for r in have if r.device and (r.device.get("kind") or "").lower() == "cpu"]
        if fallback:
            flags.append(
                Flag(
                    "cpu-fallback",
                    f"lane {run.lane} intends a TPU, but the device that answered "
                    f"was CPU on {_workers_text(fallback, len(have))} (the runtime fell back)",
                    tuple(fallback),
                )
            )
    kinds = {r.worker: (r.device or {}).get("kind") for r in have if r.device}
    if len(_groups(kinds)) > 1:
        flags.append(
            Flag(
                "devices-differ",
                "the device that answered differs across workers: " + _describe_groups(kinds),
                tuple(kinds),
            )
        )

    components = sorted({c for r in have for c in r.backends})
    for c in components:
        vals = {r.worker: r.backends.get(c) for r in have}
        if len(_groups(vals)) > 1:
            flags.append(
                Flag(
                    "backends-differ",
                    f"backend{'' if c == 'main' else ' for ' + c} differs across workers: {_describe_groups(vals)}",
                    tuple(vals),
                )
            )
    ran_code = [r for r in have if "user-code" in r.startup or r.exit]
    if ran_code and not components:
        flags.append(
            Flag(
                "no-backend",
                "the training code recorded no backend (orch_receipt.record_backend): "
                "nothing says which path actually answered",
                level="info",
            )
        )

    for r in have:
        ranks = [(s, _startup_rank(s)) for s in r.startup]
        ranked = [(s, k) for s, k in ranks if k is not None]
        if any(b[1] < a[1] for a, b in zip(ranked, ranked[1:])):
            flags.append(
                Flag(
                    "startup-order",
                    f"{r.worker}: start-up steps ran out of order: " + " -> ".join(s for s, _ in ranked),
                    (r.worker,),
                )
            )

    failed = [r for r in have if r.exit and (r.exit.get("signal") or r.exit.get("code") not in (0, None))]
    if failed:
        flags.append(
            Flag(
                "failed-process",
                "processes that did not exit 0: "
                + ", ".join(
                    f"{r.worker} ({r.exit_text()}{': ' + r.exit['reason'] if r.exit.get('reason') else ''})"
                    for r in failed
                ),
                tuple(r.worker for r in failed),
            )
        )
    running = [r.worker for r in have if not r.exit]
    if running:
        flags.append(
            Flag(
                "no-exit",
                f"no exit status in the receipts of {', '.join(running)} (still running, "
                "or lost before anything recorded its end)",
                tuple(running),
            )
        )

    ids = tuple(sorted({r.bundle_id for r in have if r.bundle_id}))
    return Report(
        run_id=run.run_id,
        lane=run.lane,
        bundle=run.bundle,
        bundle_ids=ids,
        platform=run.platform,
        target=run.target,
        state=run.state,
        start_skew=run.start_skew,
        rows=rows,
        flags=tuple(flags),
    )


def _workers_text(workers: Sequence[str], total: int) -> str:
    return f"all {total} workers" if len(workers) == total and total > 1 else ", ".join(workers)


def report(record) -> Report:
    """The report of a recorded run (reads the controller's copies)."""
    return build_report(load_run(record))


# ---------------------------------------------------------------------------
# Compare


@dataclass(frozen=True)
class Difference:
    """One stack item that differs between two runs."""

    item: str
    a: str
    b: str

    def to_dict(self) -> dict:
        return {"item": self.item, "a": self.a, "b": self.b}


@dataclass(frozen=True)
class Figure:
    """One number (or short text) of each run, for side-by-side reading."""

    name: str
    a: str | float | None
    b: str | float | None
    unit: str = ""
    detail: str = ""


@dataclass(frozen=True)
class Comparison:
    """Two runs side by side; `refused` says why they were not compared."""

    a: Report
    b: Report
    refused: str | None
    cross_lane: bool
    differences: tuple[Difference, ...]
    figures: tuple[Figure, ...]

    def to_dict(self) -> dict:
        def side(r: Report) -> dict:
            return {
                "run_id": r.run_id,
                "lane": r.lane,
                "bundle": r.bundle,
                "bundle_ids": list(r.bundle_ids),
                "label": r.label,
            }

        def labelled(r: Report, value) -> dict:
            return {
                "label": r.label,
                "lane": r.lane,
                "bundle": r.bundle,
                "bundle_ids": list(r.bundle_ids),
                "run_id": r.run_id,
                "value": value,
            }

        return {
            "schema_version": SCHEMA_VERSION,
            "a": side(self.a),
            "b": side(self.b),
            "refused": self.refused,
            "cross_lane": self.cross_lane,
            "stack_differences": [d.to_dict() for d in self.differences],
            "figures": [
                {
                    "name": f.name,
                    "unit": f.unit,
                    "detail": f.detail,
                    "a": labelled(self.a, f.a),
                    "b": labelled(self.b, f.b),
                }
                for f in self.figures
            ],
        }


def _common(rows: Sequence[WorkerRow], get) -> str:
    vals = {r.worker: get(r) for r in rows if r.has_receipt}
    if not vals:
        return "-"
    groups = _groups(vals)
    if len(groups) == 1:
        return _show(next(iter(groups.values()))[0])
    return "mixed: " + _describe_groups(vals)


def stack_differences(a: Report, b: Report) -> list[Difference]:
    """Lane, bundle and every stack item whose value differs between the two runs."""
    items: list[tuple[str, str, str]] = [
        ("lane", a.lane, b.lane),
        ("bundle", a.bundle_label, b.bundle_label),
        ("platform (intended)", _show(a.platform), _show(b.platform)),
    ]
    keys = list(STACK_KEYS) + sorted({k for r in (*a.rows, *b.rows) for k in r.versions} - set(STACK_KEYS))
    for k in keys:
        items.append(
            (
                f"{k} (installed)",
                _common(a.rows, lambda r: r.versions.get(k)),
                _common(b.rows, lambda r: r.versions.get(k)),
            )
        )
    for k in sorted({k for r in (*a.rows, *b.rows) for k in r.versions_reported}):
        items.append(
            (
                f"{k} (reported)",
                _common(a.rows, lambda r: r.versions_reported.get(k)),
                _common(b.rows, lambda r: r.versions_reported.get(k)),
            )
        )
    items.append(("device", _common(a.rows, WorkerRow.device_text), _common(b.rows, WorkerRow.device_text)))
    for c in sorted({c for r in (*a.rows, *b.rows) for c in r.backends}):
        items.append(
            (f"backend {c}", _common(a.rows, lambda r: r.backends.get(c)), _common(b.rows, lambda r: r.backends.get(c)))
        )
    items.append(
        (
            "cache policy",
            _common(a.rows, lambda r: _cache_text(r.cache)),
            _common(b.rows, lambda r: _cache_text(r.cache)),
        )
    )
    return [Difference(i, x, y) for i, x, y in items if x != y]


def _cache_text(cache) -> str | None:
    if not cache:
        return None
    policy = cache.get("policy")
    if isinstance(policy, dict):
        policy = policy.get("name") or policy.get("mode")
    return f"{policy}" + (f" ({cache['role']})" if cache.get("role") else "")


def _mean(values) -> float | None:
    vals = [v for v in values if isinstance(v, (int, float))]
    return statistics.fmean(vals) if vals else None


def figures(r: Report) -> dict[str, tuple[object, str, str]]:
    """name -> (value, unit, detail) of one run."""
    have = [x for x in r.rows if x.has_receipt]
    ok = sum(1 for x in have if x.exit and x.exit.get("code") == 0 and not x.exit.get("signal"))
    out: dict[str, tuple[object, str, str]] = {
        "processes": (len(r.rows), "", ""),
        "exited 0": (f"{ok}/{len(r.rows)}", "", ""),
        "device": (_common(r.rows, WorkerRow.device_text), "", "per process"),
        "backend": (_common(r.rows, WorkerRow.backend_text), "", ""),
        "compile time": (_mean(x.compile_s for x in have), "s", "mean over processes"),
        "step time": (
            statistics.median([x.step_s for x in have if x.step_s is not None])
            if any(x.step_s is not None for x in have)
            else None,
            "s",
            "median of per-process medians",
        ),
        "user code": (
            max((x.user_code_s for x in have if x.user_code_s is not None), default=None),
            "s",
            "longest process",
        ),
        "start skew": (r.start_skew * 1000 if r.start_skew is not None else None, "ms", "release to start"),
    }
    for m in sorted({m for x in have for m in x.metrics}):
        entries = [x.metrics[m] for x in have if m in x.metrics]
        scope = {e.get("scope") for e in entries}
        how = {e.get("reduced_by") or "not reduced" for e in entries}
        out[f"metric {m}"] = (
            _mean(e.get("value") for e in entries),
            entries[0].get("unit") or "",
            f"{'/'.join(sorted(s for s in scope if s))}, {'/'.join(sorted(how))}; "
            f"mean of {len(entries)} process{'es' if len(entries) != 1 else ''}",
        )
    return out


def compare(a: Report, b: Report, *, allow_cross_lane: bool = False) -> Comparison:
    """Two runs side by side. Refused across lanes or bundles unless `allow_cross_lane`."""
    differences = tuple(stack_differences(a, b))
    unknown = [r.run_id for r in (a, b) if not any(row.source for row in r.rows)]
    if unknown:
        # Without receipts neither the bundle nor any figure is known: no comparison, and no
        # "different bundles" verdict made up from a missing one.
        refused = (
            f"run{'s' if len(unknown) > 1 else ''} {' and '.join(unknown)} ha{'ve' if len(unknown) > 1 else 's'} "
            f"no receipts here, so {'their' if len(unknown) > 1 else 'its'} bundle is unknown: gather "
            f"first ({'; '.join(f'orch gather {r}' for r in unknown)})"
        )
        return Comparison(a=a, b=b, refused=refused, cross_lane=False, differences=differences, figures=())
    cross = a.lane != b.lane or a.bundle != b.bundle or set(a.bundle_ids) != set(b.bundle_ids)
    refused = None
    if cross and not allow_cross_lane:
        what = []
        if a.lane != b.lane:
            what.append(f"lanes {a.lane} vs {b.lane}")
        if a.bundle != b.bundle or set(a.bundle_ids) != set(b.bundle_ids):
            what.append(f"bundles {a.bundle_label} vs {b.bundle_label}")
        refused = (
            f"runs {a.run_id} and {b.run_id} come from different {' and '.join(w.split()[0] for w in what)} "
            f"({'; '.join(what)}): results from different lanes or bundles are not comparable by default"
        )
        return Comparison(a=a, b=b, refused=refused, cross_lane=True, differences=differences, figures=())
    fa, fb = figures(a), figures(b)
    figs = []
    for name in list(dict.fromkeys([*fa, *fb])):
        va, unit, detail = fa.get(name, (None, "", ""))
        vb, unit_b, detail_b = fb.get(name, (None, unit, detail))
        figs.append(
            Figure(
                name=name,
                a=va,
                b=vb,
                unit=unit or unit_b,
                detail=detail if detail == detail_b else f"A: {detail}; B: {detail_b}",
            )
        )
    return Comparison(a=a, b=b, refused=None, cross_lane=cross, differences=differences, figures=tuple(figs))


def format_value(value, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        text = f"{value:.4g}" if unit != "ms" else f"{value:.0f}"
    else:
        text = str(value)
    return f"{text} {unit}".rstrip() if unit else text


# ---------------------------------------------------------------------------
# HTML report and its plot


def _nice_max(value: float) -> float:
    """The smallest 1-2-5 x 10^k at or above `value` (the plot's axis end)."""
    if value <= 0:
        return 1.0
    exp = math.floor(math.log10(value))
    for m in (1, 2, 2.5, 5, 10):
        top = m * 10**exp
        if top >= value * (1 - 1e-9):
            return top
    return 10 ** (exp + 1)


def _fmt_tick(value: float) -> str:
    return f"{value:.3g}"


def plot_svg(rows: Sequence[WorkerRow], *, width: int = 760, panel_height: int = 230) -> str:
    """An inline SVG: per-worker compile time (bars) and step time (median bar, min-max whisker)."""
    left, right, top, bottom, gap = 64, 16, 34, 70, 24
    panels = [
        ("compile time per worker (s)", [(r.worker, r.compile_s, None, None) for r in rows], "compile"),
        (
            "step time per worker (s): median, min to max",
            [(r.worker, r.step_s, r.step_min, r.step_max) for r in rows],
            "step",
        ),
    ]
    height = len(panels) * (panel_height + gap)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11" role="img" '
        f'aria-label="per-worker compile and step times">'
    ]
    for i, (title, data, kind) in enumerate(panels):
        y0 = i * (panel_height + gap)
        plot_h = panel_height - top - bottom
        plot_w = width - left - right
        base = y0 + top + plot_h
        out.append(f'<g class="panel" data-kind="{kind}">')
        out.append(f'<text x="{left}" y="{y0 + 18}" font-size="13" font-weight="bold">{html.escape(title)}</text>')
        values = [v for _, v, _, hi in data for v in (v, hi) if isinstance(v, (int, float))]
        if not values:
            out.append(
                f'<text x="{left}" y="{y0 + top + plot_h / 2:.1f}" fill="#666">no {kind} times recorded '
                f'(orch_receipt.record_time("{kind}", seconds) or cache evidence)</text></g>'
            )
            continue
        ymax = _nice_max(max(values))
        for k in range(5):
            tv = ymax * k / 4
            ty = base - plot_h * k / 4
            out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{ty:.1f}" y2="{ty:.1f}" stroke="#ddd"/>')
            out.append(f'<text x="{left - 6}" y="{ty + 4:.1f}" text-anchor="end">{_fmt_tick(tv)}</text>')
        out.append(f'<line x1="{left}" x2="{left}" y1="{base - plot_h}" y2="{base}" stroke="#333"/>')
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{base}" y2="{base}" stroke="#333"/>')
        slot = plot_w / max(len(data), 1)
        bar_w = max(4.0, min(48.0, slot * 0.6))
        for j, (worker, v, lo, hi) in enumerate(data):
            cx = left + slot * (j + 0.5)
            label = html.escape(worker)
            out.append(
                f'<text x="{cx:.1f}" y="{base + 14}" text-anchor="end" '
                f'transform="rotate(-35 {cx:.1f} {base + 14})">{label}</text>'
            )
            if not isinstance(v, (int, float)):
                out.append(f'<text x="{cx:.1f}" y="{base - 4}" text-anchor="middle" fill="#999">n/a</text>')
                continue
            h = plot_h * v / ymax
            out.append(
                f'<rect class="bar" data-worker="{label}" data-value="{v:.6g}" x="{cx - bar_w / 2:.1f}" '
                f'y="{base - h:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{"#4e79a7" if kind == "compile" else "#59a14f"}">'
                f"<title>{label}: {v:.4g} s</title></rect>"
            )
            if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
                ylo, yhi = base - plot_h * lo / ymax, base - plot_h * hi / ymax
                out.append(
                    f'<line class="whisker" data-worker="{label}" x1="{cx:.1f}" x2="{cx:.1f}" '
                    f'y1="{ylo:.1f}" y2="{yhi:.1f}" stroke="#222"/>'
                )
                for yy in (ylo, yhi):
                    out.append(f'<line x1="{cx - 5:.1f}" x2="{cx + 5:.1f}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#222"/>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


_CSS = """
body { font-family: sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.flag { margin: 0.3em 0; padding: 0.4em 0.6em; border-left: 4px solid #e15759; background: #fdf0f0; }
.flag.info { border-color: #76b7b2; background: #eef7f6; }
.ok { color: #2a7a2a; } .meta { color: #555; }
"""


def render_html(r: Report) -> str:
    """The report as one static, self-contained HTML page (inline CSS and SVG, no scripts)."""
    e = html.escape

    def num(v, digits=4):
        return "-" if v is None else f"{v:.{digits}g}"

    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>orch report {e(r.run_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Run {e(r.run_id)}</h1>",
        f'<p class="meta">lane <b>{e(r.lane)}</b> &middot; bundle <b>{e(r.bundle_label)}</b> &middot; '
        f"platform {e(str(r.platform))} &middot; state {e(str(r.state))} &middot; "
        f"{len(r.rows)} processes &middot; program <code>{e(' '.join(r.target))}</code></p>",
        "<h2>Flags</h2>",
    ]
    if r.flags:
        parts += [f'<div class="flag {e(f.level)}"><b>{e(f.kind)}</b>: {e(f.message)}</div>' for f in r.flags]
    else:
        parts.append(
            '<p class="ok">none: every worker ran the same stack and backend, and every global metric was reduced</p>'
        )
    parts += [
        "<h2>Workers</h2>",
        "<table><tr><th>worker</th><th>process</th><th>bundle</th><th>device</th>"
        "<th>backend</th><th>compile s</th><th>step s (median)</th><th>steps</th><th>user code s</th>"
        "<th>cache</th><th>exit</th><th>receipt</th></tr>",
    ]
    for x in r.rows:
        parts.append(
            f"<tr><td>{e(x.worker)}</td><td class=num>{x.process_id}</td>"
            f"<td>{e(str(x.bundle))}@{e((x.bundle_id or '?')[:12])}</td><td>{e(x.device_text())}</td>"
            f"<td>{e(x.backend_text())}</td><td class=num>{num(x.compile_s)}</td>"
            f"<td class=num>{num(x.step_s)}</td><td class=num>{x.steps}</td>"
            f"<td class=num>{num(x.user_code_s)}</td><td>{e(x.cache_text())}</td>"
            f"<td>{e(x.exit_text())}</td>"
            f"<td>{e(x.source or 'missing')}</td></tr>"
        )
    parts.append("</table>")
    parts += ["<h2>Compile and step times</h2>", plot_svg(r.rows)]
    have = [x for x in r.rows if x.has_receipt]
    keys = [k for k in STACK_KEYS if any(x.versions.get(k) for x in have)] + sorted(
        {k for x in have for k in x.versions} - set(STACK_KEYS)
    )
    parts += [
        "<h2>Versions (installed / reported by the runtime)</h2>",
        "<table><tr><th>worker</th>" + "".join(f"<th>{e(k)}</th>" for k in keys) + "</tr>",
    ]
    for x in have:
        cells = []
        for k in keys:
            inst, rep = x.versions.get(k), x.versions_reported.get(k)
            cells.append(f"<td>{e(str(inst or '-'))}" + (f" / {e(rep)}" if rep and rep != inst else "") + "</td>")
        parts.append(f"<tr><td>{e(x.worker)}</td>{''.join(cells)}</tr>")
    parts.append("</table>")
    metrics = sorted({m for x in have for m in x.metrics})
    if metrics:
        parts += [
            "<h2>Metrics</h2>",
            "<table><tr><th>metric</th><th>scope</th><th>reduced by</th>"
            + "".join(f"<th>{e(x.worker)}</th>" for x in have)
            + "</tr>",
        ]
        for m in metrics:
            entries = [x.metrics.get(m) or {} for x in have]
            scope = "/".join(sorted({str(en.get("scope")) for en in entries if en}))
            how = "/".join(sorted({str(en.get("reduced_by") or "NOT REDUCED") for en in entries if en}))
            parts.append(
                f"<tr><td>{e(m)}</td><td>{e(scope)}</td><td>{e(how)}</td>"
                + "".join(f"<td class=num>{num(en.get('value'), 8)}</td>" for en in entries)
                + "</tr>"
            )
        parts.append("</table>")
    startup = {" -> ".join(x.startup) for x in have}
    parts += ["<h2>Start-up order</h2>"] + [f"<p><code>{e(s)}</code></p>" for s in sorted(startup)]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
