"""Session fixtures that give the shared local slice a usable bundle environment.

`jax_cpu_lane`: the sandbox's `cpu` lane with the jax-cpu bundle active on
every worker (`<root>/lanes/cpu/active/bin/python` imports jax 0.10.2).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class ActiveLane:
    lane: str
    bundle: str
    bundle_id: str


@pytest.fixture(scope="session")
def jax_cpu_lane(slice4) -> ActiveLane:
    # Interim: build the environment in place with uv from the local wheel
    # mirror, at the layout deploy uses, until `orch deploy` lands.
    uv = shutil.which("uv") or str(Path(__import__("sys").executable).parent / "uv")
    bundle_id = "interim-jax-cpu"
    env = f"/var/lib/orch/envs/{bundle_id}"
    script = (
        'set -e; test -x "$2/bin/python" || { "$1" venv -q --python /usr/bin/python3 "$2" && '
        '"$1" pip install -q --python "$2/bin/python" --no-index --find-links /opt/pypi/files '
        'jax==0.10.2 jaxlib==0.10.2; }; mkdir -p /var/lib/orch/lanes/cpu; '
        'ln -sfn "$2" /var/lib/orch/lanes/cpu/active.new && mv -T /var/lib/orch/lanes/cpu/active.new '
        '/var/lib/orch/lanes/cpu/active')
    slice4.orch("exec", "--timeout", "600", "--", "sh", "-c", script, "sh", uv, env, timeout=900)
    return ActiveLane(lane="cpu", bundle="jax-cpu", bundle_id=bundle_id)


@pytest.fixture(scope="session")
def torch_cpu_fleet(slice4) -> Path:
    """A fleet file for the same 4 workers with one lane `torch` on the torch-cpu bundle."""
    import yaml

    doc = yaml.safe_load(Path(slice4.fleet_path).read_text())
    doc["lanes"] = {"torch": {"workers": "all", "bundle": "torch-cpu", "runtime": "cpu",
                              "cache": "per-host", "platform": "cpu"}}
    path = Path(slice4.dir) / "fleet-torch.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture(scope="session")
def torch_cpu_lane(slice4, torch_cpu_fleet) -> ActiveLane:
    # Interim, like jax_cpu_lane: torch 2.13.0+cpu from the local wheel directory.
    uv = shutil.which("uv") or str(Path(__import__("sys").executable).parent / "uv")
    bundle_id = "interim-torch-cpu"
    env = f"/var/lib/orch/envs/{bundle_id}"
    script = (
        'set -e; test -x "$2/bin/python" || { "$1" venv -q --python /usr/bin/python3 "$2" && '
        '"$1" pip install -q --python "$2/bin/python" --no-index --find-links /opt/wheels '
        '--find-links /opt/pypi/files torch==2.13.0+cpu; }; mkdir -p /var/lib/orch/lanes/torch; '
        'ln -sfn "$2" /var/lib/orch/lanes/torch/active.new && mv -T /var/lib/orch/lanes/torch/active.new '
        '/var/lib/orch/lanes/torch/active')
    slice4.orch("--fleet", str(torch_cpu_fleet), "exec", "--timeout", "900", "--", "sh", "-c", script, "sh",
                uv, env, timeout=1200)
    return ActiveLane(lane="torch", bundle="torch-cpu", bundle_id=bundle_id)
