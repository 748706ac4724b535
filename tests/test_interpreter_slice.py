"""A bundle that carries its own Python, on the local slice (whose workers' system Python is 3.11).

The default e2e test packs the controller's CPython 3.13 (ORCH_TEST_PYTHON_PREFIX, default
/root/.pyenv/versions/3.13.0; skipped without one) and deploys a Python 3.13 bundle of a
pure-Python wheel from the local mirror, so it needs no internet: the environment runs 3.13 from
the unpacked archive, a redeploy sends nothing, a tampered archive is refused before any worker
is contacted, and the same bundle without the archive is refused naming the worker and the
Python it has.

The opt-in tier (ORCH_SLOW_TESTS=1; cp313 jax/jaxlib wheels come from PyPI, ~150 MB) runs the
multi-process JAX example on 4 workers under the packed 3.13 and checks its psum and receipts.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from orchestrator.bundle import cache_path, read_lock

PREFIX = Path(os.environ.get("ORCH_TEST_PYTHON_PREFIX", "/root/.pyenv/versions/3.13.0"))
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
needs_prefix = pytest.mark.skipif(
    not (PREFIX / "bin" / "python3").exists(), reason=f"no CPython 3.13 to pack at {PREFIX} (ORCH_TEST_PYTHON_PREFIX)"
)


@pytest.fixture(scope="module")
def packed(tmp_path_factory) -> dict:
    """The controller's CPython 3.13, packed once for the module (`bundle interpreter pack --json`)."""
    from orchestrator.bundle.interpreter_pack import pack

    out = tmp_path_factory.mktemp("interp") / "cpython-3.13-orch.tar.gz"
    return pack(PREFIX, out).to_json()


def py313_fleet(sb, name: str, bundle: dict, lane: str = "py313") -> Path:
    """The sandbox's fleet with one bundle `b313` and one lane over every worker running it."""
    doc = yaml.safe_load(Path(sb.fleet_path).read_text())
    doc["bundles"] = {"b313": {"python": "3.13", **bundle}}
    doc["lanes"] = {
        lane: {"workers": "all", "bundle": "b313", "runtime": "cpu", "cache": "per-host", "platform": "cpu"}
    }
    path = Path(sb.dir) / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.mark.ssh
@pytest.mark.e2e
@needs_prefix
def test_a_313_bundle_with_its_own_interpreter_deploys_once_runs_313_and_refuses_a_tampered_archive(
    make_sandbox, packed, tmp_path
):
    sb = make_sandbox(2)
    archive = Path(sb.dir) / "interpreters" / Path(packed["path"]).name
    archive.parent.mkdir()
    shutil.copy(packed["path"], archive)
    interp = {"path": f"interpreters/{archive.name}", "sha256": packed["sha256"]}
    fleet = py313_fleet(sb, "fleet-313.yaml", {"pins": ["opt_einsum==3.4.0"], "interpreter": interp})

    locked = json.loads(sb.orch("--fleet", fleet, "bundle", "lock", "b313", "--json", timeout=300).stdout)
    assert locked["interpreter"]["sha256"] == packed["sha256"] and locked["interpreter"]["version"] == "3.13.0"
    lock = read_lock(Path(sb.dir) / "locks" / "b313.lock.json")
    assert lock.interpreter is not None and lock.interpreter.abi == "cp313"
    sb.orch("--fleet", fleet, "bundle", "check", "b313")

    first = json.loads(sb.orch("--fleet", fleet, "deploy", "--lane", "py313", "--json", timeout=600).stdout)
    assert first["ok"] and {w["status"] for w in first["workers"].values()} == {"installed"}, first
    code = "import json, sys, opt_einsum; print(json.dumps([sys.version.split()[0], sys.base_prefix]))"
    ran = sb.orch(
        "--fleet", fleet, "exec", "--lane", "py313", "--", "/var/lib/orch/lanes/py313/active/bin/python", "-c", code
    )
    answers = [json.loads(line.split(" | ", 1)[1]) for line in ran.stdout.splitlines() if " | " in line]
    home = f"/var/lib/orch/interpreters/{packed['sha256'][:16]}/python"
    assert answers == [["3.13.0", home]] * 2, ran.stdout
    assert sb.ssh(0, "python3", "--version").stdout.startswith("Python 3.11")  # the system Python stayed
    probe = sb.orch("--fleet", fleet, "probe", "--lane", "py313", "--json", check=False, timeout=300).stdout
    rows = json.loads(probe)["rows"]
    bundle_checks = [c for row in rows for c in row["checks"] if c["name"] == "bundle"]
    assert len(bundle_checks) == 2 and all(c["status"] == "ok" for c in bundle_checks), probe
    assert all(f"python 3.13.0 from archive {packed['sha256'][:12]}" in c["summary"] for c in bundle_checks), probe

    again = json.loads(sb.orch("--fleet", fleet, "deploy", "--lane", "py313", "--json").stdout)
    assert again["controller_bytes"] == 0 and {w["status"] for w in again["workers"].values()} == {"unchanged"}

    # Tampered at its source and gone from the controller's cache: refused by hash, no worker contacted.
    cache_path(packed["sha256"], archive.name).unlink(missing_ok=True)
    with open(archive, "r+b") as fh:
        fh.seek(100_000)
        fh.write(b"tampered")
    before = sb.ssh(0, "cat", "/var/lib/orch/receipts/deploy/py313.jsonl").stdout
    refused = sb.orch("--fleet", fleet, "deploy", "--lane", "py313", check=False)
    assert refused.returncode == 2, refused.stderr
    assert "interpreter refused before any worker was contacted" in refused.stderr
    assert re.search(r"sha256 [0-9a-f]{64} does not match the expected " + packed["sha256"], refused.stderr)
    assert sb.ssh(0, "cat", "/var/lib/orch/receipts/deploy/py313.jsonl").stdout == before


@pytest.mark.ssh
@pytest.mark.e2e
def test_a_bundle_of_a_python_the_workers_lack_is_refused_naming_the_worker_and_its_python(make_sandbox):
    sb = make_sandbox(2)
    fleet = py313_fleet(sb, "fleet-313-system.yaml", {"pins": ["opt_einsum==3.4.0"]})
    sb.orch("--fleet", fleet, "bundle", "lock", "b313", timeout=300)
    res = sb.orch("--fleet", fleet, "deploy", "--lane", "py313", check=False, timeout=300)
    assert res.returncode == 1
    assert "slice-w0: failed: no Python 3.13 on this worker (python3 here is 3.11" in res.stdout + res.stderr
    assert "orch bundle interpreter pack" in res.stdout + res.stderr
    listing = sb.ssh(0, "ls", "/var/lib/orch/lanes/py313").stdout.split()
    assert "active" not in listing and "deploy.lock" not in listing


# -- opt-in tier: JAX 0.10.2 (cp313 wheels from PyPI) on 4 workers ---------------------------------


@pytest.mark.slow
@pytest.mark.ssh
@pytest.mark.e2e
@needs_prefix
@pytest.mark.skipif(
    os.environ.get("ORCH_SLOW_TESTS") != "1",
    reason="opt-in tier: ORCH_SLOW_TESTS=1 (cp313 jax/jaxlib/numpy/scipy wheels from PyPI, ~150 MB)",
)
def test_jax_runs_four_processes_with_a_correct_psum_under_the_bundles_own_python(make_sandbox, packed, tmp_path):
    sb = make_sandbox(4)
    interp = {"path": packed["path"], "sha256": packed["sha256"]}
    fleet = py313_fleet(sb, "fleet-jax313.yaml", {"pins": ["jax==0.10.2", "jaxlib==0.10.2"], "interpreter": interp})
    sb.orch("--fleet", fleet, "bundle", "lock", "b313", timeout=1800)
    sb.orch("--fleet", fleet, "bundle", "check", "b313")
    sb.orch("--fleet", fleet, "deploy", "--lane", "py313", timeout=1800)
    runs = tmp_path / "runs"
    res = sb.orch(
        "--fleet", fleet, "launch", "--lane", "py313", "--env", "JAX_NUM_CPU_DEVICES=2",
        "--workdir", str(EXAMPLES), "--", "jax_spmd.py", "--steps", "4",
        timeout=900, env={"ORCH_RUNS_DIR": str(runs)},
    )  # fmt: skip
    assert res.stdout.count("collective check ok (global sum 20)") == 4, res.stdout
    run_id = re.search(r"run (\S+) succeeded", res.stderr).group(1)
    for worker in sb.workers:
        record = json.loads((runs / run_id / worker / "record.json").read_text())
        assert record["python"] == "3.13.0"
        assert (record["interpreter"]["source"], record["interpreter"]["sha256"]) == ("artifact", packed["sha256"])
    report = sb.orch("--fleet", fleet, "report", run_id, env={"ORCH_RUNS_DIR": str(runs)}).stdout
    assert f"interpreter CPython 3.13.0 (archive {packed['sha256'][:12]}), sha256 {packed['sha256']}" in report
