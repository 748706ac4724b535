"""Multislice on the local slice: one gang across two slices, real sshd workers and real jax processes.

The shared 4-worker slice is described a second time as two slices of two
workers (same addresses, same host keys, the same deployed `cpu` lane), so a
multislice launch costs no second sandbox or deploy; `orch sandbox up
--slices` itself is brought up once, on its own.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.ssh, pytest.mark.e2e]

PSUM = '''\
"""A global sum over every process of every slice, and the topology each process was given."""
import json
import os

import jax
import numpy as np
from jax.experimental import multihost_utils

jax.distributed.initialize()
pid = jax.process_index()
total = multihost_utils.process_allgather(np.array([float(pid + 1)], dtype=np.float32)).sum()
keys = sorted(k for k in os.environ if k.startswith(("MEGASCALE_", "TPU_WORKER_")))
print("PSUM " + json.dumps({"pid": pid, "count": jax.process_count(), "sum": float(total),
                            "env": {k: os.environ[k] for k in keys}}))
'''

ENV_ONLY = """\
import json, os
print("ENV " + json.dumps({k: v for k, v in os.environ.items() if k.startswith("MEGASCALE_")}))
"""


@pytest.fixture(scope="module")
def code(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("multislice-code")
    (root / "psum.py").write_text(PSUM)
    (root / "env_only.py").write_text(ENV_ONLY)
    return root


@pytest.fixture(scope="module")
def two_slices(slice4, jax_cpu_lane) -> Path:
    """slice4's workers as two slices of two, with lane `cpu` across both (its bundle is already active)."""
    doc = yaml.safe_load(Path(slice4.fleet_path).read_text())
    (only,) = doc["slices"].values()
    first, second = only["workers"][:2], only["workers"][2:]
    doc["slices"] = {
        "slice-a": {**only, "accelerator_type": "v6e-8", "workers": first},
        "slice-b": {**only, "accelerator_type": "v6e-8", "workers": [{**w, "index": i} for i, w in enumerate(second)]},
    }
    doc["lanes"] = {"cpu": {**doc["lanes"]["cpu"], "slices": ["slice-a", "slice-b"]}}
    del doc["lanes"]["cpu"]["workers"]
    path = Path(slice4.dir) / "fleet-two-slices.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def orch(slice4, runs_dir: Path, *args: str, fleet: Path | None = None, **kwargs):
    env = {"ORCH_RUNS_DIR": str(runs_dir), **({"ORCH_FLEET": str(fleet)} if fleet else {})}
    return slice4.orch(*args, env=env, **kwargs)


def printed(stdout: str, tag: str) -> dict[str, dict]:
    """{worker: the JSON document it printed after `tag`}."""
    out = {}
    for line in stdout.splitlines():
        m = re.match(rf"(\S+) \| {tag} (.*)$", line)
        if m:
            out[m.group(1)] = json.loads(m.group(2))
    return out


def test_a_two_slice_gang_computes_a_global_psum_and_every_receipt_names_its_slice(slice4, two_slices, code, tmp_path):
    res = orch(
        slice4,
        tmp_path,
        "launch",
        "--lane",
        "cpu",
        "--workdir",
        str(code),
        "--",
        "psum.py",
        fleet=two_slices,
        timeout=300,
    )
    docs = printed(res.stdout, "PSUM")
    assert sorted(docs) == ["slice-a-w0", "slice-a-w1", "slice-b-w0", "slice-b-w1"]
    assert {(d["count"], d["sum"]) for d in docs.values()} == {(4, 10.0)}  # 1+2+3+4 across both slices
    assert [docs[w]["pid"] for w in sorted(docs)] == [0, 1, 2, 3]
    assert docs["slice-b-w1"]["env"]["MEGASCALE_SLICE_ID"] == "1"
    assert docs["slice-b-w1"]["env"]["TPU_WORKER_ID"] == "1"
    run_id = re.search(r"orch: run (\S+):", res.stderr).group(1)
    for worker, pid in (("slice-a-w0", 0), ("slice-b-w0", 2)):
        receipt = json.loads((tmp_path / run_id / worker / "record.json").read_text())
        assert (receipt["slice"], receipt["slice_id"], receipt["num_slices"]) == (worker[:7], pid // 2, 2)
        assert receipt["process_id"] == pid
        mega = {k: v for k, v in receipt["policy"]["env"].items() if k.startswith("MEGASCALE_")}
        assert mega == {
            "MEGASCALE_COORDINATOR_ADDRESS": slice4.state.workers[0].address,
            "MEGASCALE_NUM_SLICES": "2",
            "MEGASCALE_SLICE_ID": str(pid // 2),
            "MEGASCALE_PORT": "8081",
        }


def test_an_unreachable_coordinator_is_refused_in_preflight_naming_worker_and_port(slice4, two_slices, code, tmp_path):
    doc = yaml.safe_load(two_slices.read_text())
    doc["slices"]["slice-a"]["workers"][0]["internal_address"] = "192.0.2.1"  # TEST-NET-1: nobody answers
    blocked = Path(slice4.dir) / "fleet-blocked.yaml"  # beside known_hosts, which the fleet names relatively
    blocked.write_text(yaml.safe_dump(doc, sort_keys=False))
    t0 = time.monotonic()
    res = orch(
        slice4,
        tmp_path,
        "launch",
        "--lane",
        "cpu",
        "--workdir",
        str(code),
        "--",
        "psum.py",
        fleet=blocked,
        check=False,
        timeout=120,
    )
    took = time.monotonic() - t0
    assert res.returncode != 0
    assert "the gang's ports are not reachable" in res.stderr
    # The three other workers fail alike: one line per port, naming them together.
    for port in ("the JAX coordinator port 192.0.2.1:", "the MEGASCALE port 192.0.2.1:8081 on slice-a-w0"):
        (line,) = [line for line in res.stderr.splitlines() if f"3 x cannot reach {port}" in line]
        assert line.endswith(": slice-a-w1, slice-b-w[0-1]"), line
    assert "layer network" in res.stderr and "PSUM" not in res.stdout
    print(f"refused after {took:.1f}s")


def test_a_stale_megascale_variable_in_a_workers_login_environment_is_gone_from_the_process(
    slice4, jax_cpu_lane, code, tmp_path
):
    worker = slice4.workers[2]
    plant = "mkdir -p ~/.ssh && printf 'MEGASCALE_NUM_SLICES=7\\nMEGASCALE_SLICE_ID=3\\n' > ~/.ssh/environment"
    slice4.orch("exec", "--workers", worker, "--", "sh", "-c", plant)
    # A held connection's agent keeps the login environment it started with (docs/concepts.md): with
    # warm connections on (ORCH_TEST_WARM=1), the next commands must connect anew to see the plant.
    slice4.orch("connections", "stop")
    try:
        seen = slice4.orch("exec", "--workers", worker, "--", "sh", "-c", "echo ${MEGASCALE_NUM_SLICES:-unset}")
        assert f"{worker} | 7" in seen.stdout  # the login environment really carries it
        res = orch(slice4, tmp_path, "launch", "--lane", "cpu", "--workdir", str(code), "--", "env_only.py")
        assert printed(res.stdout, "ENV") == {w: {} for w in slice4.workers}
        run_id = re.search(r"orch: run (\S+):", res.stderr).group(1)
        receipt = json.loads((tmp_path / run_id / worker / "record.json").read_text())
        assert receipt["policy"]["unset_inherited"] == ["MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID"]
    finally:
        slice4.orch("exec", "--workers", worker, "--", "rm", "-f", "/root/.ssh/environment")


def test_sandbox_up_with_slices_starts_two_slices_with_their_own_hostnames(make_sandbox):
    handle = make_sandbox(2, slices=2)
    assert handle.workers == ["slice-a-w0", "slice-a-w1", "slice-b-w0", "slice-b-w1"]
    assert handle.fleet.lane_slices("cpu") == ["slice-a", "slice-b"]
    res = handle.orch("exec", "--", "hostname")
    assert sorted(res.stdout.split()[2::3]) == handle.workers
