"""An environment left incomplete on a worker (an install cut short, files lost
since) is never taken as installed: on real sshd workers, probe flags it, the
next deploy removes and rebuilds it and says so, and a completed one stays
`unchanged`."""

from __future__ import annotations

import json

import pytest
from test_deploy_slice import Small, small_slice

pytestmark = pytest.mark.ssh

ROOT = "/var/lib/orch"


@pytest.fixture(scope="module")
def small():
    yield from small_slice()


def probe_bundle(small: Small) -> dict[str, dict]:
    proc = small.orch("small-six", "probe", "--lane", "cpu", "--shallow", "--json", check=False, timeout=300)
    doc = json.loads(proc.stdout)
    return {r["worker"]: next(c for c in r["checks"] if c["name"] == "bundle") for r in doc["rows"]}


def test_an_env_damaged_after_install_is_flagged_by_probe_and_rebuilt_by_the_next_deploy(small):
    bundle_id = small.lock("small-six")
    doc = small.deploy("small-six")
    assert {o["status"] for o in doc["workers"].values()} == {"installed"}
    env = f"{ROOT}/envs/{bundle_id}"
    site = small.h.ssh(0, "sh", "-c", f"echo {env}/lib/python*/site-packages").stdout.strip()
    # what the 256-worker deploy left: one env without bin/python, one without six's module
    small.h.ssh(0, "rm", "-f", f"{env}/bin/python")
    small.h.ssh(1, "rm", "-f", f"{site}/six.py")

    checks = probe_bundle(small)
    assert checks["slice-w0"]["status"] == "fail" and "no Python" in json.dumps(checks["slice-w0"])
    assert checks["slice-w1"]["status"] == "fail" and "lacks six.py" in json.dumps(checks["slice-w1"])
    assert checks["slice-w2"]["status"] != "fail", checks["slice-w2"]

    doc = small.deploy("small-six")
    workers = doc["workers"]
    assert {n: o["status"] for n, o in workers.items()} == {
        "slice-w0": "installed",
        "slice-w1": "installed",
        "slice-w2": "unchanged",
    }
    assert "bin/python is missing" in workers["slice-w0"]["rebuilt"]
    assert "lacks six.py" in workers["slice-w1"]["rebuilt"]
    assert workers["slice-w2"]["rebuilt"] is None
    python = f"{ROOT}/lanes/cpu/active/bin/python"
    out = small.orch("small-six", "exec", "--", python, "-c", "import six; print(six.__version__)").stdout
    for w in small.h.workers:
        assert f"{w} | 1.17.0" in out.splitlines(), out
    assert {c["status"] for c in probe_bundle(small).values()} <= {"ok", "warn"}


def test_an_env_whose_install_never_finished_is_not_unchanged_and_the_text_report_says_rebuilt(small):
    bundle_id = small.lock("small-six")
    small.deploy("small-six")
    env = f"{ROOT}/envs/{bundle_id}"
    site = small.h.ssh(2, "sh", "-c", f"echo {env}/lib/python*/site-packages").stdout.strip()
    # renamed into place before the install finished: no marker, a distribution's files gone
    small.h.ssh(2, "sh", "-c", f"rm -f {env}/.orch-complete && rm -rf {site}/six-*.dist-info")
    checks = probe_bundle(small)
    assert checks["slice-w2"]["status"] == "fail" and "did not finish" in json.dumps(checks["slice-w2"])
    proc = small.orch("small-six", "deploy", "--lane", "cpu", timeout=600)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("slice-w2:"))
    assert line.startswith("slice-w2: installed") and "rebuilt" in line and "completion marker" in line, line
    assert small.h.ssh(2, "test", "-f", f"{env}/.orch-complete").returncode == 0
