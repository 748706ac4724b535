"""The runtime policy a lane applies before any frontend is imported.

One function builds the environment for a worker of a lane: the lane's
runtime profile, then explicit TPU topology so libtpu never waits on a
metadata server when the fleet says so. Probe and launch both use it, so
a probe proves exactly the policy a launch will run under.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.fleet import Fleet, WorkerRef


@dataclass(frozen=True)
class RuntimePolicy:
    """Environment to set and variables that must be absent, for one worker."""

    env: dict[str, str]
    forbid: tuple[str, ...]
    profile: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "env": dict(self.env), "forbid": list(self.forbid)}


def topology_env(fleet: Fleet, lane: str, worker: WorkerRef) -> dict[str, str]:
    """TPU_* variables describing the slice, for libtpu's own discovery."""
    slice_name, sl = fleet.lane_slice(lane)
    if not sl.skip_metadata_query:
        return {}
    slice_workers = sorted((w for w in fleet.workers if w.slice == slice_name), key=lambda w: w.index)
    env = {
        "TPU_SKIP_MDS_QUERY": "1",
        "TPU_WORKER_ID": str(worker.index),
        "TPU_WORKER_HOSTNAMES": ",".join(w.internal_address for w in slice_workers),
    }
    if sl.accelerator_type:
        env["TPU_ACCELERATOR_TYPE"] = sl.accelerator_type
    return env


def runtime_policy(fleet: Fleet, lane: str, worker: WorkerRef) -> RuntimePolicy:
    """The lane's runtime profile plus topology, for `worker`."""
    lane_model = fleet.lane(lane)
    profile = fleet.runtime_profile(lane)
    env = {**topology_env(fleet, lane, worker), **profile.env}
    return RuntimePolicy(env=env, forbid=tuple(profile.forbid), profile=lane_model.runtime)
