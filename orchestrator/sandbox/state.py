"""What a sandbox runs, as `state.json` records it, and the results of the sandbox's commands.

`state.json` is read through `read_state` only, which refuses a file it does not
understand; one command at a time changes a sandbox (`locked`).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from hostside.files import write_atomic
from orchestrator.errors import SandboxError
from orchestrator.sandbox.spec import LaneSpec, Shape

STATE_SCHEMA = 1
STATE_FILE = "state.json"


@dataclass(frozen=True)
class WorkerState:
    """One running worker as `up` started it."""

    name: str
    index: int
    address: str
    port: int
    hostname: str
    pid: int  # the worker's sshd (listener); its namespaces live as long as it does
    starttime: int  # /proc/<pid>/stat field 22: guards against a reused pid
    mnt_ns: int  # namespace inodes: find everything that runs "on" this worker
    uts_ns: int


@dataclass(frozen=True)
class SandboxState:
    """What `up` started (and `state.json` records)."""

    dir: str
    slice: str
    base_address: str
    port: int
    lanes: tuple[LaneSpec, ...]
    workers: tuple[WorkerState, ...]
    fleet_path: str
    started_at: float
    slices: int = 1
    already_running: bool = False  # `up` found this sandbox running with the same shape
    restarted: tuple[str, ...] = ()  # workers `up` found dead and started again

    @property
    def shape(self) -> Shape:
        return Shape(len(self.workers), self.lanes, self.base_address, self.port, self.slices)

    def worker(self, ref: str | int) -> WorkerState:
        """A worker by name (`slice-w2`) or index (2), or SandboxError naming the choices."""
        from orchestrator.yamlsrc import did_you_mean

        text = str(ref)
        for w in self.workers:
            if text in (w.name, str(w.index)):
                return w
        names = [w.name for w in self.workers]
        raise SandboxError(
            f"no sandbox worker '{text}'{did_you_mean(text, names)} (workers: {', '.join(names)}; "
            f"or their index 0-{len(names) - 1})"
        )

    def with_workers(self, workers: tuple[WorkerState, ...]) -> SandboxState:
        """This state with some workers replaced (matched by name)."""
        fresh = {w.name: w for w in workers}
        return replace(self, workers=tuple(fresh.get(w.name, w) for w in self.workers))

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": STATE_SCHEMA,
            "dir": self.dir,
            "slice": self.slice,
            "base_address": self.base_address,
            "port": self.port,
            "lanes": [asdict(lane) for lane in self.lanes],
            "workers": [asdict(w) for w in self.workers],
            "fleet_path": self.fleet_path,
            "started_at": self.started_at,
            "slices": self.slices,
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> SandboxState:
        return cls(
            dir=doc["dir"],
            slice=doc["slice"],
            base_address=doc["base_address"],
            port=doc["port"],
            lanes=tuple(LaneSpec(**lane) for lane in doc["lanes"]),
            workers=tuple(WorkerState(**w) for w in doc["workers"]),
            fleet_path=doc["fleet_path"],
            started_at=doc["started_at"],
            slices=int(doc.get("slices", 1)),
        )


@dataclass(frozen=True)
class WorkerStatus:
    """A worker as it is now: running, paused (SIGSTOPped) or dead."""

    name: str
    index: int
    address: str
    port: int
    hostname: str
    pid: int
    state: str
    processes: int  # processes on the worker (sshd, sessions, what they started)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SandboxStatus:
    """Every worker of the sandbox in `dir` (none when nothing is up)."""

    dir: str
    fleet_path: str | None
    workers: tuple[WorkerStatus, ...]

    @property
    def up(self) -> bool:
        return bool(self.workers)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": STATE_SCHEMA,
            "dir": self.dir,
            "up": self.up,
            "fleet_path": self.fleet_path,
            "workers": [w.to_dict() for w in self.workers],
        }


@dataclass(frozen=True)
class WorkerAction:
    """What `pause`, `resume` or `kill` did to one worker."""

    name: str
    action: str
    pids: tuple[int, ...]


@dataclass(frozen=True)
class DownResult:
    """What `down` stopped and removed."""

    dir: str
    stopped: tuple[str, ...]  # workers whose processes were ended
    killed: int  # processes ended
    removed: tuple[str, ...] = field(default=())  # paths removed


def read_state(root: Path) -> SandboxState | None:
    """The state `up` recorded in `root`, None when there is none, SandboxError when unreadable."""
    path = root / STATE_FILE
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise SandboxError(
            f"{path}: unreadable sandbox state ({exc})",
            hint=f"`orch sandbox down --dir {root}` stops what it can find and removes it",
        ) from None
    if doc.get("schema_version") != STATE_SCHEMA:
        raise SandboxError(
            f"{path}: state schema_version {doc.get('schema_version')!r}, expected {STATE_SCHEMA}",
            hint=f"`orch sandbox down --dir {root}`",
        )
    return SandboxState.from_dict(doc)


def write_state(state: SandboxState) -> None:
    """Record `state` in its directory's state.json (atomically)."""
    write_atomic(str(Path(state.dir) / STATE_FILE), json.dumps(state.to_dict(), indent=2) + "\n", mode=0o644)


@contextmanager
def locked(root: Path) -> Iterator[None]:
    """One sandbox command at a time per directory."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
