"""Deploy reads a worker's `begin` reply as untrusted: a `missing` list naming a wheel the bundle
does not have fails that worker, naming it (no KeyError and no traceback), and, the lane being
locked all or nothing, the deploy stops before any other worker's environment is touched."""

from __future__ import annotations

import pytest
from fakes import worker  # noqa: F401  (the scripted_transport fixture comes with conftest)
from test_deploy_logic import begins, make_plan

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
def test_a_worker_reporting_an_unknown_wheel_as_missing_fails_by_name_and_nothing_is_switched(
    tmp_path, scripted_transport, missing
):
    plan = make_plan(tmp_path, 2, ["jax"])
    fake = scripted_transport(plan.workers)
    fake.expect_job("w0", "deploy", ["begin"], answer={**begins([]), "missing": missing})
    fake.expect_job("w0", "deploy", ["unlock"], answer={"ok": True})

    report = deploy.execute(plan, fake)

    assert report.outcomes["w0"].status == "failed"
    assert "missing wheels names wheels not in bundle jax-cpu" in (report.outcomes["w0"].reason or "")
    assert all(o.status != "installed" for o in report.outcomes.values())
