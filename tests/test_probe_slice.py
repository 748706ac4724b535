"""`orch probe` on the local slice: real sshd workers, real jax and libtpu processes.

The tpu lane is a second fleet file over the same four workers: jax 0.10.2 +
libtpu 0.0.42.1 from the local mirror, runtime profile `tpu`, on a machine
with no TPU. libtpu really loads, really takes /tmp/libtpu_lockfile, and
really reports why it found no chip.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ssh, pytest.mark.e2e]

TPU_ENV = "/var/lib/orch/lanes/tpu/active"  # the jax-libtpu bundle, deployed by the jax_libtpu_lane fixture


def probe_json(slice4, *args: str, fleet: Path | None = None, timeout: float = 180) -> tuple[int, dict, float]:
    start = time.monotonic()
    fleet_args = ("--fleet", str(fleet)) if fleet else ()
    proc = slice4.orch(*fleet_args, "probe", "--json", *args, check=False, timeout=timeout)
    elapsed = time.monotonic() - start
    assert proc.stdout.strip(), proc.stderr
    return proc.returncode, json.loads(proc.stdout), elapsed


def rows_by_worker(doc: dict) -> dict[str, dict]:
    return {r["worker"]: r for r in doc["rows"]}


def checks_of(row: dict) -> dict[str, dict]:
    return {c["name"]: c for c in row["checks"]}


def test_a_cpu_lane_with_jax_probes_healthy_on_every_worker_with_device_kind_cpu(slice4, jax_cpu_lane):
    rc, doc, _ = probe_json(slice4, "--lane", "cpu")
    assert rc == 0, doc
    assert [r["worker"] for r in doc["rows"]] == slice4.workers
    for row in doc["rows"]:
        checks = checks_of(row)
        assert row["verdict"] in ("ok", "warn") and row["answered"] == "cpu", row
        assert row["bundle_id"] == jax_cpu_lane.bundle_id
        assert checks["runtime"]["status"] == "ok"
        assert checks["runtime"]["data"]["answered"] == {"platform": "cpu", "device_kind": "cpu", "device_count": 1}
        policy_env = checks["runtime"]["data"]["policy_env"]
        assert (policy_env["JAX_PLATFORMS"], policy_env["PJRT_DEVICE"]) == ("cpu", "CPU")
        assert policy_env["TPU_WORKER_ID"] == str(slice4.workers.index(row["worker"]))
        assert checks["bundle"]["data"]["versions"] == {"jax": "0.10.2", "jaxlib": "0.10.2"}
        # Only a missing deploy manifest may warn; deploy writes one.
        warnings = [c for c in row["checks"] if c["status"] == "warn"]
        assert all(c["name"] == "bundle" and c["evidence"][0].startswith("no manifest") for c in warnings), warnings
    assert doc["summary"]["fail"] == 0 and doc["summary"]["layers"] == {}

    table = slice4.orch("probe", "--lane", "cpu", env={"COLUMNS": "200"})
    for name in slice4.workers:
        assert name in table.stdout
    assert "0 fail of 4 worker(s)" in table.stdout


def test_a_tpu_lane_on_a_host_without_tpu_fails_everywhere_as_runtime_proof_within_seconds(
    slice4, jax_libtpu_lane, tpu_fleet
):
    rc, doc, elapsed = probe_json(slice4, fleet=tpu_fleet)
    assert rc == 1
    assert elapsed < 30, f"probe took {elapsed:.1f}s"
    assert doc["summary"]["layers"] == {"runtime-proof": slice4.workers}
    for row in doc["rows"]:
        runtime = checks_of(row)["runtime"]
        assert (row["verdict"], row["layer"], row["answered"]) == ("fail", "runtime-proof", "cpu")
        assert "intended tpu, answered from cpu" in row["evidence"] and "silent fallback" in row["evidence"]
        # libtpu's own reason, raised from JAX's INFO log, is the evidence.
        assert "Unable to initialize backend 'tpu'" in row["evidence"]
        assert any(
            "Failed to get TPU topology" in line or "No jellyfish device found" in line for line in runtime["evidence"]
        ), runtime["evidence"]
        assert runtime["data"]["policy_env"]["TPU_SKIP_MDS_QUERY"] == "1"
        assert runtime["data"]["policy_env"]["PJRT_DEVICE"] == "TPU"
    # The probe's own libtpu process neither leaves a lockfile nor litters /tmp/tpu_logs.
    leftovers = slice4.ssh(0, "ls", "-A", "/tmp", check=True).stdout.split()
    assert "libtpu_lockfile" not in leftovers and "tpu_logs" not in leftovers


def start_holder(slice4, worker: int) -> int:
    """A real jax process with libtpu loaded, kept alive on `worker`; its pid once it holds the lockfile."""
    code = "import jax, time; jax.devices(); time.sleep(600)"
    env = "TPU_SKIP_MDS_QUERY=1 TPU_ACCELERATOR_TYPE=v6e-16 TPU_WORKER_ID=0 TPU_WORKER_HOSTNAMES=127.0.0.1"
    started = slice4.ssh(
        worker,
        "sh",
        "-c",
        f'{env} setsid {TPU_ENV}/bin/python -c "$1" </dev/null >/dev/null 2>&1 & echo $!',
        "sh",
        code,
        check=True,
    )
    pid = int(started.stdout.strip())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        locks = Path("/proc/locks").read_text().split()
        if str(pid) in locks:
            return pid
        time.sleep(0.2)
    raise AssertionError(f"jax pid {pid} never took the libtpu lockfile")


def test_a_held_lockfile_is_device_ownership_naming_the_holder_and_a_stale_one_only_warns(
    slice4, jax_libtpu_lane, tpu_fleet
):
    holder_worker = slice4.workers[1]
    pid = start_holder(slice4, 1)
    try:
        rc, doc, _ = probe_json(slice4, fleet=tpu_fleet)
        assert rc == 1
        rows = rows_by_worker(doc)
        held = rows[holder_worker]
        assert (held["verdict"], held["layer"]) == ("fail", "device-ownership")
        assert f"held by pid {pid} ({TPU_ENV}/bin/python -c import jax, time; jax.devices()" in held["evidence"]
        assert checks_of(held)["device"]["data"]["lockfile"]["holders"][0]["pid"] == pid
        # libtpu in the probe's own runtime child says the same thing, in its words.
        assert any("libtpu multi-process lockfile" in line for line in checks_of(held)["runtime"]["evidence"])
        assert doc["summary"]["layers"] == {
            "device-ownership": [holder_worker],
            "runtime-proof": [w for w in slice4.workers if w != holder_worker],
        }
        # The holder survives being probed.
        assert Path(f"/proc/{pid}").exists()

        slice4.ssh(1, "kill", "-KILL", str(pid), check=True)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        rc, doc, _ = probe_json(slice4, "--shallow", "--workers", holder_worker, fleet=tpu_fleet)
        row = doc["rows"][0]
        device = checks_of(row)["device"]
        assert device["data"]["lockfile"]["state"] == "stale" and device["status"] == "warn"
        assert (rc, row["verdict"], row["layer"]) == (0, "warn", None)
        assert "stale libtpu lockfile" in row["evidence"] or any("stale" in e for e in device["evidence"])
        rc, doc, _ = probe_json(slice4, "--workers", holder_worker, fleet=tpu_fleet)
        assert doc["rows"][0]["layer"] == "runtime-proof"  # a stale file is not an owner
    finally:
        slice4.ssh(1, "sh", "-c", f"kill -KILL {pid} 2>/dev/null; rm -rf /tmp/libtpu_lockfile /tmp/tpu_logs")


def test_a_paused_worker_is_a_transport_row_within_the_timeout_and_the_others_complete(slice4, jax_cpu_lane):
    paused = slice4.workers[2]
    slice4.orch("sandbox", "pause", paused)
    try:
        # The budget must let a healthy worker import and run jax on a loaded 2-core machine (the
        # runtime check gets a share of it); the paused one is bounded by the same budget.
        rc, doc, elapsed = probe_json(slice4, "--lane", "cpu", "--timeout", "40")
    finally:
        slice4.orch("sandbox", "resume", paused)
    assert rc == 1
    assert elapsed < 40 + 10, f"probe took {elapsed:.1f}s"
    rows = rows_by_worker(doc)
    assert list(rows) == slice4.workers
    assert (rows[paused]["verdict"], rows[paused]["layer"]) == ("fail", "transport")
    assert rows[paused]["error"]
    for name, row in rows.items():
        if name != paused:
            assert row["verdict"] != "fail" and row["answered"] == "cpu", row
    assert doc["summary"]["layers"] == {"transport": [paused]}
