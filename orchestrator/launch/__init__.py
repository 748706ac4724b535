"""Coordinated multi-host launch: a pure plan, then an all-or-nothing execution as a gang.

The package, bottom to top (each module imports only those above it in this list):

    timing      LaunchTiming, the frozen timing policy (grace, timeouts, silence)
    plan        the pure plan: Target, LaunchPlan, plan_launch, render_plan, run ids, ports
    outcome     WorkerEnd, LaunchOutcome, and how an outcome is concluded
    signals     Ctrl-C, SIGTERM, SIGHUP: interrupts, shielded and deferred sections
    control     worker control: start, release, stop, status, the workers' records
    workdir     --workdir sync
    preflight   the preflight judge (pure) and the call that gathers the workers' replies
    gang        the gang rule as a pure state machine: step(state, event) -> (state, decisions)
    driver      threads, SSH and the clock around the gang: monitor()
    lifecycle   execute(): sync, preflight, start, watch, record
    recorded    status, stop and attach of a recorded run

orchestrator/runs.py (the run-record store) imports `plan` only. This module
re-exports the names code outside the package uses; those from the driver and
above are loaded on first use, so importing the plan never imports the gang
(nor, through it, runs.py: no import circle).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hostside.frontends import bundle_frontends
from orchestrator.launch.outcome import LaunchOutcome, WorkerEnd, diagnose_tail
from orchestrator.launch.plan import (
    ORCH_VARS,
    PORT_BASE,
    PORT_SPAN,
    SCHEMA_VERSION,
    ContractStep,
    LaunchPlan,
    ProcessPlan,
    Target,
    Workdir,
    default_port,
    new_run_id,
    parse_target,
    plan_launch,
    render_plan,
    run_stem,
    startup_contract,
    with_ports,
)
from orchestrator.launch.signals import interrupt_on_termination, interruption, never_raising, shielded
from orchestrator.launch.timing import (
    DEFAULT_FAILURE_GRACE,
    DEFAULT_GRACE,
    DEFAULT_LOST_AFTER,
    DEFAULT_START_TIMEOUT,
    RELEASE_MARGIN,
    LaunchTiming,
)

if TYPE_CHECKING:
    from orchestrator.launch.control import (
        OutputFn,
        ReportFn,
        collect_records,
        release,
        start_workers,
        stop_workers,
        worker_status,
    )
    from orchestrator.launch.driver import TAIL_KEEP, WATCH_FOREVER, monitor
    from orchestrator.launch.lifecycle import execute, finish, interrupted
    from orchestrator.launch.preflight import Preflight, preflight
    from orchestrator.launch.workdir import sync_workdir

# Names loaded on first use, and the module that holds each.
_LAZY = {
    "OutputFn": "control",
    "ReportFn": "control",
    "collect_records": "control",
    "release": "control",
    "start_workers": "control",
    "stop_workers": "control",
    "worker_status": "control",
    "monitor": "driver",
    "TAIL_KEEP": "driver",
    "WATCH_FOREVER": "driver",
    "execute": "lifecycle",
    "finish": "lifecycle",
    "interrupted": "lifecycle",
    "Preflight": "preflight",
    "preflight": "preflight",
    "sync_workdir": "workdir",
}

# The old private names, for code that still uses them.
_shielded = shielded
_interruption = interruption
_never_raising = never_raising


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'orchestrator.launch' has no attribute {name!r}")
    return getattr(importlib.import_module(f"orchestrator.launch.{module}"), name)


__all__ = [
    "DEFAULT_FAILURE_GRACE",
    "DEFAULT_GRACE",
    "DEFAULT_LOST_AFTER",
    "DEFAULT_START_TIMEOUT",
    "ORCH_VARS",
    "PORT_BASE",
    "PORT_SPAN",
    "RELEASE_MARGIN",
    "SCHEMA_VERSION",
    "TAIL_KEEP",
    "WATCH_FOREVER",
    "ContractStep",
    "LaunchOutcome",
    "LaunchPlan",
    "LaunchTiming",
    "OutputFn",
    "Preflight",
    "ProcessPlan",
    "ReportFn",
    "Target",
    "WorkerEnd",
    "Workdir",
    "bundle_frontends",
    "collect_records",
    "default_port",
    "diagnose_tail",
    "execute",
    "finish",
    "interrupt_on_termination",
    "interrupted",
    "interruption",
    "monitor",
    "never_raising",
    "new_run_id",
    "parse_target",
    "plan_launch",
    "preflight",
    "release",
    "render_plan",
    "run_stem",
    "startup_contract",
    "shielded",
    "start_workers",
    "stop_workers",
    "sync_workdir",
    "with_ports",
    "worker_status",
]
