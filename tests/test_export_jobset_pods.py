"""The JobSet entrypoint run as the pods run it: 4 simulated pods (2 slices x 2), real jax processes on CPU.

No cluster and no sshd: each simulated pod is one process started with the
environment the manifest gives a pod (JOBSET_NAME, REPLICATED_JOB_NAME,
JOB_INDEX, JOB_COMPLETION_INDEX from the JobSet's annotations) in its own mount
namespace, whose /etc/hosts plays the JobSet's headless service (every pod's
`<jobset>-slice-<j>-<i>.<subdomain>` name). The bundle environment is made by
the manifest's own init command (pip --require-hashes --no-index from the
lock), the probe step runs as the init container runs it, and the receipts go
to a directory playing the receipts volume, where `orch report` reads them.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from waiting import wait_for

from orchestrator.bundle import fetch_wheels, read_lock
from orchestrator.export import JobSetOptions, export_jobset, render_yaml
from orchestrator.export.jobset import BUNDLE_PYTHON, ORCH_DIR, RUNS_DIR
from orchestrator.fleet import load_fleet

pytestmark = [pytest.mark.e2e]

REPO = Path(__file__).resolve().parent.parent
RUN_ID = "psum-20260101-000000-cafe"
NAME = "psum-jobset"

FLEET = """\
version: 1
slices:
  slice-a:
    skip_metadata_query: true
    workers:
      - {index: 0, address: 127.0.31.1}
      - {index: 1, address: 127.0.31.2}
  slice-b:
    skip_metadata_query: true
    workers:
      - {index: 0, address: 127.0.31.3}
      - {index: 1, address: 127.0.31.4}
bundles:
  jax-cpu:
    python: "3.11"
    pins: [jax==0.10.2, jaxlib==0.10.2]
runtime_profiles:
  cpu:
    env: {JAX_PLATFORMS: cpu}
lanes:
  cpu:
    slices: [slice-a, slice-b]
    bundle: jax-cpu
    runtime: cpu
    platform: cpu
"""

PSUM = '''\
"""A global sum over every process of every slice, and the topology each process was given."""
import json
import os

import jax
import numpy as np
import orch_receipt
from jax.experimental import multihost_utils

jax.distributed.initialize()
pid = jax.process_index()
total = float(multihost_utils.process_allgather(np.array([float(pid + 1)], dtype=np.float32)).sum())
orch_receipt.record_metric("psum", total, scope="global", reduced_by="allgather", over=jax.process_count())
keys = sorted(k for k in os.environ if k.startswith(("MEGASCALE_", "TPU_WORKER_", "ORCH_")))
print("PSUM " + json.dumps({"pid": pid, "count": jax.process_count(), "sum": total,
                            "env": {k: os.environ[k] for k in keys}}))
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def pods(tmp_path_factory):
    """The exported lane, its bundle installed by the manifest's init command, and the pods' directories."""
    root = tmp_path_factory.mktemp("jobset-pods")
    (root / "fleet.yaml").write_text(FLEET)
    lock = subprocess.run(
        [sys.executable, "-m", "orchestrator", "--fleet", str(root / "fleet.yaml"), "bundle", "lock", "jax-cpu"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert lock.returncode == 0, lock.stderr
    fleet = load_fleet(root / "fleet.yaml")
    wheels = root / "wheels"  # plays the --wheels location (a mounted bucket of wheel files)
    wheels.mkdir()
    for path in fetch_wheels(read_lock(fleet.lock_path("jax-cpu")), root).values():
        os.symlink(path, wheels / path.name)
    port = free_port()
    options = JobSetOptions(wheels=str(wheels), name=NAME, run_id=RUN_ID, port=port, receipts_volume="pvc:runs")
    exported = export_jobset(fleet, "cpu", ["psum.py"], options)
    (root / "jobset.yaml").write_text(render_yaml(exported.objects))
    orch_map, _, jobset = exported.objects
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    # the pod's /orch, under this test's directory
    pod_root = root / "orch"
    (pod_root / "config").mkdir(parents=True)
    for key, text in orch_map["data"].items():
        (pod_root / "config" / key).write_text(text)
    install = pod["initContainers"][0]["command"][-1].replace(f"{ORCH_DIR}/", f"{pod_root}/")
    assert install.startswith("python -m venv ")
    done = subprocess.run(
        ["sh", "-c", sys.executable + install[len("python") :]],
        env={**os.environ, "ORCH_WHEELS": pod["initContainers"][0]["env"][0]["value"]},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    config = json.loads((pod_root / "config" / "plan.json").read_text())
    config["python"] = BUNDLE_PYTHON.replace(f"{ORCH_DIR}/", f"{pod_root}/")
    config["runs_dir"] = RUNS_DIR.replace(f"{ORCH_DIR}/", f"{pod_root}/")
    (pod_root / "config" / "plan.json").write_text(json.dumps(config))
    hosts = root / "hosts"  # the headless service: every pod's DNS name
    hosts.write_text(
        "127.0.0.1 localhost\n"
        + "".join(f"127.0.31.{1 + 2 * j + i} {NAME}-slice-{j}-{i}.{NAME}\n" for j in range(2) for i in range(2))
    )
    code = root / "code"  # the image's working directory with the training code
    code.mkdir()
    (code / "psum.py").write_text(PSUM)
    return {
        "root": root,
        "config": pod_root / "config" / "plan.json",
        "hosts": hosts,
        "code": code,
        "runs": Path(config["runs_dir"]),
        "jobset": jobset,
        "pod_root": pod_root,
    }


def start_pod(pods, verb: str, slice_id: int, pod_index: int, config: Path | None = None) -> subprocess.Popen:
    """One simulated pod: the env the manifest gives it, its own /etc/hosts, the manifest's entry command."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(pods["root"]),
        "PYTHONPATH": str(REPO),  # the pod's /orch/lib (the hostside ConfigMap)
        "PYTHONUNBUFFERED": "1",
        "JOBSET_NAME": NAME,
        "REPLICATED_JOB_NAME": "slice",
        "JOB_INDEX": str(slice_id),
        "JOB_COMPLETION_INDEX": str(pod_index),
    }
    script = 'mount --bind "$0" /etc/hosts && exec "$@"'
    argv = [sys.executable, "-m", "hostside.jobset_entry", verb, str(config or pods["config"])]
    return subprocess.Popen(
        [
            "timeout",
            "300",
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            str(pods["hosts"]),
            *argv,
        ],
        env=env,
        cwd=pods["code"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_the_probe_init_step_passes_on_the_lanes_platform_and_fails_a_cpu_fallback(pods, tmp_path):
    ok = start_pod(pods, "probe", 1, 1)
    out, _ = ok.communicate(timeout=300)
    assert ok.returncode == 0, out
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["status"] == "ok" and doc["data"]["answered"]["platform"] == "cpu", doc
    # the same pod of a lane that intends a TPU: this machine has none, jax answers from the CPU
    config = json.loads(pods["config"].read_text())
    config["doc"]["platform"] = "tpu"
    config["env"] = {}
    tpu = tmp_path / "plan-tpu.json"
    tpu.write_text(json.dumps(config))
    bad = start_pod(pods, "probe", 1, 1, tpu)
    out, _ = bad.communicate(timeout=300)
    assert bad.returncode == 1, out
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["status"] == "fail" and doc["layer"] == "runtime-proof", doc


def test_four_pods_of_two_slices_compute_a_global_psum_and_orch_report_reads_their_receipts(pods):
    procs = {(j, i): start_pod(pods, "run", j, i) for j in range(2) for i in range(2)}
    outputs = {}
    for key, proc in procs.items():
        outputs[key], _ = proc.communicate(timeout=300)
    assert all(p.returncode == 0 for p in procs.values()), outputs
    docs = {}
    for key, text in outputs.items():
        (line,) = [ln for ln in text.splitlines() if ln.startswith("PSUM ")]
        docs[key] = json.loads(line[5:])
    assert {(d["count"], d["sum"]) for d in docs.values()} == {(4, 10.0)}  # 1+2+3+4 across both slices
    assert [docs[(j, i)]["pid"] for j in range(2) for i in range(2)] == [0, 1, 2, 3]
    last = docs[(1, 1)]["env"]
    assert last["MEGASCALE_SLICE_ID"] == "1" and last["TPU_WORKER_ID"] == "1" and last["ORCH_WORKER"] == "slice-b-w1"
    assert last["TPU_WORKER_HOSTNAMES"] == f"{NAME}-slice-1-0.{NAME},{NAME}-slice-1-1.{NAME}"
    assert last["ORCH_COORDINATOR"].startswith(f"{NAME}-slice-0-0.{NAME}:")
    runs = pods["runs"]
    for worker in ("slice-a-w0", "slice-a-w1", "slice-b-w0", "slice-b-w1"):
        receipt = json.loads((runs / RUN_ID / worker / "record.json").read_text())
        assert receipt["exit"]["code"] == 0 and receipt["num_slices"] == 2
        names = [s["name"] for s in receipt["steps"]]
        assert names.index("policy") < names.index("import jax") < names.index("distributed-init")
        assert "PSUM " in (runs / RUN_ID / worker / "output.log").read_text()
    report = subprocess.run(
        [sys.executable, "-m", "orchestrator", "report", RUN_ID, "--json"],
        env={**os.environ, "ORCH_RUNS_DIR": str(runs)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    rep = json.loads(report.stdout)
    assert [w["worker"] for w in rep["workers"]] == ["slice-a-w0", "slice-a-w1", "slice-b-w0", "slice-b-w1"]
    assert all(w["exit"]["code"] == 0 for w in rep["workers"]), rep["workers"]
    assert not [f for f in rep["flags"] if f["kind"] in ("missing-receipt", "invalid-receipt")], rep["flags"]
    assert {w["metrics"]["psum"]["value"] for w in rep["workers"]} == {10.0}


def test_a_pod_stopped_by_the_kubelet_stops_its_launcher_too(pods, tmp_path):
    """SIGTERM to the pod's entrypoint (PID 1 in a pod) reaches the launcher; nothing is left running."""
    config = json.loads(pods["config"].read_text())
    config["run_id"] = "stopped-20260101-000000-dead"
    config["runs_dir"] = str(tmp_path / "runs")
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(config))
    pod = start_pod(pods, "run", 0, 1, path)  # its peers never come: it waits in jax.distributed.initialize
    record = tmp_path / "runs" / config["run_id"] / "slice-a-w1" / "record.json"

    def ready() -> dict | None:
        try:
            doc = json.loads(record.read_text())
        except (OSError, ValueError):
            return None
        return doc if doc.get("release_at") else None

    launcher = wait_for(ready, timeout=120, what="the launcher released")["pid"]
    pod.terminate()  # `timeout` passes SIGTERM on to the entrypoint, as the kubelet sends it to PID 1
    out, _ = pod.communicate(timeout=120)
    assert pod.returncode != 0, out
    assert wait_for(lambda: not os.path.exists(f"/proc/{launcher}"), timeout=30, what="the launcher gone")


def test_the_manifest_the_pods_came_from_is_a_jobset_of_two_slices(pods):
    docs = list(yaml.safe_load_all((pods["root"] / "jobset.yaml").read_text()))
    (rjob,) = docs[-1]["spec"]["replicatedJobs"]
    assert rjob["replicas"] == 2 and rjob["template"]["spec"]["completions"] == 2
    assert shutil.which("unshare")
