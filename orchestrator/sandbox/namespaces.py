"""Which processes run "on" a sandbox worker, and how they are stopped (Linux /proc).

A worker is everything in its namespaces: its sshd, each session the sshd forked
and anything those left behind (daemonized, reparented to init). Everything here
acts on that whole set, never on this process or its ancestors.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.sandbox.state import WorkerState

_GONE = ("Z", "X", "x")  # zombie or dead: no longer running
Processes = Mapping[int, "Proc"]


@dataclass(frozen=True)
class Proc:
    """The few fields of /proc/<pid>/stat the sandbox reads."""

    ppid: int
    state: str
    starttime: int

    @property
    def gone(self) -> bool:
        return self.state in _GONE


def proc(pid: int) -> Proc | None:
    """/proc/<pid>/stat, or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    rest = raw[raw.rindex(")") + 2 :].split()  # comm may hold spaces and parentheses
    return Proc(ppid=int(rest[1]), state=rest[0], starttime=int(rest[19]))


def processes() -> dict[int, Proc]:
    """Every process on this machine now."""
    procs = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = proc(int(entry))
            if info is not None:
                procs[int(entry)] = info
    return procs


def namespace(pid: int | str, kind: str) -> int | None:
    """The inode of a process's `kind` namespace (mnt, uts), None when unreadable."""
    try:
        link = os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None
    match = re.search(r"\[(\d+)\]", link)
    return int(match.group(1)) if match else None


def alive(ws: WorkerState, procs: Processes | None = None) -> Proc | None:
    """The worker's sshd if it is still the process `up` started (not a reused pid, not a zombie)."""
    info = procs.get(ws.pid) if procs is not None else proc(ws.pid)
    if info is None or info.starttime != ws.starttime or info.gone:
        return None
    return info


def worker_processes(ws: WorkerState, procs: Processes | None = None) -> set[int]:
    """The worker's sshd, its descendants, and anything else in its namespaces."""
    procs = procs if procs is not None else processes()
    found = _descendants(ws.pid, procs) if alive(ws, procs) else set()
    found |= _in_namespaces(ws, procs)
    return {pid for pid in found if pid in procs and not procs[pid].gone} - _ancestors()


def _descendants(root: int, procs: Processes) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, info in procs.items():
        children.setdefault(info.ppid, []).append(pid)
    found: set[int] = set()
    stack = [root]
    while stack:
        pid = stack.pop()
        if pid not in found:
            found.add(pid)
            stack.extend(children.get(pid, ()))
    return found


def _in_namespaces(ws: WorkerState, procs: Processes) -> set[int]:
    # Processes that left the tree (daemonized, reparented to init) still run
    # "on" this worker: they share its namespaces. Both inodes must match, and
    # never the host's own namespaces.
    host = (namespace("self", "mnt"), namespace("self", "uts"), namespace(1, "mnt"), namespace(1, "uts"))
    if not (ws.mnt_ns and ws.uts_ns) or ws.mnt_ns in host or ws.uts_ns in host:
        return set()
    return {
        pid
        for pid, info in procs.items()
        if not info.gone and namespace(pid, "mnt") == ws.mnt_ns and namespace(pid, "uts") == ws.uts_ns
    }


def _ancestors() -> set[int]:
    """This process and its ancestors: never signalled, even when run inside a worker."""
    chain: set[int] = set()
    pid = os.getpid()
    while pid > 1 and pid not in chain:
        chain.add(pid)
        info = proc(pid)
        pid = info.ppid if info else 0
    return chain


def send(pids: Iterable[int], sig: signal.Signals) -> None:
    """Send `sig` to each of `pids` (those already gone are no error)."""
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def stop_all(ws: WorkerState) -> set[int]:
    """SIGSTOP the worker's processes until no new ones appear (a running one could fork)."""
    stopped: set[int] = set()
    for _ in range(20):
        fresh = worker_processes(ws) - stopped
        if not fresh:
            break
        # The listener first, so it accepts no more sessions while we walk the rest.
        send(sorted(fresh, key=lambda p: p != ws.pid), signal.SIGSTOP)
        stopped |= fresh
    return stopped


def kill_all(ws: WorkerState) -> set[int]:
    """SIGKILL everything on the worker (stopped first, so nothing escapes by forking)."""
    pids = stop_all(ws)
    send(pids, signal.SIGKILL)
    _wait_gone(pids)
    return pids


def _wait_gone(pids: Iterable[int], timeout: float = 5.0) -> None:
    pending = set(pids)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            info = proc(pid)
            if info is None or info.gone:
                pending.discard(pid)
        if pending:
            time.sleep(0.02)  # polling /proc: there is no handle to wait on another session's process


def stray_sshds(root: Path, known: Iterable[int]) -> list[int]:
    """sshd processes started for `root` that state.json does not know (e.g. an interrupted `up`)."""
    marker = f"{root}/workers/".encode()
    skip = set(known)
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in skip:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = fh.read().rstrip(b"\0").split(b"\0")
        except OSError:
            continue
        # sshd rewrites its title into argv[0] ("sshd: /usr/sbin/sshd -D ... [listener]");
        # sh and unshare are a worker still starting up.
        program = os.path.basename(argv[0].split(b":")[0].split(b" ")[0])
        if program in (b"sshd", b"sh", b"unshare") and marker in b" ".join(argv):
            found.append(int(entry))
    return found


def as_worker_state(pid: int, name: str = "?") -> WorkerState | None:
    """A stray process as a worker of its own (its namespaces are what it runs in)."""
    info = proc(pid)
    if info is None:
        return None
    return WorkerState(
        name=name,
        index=-1,
        address="",
        port=0,
        hostname="",
        pid=pid,
        starttime=info.starttime,
        mnt_ns=namespace(pid, "mnt") or 0,
        uts_ns=namespace(pid, "uts") or 0,
    )
