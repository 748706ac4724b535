"""Receipts on the local slice: real launches, real jax/torch processes, real sshd workers.

One JAX launch on 4 workers is shared by the receipt, report and compare
tests (module fixture); the unreduced-metric, torch and paused-gather runs
launch their own.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from orchestrator import receipts, sandbox

pytestmark = [pytest.mark.ssh, pytest.mark.e2e]

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("receipt-runs")


def orch(slice4, runs_dir, *args, fleet=None, **kwargs):
    env = {"ORCH_RUNS_DIR": str(runs_dir), **({"ORCH_FLEET": str(fleet)} if fleet else {})}
    return slice4.orch(*args, env=env, **kwargs)


def run_id_from(stderr: str) -> str:
    return re.search(r"orch: run (\S+):", stderr).group(1)


def gathered(runs_dir: Path, run_id: str, worker: str) -> dict:
    return json.loads((runs_dir / run_id / worker / "record.json").read_text())


@pytest.fixture(scope="module")
def jax_run(slice4, jax_cpu_lane, runs_dir):
    """The JAX example on the 4-worker cpu lane, gathered by the launch itself."""
    res = orch(
        slice4,
        runs_dir,
        "launch",
        "--lane",
        "cpu",
        "--env",
        "JAX_NUM_CPU_DEVICES=2",
        "--env",
        f"HF_TOKEN={SECRET}",
        "--env",
        f"PIP_INDEX_URL=https://ops:{PASSWORD}@pypi.example/simple",
        "--workdir",
        str(EXAMPLES),
        "--",
        "jax_spmd.py",
        "--steps",
        "6",
        timeout=300,
    )
    return run_id_from(res.stderr), res


SECRET, PASSWORD = "hf_orchTestSecret0001", "pw-orchTest-0002"


def test_credentials_in_the_environment_are_written_nowhere_but_the_workers_own_launch_file(slice4, jax_run, runs_dir):
    run_id, res = jax_run
    assert SECRET not in res.stdout + res.stderr and PASSWORD not in res.stdout + res.stderr
    written = [p for p in (runs_dir / run_id).rglob("*") if p.is_file()]
    assert len(written) > 10 and not any(
        SECRET in p.read_text(errors="replace") or PASSWORD in p.read_text(errors="replace") for p in written
    )
    env = gathered(runs_dir, run_id, slice4.workers[0])["policy"]["env"]
    assert env["HF_TOKEN"] == "<redacted>" and env["JAX_NUM_CPU_DEVICES"] == "2"
    assert env["PIP_INDEX_URL"] == "https://<redacted>@pypi.example/simple"
    launch_file = json.loads((runs_dir / run_id / "plan.json").read_text())["processes"][0]["run_dir"] + "/launch.json"
    mode = orch(slice4, runs_dir, "exec", "--workers", slice4.workers[0], "--", "stat", "-c", "%a", launch_file)
    assert mode.stdout.split()[-1] == "600"


def test_a_jax_launch_leaves_four_schema_valid_receipts_with_versions_device_and_backend(
    slice4, jax_cpu_lane, jax_run, runs_dir
):
    run_id, res = jax_run
    assert "gathered receipts and logs of 4/4 workers" in res.stderr, res.stderr
    validator = jsonschema.Draft202012Validator(receipts.load_schema())
    for i, worker in enumerate(slice4.workers):
        doc = gathered(runs_dir, run_id, worker)
        assert list(validator.iter_errors(doc)) == [] and receipts.validate(doc) == []
        assert (doc["run_id"], doc["lane"], doc["worker"]) == (run_id, "cpu", worker)
        assert (doc["process_id"], doc["num_processes"]) == (i, 4)
        assert doc["bundle"] == "jax-cpu" and doc["bundle_id"] == jax_cpu_lane.bundle_id
        assert doc["versions"]["jax"] == doc["versions"]["jaxlib"] == "0.10.2"
        assert doc["versions"]["torch"] is None and doc["versions"]["libtpu"] is None
        assert doc["versions_reported"]["jax"] == "0.10.2" and doc["versions_reported"]["jax_backend"] == "cpu"
        assert doc["devices"]["summary"] == {
            "frontend": "jax",
            "kind": "cpu",
            "device_kind": "cpu",
            "count": 8,
            "local_count": 2,
        }
        assert doc["capabilities"]["jax.experimental.pallas"]["present"] is True
        assert doc["training"]["backends"]["main"]["name"] == "jax_cpu_xla"
        loss = doc["training"]["metrics"]["loss"]
        assert (loss["scope"], loss["reduced_by"], loss["over"], loss["step"]) == ("global", "psum", 4, 5)
        assert doc["training"]["timings"]["step"]["count"] == 6
        assert [s["name"] for s in doc["steps"]] == [
            "policy",
            "import jax",
            "cache-init",
            "wait-release",
            "distributed-init",
            "user-code",
        ]
        assert doc["exit"]["code"] == 0 and doc["started_at"] <= doc["exit"]["ended_at"]
        assert "RESULT process=" in (runs_dir / run_id / worker / "output.log").read_text()
    assert json.loads((runs_dir / run_id / "gather.json").read_text())["complete"] is True


def test_the_report_of_a_clean_run_has_no_warnings_and_plots_every_worker(slice4, jax_run, runs_dir, tmp_path):
    run_id, _ = jax_run
    page = tmp_path / "report.html"
    res = orch(slice4, runs_dir, "report", run_id, "--json", "--html", str(page))
    doc = json.loads(res.stdout)
    assert [f for f in doc["flags"] if f["level"] == "warning"] == []
    assert [w["backends"] for w in doc["workers"]] == [{"main": "jax_cpu_xla"}] * 4
    assert all(w["compile_s"] and w["step_s"] for w in doc["workers"])
    svg = re.search(r"<svg.*?</svg>", page.read_text(), re.S).group(0)
    bars = ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}rect")
    assert sorted(b.get("data-worker") for b in bars) == sorted(slice4.workers * 2)


def test_a_global_metric_recorded_without_reduction_is_flagged_by_report(slice4, jax_cpu_lane, runs_dir):
    res = orch(
        slice4,
        runs_dir,
        "launch",
        "--lane",
        "cpu",
        "--workdir",
        str(EXAMPLES),
        "--",
        "unreduced_metric.py",
        timeout=300,
    )
    run_id = run_id_from(res.stderr)
    assert "! [unreduced-metric]" in res.stderr  # the launch already says so
    report = orch(slice4, runs_dir, "report", run_id).stdout
    assert (
        "[unreduced-metric] metric 'loss' is recorded as global but was not reduced across processes on all 4 workers"
    ) in report
    assert "[global-metric-differs] metric 'loss' is global but its value differs across workers" in report
    assert "loss: global, NOT REDUCED" in report


def test_compare_refuses_two_lanes_with_different_bundles_and_with_the_flag_leads_with_the_stack(
    slice4, jax_run, torch_cpu_lane, torch_cpu_fleet, runs_dir
):
    jax_id, _ = jax_run
    res = orch(
        slice4,
        runs_dir,
        "launch",
        "--lane",
        "torch",
        "--workdir",
        str(EXAMPLES),
        "--",
        "torch_ddp.py",
        "--steps",
        "4",
        fleet=torch_cpu_fleet,
        timeout=300,
    )
    torch_id = run_id_from(res.stderr)
    doc = gathered(runs_dir, torch_id, "slice-w3")
    assert receipts.validate(doc) == []
    assert doc["training"]["backends"]["main"]["name"] == "torch_gloo_cpu"
    assert doc["versions"]["torch"] == "2.13.0+cpu" and doc["versions"]["jax"] is None
    assert doc["devices"]["summary"]["kind"] == "cpu"
    assert doc["training"]["metrics"]["loss"]["reduced_by"] == "all_reduce"

    refused = orch(slice4, runs_dir, "compare", jax_id, torch_id, check=False)
    assert refused.returncode == 1
    assert (
        f"refusing to compare: runs {jax_id} and {torch_id} come from different lanes and bundles "
        f"(lanes cpu vs torch; bundles jax-cpu@{jax_cpu_bundle(jax_id, runs_dir)} vs torch-cpu@"
        f"{torch_cpu_lane.bundle_id[:8]})"
    ) in refused.stderr
    assert "figures:" not in refused.stdout

    allowed = orch(slice4, runs_dir, "compare", jax_id, torch_id, "--allow-cross-lane").stdout
    head, figures = allowed.split("figures:", 1)
    stack = head.split("stack differences", 1)[1].splitlines()[1:]
    assert stack[0].split() == ["lane", "A", "cpu"] and stack[1].split() == ["B", "torch"]
    assert any(line.split()[:2] == ["torch", "(installed)"] for line in stack)
    assert any(line.split()[:2] == ["jax", "(installed)"] for line in stack)
    assert "backend main" in head
    assert f"A [cpu/jax-cpu@{jax_cpu_bundle(jax_id, runs_dir)}]" in figures
    assert f"B [torch/torch-cpu@{torch_cpu_lane.bundle_id[:8]}]" in figures


def jax_cpu_bundle(run_id: str, runs_dir: Path) -> str:
    return gathered(runs_dir, run_id, "slice-w0")["bundle_id"][:8]


def test_gather_names_a_paused_worker_and_completes_it_after_resume(slice4, jax_cpu_lane, runs_dir):
    res = orch(
        slice4,
        runs_dir,
        "launch",
        "--lane",
        "cpu",
        "--no-gather",
        "--workdir",
        str(EXAMPLES),
        "--",
        "jax_spmd.py",
        "--steps",
        "2",
        timeout=300,
    )
    run_id = run_id_from(res.stderr)
    assert "gathered" not in res.stderr and not (runs_dir / run_id / "slice-w0").exists()
    sandbox.pause(slice4.dir, "slice-w2")
    try:
        first = orch(slice4, runs_dir, "--connect-timeout", "2", "gather", run_id, check=False, timeout=120)
    finally:
        sandbox.resume(slice4.dir, "slice-w2")
    assert first.returncode == 1, first.stderr
    assert "gathered receipts and logs of 3/4 workers" in first.stderr
    assert re.search(r"missing slice-w2: no SSH banner from \S+ within 2s", first.stderr), first.stderr
    assert f"run `orch gather {run_id}` again" in first.stderr
    for w in ("slice-w0", "slice-w1", "slice-w3"):
        assert gathered(runs_dir, run_id, w)["exit"]["code"] == 0
    assert not (runs_dir / run_id / "slice-w2" / "record.json").exists()

    second = json.loads(orch(slice4, runs_dir, "gather", run_id, "--json").stdout)
    assert second["complete"] is True and second["missing"] == []
    assert "record.json" in second["workers"]["slice-w2"]["copied"]
    for w in ("slice-w0", "slice-w1", "slice-w3"):  # resumable: nothing fetched twice
        assert second["workers"][w]["copied"] == [] and "record.json" in second["workers"][w]["up_to_date"]
    assert gathered(runs_dir, run_id, "slice-w2")["process_id"] == 2


FALLBACK_SCRIPT = """
import jax
import jax.numpy as jnp
import orch_receipt

devices = jax.devices()  # the TPU lane intends a TPU; with none here, jax quietly answers with the CPU
orch_receipt.record_backend(f"jax_{devices[0].platform}_xla", frontend="jax")
print("sum", float(jnp.ones(4).sum()), "on", devices[0].platform, flush=True)
"""


def test_a_tpu_lane_whose_runtime_fell_back_to_cpu_is_flagged(slice4, jax_libtpu_lane, tpu_fleet, runs_dir, tmp_path):
    (tmp_path / "fallback.py").write_text(FALLBACK_SCRIPT)
    res = orch(
        slice4,
        runs_dir,
        "launch",
        "--lane",
        "tpu",
        "--workdir",
        str(tmp_path),
        "--",
        "fallback.py",
        fleet=tpu_fleet,
        timeout=300,
    )
    run_id = run_id_from(res.stderr)
    doc = gathered(runs_dir, run_id, "slice-w1")
    assert doc["platform"] == "tpu" and doc["versions"]["libtpu"] == "0.0.42.1"
    assert doc["devices"]["summary"]["kind"] == "cpu"
    assert doc["training"]["backends"]["main"]["name"] == "jax_cpu_xla"
    report = orch(slice4, runs_dir, "report", run_id).stdout
    assert (
        "[cpu-fallback] lane tpu intends a TPU, but the device that answered was CPU on all 4 workers "
        "(the runtime fell back)"
    ) in report
