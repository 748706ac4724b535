"""`orch restart-check`: prove, per process, that a warm restart reuses compiled work.

Cache files on disk prove nothing (a cache can write entries it never reads
back); only a warm restart that is measurably faster does. So the check runs
the same launch twice under the same pre-import policy and the same cache
policy:

1. cold: a fresh cache root. The check never touches the lane's real cache:
   it gives both runs a root of their own, `<policy root>/.checks/<check-id>/
   <lane>/<bundle-id>/{jax,torch_xla}` (cache_plan with a scope), with the
   lane's roles, writer and lease, so the cold run starts from nothing and
   the operator's warmed cache is neither read nor cleared;
2. warm: the same command again, reading what the cold run wrote.

Each process's launch record carries its cache evidence (hostside/launch_cache.py:
jax.monitoring events, torch_xla metrics, entries before and after), and the
warm run's log is searched for the lines that explain a failed reuse (e.g.
torch_xla's `Failed to deserialize executable: UNIMPLEMENTED`). The verdict
is per process and frontend, never averaged:

- `reused`: cache hits, and warm/cold compile time <= threshold (default 0.5);
- `written-not-reused`: entries were there to read but were not reused
  (deserialize failures, keys that differ, hits that saved nothing);
- `not-written`: there was nothing to read.

Whether a process is *expected* to reuse follows from how the frontends
work (`expectation`): JAX writes only from process 0, and on CPU its cache
key differs per process, so on a CPU lane only process 0 is expected to
reuse; on TPU every process of a single-writer lane is. The check passes
when every process expected to reuse did. The check's root is removed at the
end unless `keep`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict, Unpack

from orchestrator import cache as cache_mod
from orchestrator import launch, runs
from orchestrator.errors import ConfigError, OrchError
from orchestrator.fleet import Fleet, WorkerRef
from orchestrator.launch.timing import LaunchTiming
from orchestrator.transport import Result, Transport

SCHEMA_VERSION = 1
DEFAULT_THRESHOLD = 0.5
LOG_TAIL = 3000
VERDICTS = ("reused", "written-not-reused", "not-written")
# Log lines that explain a failed reuse (the first few of each go into the verdict).
EVIDENCE_PATTERNS = (
    re.compile(r"Failed to deserialize executable.*"),
    re.compile(r".*UNIMPLEMENTED.*[Dd]eserializ.*"),
    re.compile(r"Error reading persistent compilation cache entry.*"),
    re.compile(r"Error writing persistent compilation cache entry.*"),
)
EVIDENCE_KEEP = 3

ReportFn = Callable[[str], None]
# A launch record's `cache` section, as hostside/launch_cache.py writes it to JSON
# (policy, role, writer, and per frontend its evidence); read defensively with .get.
CacheRecord = Mapping[str, Any]


class LaunchOptions(TypedDict, total=False):
    """The options of `launch.execute` a restart check passes through to both launches."""

    reclaim: bool
    detach: bool
    timing: LaunchTiming


def _quiet(_text: str) -> None:
    pass


# ---------------------------------------------------------------------------
# Judging (pure)


@dataclass(frozen=True)
class Expectation:
    """Whether a process should reuse the cache on a warm restart, and why."""

    expected: bool
    why: str


def expectation(
    frontend: str, *, mode: str, role: str, process_id: int, num_processes: int, platform: str
) -> Expectation:
    """Whether this process should reuse the cache on a warm restart, and why (how the frontend works)."""
    if mode == "off" or role == "off":
        return Expectation(False, "the lane's cache policy is off")
    if frontend == "jax":
        if process_id == 0:
            return Expectation(True, "process 0 writes the JAX cache and reads it back")
        if mode == "per-host":
            return Expectation(
                False, "JAX writes its persistent cache only from process 0, so this worker's private cache stays empty"
            )
        if platform == "cpu":
            return Expectation(
                False,
                "on CPU the JAX cache key differs per process (it includes the process's "
                "devices), so this process cannot use process 0's entries",
            )
        return Expectation(True, "reads the entries process 0 wrote to the shared cache (same keys on TPU)")
    if role == "reader":
        return Expectation(True, "reads the entries the writer wrote to the shared cache")
    return Expectation(True, "writes its own entries and reads them back")


@dataclass(frozen=True)
class Verdict:
    """One process's verdict for one frontend, with the numbers behind it."""

    worker: str
    process_id: int
    frontend: str
    role: str
    verdict: str
    expected: bool
    expectation: str
    cause: str
    cold_compile_sec: float | None
    warm_compile_sec: float | None
    ratio: float | None
    hits: int
    misses: int
    compiles: tuple[int, int]  # (cold, warm)
    entries_written: int | None  # by this process in the cold run (writers only)
    entries_at_warm_start: int
    deserialize_failures: int
    saved_sec: float | None
    evidence: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """Reused, or was never expected to."""
        return self.verdict == "reused" or not self.expected

    def to_dict(self) -> dict[str, object]:
        """The verdict as the check's JSON result shows it."""
        return {
            "worker": self.worker,
            "process_id": self.process_id,
            "frontend": self.frontend,
            "role": self.role,
            "verdict": self.verdict,
            "expected": self.expected,
            "expectation": self.expectation,
            "cause": self.cause,
            "passed": self.passed,
            "cold_compile_sec": self.cold_compile_sec,
            "warm_compile_sec": self.warm_compile_sec,
            "ratio": self.ratio,
            "hits": self.hits,
            "misses": self.misses,
            "compiles": list(self.compiles),
            "entries_written": self.entries_written,
            "entries_at_warm_start": self.entries_at_warm_start,
            "deserialize_failures": self.deserialize_failures,
            "saved_sec": self.saved_sec,
            "evidence": list(self.evidence),
        }


def evidence_lines(log: str) -> tuple[str, ...]:
    """The log lines that explain a failed reuse (a few of each kind, deduplicated)."""
    out: list[str] = []
    counts: dict[int, int] = {}
    for line in log.splitlines():
        for i, pattern in enumerate(EVIDENCE_PATTERNS):
            m = pattern.search(line)
            if m:
                text = m.group(0).strip()[:300]
                if text not in out and counts.get(i, 0) < EVIDENCE_KEEP:
                    out.append(text)
                    counts[i] = counts.get(i, 0) + 1
                break
    return tuple(out)


def judge(
    frontend: str,
    cold: CacheRecord | None,
    warm: CacheRecord | None,
    *,
    worker: str,
    process_id: int,
    num_processes: int,
    platform: str,
    threshold: float = DEFAULT_THRESHOLD,
    log_lines: Sequence[str] = (),
) -> Verdict:
    """The verdict for one process and frontend from its cold and warm records' `cache` sections (pure)."""
    cold, warm = cold or {}, warm or {}
    mode = warm.get("policy") or cold.get("policy") or "off"
    role = warm.get("role") or cold.get("role") or "off"
    exp = expectation(
        frontend, mode=mode, role=role, process_id=process_id, num_processes=num_processes, platform=platform
    )
    ce = (cold.get("evidence") or {}).get(frontend) or {}
    we = (warm.get("evidence") or {}).get(frontend) or {}
    cold_t, warm_t = ce.get("compile_time_sec"), we.get("compile_time_sec")
    ratio = round(warm_t / cold_t, 3) if cold_t and warm_t is not None else None
    hits, misses = int(we.get("cache_hits") or 0), int(we.get("cache_misses") or 0)
    available = int(we.get("entries_before") or 0)
    writes = role in ("writer", "private")
    written = (int(ce.get("entries_after") or 0) - int(ce.get("entries_before") or 0)) if writes and ce else None
    fails = int(we.get("deserialize_failures") or 0)
    expected, why = exp.expected, exp.why

    def verdict(v: str, cause: str, *, expected_now: bool = expected, why_now: str = why) -> Verdict:
        return Verdict(
            worker=worker,
            process_id=process_id,
            frontend=frontend,
            role=role,
            cold_compile_sec=cold_t,
            warm_compile_sec=warm_t,
            ratio=ratio,
            hits=hits,
            misses=misses,
            compiles=(int(ce.get("compiles") or 0), int(we.get("compiles") or 0)),
            entries_written=written,
            entries_at_warm_start=available,
            deserialize_failures=fails,
            saved_sec=we.get("compile_time_saved_sec"),
            evidence=tuple(log_lines),
            verdict=v,
            expected=expected_now,
            expectation=why_now,
            cause=cause,
        )

    if not cold or not warm:
        missing = "cold" if not cold else "warm"
        return verdict("not-written", f"the {missing} run's record has no cache evidence for this process")
    if role == "off":
        return verdict("not-written", "the lane's cache policy is off: nothing is cached")
    if not ce.get("compiles"):
        return verdict(
            "not-written",
            f"the cold run compiled nothing with {frontend}",
            expected_now=False,
            why_now=f"nothing to reuse: no {frontend} compilation in the cold run",
        )
    if hits and ratio is not None and ratio <= threshold:
        return verdict(
            "reused",
            f"{hits} cache hits; warm compile {warm_t:.2f}s vs cold {cold_t:.2f}s (ratio {ratio:.2f} <= {threshold:g})",
        )
    if hits:
        return verdict(
            "written-not-reused",
            f"{hits} cache hits, but warm compile {warm_t:.2f}s vs cold "
            f"{cold_t:.2f}s (ratio {ratio} > {threshold:g}): no time saved",
        )
    configured = (warm.get("configured") or {}).get(frontend, True)
    if available:
        if fails:
            cause = (
                f"{available} entries on disk, {fails} deserialize failures: entries are written but "
                "cannot be loaded back"
            )
        elif frontend == "jax" and process_id != 0 and platform == "cpu":
            cause = (
                f"{available} entries on disk, all process 0's; {misses} lookups missed: on CPU the JAX "
                "cache key differs per process"
            )
        elif not configured:
            cause = f"{available} entries on disk, but the warm run did not configure the cache (see its caveats)"
        else:
            cause = (
                f"{available} entries on disk, {misses} lookups missed: the cache keys differ between the "
                "runs (program, flags, topology or policy changed?)"
            )
        return verdict("written-not-reused", cause)
    if frontend == "jax" and process_id != 0 and num_processes > 1 and writes:
        cause = "JAX writes its persistent cache only from process 0: this private cache stayed empty"
    elif role == "reader":
        cause = f"the writer ({warm.get('writer') or '?'}) left no {frontend} entries to read"
    elif not configured:
        cause = "the cache was not configured (see the record's caveats)"
    elif ce.get("cache_used") is False and frontend == "jax":
        cause = "JAX did not use its persistent cache on this backend"
    else:
        cause = (
            f"the cold run wrote no {frontend} entries (entries before {ce.get('entries_before', 0)}, "
            f"after {ce.get('entries_after', 0)})"
        )
    return verdict("not-written", cause)


# ---------------------------------------------------------------------------
# The check


@dataclass
class RunSummary:
    """One of the two launches."""

    kind: str  # cold | warm
    run_id: str
    status: str
    message: str
    elapsed: float
    record_dir: str

    def to_dict(self) -> dict[str, object]:
        """The launch as the check's JSON result shows it."""
        return dict(self.__dict__)


@dataclass
class RestartCheck:
    """What the check found, per process."""

    check_id: str
    lane: str
    platform: str
    policy: str | None
    mode: str
    threshold: float
    num_processes: int
    roots: dict[str, str]  # worker -> the check's cache directory (bundle id placeholder)
    runs: list[RunSummary] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    problem: str | None = None
    cleaned: dict[str, object] | None = None  # what removing the check's cache root did

    @property
    def expected(self) -> list[Verdict]:
        """The verdicts of processes expected to reuse."""
        return [v for v in self.verdicts if v.expected]

    @property
    def ok(self) -> bool:
        """Every process expected to reuse did (and at least one was expected to)."""
        return self.problem is None and bool(self.expected) and all(v.passed for v in self.verdicts)

    @property
    def exit_code(self) -> int:
        """The exit code of `orch restart-check`."""
        return 0 if self.ok else 1

    @property
    def message(self) -> str:
        """One sentence: the problem, what failed, or what was proven."""
        if self.problem:
            return self.problem
        if not self.expected:
            return "no process was expected to reuse the cache (nothing compiled?): nothing proven"
        failed = [v for v in self.verdicts if not v.passed]
        if failed:
            return "not reused where expected: " + "; ".join(
                f"process {v.process_id} ({v.worker}) {v.frontend}: {v.verdict}" for v in failed
            )
        procs = sorted({v.process_id for v in self.expected})
        ratios = [v.ratio for v in self.expected if v.ratio is not None]
        return (
            f"reused by every process expected to reuse ({len(procs)} of {self.num_processes}: process"
            f"{'es' if len(procs) != 1 else ''} {', '.join(map(str, procs))}; warm/cold compile ratio "
            f"{'max ' if len(ratios) > 1 else ''}{max(ratios):.2f} <= {self.threshold:g})"
        )

    def to_dict(self) -> dict[str, object]:
        """The check's JSON result."""
        return {
            "schema_version": SCHEMA_VERSION,
            "check_id": self.check_id,
            "lane": self.lane,
            "platform": self.platform,
            "policy": self.policy,
            "mode": self.mode,
            "threshold": self.threshold,
            "num_processes": self.num_processes,
            "ok": self.ok,
            "message": self.message,
            "roots": self.roots,
            "runs": [r.to_dict() for r in self.runs],
            "verdicts": [v.to_dict() for v in self.verdicts],
            "problem": self.problem,
            "cleaned": self.cleaned,
        }


def plan_runs(
    fleet: Fleet,
    lane: str,
    argv: Sequence[str],
    *,
    check_id: str,
    workdir: str | None = None,
    extra_env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> tuple[launch.LaunchPlan, launch.LaunchPlan]:
    """The cold and the warm launch: the same command and policy, both on the check's own cache root (pure)."""
    policy = fleet.cache_policy(lane)
    if policy.mode == "off":
        raise ConfigError(
            f"lane '{lane}' has no compilation cache (its cache policy is off): nothing to check",
            hint="give the lane a cache policy (per-host or single-writer) in fleet.yaml",
        )
    cache = cache_mod.launch_cache(fleet, lane, scope=check_id)
    plans = []
    for kind in ("cold", "warm"):
        plan = launch.plan_launch(
            fleet,
            lane,
            argv,
            name=f"{check_id}-{kind}",
            run_id=f"{check_id}-{kind}",
            workdir=workdir,
            timeout=timeout,
            extra_env=extra_env,
        )
        plans.append(replace(plan, cache=cache))
    return plans[0], plans[1]


def new_check_id(now: float | None = None) -> str:
    """A fresh check id, shaped like a run id."""
    return launch.new_run_id("restart-check", now)


def _records(record: runs.RunRecord) -> dict[str, dict[str, Any]]:
    """worker -> its launch record (JSON), {} where it is missing or unreadable."""
    out = {}
    for path in sorted((record.dir / "workers").glob("*.json")):
        try:
            out[path.stem] = json.loads(path.read_text()).get("record") or {}
        except (OSError, ValueError):
            out[path.stem] = {}
    return out


def _logs(plan: launch.LaunchPlan, transport: Transport) -> dict[str, str]:
    from orchestrator.remote import run_hostside

    def one(worker: WorkerRef) -> Result:
        return run_hostside(
            transport,
            worker,
            "launch_ctl",
            ["log", plan.process(worker.name).run_dir, "--tail", str(LOG_TAIL)],
            timeout=60,
        )

    return {name: (res.stdout if res.ok else "") for name, res in transport.map(one, plan.workers).items()}


def run(
    fleet: Fleet,
    lane: str,
    argv: Sequence[str],
    transport: Transport,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    workdir: str | None = None,
    extra_env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    keep: bool = False,
    check_id: str | None = None,
    report: ReportFn = _quiet,
    on_output: launch.OutputFn | None = None,
    **launch_options: Unpack[LaunchOptions],
) -> RestartCheck:
    """Run the cold and the warm launch and judge every process (see the module docstring)."""
    if not 0 < threshold <= 1:
        raise OrchError(f"--threshold must be in (0, 1], got {threshold:g}")
    check_id = check_id or new_check_id()
    cold_plan, warm_plan = plan_runs(
        fleet, lane, argv, check_id=check_id, workdir=workdir, extra_env=extra_env, timeout=timeout
    )
    policy, mode, roots = _cache_section(cold_plan.cache)
    check = RestartCheck(
        check_id=check_id,
        lane=lane,
        platform=cold_plan.platform,
        policy=policy,
        mode=mode,
        threshold=threshold,
        num_processes=cold_plan.num_processes,
        roots=roots,
    )
    frontends = [f for f in cold_plan.frontends if f in cache_mod.FRONTENDS]
    if not frontends:
        check.problem = (
            f"bundle {cold_plan.bundle} has no frontend with a persistent compilation cache "
            "(jax or torch_xla): nothing to check"
        )
        return check
    records: dict[str, dict[str, dict[str, Any]]] = {}
    try:
        for kind, plan in (("cold", cold_plan), ("warm", warm_plan)):
            report(
                f"{kind} run {plan.run_id}"
                + (" (fresh cache root)" if kind == "cold" else " (same command, reading the cold run's cache)")
            )
            record = runs.RunRecord.create(plan, fleet_path=fleet.path)
            t0 = time.monotonic()
            outcome = launch.execute(
                plan, transport, on_output=on_output, report=report, record=record, **launch_options
            )
            check.runs.append(
                RunSummary(
                    kind=kind,
                    run_id=plan.run_id,
                    status=outcome.status,
                    message=outcome.message,
                    elapsed=round(time.monotonic() - t0, 2),
                    record_dir=str(record.dir),
                )
            )
            if not outcome.ok:
                check.problem = f"the {kind} run {plan.run_id} {outcome.status}: {outcome.message}"
                return check
            records[kind] = _records(record)
        logs = _logs(warm_plan, transport)
        for p in warm_plan.processes:
            cold = records["cold"].get(p.worker, {}).get("cache")
            warm = records["warm"].get(p.worker, {}).get("cache")
            lines = evidence_lines(logs.get(p.worker, ""))
            for frontend in frontends:
                check.verdicts.append(
                    judge(
                        frontend,
                        cold,
                        warm,
                        worker=p.worker,
                        process_id=p.process_id,
                        num_processes=warm_plan.num_processes,
                        platform=warm_plan.platform,
                        threshold=threshold,
                        log_lines=lines,
                    )
                )
        return check
    finally:
        if not keep:
            cleared = cache_mod.clear(fleet, lane, transport, scope=check_id)
            check.cleaned = cleared.to_dict()
            if not cleared.ok:
                report(f"warning: could not remove the check's cache root: {cleared.errors or cleared.refused}")


def _cache_section(cache: Mapping[str, object]) -> tuple[str | None, str, dict[str, str]]:
    """(policy name, mode, worker -> the process's cache directory) of a launch plan's `cache` section."""
    name, mode, procs = cache["name"], cache["mode"], cache["processes"]
    if not (name is None or isinstance(name, str)) or not isinstance(mode, str) or not isinstance(procs, Mapping):
        raise TypeError(f"not the cache section of a launch plan: {cache!r}")
    return name, mode, {str(w): str(p["base"]) for w, p in procs.items()}


def render(check: RestartCheck) -> str:
    """The check as a table, one row per process and frontend."""
    lines = [
        f"restart-check {check.check_id}: lane {check.lane} ({check.platform}), cache policy "
        f"{check.policy} ({check.mode}), {check.num_processes} process"
        f"{'es' if check.num_processes != 1 else ''}, threshold {check.threshold:g}"
    ]
    for r in check.runs:
        lines.append(f"  {r.kind:<5} run {r.run_id}: {r.status} in {r.elapsed:.1f}s")
    if check.verdicts:
        lines.append("")
        header = ("proc", "worker", "frontend", "role", "verdict", "expected", "cold s", "warm s", "ratio", "hits")
        rows = [header]
        for v in check.verdicts:
            rows.append(
                (
                    str(v.process_id),
                    v.worker,
                    v.frontend,
                    v.role,
                    v.verdict,
                    "yes" if v.expected else "no",
                    _num(v.cold_compile_sec),
                    _num(v.warm_compile_sec),
                    _num(v.ratio),
                    str(v.hits),
                )
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        for row in rows:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        lines.append("")
        for v in check.verdicts:
            lines.append(f"  process {v.process_id} {v.frontend}: {v.cause}")
            if not v.expected or v.verdict != "reused":
                lines.append(f"    expected to reuse: {'yes' if v.expected else 'no'} ({v.expectation})")
            for e in v.evidence[:4]:
                lines.append(f"    log: {e}")
    lines.append("")
    lines.append(("PASSED: " if check.ok else "FAILED: ") + check.message)
    return "\n".join(lines) + "\n"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"
