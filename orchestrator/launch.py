"""Coordinated multi-host launch: a pure plan, then an all-or-nothing execution as a gang.

`plan_launch(fleet, lane, argv)` decides everything up front, without I/O: the
run id; per worker its process id (its position in the lane, which is the
worker index for a lane over the whole slice), the coordinator (process 0's
internal address and a port derived from the run id), and the complete
environment the hostside launcher applies before importing any frontend. That
plan is what `--dry-run` prints.

`execute(plan, transport)` carries it out:

1. sync `--workdir` to every worker (only changed files, verified);
2. preflight on every worker, all-or-nothing: one active bundle across the
   lane, no foreign holder of the libtpu lockfile or a chip, a free
   coordinator port (`reclaim` first ends processes of earlier orch runs);
3. start: the launch file goes into each worker's run directory and a
   detached supervisor starts the launcher (see hostside/launch_start.py);
4. start together: each launcher imports its frontends and reports ready;
   when every worker is ready, all are released at one wall-clock instant;
5. watch as a gang: output streams with a worker prefix; the first worker
   that exits non-zero (or is lost) makes the controller end every other
   worker's processes (TERM to the process group, grace, KILL). Ctrl-C and the
   timeout do the same. The outcome names the first failure, how it ended and
   the diagnosis of its log tail.

Workers keep running when the controller goes away (detached runs); `monitor`
resumes watching a run, which `orch attach` uses.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import queue
import re
import secrets
import signal
import tarfile
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from hostside import redact
from hostside.layout import LIBTPU_LOCKFILE, Layout
from orchestrator.cache import describe as describe_cache
from orchestrator.cache import launch_cache
from orchestrator.errors import ConfigError, LaunchError
from orchestrator.fleet import FOLKLORE_VARS, Fleet
from orchestrator.policy import runtime_policy
from orchestrator.remote import job_document, run_hostside
from orchestrator.transport import Result, Transport

SCHEMA_VERSION = 1
PORT_BASE = 20000
PORT_SPAN = 10000
# Variables `orch launch` sets per process; a profile or --env may not set them.
ORCH_VARS = (
    "ORCH_RUN_ID",
    "ORCH_LANE",
    "ORCH_WORKER",
    "ORCH_PROCESS_ID",
    "ORCH_NUM_PROCESSES",
    "ORCH_COORDINATOR",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
)
DEFAULT_GRACE = 5.0
# After a worker failed, the gang is broken: collectives (and so a collective
# checkpoint) cannot complete, and JAX treats SIGTERM as a preemption notice
# and keeps running. The survivors get this much time after TERM, not `grace`.
DEFAULT_FAILURE_GRACE = 1.0
DEFAULT_START_TIMEOUT = 300.0
DEFAULT_LOST_AFTER = 30.0
RELEASE_MARGIN = 0.5
WATCH_FOREVER = 10**7  # seconds; the remote `timeout` wrapper needs a number
TAIL_KEEP = 200


# ---------------------------------------------------------------------------
# The plan (pure)


@dataclass(frozen=True)
class Target:
    """What runs: a script path or a module, with its arguments."""

    kind: str  # "script" | "module"
    path: str | None
    module: str | None
    args: tuple[str, ...]

    def argv(self) -> list[str]:
        return ["-m", self.module, *self.args] if self.kind == "module" else [self.path, *self.args]

    def to_dict(self) -> dict:
        return {"kind": self.kind, "path": self.path, "module": self.module, "args": list(self.args)}


@dataclass(frozen=True)
class ContractStep:
    """One step of the lane's start-up contract, performed by the launcher before user code."""

    frontend: str
    action: str
    detail: str

    def to_dict(self) -> dict:
        return {"frontend": self.frontend, "action": self.action, "detail": self.detail}


@dataclass(frozen=True)
class Workdir:
    """A local directory of training code and where it lives on every worker."""

    local: str
    remote: str


@dataclass(frozen=True)
class ProcessPlan:
    """One process of the gang: where it runs and the environment it starts with."""

    process_id: int
    worker: str
    index: int
    address: str
    python: str
    run_dir: str
    env: Mapping[str, str]

    def to_dict(self) -> dict:
        return {
            "process_id": self.process_id,
            "worker": self.worker,
            "index": self.index,
            "address": self.address,
            "python": self.python,
            "run_dir": self.run_dir,
            "env": redact.env(self.env),
        }  # as written down; the worker's launch file has the real values


@dataclass(frozen=True)
class LaunchPlan:
    """Everything a launch will do, decided before any worker is touched."""

    run_id: str
    name: str | None
    lane: str
    slice: str
    bundle: str
    platform: str
    profile: str | None
    distributions: tuple[str, ...]
    frontends: tuple[str, ...]
    contract: tuple[ContractStep, ...]
    target: Target
    workdir: Workdir | None
    coordinator_address: str
    coordinator_port: int
    master_port: int
    port_given: bool
    timeout: float | None
    forbid: tuple[str, ...]
    cache: Mapping[str, object]
    processes: tuple[ProcessPlan, ...]

    @property
    def num_processes(self) -> int:
        return len(self.processes)

    @property
    def coordinator(self) -> str:
        return f"{self.coordinator_address}:{self.coordinator_port}"

    @property
    def workers(self) -> list[str]:
        return [p.worker for p in self.processes]

    def process(self, worker: str) -> ProcessPlan:
        for p in self.processes:
            if p.worker == worker:
                return p
        raise KeyError(worker)

    def launch_doc(
        self, p: ProcessPlan, *, grace: float = DEFAULT_GRACE, ready_timeout: float = DEFAULT_START_TIMEOUT
    ) -> dict:
        """The per-worker launch file the hostside launcher reads."""
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "name": self.name,
            "lane": self.lane,
            "bundle": self.bundle,
            "platform": self.platform,
            "profile": self.profile,
            "worker": p.worker,
            "index": p.index,
            "process_id": p.process_id,
            "num_processes": self.num_processes,
            "coordinator": self.coordinator,
            "address": p.address,
            "run_dir": p.run_dir,
            "python": p.python,
            "cwd": self.workdir.remote if self.workdir else None,
            "env": dict(p.env),
            "forbid": list(self.forbid),
            "frontends": list(self.frontends),
            "contract": [c.to_dict() for c in self.contract],
            "target": self.target.to_dict(),
            "distributions": list(self.distributions),
            "cache": dict(self.cache),
            "timeout": self.timeout,
            "grace": grace,
            "ready_timeout": ready_timeout,
        }

    def to_dict(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "name": self.name,
            "lane": self.lane,
            "slice": self.slice,
            "bundle": self.bundle,
            "platform": self.platform,
            "profile": self.profile,
            "distributions": list(self.distributions),
            "frontends": list(self.frontends),
            "contract": [c.to_dict() for c in self.contract],
            "target": self.target.to_dict(),
            "workdir": {"local": self.workdir.local, "remote": self.workdir.remote} if self.workdir else None,
            "coordinator": self.coordinator,
            "coordinator_address": self.coordinator_address,
            "coordinator_port": self.coordinator_port,
            "master_port": self.master_port,
            "port_given": self.port_given,
            "timeout": self.timeout,
            "forbid": list(self.forbid),
            "cache": dict(self.cache),
            "num_processes": self.num_processes,
            "processes": [p.to_dict() for p in self.processes],
        }

    @classmethod
    def from_dict(cls, doc: dict) -> LaunchPlan:
        """The plan as saved in a run record (for attach, status, stop)."""
        wd = doc.get("workdir")
        return cls(
            run_id=doc["run_id"],
            name=doc.get("name"),
            lane=doc["lane"],
            slice=doc["slice"],
            bundle=doc["bundle"],
            platform=doc["platform"],
            profile=doc.get("profile"),
            distributions=tuple(doc["distributions"]),
            frontends=tuple(doc["frontends"]),
            contract=tuple(ContractStep(**c) for c in doc["contract"]),
            target=Target(
                kind=doc["target"]["kind"],
                path=doc["target"]["path"],
                module=doc["target"]["module"],
                args=tuple(doc["target"]["args"]),
            ),
            workdir=Workdir(**wd) if wd else None,
            coordinator_address=doc["coordinator_address"],
            coordinator_port=doc["coordinator_port"],
            master_port=doc["master_port"],
            port_given=doc.get("port_given", False),
            timeout=doc.get("timeout"),
            forbid=tuple(doc["forbid"]),
            cache=doc.get("cache", {}),
            processes=tuple(ProcessPlan(**p) for p in doc["processes"]),
        )


def new_run_id(stem: str, now: float | None = None) -> str:
    """`<stem>-<YYYYmmdd-HHMMSS>-<4 hex>`: sortable, readable, unique enough per controller."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now if now is not None else time.time()))
    return f"{stem}-{stamp}-{secrets.token_hex(2)}"


def run_stem(target: Target, name: str | None) -> str:
    raw = name or (target.module.rsplit(".", 1)[-1] if target.kind == "module" else Path(target.path).stem)
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", raw).strip("-._")[:32]
    return stem or "run"


def default_port(run_id: str) -> int:
    """A coordinator port derived from the run id (even, so port+1 is the torch MASTER_PORT)."""
    digest = int(hashlib.sha256(run_id.encode()).hexdigest()[:8], 16)
    return PORT_BASE + (digest % (PORT_SPAN // 2)) * 2


def parse_target(argv: Sequence[str]) -> Target:
    """`SCRIPT.py ARGS...` or `-m MODULE ARGS...`."""
    argv = list(argv)
    if not argv:
        raise LaunchError("nothing to launch: give `-- SCRIPT.py ARGS...` or `-- -m MODULE ARGS...`")
    if argv[0] == "-m":
        if len(argv) < 2 or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", argv[1]):
            raise LaunchError(f"-m needs a module name, got {argv[1:2] or 'nothing'}")
        return Target(kind="module", path=None, module=argv[1], args=tuple(argv[2:]))
    if argv[0].startswith("-"):
        raise LaunchError(f"expected SCRIPT.py or -m MODULE after `--`, got option {argv[0]!r}")
    return Target(kind="script", path=argv[0], module=None, args=tuple(argv[1:]))


def bundle_frontends(pins: Sequence[str]) -> tuple[str, ...]:
    """Frontends a bundle carries, in start-up order (torch_xla's main path before jax)."""
    names = {re.split(r"[\[=<>!~ ]", pin, 1)[0].lower().replace("_", "-") for pin in pins}
    out = []
    if "torch-xla" in names:
        out.append("torch_xla")
    elif "torch" in names:
        out.append("torch")
    if "jax" in names:
        out.append("jax")
    return tuple(out)


def startup_contract(frontends: Sequence[str], platform: str) -> tuple[ContractStep, ...]:
    steps = []
    for frontend in frontends:
        if frontend == "torch_xla":
            steps.append(
                ContractStep("torch_xla", "torch_xla.use_spmd", "torch_xla.runtime.use_spmd() before any tensor exists")
            )
        elif frontend == "torch":
            steps.append(
                ContractStep(
                    "torch",
                    "torch.distributed.env",
                    "torch.distributed rendezvous (init_method env://) from MASTER_ADDR, "
                    "MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK",
                )
            )
        elif frontend == "jax" and platform == "cpu":
            steps.append(
                ContractStep(
                    "jax",
                    "jax.distributed.initialize",
                    "jax.distributed.initialize(ORCH_COORDINATOR, ORCH_NUM_PROCESSES, "
                    "ORCH_PROCESS_ID) by the launcher; the script's own call is a no-op",
                )
            )
        elif frontend == "jax":
            steps.append(
                ContractStep(
                    "jax",
                    "jax.runtime-discovery",
                    "the TPU runtime discovers the slice (the script calls jax.distributed.initialize() itself)",
                )
            )
    return tuple(steps)


def plan_launch(
    fleet: Fleet,
    lane: str,
    argv: Sequence[str],
    *,
    run_id: str | None = None,
    name: str | None = None,
    port: int | None = None,
    workdir: str | None = None,
    timeout: float | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> LaunchPlan:
    """The complete launch of `argv` on `lane`: pure, no worker is contacted."""
    lane_model = fleet.lane(lane)
    workers = fleet.lane_workers(lane)
    if not workers:
        raise ConfigError(f"{fleet.path.name}: lane '{lane}' has no workers")
    slice_name, _ = fleet.lane_slice(lane)
    bundle = fleet.bundle(lane_model.bundle)
    profile = fleet.runtime_profile(lane)
    target = parse_target(argv)
    extra_env = dict(extra_env or {})
    forbid = tuple(dict.fromkeys([*profile.forbid, *FOLKLORE_VARS]))
    for key in extra_env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise LaunchError(f"--env {key!r}: not a valid variable name")
        if key in forbid:
            why = FOLKLORE_VARS.get(key, f"is forbidden by runtime profile '{lane_model.runtime}'")
            raise LaunchError(f"--env {key}: {key} {why}")
    owned = [k for k in ORCH_VARS if k in profile.env or k in extra_env]
    if owned:
        where = "--env" if any(k in extra_env for k in owned) else f"runtime profile '{lane_model.runtime}'"
        raise LaunchError(f"{where} sets {', '.join(owned)}, which orch launch sets for every process")
    if timeout is not None and timeout <= 0:
        raise LaunchError(f"--timeout must be positive, got {timeout:g}")

    wd = None
    if workdir is not None:
        local = os.path.abspath(workdir)
        tag = hashlib.sha256(local.encode()).hexdigest()[:8]
        base = re.sub(r"[^A-Za-z0-9._-]+", "-", os.path.basename(local.rstrip("/"))) or "code"
        wd = Workdir(local=local, remote=f"{workers[0].root}/code/{base}-{tag}")
        if target.kind == "script" and os.path.isabs(target.path):
            rel = os.path.relpath(target.path, local)
            if rel.startswith(".."):
                raise LaunchError(f"script {target.path} is not inside --workdir {local}")
            target = replace(target, path=rel)

    run_id = run_id or new_run_id(run_stem(target, name))
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", run_id):
        raise LaunchError(f"run id {run_id!r}: use letters, digits, '.', '_' and '-'")
    coord_port = port if port is not None else default_port(run_id)
    if not 1024 <= coord_port <= 65534:
        raise LaunchError(f"--port {coord_port}: expected 1024..65534 (the next port is torch's MASTER_PORT)")
    coordinator = workers[0].internal_address
    n = len(workers)
    processes = []
    for pid, w in enumerate(workers):
        policy = runtime_policy(fleet, lane, w)
        env = {**policy.env, **extra_env}
        env.update(
            {
                "ORCH_RUN_ID": run_id,
                "ORCH_LANE": lane,
                "ORCH_WORKER": w.name,
                "ORCH_PROCESS_ID": str(pid),
                "ORCH_NUM_PROCESSES": str(n),
                "ORCH_COORDINATOR": f"{coordinator}:{coord_port}",
                "MASTER_ADDR": coordinator,
                "MASTER_PORT": str(coord_port + 1),
                "WORLD_SIZE": str(n),
                "RANK": str(pid),
                "LOCAL_RANK": "0",
                "LOCAL_WORLD_SIZE": "1",
            }
        )
        layout = Layout(w.root)
        processes.append(
            ProcessPlan(
                process_id=pid,
                worker=w.name,
                index=w.index,
                address=w.internal_address,
                python=layout.active_python(lane),
                run_dir=layout.run_dir(run_id),
                env=env,
            )
        )
    frontends = bundle_frontends(bundle.pins)
    return LaunchPlan(
        run_id=run_id,
        name=name,
        lane=lane,
        slice=slice_name,
        bundle=lane_model.bundle,
        platform=lane_model.platform,
        profile=lane_model.runtime,
        distributions=tuple(re.split(r"[\[=<>!~ ]", pin, 1)[0] for pin in bundle.pins),
        frontends=frontends,
        contract=startup_contract(frontends, lane_model.platform),
        target=target,
        workdir=wd,
        coordinator_address=coordinator,
        coordinator_port=coord_port,
        master_port=coord_port + 1,
        port_given=port is not None,
        timeout=timeout,
        forbid=forbid,
        cache=launch_cache(fleet, lane),
        processes=tuple(processes),
    )


def with_ports(plan: LaunchPlan, port: int) -> LaunchPlan:
    """The same plan with another coordinator port (when preflight found the planned one taken)."""
    coordinator = f"{plan.coordinator_address}:{port}"
    procs = tuple(
        replace(p, env={**p.env, "ORCH_COORDINATOR": coordinator, "MASTER_PORT": str(port + 1)}) for p in plan.processes
    )
    return replace(plan, coordinator_port=port, master_port=port + 1, processes=procs)


def render_plan(plan: LaunchPlan) -> str:
    """The plan as `--dry-run` prints it."""
    procs = [replace(p, env=redact.env(p.env)) for p in plan.processes]
    common = {k: v for k, v in procs[0].env.items() if all(p.env.get(k) == v for p in procs)}
    varying = [k for k in procs[0].env if k not in common]
    python = procs[0].python if all(p.python == procs[0].python for p in procs) else "(per process, below)"
    lines = [
        f"run          {plan.run_id}" + (f"  (name {plan.name})" if plan.name else ""),
        f"lane         {plan.lane}: bundle {plan.bundle}, platform {plan.platform}, slice {plan.slice}, "
        f"{plan.num_processes} processes",
        f"program      {' '.join(plan.target.argv())}",
        f"python       {python}",
        "cwd          "
        + (
            f"{plan.workdir.remote}  (synced from {plan.workdir.local})"
            if plan.workdir
            else "the worker's home directory; the script path is used as given"
        ),
        f"coordinator  {plan.coordinator}  (torch MASTER_PORT {plan.master_port})",
        f"timeout      {plan.timeout:g}s" if plan.timeout else "timeout      none",
        f"forbid       {', '.join(plan.forbid)}",
        "",
        "start-up, per process:",
        "  1. policy       set the environment below before any frontend import"
        + (f" (runtime profile {plan.profile})" if plan.profile else ""),
        f"  2. import       {', '.join(plan.frontends) or '(no frontend in the bundle)'}",
        f"  3. cache-init   {describe_cache(plan.cache)}",
        "  4. ready        every process waits; all are released at one instant",
    ]
    n = 5
    for step in plan.contract:
        lines.append(f"  {n}. {step.frontend:<12} {step.detail}")
        n += 1
    lines += [f"  {n}. user code    {' '.join(plan.target.argv())}", "", "environment (every process):"]
    lines += [f"  {k}={v}" for k, v in sorted(common.items())]
    lines += ["", "processes:"]
    for p in procs:
        lines.append(f"  {p.process_id}  {p.worker}  {p.address}  run dir {p.run_dir}")
        if python.startswith("("):
            lines.append(f"     python {p.python}")
        lines.append("     " + " ".join(f"{k}={p.env[k]}" for k in varying))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# Execution


@dataclass
class WorkerEnd:
    """How one worker's process ended."""

    worker: str
    process_id: int
    exit_code: int | None
    signal: int | None = None
    signal_name: str | None = None
    reason: str = ""
    stopped: bool = False  # ended by orch (gang teardown, stop, timeout)
    lost: bool = False  # the worker or its supervisor stopped answering
    ended_at: float | None = None
    tail: str = ""

    @property
    def failed(self) -> bool:
        return (
            self.lost
            or self.signal is not None
            or (self.exit_code not in (0, None))
            or (self.exit_code is None and not self.stopped)
        )

    def how(self) -> str:
        if self.lost:
            return f"lost ({self.reason})"
        if self.signal:
            return f"killed by signal {self.signal} ({self.signal_name or '?'})"
        if self.exit_code is not None:
            return f"exit code {self.exit_code}"
        return self.reason or "unknown"

    def to_dict(self) -> dict:
        return {
            "worker": self.worker,
            "process_id": self.process_id,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "signal_name": self.signal_name,
            "reason": self.reason,
            "stopped": self.stopped,
            "lost": self.lost,
            "ended_at": self.ended_at,
            "how": self.how(),
        }


@dataclass
class LaunchOutcome:
    """What a launch (or an attach) ended with."""

    run_id: str
    status: str  # succeeded | failed | timed-out | interrupted | stopped | detached
    plan: LaunchPlan
    ends: dict[str, WorkerEnd] = field(default_factory=dict)
    first_failure: WorkerEnd | None = None
    diagnosis: dict | None = None
    message: str = ""
    ready_elapsed: float | None = None
    release_at: float | None = None
    released_at: dict[str, float] = field(default_factory=dict)
    started_at: dict[str, float] = field(default_factory=dict)
    failure_seen_at: float | None = None
    teardown: dict | None = None
    run_dir: str | None = None

    @property
    def ok(self) -> bool:
        return self.status in ("succeeded", "detached")

    @property
    def start_skew(self) -> float | None:
        vals = list(self.released_at.values())
        return max(vals) - min(vals) if len(vals) > 1 else (0.0 if vals else None)

    @property
    def user_start_skew(self) -> float | None:
        vals = list(self.started_at.values())
        return max(vals) - min(vals) if len(vals) > 1 else (0.0 if vals else None)

    @property
    def teardown_latency(self) -> float | None:
        """Seconds from the first failure's exit (worker clock) to every worker torn down."""
        if not (self.first_failure and self.first_failure.ended_at and self.teardown):
            return None
        return self.teardown["done_at"] - self.first_failure.ended_at

    @property
    def exit_code(self) -> int:
        return {"succeeded": 0, "detached": 0, "timed-out": 124, "interrupted": 130}.get(self.status, 1)

    def to_dict(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "status": self.status,
            "ok": self.ok,
            "message": self.message,
            "lane": self.plan.lane,
            "num_processes": self.plan.num_processes,
            "ends": {w: e.to_dict() for w, e in self.ends.items()},
            "first_failure": self.first_failure.to_dict() if self.first_failure else None,
            "first_failure_tail": self.first_failure.tail if self.first_failure else None,
            "diagnosis": self.diagnosis,
            "ready_elapsed": self.ready_elapsed,
            "release_at": self.release_at,
            "released_at": self.released_at,
            "started_at": self.started_at,
            "start_skew": self.start_skew,
            "user_start_skew": self.user_start_skew,
            "failure_seen_at": self.failure_seen_at,
            "teardown": self.teardown,
            "teardown_latency": self.teardown_latency,
        }


OutputFn = Callable[[str, str], None]  # (worker, line)
ReportFn = Callable[[str], None]  # controller progress, one line


def _quiet(_text: str) -> None:
    pass


def _doc(result: Result) -> dict | None:
    try:
        return job_document(result)
    except Exception:
        return None


# -- workdir -------------------------------------------------------------------


def sync_workdir(plan: LaunchPlan, transport: Transport, report: ReportFn = _quiet) -> dict[str, dict]:
    """Make every worker's copy of --workdir equal to the local one (changed files only, verified)."""
    from hostside.launch_sync import manifest

    wd = plan.workdir
    if not os.path.isdir(wd.local):
        raise LaunchError(f"--workdir {wd.local} is not a directory")
    if plan.target.kind == "script" and not os.path.isfile(os.path.join(wd.local, plan.target.path)):
        raise LaunchError(f"script {plan.target.path} not found in --workdir {wd.local}")
    local = manifest(wd.local)
    archives: dict[tuple, bytes] = {}

    def one(worker) -> Result:
        res = run_hostside(transport, worker, "launch_sync", ["manifest", wd.remote], timeout=120)
        doc = _doc(res)
        if doc is None:
            return res
        remote = doc["files"]
        changed = tuple(sorted(rel for rel, meta in local.items() if remote.get(rel) != meta))
        if not changed and set(remote) == set(local):
            return Result(
                host=worker.name,
                argv=("launch_sync",),
                exit_code=0,
                stdout=json.dumps(
                    {
                        "schema_version": 1,
                        "ok": True,
                        "changed": [],
                        "deleted": [],
                        "verified": len(local),
                        "mismatches": [],
                    }
                ),
            )
        # The manifest and the changed files travel over SFTP (no data on command lines).
        staging = f"{worker.root}/code/.sync-{plan.run_id}"
        put = transport.put_one(worker.name, io.BytesIO(json.dumps({"files": local}).encode()), f"{staging}.json")
        if not put.ok:
            return put
        args = ["apply", wd.remote, "--manifest", f"{staging}.json"]
        if changed:
            data = archives.get(changed)
            if data is None:
                data = _tar(wd.local, changed)
                archives[changed] = data
            put = transport.put_one(worker.name, io.BytesIO(data), f"{staging}.tgz")
            if not put.ok:
                return put
            args += ["--archive", f"{staging}.tgz"]
        return run_hostside(transport, worker, "launch_sync", args, timeout=300)

    results = transport.map(one, plan.workers)
    problems, out = [], {}
    for name, res in results.items():
        doc = _doc(res)
        if doc is None or not doc.get("ok"):
            detail = f"files differ after sync: {', '.join(doc['mismatches'][:5])}" if doc else res.describe()
            problems.append(f"{name}: {detail}")
        else:
            out[name] = doc
    if problems:
        raise LaunchError(f"--workdir {wd.local} could not be synced to every worker:\n  " + "\n  ".join(problems))
    shipped = sum(len(d["changed"]) for d in out.values())
    report(
        f"workdir {wd.local} -> {wd.remote}: {len(local)} files, {shipped} shipped over "
        f"{len(out)} workers, all verified"
    )
    return out


def _tar(root: str, files: Sequence[str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for rel in files:
            tar.add(os.path.join(root, rel), arcname=rel, recursive=False)
    return buf.getvalue()


# -- preflight -----------------------------------------------------------------


@dataclass
class Preflight:
    """What preflight found on every worker (all-or-nothing)."""

    problems: list[str]
    warnings: list[str]
    reclaimed: list[str]
    bundles: dict[str, str | None]
    suggested_ports: list[int] | None
    docs: dict[str, dict]


def preflight(
    plan: LaunchPlan, transport: Transport, *, reclaim: bool = False, grace: float = DEFAULT_GRACE
) -> Preflight:
    """Check every worker before anything starts; with `reclaim`, first end earlier orch runs' processes."""

    def one(worker) -> Result:
        p = plan.process(worker.name)
        args = [
            "--root",
            worker.root,
            "--lane",
            plan.lane,
            "--run-id",
            plan.run_id,
            "--grace",
            f"{grace:g}",
            "--lockfile",
            LIBTPU_LOCKFILE,
        ]
        if p.process_id == 0:
            args += ["--port", str(plan.coordinator_port), "--port", str(plan.master_port)]
        if reclaim:
            args.append("--reclaim")
        return run_hostside(transport, worker, "launch_preflight", args, timeout=60 + 2 * grace)

    results = transport.map(one, plan.workers)
    problems, warnings, reclaimed = [], [], []
    docs: dict[str, dict] = {}
    for name, res in results.items():
        doc = _doc(res)
        if doc is None:
            problems.append(f"{name}: preflight did not run: {res.describe()}")
        else:
            docs[name] = doc
    bundles = {name: (doc["active"]["target"] if doc["active"]["exists"] else None) for name, doc in docs.items()}
    for name, doc in docs.items():
        active = doc["active"]
        if not active["exists"]:
            problems.append(
                f"{name}: lane '{plan.lane}' has no active bundle ({active['path']} is missing); "
                f"deploy it first: orch deploy --lane {plan.lane}"
            )
        elif not active["python_ok"]:
            problems.append(f"{name}: the active bundle {active['target']} has no Python at {active['python']}")
    groups: dict[str, list[str]] = {}
    for name, target in bundles.items():
        if target:
            groups.setdefault(target, []).append(name)
    if len(groups) > 1:
        ranked = sorted(groups.items(), key=lambda kv: -len(kv[1]))
        parts = [f"{', '.join(ws)} run{'s' if len(ws) == 1 else ''} {os.path.basename(t)} ({t})" for t, ws in ranked]
        problems.append(
            f"lane '{plan.lane}' has a mixed stack: "
            + "; ".join(parts)
            + f". One gang runs one bundle: deploy the same bundle to every worker "
            f"(orch deploy --lane {plan.lane}) or narrow the lane"
        )
    for name, doc in docs.items():
        for run in doc.get("reclaimed", []):
            ended = len(run["term"])
            reclaimed.append(
                f"{name}: ended {ended} process(es) of earlier run {run['run_id']}"
                + (f" ({len(run['kill'])} needed KILL)" if run["kill"] else "")
                + (f"; still alive: {run['left']}" if run["left"] else "")
            )
            if run["left"]:
                problems.append(f"{name}: could not end processes {run['left']} of earlier run {run['run_id']}")
        for holder in doc.get("lock_holders", []):
            problems.append(
                f"{name}: {doc['lockfile']} is locked by pid {holder['pid']} "
                f"({holder['command'] or '?'})" + _owner_hint(holder)
            )
        for holder in doc.get("device_holders", []):
            problems.append(
                f"{name}: TPU device {', '.join(holder['devices'])} is held by pid {holder['pid']} "
                f"({holder['command'] or '?'})" + _owner_hint(holder)
            )
        for run in doc.get("earlier_runs", []):
            procs = run["processes"]
            if procs:
                warnings.append(
                    f"{name}: earlier run {run['run_id']} still has {len(procs)} process(es) "
                    f"(pid {', '.join(str(p['pid']) for p in procs[:5])}); "
                    f"`orch stop {run['run_id']}` or --reclaim ends them"
                )
    suggested = None
    for name, doc in docs.items():
        busy = [p for p in doc.get("ports", []) if not p["free"]]
        if busy:
            if plan.port_given or not doc.get("suggested_ports"):
                problems.append(
                    f"{name}: coordinator port {', '.join(str(p['port']) for p in busy)} is taken "
                    f"({busy[0]['error']}); choose another with --port"
                )
            else:
                suggested = doc["suggested_ports"]
    return Preflight(
        problems=problems, warnings=warnings, reclaimed=reclaimed, bundles=bundles, suggested_ports=suggested, docs=docs
    )


def _owner_hint(holder: dict) -> str:
    run = holder.get("orch_run")
    if run:
        return f"; it is a process of orch run {run}: end it with `orch stop {run}` or launch with --reclaim"
    return "; not started by orch, so --reclaim leaves it alone: end it yourself if it is stale"


# -- start, release, stop --------------------------------------------------------


def start_workers(plan: LaunchPlan, transport: Transport, *, grace: float, ready_timeout: float) -> dict[str, Result]:
    """Send each worker its launch document (on stdin, never a command line; the worker writes it
    owner-only, since it holds the run's environment) and start its supervisor."""

    def one(worker) -> Result:
        doc = plan.launch_doc(plan.process(worker.name), grace=grace, ready_timeout=ready_timeout)
        return run_hostside(transport, worker, "launch_start", stdin=json.dumps(doc), timeout=60)

    return transport.map(one, plan.workers)


def release(
    plan: LaunchPlan, transport: Transport, at: float, workers: Sequence[str] | None = None
) -> dict[str, Result]:
    def one(worker) -> Result:
        return run_hostside(
            transport,
            worker,
            "launch_ctl",
            ["release", plan.process(worker.name).run_dir, "--at", repr(at)],
            timeout=30,
        )

    return transport.map(one, workers or plan.workers)


def stop_workers(
    plan: LaunchPlan,
    transport: Transport,
    *,
    reason: str,
    grace: float = DEFAULT_GRACE,
    workers: Sequence[str] | None = None,
) -> dict:
    """TERM then KILL every process of the run on `workers` (default: all), in parallel.

    Returns {"reason", "workers": {name: stop report}, "done_at", "elapsed"}.
    """
    t0 = time.time()

    def one(worker) -> Result:
        return run_hostside(
            transport,
            worker,
            "launch_ctl",
            ["stop", plan.process(worker.name).run_dir, "--grace", f"{grace:g}", "--reason", reason],
            timeout=grace + 20,
        )

    results = _shielded(lambda: transport.map(one, workers or plan.workers))
    out = {}
    for name, res in results.items():
        doc = _doc(res)
        out[name] = {k: doc.get(k) for k in ("term", "kill", "left", "elapsed")} if doc else {"error": res.describe()}
    done = time.time()
    return {"reason": reason, "workers": out, "started_at": t0, "done_at": done, "elapsed": round(done - t0, 3)}


class _Shield:
    """How many shielded sections (teardowns) are under way in the main thread."""

    depth = 0


def _interrupt(signum, _frame) -> None:
    """SIGINT, SIGTERM and SIGHUP as a KeyboardInterrupt naming the signal; dropped while a teardown is
    under way (the teardown is what the interrupt asks for, and must not be abandoned half-way)."""
    if _Shield.depth:
        return
    raise KeyboardInterrupt("Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name)


def _shielded(fn):
    """Run `fn` with interrupts dropped. A counter, not a swap of handlers: a signal that lands
    while handlers were being swapped could otherwise leave one ignored for good."""
    if threading.current_thread() is not threading.main_thread():
        return fn()
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)
    _Shield.depth += 1
    try:
        return fn()
    finally:
        _Shield.depth -= 1


def _interruption(exc: KeyboardInterrupt) -> str:
    """'Ctrl-C', or the name of the signal that interrupted the controller."""
    return str(exc.args[0]) if exc.args and str(exc.args[0]).startswith("SIG") else "Ctrl-C"


def interrupted(plan: LaunchPlan, transport: Transport, exc: KeyboardInterrupt, *, grace: float) -> LaunchOutcome:
    """Tear the gang down after an interrupt that came before (or between) the gang loop's own checks."""
    what = _interruption(exc)
    teardown = stop_workers(plan, transport, reason=f"{what} on the controller", grace=grace)
    return LaunchOutcome(
        run_id=plan.run_id,
        status="interrupted",
        plan=plan,
        teardown=teardown,
        message=f"interrupted ({what}) on the controller",
    )


def interrupt_on_termination() -> None:
    """Make SIGTERM and SIGHUP (a `kill` of the controller, a closed terminal) end a watched run
    the way Ctrl-C does: the gang is torn down, never left running unwatched."""
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _interrupt)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)


def _never_raising(fn):
    """A caller's output callback that cannot break a teardown: after SIGHUP the terminal is gone and
    every write fails (EIO), yet the gang must still be stopped and the outcome recorded."""
    if fn is None:
        return None

    def call(*args):
        try:
            fn(*args)
        except Exception:
            pass

    return call


def collect_records(plan: LaunchPlan, transport: Transport) -> dict[str, dict]:
    """Each worker's pid file, record and exit status (for the controller's run record)."""

    def one(worker) -> Result:
        return run_hostside(transport, worker, "launch_ctl", ["collect", plan.process(worker.name).run_dir], timeout=30)

    out = {}
    for name, res in transport.map(one, plan.workers).items():
        doc = _doc(res)
        out[name] = doc if doc is not None else {"error": res.describe()}
    return out


def worker_status(plan: LaunchPlan, transport: Transport) -> dict[str, dict]:
    def one(worker) -> Result:
        return run_hostside(transport, worker, "launch_ctl", ["status", plan.process(worker.name).run_dir], timeout=30)

    out = {}
    for name, res in transport.map(one, plan.workers).items():
        doc = _doc(res)
        out[name] = doc if doc is not None else {"state": "unreachable", "error": res.describe()}
    return out


# -- the gang ----------------------------------------------------------------------


class _Gang:
    """Watches every worker of a run and applies the gang rule."""

    def __init__(
        self,
        plan: LaunchPlan,
        transport: Transport,
        *,
        on_output: OutputFn | None,
        report: ReportFn,
        grace: float,
        failure_grace: float,
        start_timeout: float,
        lost_after: float,
        until: str,
        from_end: bool,
        release_needed: bool,
        release_margin: float,
    ):
        self.plan = plan
        self.transport = transport
        self.on_output = _never_raising(on_output)
        self.report = _never_raising(report)
        self.grace = grace
        self.failure_grace = failure_grace
        self.start_timeout = start_timeout
        self.lost_after = lost_after
        self.until = until
        self.from_end = from_end
        self.release_needed = release_needed
        self.release_margin = release_margin
        self.events: queue.Queue = queue.Queue()
        self.tails = {w: deque(maxlen=TAIL_KEEP) for w in plan.workers}
        self.heard = {w: time.monotonic() for w in plan.workers}
        self.heard_wall = {w: time.time() for w in plan.workers}  # a lost worker was alive until then
        self.closing = threading.Event()

    # watcher threads ---------------------------------------------------------

    def _watch(self, name: str) -> None:
        p = self.plan.process(name)
        worker = self.transport.workers[name]
        offset = "-1" if self.from_end else "0"
        attempts = 0
        while True:
            got_exit = []

            def on_line(host, stream, line, got_exit=got_exit):
                self.heard[name] = time.monotonic()
                self.heard_wall[name] = time.time()
                if stream == "stderr" and line.startswith("@orch "):
                    try:
                        ev = json.loads(line[6:])
                    except ValueError:
                        ev = None
                    if isinstance(ev, dict):
                        if ev.get("event") == "exit":
                            got_exit.append(ev)
                        if ev.get("event") != "hb":
                            self.events.put((name, ev))
                        return
                self.tails[name].append(line)
                if self.on_output:
                    self.on_output(name, line)

            res = run_hostside(
                self.transport,
                worker,
                "launch_watch",
                [p.run_dir, "--offset", offset, "--until", self.until],
                timeout=WATCH_FOREVER,
                on_line=on_line,
            )
            if got_exit or (res.ok and self.until == "started") or self.closing.is_set():
                break
            # The watch ended without an exit: reconnect once if the worker answers.
            attempts += 1
            last_heard = self.heard_wall[name]
            ended = res.error or f"the SSH channel closed with status {res.exit_code}"
            if attempts > 2:
                self.events.put((name, {"event": "lost", "reason": ended, "last_heard": last_heard}))
                return
            time.sleep(0.5)
            offset = "-1"
            probe = run_hostside(self.transport, worker, "launch_ctl", ["status", p.run_dir], timeout=15)
            if _doc(probe) is None:
                self.events.put(
                    (
                        name,
                        {
                            "event": "lost",
                            "reason": f"{ended}, and the worker does not answer: {probe.describe()}",
                            "last_heard": last_heard,
                        },
                    )
                )
                return
            self.report(f"{name}: watch interrupted ({ended}); reconnected")
        self.events.put((name, {"event": "closed"}))

    # the loop ------------------------------------------------------------------

    def run(self) -> LaunchOutcome:
        plan = self.plan
        names = plan.workers
        out = LaunchOutcome(run_id=plan.run_id, status="running", plan=plan)
        for name in names:
            threading.Thread(target=self._watch, args=(name,), daemon=True, name=f"orch-watch-{name}").start()
        ready: set[str] = set()
        started: set[str] = set()
        closed: set[str] = set()
        released = not self.release_needed
        t0 = time.monotonic()
        run_deadline = (time.monotonic() + plan.timeout) if (plan.timeout and released) else None
        teardown_reason = None
        teardown_wait_until = None

        def done() -> bool:
            if self.until == "started" and teardown_reason is None:
                return all(n in started or n in out.ends or n in closed for n in names) and len(started) == len(names)
            return all(n in out.ends or n in closed for n in names)

        def teardown(reason: str, failed: bool = True) -> None:
            if teardown_reason is None:
                # Shielded as a whole: an interrupt after teardown_reason is set but before the
                # stop went out would otherwise skip the teardown and leave the gang running.
                _shielded(lambda: _teardown(reason, failed))

        def _teardown(reason: str, failed: bool) -> None:
            nonlocal teardown_reason, teardown_wait_until
            teardown_reason = reason
            grace = min(self.grace, self.failure_grace) if failed else self.grace
            self.report(f"tearing down the gang: {reason} (TERM, KILL after {grace:g}s)")
            out.teardown = stop_workers(plan, self.transport, reason=reason, grace=grace)
            teardown_wait_until = time.monotonic() + 10.0
            problems = [
                f"{w}: "
                + (f"could not be reached ({r['error']})" if r.get("error") else f"processes {r['left']} survived KILL")
                for w, r in out.teardown["workers"].items()
                if r.get("left") or r.get("error")
            ]
            if problems:
                self.report("teardown incomplete: " + "; ".join(problems))
            else:
                self.report(f"every process of the run ended on {len(names)} workers ({out.teardown['elapsed']:.2f}s)")

        while True:
            try:
                if done():
                    break
                try:
                    name, ev = self.events.get(timeout=0.1)
                except queue.Empty:
                    name, ev = None, None
                now = time.monotonic()
                if ev is not None:
                    kind = ev.get("event")
                    if kind == "ready":
                        ready.add(name)
                    elif kind == "started":
                        started.add(name)
                        ready.add(name)
                        if ev.get("started_at"):
                            out.started_at[name] = ev["started_at"]
                        if ev.get("released_at"):
                            out.released_at[name] = ev["released_at"]
                        if ev.get("release_at"):
                            out.release_at = ev["release_at"]
                    elif kind == "exit":
                        end = _end_from_event(plan, name, ev, self.tails[name])
                        out.ends[name] = end
                        if end.failed and not end.stopped and out.failure_seen_at is None and teardown_reason is None:
                            out.failure_seen_at = time.time()
                            self.report(f"{name} (process {end.process_id}) ended first: {end.how()}")
                            teardown(f"{name} failed ({end.how()})")
                        elif end.stopped and teardown_reason is None and out.failure_seen_at is None:
                            out.failure_seen_at = time.time()
                            if end.reason.startswith("timed out"):  # the supervisor's own timeout
                                out.status = "timed-out"
                                out.message = f"the run exceeded its timeout of {plan.timeout:g}s"
                            self.report(f"{name} (process {end.process_id}) was ended: {end.reason}")
                            teardown(f"{name}: {end.reason}", failed=False)
                    elif kind == "lost":
                        if name not in out.ends:
                            # Alive until last heard from: a lost host is a cause, never a consequence.
                            out.ends[name] = WorkerEnd(
                                worker=name,
                                process_id=plan.process(name).process_id,
                                exit_code=None,
                                lost=True,
                                reason=ev.get("reason", "lost"),
                                ended_at=ev.get("last_heard") or time.time(),
                                tail="\n".join(self.tails[name]),
                            )
                            if teardown_reason is None:
                                out.failure_seen_at = time.time()
                                self.report(f"{name} lost: {ev.get('reason')}")
                                teardown(f"{name} was lost")
                    elif kind == "closed":
                        closed.add(name)
                # Start barrier: release everyone at one instant.
                if not released and teardown_reason is None and len(ready) == len(names):
                    out.ready_elapsed = now - t0
                    at = time.time() + self.release_margin
                    out.release_at = at
                    res = release(plan, self.transport, at)
                    failed = {w: r.describe() for w, r in res.items() if not r.ok}
                    released = True
                    run_deadline = (time.monotonic() + plan.timeout) if plan.timeout else None
                    if failed:
                        teardown(f"release failed on {', '.join(failed)}")
                    else:
                        self.report(f"{len(names)}/{len(names)} ready after {out.ready_elapsed:.1f}s; released")
                if not released and teardown_reason is None and now - t0 > self.start_timeout:
                    missing = [w for w in names if w not in ready]
                    out.status = "failed"
                    out.message = (
                        f"{len(ready)}/{len(names)} workers ready after {self.start_timeout:g}s; "
                        f"not ready: {', '.join(missing)} (log: {plan.process(missing[0]).run_dir}/"
                        f"output.log on {missing[0]})"
                    )
                    teardown(f"start timeout: {', '.join(missing)} not ready")
                if run_deadline is not None and teardown_reason is None and time.monotonic() > run_deadline:
                    out.status = "timed-out"
                    out.message = f"the run exceeded its timeout of {plan.timeout:g}s"
                    out.failure_seen_at = time.time()
                    teardown(f"timeout of {plan.timeout:g}s", failed=False)
                if teardown_reason is None:
                    for w in names:
                        if w not in out.ends and w not in closed and now - self.heard[w] > self.lost_after:
                            out.ends[w] = WorkerEnd(
                                worker=w,
                                process_id=plan.process(w).process_id,
                                exit_code=None,
                                lost=True,
                                reason=f"silent for {self.lost_after:g}s",
                                ended_at=self.heard_wall[w],
                                tail="\n".join(self.tails[w]),
                            )
                            out.failure_seen_at = time.time()
                            self.report(f"{w} lost: no word for {self.lost_after:g}s")
                            teardown(f"{w} was lost")
                            break
                if teardown_wait_until is not None and time.monotonic() > teardown_wait_until:
                    for w in names:
                        if w not in out.ends:
                            out.ends[w] = WorkerEnd(
                                worker=w,
                                process_id=plan.process(w).process_id,
                                exit_code=None,
                                lost=True,
                                reason="no exit report after teardown",
                            )
                    break
            except KeyboardInterrupt as exc:
                what = _interruption(exc)
                out.status = "interrupted"
                out.message = f"interrupted ({what}) on the controller"
                if teardown_reason is None:
                    out.failure_seen_at = time.time()
                    teardown(f"{what} on the controller", failed=False)
        self.closing.set()
        return self._finish(out)

    def _finish(self, out: LaunchOutcome) -> LaunchOutcome:
        """Decide the status and name the first failure (earliest end that orch did not cause)."""
        failures = [e for e in out.ends.values() if e.failed and not e.stopped]
        stopped = [e for e in out.ends.values() if e.stopped]
        if failures:
            out.first_failure = min(failures, key=lambda e: (e.ended_at or float("inf"), e.process_id))
            out.diagnosis = diagnose_tail(out.first_failure.tail)
        if out.status == "running":  # not already timed-out, interrupted or failed to start
            if out.first_failure is not None:
                out.status = "failed"
            elif stopped:
                out.status = "stopped"
            elif self.until == "started" and out.teardown is None:
                out.status = "detached"
            else:
                out.status = "succeeded"
        f = out.first_failure
        if out.status == "failed" and f is not None:
            out.message = f"{f.worker} (process {f.process_id}) failed first: {f.how()}" + (
                f"; {f.reason}" if f.reason and not f.lost and f.reason not in f.how() else ""
            )
        elif out.status == "stopped":
            first = min(stopped, key=lambda e: e.ended_at or float("inf"))
            out.message = f"{first.worker}: {first.reason}"
        elif out.status == "detached":
            out.message = f"run {out.run_id} started on {out.plan.num_processes} workers"
        elif out.status == "succeeded":
            out.message = f"all {out.plan.num_processes} processes exited 0"
        return out


def _end_from_event(plan: LaunchPlan, name: str, ev: dict, tail: deque) -> WorkerEnd:
    return WorkerEnd(
        worker=name,
        process_id=plan.process(name).process_id,
        exit_code=ev.get("exit_code"),
        signal=ev.get("signal"),
        signal_name=ev.get("signal_name"),
        reason=ev.get("reason", ""),
        stopped=bool(ev.get("stopped")),
        lost=bool(ev.get("lost")),
        ended_at=ev.get("ended_at"),
        tail=ev.get("tail") or "\n".join(tail),
    )


def diagnose_tail(text: str) -> dict | None:
    """The diagnosis of a failing worker's log tail (the probe's signature table), if any."""
    if not text:
        return None
    try:
        from orchestrator.diagnose import diagnose
    except ImportError:
        return None
    finding = diagnose(text)
    if finding is None:
        return None
    return {"layer": finding.layer, "line": finding.line, "remedy": finding.remedy}


def monitor(
    plan: LaunchPlan,
    transport: Transport,
    *,
    on_output: OutputFn | None = None,
    report: ReportFn = _quiet,
    grace: float = DEFAULT_GRACE,
    failure_grace: float = DEFAULT_FAILURE_GRACE,
    start_timeout: float = DEFAULT_START_TIMEOUT,
    lost_after: float = DEFAULT_LOST_AFTER,
    until: str = "exit",
    from_end: bool = False,
    release_needed: bool = True,
    release_margin: float = RELEASE_MARGIN,
) -> LaunchOutcome:
    """Watch a started run under the gang rule until every worker ended (or, `until="started"`, started)."""
    gang = _Gang(
        plan,
        transport,
        on_output=on_output,
        report=report,
        grace=grace,
        failure_grace=failure_grace,
        start_timeout=start_timeout,
        lost_after=lost_after,
        until=until,
        from_end=from_end,
        release_needed=release_needed,
        release_margin=release_margin,
    )
    return gang.run()


def execute(
    plan: LaunchPlan,
    transport: Transport,
    *,
    reclaim: bool = False,
    detach: bool = False,
    on_output: OutputFn | None = None,
    report: ReportFn = _quiet,
    grace: float = DEFAULT_GRACE,
    failure_grace: float = DEFAULT_FAILURE_GRACE,
    start_timeout: float = DEFAULT_START_TIMEOUT,
    lost_after: float = DEFAULT_LOST_AFTER,
    release_margin: float = RELEASE_MARGIN,
    record=None,
) -> LaunchOutcome:
    """Carry out `plan` on the workers of `transport`: sync, preflight, start together, watch as a gang.

    Raises LaunchError when preflight or the start refuses (nothing is left
    running then); otherwise returns the outcome, which names the first
    failing worker. `record` (a runs.RunRecord) keeps the controller's copy.
    """
    from orchestrator import runs

    record = record or runs.RunRecord.create(plan)
    record.update(state="preflight")
    try:
        if plan.workdir:
            sync_workdir(plan, transport, report)
        pf = preflight(plan, transport, reclaim=reclaim, grace=grace)
        for line in pf.reclaimed:
            report(line)
        for line in pf.warnings:
            report(f"warning: {line}")
        if pf.problems:
            record.update(state="refused", problems=pf.problems)
            raise LaunchError(
                f"preflight refused run {plan.run_id} on lane '{plan.lane}' "
                f"({len(pf.problems)} problem{'s' if len(pf.problems) != 1 else ''}):\n  - "
                + "\n  - ".join(pf.problems)
            )
        if pf.suggested_ports:
            report(
                f"coordinator port {plan.coordinator_port} is taken on {plan.processes[0].worker}; "
                f"using {pf.suggested_ports[0]}"
            )
            plan = with_ports(plan, pf.suggested_ports[0])
            record.save_plan(plan)
        bundle = next(iter(pf.bundles.values()), None)
        record.update(state="starting", bundle_env=bundle)
        report(
            f"preflight ok on {plan.num_processes} workers (bundle {os.path.basename(bundle or '?')}); "
            f"coordinator {plan.coordinator}"
        )
    except KeyboardInterrupt:
        record.update(state="interrupted")
        raise LaunchError("interrupted during preflight; nothing was started") from None

    try:
        started = start_workers(plan, transport, grace=grace, ready_timeout=start_timeout)
        bad = {}
        for name, res in started.items():
            doc = _doc(res)
            if doc is None or not doc.get("ok"):
                bad[name] = (doc or {}).get("error") or res.describe()
        if bad:
            stop_workers(plan, transport, reason="the start failed on another worker", grace=grace)
            record.update(state="start-failed", problems=[f"{w}: {m}" for w, m in bad.items()])
            raise LaunchError(
                "the run could not be started on every worker (nothing is left running):\n  - "
                + "\n  - ".join(f"{w}: {m}" for w, m in bad.items())
            )
        record.update(state="started", pids={w: _doc(r) for w, r in started.items()})
        outcome = monitor(
            plan,
            transport,
            on_output=on_output,
            report=report,
            grace=grace,
            failure_grace=failure_grace,
            start_timeout=start_timeout,
            lost_after=lost_after,
            until="started" if detach else "exit",
            release_margin=release_margin,
        )
    except KeyboardInterrupt as exc:
        outcome = interrupted(plan, transport, exc, grace=grace)
    return finish(plan, transport, outcome, record)


def finish(plan: LaunchPlan, transport: Transport, outcome: LaunchOutcome, record) -> LaunchOutcome:
    """Save the outcome (and, unless detached, every worker's record) in the controller's run record."""
    outcome.run_dir = str(record.dir)
    if outcome.status != "detached":
        records = _shielded(lambda: collect_records(plan, transport))
        record.save_workers(records)
        for name, doc in records.items():
            rec = (doc or {}).get("record") or {}
            if rec.get("released_at") and name not in outcome.released_at:
                outcome.released_at[name] = rec["released_at"]
            if rec.get("started_at") and name not in outcome.started_at:
                outcome.started_at[name] = rec["started_at"]
    record.update(state=outcome.status, outcome=outcome.to_dict(), ended_at=time.time())
    return outcome
