"""Bring a sandbox up, take it down, and say what runs: the commands `orch sandbox` runs."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import orchestrator.sandbox.files as files
import orchestrator.sandbox.machine as machine
import orchestrator.sandbox.namespaces as namespaces
import orchestrator.sandbox.sshd as sshd
from orchestrator.errors import SandboxError
from orchestrator.sandbox.spec import (
    DEFAULT_BASE_ADDRESS,
    PORT,
    READY_TIMEOUT,
    LaneSpec,
    Shape,
    check_dir,
    plan_lanes,
    slice_names,
    worker_addresses,
    worker_names,
)
from orchestrator.sandbox.state import (
    DownResult,
    SandboxState,
    SandboxStatus,
    WorkerState,
    WorkerStatus,
    locked,
    read_state,
    write_state,
)


def up(
    dir: str | os.PathLike[str],
    workers: int,
    lanes: Sequence[LaneSpec | str] | None = None,
    base_address: str = DEFAULT_BASE_ADDRESS,
    *,
    port: int = PORT,
    timeout: float = READY_TIMEOUT,
    slices: int = 1,
) -> SandboxState:
    """Start a local slice of `workers` sshd workers in `dir` and write `dir/fleet.yaml`.

    With `slices` > 1 there are that many slices of `workers` each, on
    consecutive address ranges, joined by one multislice lane.
    Running it again with the same shape changes nothing (workers found dead
    are started again); a different shape is refused until `down`.
    """
    path = check_dir(dir)
    names = slice_names(slices)
    total = workers * slices
    addresses = worker_addresses(base_address, total)
    specs = plan_lanes(total, lanes, slices)
    shape = Shape(total, specs, base_address, port, slices)
    machine.preflight()
    path.mkdir(parents=True, exist_ok=True)
    with locked(path):
        state = read_state(path)
        if state is not None and any(namespaces.alive(w) for w in state.workers):
            if state.shape != shape:
                raise SandboxError(
                    f"a sandbox is already running in {path} ({state.shape}); asked for {shape}",
                    hint=f"run `orch sandbox down --dir {path}` first",
                )
            return _restart_dead(path, state, timeout)
        _teardown(path, state)
        machine.check_addresses(addresses, port, workers)
        try:
            started = _start(path, addresses, specs, port, timeout, slices)
        except BaseException:
            _teardown(path, read_state(path))
            raise
        state = SandboxState(
            dir=str(path),
            slice=names[0],
            slices=slices,
            base_address=base_address,
            port=port,
            lanes=specs,
            workers=tuple(started),
            fleet_path=str(path / "fleet.yaml"),
            started_at=time.time(),
        )
        write_state(state)
        return state


def _start(
    path: Path, addresses: Sequence[str], lanes: Sequence[LaneSpec], port: int, timeout: float, slices: int
) -> list[WorkerState]:
    files.prepare(path, addresses, lanes, port, slices)
    names = worker_names(len(addresses), slices)
    for name, address in zip(names, addresses, strict=True):
        sshd.start_worker(path, name, address, port)
    wanted = {name: (i, a) for i, (name, a) in enumerate(zip(names, addresses, strict=True))}
    return sshd.wait_ready(path, wanted, port, timeout)


def _restart_dead(dir: Path, state: SandboxState, timeout: float) -> SandboxState:
    dead = [w for w in state.workers if not namespaces.alive(w)]
    if not dead:
        return replace(state, already_running=True)
    for w in dead:
        namespaces.kill_all(w)  # leftovers in its old namespaces
    busy = [w for w in dead if not machine.address_free(w.address, w.port)]
    if busy:
        raise SandboxError(
            f"cannot restart {', '.join(w.name for w in busy)}: "
            f"{', '.join(f'{w.address}:{w.port}' for w in busy)} taken by another process",
            hint=f"run `orch sandbox down --dir {dir}` first",
        )
    for w in dead:
        sshd.start_worker(dir, w.name, w.address, w.port)
    fresh = sshd.wait_ready(dir, {w.name: (w.index, w.address) for w in dead}, state.port, timeout)
    new = state.with_workers(tuple(fresh))
    write_state(new)
    return replace(new, already_running=True, restarted=tuple(w.name for w in fresh))


def _teardown(dir: Path, state: SandboxState | None) -> tuple[list[str], int, list[str]]:
    """Kill every worker process of `dir` (known or stray) and remove what `up` created."""
    stopped, killed = [], 0
    known = list(state.workers) if state else []
    for w in known:
        pids = namespaces.kill_all(w)
        if pids:
            stopped.append(w.name)
            killed += len(pids)
    for pid in namespaces.stray_sshds(dir, [w.pid for w in known]):
        stray = namespaces.as_worker_state(pid)
        if stray is not None:
            killed += len(namespaces.kill_all(stray))
    return stopped, killed, files.remove_owned(dir)


def down(dir: str | os.PathLike[str]) -> DownResult:
    """Stop every worker and everything running on it, and remove the sandbox's files.

    Worker roots, /tmp copies, homes and the shared directory go too (they may
    hold GBs of environments and caches). Other files in `dir` are kept; `dir`
    itself is removed when empty. `down` on nothing is fine.
    """
    path = check_dir(dir)
    if not path.is_dir():
        return DownResult(dir=str(path), stopped=(), killed=0)
    with locked(path):
        stopped, killed, removed = _teardown(path, read_state(path))
    try:
        path.rmdir()
    except OSError:
        pass
    return DownResult(dir=str(path), stopped=tuple(stopped), killed=killed, removed=tuple(removed))


def status(dir: str | os.PathLike[str]) -> SandboxStatus:
    """Each worker's state now: running, paused or dead."""
    path = check_dir(dir)
    state = read_state(path) if path.is_dir() else None
    if state is None:
        return SandboxStatus(dir=str(path), fleet_path=None, workers=())
    procs = namespaces.processes()
    rows = tuple(_worker_status(w, procs) for w in state.workers)
    return SandboxStatus(dir=str(path), fleet_path=state.fleet_path, workers=rows)


def _worker_status(w: WorkerState, procs: namespaces.Processes) -> WorkerStatus:
    info = namespaces.alive(w, procs)
    if info is None:
        condition = "dead"
    elif info.state in ("T", "t"):
        condition = "paused"
    else:
        condition = "running"
    return WorkerStatus(
        name=w.name,
        index=w.index,
        address=w.address,
        port=w.port,
        hostname=w.hostname,
        pid=w.pid,
        state=condition,
        processes=len(namespaces.worker_processes(w, procs)),
    )


def load_state(dir: str | os.PathLike[str]) -> SandboxState:
    """The running sandbox's state, or SandboxError when there is none."""
    path = check_dir(dir)
    state = read_state(path) if path.is_dir() else None
    if state is None:
        raise SandboxError(f"no sandbox in {path}", hint=f"start one with `orch sandbox up --dir {path} --workers N`")
    return state
