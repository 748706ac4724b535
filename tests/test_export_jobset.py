"""`orch export jobset` without a cluster: the manifest against the JobSet CRD, a golden file, the env contract.

The golden file pins the JobSet and the orch ConfigMap of a 2-slice x 2-host
v5p-16 lane (the hostside ConfigMap is checked against the package instead);
regenerate it with ORCH_UPDATE_GOLDEN=1 after an intended change and review the diff.
The JobSet CRD is vendored from a release (tests/data/jobset/README.md).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from hostside import jobset_entry
from orchestrator.bundle import Lock, LockedWheel, write_lock
from orchestrator.cli import main
from orchestrator.errors import ConfigError
from orchestrator.export import JobSetOptions, export_jobset, gke_tpu, render_yaml
from orchestrator.export.jobset import TRANSPORT_FIELDS, TRANSPORT_KEYS, hostside_files
from orchestrator.fleet import load_fleet

DATA = Path(__file__).parent / "data" / "jobset"
GOLDEN = Path(__file__).parent / "golden"
RUN_ID = "train-20260101-000000-beef"

FLEET = """\
version: 1
slices:
  pod-a:
    accelerator_type: v5p-16
    skip_metadata_query: true
    workers:
      - {index: 0, address: 34.1.0.2, internal_address: 10.128.0.2}
      - {index: 1, address: 34.1.0.3, internal_address: 10.128.0.3}
  pod-b:
    accelerator_type: v5p-16
    skip_metadata_query: true
    workers:
      - {index: 0, address: 34.1.1.2, internal_address: 10.129.0.2}
      - {index: 1, address: 34.1.1.3, internal_address: 10.129.0.3}
bundles:
  jax:
    python: "3.11"
    pins: [jax==0.10.2, jaxlib==0.10.2, libtpu==0.0.42.1]
runtime_profiles:
  tpu:
    env: {JAX_PLATFORMS: tpu}
lanes:
  train:
    slices: [pod-a, pod-b]
    bundle: jax
    runtime: tpu
    platform: tpu
"""


def fake_wheel(name: str, version: str, filename: str) -> LockedWheel:
    return LockedWheel(
        name=name,
        version=version,
        filename=filename,
        requires_python=">=3.11",
        requires_dist=(),
        tags=(),
        sha256=hashlib.sha256(filename.encode()).hexdigest(),
        size=1000,
        source=f"/wheels/{filename}",
    )


@pytest.fixture
def fleet(tmp_path):
    (tmp_path / "fleet.yaml").write_text(FLEET)
    (tmp_path / "locks").mkdir()
    wheels = (
        fake_wheel("jax", "0.10.2", "jax-0.10.2-py3-none-any.whl"),
        fake_wheel("jaxlib", "0.10.2", "jaxlib-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl"),
        fake_wheel("libtpu", "0.0.42.1", "libtpu-0.0.42.1-py3-none-manylinux_2_31_x86_64.whl"),
    )
    lock = Lock(
        bundle="jax",
        python="3.11",
        pins=("jax==0.10.2", "jaxlib==0.10.2", "libtpu==0.0.42.1"),
        source={},
        provenance={},
        target={},
        resolver={},
        wheels=wheels,
    )
    write_lock(tmp_path / "locks" / "jax.lock.json", lock)
    return load_fleet(tmp_path / "fleet.yaml")


OPTIONS = JobSetOptions(
    image="us-docker.pkg.dev/proj/train/python:3.11",
    wheels="gcs:orch-wheels/jax-0.10.2",
    max_restarts=3,
    receipts_volume="gcs:orch-receipts",
    run_id=RUN_ID,
)


def closed(schema: Any) -> Any:
    """The schema with unknown fields refused where it lists the fields (the API server would prune them silently)."""
    if isinstance(schema, list):
        return [closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: closed(v) for k, v in schema.items()}
    if "properties" in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        out.setdefault("additionalProperties", False)
    return out


@functools.cache
def crd_validator() -> jsonschema.Draft7Validator:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load((DATA / "jobset.x-k8s.io_jobsets.yaml").read_text(), Loader=loader)
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2"]
    return jsonschema.Draft7Validator(closed(version["schema"]["openAPIV3Schema"]))


def test_the_rendered_jobset_is_valid_against_the_jobset_crd_schema(fleet):
    exported = export_jobset(fleet, "train", ["train.py"], OPTIONS)
    assert exported.jobset["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    crd_validator().validate(exported.jobset)


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("completionMode",), None, "Additional properties are not allowed"),
        (("parallelism",), "two", "'two' is not of type 'integer'"),
        (("template", "spec", "containers", 0, "imagePullPolicy"), 3, "3 is not of type 'string'"),
    ],
)
def test_the_crd_schema_refuses_a_misspelt_field_or_a_wrong_type(fleet, path, value, message):
    jobset = export_jobset(fleet, "train", ["train.py"], OPTIONS).jobset
    bad = json.loads(json.dumps(jobset))
    job = bad["spec"]["replicatedJobs"][0]["template"]["spec"]
    *parents, last = path
    for key in parents:
        job = job[key]
    if value is None:
        job["completionmode"] = job.pop(last)
    else:
        job[last] = value
    with pytest.raises(jsonschema.ValidationError, match=message):
        crd_validator().validate(bad)


def test_export_of_a_two_slice_lane_matches_the_golden_file(fleet):
    exported = export_jobset(fleet, "train", ["train.py", "--steps", "10"], OPTIONS)
    orch_config, _hostside, jobset = exported.objects
    text = render_yaml([orch_config, jobset])
    golden = GOLDEN / "export_jobset_2_slices.yaml"
    if os.environ.get("ORCH_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


def test_one_job_per_slice_one_pod_per_host_on_the_slices_own_node_pool(fleet):
    spec = export_jobset(fleet, "train", ["train.py"], OPTIONS).jobset
    (rjob,) = spec["spec"]["replicatedJobs"]
    job = rjob["template"]["spec"]
    pod = job["template"]["spec"]
    assert rjob["replicas"] == 2 and job["parallelism"] == job["completions"] == 2
    assert job["completionMode"] == "Indexed"
    assert spec["metadata"]["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"] == (
        "cloud.google.com/gke-nodepool"
    )
    assert pod["nodeSelector"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
        "cloud.google.com/gke-tpu-topology": "2x2x2",
    }
    assert pod["containers"][0]["resources"]["limits"] == {"google.com/tpu": "4"}
    assert spec["spec"]["failurePolicy"] == {"maxRestarts": 3}
    assert spec["spec"]["network"]["enableDNSHostnames"] is True
    install = pod["initContainers"][0]["command"][-1]
    assert "--require-hashes" in install and "--no-index" in install and '--find-links "$ORCH_WHEELS"' in install
    assert [c["name"] for c in pod["initContainers"]] == ["bundle", "probe"]
    assert pod["initContainers"][0]["env"] == [{"name": "ORCH_WHEELS", "value": "/orch/wheels/jax-0.10.2"}]
    wheels = pod["volumes"][-1]
    assert wheels["csi"]["readOnly"] and wheels["csi"]["volumeAttributes"] == {"bucketName": "orch-wheels"}


def test_the_bundle_is_installed_from_its_lock_with_every_hash(fleet):
    orch_config = export_jobset(fleet, "train", ["train.py"], OPTIONS).objects[0]
    lines = orch_config["data"]["requirements.txt"].splitlines()[1:]
    assert lines == [
        f"{n}=={v} --hash=sha256:{hashlib.sha256(f.encode()).hexdigest()}"
        for n, v, f in (
            ("jax", "0.10.2", "jax-0.10.2-py3-none-any.whl"),
            ("jaxlib", "0.10.2", "jaxlib-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl"),
            ("libtpu", "0.0.42.1", "libtpu-0.0.42.1-py3-none-manylinux_2_31_x86_64.whl"),
        )
    ]


def test_the_hostside_config_map_carries_the_package_the_controller_has(fleet):
    _, hostside_map, _ = export_jobset(fleet, "train", ["train.py"], OPTIONS).objects
    assert hostside_map["data"] == hostside_files()
    assert "jobset_entry.py" in hostside_map["data"] and "launcher.py" in hostside_map["data"]


def test_every_process_gets_the_env_of_orch_launch_dry_run_but_for_host_names(fleet, tmp_path):
    """The JobSet path's env contract equals `orch launch --dry-run --json`'s, up to TRANSPORT_KEYS."""
    argv = ["--fleet", str(fleet.path), "launch", "--lane", "train", "--dry-run", "--json", "--run-id", RUN_ID]
    result = CliRunner().invoke(main, [*argv, "--", "train.py"])
    assert result.exit_code == 0, result.output
    ssh = json.loads(result.output)
    exported = export_jobset(fleet, "train", ["train.py"], OPTIONS)
    config = exported.config
    # what a pod computes from the JobSet env, exactly as jobset_entry runs in the pod
    pods = [
        jobset_entry.launch_doc(
            config,
            {
                "JOBSET_NAME": config["jobset"],
                "REPLICATED_JOB_NAME": "slice",
                "JOB_INDEX": str(j),
                "JOB_COMPLETION_INDEX": str(i),
            },
        )
        for j in range(2)
        for i in range(2)
    ]
    address_of = {p["address"]: pod["address"] for p, pod in zip(ssh["processes"], pods, strict=True)}
    assert address_of == {
        "10.128.0.2": "train-20260101-000000-beef-slice-0-0.train-20260101-000000-beef",
        "10.128.0.3": "train-20260101-000000-beef-slice-0-1.train-20260101-000000-beef",
        "10.129.0.2": "train-20260101-000000-beef-slice-1-0.train-20260101-000000-beef",
        "10.129.0.3": "train-20260101-000000-beef-slice-1-1.train-20260101-000000-beef",
    }
    for p, pod in zip(ssh["processes"], pods, strict=True):
        assert (pod["process_id"], pod["worker"], pod["slice"]) == (p["process_id"], p["worker"], p["slice"])
        assert set(pod["env"]) == set(p["env"])
        same = {k for k in p["env"] if k not in TRANSPORT_KEYS}
        assert {k: pod["env"][k] for k in same} == {k: p["env"][k] for k in same}
        for key in TRANSPORT_KEYS:  # the same hosts, named the pods' way
            mapped = p["env"][key]
            for addr, host in address_of.items():
                mapped = mapped.replace(addr, host)
            assert pod["env"][key] == mapped, key
    # the launch file besides env: equal but for where things live
    from orchestrator.launch import plan_launch

    plan = plan_launch(fleet, "train", ["train.py"], run_id=RUN_ID)
    for p, pod in zip(plan.processes, pods, strict=True):
        ssh_doc = plan.launch_doc(p)
        skip = {"env", *TRANSPORT_FIELDS}
        assert {k: v for k, v in pod.items() if k not in skip} == {k: v for k, v in ssh_doc.items() if k not in skip}


def test_a_pod_outside_the_exported_plan_is_refused_by_name(fleet):
    config = export_jobset(fleet, "train", ["train.py"], OPTIONS).config
    env = {"JOBSET_NAME": "x", "REPLICATED_JOB_NAME": "slice", "JOB_INDEX": "2", "JOB_COMPLETION_INDEX": "0"}
    with pytest.raises(jobset_entry.EntryError, match=r"JOB_INDEX=2 is outside the exported plan \(expected 0..1\)"):
        jobset_entry.launch_doc(config, env)
    with pytest.raises(jobset_entry.EntryError, match="JOB_COMPLETION_INDEX='': expected the pod's index"):
        jobset_entry.launch_doc(config, {**env, "JOB_INDEX": "0", "JOB_COMPLETION_INDEX": ""})


@pytest.mark.parametrize(
    ("accelerator", "label", "topology", "hosts", "chips_per_host"),
    [
        ("v5p-16", "tpu-v5p-slice", "2x2x2", 2, 4),
        ("v4-32", "tpu-v4-podslice", "2x2x4", 4, 4),
        ("v5litepod-16", "tpu-v5-lite-podslice", "4x4", 4, 4),
        ("v6e-8", "tpu-v6e-slice", "2x4", 1, 8),
        ("v6e-32", "tpu-v6e-slice", "4x8", 8, 4),
    ],
)
def test_accelerator_types_map_to_gke_labels_and_shapes(accelerator, label, topology, hosts, chips_per_host):
    tpu = gke_tpu(accelerator)
    assert (tpu.accelerator, tpu.topology, tpu.hosts, tpu.chips_per_host) == (label, topology, hosts, chips_per_host)


def test_an_unknown_accelerator_type_or_a_partial_slice_is_refused(fleet, tmp_path):
    with pytest.raises(ConfigError, match="'v9x-16': no GKE mapping"):
        gke_tpu("v9x-16")
    text = FLEET.replace("v5p-16", "v5p-32")
    (tmp_path / "fleet.yaml").write_text(text)
    with pytest.raises(ConfigError, match="a v5p-32 slice on GKE has 4 hosts; a JobSet runs whole slices"):
        export_jobset(load_fleet(tmp_path / "fleet.yaml"), "train", ["train.py"], OPTIONS)


def test_a_run_id_too_long_for_a_label_value_is_left_out_of_the_labels_and_the_jobset_stays_valid(fleet):
    run_id = "a-very-long-experiment-name-" + "x" * 40 + "-20260101-000000-beef"
    jobset = export_jobset(fleet, "train", ["train.py"], JobSetOptions(run_id=run_id)).jobset
    assert "orch.dev/run-id" not in jobset["metadata"]["labels"] and len(jobset["metadata"]["name"]) <= 40
    crd_validator().validate(jobset)


def test_a_bad_receipts_volume_is_refused_with_the_accepted_forms(fleet):
    options = JobSetOptions(receipts_volume="s3://bucket", run_id=RUN_ID)
    with pytest.raises(ConfigError, match="expected gcs:BUCKET"):
        export_jobset(fleet, "train", ["train.py"], options)


def test_a_credential_in_the_lanes_policy_or_the_wheels_url_is_never_written_into_the_manifest(fleet, tmp_path):
    text = FLEET.replace("env: {JAX_PLATFORMS: tpu}", "env: {JAX_PLATFORMS: tpu, HF_TOKEN: hf_abc123}")
    (Path(fleet.path).parent / "fleet.yaml").write_text(text)
    with pytest.raises(ConfigError, match="lane 'train' sets HF_TOKEN, which holds a credential") as err:
        export_jobset(load_fleet(fleet.path), "train", ["train.py"], OPTIONS)
    assert "hf_abc123" not in str(err.value) and "secretKeyRef" in (err.value.hint or "")
    options = JobSetOptions(wheels="https://me:s3cret@wheels.example.com/jax/", run_id=RUN_ID)
    with pytest.raises(ConfigError, match="the URL carries a credential") as err:
        export_jobset(fleet, "train", ["train.py"], options)
    assert "s3cret" not in str(err.value)


def test_orch_export_jobset_writes_the_manifest_to_a_file(fleet, tmp_path):
    out = tmp_path / "jobset.yaml"
    argv = ["--fleet", str(fleet.path), "export", "jobset", "--lane", "train", "--run-id", RUN_ID]
    argv += ["--max-restarts", "2", "--receipts-volume", "pvc:runs", "-o", str(out), "--", "train.py"]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(out.read_text()))
    assert [d["kind"] for d in docs] == ["ConfigMap", "ConfigMap", "JobSet"]
    assert docs[2]["spec"]["failurePolicy"] == {"maxRestarts": 2}
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    assert docs[1]["data"] == hostside_files()  # literal blocks read back byte for byte


def test_a_lane_without_a_lock_is_refused_with_the_command_that_makes_one(fleet):
    (Path(fleet.path).parent / "locks" / "jax.lock.json").unlink()
    argv = ["--fleet", str(fleet.path), "export", "jobset", "--lane", "train", "--", "train.py"]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 2 and "orch bundle lock jax" in result.output, result.output
    assert "Traceback" not in result.output
