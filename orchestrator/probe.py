"""Probe sweeps: prove, on every worker, that the runtime answers from the intended device.

`plan(fleet, workers)` builds one request per worker (the lane's bundle,
runtime policy with explicit TPU topology, cache paths); `sweep(plan,
transport)` runs `hostside.probe` on all of them in parallel and turns each
answer into a `WorkerProbe` row with a verdict (ok, warn, fail) and, for a
failure, the owning layer and a remedy from `orchestrator.diagnose`. A
worker that cannot be reached or does not answer in time is a `transport`
row; no worker is ever dropped from the report.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hostside import redact
from hostside.frontends import CACHE_FRONTENDS, bundle_frontends, provable
from hostside.pins import pinned_versions
from hostside.probe import CLOCK_MARK
from orchestrator.cache import cache_plan
from orchestrator.fleet import Fleet, WorkerRef
from orchestrator.policy import runtime_policy
from orchestrator.remote import ensure_hostside, job_document, run_hostside
from orchestrator.transport import Result, Transport

if TYPE_CHECKING:  # diagnose is imported when a failure needs it (its table is large)
    from orchestrator.diagnose import Finding

SCHEMA_VERSION = 1
DEFAULT_TIMEOUT = 90.0  # seconds a worker's whole probe may take (deep)
DEFAULT_SHALLOW_TIMEOUT = 30.0
RUNTIME_TIMEOUT = 60.0  # seconds one frontend's runtime child may take
# The hostside probe stops this much before the transport gives up on it, so
# a slow runtime still yields a document instead of a dead connection.
HOSTSIDE_MARGIN = 4.0

# A worker whose clock is off the controller's by more than this (beyond the measurement's
# uncertainty) gets a `clock` warning; no decision of orch compares two hosts' clocks.
CLOCK_WARN = 2.0

# When several checks fail, the row's layer is the first of these: the
# layer that explains the others (a held chip makes the runtime fail; wrong
# wheels make it fail too).
LAYER_ORDER = (
    "transport",
    "disk",
    "device-ownership",
    "bundle-skew",
    "runtime-proof",
    "cache",
    "memory",
    "collective",
    "other",
)
# The layer of a failing check when no known signature matches its evidence.
CHECK_LAYER = {
    "host": "other",
    "bundle": "bundle-skew",
    "device": "device-ownership",
    "runtime": "runtime-proof",
    "cache": "cache",
}


# ---------------------------------------------------------------------------
# Plan


@dataclass(frozen=True)
class ProbeRequest:
    """What one worker is asked to prove."""

    worker: WorkerRef
    lane: str | None
    doc: dict[str, Any]  # the request hostside.probe reads

    def to_dict(self) -> dict[str, Any]:
        doc = dict(self.doc)
        if isinstance(doc.get("policy"), dict):
            doc["policy"] = {**doc["policy"], "env": redact.env(doc["policy"].get("env") or {})}
        return {"worker": self.worker.name, "lane": self.lane, "request": doc}


@dataclass(frozen=True)
class ProbePlan:
    """One request per worker, and the time each worker gets."""

    requests: tuple[ProbeRequest, ...]
    deep: bool
    timeout: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "deep": self.deep,
            "timeout": self.timeout,
            "requests": [r.to_dict() for r in self.requests],
        }


def cache_entries(fleet: Fleet, lane: str, worker: WorkerRef, frontends: list[str]) -> list[dict[str, Any]]:
    """The cache directories a worker of `lane` uses, and whether it writes or only reads them.

    Paths come from orchestrator.cache.cache_plan (the launcher uses the same)
    and carry a `{bundle_id}` placeholder: only the worker knows which bundle
    its lane has active.
    """
    plan = cache_plan(fleet, lane, worker)
    if plan.role == "off":
        return []
    expect = "writable" if plan.writes else "readonly"
    return [{"frontend": f, "path": plan.roots[f], "expect": expect} for f in frontends if f in CACHE_FRONTENDS]


def build_request(
    fleet: Fleet, worker: WorkerRef, *, deep: bool = True, timeout: float = DEFAULT_TIMEOUT
) -> dict[str, Any]:
    """The hostside.probe request for one worker (pure)."""
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "root": worker.root,
        "lane": worker.lane,
        "deep": deep,
        "deadline": max(5.0, timeout - HOSTSIDE_MARGIN),
        "runtime_timeout": min(RUNTIME_TIMEOUT, max(5.0, timeout - HOSTSIDE_MARGIN - 2)),
    }
    if worker.lane is None:
        return doc
    lane = fleet.lane(worker.lane)
    bundle = fleet.bundle(lane.bundle)
    pins = pinned_versions(bundle.pins)
    policy = runtime_policy(fleet, worker.lane, worker)
    # What the launcher imports (hostside.frontends), less what cannot prove the lane's platform.
    frontends = list(provable(bundle_frontends(bundle.pins), lane.platform))
    doc.update(
        {
            "platform": lane.platform,
            "bundle": {"name": lane.bundle, "pins": pins, "python": bundle.python},
            "frontends": frontends,
            "policy": {"env": dict(policy.env), "forbid": list(policy.forbid), "profile": policy.profile},
            "caches": cache_entries(fleet, worker.lane, worker, frontends),
        }
    )
    return doc


def plan(fleet: Fleet, workers: list[WorkerRef], *, deep: bool = True, timeout: float | None = None) -> ProbePlan:
    """One request per worker (pure: nothing is contacted)."""
    timeout = timeout or (DEFAULT_TIMEOUT if deep else DEFAULT_SHALLOW_TIMEOUT)
    requests = tuple(
        ProbeRequest(worker=w, lane=w.lane, doc=build_request(fleet, w, deep=deep, timeout=timeout)) for w in workers
    )
    return ProbePlan(requests=requests, deep=deep, timeout=timeout)


# ---------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class CheckOutcome:
    """One check on one worker, with the owning layer when it failed."""

    name: str
    status: str
    summary: str
    evidence: tuple[str, ...]
    elapsed: float
    layer: str | None = None
    remedy: str | None = None
    signature: str | None = None  # the log line a known signature matched
    signature_id: str | None = None
    headline: str | None = None
    data: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "summary": self.summary,
            "evidence": list(self.evidence),
            "elapsed": self.elapsed,
            "layer": self.layer,
            "remedy": self.remedy,
            "signature": self.signature,
            "signature_id": self.signature_id,
            "data": self.data,
        }


@dataclass(frozen=True)
class WorkerProbe:
    """One row of a sweep: a worker's verdict and the evidence for it."""

    worker: str
    lane: str | None
    platform: str | None  # intended
    bundle_id: str | None
    answered: str | None  # device kind that actually answered ("cpu", "TPU v6 lite"), if probed
    verdict: str  # ok | warn | fail
    layer: str | None  # owning layer of a failure
    remedy: str | None
    evidence: str  # the one line that says why
    checks: tuple[CheckOutcome, ...] = ()
    elapsed: float = 0.0
    error: str | None = None  # transport error, when the worker gave no document

    @property
    def failed(self) -> bool:
        return self.verdict == "fail"

    def check(self, name: str) -> CheckOutcome | None:
        return next((c for c in self.checks if c.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "worker": self.worker,
            "lane": self.lane,
            "platform": self.platform,
            "bundle_id": self.bundle_id,
            "answered": self.answered,
            "verdict": self.verdict,
            "layer": self.layer,
            "remedy": self.remedy,
            "evidence": self.evidence,
            "elapsed": round(self.elapsed, 3),
            "error": self.error,
            "checks": [c.to_dict() for c in self.checks],
        }


@dataclass(frozen=True)
class ProbeReport:
    """Every worker's row, in plan order, and a summary by layer."""

    rows: tuple[WorkerProbe, ...]
    deep: bool
    elapsed: float

    @property
    def failed(self) -> bool:
        return any(r.failed for r in self.rows)

    def summary(self) -> dict[str, Any]:
        """Counts by verdict and the failing workers of each layer."""
        layers: dict[str, list[str]] = {}
        for r in self.rows:
            if r.failed:
                layers.setdefault(r.layer or "other", []).append(r.worker)
        ordered = {k: layers[k] for k in LAYER_ORDER if k in layers}
        counts = {v: sum(1 for r in self.rows if r.verdict == v) for v in ("ok", "warn", "fail")}
        out: dict[str, Any] = {"workers": len(self.rows), **counts, "layers": ordered}
        clock = self.clock()
        if clock:
            out["clock"] = clock
        return out

    def clock(self) -> dict[str, Any]:
        """The workers' clock offsets from the controller's: least, most, their spread and the widest
        uncertainty (empty when no worker's clock was read)."""
        readings = [c.data for r in self.rows if (c := r.check("clock")) is not None]
        if not readings:
            return {}
        offsets = [float(d["offset"]) for d in readings]
        return {
            "workers": len(readings),
            "min_offset": min(offsets),
            "max_offset": max(offsets),
            "spread": round(max(offsets) - min(offsets), 4),
            "uncertainty": max(float(d["uncertainty"]) for d in readings),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "deep": self.deep,
            "elapsed": round(self.elapsed, 3),
            "summary": self.summary(),
            "rows": [r.to_dict() for r in self.rows],
        }


def _diagnosis(text: str) -> Finding | None:
    """(finding or None) from the diagnosis table; None when nothing matches."""
    from orchestrator.diagnose import diagnose

    return diagnose(text) if text.strip() else None


def _layer_remedy(layer: str) -> str:
    from orchestrator.diagnose import layer_remedy

    try:
        return layer_remedy(layer)
    except ValueError:
        return layer_remedy("other")


def judge_check(check: dict[str, Any]) -> CheckOutcome:
    """A hostside check with its owning layer and remedy when it failed (pure)."""
    name = str(check.get("name", "?"))
    status = str(check.get("status", "fail"))
    raw_evidence = check.get("evidence") or ()
    evidence = tuple(str(e) for e in (raw_evidence if isinstance(raw_evidence, list) else [raw_evidence]))
    layer = remedy = signature = signature_id = None
    if status == "fail":
        finding = _diagnosis("\n".join(evidence + (str(check.get("summary", "")),)))
        if finding is not None:
            layer, remedy, signature = finding.layer, finding.remedy, finding.line
            signature_id = getattr(finding, "signature_id", None) or getattr(finding, "id", None)
        else:
            layer = check.get("layer") or CHECK_LAYER.get(name, "other")
            remedy = _layer_remedy(layer)
    return CheckOutcome(
        name=name,
        status=status,
        summary=str(check.get("summary", "")),
        evidence=evidence,
        elapsed=_number(check.get("elapsed")),
        layer=layer,
        remedy=remedy,
        signature=signature,
        signature_id=signature_id,
        headline=_text(check.get("headline")),
        data=data if isinstance(data := check.get("data"), dict) else {},
    )


def _text(value: object) -> str | None:
    """A string the worker sent, or None for anything else (a document of the wrong shape)."""
    return value if isinstance(value, str) else None


def _number(value: object) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 1e12
    return float(value) if ok and isinstance(value, (int, float)) else 0.0


@dataclass(frozen=True)
class ClockReading:
    """A worker's wall clock against the controller's, measured by the controller over one round trip: the
    worker's clock read at its job's start, between the request leaving and that reading arriving. The true
    offset lies within `offset` ± `uncertainty`. Information only: no decision of orch uses it."""

    offset: float  # worker minus controller, seconds (the middle of the bounds)
    uncertainty: float  # half the round trip

    @classmethod
    def measure(cls, sent: float, worker_time: float, arrived: float) -> ClockReading:
        """From the controller's clock when the request left and when the reading arrived (pure)."""
        return cls(offset=worker_time - (sent + arrived) / 2, uncertainty=max(arrived - sent, 0.0) / 2)

    def to_dict(self) -> dict[str, Any]:
        return {"offset": round(self.offset, 4), "uncertainty": round(self.uncertainty, 4)}


def clock_check(reading: ClockReading, limit: float = CLOCK_WARN) -> CheckOutcome:
    """The `clock` finding: the measured offset, a warning only when it is surely beyond `limit`."""
    shown = f"{reading.offset:+.3f}s ± {reading.uncertainty:.3f}s"
    summary = f"clock {shown} from the controller's (bounded by one round trip)"
    beyond = abs(reading.offset) - reading.uncertainty > limit
    headline = (
        f"clock differs from the controller's by {shown} (more than {limit:g}s): orch decides nothing by it, "
        "but this worker's timestamps in logs and receipts are off by as much"
        if beyond
        else None
    )
    return CheckOutcome(
        name="clock",
        status="warn" if beyond else "ok",
        summary=summary,
        evidence=(),
        elapsed=0.0,
        headline=headline,
        data=reading.to_dict(),
    )


def judge(
    worker: str, lane: str | None, doc: dict[str, Any], *, elapsed: float = 0.0, clock: ClockReading | None = None
) -> WorkerProbe:
    """A worker's row from its hostside.probe document (pure), with the controller's clock reading if any."""
    raw_checks = doc.get("checks")
    checks = tuple(judge_check(c) for c in (raw_checks if isinstance(raw_checks, list) else []) if isinstance(c, dict))
    checks += (clock_check(clock),) if clock is not None else ()
    runtime = next((c for c in checks if c.name == "runtime"), None)
    answered = None
    if runtime is not None and isinstance(runtime.data.get("answered"), dict):
        a = runtime.data["answered"]
        answered = str(a.get("device_kind") or a.get("platform") or "?")
    failing = [c for c in checks if c.status == "fail"]
    warning = [c for c in checks if c.status == "warn"]
    base: dict[str, Any] = dict(
        worker=worker,
        lane=lane,
        platform=_text(doc.get("platform")),
        bundle_id=_text(doc.get("bundle_id")),
        answered=answered,
        checks=checks,
        elapsed=elapsed,
    )
    if failing:
        deciding = min(failing, key=lambda c: LAYER_ORDER.index(c.layer) if c.layer in LAYER_ORDER else 99)
        line = deciding.signature or deciding.headline or deciding.summary
        if deciding.signature and deciding.headline and deciding.headline != deciding.signature:
            line = f"{deciding.headline} -- {deciding.signature.strip()}"
        return WorkerProbe(
            **base, verdict="fail", layer=deciding.layer, remedy=deciding.remedy, evidence=f"{deciding.name}: {line}"
        )
    if warning:
        first = warning[0]
        return WorkerProbe(
            **base, verdict="warn", layer=None, remedy=None, evidence=f"{first.name}: {first.headline or first.summary}"
        )
    shown = (
        runtime
        if runtime is not None and runtime.status == "ok"
        else next((c for c in checks if c.name == "bundle" and c.status == "ok"), None) or next(iter(checks), None)
    )
    return WorkerProbe(
        **base, verdict="ok", layer=None, remedy=None, evidence=f"{shown.name}: {shown.summary}" if shown else ""
    )


def unreachable(worker: str, lane: str | None, platform: str | None, result: Result) -> WorkerProbe:
    """A `transport` row for a worker that gave no document (unreachable, timed out, no hostside)."""
    text = result.error or result.describe()
    if result.error is None:
        # The worker answered but the job did not (no Python, crash): not a transport failure.
        finding = _diagnosis(result.stderr + "\n" + result.stdout)
        layer = finding.layer if finding else "other"
        remedy = finding.remedy if finding else _layer_remedy(layer)
        line = finding.line if finding else (result.tail("stderr", 1) or text)
        return WorkerProbe(
            worker=worker,
            lane=lane,
            platform=platform,
            bundle_id=None,
            answered=None,
            verdict="fail",
            layer=layer,
            remedy=remedy,
            evidence=f"probe: {line}",
            elapsed=result.elapsed,
            error=text,
        )
    # Shipping orch's helper code found no room: the worker's disk, not the connection.
    layer = "disk" if result.error_kind == "disk" else "transport"
    finding = _diagnosis(text)
    remedy = finding.remedy if finding is not None and finding.layer == layer else _layer_remedy(layer)
    return WorkerProbe(
        worker=worker,
        lane=lane,
        platform=platform,
        bundle_id=None,
        answered=None,
        verdict="fail",
        layer=layer,
        remedy=remedy,
        evidence=text,
        elapsed=result.elapsed,
        error=text,
    )


def malformed(worker: str, lane: str | None, platform: str | None, exc: Exception, elapsed: float) -> WorkerProbe:
    """An `other` row for a worker whose probe document has the wrong shape."""
    text = f"the worker's probe document has the wrong shape ({type(exc).__name__}: {str(exc)[:200]})"
    return WorkerProbe(
        worker=worker,
        lane=lane,
        platform=platform,
        bundle_id=None,
        answered=None,
        verdict="fail",
        layer="other",
        remedy="the worker's hostside copy or its Python is broken: remove <root>/hostside on it and probe again",
        evidence=f"probe: {text}",
        elapsed=elapsed,
        error=text,
    )


# ---------------------------------------------------------------------------
# Sweep


def probe_one(
    transport: Transport, request: ProbeRequest, timeout: float, clocks: dict[str, ClockReading] | None = None
) -> Result:
    """Run hostside.probe on one worker; the Result carries its JSON document on stdout. The worker's clock
    reading, when its first line arrives, goes into `clocks`."""
    w = request.worker
    ready = ensure_hostside(transport, w, timeout=timeout)
    if not ready.ok:
        return ready
    sent = time.time()
    doc = request.doc

    def on_line(host: str, stream: str, text: str) -> None:
        if clocks is None or stream != "stderr" or not text.startswith(CLOCK_MARK) or w.name in clocks:
            return
        arrived = time.time()
        try:
            clocks[w.name] = ClockReading.measure(sent, float(text.split()[1]), arrived)
        except (IndexError, ValueError):
            pass  # a line that is not a reading: no finding

    # The request travels as one argument (a few KB): stdin forwarding over
    # the SSH channel is slower and has stalled on larger inputs.
    return run_hostside(
        transport,
        w,
        "probe",
        ["--request", json.dumps(doc, separators=(",", ":"))],
        python=w.python,
        timeout=timeout,
        on_line=on_line,
    )


def sweep(probe_plan: ProbePlan, transport: Transport) -> ProbeReport:
    """Probe every planned worker in parallel; one row per worker, in plan order."""
    start = time.monotonic()
    by_name = {r.worker.name: r for r in probe_plan.requests}
    clocks: dict[str, ClockReading] = {}
    results = transport.map(lambda w: probe_one(transport, by_name[w.name], probe_plan.timeout, clocks), list(by_name))
    rows = []
    for name, request in by_name.items():
        result = results[name]
        platform = request.doc.get("platform")
        if result.error is not None or not result.stdout.strip():
            rows.append(unreachable(name, request.lane, platform, result))
            continue
        try:
            doc = job_document(result)
        except Exception:
            rows.append(unreachable(name, request.lane, platform, result))
            continue
        try:
            rows.append(judge(name, request.lane, doc, elapsed=result.elapsed, clock=clocks.get(name)))
        except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
            # A document of the wrong shape: a broken hostside, never a traceback for every worker.
            rows.append(malformed(name, request.lane, platform, exc, result.elapsed))
    return ProbeReport(rows=tuple(rows), deep=probe_plan.deep, elapsed=time.monotonic() - start)
