"""`orch export jobset`: a lane as a JobSet that keeps orch's contract (pure: reads the fleet and the lock).

The export is three Kubernetes objects:

- ConfigMap `<name>-orch`: `plan.json` (the exported plan hostside/jobset_entry.py
  turns into each pod's launch file) and `requirements.txt` (the bundle's lock,
  every wheel pinned by sha256);
- ConfigMap `<name>-hostside`: orch's hostside package, so no image carries orch;
- the JobSet: one replicated job `slice` with one Job per slice of the lane
  (replicas = slices, as xpk does: the job index is the slice id, and every
  slice has the same type and shape), parallelism = completions = hosts per
  slice, Indexed; exclusive placement per node pool; TPU node selectors and
  `google.com/tpu`; `failurePolicy.maxRestarts`; DNS hostnames (the JobSet's
  headless service) for the coordinator; init containers that install the
  bundle offline with hashes required and probe the runtime; the entrypoint
  hostside.jobset_entry, which runs hostside.launcher.

The process ids, coordinator, topology and MEGASCALE values are those of
`plan_launch` for the same lane, with pod DNS names where the SSH plan has
internal addresses (`TRANSPORT_KEYS`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

import hostside
from hostside import jobset_entry, redact
from orchestrator.bundle import read_lock
from orchestrator.errors import BundleError, ConfigError
from orchestrator.export.gke import ACCELERATOR_LABEL, TOPOLOGY_LABEL, TPU_RESOURCE, GkeTpu, gke_tpu
from orchestrator.fleet import Fleet
from orchestrator.launch.plan import ORCH_VARS, LaunchPlan, plan_launch
from orchestrator.policy import TOPOLOGY_VARS

API_VERSION = "jobset.x-k8s.io/v1alpha2"
EXCLUSIVE_KEY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
REPLICATED_JOB = "slice"
ORCH_DIR = "/orch"
BUNDLE_PYTHON = f"{ORCH_DIR}/env/bin/python"
CONFIG_DIR = f"{ORCH_DIR}/config"
LIB_DIR = f"{ORCH_DIR}/lib"
RUNS_DIR = f"{ORCH_DIR}/runs"
WHEELS_DIR = f"{ORCH_DIR}/wheels"
GCSFUSE = "gcsfuse.csi.storage.gke.io"
GCSFUSE_ANNOTATION = "gke-gcsfuse/volumes"
# Keys whose values name hosts: pod DNS names on GKE, internal addresses over SSH. Everything else is equal.
TRANSPORT_KEYS = ("TPU_WORKER_HOSTNAMES", "MEGASCALE_COORDINATOR_ADDRESS", "ORCH_COORDINATOR", "MASTER_ADDR")
# Launch-file fields that are where things live, not what runs.
TRANSPORT_FIELDS = ("address", "coordinator", "run_dir", "python", "cwd")
_VOLUME = re.compile(r"^(gcs|pvc):([a-z0-9][a-z0-9._-]*)$")


@dataclass(frozen=True)
class JobSetOptions:
    image: str | None = None  # default: python:<bundle python>-slim
    wheels: str = "/wheels"  # gcs:BUCKET[/PREFIX] (mounted read-only), an HTTPS page of links, or a path
    max_restarts: int = 0
    receipts_volume: str | None = None  # gcs:BUCKET | pvc:CLAIM; None: an emptyDir (receipts die with the pod)
    name: str | None = None
    run_id: str | None = None
    port: int | None = None


@dataclass(frozen=True)
class JobSetExport:
    """What `orch export jobset` renders: the plan as the pods will run it, and the objects."""

    plan: LaunchPlan  # processes with pod DNS names and pod paths
    config: dict[str, Any]  # plan.json of the orch ConfigMap
    objects: tuple[dict[str, Any], ...]  # ConfigMap orch, ConfigMap hostside, JobSet

    @property
    def jobset(self) -> dict[str, Any]:
        return self.objects[-1]


def jobset_name(run_id: str) -> str:
    """A DNS label from the run id, short enough for `<name>-slice-<j>-<p>` pod hostnames."""
    name = re.sub(r"[^a-z0-9-]+", "-", run_id.lower()).strip("-")[:40].strip("-")
    return name or "orch-run"


def slice_shape(fleet: Fleet, lane: str, plan: LaunchPlan) -> tuple[int, GkeTpu | None]:
    """Hosts per slice, and GKE's names for the slice type (None for a CPU lane without a TPU type)."""
    counts = {s: sum(1 for p in plan.processes if (p.slice or plan.slice) == s) for s in plan.all_slices}
    hosts = counts[plan.all_slices[0]]
    accel = fleet.model.slices[plan.all_slices[0]].accelerator_type
    if not accel:
        if plan.platform == "tpu":
            raise ConfigError(
                f"{fleet.path.name}: slices.{plan.all_slices[0]}.accelerator_type is not set; "
                "a TPU lane's JobSet needs it for the node selectors (e.g. v5p-16)"
            )
        return hosts, None
    tpu = gke_tpu(accel)
    if tpu.hosts != hosts:
        raise ConfigError(
            f"{fleet.path.name}: lane '{lane}' has {hosts} workers in slice {plan.all_slices[0]}, but a {accel} "
            f"slice on GKE has {tpu.hosts} hosts; a JobSet runs whole slices"
        )
    return hosts, tpu


def requirements(fleet: Fleet, bundle: str) -> str:
    """The lock as a hash-checked requirements file (every wheel of the closure, by sha256)."""
    path = fleet.lock_path(bundle)
    if not path.exists():
        raise BundleError(f"bundle '{bundle}' has no lock at {path}", hint=f"run `orch bundle lock {bundle}` first")
    lock = read_lock(path)
    lines = [f"# bundle {bundle} ({lock.bundle_id}), from {path.name}"]
    lines += [f"{w.project}=={w.version} --hash=sha256:{w.sha256}" for w in lock.wheels]
    return "\n".join(lines) + "\n"


def export_config(fleet: Fleet, plan: LaunchPlan, name: str, hosts: int) -> dict[str, Any]:
    """plan.json: everything hostside/jobset_entry.py needs to build each pod's launch file."""
    p0 = plan.processes[0]
    profile = fleet.runtime_profile(plan.lane).env
    common = {k: v for k, v in p0.env.items() if k not in ORCH_VARS and (k not in TOPOLOGY_VARS or k in profile)}
    first_slice = fleet.model.slices[plan.all_slices[0]]
    topology = (
        {"accelerator_type": first_slice.accelerator_type}
        if first_slice.skip_metadata_query or plan.platform == "tpu"
        else None
    )
    written = redact.env(common)
    secret = [k for k in common if written[k] != common[k]]
    if secret:
        raise ConfigError(
            f"{fleet.path.name}: lane '{plan.lane}' sets {', '.join(secret)}, which holds a credential; "
            "orch export does not write credentials into a ConfigMap (anyone who reads the namespace's "
            "ConfigMaps reads them)",
            hint="drop it from the lane's runtime profile and give the pods the value from a Kubernetes Secret "
            "(env valueFrom.secretKeyRef on the train container): the launcher passes the pod's environment on",
        )
    template = plan.launch_doc(p0)
    for key in ("worker", "index", "slice", "slice_id", "num_slices", "process_id", "num_processes", "env", "unset"):
        template.pop(key)
    template.update(address=None, coordinator=None, run_dir=None, python=BUNDLE_PYTHON)
    return {
        "schema_version": 1,
        "run_id": plan.run_id,
        "lane": plan.lane,
        "jobset": name,
        "replicated_job": REPLICATED_JOB,
        "subdomain": name,
        "slices": list(plan.all_slices),
        "hosts_per_slice": hosts,
        "workers": [[p.worker for p in plan.processes if (p.slice or plan.slice) == s] for s in plan.all_slices],
        "coordinator_port": plan.coordinator_port,
        "megascale_port": plan.megascale_port,
        "topology": topology,
        "topology_vars": list(TOPOLOGY_VARS),
        "env": common,
        "python": BUNDLE_PYTHON,
        "runs_dir": RUNS_DIR,
        "doc": template,
        "plan": {},
    }


def pod_environ(name: str, slice_id: int, pod_index: int) -> dict[str, str]:
    """What the JobSet controller and the kubelet give pod `pod_index` of slice `slice_id` (via the manifest)."""
    return {
        "JOBSET_NAME": name,
        "REPLICATED_JOB_NAME": REPLICATED_JOB,
        "JOB_INDEX": str(slice_id),
        "JOB_COMPLETION_INDEX": str(pod_index),
    }


def pod_plan(plan: LaunchPlan, config: dict[str, Any], name: str) -> LaunchPlan:
    """The SSH plan as the pods run it: each process's launch file from hostside.jobset_entry."""
    docs = [
        jobset_entry.launch_doc(config, pod_environ(name, j, i))
        for j in range(len(config["slices"]))
        for i in range(config["hosts_per_slice"])
    ]
    procs = tuple(
        replace(p, address=d["address"], run_dir=d["run_dir"], python=d["python"], env=d["env"])
        for p, d in zip(plan.processes, docs, strict=True)
    )
    return replace(plan, coordinator_address=docs[0]["coordinator"].rsplit(":", 1)[0], processes=procs)


def export_jobset(fleet: Fleet, lane: str, argv: list[str], options: JobSetOptions) -> JobSetExport:
    """The lane's JobSet and its ConfigMaps, and the plan the pods will run."""
    if options.max_restarts < 0:
        raise ConfigError(f"--max-restarts must be 0 or more, got {options.max_restarts}")
    plan = plan_launch(fleet, lane, argv, run_id=options.run_id, port=options.port)
    name = options.name or jobset_name(plan.run_id)
    if not re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?", name):
        raise ConfigError(f"--name {name!r}: a JobSet name here is a DNS label of at most 40 characters")
    hosts, tpu = slice_shape(fleet, lane, plan)
    config = export_config(fleet, plan, name, hosts)
    exported = pod_plan(plan, config, name)
    config["plan"] = exported.to_dict()
    bundle = fleet.bundle(plan.bundle)
    image = options.image or f"python:{bundle.python}-slim"
    objects = (
        _config_map(
            f"{name}-orch",
            plan,
            {
                "plan.json": json.dumps(config, indent=1, sort_keys=True) + "\n",
                "requirements.txt": requirements(fleet, plan.bundle),
            },
        ),
        _config_map(f"{name}-hostside", plan, hostside_files()),
        _jobset(name, plan, hosts, tpu, image, options),
    )
    return JobSetExport(plan=exported, config=config, objects=objects)


def hostside_files() -> dict[str, str]:
    """orch's hostside package, file by file (the pods import it from a ConfigMap volume)."""
    root = Path(hostside.__file__).parent
    return {p.name: p.read_text() for p in sorted(root.glob("*.py"))}


_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")


def _labels(plan: LaunchPlan, **more: str) -> dict[str, str]:
    """orch's labels; a value Kubernetes would refuse as a label (over 63 characters) is left out."""
    wanted = {"orch.dev/lane": plan.lane, **{f"orch.dev/{k.replace('_', '-')}": v for k, v in more.items()}}
    return {"app.kubernetes.io/managed-by": "orch", **{k: v for k, v in wanted.items() if _LABEL_VALUE.fullmatch(v)}}


def _config_map(name: str, plan: LaunchPlan, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": _labels(plan)}, "data": data}


def _receipts_volume(spec: str | None) -> tuple[dict[str, Any], dict[str, str]]:
    """The volume receipts and logs go to, and the pod annotations it needs."""
    if spec is None:
        return {"name": "receipts", "emptyDir": {}}, {}
    m = _VOLUME.match(spec)
    if not m:
        raise ConfigError(f"--receipts-volume {spec!r}: expected gcs:BUCKET (GCS FUSE) or pvc:CLAIM")
    kind, what = m.groups()
    if kind == "pvc":
        return {"name": "receipts", "persistentVolumeClaim": {"claimName": what}}, {}
    volume = {
        "name": "receipts",
        "csi": {"driver": "gcsfuse.csi.storage.gke.io", "volumeAttributes": {"bucketName": what}},
    }
    return volume, {"gke-gcsfuse/volumes": "true"}


def _wheels_volume(spec: str) -> tuple[str, dict[str, Any] | None]:
    """pip's --find-links in the pod, and the read-only volume it needs (gcs:BUCKET[/PREFIX] only)."""
    if redact.value("ORCH_WHEELS", spec) != spec:
        raise ConfigError(
            f"--wheels {redact.value('ORCH_WHEELS', spec)}: the URL carries a credential, which the manifest "
            "would show to anyone who reads the JobSet",
            hint="serve the wheels from a bucket the pods' service account reads (gcs:BUCKET/PREFIX)",
        )
    if not spec.startswith("gcs:"):
        return spec, None  # an HTTPS page of links, or a path the image already has
    bucket, _, prefix = spec[4:].partition("/")
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", bucket):
        raise ConfigError(f"--wheels {spec!r}: expected gcs:BUCKET[/PREFIX], an https:// URL or a path")
    volume = {
        "name": "wheels",
        "csi": {"driver": GCSFUSE, "readOnly": True, "volumeAttributes": {"bucketName": bucket}},
    }
    return f"{WHEELS_DIR}/{prefix}".rstrip("/"), volume


def _pod_env() -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": var, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{key}']"}}}
        for var, key in jobset_entry.ANNOTATIONS.items()
    ]
    return [*env, {"name": "PYTHONPATH", "value": LIB_DIR}, {"name": "PYTHONUNBUFFERED", "value": "1"}]


def _jobset(
    name: str, plan: LaunchPlan, hosts: int, tpu: GkeTpu | None, image: str, options: JobSetOptions
) -> dict[str, Any]:
    receipts, annotations = _receipts_volume(options.receipts_volume)
    find_links, wheels = _wheels_volume(options.wheels)
    if wheels:
        annotations = {GCSFUSE_ANNOTATION: "true"}
    resources = {"limits": {TPU_RESOURCE: str(tpu.chips_per_host)}} if tpu else {}
    mounts = [
        {"name": "orch", "mountPath": ORCH_DIR + "/env", "subPath": "env"},
        {"name": "orch-config", "mountPath": CONFIG_DIR, "readOnly": True},
        {"name": "orch-hostside", "mountPath": LIB_DIR + "/hostside", "readOnly": True},
        {"name": "receipts", "mountPath": RUNS_DIR},
    ]
    entry = ["python", "-m", "hostside.jobset_entry"]
    install = (
        f"python -m venv {ORCH_DIR}/env && {ORCH_DIR}/env/bin/pip install --require-hashes --no-deps --no-index "
        f'--find-links "$ORCH_WHEELS" -r {CONFIG_DIR}/requirements.txt'
    )
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "initContainers": [
            {
                "name": "bundle",
                "image": image,
                "command": ["sh", "-c", install],
                "env": [{"name": "ORCH_WHEELS", "value": find_links}],
                "volumeMounts": mounts[:2]
                + ([{"name": "wheels", "mountPath": WHEELS_DIR, "readOnly": True}] if wheels else []),
            },
            {
                "name": "probe",
                "image": image,
                "command": [*entry, "probe", f"{CONFIG_DIR}/plan.json"],
                "env": _pod_env(),
                "resources": resources,
                "volumeMounts": mounts[:3],
            },
        ],
        "containers": [
            {
                "name": "train",
                "image": image,
                "command": [*entry, "run", f"{CONFIG_DIR}/plan.json"],
                "env": _pod_env(),
                "resources": resources,
                "volumeMounts": mounts,
            }
        ],
        "volumes": [
            {"name": "orch", "emptyDir": {}},
            {"name": "orch-config", "configMap": {"name": f"{name}-orch"}},
            {"name": "orch-hostside", "configMap": {"name": f"{name}-hostside"}},
            receipts,
            *([wheels] if wheels else []),
        ],
    }
    if tpu:
        pod_spec["nodeSelector"] = {ACCELERATOR_LABEL: tpu.accelerator, TOPOLOGY_LABEL: tpu.topology}
    template: dict[str, Any] = {"metadata": {"labels": _labels(plan)}, "spec": pod_spec}
    if annotations:
        template["metadata"]["annotations"] = annotations
    return {
        "apiVersion": API_VERSION,
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "labels": _labels(plan, run_id=plan.run_id),
            "annotations": {EXCLUSIVE_KEY: NODEPOOL_LABEL},
        },
        "spec": {
            "failurePolicy": {"maxRestarts": options.max_restarts},
            "network": {"enableDNSHostnames": True, "subdomain": name, "publishNotReadyAddresses": True},
            "replicatedJobs": [
                {
                    "name": REPLICATED_JOB,
                    "replicas": len(plan.all_slices),
                    "template": {
                        "spec": {
                            "parallelism": hosts,
                            "completions": hosts,
                            "completionMode": "Indexed",
                            "backoffLimit": 0,
                            "template": template,
                        }
                    },
                }
            ],
        },
    }


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (plan.json, requirements.txt, hostside modules) as literal blocks; no anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def render_yaml(objects: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> str:
    """The objects as one multi-document YAML stream (`kubectl apply -f`)."""
    return "---\n".join(yaml.dump(o, Dumper=_Dumper, sort_keys=False, width=120) for o in objects)
