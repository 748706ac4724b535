"""The runtime policy a lane applies before any frontend is imported.

One function builds the environment for a worker of a lane: the lane's
runtime profile, explicit TPU topology so libtpu never waits on a metadata
server when the fleet says so, and, on a multislice lane, the MEGASCALE
variables that join its slices over the data-center network. Probe and
launch both use it, so a probe proves exactly the policy a launch will run
under. Topology and MEGASCALE variables a worker's login environment already
holds are removed first (`TOPOLOGY_VARS`): a stale MEGASCALE_NUM_SLICES from
an earlier job makes initialisation wait for slices that never come.
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
        return {
            "profile": self.profile,
            "env": dict(self.env),
            "forbid": list(self.forbid),
            "unset": [v for v in TOPOLOGY_VARS if v not in self.env],
        }


MEGASCALE_VARS = (
    "MEGASCALE_COORDINATOR_ADDRESS",
    "MEGASCALE_NUM_SLICES",
    "MEGASCALE_SLICE_ID",
    "MEGASCALE_PORT",
)
# Set by orch from the fleet, or absent: never inherited from a worker's login environment.
TOPOLOGY_VARS = (
    "TPU_SKIP_MDS_QUERY",
    "TPU_WORKER_ID",
    "TPU_WORKER_HOSTNAMES",
    "TPU_ACCELERATOR_TYPE",
    *MEGASCALE_VARS,
)


def topology_env(fleet: Fleet, lane: str, worker: WorkerRef) -> dict[str, str]:
    """TPU_* variables describing the worker's own slice, for libtpu's own discovery."""
    sl = fleet.model.slices[worker.slice]
    if not sl.skip_metadata_query:
        return {}
    slice_workers = sorted((w for w in fleet.workers if w.slice == worker.slice), key=lambda w: w.index)
    env = {
        "TPU_SKIP_MDS_QUERY": "1",
        "TPU_WORKER_ID": str(worker.index),
        "TPU_WORKER_HOSTNAMES": ",".join(w.internal_address for w in slice_workers),
    }
    if sl.accelerator_type:
        env["TPU_ACCELERATOR_TYPE"] = sl.accelerator_type
    return env


def megascale_env(fleet: Fleet, lane: str, worker: WorkerRef) -> dict[str, str]:
    """MEGASCALE_* for a worker of a multislice lane (none for a lane in one slice).

    The coordinator is the first worker of the first slice (process 0); slice
    ids follow the lane's `slices` order, as process ids do.
    """
    slices = fleet.lane_slices(lane)
    if len(slices) < 2:
        return {}
    first = fleet.lane_workers(lane)[0]
    return {
        "MEGASCALE_COORDINATOR_ADDRESS": first.internal_address,
        "MEGASCALE_NUM_SLICES": str(len(slices)),
        "MEGASCALE_SLICE_ID": str(slices.index(worker.slice)),
        "MEGASCALE_PORT": str(fleet.lane(lane).megascale_port),
    }


def runtime_policy(fleet: Fleet, lane: str, worker: WorkerRef) -> RuntimePolicy:
    """The lane's runtime profile plus topology, for `worker`."""
    lane_model = fleet.lane(lane)
    profile = fleet.runtime_profile(lane)
    env = {**topology_env(fleet, lane, worker), **megascale_env(fleet, lane, worker), **profile.env}
    return RuntimePolicy(env=env, forbid=tuple(profile.forbid), profile=lane_model.runtime)
