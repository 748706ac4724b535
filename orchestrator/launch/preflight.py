"""Preflight, all-or-nothing: every worker's reply is gathered, then judged as data.

`preflight(plan, transport)` is the thin call that asks every worker
(hostside/launch_preflight.py); `judge(plan, replies)` is the pure decision
over what they answered: problems refuse the launch, warnings are reported,
and a taken coordinator port may be replaced by one the workers suggest.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hostside.layout import LIBTPU_LOCKFILE
from orchestrator.fleet import WorkerRef
from orchestrator.launch.control import reply
from orchestrator.launch.plan import LaunchPlan
from orchestrator.launch.timing import DEFAULT_GRACE
from orchestrator.remote import run_hostside
from orchestrator.transport import Result, Transport

Doc = dict[str, Any]


@dataclass
class Preflight:
    """What preflight found on every worker (all-or-nothing)."""

    problems: list[str]
    warnings: list[str]
    reclaimed: list[str]
    bundles: dict[str, str | None]
    suggested_ports: list[int] | None
    docs: dict[str, Doc]


@dataclass(frozen=True)
class Reply:
    """One worker's preflight answer: its document, or what came back instead."""

    doc: Doc | None
    failure: str = ""


def preflight(
    plan: LaunchPlan, transport: Transport, *, reclaim: bool = False, grace: float = DEFAULT_GRACE
) -> Preflight:
    """Check every worker before anything starts; with `reclaim`, first end earlier orch runs' processes."""

    def one(worker: WorkerRef) -> Result:
        args = preflight_args(plan, worker, reclaim=reclaim, grace=grace)
        return run_hostside(transport, worker, "launch_preflight", args, timeout=60 + 2 * grace)

    results = transport.map(one, plan.workers)
    return judge(plan, {name: Reply(reply(res), res.describe()) for name, res in results.items()})


def preflight_args(plan: LaunchPlan, worker: WorkerRef, *, reclaim: bool, grace: float) -> list[str]:
    """The hostside preflight's command line for one worker (process 0 also checks the ports)."""
    args = ["--root", worker.root, "--lane", plan.lane, "--run-id", plan.run_id]
    args += ["--grace", f"{grace:g}", "--lockfile", LIBTPU_LOCKFILE]
    if plan.process(worker.name).process_id == 0:
        args += ["--port", str(plan.coordinator_port), "--port", str(plan.master_port)]
    if reclaim:
        args.append("--reclaim")
    return args


def judge(plan: LaunchPlan, replies: Mapping[str, Reply]) -> Preflight:
    """The preflight verdict over every worker's reply (pure)."""
    docs = {name: r.doc for name, r in replies.items() if r.doc is not None}
    problems = [f"{name}: preflight did not run: {r.failure}" for name, r in replies.items() if r.doc is None]
    bundles = active_bundles(docs)
    problems += bundle_problems(plan, docs)
    mixed = mixed_stack(plan, bundles)
    if mixed:
        problems.append(mixed)
    reclaimed: list[str] = []
    warnings: list[str] = []
    for name, doc in docs.items():
        reclaimed += reclaim_lines(name, doc)
        problems += leftover_problems(name, doc) + holder_problems(name, doc)
        warnings += earlier_run_warnings(name, doc)
    port_problems, suggested = port_verdict(plan, docs)
    return Preflight(
        problems=problems + port_problems,
        warnings=warnings,
        reclaimed=reclaimed,
        bundles=bundles,
        suggested_ports=suggested,
        docs=docs,
    )


def active_bundles(docs: Mapping[str, Doc]) -> dict[str, str | None]:
    """Each worker's active bundle environment (None when the lane has none there)."""
    return {name: (doc["active"]["target"] if doc["active"]["exists"] else None) for name, doc in docs.items()}


def bundle_problems(plan: LaunchPlan, docs: Mapping[str, Doc]) -> list[str]:
    """Workers without an active bundle, or whose bundle has no Python."""
    out = []
    for name, doc in docs.items():
        active = doc["active"]
        if not active["exists"]:
            out.append(
                f"{name}: lane '{plan.lane}' has no active bundle ({active['path']} is missing); "
                f"deploy it first: orch deploy --lane {plan.lane}"
            )
        elif not active["python_ok"]:
            out.append(f"{name}: the active bundle {active['target']} has no Python at {active['python']}")
    return out


def mixed_stack(plan: LaunchPlan, bundles: Mapping[str, str | None]) -> str | None:
    """A problem when the workers run different bundles (one gang runs one bundle)."""
    groups: dict[str, list[str]] = {}
    for name, target in bundles.items():
        if target:
            groups.setdefault(target, []).append(name)
    if len(groups) <= 1:
        return None
    ranked = sorted(groups.items(), key=lambda kv: -len(kv[1]))
    parts = [f"{', '.join(ws)} run{'s' if len(ws) == 1 else ''} {os.path.basename(t)} ({t})" for t, ws in ranked]
    return (
        f"lane '{plan.lane}' has a mixed stack: "
        + "; ".join(parts)
        + f". One gang runs one bundle: deploy the same bundle to every worker "
        f"(orch deploy --lane {plan.lane}) or narrow the lane"
    )


def reclaim_lines(name: str, doc: Doc) -> list[str]:
    """What `--reclaim` ended on this worker."""
    return [
        f"{name}: ended {len(run['term'])} process(es) of earlier run {run['run_id']}"
        + (f" ({len(run['kill'])} needed KILL)" if run["kill"] else "")
        + (f"; still alive: {run['left']}" if run["left"] else "")
        for run in doc.get("reclaimed", [])
    ]


def leftover_problems(name: str, doc: Doc) -> list[str]:
    """Processes of earlier runs that `--reclaim` could not end."""
    return [
        f"{name}: could not end processes {run['left']} of earlier run {run['run_id']}"
        for run in doc.get("reclaimed", [])
        if run["left"]
    ]


def holder_problems(name: str, doc: Doc) -> list[str]:
    """Foreign holders of the libtpu lockfile or of a TPU chip."""
    out = [
        f"{name}: {doc['lockfile']} is locked by pid {h['pid']} ({h['command'] or '?'})" + owner_hint(h)
        for h in doc.get("lock_holders", [])
    ]
    out += [
        f"{name}: TPU device {', '.join(h['devices'])} is held by pid {h['pid']} ({h['command'] or '?'})"
        + owner_hint(h)
        for h in doc.get("device_holders", [])
    ]
    return out


def earlier_run_warnings(name: str, doc: Doc) -> list[str]:
    """Earlier runs that still have processes on this worker (a warning, not a refusal)."""
    out = []
    for run in doc.get("earlier_runs", []):
        procs = run["processes"]
        if procs:
            out.append(
                f"{name}: earlier run {run['run_id']} still has {len(procs)} process(es) "
                f"(pid {', '.join(str(p['pid']) for p in procs[:5])}); "
                f"`orch stop {run['run_id']}` or --reclaim ends them"
            )
    return out


def port_verdict(plan: LaunchPlan, docs: Mapping[str, Doc]) -> tuple[list[str], list[int] | None]:
    """A taken coordinator port refuses the launch when it was given (or no other is free);
    otherwise the workers' suggested ports replace it."""
    problems: list[str] = []
    suggested = None
    for name, doc in docs.items():
        busy = [p for p in doc.get("ports", []) if not p["free"]]
        if not busy:
            continue
        if plan.port_given or not doc.get("suggested_ports"):
            problems.append(
                f"{name}: coordinator port {', '.join(str(p['port']) for p in busy)} is taken "
                f"({busy[0]['error']}); choose another with --port"
            )
        else:
            suggested = doc["suggested_ports"]
    return problems, suggested


def owner_hint(holder: Doc) -> str:
    """How to end a holder: an orch run's process names its run; a foreign one is left to the operator."""
    run = holder.get("orch_run")
    if run:
        return f"; it is a process of orch run {run}: end it with `orch stop {run}` or launch with --reclaim"
    return "; not started by orch, so --reclaim leaves it alone: end it yourself if it is stale"


REACH_DEADLINE = 5.0  # seconds a peer keeps trying to connect
REACH_LISTEN_SLACK = 2.0  # the listener waits this much longer, for peers whose SSH session started late


def reach(plan: LaunchPlan, transport: Transport, *, deadline: float = REACH_DEADLINE) -> list[str]:
    """Every worker proves it can connect to process 0's coordinator and MEGASCALE ports (problems, or [])."""
    ports = reach_ports(plan)
    first = plan.processes[0]
    targets = [f"{first.address}:{port}" for port, _ in ports]

    def one(worker: WorkerRef) -> Result:
        if worker.name == first.worker:
            args = [arg for port, _ in ports for arg in ("--listen", str(port))]
            args += ["--expect", str(plan.num_processes - 1), "--deadline", f"{deadline + REACH_LISTEN_SLACK:g}"]
        else:
            args = [arg for target in targets for arg in ("--connect", target)]
            args += ["--deadline", f"{deadline:g}"]
        return run_hostside(transport, worker, "launch_reach", args, timeout=deadline + 30)

    results = transport.map(one, plan.workers)
    return reach_verdict(plan, {name: Reply(reply(res), res.describe()) for name, res in results.items()}, deadline)


def reach_ports(plan: LaunchPlan) -> list[tuple[int, str]]:
    """(port, what it is) that every process must reach on process 0."""
    ports = [(plan.coordinator_port, "JAX coordinator")]
    if plan.megascale_port is not None:
        ports.append((plan.megascale_port, "MEGASCALE"))
    return ports


def reach_verdict(plan: LaunchPlan, replies: Mapping[str, Reply], deadline: float) -> list[str]:
    """What blocks the gang's own network paths, per worker and port (pure)."""
    names = dict(reach_ports(plan))
    first = plan.processes[0]
    problems = []
    for name, r in replies.items():
        if r.doc is None:
            problems.append(f"{name}: the network check did not run: {r.failure}")
            continue
        for err in r.doc.get("listen_errors") or []:
            what = names.get(err.get("port"), "gang")
            problems.append(
                f"{name}: cannot listen on the {what} port {err.get('port')} ({err.get('error')}); "
                f"something else holds it on process 0's worker"
            )
        for hit in r.doc.get("reached") or []:
            if hit.get("ok"):
                continue
            port = int(str(hit.get("target", "")).rpartition(":")[2] or 0)
            what = names.get(port, "gang")
            problems.append(
                f"{name}: cannot reach the {what} port {hit.get('target')} on {first.worker} "
                f"within {deadline:g}s ({hit.get('error')}); layer network: a firewall rule or route "
                f"between the workers blocks it (the run would hang in initialisation)"
            )
    return problems
