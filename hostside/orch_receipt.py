"""Record what training code actually ran, in this process's orch receipt.

Under `orch launch` the launcher makes this module importable as `orch_receipt`
(standard library only, nothing to install in the bundle) and binds it to the
process's receipt (`record.json` in the run directory). Everything recorded
lands under the receipt's `training` key:

    import orch_receipt

    orch_receipt.record_backend("xla_flash_pallas", component="attention", frontend="torch_xla")
    loss = xm.mesh_reduce("loss", loss.item(), np.mean)
    orch_receipt.record_metric("loss", loss, scope="global", reduced_by="mesh_reduce",
                               over=xr.process_count(), step=step)
    orch_receipt.record_time("step", seconds)

A metric recorded with `scope="global"` and no `reduced_by` is flagged in the
receipt (and by `orch report`): it is one host's local number presented as a
global one. Processes the training code starts (multiprocessing's spawn,
`xmp.spawn`) can import it too; they are not bound (a receipt has one writer).

Outside `orch launch` the module is not on the path by itself: it is
`hostside.orch_receipt` wherever orch is installed, and this one file (standard
library only) may be copied next to a script. Unbound, every call works and
keeps the data in memory only (`active()` is False), so the script runs
unchanged either way.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from typing import Any, Protocol

SCOPES = ("global", "local")
SAMPLES_KEPT = 1000
SAVE_EVERY = 1.0  # seconds: repeated records are written at most this often; new names at once
UNREDUCED_FLAG = "recorded as global without a reduction: this may be one process's local value"

_lock = threading.RLock()


class _Sink(Protocol):
    """The launcher's record, as far as this module writes to it."""

    data: dict[str, Any]

    def save(self) -> None: ...


_sink: _Sink | None = None  # the launcher's record while bound
_bound_pid = None  # a forked child must not rewrite its parent's receipt
_last_save = 0.0
_warned: set[str] = set()
_state: dict[str, Any] = {"backends": {}, "metrics": {}, "timings": {}, "values": {}, "notes": []}


def active() -> bool:
    """True when this process runs under `orch launch` and records land in its receipt."""
    return _sink is not None and os.getpid() == _bound_pid


def record_backend(
    name: str, *, component: str = "main", frontend: str | None = None, detail: str | None = None
) -> None:
    """Which backend actually answered for `component` (e.g. "xla_flash_pallas" for "attention").

    Name the path that really ran, as specifically as the code knows it
    ("xla_splash_via_trace_pallas", "pure_pytorch_fallback"), not the one
    that was intended.
    """
    _check_name(name, "backend name")
    _check_name(component, "component")
    with _lock:
        new = component not in _state["backends"]
        _state["backends"][component] = {
            "name": name,
            "frontend": frontend,
            "detail": detail,
            "recorded_at": time.time(),
        }
        _save(force=new)


def record_metric(
    name: str,
    value: Any,
    *,
    scope: str,
    reduced_by: str | None = None,
    over: int | None = None,
    step: int | None = None,
    unit: str | None = None,
    detail: str | None = None,
) -> None:
    """A metric value, with whether (and how) it was reduced across processes.

    scope       "global" (a number about the whole run) or "local" (this process only).
    reduced_by  the collective that made it global: "psum", "pmean", "all_reduce",
                "mesh_reduce", ...; None when nothing reduced it.
    over        how many processes the reduction covered (e.g. jax.process_count()).
    """
    _check_name(name, "metric name")
    if scope not in SCOPES:
        raise ValueError(f"orch_receipt.record_metric({name!r}): scope must be one of {SCOPES}, got {scope!r}")
    if reduced_by is not None:
        _check_name(reduced_by, "reduced_by")
    number, nonfinite = _number(value, name)
    with _lock:
        old = _state["metrics"].get(name)
        entry = {
            "value": number,
            "scope": scope,
            "reduced_by": reduced_by,
            "over": over,
            "step": step,
            "unit": unit,
            "detail": detail,
            "count": (old["count"] + 1) if old else 1,
            "recorded_at": time.time(),
            "flag": None,
        }
        if nonfinite:
            entry["nonfinite"] = nonfinite
        if scope == "global" and reduced_by is None:
            entry["flag"] = UNREDUCED_FLAG
            if name not in _warned:
                _warned.add(name)
                print(f"orch_receipt: metric {name!r} {UNREDUCED_FLAG}", file=sys.stderr, flush=True)
        _state["metrics"][name] = entry
        _save(force=old is None)


def record_time(name: str, seconds: float) -> None:
    """A duration in seconds (e.g. "compile", "step"); count, total, min, max and recent samples are kept."""
    _check_name(name, "timing name")
    duration, nonfinite = _number(seconds, name)
    if duration is None:
        raise ValueError(f"orch_receipt.record_time({name!r}): {nonfinite} is not a duration")
    seconds = duration
    with _lock:
        t = _state["timings"].get(name)
        new = t is None
        if new:
            t = _state["timings"][name] = {
                "count": 0,
                "total": 0.0,
                "min": seconds,
                "max": seconds,
                "last": seconds,
                "samples": [],
            }
        t["count"] += 1
        t["total"] += seconds
        t["min"] = min(t["min"], seconds)
        t["max"] = max(t["max"], seconds)
        t["last"] = seconds
        t["samples"].append(seconds)
        if len(t["samples"]) > SAMPLES_KEPT:
            del t["samples"][0]
        _save(force=new)


def record(key: str, value: Any) -> None:
    """Anything else worth keeping in the receipt (JSON-serialisable)."""
    import json

    _check_name(key, "key")
    json.dumps(value)  # refuse what the receipt could not hold, here rather than at exit
    with _lock:
        new = key not in _state["values"]
        _state["values"][key] = value
        _save(force=new)


def note(text: str) -> None:
    """A line of free text, with its time."""
    with _lock:
        _state["notes"].append({"time": time.time(), "text": str(text)})
        _save(force=True)


def recorded() -> dict[str, Any]:
    """What this process recorded so far (a copy)."""
    import copy

    with _lock:
        return copy.deepcopy(_state)


# -- for the launcher ------------------------------------------------------------


def _bind(record: _Sink) -> None:
    """Send everything recorded from now on (and before) to `record` (the launcher's Record)."""
    global _sink, _bound_pid
    with _lock:
        _sink = record
        _bound_pid = os.getpid()
        record.data["training"] = _state
        record.save()


def _flush() -> None:
    """Write what was recorded (the launcher calls this before its final write)."""
    with _lock:
        _save(force=True)


def _save(force: bool) -> None:
    global _last_save
    if not active() or _sink is None:
        return
    now = time.monotonic()
    if force or now - _last_save >= SAVE_EVERY:
        _last_save = now
        try:
            _sink.save()
        except OSError as exc:  # a full disk must not kill the training run
            print(f"orch_receipt: could not write the receipt: {exc}", file=sys.stderr, flush=True)


def _check_name(value: object, what: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"orch_receipt: {what} must be a non-empty string, got {value!r}")


def _number(value: Any, name: str) -> tuple[float | None, str | None]:
    """`value` as a float (0-d arrays and tensors included); non-finite numbers become None."""
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"orch_receipt: {name!r}: expected a number, got {type(value).__name__}") from None
    value = float(value)
    if math.isfinite(value):
        return value, None
    return None, repr(value)
