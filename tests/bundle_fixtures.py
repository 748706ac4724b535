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
