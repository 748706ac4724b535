"""Deploy's decisions, against a scripted transport (no SSH: the slice tests prove the capabilities).

Each test scripts what every worker answers, in order; the fake fails the
test on any call the script did not expect, and on any expected call that
never came.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from fakes import Call, exits, timed_out, unreachable, worker

from orchestrator import deploy
from orchestrator.bundle import CachedWheel


@pytest.fixture(autouse=True)
def _private_state(tmp_path, monkeypatch):
    """The controller's deploy liveness files go under the test's own directory."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def make_wheel(tmp_path: Path, name: str, size: int = 64) -> CachedWheel:
    path = tmp_path / "wheels" / f"{name}-1-py3-none-any.whl"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = name.encode() * (size // len(name))
    path.write_bytes(data)
    return CachedWheel(
        name=name,
        version="1",
        filename=path.name,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        path=path,
    )


def make_plan(tmp_path: Path, workers: int, wheels: list[str], relay: bool = False) -> deploy.DeployPlan:
    return deploy.DeployPlan(
        lane="cpu",
        bundle="jax-cpu",
        bundle_id="new",
        lock_digest="digest",
        python="3.11",
        workers=tuple(worker(i) for i in range(workers)),
        wheels=tuple(make_wheel(tmp_path, n) for n in wheels),
        uv=make_wheel(tmp_path, "uv"),
        relay=relay,
    )


def begins(missing: list[CachedWheel], free: int = 2**40) -> dict:
    return {
        "ok": True,
        "state": "locked-by-us",
        "active": "old",
        "missing": [w.request() for w in missing],
        "disk_free_bytes": free,
    }


def installs_and_activates(fake, host: str) -> None:
    fake.expect_job(host, "deploy", ["install"], answer={"ok": True, "elapsed": 1.0})
    fake.expect_job(host, "deploy", ["activate"], answer={"ok": True, "previous": "old"})
    fake.expect_job(host, "deploy", ["unlock"])  # kept until every worker has switched


def test_a_worker_gets_pushed_only_the_wheels_its_reply_says_it_lacks(tmp_path, scripted_transport):
    plan = make_plan(tmp_path, 2, ["jax", "numpy"])
    jax = plan.wheels[0]
    fake = scripted_transport(plan.workers)
    fake.expect_job("w0", "deploy", ["begin"], answer=begins([jax]))
    fake.expect_run("w0", ["mkdir", "-p", "/var/lib/orch/store/sha256/.incoming"])
    fake.expect_put("w0", f"/var/lib/orch/store/sha256/.incoming/{jax.sha256[:16]}.")
    fake.expect_job("w0", "deploy", ["receive"], answer={"ok": True, "bad": []})
    installs_and_activates(fake, "w0")
    fake.expect_job("w1", "deploy", ["begin"], answer=begins([]))
    installs_and_activates(fake, "w1")

    report = deploy.execute(plan, fake)

    assert report.ok
    assert [c.argv[1] for c in fake.calls_to("w0", "put")] == [str(jax.path)]
    assert fake.calls_to("w1", "put") == []
    assert (report.outcomes["w0"].bytes_from_controller, report.outcomes["w1"].bytes_from_controller) == (jax.size, 0)
    [receive] = [c for c in fake.calls_to("w0") if "receive" in c.argv]
    assert [f["filename"] for f in receive.request["files"]] == [jax.filename]


def test_a_worker_that_does_not_answer_at_begin_stops_the_deploy_on_every_worker(tmp_path, scripted_transport):
    plan = make_plan(tmp_path, 3, ["jax"])
    fake = scripted_transport(plan.workers)
    fake.expect_job("w0", "deploy", ["begin"], answer=begins([]))
    fake.expect_job("w1", "deploy", ["begin"], reply=timed_out())
    fake.expect_job("w2", "deploy", ["begin"], answer=begins([]))
    fake.expect_job("w0", "deploy", ["unlock"])
    fake.expect_job("w2", "deploy", ["unlock"])

    report = deploy.execute(plan, fake)

    assert not report.ok
    assert {o.status for o in report.outcomes.values()} == {"failed"}
    assert report.outcomes["w1"].reason == "begin: timed out after 60s"
    assert report.outcomes["w0"].reason == (
        "not deployed: lane cpu could not be locked on every worker (w1: begin: timed out after 60s)"
    )
    # w1 never said it took the lock: nothing to release there, nothing else sent to it
    assert [c.argv[-1] for c in fake.calls_to("w1")] == ["begin"]


def test_a_lane_whose_first_worker_another_deploy_holds_is_refused_there_before_any_other_is_touched(
    tmp_path, scripted_transport
):
    plan = make_plan(tmp_path, 3, ["jax"])
    holder = {"token": "ab12", "controller": "elsewhere", "user": "ana", "pid": 7, "bundle_id": "other"}
    fake = scripted_transport(plan.workers)
    fake.expect_job(
        "w0", "deploy", ["begin"], answer={"ok": True, "state": "locked", "holder": holder, "heartbeat_age": 3.0}
    )

    report = deploy.execute(plan, fake)

    assert report.outcomes["w0"].status == "failed"
    assert report.outcomes["w0"].reason == (
        "another deploy holds lane cpu: ana@elsewhere pid 7 (bundle other, heartbeat 3.0s ago)"
    )
    for name in ("w1", "w2"):
        assert report.outcomes[name].status == "failed"
        assert report.outcomes[name].reason.startswith("not deployed: lane cpu could not be locked on every worker")
        assert fake.calls_to(name) == []


def test_a_lane_another_deploy_holds_on_a_later_worker_releases_every_lock_taken(tmp_path, scripted_transport):
    plan = make_plan(tmp_path, 2, ["jax"])
    holder = {"token": "ab12", "controller": "elsewhere", "user": "ana", "pid": 7, "bundle_id": "other"}
    fake = scripted_transport(plan.workers)
    fake.expect_job("w0", "deploy", ["begin"], answer=begins([]))
    fake.expect_job(
        "w1", "deploy", ["begin"], answer={"ok": True, "state": "locked", "holder": holder, "heartbeat_age": 3.0}
    )
    fake.expect_job("w0", "deploy", ["unlock"])

    report = deploy.execute(plan, fake)

    assert {n: o.status for n, o in report.outcomes.items()} == {"w0": "failed", "w1": "failed"}
    assert "ana@elsewhere pid 7" in report.outcomes["w0"].reason


def test_a_worker_that_fails_to_install_keeps_every_worker_on_its_previous_bundle(tmp_path, scripted_transport):
    plan = make_plan(tmp_path, 2, ["jax"])
    fake = scripted_transport(plan.workers)
    fake.expect_job("w0", "deploy", ["begin"], answer=begins([]))
    fake.expect_job("w0", "deploy", ["install"], answer={"ok": False, "error": "uv: no solution for jax==9"})
    fake.expect_job("w0", "deploy", ["unlock"])
    fake.expect_job("w1", "deploy", ["begin"], answer=begins([]))
    fake.expect_job("w1", "deploy", ["install"], answer={"ok": True, "elapsed": 1.0})
    fake.expect_job("w1", "deploy", ["unlock"])  # built, never switched

    report = deploy.execute(plan, fake)

    assert (report.outcomes["w0"].status, report.outcomes["w0"].reason) == ("failed", "uv: no solution for jax==9")
    assert report.outcomes["w1"].status == "failed"
    assert report.outcomes["w1"].reason.startswith("not switched: w0 failed (uv: no solution for jax==9)")
    assert "activate" not in [c.argv[-1] for c in fake.calls_to("w1")]
    # the unlock carries this deploy's own token (the one begin sent)
    begin, *_, unlock = fake.calls_to("w0")
    assert unlock.request["holder"]["token"] == begin.request["holder"]["token"]


def test_a_worker_that_fails_to_switch_switches_the_others_back(tmp_path, scripted_transport):
    plan = make_plan(tmp_path, 2, ["jax"])
    fake = scripted_transport(plan.workers)
    fake.expect_job("w0", "deploy", ["begin"], answer=begins([]))
    fake.expect_job("w0", "deploy", ["install"], answer={"ok": True, "elapsed": 1.0})
    fake.expect_job("w0", "deploy", ["activate"], answer={"ok": True, "previous": "old"})
    fake.expect_job("w0", "deploy", ["rollback"], answer={"ok": True, "active": "old"})
    fake.expect_job("w1", "deploy", ["begin"], answer=begins([]))
    fake.expect_job("w1", "deploy", ["install"], answer={"ok": True, "elapsed": 1.0})
    fake.expect_job("w1", "deploy", ["activate"], answer={"ok": False, "error": "No space left on device"})
    fake.expect_job("w1", "deploy", ["unlock"])

    report = deploy.execute(plan, fake)

    assert not report.ok
    assert report.outcomes["w1"].reason == "No space left on device"
    assert report.outcomes["w0"].reason == "switched back to old: w1 failed to switch"
    [activate] = [c for c in fake.calls_to("w0") if c.argv[-1] == "activate"]
    assert activate.request["keep_lock"] is True


def test_an_unchanged_worker_is_left_alone_and_its_lock_released(tmp_path, scripted_transport):
    plan = make_plan(tmp_path, 1, ["jax"])
    fake = scripted_transport(plan.workers)
    fake.expect_job("w0", "deploy", ["begin"], answer={"ok": True, "state": "unchanged", "active": "new"})
    fake.expect_job("w0", "deploy", ["unlock"])  # begin locked it even so: the lane is locked on all or none

    report = deploy.execute(plan, fake)

    assert report.ok and report.outcomes["w0"].status == "unchanged"


def test_with_relay_the_seed_gets_every_missing_wheel_and_its_peers_fetch_from_it(tmp_path, scripted_transport):
    plan = make_plan(tmp_path, 2, ["jax", "numpy"], relay=True)
    jax, numpy = plan.wheels
    incoming = "/var/lib/orch/store/sha256/.incoming/"
    fake = scripted_transport(plan.workers)
    fake.expect_job("w0", "deploy", ["begin"], answer=begins([jax]))
    fake.expect_job("w1", "deploy", ["begin"], answer=begins([jax, numpy]))
    # w1 lacks more: it is the seed, straight from the controller
    fake.expect_run("w1", ["mkdir", "-p"])
    fake.expect_put("w1", incoming)
    fake.expect_put("w1", incoming)
    fake.expect_job("w1", "deploy", ["receive"], answer={"ok": True, "bad": []})
    fake.expect_job("w1", "deploy", ["serve"], answer={"ok": True, "port": 8123})

    def only_jax(call: Call) -> None:
        assert [w["filename"] for w in call.request["wheels"]] == [jax.filename]
        assert call.request["url"].startswith("http://10.0.0.1:8123/")

    fake.expect_job(
        "w0",
        "deploy",
        ["fetch"],
        answer={"ok": True, "bytes": jax.size, "failed": [], "fetched": [jax.filename]},
        check=only_jax,
    )
    fake.expect_job("w1", "deploy", ["stop-serve"])
    installs_and_activates(fake, "w0")
    installs_and_activates(fake, "w1")

    report = deploy.execute(plan, fake)

    assert report.ok and report.seed == "w1" and report.relay_used
    assert report.controller_bytes == jax.size + numpy.size
    assert report.outcomes["w0"].bytes_from_peer == jax.size


def test_an_install_killed_on_the_worker_says_so_not_exit_minus_one(tmp_path, scripted_transport):
    plan = make_plan(tmp_path, 1, ["jax"])
    fake = scripted_transport(plan.workers)
    fake.expect_job("w0", "deploy", ["begin"], answer=begins([]))
    fake.expect_job("w0", "deploy", ["install"], reply=exits(-1))  # paramiko: no exit status came back
    fake.expect_run("w0", ["true"])  # the worker still answers: the process was killed, not the connection
    fake.expect_job("w0", "deploy", ["unlock"])

    report = deploy.execute(plan, fake)

    reason = report.outcomes["w0"].reason
    assert reason.startswith("install: the install process on w0 was killed before it finished"), reason
    assert "exit -1" not in reason


def test_a_connection_lost_during_install_is_named_as_such(tmp_path, scripted_transport):
    plan = make_plan(tmp_path, 1, ["jax"])
    fake = scripted_transport(plan.workers)
    fake.expect_job("w0", "deploy", ["begin"], answer=begins([]))
    fake.expect_job("w0", "deploy", ["install"], reply=unreachable("cannot reach 10.0.0.0:22: EOFError: "))
    fake.expect_run("w0", ["true"], reply=unreachable("connection to 10.0.0.0:22 refused (sshd not running?)"))
    fake.expect_job("w0", "deploy", ["unlock"], reply=unreachable())

    report = deploy.execute(plan, fake)

    reason = report.outcomes["w0"].reason
    assert reason.startswith("install: the connection to w0 was lost during install (cannot reach"), reason
    assert reason.endswith("it does not answer now: connection to 10.0.0.0:22 refused (sshd not running?)")
