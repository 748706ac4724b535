"""Report: one view of a run from its receipts, and the flags that say what went wrong.

Flags: a missing or invalid receipt, stack (and interpreter) differences across workers, a global
metric that was not reduced (or reduced over too few processes, or differs), CPU
fallback on a TPU lane, devices or backends that differ, start-up steps out of
order, processes that failed or never recorded an exit.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from itertools import pairwise
from typing import Any

from orchestrator.names import compact_names
from orchestrator.receipts.copies import RunReceipts, RunRecordFacts, load_run
from orchestrator.receipts.model import Flag, Report, WorkerRow, describe_groups, groups, workers_text
from orchestrator.receipts.schema import Doc, prune, startup_rank, validate

REL_TOL = 1e-6  # global metric values closer than this are the same number


def report(record: RunRecordFacts) -> Report:
    """The report of a recorded run (reads the controller's copies)."""
    return build_report(load_run(record))


def build_report(run: RunReceipts) -> Report:
    """The report of a run from its receipts (pure).

    A receipt comes from a worker: it is checked against the schema (a mismatch is
    flagged) and only what fits the schema is read (`schema.prune`).
    """
    rows = tuple(
        worker_row(w, run.process_ids.get(w, i), run.receipts.get(w), run.sources.get(w))
        for i, w in enumerate(run.workers)
    )
    run = replace(run, receipts={w: prune(doc) for w, doc in run.receipts.items()})
    have = [r for r in rows if r.has_receipt]
    checks = (
        _missing_receipts(run, rows),
        _invalid_receipts(have),
        _stack_differences(have),
        _interpreter_flags(have),
        _slice_differences(have),
        _metric_flags(run, have, len(rows)),
        _device_flags(run, have),
        _backend_flags(have),
        _startup_order(have),
        _exit_flags(have),
    )
    return Report(
        run_id=run.run_id,
        lane=run.lane,
        bundle=run.bundle,
        bundle_ids=tuple(sorted({r.bundle_id for r in have if r.bundle_id})),
        platform=run.platform,
        target=run.target,
        state=run.state,
        start_skew=run.start_skew,
        rows=rows,
        flags=tuple(flag for check in checks for flag in check),
    )


def worker_row(name: str, pid: int, doc: Doc | None, source: str | None) -> WorkerRow:
    """One worker's row from its receipt (an empty row when there is none)."""
    if doc is None:
        return _empty_row(name, pid)
    problems = tuple(validate(doc))
    doc = prune(doc) or {}
    training = doc.get("training") or {}
    timings = training.get("timings") or {}
    compile_s, compile_source = _compile_time(doc, timings)
    step = timings.get("step") or {}
    samples = [s for s in step.get("samples") or [] if isinstance(s, (int, float))]
    return WorkerRow(
        worker=name,
        process_id=pid,
        source=source,
        problems=problems,
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
        user_code_s=_user_code_time(doc),
        exit=doc.get("exit"),
        metrics=training.get("metrics") or {},
        startup=tuple(s.get("name", "?") for s in doc.get("steps") or []),
        cache=doc.get("cache"),
        slice=doc.get("slice"),
        interpreter=doc.get("interpreter"),
    )


def _empty_row(name: str, pid: int) -> WorkerRow:
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


def _compile_time(doc: Doc, timings: Doc) -> tuple[float | None, str | None]:
    """Compile seconds and where they come from: the launcher's cache evidence first."""
    evidence = (doc.get("cache") or {}).get("evidence") or {}
    times = [(fe, (ev or {}).get("compile_time_sec")) for fe, ev in evidence.items()]
    observed: list[tuple[str, float]] = [(fe, v) for fe, v in times if isinstance(v, (int, float))]
    if observed:
        return float(sum(v for _, v in observed)), "cache evidence (" + ", ".join(fe for fe, _ in observed) + ")"
    if "compile" in timings:
        return float(timings["compile"]["total"]), "training code"
    return None, None


def _user_code_time(doc: Doc) -> float | None:
    """Seconds in user code: its start-up step, else from the start to the exit."""
    user = next((s for s in doc.get("steps") or [] if s.get("name") == "user-code"), None)
    seconds: float | None = None
    if user:
        seconds = user["ended"] - user["started"]
    elif doc.get("started_at") and (doc.get("exit") or {}).get("ended_at"):
        seconds = doc["exit"]["ended_at"] - doc["started_at"]
    return seconds


# -- the checks: each yields the flags of one concern ------------------------------


def _slice_differences(have: Sequence[WorkerRow]) -> Iterator[Flag]:
    """On a multislice run, a slice whose own workers ran different bundles is named as that slice."""
    by_slice: dict[str, list[WorkerRow]] = {}
    for r in have:
        if r.slice:
            by_slice.setdefault(r.slice, []).append(r)
    if len(by_slice) < 2:
        return
    for name, rows in by_slice.items():
        bundles = {r.worker: f"{r.bundle}@{(r.bundle_id or '?')[:12]}" for r in rows}
        if len(groups(bundles)) > 1:
            yield Flag(
                "slice-differs",
                f"slice {name}: its workers ran different bundles: " + describe_groups(bundles),
                tuple(bundles),
            )


def _missing_receipts(run: RunReceipts, rows: Sequence[WorkerRow]) -> Iterator[Flag]:
    missing = [r.worker for r in rows if not r.has_receipt]
    if missing:
        have = len(rows) - len(missing)
        yield Flag(
            "missing-receipt",
            f"no receipt from {', '.join(missing)}: the report covers "
            f"{have} of {len(rows)} processes (`orch gather {run.run_id}` copies them once "
            "the workers answer)",
            tuple(missing),
        )


def _invalid_receipts(have: Sequence[WorkerRow]) -> Iterator[Flag]:
    for r in have:
        if r.problems:
            yield Flag(
                "invalid-receipt",
                f"{r.worker}: the receipt does not match the schema: "
                + "; ".join(r.problems[:3])
                + (" ..." if len(r.problems) > 3 else ""),
                (r.worker,),
            )


def _stack_differences(have: Sequence[WorkerRow]) -> Iterator[Flag]:
    bundles = {r.worker: (r.bundle, r.bundle_id) for r in have}
    if len(groups(bundles)) > 1:
        yield Flag(
            "bundle-differs",
            "workers ran different bundles: "
            + describe_groups({w: f"{b}@{(i or '?')[:12]}" for w, (b, i) in bundles.items()}),
            tuple(bundles),
        )
    tables: tuple[tuple[str, Mapping[str, Mapping[str, str | None]]], ...] = (
        ("installed", {r.worker: r.versions for r in have}),
        ("reported by the runtime", {r.worker: r.versions_reported for r in have}),
    )
    for what, table in tables:
        for k in sorted({k for versions in table.values() for k in versions}):
            vals = {w: versions.get(k) for w, versions in table.items()}
            if len(groups(vals)) > 1:
                yield Flag(
                    "versions-differ", f"{k} ({what}) differs across workers: " + describe_groups(vals), tuple(vals)
                )


def _interpreter_flags(have: Sequence[WorkerRow]) -> Iterator[Flag]:
    """Workers that ran on different Pythons, and a Python that is not the one its environment names."""
    pythons = {r.worker: r.interpreter_text() for r in have if r.interpreter}
    if len(groups(pythons)) > 1:
        yield Flag(
            "interpreter-differs", "workers ran different interpreters: " + describe_groups(pythons), tuple(pythons)
        )
    for r in have:
        if r.interpreter and r.interpreter.get("mismatch"):
            yield Flag("interpreter-mismatch", f"{r.worker}: {r.interpreter['mismatch']}", (r.worker,))


def _metric_flags(run: RunReceipts, have: Sequence[WorkerRow], total: int) -> Iterator[Flag]:
    for m in sorted({m for r in have for m in r.metrics}):
        entries = {r.worker: r.metrics[m] for r in have if m in r.metrics}
        processes = {w: (run.receipts[w] or {}).get("num_processes", total) for w in entries}
        yield from _unreduced(m, entries, processes, len(have))
        yield from _partial_reduction(m, entries, processes, total)
        yield from _global_differs(m, entries)


def _unreduced(
    m: str, entries: Mapping[str, Mapping[str, Any]], processes: Mapping[str, int], have: int
) -> Iterator[Flag]:
    # A one-process run's numbers are global by construction; otherwise "global" needs a collective.
    unreduced = [
        w for w, e in entries.items() if e.get("scope") == "global" and not e.get("reduced_by") and processes[w] > 1
    ]
    if unreduced:
        yield Flag(
            "unreduced-metric",
            f"metric '{m}' is recorded as global but was not reduced "
            f"across processes on {workers_text(unreduced, have)}: it may be one "
            "process's local number",
            tuple(unreduced),
        )


def _partial_reduction(
    m: str, entries: Mapping[str, Mapping[str, Any]], processes: Mapping[str, int], total: int
) -> Iterator[Flag]:
    reduced = {w: e for w, e in entries.items() if e.get("scope") == "global" and e.get("reduced_by")}
    partial = [w for w, e in reduced.items() if isinstance(e.get("over"), int) and e["over"] < processes[w]]
    if partial:
        over = sorted({reduced[w]["over"] for w in partial})
        yield Flag(
            "partial-reduction",
            f"metric '{m}' was reduced over {', '.join(map(str, over))} of {total} processes on {', '.join(partial)}",
            tuple(partial),
        )


def _global_differs(m: str, entries: Mapping[str, Mapping[str, Any]]) -> Iterator[Flag]:
    values: dict[str, float] = {
        w: e["value"]
        for w, e in entries.items()
        if e.get("scope") == "global" and isinstance(e.get("value"), (int, float))
    }
    steps = {e.get("step") for w, e in entries.items() if w in values}
    if len(values) > 1 and len(steps) == 1 and not _same_number(list(values.values())):
        yield Flag(
            "global-metric-differs",
            f"metric '{m}' is global but its value differs across workers: {describe_groups(values)}",
            tuple(values),
        )


def _same_number(values: Sequence[float]) -> bool:
    return all(math.isclose(v, values[0], rel_tol=REL_TOL, abs_tol=1e-12) for v in values)


def _device_flags(run: RunReceipts, have: Sequence[WorkerRow]) -> Iterator[Flag]:
    if (run.platform or "").lower() == "tpu":
        fallback = [r.worker for r in have if r.device and (r.device.get("kind") or "").lower() == "cpu"]
        if fallback:
            yield Flag(
                "cpu-fallback",
                f"lane {run.lane} intends a TPU, but the device that answered "
                f"was CPU on {workers_text(fallback, len(have))} (the runtime fell back)",
                tuple(fallback),
            )
    kinds = {r.worker: r.device.get("kind") for r in have if r.device}
    if len(groups(kinds)) > 1:
        yield Flag(
            "devices-differ", "the device that answered differs across workers: " + describe_groups(kinds), tuple(kinds)
        )


def _backend_flags(have: Sequence[WorkerRow]) -> Iterator[Flag]:
    components = sorted({c for r in have for c in r.backends})
    for c in components:
        vals = {r.worker: r.backends.get(c) for r in have}
        if len(groups(vals)) > 1:
            yield Flag(
                "backends-differ",
                f"backend{'' if c == 'main' else ' for ' + c} differs across workers: {describe_groups(vals)}",
                tuple(vals),
            )
    ran_code = [r for r in have if "user-code" in r.startup or r.exit]
    if ran_code and not components:
        yield Flag(
            "no-backend",
            "the training code recorded no backend (orch_receipt.record_backend): "
            "nothing says which path actually answered",
            level="info",
        )


def _startup_order(have: Sequence[WorkerRow]) -> Iterator[Flag]:
    for r in have:
        ranked = [(s, k) for s in r.startup if (k := startup_rank(s)) is not None]
        if any(later[1] < earlier[1] for earlier, later in pairwise(ranked)):
            yield Flag(
                "startup-order",
                f"{r.worker}: start-up steps ran out of order: " + " -> ".join(s for s, _ in ranked),
                (r.worker,),
            )


def _exit_flags(have: Sequence[WorkerRow]) -> Iterator[Flag]:
    failed = [r for r in have if r.exit and (r.exit.get("signal") or r.exit.get("code") not in (0, None))]
    if failed:
        # one entry per reason, its workers compacted: 256 workers failing alike are one short line
        by_reason: dict[str, list[str]] = {}
        for r in failed:
            by_reason.setdefault(_exit_reason(r), []).append(r.worker)
        yield Flag(
            "failed-process",
            "processes that did not exit 0: "
            + ", ".join(f"{compact_names(workers)} ({reason})" for reason, workers in by_reason.items()),
            tuple(r.worker for r in failed),
        )
    running = [r.worker for r in have if not r.exit]
    if running:
        yield Flag(
            "no-exit",
            f"no exit status in the receipts of {compact_names(running)} (still running, "
            "or lost before anything recorded its end)",
            tuple(running),
        )


def _exit_reason(r: WorkerRow) -> str:
    reason = (r.exit or {}).get("reason")
    return r.exit_text() + (f": {reason}" if reason else "")
