"""Deploy reads a worker's `begin` reply as untrusted: a `missing` list naming a wheel the bundle
does not have fails that worker, naming it, and the others deploy (no KeyError for everyone)."""

from __future__ import annotations

import pytest
from fakes import worker  # noqa: F401  (the scripted_transport fixture comes with conftest)
from test_deploy_logic import begins, installs_and_activates, make_plan

from orchestrator import deploy


@pytest.fixture(autouse=True)
def _private_state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


@pytest.mark.parametrize(
    "missing",
    [
        [{"sha256": "f" * 64, "size": 1, "filename": "evil-1-py3-none-any.whl"}],
        [{"size": 1}],
        ["jax"],
        {"sha256": "x"},
    ],
)
def test_a_worker_reporting_an_unknown_wheel_as_missing_fails_alone(tmp_path, scripted_transport, missing):
    plan = make_plan(tmp_path, 2, ["jax"])
    fake = scripted_transport(plan.workers)
    fake.expect_job("w0", "deploy", ["begin"], answer={**begins([]), "missing": missing})
    fake.expect_job("w0", "deploy", ["unlock"], answer={"ok": True})
    fake.expect_job("w1", "deploy", ["begin"], answer=begins([]))
    installs_and_activates(fake, "w1")

    report = deploy.execute(plan, fake)

    assert {n: o.status for n, o in report.outcomes.items()} == {"w0": "failed", "w1": "installed"}
    assert "missing wheels names wheels not in bundle jax-cpu" in (report.outcomes["w0"].reason or "")
