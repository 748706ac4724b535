"""The launch plan: pure, decided before any worker is touched.

`plan_launch(fleet, lane, argv)` decides everything up front, without I/O: the
run id; per worker its process id (its position in the lane, which is the
worker index for a lane over the whole slice), the coordinator (process 0's
internal address and a port derived from the run id), and the complete
environment the hostside launcher applies before importing any frontend. That
plan is what `--dry-run` prints, what the run record keeps, and what every
later step (preflight, start, the gang, stop, attach) works from.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hostside import redact
from hostside.folklore import FOLKLORE_VARS
from hostside.frontends import bundle_frontends
from hostside.gang_env import ORCH_VARS as ORCH_VARS  # re-exported: the names a profile may not set
from hostside.gang_env import process_env
from hostside.layout import Layout
from hostside.pins import project_name
from orchestrator.cache import describe as describe_cache
from orchestrator.cache import launch_cache
from orchestrator.errors import ConfigError, LaunchError
from orchestrator.fleet import Fleet
from orchestrator.launch.timing import DEFAULT_GRACE, DEFAULT_START_TIMEOUT
from orchestrator.policy import TOPOLOGY_VARS, runtime_policy

SCHEMA_VERSION = 1
PORT_BASE = 20000
PORT_SPAN = 10000


@dataclass(frozen=True)
class Target:
    """What runs: a script path or a module, with its arguments."""

    kind: str  # "script" | "module"
    path: str | None
    module: str | None
    args: tuple[str, ...]

    def argv(self) -> list[str]:
        if self.kind == "module":
            return ["-m", str(self.module), *self.args]
        return [str(self.path), *self.args]

    def shown_argv(self) -> list[str]:
        """`argv()` as it may be written down or shown: credentials redacted (hostside.redact.argv)."""
        return redact.argv(self.argv())

    def to_dict(self, *, redacted: bool = True) -> dict[str, Any]:
        """The target as recorded (arguments redacted), or as the worker runs it (`redacted=False`)."""
        args = redact.argv(self.args) if redacted else list(self.args)
        return {"kind": self.kind, "path": self.path, "module": self.module, "args": args}


@dataclass(frozen=True)
class ContractStep:
    """One step of the lane's start-up contract, performed by the launcher before user code."""

    frontend: str
    action: str
    detail: str

    def to_dict(self) -> dict[str, Any]:
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
    slice: str = ""  # the worker's slice (records before multislice lanes have none)

    def to_dict(self) -> dict[str, Any]:
        return {
            "process_id": self.process_id,
            "worker": self.worker,
            "slice": self.slice,
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
    slices: tuple[str, ...] = ()  # every slice of the lane in process order; () reads as (slice,)
    megascale_port: int | None = None  # multislice lanes only

    @property
    def num_processes(self) -> int:
        return len(self.processes)

    @property
    def all_slices(self) -> tuple[str, ...]:
        return self.slices or (self.slice,)

    @property
    def multislice(self) -> bool:
        return len(self.all_slices) > 1

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
    ) -> dict[str, Any]:
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
            "slice": p.slice or self.slice,
            "slice_id": self.all_slices.index(p.slice) if p.slice in self.all_slices else 0,
            "num_slices": len(self.all_slices),
            "process_id": p.process_id,
            "num_processes": self.num_processes,
            "coordinator": self.coordinator,
            "address": p.address,
            "run_dir": p.run_dir,
            "python": p.python,
            "cwd": self.workdir.remote if self.workdir else None,
            "env": dict(p.env),
            # inherited topology a worker's login environment may hold: removed before `env` is set
            "unset": [v for v in TOPOLOGY_VARS if v not in p.env],
            "forbid": list(self.forbid),
            "frontends": list(self.frontends),
            "contract": [c.to_dict() for c in self.contract],
            # the real arguments to run, and what the receipt may record of them
            "target": {**self.target.to_dict(redacted=False), "shown_args": redact.argv(self.target.args)},
            "distributions": list(self.distributions),
            "cache": dict(self.cache),
            "timeout": self.timeout,
            "grace": grace,
            "ready_timeout": ready_timeout,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "name": self.name,
            "lane": self.lane,
            "slice": self.slice,
            "slices": list(self.all_slices),
            "megascale_port": self.megascale_port,
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
    def from_dict(cls, doc: dict[str, Any]) -> LaunchPlan:
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
            slices=tuple(doc.get("slices") or (doc["slice"],)),
            megascale_port=doc.get("megascale_port"),
        )


def new_run_id(stem: str, now: float | None = None) -> str:
    """`<stem>-<YYYYmmdd-HHMMSS>-<4 hex>`: sortable, readable, unique enough per controller."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now if now is not None else time.time()))
    return f"{stem}-{stamp}-{secrets.token_hex(2)}"


def run_stem(target: Target, name: str | None) -> str:
    raw = name or (str(target.module).rsplit(".", 1)[-1] if target.kind == "module" else Path(str(target.path)).stem)
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


def startup_contract(frontends: Sequence[str], platform: str) -> tuple[ContractStep, ...]:
    """The steps the launcher takes before user code, per frontend (torch_tpu needs none beyond its import)."""
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
    restart_count: int = 0,
    max_restarts: int = 0,
) -> LaunchPlan:
    """The complete launch of `argv` on `lane`: pure, no worker is contacted.

    `restart_count` and `max_restarts` are the gang's restarts so far and allowed (`--max-restarts`),
    as torchrun's agent reports them (TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS).
    """
    lane_model = fleet.lane(lane)
    workers = fleet.lane_workers(lane)
    if not workers:
        raise ConfigError(f"{fleet.path.name}: lane '{lane}' has no workers")
    slices = fleet.lane_slices(lane)
    bundle = fleet.bundle(lane_model.bundle)
    profile = fleet.runtime_profile(lane)
    target = parse_target(argv)
    extra_env = dict(extra_env or {})
    forbid = tuple(dict.fromkeys([*profile.forbid, *FOLKLORE_VARS]))
    check_extra_env(extra_env, forbid, profile.env, lane_model.runtime)
    if timeout is not None and timeout <= 0:
        raise LaunchError(f"--timeout must be positive, got {timeout:g}")
    wd, target = place_workdir(workdir, workers[0].root, target)
    run_id = run_id or new_run_id(run_stem(target, name))
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", run_id):
        raise LaunchError(f"run id {run_id!r}: use letters, digits, '.', '_' and '-'")
    coord_port = port if port is not None else default_port(run_id)
    if not 1024 <= coord_port <= 65534:
        raise LaunchError(f"--port {coord_port}: expected 1024..65534 (the next port is torch's MASTER_PORT)")
    coordinator = workers[0].internal_address
    processes = []
    for pid, w in enumerate(workers):
        layout = Layout(w.root)
        env = {
            **runtime_policy(fleet, lane, w).env,
            **extra_env,
            **process_env(
                run_id,
                lane,
                w.name,
                pid,
                len(workers),
                coordinator,
                coord_port,
                restart_count=restart_count,
                max_restarts=max_restarts,
            ),
        }
        processes.append(
            ProcessPlan(
                process_id=pid,
                worker=w.name,
                index=w.index,
                address=w.internal_address,
                python=layout.active_python(lane),
                run_dir=layout.run_dir(run_id),
                env=env,
                slice=w.slice,
            )
        )
    frontends = bundle_frontends(bundle.pins)
    return LaunchPlan(
        run_id=run_id,
        name=name,
        lane=lane,
        slice=slices[0],
        bundle=lane_model.bundle,
        platform=lane_model.platform,
        profile=lane_model.runtime,
        distributions=tuple(project_name(pin) for pin in bundle.pins),
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
        slices=tuple(slices),
        megascale_port=lane_model.megascale_port if len(slices) > 1 else None,
    )


def check_extra_env(
    extra_env: Mapping[str, str], forbid: Sequence[str], profile_env: Mapping[str, str], runtime: str | None
) -> None:
    """Refuse `--env` names that are invalid, forbidden (folklore, the profile's list) or orch's own."""
    for key in extra_env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise LaunchError(f"--env {key!r}: not a valid variable name")
        if key in forbid:
            why = FOLKLORE_VARS.get(key, f"is forbidden by runtime profile '{runtime}'")
            raise LaunchError(f"--env {key}: {key} {why}")
    owned = [k for k in ORCH_VARS if k in profile_env or k in extra_env]
    if owned:
        where = "--env" if any(k in extra_env for k in owned) else f"runtime profile '{runtime}'"
        raise LaunchError(f"{where} sets {', '.join(owned)}, which orch launch sets for every process")


def place_workdir(workdir: str | None, root: str, target: Target) -> tuple[Workdir | None, Target]:
    """Where `--workdir` lives on the workers, and the script path made relative to it."""
    if workdir is None:
        return None, target
    local = os.path.abspath(workdir)
    tag = hashlib.sha256(local.encode()).hexdigest()[:8]
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", os.path.basename(local.rstrip("/"))) or "code"
    wd = Workdir(local=local, remote=f"{root}/code/{base}-{tag}")
    if target.kind == "script" and target.path and os.path.isabs(target.path):
        rel = os.path.relpath(target.path, local)
        if rel.startswith(".."):
            raise LaunchError(f"script {target.path} is not inside --workdir {local}")
        target = replace(target, path=rel)
    return wd, target


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
        f"lane         {plan.lane}: bundle {plan.bundle}, platform {plan.platform}, "
        + (
            f"{len(plan.all_slices)} slices {', '.join(plan.all_slices)} (multislice, MEGASCALE port "
            f"{plan.megascale_port}), "
            if plan.multislice
            else f"slice {plan.slice}, "
        )
        + f"{plan.num_processes} processes",
        f"program      {' '.join(plan.target.shown_argv())}",
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
        f"  3. cache-init   {describe_cache(dict(plan.cache))}",
        "  4. ready        every process waits; all are released at one instant",
    ]
    n = 5
    for step in plan.contract:
        lines.append(f"  {n}. {step.frontend:<12} {step.detail}")
        n += 1
    lines += [f"  {n}. user code    {' '.join(plan.target.shown_argv())}", "", "environment (every process):"]
    lines += [f"  {k}={v}" for k, v in sorted(common.items())]
    lines += ["", "processes:"]
    for p in procs:
        where = f"  slice {p.slice}" if plan.multislice else ""
        lines.append(f"  {p.process_id}  {p.worker}  {p.address}{where}  run dir {p.run_dir}")
        if python.startswith("("):
            lines.append(f"     python {p.python}")
        lines.append("     " + " ".join(f"{k}={p.env[k]}" for k in varying))
    return "\n".join(lines) + "\n"
