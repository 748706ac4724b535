"""The entrypoint of an exported JobSet's pods: the same launch file `orch launch` writes, built in the pod.

`python -m hostside.jobset_entry run|probe CONFIG.json` (CONFIG is the `plan.json`
key of the JobSet's orch ConfigMap, written by `orch export jobset`).

A pod learns where it stands from what the JobSet controller and the kubelet
give it (the manifest exposes the JobSet's annotations through the downward API):

    JOBSET_NAME            jobset.sigs.k8s.io/jobset-name
    REPLICATED_JOB_NAME    jobset.sigs.k8s.io/replicatedjob-name
    JOB_INDEX              jobset.sigs.k8s.io/job-index: the slice id (one Job per slice)
    JOB_COMPLETION_INDEX   batch.kubernetes.io/job-completion-index: the host within the slice

and every pod's DNS name is `<jobset>-<rjob>-<jobIndex>-<podIndex>.<subdomain>`
(the JobSet's headless service, `network.enableDNSHostnames`). From these it
computes the process id (slice by slice, as `plan_launch` numbers them), the
coordinator (pod 0 of slice 0), TPU_WORKER_ID / TPU_WORKER_HOSTNAMES for its
own slice and the MEGASCALE variables, then:

- `run`: writes the launch file and a release (the pods of a JobSet start
  together through jax.distributed's own barrier; there is no controller to
  release them) and runs hostside.launcher on it under the bundle's Python,
  its output copied to `output.log` in the run directory and to the pod log;
  process 0 also writes the run record (`plan.json`, `run.json`) so
  `ORCH_RUNS_DIR=<receipts volume> orch report RUN` reads the run;
- `probe`: runs the runtime check of `orch probe` with this process's policy
  and exits 1 when the runtime answers from another platform than the lane's
  (a CPU fallback on a TPU lane), so the init step fails the pod.

Only the standard library; the policy, SPMD and cache steps are the launcher's own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

from hostside import gang_env
from hostside import launch_proc as lp
from hostside.launch_supervise import child_env

ANNOTATIONS = {
    "JOBSET_NAME": "jobset.sigs.k8s.io/jobset-name",
    "REPLICATED_JOB_NAME": "jobset.sigs.k8s.io/replicatedjob-name",
    "JOB_INDEX": "jobset.sigs.k8s.io/job-index",
    "JOB_COMPLETION_INDEX": "batch.kubernetes.io/job-completion-index",
}


class EntryError(Exception):
    """The pod's environment does not fit the exported plan (a clear message, exit code 2)."""


def pod_host(jobset: str, rjob: str, job_index: int, pod_index: int, subdomain: str) -> str:
    """The DNS name of pod `pod_index` of Job `job_index` (an indexed Job's hostname under the JobSet's service)."""
    return f"{jobset}-{rjob}-{job_index}-{pod_index}.{subdomain}"


def _index(environ: Mapping[str, str], key: str, limit: int) -> int:
    raw = environ.get(key)
    if raw is None or not raw.isdigit():
        raise EntryError(f"{key}={raw!r}: expected the pod's index from the downward API ({ANNOTATIONS[key]})")
    value = int(raw)
    if value >= limit:
        raise EntryError(f"{key}={value} is outside the exported plan (expected 0..{limit - 1})")
    return value


def launch_doc(config: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """This pod's launch file: the exported template with the values the pod's position decides."""
    jobset = environ.get("JOBSET_NAME") or ""
    rjob = environ.get("REPLICATED_JOB_NAME") or ""
    if not jobset or not rjob:
        raise EntryError("JOBSET_NAME and REPLICATED_JOB_NAME must be set (the manifest maps them from annotations)")
    slices = list(config["slices"])
    hosts = int(config["hosts_per_slice"])
    slice_id = _index(environ, "JOB_INDEX", len(slices))
    pod_index = _index(environ, "JOB_COMPLETION_INDEX", hosts)
    subdomain = config.get("subdomain") or jobset
    pid = slice_id * hosts + pod_index
    n = len(slices) * hosts
    worker = config["workers"][slice_id][pod_index]
    first = pod_host(jobset, rjob, 0, 0, subdomain)
    own = pod_host(jobset, rjob, slice_id, pod_index, subdomain)
    port = int(config["coordinator_port"])
    env: dict[str, str] = {}
    topology = config.get("topology")
    if topology is not None:
        env["TPU_SKIP_MDS_QUERY"] = "1"
        env["TPU_WORKER_ID"] = str(pod_index)
        env["TPU_WORKER_HOSTNAMES"] = ",".join(pod_host(jobset, rjob, slice_id, i, subdomain) for i in range(hosts))
        if topology.get("accelerator_type"):
            env["TPU_ACCELERATOR_TYPE"] = str(topology["accelerator_type"])
    if len(slices) > 1:
        env["MEGASCALE_COORDINATOR_ADDRESS"] = first
        env["MEGASCALE_NUM_SLICES"] = str(len(slices))
        env["MEGASCALE_SLICE_ID"] = str(slice_id)
        env["MEGASCALE_PORT"] = str(config["megascale_port"])
    run_id = config["run_id"]
    env.update(config["env"])
    env.update(gang_env.process_env(run_id, config["lane"], worker, pid, n, first, port))
    return {
        **config["doc"],
        "worker": worker,
        "index": pod_index,
        "slice": slices[slice_id],
        "slice_id": slice_id,
        "num_slices": len(slices),
        "process_id": pid,
        "num_processes": n,
        "coordinator": f"{first}:{port}",
        "address": own,
        "run_dir": os.path.join(config["runs_dir"], run_id, worker),
        "python": config["python"],
        "env": env,
        "unset": [v for v in config["topology_vars"] if v not in env],
    }


def write_run_record(config: Mapping[str, Any], doc: Mapping[str, Any]) -> None:
    """Process 0 writes `<runs>/<run-id>/plan.json` and `run.json`: what `orch report` opens."""
    root = os.path.join(config["runs_dir"], config["run_id"])
    lp.write_json_atomic(os.path.join(root, "plan.json"), config["plan"])
    lp.write_json_atomic(
        os.path.join(root, "run.json"),
        {
            "schema_version": 1,
            "run_id": config["run_id"],
            "name": config["doc"].get("name"),
            "lane": config["lane"],
            "fleet": None,
            "workers": [w for ws in config["workers"] for w in ws],
            "target": config["plan"]["target"],
            "created_at": time.time(),
            "controller": {"host": "jobset/" + doc["coordinator"].split(".", 1)[0], "pid": os.getpid()},
            "state": "jobset",
        },
    )


def run(config: Mapping[str, Any], environ: Mapping[str, str]) -> int:
    """Write the launch file and run the launcher on it; its exit code."""
    doc = launch_doc(config, environ)
    run_dir = doc["run_dir"]
    os.makedirs(run_dir, mode=0o700, exist_ok=True)
    if doc["process_id"] == 0:
        write_run_record(config, doc)
    lp.write_json_atomic(os.path.join(run_dir, lp.LAUNCH_FILE), doc)
    lp.write_json_atomic(os.path.join(run_dir, lp.RELEASE_FILE), {"release_at": time.time(), "by": "jobset"})
    hostside_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cwd = doc.get("cwd") or os.getcwd()
    with open(os.path.join(run_dir, lp.LOG_FILE), "ab") as log:
        proc = subprocess.Popen(
            [doc["python"], "-m", "hostside.launcher", os.path.join(run_dir, lp.LAUNCH_FILE)],
            cwd=cwd,
            env=child_env(doc, hostside_root),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        assert proc.stdout is not None
        # The kubelet stops a pod with SIGTERM to this process (PID 1): the launcher gets it too.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: proc.send_signal(signum))
        for line in proc.stdout:
            log.write(line)
            log.flush()
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
    code = proc.wait()
    return 128 - code if code < 0 else code  # killed by a signal: the shell's convention


def probe(config: Mapping[str, Any], environ: Mapping[str, str]) -> int:
    """The runtime check of `orch probe` under this process's policy: 1 when the runtime is not the lane's."""
    from hostside.probe_runtime_check import check_runtime

    doc = launch_doc(config, environ)
    req = {"lane": doc["lane"], "platform": doc["platform"], "policy": {"env": doc["env"], "forbid": doc["forbid"]}}
    state = {"python": doc["python"], "frontends": doc["frontends"], "bundle_id": None}
    check = check_runtime(req, state, time.monotonic() + float(config.get("probe_deadline", 300)))
    result = check.to_dict()
    print(json.dumps({"job": "jobset-probe", "worker": doc["worker"], **result}), flush=True)
    return 1 if result["status"] == "fail" else 0


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("run", "probe"):
        print("usage: python -m hostside.jobset_entry run|probe CONFIG.json", file=sys.stderr)
        return 2
    config = lp.read_json(argv[1])
    if not isinstance(config, dict):
        print(f"orch jobset entry: cannot read the exported plan {argv[1]}", file=sys.stderr)
        return 2
    try:
        return (run if argv[0] == "run" else probe)(config, os.environ)
    except EntryError as exc:
        print(f"orch jobset entry: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
