"""Compare: two runs side by side, every figure labelled with its lane and bundle.

Runs from different lanes or bundles are refused unless explicitly allowed, and
then the stack differences come first. Runs without receipts are refused too:
nothing about them (not even the bundle) is known.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.receipts.model import Report, WorkerRow, describe_groups, groups, policy_name, show
from orchestrator.receipts.schema import SCHEMA_VERSION, STACK_KEYS, Doc


@dataclass(frozen=True)
class Difference:
    """One stack item that differs between two runs."""

    item: str
    a: str
    b: str

    def to_dict(self) -> Doc:
        return {"item": self.item, "a": self.a, "b": self.b}


@dataclass(frozen=True)
class Figure:
    """One number (or short text) of each run, for side-by-side reading."""

    name: str
    a: object
    b: object
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

    def to_dict(self) -> Doc:
        return {
            "schema_version": SCHEMA_VERSION,
            "a": _side(self.a),
            "b": _side(self.b),
            "refused": self.refused,
            "cross_lane": self.cross_lane,
            "stack_differences": [d.to_dict() for d in self.differences],
            "figures": [
                {
                    "name": f.name,
                    "unit": f.unit,
                    "detail": f.detail,
                    "a": {**_labelled(self.a), "value": f.a},
                    "b": {**_labelled(self.b), "value": f.b},
                }
                for f in self.figures
            ],
        }


def _side(r: Report) -> Doc:
    return {"run_id": r.run_id, "lane": r.lane, "bundle": r.bundle, "bundle_ids": list(r.bundle_ids), "label": r.label}


def _labelled(r: Report) -> Doc:
    return {"label": r.label, "lane": r.lane, "bundle": r.bundle, "bundle_ids": list(r.bundle_ids), "run_id": r.run_id}


def compare(a: Report, b: Report, *, allow_cross_lane: bool = False) -> Comparison:
    """Two runs side by side. Refused across lanes or bundles unless `allow_cross_lane`."""
    differences = tuple(stack_differences(a, b))
    unknown = [r.run_id for r in (a, b) if not any(row.source for row in r.rows)]
    if unknown:
        # Without receipts neither the bundle nor any figure is known: no comparison, and no
        # "different bundles" verdict made up from a missing one.
        return Comparison(a, b, refused=_unknown_text(unknown), cross_lane=False, differences=differences, figures=())
    cross = a.lane != b.lane or a.bundle != b.bundle or set(a.bundle_ids) != set(b.bundle_ids)
    if cross and not allow_cross_lane:
        return Comparison(a, b, refused=_cross_text(a, b), cross_lane=True, differences=differences, figures=())
    return Comparison(a, b, refused=None, cross_lane=cross, differences=differences, figures=_side_by_side(a, b))


def _unknown_text(unknown: Sequence[str]) -> str:
    many = len(unknown) > 1
    return (
        f"run{'s' if many else ''} {' and '.join(unknown)} ha{'ve' if many else 's'} "
        f"no receipts here, so {'their' if many else 'its'} bundle is unknown: gather "
        f"first ({'; '.join(f'orch gather {r}' for r in unknown)})"
    )


def _cross_text(a: Report, b: Report) -> str:
    what = []
    if a.lane != b.lane:
        what.append(f"lanes {a.lane} vs {b.lane}")
    if a.bundle != b.bundle or set(a.bundle_ids) != set(b.bundle_ids):
        what.append(f"bundles {a.bundle_label} vs {b.bundle_label}")
    return (
        f"runs {a.run_id} and {b.run_id} come from different {' and '.join(w.split()[0] for w in what)} "
        f"({'; '.join(what)}): results from different lanes or bundles are not comparable by default"
    )


def _side_by_side(a: Report, b: Report) -> tuple[Figure, ...]:
    fa, fb = figures(a), figures(b)
    out = []
    for name in dict.fromkeys([*fa, *fb]):
        va, unit, detail = fa.get(name, (None, "", ""))
        vb, unit_b, detail_b = fb.get(name, (None, unit, detail))
        both = detail if detail == detail_b else f"A: {detail}; B: {detail_b}"
        out.append(Figure(name=name, a=va, b=vb, unit=unit or unit_b, detail=both))
    return tuple(out)


def stack_differences(a: Report, b: Report) -> list[Difference]:
    """Lane, bundle and every stack item whose value differs between the two runs."""
    items: list[tuple[str, str, str]] = [
        ("lane", a.lane, b.lane),
        ("bundle", a.bundle_label, b.bundle_label),
        ("platform (intended)", show(a.platform), show(b.platform)),
    ]
    rows = (*a.rows, *b.rows)

    def both(item: str, get: Callable[[WorkerRow], object]) -> None:
        items.append((item, _common(a.rows, get), _common(b.rows, get)))

    both("interpreter", WorkerRow.interpreter_text)
    installed = sorted({k for r in rows for k in r.versions} - set(STACK_KEYS))
    for k in (*STACK_KEYS, *installed):
        both(f"{k} (installed)", _getter(lambda r: r.versions, k))
    for k in sorted({k for r in rows for k in r.versions_reported}):
        both(f"{k} (reported)", _getter(lambda r: r.versions_reported, k))
    both("device", WorkerRow.device_text)
    for c in sorted({c for r in rows for c in r.backends}):
        both(f"backend {c}", _getter(lambda r: r.backends, c))
    both("cache policy", lambda r: _cache_text(r.cache))
    return [Difference(i, x, y) for i, x, y in items if x != y]


def _getter(table: Callable[[WorkerRow], Mapping[str, object]], key: str) -> Callable[[WorkerRow], object]:
    """A row's value of `key` in one of its tables (binds `key` now, not at call time)."""
    return lambda r: table(r).get(key)


def _common(rows: Sequence[WorkerRow], get: Callable[[WorkerRow], object]) -> str:
    vals = {r.worker: get(r) for r in rows if r.has_receipt}
    if not vals:
        return "-"
    found = groups(vals)
    if len(found) == 1:
        return show(next(iter(found.values()))[0])
    return "mixed: " + describe_groups(vals)


def _cache_text(cache: Mapping[str, Any] | None) -> str | None:
    if not cache:
        return None
    return f"{policy_name(cache)}" + (f" ({cache['role']})" if cache.get("role") else "")


def _mean(values: Iterable[object]) -> float | None:
    vals = [v for v in values if isinstance(v, (int, float))]
    return statistics.fmean(vals) if vals else None


def figures(r: Report) -> dict[str, tuple[object, str, str]]:
    """name -> (value, unit, detail) of one run."""
    have = [x for x in r.rows if x.has_receipt]
    ok = sum(1 for x in have if x.exit and x.exit.get("code") == 0 and not x.exit.get("signal"))
    steps = [x.step_s for x in have if x.step_s is not None]
    out: dict[str, tuple[object, str, str]] = {
        "processes": (len(r.rows), "", ""),
        "exited 0": (f"{ok}/{len(r.rows)}", "", ""),
        "device": (_common(r.rows, WorkerRow.device_text), "", "per process"),
        "backend": (_common(r.rows, WorkerRow.backend_text), "", ""),
        "compile time": (_mean(x.compile_s for x in have), "s", "mean over processes"),
        "step time": (statistics.median(steps) if steps else None, "s", "median of per-process medians"),
        "user code": (
            max((x.user_code_s for x in have if x.user_code_s is not None), default=None),
            "s",
            "longest process",
        ),
        "start skew": (r.start_skew * 1000 if r.start_skew is not None else None, "ms", "release to start"),
    }
    for m in sorted({m for x in have for m in x.metrics}):
        out[f"metric {m}"] = _metric_figure([x.metrics[m] for x in have if m in x.metrics])
    return out


def _metric_figure(entries: Sequence[Mapping[str, Any]]) -> tuple[object, str, str]:
    scope = {e.get("scope") for e in entries}
    how = {e.get("reduced_by") or "not reduced" for e in entries}
    return (
        _mean(e.get("value") for e in entries),
        entries[0].get("unit") or "",
        f"{'/'.join(sorted(s for s in scope if s))}, {'/'.join(sorted(how))}; "
        f"mean of {len(entries)} process{'es' if len(entries) != 1 else ''}",
    )


def format_value(value: object, unit: str = "") -> str:
    """A figure's value with its unit (`-` when the run has none)."""
    if value is None:
        return "-"
    if isinstance(value, float):
        text = f"{value:.4g}" if unit != "ms" else f"{value:.0f}"
    else:
        text = str(value)
    return f"{text} {unit}".rstrip() if unit else text
