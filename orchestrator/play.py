"""Playbooks: a validation ladder of orch verbs, run in order, stopping at the first failing rung.

A playbook is YAML:

    name: validation-ladder
    lane: cpu                       # default lane of every step
    steps:
      - probe: {shallow: true}
      - deploy: {}
      - name: smoke                 # optional step name (default: the verb)
        launch: {workdir: ../examples, argv: [jax_spmd.py, --steps, "3"]}
      - gather: {run: smoke}        # `run` names an earlier step that produced a run
      - report: {run: smoke, html: report.html}

Each step is one orch verb with the options of its command (`orch VERB --help`):
`true` is a flag, a list repeats an option, `argv` is what follows `--`. A step
runs as its own `orch` process with `--json` where the verb has it, so the
rung's verdict, owning layer and remedy come from the verb's own result. The
ladder record (rungs, durations, verdicts; for a failure its layer and remedy)
is written under the runs directory.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostside.files import write_atomic
from orchestrator.errors import ConfigError
from orchestrator.yamlsrc import Located, did_you_mean, load

STEP_KEYS = {"name", "lane"}
RUN_PRODUCERS = {"launch", "restart-check"}
PATH_OPTIONS = {"workdir"}  # relative to the playbook file
RUN_PATH_OPTIONS = {"html"}  # relative to the step's run directory on the controller
# Verbs whose human view is the point of the rung: shown, not parsed.
SHOWN = {"report", "compare", "bundle status", "cache status"}

# A verb's `--json` result as json.loads returns it; its shape is the verb's own
# (probe rows, a launch's diagnosis, deploy's workers...), read defensively with .get.
JSONDoc = dict[str, Any]


@dataclass(frozen=True)
class CommandShape:
    """What a verb accepts: option names (as in YAML), and its positional arguments."""

    options: dict[str, str]  # yaml key -> --flag
    flags: frozenset[str]  # keys that are on/off flags
    multiple: frozenset[str]  # keys that may repeat
    positionals: tuple[str, ...]  # e.g. ("run",), ("argv",), ("run_a", "run_b")
    has_json: bool
    has_lane: bool


@dataclass(frozen=True)
class Step:
    """One rung of a playbook: a verb with its options, and the lane it runs on."""

    index: int
    name: str
    verb: str
    lane: str | None
    options: dict[str, object]  # the verb's options as the playbook gives them
    line: int


@dataclass(frozen=True)
class Playbook:
    """A validated playbook file."""

    path: Path
    name: str
    lane: str | None
    description: str
    steps: tuple[Step, ...]

    def start_index(self, start: str | None) -> int:
        """--from: a step name or a 1-based position."""
        if not start:
            return 0
        if start.isdigit() and 1 <= int(start) <= len(self.steps):
            return int(start) - 1
        for s in self.steps:
            if s.name == start:
                return s.index
        names = [s.name for s in self.steps]
        raise ConfigError(
            f"{self.path.name}: --from {start}: no such step{did_you_mean(start, names)} (steps: {', '.join(names)})"
        )


def load_playbook(path: str | os.PathLike[str], shapes: Mapping[str, CommandShape]) -> Playbook:
    """Read and validate a playbook; every problem names file, line and step."""
    located = load(Path(path), what="playbook")
    return build_playbook(located, shapes)


def build_playbook(located: Located, shapes: Mapping[str, CommandShape]) -> Playbook:
    doc, where = located.data, located.where
    problems: list[str] = []
    if not isinstance(doc, dict):
        raise ConfigError(f"{located.file.name}:1: expected a mapping with name, lane and steps")
    for key in doc:
        if key not in ("name", "lane", "description", "steps"):
            problems.append(
                f"{where((key,))}: unknown key '{key}'{did_you_mean(key, ['name', 'lane', 'description', 'steps'])}"
                " (expected one of: description, lane, name, steps)"
            )
    steps_doc = doc.get("steps")
    if not isinstance(steps_doc, list) or not steps_doc:
        problems.append(f"{where(('steps',))}: expected a non-empty list of steps")
        steps_doc = []
    steps: list[Step] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(steps_doc):
        path = ("steps", i)
        if not isinstance(raw, dict):
            problems.append(f"{where(path)}: expected a mapping like `probe: {{shallow: true}}`")
            continue
        verbs = [k for k in raw if k not in STEP_KEYS]
        if len(verbs) != 1:
            unknown = [k for k in verbs if k not in shapes]
            hint = did_you_mean(unknown[0], shapes) if len(unknown) == 1 else ""
            problems.append(
                f"{where(path)}: a step names exactly one verb, got {', '.join(map(str, verbs)) or 'none'}"
                f"{hint} (verbs: {', '.join(sorted(shapes))})"
            )
            continue
        verb = verbs[0]
        if verb not in shapes:
            problems.append(
                f"{where(path + (verb,))}: unknown verb '{verb}'{did_you_mean(verb, shapes)} "
                f"(verbs: {', '.join(sorted(shapes))})"
            )
            continue
        options = raw[verb] if raw[verb] is not None else {}
        if not isinstance(options, dict):
            problems.append(f"{where(path + (verb,))}: expected a mapping of {verb}'s options")
            continue
        shape = shapes[verb]
        for key, value in options.items():
            if key in shape.positionals:
                continue
            if key not in shape.options:
                known = sorted({*shape.options, *shape.positionals})
                problems.append(
                    f"{where(path + (verb, key))}: `orch {verb}` has no option '{key}'"
                    f"{did_you_mean(key, known)} (options: {', '.join(known)})"
                )
            elif key in shape.flags and not isinstance(value, bool):
                problems.append(
                    f"{where(path + (verb, key))}: '{key}' is a flag; expected true or false, got {value!r}"
                )
        name = str(raw.get("name") or verb)
        if name in seen:
            if raw.get("name"):
                problems.append(f"{where(path + ('name',))}: duplicate step name '{name}' (also steps[{seen[name]}])")
                continue
            n = 2
            while f"{verb}-{n}" in seen:
                n += 1
            name = f"{verb}-{n}"
        seen[name] = i
        for ref_key in ("run", "run_a", "run_b"):
            ref = options.get(ref_key)
            if ref_key in shape.positionals and isinstance(ref, str) and ref in seen and seen[ref] >= i:
                problems.append(f"{where(path + (verb, ref_key))}: step '{ref}' comes later")
        steps.append(
            Step(
                index=len(steps),
                name=name,
                verb=verb,
                lane=raw.get("lane"),
                options=dict(options),
                line=located.line(path),
            )
        )
    if problems:
        raise ConfigError(problems)
    return Playbook(
        path=located.file.resolve(),
        name=str(doc.get("name") or located.file.stem),
        lane=doc.get("lane"),
        description=str(doc.get("description") or ""),
        steps=tuple(steps),
    )


# ---------------------------------------------------------------------------
# running


@dataclass
class Rung:
    """A step as it ran: its command line, verdict and, for a failure, the owning layer and remedy."""

    name: str
    verb: str
    argv: list[str]
    started: float = 0.0
    elapsed: float = 0.0
    exit_code: int | None = None
    verdict: str = "pending"  # passed | failed | skipped
    layer: str | None = None
    remedy: str | None = None
    evidence: str | None = None
    run_id: str | None = None
    runs: dict[str, str] = field(default_factory=dict)  # e.g. restart-check: {"cold": id, "warm": id}
    summary: list[str] = field(default_factory=list)  # what the verb found, in a few lines
    result: JSONDoc | None = None

    def to_dict(self) -> dict[str, object]:
        """The rung as the ladder record stores it (without the verb's whole result)."""
        return {k: v for k, v in self.__dict__.items() if k != "result"}


@dataclass
class Ladder:
    """One run of a playbook: its rungs in order."""

    playbook: Playbook
    lane: str | None
    rungs: list[Rung] = field(default_factory=list)
    started: float = 0.0
    elapsed: float = 0.0
    record_path: Path | None = None

    @property
    def ok(self) -> bool:
        return all(r.verdict in ("passed", "skipped") for r in self.rungs)

    @property
    def stopped_at(self) -> Rung | None:
        return next((r for r in self.rungs if r.verdict == "failed"), None)

    def to_dict(self) -> dict[str, object]:
        """The ladder record."""
        stop = self.stopped_at
        return {
            "schema_version": 1,
            "kind": "ladder",
            "playbook": str(self.playbook.path),
            "name": self.playbook.name,
            "lane": self.lane,
            "ok": self.ok,
            "started": self.started,
            "elapsed": round(self.elapsed, 3),
            "stopped_at": stop.name if stop else None,
            "layer": stop.layer if stop else None,
            "remedy": stop.remedy if stop else None,
            "rungs": [r.to_dict() for r in self.rungs],
        }


def build_argv(
    step: Step,
    shape: CommandShape,
    lane: str | None,
    base_dir: Path,
    run_ids: Mapping[str, str],
    runs_dir: Path | None = None,
) -> list[str]:
    """The orch command line for a step (without the program and global options)."""
    argv = step.verb.split(" ")
    if shape.has_lane and lane and "lane" not in step.options:
        argv += ["--lane", lane]
    if shape.has_json and step.verb not in SHOWN:
        argv.append("--json")
    tail: list[str] = []
    positional: list[str] = []
    for key, value in step.options.items():
        if key == "argv":
            tail = [str(v) for v in (value if isinstance(value, list) else [value])]
            continue
        if key in shape.positionals:
            values = value if isinstance(value, list) else [value]
            positional += [run_ids.get(str(v), str(v)) if key.startswith("run") else str(v) for v in values]
            continue
        flag = shape.options[key]
        if key in shape.flags:
            if value:
                argv.append(flag)
            continue
        for v in value if isinstance(value, list) else [value]:
            v = str(v)
            if key in PATH_OPTIONS and not os.path.isabs(v):
                v = str((base_dir / v).resolve())
            elif key in RUN_PATH_OPTIONS and not os.path.isabs(v) and runs_dir is not None:
                run = run_ids.get(str(step.options.get("run")), str(step.options.get("run")))
                v = str(runs_dir / run / v)
            argv += [flag, v]
    return argv + positional + (["--", *tail] if tail else [])


Judge = Callable[[Rung, str], None]


def run_playbook(
    playbook: Playbook,
    shapes: Mapping[str, CommandShape],
    *,
    orch: Sequence[str],
    lane: str | None = None,
    start: str | None = None,
    runs_dir: Path,
    on_line: Callable[[str, str], None] | None = None,
    on_rung: Callable[[Rung], None] | None = None,
) -> Ladder:
    """Run the steps from `start` in order; stop at the first failing rung."""
    from orchestrator.diagnose import diagnose, layer_remedy

    lane = lane or playbook.lane
    ladder = Ladder(playbook=playbook, lane=lane, started=time.time())
    first = playbook.start_index(start)
    # Resuming with --from: runs made by earlier rungs come from this playbook's last ladder record.
    run_ids: dict[str, str] = _previous_run_ids(playbook, runs_dir) if first else {}
    t0 = time.monotonic()
    for step in playbook.steps:
        shape = shapes[step.verb]
        argv = build_argv(step, shape, step.lane or lane, playbook.path.parent, run_ids, runs_dir)
        rung = Rung(name=step.name, verb=step.verb, argv=argv)
        ladder.rungs.append(rung)
        if step.index < first or ladder.stopped_at:
            rung.verdict = "skipped"
            continue
        rung.started = time.time()
        s0 = time.monotonic()
        code, out, err_tail = _run(list(orch) + argv, _echo(on_line, step.name))
        if step.verb in SHOWN and on_line:
            for line in out.splitlines():
                on_line(step.name, line)
        rung.elapsed = round(time.monotonic() - s0, 3)
        rung.exit_code = code
        rung.result = _json_doc(out)
        rung.run_id = (rung.result or {}).get("run_id") or _run_id_from(err_tail)
        rung.runs = {
            str(r.get("kind")): str(r.get("run_id"))
            for r in (rung.result or {}).get("runs") or []
            if isinstance(r, dict) and r.get("run_id")
        }
        rung.summary = summarize(step.verb, rung.result)
        if rung.run_id:
            run_ids[step.name] = rung.run_id
        if code == 0:
            rung.verdict = "passed"
        else:
            rung.verdict = "failed"
            rung.layer, rung.evidence = _layer_of(rung.result, "\n".join(err_tail) + "\n" + out[-4000:])
            if rung.layer is None:
                found = diagnose("\n".join(err_tail) + "\n" + out[-4000:])
                rung.layer = found.layer if found else "other"
                errors = [line for line in err_tail if line.startswith("orch: error:")]
                rung.evidence = rung.evidence or (
                    found.line if found else (errors or err_tail or [""])[-1 if not errors else 0]
                )
                rung.remedy = found.remedy if found else None
            rung.remedy = rung.remedy or layer_remedy(rung.layer)
        if on_rung:
            on_rung(rung)
    ladder.elapsed = time.monotonic() - t0
    ladder.record_path = _write_record(ladder, runs_dir)
    return ladder


def _echo(on_line: Callable[[str, str], None] | None, step: str) -> Callable[[str], None]:
    """Pass a running step's stderr lines on to `on_line`, under the step's name."""

    def echo(line: str) -> None:
        if on_line:
            on_line(step, line)

    return echo


def _run(argv: list[str], echo: Callable[[str], None]) -> tuple[int, str, list[str]]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    stdout, stderr = proc.stdout, proc.stderr
    assert stdout is not None and stderr is not None  # both are pipes
    tail: deque[str] = deque(maxlen=200)

    def pump() -> None:
        for line in stderr:
            line = line.rstrip("\n")
            tail.append(line)
            echo(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        out = stdout.read()
        proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(2)  # the verb tears its own work down (e.g. a launch's gang)
        proc.wait()
        raise
    reader.join(timeout=5)
    return proc.returncode, out, list(tail)


def summarize(verb: str, doc: JSONDoc | None) -> list[str]:
    """A few lines saying what a verb's JSON result found (pure), kept in the ladder record.

    A rung's verdict is its exit code; this is the evidence behind it, so the
    ladder record alone says e.g. which processes reused the cache and by how much.
    """
    if not doc:
        return []
    if verb == "restart-check":
        lines = [str(doc.get("message") or "")]
        for v in doc.get("verdicts") or []:
            ratio = f", warm/cold {v['ratio']:.2f}" if isinstance(v.get("ratio"), (int, float)) else ""
            lines.append(
                f"process {v.get('process_id')} ({v.get('worker')}) {v.get('frontend')}: "
                f"{v.get('verdict')}{ratio}, {v.get('hits', 0)} hits; expected to reuse: "
                f"{'yes' if v.get('expected') else 'no'}"
            )
        return [line for line in lines if line]
    if verb == "probe":
        s = doc.get("summary") or {}
        answered = sorted({str(r.get("answered")) for r in doc.get("rows") or [] if r.get("answered")})
        line = (
            f"{s.get('ok', 0)}/{s.get('workers', 0)} workers ok, {s.get('warn', 0)} warn, "
            f"{s.get('fail', 0)} fail ({'deep' if doc.get('deep') else 'shallow'})"
        )
        if answered:
            line += f"; device answered: {', '.join(answered)}"
        return [line] + [f"{layer}: {', '.join(ws)}" for layer, ws in (s.get("layers") or {}).items()]
    if verb == "deploy" and isinstance(doc.get("workers"), dict):  # a --dry-run prints the plan instead
        workers = doc["workers"]
        counts: dict[str, int] = {}
        for o in workers.values():
            counts[str(o.get("status"))] = counts.get(str(o.get("status")), 0) + 1
        return [
            f"bundle {doc.get('bundle')}@{str(doc.get('bundle_id'))[:8]}: "
            + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
            + f"; controller sent {_mib(doc.get('controller_bytes'))} for a {_mib(doc.get('bundle_bytes'))} bundle"
        ]
    if doc.get("message"):
        return [str(doc["message"])]
    return []


def _mib(n: float | None) -> str:
    return f"{(n or 0) / 2**20:.1f} MiB"


def _json_doc(text: str) -> JSONDoc | None:
    text = text.strip()
    if not text.startswith("{"):
        return None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) else None


def _run_id_from(lines: Sequence[str]) -> str | None:
    for line in reversed(lines):
        m = re.search(r"\brun ([A-Za-z0-9._-]+-\d{8}-\d{6}-\d+)\b", line)
        if m:
            return m.group(1)
    return None


def _layer_of(doc: JSONDoc | None, text: str) -> tuple[str | None, str | None]:
    """The owning layer a verb's JSON result names for its failure, if any."""
    if not doc:
        return None, None
    rows = doc.get("rows")  # probe
    if isinstance(rows, list):
        bad = [r for r in rows if r.get("verdict") == "fail"]
        if bad:
            order = [
                "transport",
                "device-ownership",
                "bundle-skew",
                "runtime-proof",
                "cache",
                "memory",
                "collective",
                "other",
            ]
            bad.sort(key=lambda r: order.index(r.get("layer")) if r.get("layer") in order else len(order))
            r = bad[0]
            return r.get("layer") or "other", f"{r.get('worker')}: {r.get('evidence') or r.get('error')}"
    diag = doc.get("diagnosis")  # launch
    if isinstance(diag, dict) and diag.get("layer"):
        who = (doc.get("first_failure") or {}).get("worker") if isinstance(doc.get("first_failure"), dict) else None
        return diag["layer"], f"{who + ': ' if who else ''}{diag.get('signature') or diag.get('line') or ''}"
    results = doc.get("results")  # exec
    if isinstance(results, list):
        for r in results:
            if r.get("error_kind") in ("timeout", "connect", "host-key", "auth"):
                return "transport", f"{r.get('host')}: {r.get('error')}"
    workers = doc.get("workers")  # deploy
    if isinstance(workers, dict):
        for name, o in workers.items():
            if isinstance(o, dict) and o.get("status") == "failed":
                reason = str(o.get("reason") or "")
                transport = any(
                    k in reason for k in ("timed out", "no SSH banner", "cannot reach", "refused", "HOST KEY")
                )
                return ("transport" if transport else None), f"{name}: {reason}"
    return None, None


def _previous_run_ids(playbook: Playbook, runs_dir: Path) -> dict[str, str]:
    records = sorted((runs_dir / "ladders").glob(f"{playbook.name}-*.json"), key=lambda p: p.stat().st_mtime)
    for path in reversed(records):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        found = {r["name"]: r["run_id"] for r in doc.get("rungs", []) if r.get("run_id")}
        if found:
            return found
    return {}


def _write_record(ladder: Ladder, runs_dir: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(ladder.started))
    path = runs_dir / "ladders" / f"{ladder.playbook.name}-{stamp}-{os.getpid()}.json"
    write_atomic(path, json.dumps(ladder.to_dict(), indent=2) + "\n")
    return path


def orch_command() -> list[str]:
    """How to start a child `orch` with this interpreter."""
    return [sys.executable, "-m", "orchestrator"]
