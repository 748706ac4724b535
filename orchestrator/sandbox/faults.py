"""Faults a test (or a person) can inflict on one sandbox worker, as a real host would fail.

- `pause`: SIGSTOP everything on it, a hung host (TCP still connects, nothing answers);
- `resume`: SIGCONT it again;
- `kill`: SIGKILL everything on it, a dead host (connections are refused);
- `kill_sshd`: SIGKILL its sshd alone (listener and sessions): SSH drops, what it started runs on;
- `regenerate_host_key`: a rebuilt VM, whose new host key clients must refuse;
- `replace`: a re-created VM (preempted, then brought back by the cloud): same
  address, a new host key, an empty disk (orch root, home and /tmp wiped).
"""

from __future__ import annotations

import os
import shutil
import signal

import orchestrator.sandbox.files as files
import orchestrator.sandbox.namespaces as namespaces
import orchestrator.sandbox.sshd as sshd
from orchestrator.errors import SandboxError
from orchestrator.sandbox.lifecycle import load_state
from orchestrator.sandbox.spec import READY_TIMEOUT, check_dir
from orchestrator.sandbox.state import SandboxState, WorkerAction, WorkerState, locked, write_state


def pause(dir: str | os.PathLike[str], worker: str | int) -> WorkerAction:
    """SIGSTOP everything on a worker: a hung host (TCP still connects, nothing answers)."""
    _, ws = _live_worker(dir, worker)
    return WorkerAction(name=ws.name, action="paused", pids=tuple(sorted(namespaces.stop_all(ws))))


def resume(dir: str | os.PathLike[str], worker: str | int) -> WorkerAction:
    """SIGCONT everything on a paused worker."""
    _, ws = _live_worker(dir, worker)
    pids = namespaces.worker_processes(ws)
    namespaces.send(pids, signal.SIGCONT)
    return WorkerAction(name=ws.name, action="resumed", pids=tuple(sorted(pids)))


def kill(dir: str | os.PathLike[str], worker: str | int) -> WorkerAction:
    """SIGKILL everything on a worker: a dead host (connections are refused)."""
    ws = load_state(dir).worker(worker)
    return WorkerAction(name=ws.name, action="killed", pids=tuple(sorted(namespaces.kill_all(ws))))


def kill_sshd(dir: str | os.PathLike[str], worker: str | int) -> WorkerAction:
    """SIGKILL a worker's sshd alone, the listener and every session process: each SSH connection to it
    drops and new ones are refused, while what the sessions started runs on, as after sshd crashed or was
    OOM-killed. `up` starts its sshd again (the worker counts as dead, and what still runs there is ended)."""
    _, ws = _live_worker(dir, worker)
    pids = {pid for pid in namespaces.worker_processes(ws) if _comm(pid).startswith("sshd")}
    namespaces.send(sorted(pids, key=lambda p: p != ws.pid), signal.SIGKILL)  # the listener first
    return WorkerAction(name=ws.name, action="sshd-killed", pids=tuple(sorted(pids)))


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def regenerate_host_key(dir: str | os.PathLike[str], worker: str | int, *, timeout: float = READY_TIMEOUT) -> str:
    """Give a worker a new host key and restart its sshd, as a rebuilt VM would be.

    known_hosts keeps the old key on purpose: clients must now refuse the
    worker. Returns the new public key line.
    """
    path = check_dir(dir)
    with locked(path):
        state = load_state(path)
        ws = state.worker(worker)
        namespaces.kill_all(ws)
        public = files.new_key(files.host_key_path(path, ws.name), f"root@{ws.name}")
        sshd.start_worker(path, ws.name, ws.address, ws.port)
        fresh = sshd.wait_ready(path, {ws.name: (ws.index, ws.address)}, ws.port, timeout)
        write_state(state.with_workers(tuple(fresh)))
    return public


def replace(dir: str | os.PathLike[str], worker: str | int, *, timeout: float = READY_TIMEOUT) -> str:
    """Stop a worker and start a fresh one at its address: a new host key, its root, home and /tmp empty.

    Returns the new public key line (known_hosts keeps the old one: clients must refuse the worker
    until it is trusted again on purpose).
    """
    path = check_dir(dir)
    with locked(path):
        state = load_state(path)
        ws = state.worker(worker)
        namespaces.kill_all(ws)
        wdir = path / "workers" / ws.name
        for sub in ("root", "home", "tmp"):
            for entry in (wdir / sub).iterdir() if (wdir / sub).is_dir() else ():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        public = files.new_key(files.host_key_path(path, ws.name), f"root@{ws.name}")
        sshd.start_worker(path, ws.name, ws.address, ws.port)
        fresh = sshd.wait_ready(path, {ws.name: (ws.index, ws.address)}, ws.port, timeout)
        write_state(state.with_workers(tuple(fresh)))
    return public


def host_key(dir: str | os.PathLike[str], worker: str | int) -> str:
    """A worker's current public host key line (`ssh-ed25519 AAAA...`)."""
    path = check_dir(dir)
    ws = load_state(path).worker(worker)
    return files.public_key(files.host_key_path(path, ws.name))


def _live_worker(dir: str | os.PathLike[str], worker: str | int) -> tuple[SandboxState, WorkerState]:
    state = load_state(dir)
    ws = state.worker(worker)
    if not namespaces.alive(ws):
        raise SandboxError(
            f"{ws.name} is dead (its sshd {ws.pid} is gone)",
            hint=f"`orch sandbox up --dir {state.dir} --workers {len(state.workers)}` "
            "with the same options starts it again",
        )
    return state, ws
