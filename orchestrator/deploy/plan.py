"""What a deploy will do and how it went: the plan (pure data, read from the
lane's bundle lock), each worker's outcome and the deploy's report."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.bundle import CachedWheel, Lock, LockedInterpreter
from orchestrator.errors import BundleError
from orchestrator.fleet import Fleet, WorkerRef


@dataclass(frozen=True)
class DeployPlan:
    """What a deploy will do: pure data, printed by --dry-run."""

    lane: str
    bundle: str
    bundle_id: str
    lock_digest: str
    python: str
    workers: tuple[WorkerRef, ...]
    wheels: tuple[CachedWheel, ...]
    uv: CachedWheel
    relay: bool = True
    interpreter: LockedInterpreter | None = None  # the bundle's own Python; None: the workers' system Python
    repaired: tuple[str, ...] = ()  # damaged wheels of the controller's cache, fetched again while planning

    @property
    def interpreter_file(self) -> CachedWheel | None:
        """The interpreter archive as the store and the relay carry it (like a wheel)."""
        i = self.interpreter
        if i is None:
            return None
        from orchestrator import bundle as bundles

        path = bundles.cache_path(i.sha256, i.filename)
        return CachedWheel(
            name="python", version=i.version, filename=i.filename, sha256=i.sha256, size=i.size, path=path
        )

    @property
    def files(self) -> tuple[CachedWheel, ...]:
        """Everything a worker's store must hold: the wheels, the installer, the interpreter archive."""
        extra = self.interpreter_file
        return (*self.wheels, self.uv, *((extra,) if extra else ()))

    @property
    def bundle_bytes(self) -> int:
        return sum(w.size for w in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "lane": self.lane,
            "bundle": self.bundle,
            "bundle_id": self.bundle_id,
            "lock_digest": self.lock_digest,
            "python": self.python,
            "relay": self.relay,
            "workers": [
                {
                    "name": w.name,
                    "host": w.host,
                    "env": f"{w.root}/envs/{self.bundle_id}",
                    "active": f"{w.root}/lanes/{self.lane}/active",
                }
                for w in self.workers
            ],
            "wheels": [w.request() for w in self.wheels],
            "installer": self.uv.request(),
            "interpreter": self.interpreter.request() if self.interpreter else None,
            "bundle_bytes": self.bundle_bytes,
            "repaired": list(self.repaired),
        }


@dataclass
class WorkerOutcome:
    """How the deploy ended on one worker."""

    worker: str
    status: str = "pending"  # installed | unchanged | failed
    reason: str | None = None
    bytes_from_controller: int = 0
    bytes_from_peer: int = 0
    recovered_lock: dict[str, Any] | None = None
    rebuilt: str | None = None  # why an incomplete environment there was removed and built again
    previous: str | None = None
    elapsed: float = 0.0
    phases: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class DeployReport:
    plan: DeployPlan
    outcomes: dict[str, WorkerOutcome]
    seed: str | None = None
    relay_used: bool = False
    elapsed: float = 0.0

    @property
    def ok(self) -> bool:
        return all(o.status in ("installed", "unchanged") for o in self.outcomes.values())

    @property
    def controller_bytes(self) -> int:
        return sum(o.bytes_from_controller for o in self.outcomes.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "lane": self.plan.lane,
            "bundle": self.plan.bundle,
            "bundle_id": self.plan.bundle_id,
            "ok": self.ok,
            "seed": self.seed,
            "relay_used": self.relay_used,
            "controller_bytes": self.controller_bytes,
            "bundle_bytes": self.plan.bundle_bytes,
            "repaired": list(self.plan.repaired),
            "elapsed": round(self.elapsed, 3),
            "workers": {n: o.to_dict() for n, o in self.outcomes.items()},
        }


Progress = Callable[[str, str], None]  # (worker, phase)


def plan_deploy(
    fleet: Fleet, lane: str, *, relay: bool = True, lock: Lock | None = None, fetch: bool = True
) -> DeployPlan:
    """Read the lane's bundle lock and list what every worker should end up with.

    With `fetch`, wheels missing from the controller's cache are fetched from
    the lock's recorded sources (a fresh checkout with committed locks)."""
    from orchestrator import bundle as bundles

    lane_model = fleet.lane(lane)
    spec = fleet.bundle(lane_model.bundle)
    lock_path = fleet.lock_path(lane_model.bundle)
    if lock is None:
        if not lock_path.exists():
            raise BundleError(
                f"bundle '{lane_model.bundle}' has no lock at {lock_path}", hint=f"orch bundle lock {lane_model.bundle}"
            )
        lock = bundles.read_lock(lock_path)
    repaired: list[str] = []
    if fetch:
        bundles.fetch_wheels(lock, fleet.base_dir, repaired=repaired)
    wheels = tuple(
        CachedWheel(
            name=w.name,
            version=w.version,
            filename=w.filename,
            sha256=w.sha256,
            size=w.size,
            path=bundles.cached_wheel_path(w),
        )
        for w in lock.wheels
    )
    return DeployPlan(
        lane=lane,
        bundle=lane_model.bundle,
        bundle_id=lock.bundle_id,
        lock_digest=lock.digest,
        python=spec.python,
        workers=tuple(fleet.lane_workers(lane)),
        wheels=wheels,
        uv=installer_wheel(),
        relay=relay,
        interpreter=lock.interpreter,
        repaired=tuple(repaired),
    )


def installer_wheel() -> CachedWheel:
    """The uv wheel that installs bundles on workers: the controller's own uv
    version, cached once. uv is a wheel with a static binary inside, so it
    travels to workers like any bundle wheel."""
    from orchestrator import bundle as bundles

    return bundles.tool_wheel("uv")
