"""The report of a run as data: one row per worker, and the flags a reader must not miss.

Also the few text helpers the report, the comparison and the HTML page share
(how a value, a group of workers, a mixed value are written).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.receipts.schema import SCHEMA_VERSION, Doc


@dataclass(frozen=True)
class Flag:
    """Something a reader of the run must not miss."""

    kind: str
    message: str
    workers: tuple[str, ...] = ()
    level: str = "warning"  # warning | info

    def to_dict(self) -> Doc:
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
    device: Mapping[str, Any] | None
    backends: Mapping[str, str]
    compile_s: float | None
    compile_source: str | None
    step_s: float | None  # median
    step_min: float | None
    step_max: float | None
    steps: int
    user_code_s: float | None
    exit: Mapping[str, Any] | None
    metrics: Mapping[str, Mapping[str, Any]]
    startup: tuple[str, ...]
    cache: Mapping[str, Any] | None
    slice: str | None = None  # the worker's slice (a multislice run groups by it)
    interpreter: Mapping[str, Any] | None = None  # the Python it ran on (receipt's `interpreter`)

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
        text = "/".join(str(x) for x in (policy_name(c), c.get("role")) if x)
        for fe, ev in (c.get("evidence") or {}).items():
            if isinstance(ev, dict) and (ev.get("cache_hits") is not None or ev.get("cache_misses") is not None):
                text += f" {fe} {ev.get('cache_hits', '?')}h/{ev.get('cache_misses', '?')}m"
        return text or "-"

    def interpreter_text(self) -> str:
        """`CPython 3.13.0 (archive 6070b8bdd12f)`, `CPython 3.11.2 (system)`, or `-`."""
        i = self.interpreter
        if not i:
            return "-"
        origin = f"archive {str(i.get('sha256'))[:12]}" if i.get("source") == "artifact" else "system"
        return f"CPython {i.get('version') or '?'} ({origin})"

    def backend_text(self) -> str:
        if not self.backends:
            return "-"
        if list(self.backends) == ["main"]:
            return self.backends["main"]
        return ", ".join(f"{c}={n}" for c, n in self.backends.items())

    def to_dict(self) -> Doc:
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
            "slice": self.slice,
            "interpreter": dict(self.interpreter) if self.interpreter else None,
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

    def to_dict(self) -> Doc:
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


def policy_name(cache: Mapping[str, Any]) -> object:
    """The cache policy a receipt names (a policy document names itself or its mode)."""
    policy = cache.get("policy")
    if isinstance(policy, dict):
        return policy.get("name") or policy.get("mode")
    return policy


def groups(values: Mapping[str, object]) -> dict[str, tuple[object, list[str]]]:
    """{value's JSON: (value, [workers])} in first-seen order."""
    out: dict[str, tuple[object, list[str]]] = {}
    for worker, value in values.items():
        out.setdefault(json.dumps(value, sort_keys=True, default=str), (value, []))[1].append(worker)
    return out


def describe_groups(values: Mapping[str, object]) -> str:
    """`value on w0, w1; other on w2`, the largest group first."""
    ordered = sorted(groups(values).values(), key=lambda g: -len(g[1]))
    return "; ".join(f"{show(v)} on {', '.join(ws)}" for v, ws in ordered)


def show(value: object) -> str:
    """A value as one word of a message (`none` for a missing one)."""
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def workers_text(workers: Sequence[str], total: int) -> str:
    """`all N workers`, or the workers named."""
    return f"all {total} workers" if len(workers) == total and total > 1 else ", ".join(workers)
