"""Session fixtures that deploy real bundles to the shared local slice.

`jax_cpu_lane`: the sandbox's `cpu` lane with the jax-cpu bundle (jax and
jaxlib 0.10.2) locked and deployed by `orch deploy` on every worker.
`torch_cpu_lane`: a second fleet file over the same workers whose lane
`torch` runs the torch-cpu bundle (torch 2.13.0+cpu), also deployed for real.
`jax_libtpu_lane`: lane `tpu` (platform tpu) with jax + libtpu 0.0.42.1: a lane
that intends a TPU this machine does not have.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrator.bundle import read_lock


@dataclass
class ActiveLane:
    lane: str
    bundle: str
    bundle_id: str
    fleet_path: Path


def deploy_lane(slice4, lane: str, bundle: str, fleet_path: Path) -> ActiveLane:
    """Lock `bundle` (next to the fleet file) and deploy it to `lane` with the real CLI."""
    slice4.orch("--fleet", fleet_path, "bundle", "lock", bundle, timeout=600)
    slice4.orch("--fleet", fleet_path, "deploy", "--lane", lane, timeout=1200)
    lock = read_lock(fleet_path.parent / "locks" / f"{bundle}.lock.json")
    return ActiveLane(lane=lane, bundle=bundle, bundle_id=lock.bundle_id, fleet_path=fleet_path)


@pytest.fixture(scope="session")
def jax_cpu_lane(slice4) -> ActiveLane:
    return deploy_lane(slice4, "cpu", "jax-cpu", Path(slice4.fleet_path))


def lane_fleet(slice4, name: str, lane: dict) -> Path:
    """A fleet file over the same workers as slice4's with one lane `name` instead of `cpu`."""
    import yaml

    doc = yaml.safe_load(Path(slice4.fleet_path).read_text())
    doc["lanes"] = {name: lane}
    path = Path(slice4.dir) / f"fleet-{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture(scope="session")
def tpu_fleet(slice4) -> Path:
    """A lane `tpu` that intends a TPU, on the jax-libtpu bundle (this machine has no TPU)."""
    return lane_fleet(
        slice4,
        "tpu",
        {"workers": "all", "bundle": "jax-libtpu", "runtime": "tpu", "cache": "per-host", "platform": "tpu"},
    )


@pytest.fixture(scope="session")
def jax_libtpu_lane(slice4, tpu_fleet) -> ActiveLane:
    return deploy_lane(slice4, "tpu", "jax-libtpu", tpu_fleet)


@pytest.fixture(scope="session")
def torch_cpu_fleet(slice4) -> Path:
    """A fleet file for the same 4 workers with one lane `torch` on the torch-cpu bundle."""
    return lane_fleet(
        slice4,
        "torch",
        {"workers": "all", "bundle": "torch-cpu", "runtime": "cpu", "cache": "per-host", "platform": "cpu"},
    )


@pytest.fixture(scope="session")
def torch_cpu_lane(slice4, torch_cpu_fleet) -> ActiveLane:
    return deploy_lane(slice4, "torch", "torch-cpu", torch_cpu_fleet)
