"""`orch deploy`, `rollback` and `bundle status` on real sshd workers with real wheels.

The shared slice gets the real jax bundle (the `jax_cpu_lane` fixture). Fault
tests run on a private 3-worker slice with small real bundles, and a private
controller wheel cache so corrupting a cached wheel never touches anyone
else's.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import start_sandbox

from orchestrator import deploy as core
from orchestrator import sandbox
from orchestrator.bundle import read_lock
from orchestrator.deploy import job as deploy_job
from orchestrator.fleet import load_fleet
from orchestrator.transport import for_fleet

pytestmark = pytest.mark.ssh

SMALL_BUNDLES = {
    "small-a": {"python": "3.11", "pins": ["opt_einsum==3.4.0"]},
    "small-b": {"python": "3.11", "pins": ["ml_dtypes==0.5.4"]},  # + numpy
    "small-c": {"python": "3.11", "pins": ["ml_dtypes==0.5.4", "six==1.17.0"]},  # shares numpy with small-b
    "small-six": {"python": "3.11", "pins": ["six==1.17.0"]},  # one wheel
}


# -- the shared slice: the real jax bundle -----------------------------------


def test_a_real_jax_bundle_is_deployed_to_four_workers_and_imports_there(slice4, jax_cpu_lane):
    out = slice4.orch(
        "exec",
        "--",
        "/var/lib/orch/lanes/cpu/active/bin/python",
        "-c",
        "import jax, jaxlib; print(jax.__version__, jaxlib.__version__, jax.devices()[0].platform)",
    )
    for w in slice4.workers:
        assert f"{w} | 0.10.2 0.10.2 cpu" in out.stdout.splitlines()
    manifest = slice4.ssh(0, "cat", f"/var/lib/orch/envs/{jax_cpu_lane.bundle_id}/orch-bundle.json").stdout
    assert json.loads(manifest)["distributions"]["jaxlib"] == "0.10.2"


def test_deploy_twice_changes_nothing_the_second_time(slice4, jax_cpu_lane):
    doc = json.loads(slice4.orch("deploy", "--lane", "cpu", "--json").stdout)
    assert doc["ok"] and doc["controller_bytes"] == 0
    assert {n: o["status"] for n, o in doc["workers"].items()} == {w: "unchanged" for w in slice4.workers}
    assert all(o["bytes_from_peer"] == 0 for o in doc["workers"].values())


def test_bundle_status_shows_one_bundle_on_the_lane(slice4, jax_cpu_lane):
    doc = json.loads(slice4.orch("bundle", "status", "--json").stdout)
    assert doc["mixed"] == {}
    assert {d["lanes"]["cpu"]["active"] for d in doc["workers"].values()} == {jax_cpu_lane.bundle_id}


# -- a private slice for faults -----------------------------------------------


class Small:
    """A 3-worker slice whose lane `cpu` can be pointed at small real bundles."""

    def __init__(self, handle, cache: Path):
        self.h = handle
        self.cache = cache
        self.env = {"ORCH_WHEEL_CACHE": str(cache)}
        base = yaml.safe_load(handle.fleet_path.read_text())
        base["bundles"].update(SMALL_BUNDLES)
        for name in SMALL_BUNDLES:
            doc = dict(base, lanes={"cpu": dict(base["lanes"]["cpu"], bundle=name)})
            (handle.dir / f"fleet-{name}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))

    def fleet_path(self, bundle: str) -> Path:
        return self.h.dir / f"fleet-{bundle}.yaml"

    def orch(self, bundle: str, *args, **kw):
        return self.h.orch("--fleet", self.fleet_path(bundle), *args, env=self.env, **kw)

    def lock(self, bundle: str) -> str:
        self.orch(bundle, "bundle", "lock", bundle, timeout=300)
        return read_lock(self.h.dir / "locks" / f"{bundle}.lock.json").bundle_id

    def deploy(self, bundle: str, check: bool = True) -> dict:
        proc = self.orch(bundle, "deploy", "--lane", "cpu", "--json", check=False, timeout=600)
        doc = json.loads(proc.stdout)
        assert (proc.returncode == 0) == doc["ok"]
        if check:
            assert doc["ok"], doc
        return doc

    def active(self) -> dict[str, str]:
        out = self.h.orch("exec", "--", "readlink", "/var/lib/orch/lanes/cpu/active").stdout
        return {line.split(" | ")[0].strip(): os.path.basename(line.split(" | ")[1]) for line in out.splitlines()}


def small_slice():
    """A fresh 3-worker `Small` slice with its own wheel cache, taken down afterwards."""
    handle = start_sandbox(3)
    cache = Path(handle.dir) / "wheel-cache"
    saved = os.environ.get("ORCH_WHEEL_CACHE")
    os.environ["ORCH_WHEEL_CACHE"] = str(cache)  # for the in-process deploys below
    try:
        yield Small(handle, cache)
    finally:
        if saved is None:
            os.environ.pop("ORCH_WHEEL_CACHE", None)
        else:
            os.environ["ORCH_WHEEL_CACHE"] = saved
        handle.down()


@pytest.fixture(scope="module")
def small():
    yield from small_slice()


def test_the_controller_sends_each_wheel_once_and_peers_fetch_from_the_seed(small):
    small.lock("small-a")
    doc = small.deploy("small-a")
    assert {o["status"] for o in doc["workers"].values()} == {"installed"}
    assert doc["relay_used"] and doc["controller_bytes"] == doc["bundle_bytes"]
    seed = doc["seed"]
    for name, o in doc["workers"].items():
        if name == seed:
            assert o["bytes_from_controller"] == doc["bundle_bytes"]
        else:
            assert o["bytes_from_controller"] == 0 and o["bytes_from_peer"] == doc["bundle_bytes"]
    # the seed's short-lived wheel server is gone (pids are machine-wide here: match the worker's namespace)
    script = (
        'me=$(readlink /proc/self/ns/mnt); for p in $(pgrep -f "[h]ostside.deploy serve"); do '
        '[ "$(readlink /proc/$p/ns/mnt)" = "$me" ] && echo $p; done; true'
    )
    assert small.h.ssh(seed, "sh", "-c", script).stdout == ""


def test_dry_run_prints_the_plan_and_touches_no_worker(small):
    small.lock("small-b")
    before = small.active()
    plan = json.loads(small.orch("small-b", "deploy", "--lane", "cpu", "--dry-run").stdout)
    assert plan["bundle"] == "small-b" and [w["name"] for w in plan["workers"]] == small.h.workers
    assert {w["name"] for w in plan["wheels"]} == {"ml-dtypes", "numpy"}
    assert small.active() == before


def test_a_worker_killed_mid_deploy_keeps_the_whole_lane_on_its_old_bundle_and_a_rerun_completes_it(small):
    a = small.lock("small-a")
    small.deploy("small-a")
    b = small.lock("small-b")
    fleet = load_fleet(small.fleet_path("small-b"))
    plan = core.plan_deploy(fleet, "cpu")

    def on_progress(worker: str, phase: str) -> None:
        if worker == "slice-w1" and phase == "installing":
            threading.Timer(0.3, sandbox.kill, (small.h.dir, 1)).start()

    with for_fleet(fleet, plan.workers, connect_timeout=3) as t:
        report = core.execute(plan, t, progress=on_progress)
    assert {o.status for o in report.outcomes.values()} == {"failed"}
    for name in ("slice-w0", "slice-w2"):  # built, never switched: the lane switches everywhere or nowhere
        assert report.outcomes[name].reason.startswith("not switched: slice-w1 failed"), report.outcomes[name]
    sandbox.up(small.h.dir, 3, base_address=small.h.state.base_address)  # the host comes back
    assert small.active() == {w: a for w in small.h.workers}
    doc = small.deploy("small-b")
    assert {o["status"] for o in doc["workers"].values()} == {"installed"}
    assert doc["workers"]["slice-w1"]["recovered_lock"]["pid"] == os.getpid()  # our deploy above, now over
    assert small.active() == {w: b for w in small.h.workers}


def test_rollback_reactivates_the_previous_bundle_everywhere(small):
    a, b = small.lock("small-a"), small.lock("small-b")
    small.deploy("small-a")
    small.deploy("small-b")
    small.orch("small-b", "rollback", "--lane", "cpu")
    assert small.active() == {w: a for w in small.h.workers}
    small.deploy("small-b")
    assert small.active() == {w: b for w in small.h.workers}


def test_a_wheel_corrupted_in_transit_is_refused_and_not_kept(small):
    b = small.lock("small-b")
    small.deploy("small-b")
    small.lock("small-c")
    fleet = load_fleet(small.fleet_path("small-c"))
    plan = core.plan_deploy(fleet, "cpu")  # verifies the controller's cached copies
    six = next(w for w in plan.wheels if w.name == "six")
    good = six.path.read_bytes()
    data = bytearray(good)
    data[len(data) // 2] ^= 0xFF  # the bytes change after that check: in transit
    six.path.write_bytes(bytes(data))
    try:
        with for_fleet(fleet, plan.workers) as t:
            report = core.execute(plan, t)
    finally:
        six.path.write_bytes(good)
    assert not report.ok
    for o in report.outcomes.values():
        assert o.status == "failed"
        assert f"{six.filename}: sha256 mismatch" in o.reason and "file discarded" in o.reason
    assert small.active() == {w: b for w in small.h.workers}
    stored = small.h.orch(
        "exec", "--", "sh", "-c", 'ls /var/lib/orch/store/sha256/"$1" 2>/dev/null | wc -l', "sh", six.sha256
    ).stdout
    assert all(line.endswith("| 0") for line in stored.splitlines())
    assert small.h.orch("exec", "--", "ls", "/var/lib/orch/lanes/cpu").stdout.count("deploy.lock") == 0
    doc = small.deploy("small-c")
    assert {o["status"] for o in doc["workers"].values()} == {"installed"}


def test_a_wheel_corrupted_in_the_store_is_detected_removed_and_repaired_by_a_rerun(small):
    b = small.lock("small-b")
    small.deploy("small-b")
    c = small.lock("small-c")  # shares numpy with small-b
    small.h.orch("exec", "--", "rm", "-rf", f"/var/lib/orch/envs/{c}")  # so small-c is built anew
    numpy = read_lock(small.h.dir / "locks" / "small-b.lock.json").wheel("numpy")
    path = f"/var/lib/orch/store/sha256/{numpy.sha256}/{numpy.filename}"
    small.h.ssh(
        2,
        "python3",
        "-c",
        "import sys; p=sys.argv[1]; d=bytearray(open(p,'rb').read()); d[1000]^=255; open(p,'wb').write(d)",
        path,
        check=True,
    )
    doc = small.deploy("small-c", check=False)
    w2 = doc["workers"]["slice-w2"]
    assert w2["status"] == "failed"
    assert w2["reason"] == (
        f"corrupt wheel(s) in the store: {numpy.filename} (sha256 mismatch; removed, a re-run pushes them again)"
    )
    for name in ("slice-w0", "slice-w1"):
        assert doc["workers"][name]["reason"].startswith("not switched: slice-w2 failed"), doc["workers"][name]
    assert small.active() == {w: b for w in small.h.workers}  # switched nowhere
    doc = small.deploy("small-c")
    assert {o["status"] for o in doc["workers"].values()} == {"installed"}
    assert doc["controller_bytes"] == numpy.size
    assert small.active() == {w: c for w in small.h.workers}


def test_a_full_disk_fails_clearly_and_the_old_bundle_stays_active(small):
    pid = small.h.state.worker(2).pid
    # a small filesystem as worker 2's root, inside its own mount namespace
    subprocess.run(
        ["nsenter", "-t", str(pid), "-m", "mount", "-t", "tmpfs", "-o", "size=120m", "tmpfs", "/var/lib/orch"],
        check=True,
    )

    def leave_free(nbytes: int) -> None:
        """Fill worker 2's root so that `nbytes` stay free."""
        free = int(
            small.h.ssh(
                2,
                "python3",
                "-c",
                "import os, shutil; os.path.exists('/var/lib/orch/filler') and "
                "os.unlink('/var/lib/orch/filler'); print(shutil.disk_usage('/var/lib/orch').free)",
                check=True,
            ).stdout
        )
        small.h.ssh(2, "fallocate", "-l", str(free - nbytes), "/var/lib/orch/filler", check=True)

    def failure_on_w2(at_begin: bool = False) -> dict:
        doc = small.deploy("small-b", check=False)
        w2 = doc["workers"]["slice-w2"]
        assert w2["status"] == "failed", w2
        w0 = doc["workers"]["slice-w0"]
        if at_begin:  # the lane is locked on all workers or none: nothing deploys anywhere
            assert w0["status"] == "failed" and w0["reason"].startswith(
                "not deployed: lane cpu could not be locked on every worker (slice-w2: not enough disk space"
            ), w0
            assert small.active()["slice-w0"] == a
        else:  # built there, but a lane switches on every worker or on none
            assert w0["status"] == "failed" and w0["reason"].startswith("not switched: slice-w2 failed"), w0
        assert small.active() == {w: a for w in small.h.workers}
        out = small.h.ssh(2, "/var/lib/orch/lanes/cpu/active/bin/python", "-c", "import opt_einsum; print('ok')")
        assert out.stdout.strip() == "ok"
        left = small.h.ssh(2, "sh", "-c", "ls /var/lib/orch/envs; ls /var/lib/orch/lanes/cpu").stdout
        assert "deploy.lock" not in left
        return w2

    try:
        a = small.lock("small-a")
        small.deploy("small-a")
        small.lock("small-b")
        wheels = read_lock(small.h.dir / "locks" / "small-b.lock.json").wheels
        nbytes = sum(w.size for w in wheels)  # none of them is on worker 2 yet
        need, mib = nbytes + core.disk_headroom(nbytes), 2**20
        # no room for the wheels: refused before anything is sent
        leave_free(need - 2 * mib)
        w2 = failure_on_w2(at_begin=True)
        assert w2["bytes_from_controller"] == 0
        assert w2["reason"].startswith(f"not enough disk space: needs {-(-need // mib)} MiB ("), w2
        free = int(re.search(r"headroom\), (\d+) MiB free under /var/lib/orch$", w2["reason"]).group(1))
        assert abs(free - (need - 2 * mib) // mib) <= 1, w2
        # room for the wheels but not for the environment: the install runs out
        leave_free(need + 2 * mib)
        reason = failure_on_w2()["reason"]
        assert "no space left on device" in reason, reason
    finally:
        subprocess.run(["nsenter", "-t", str(pid), "-m", "umount", "-l", "/var/lib/orch"], check=False)


def test_a_live_lock_refuses_the_deploy_naming_the_holder_and_a_stale_one_is_recovered(small):
    small.lock("small-a")
    small.deploy("small-a")
    b = small.lock("small-b")

    def hold(heartbeat: float) -> None:
        lock = {
            "token": "t0",
            "controller": "ops-laptop",
            "pid": 4242,
            "user": "alice",
            "bundle_id": "feedface",
            "heartbeat": heartbeat,
        }
        small.h.ssh(
            0,
            "sh",
            "-c",
            'mkdir -p /var/lib/orch/lanes/cpu && printf %s "$1" > /var/lib/orch/lanes/cpu/deploy.lock',
            "sh",
            json.dumps(lock),
        )

    hold(time.time())
    doc = small.deploy("small-b", check=False)
    w0 = doc["workers"]["slice-w0"]
    assert w0["status"] == "failed"
    assert w0["reason"].startswith("another deploy holds lane cpu: alice@ops-laptop pid 4242 (bundle feedface")
    assert small.h.ssh(0, "cat", "/var/lib/orch/lanes/cpu/deploy.lock").stdout  # the holder's lock is untouched
    hold(time.time() - 3600)
    doc = small.deploy("small-b")
    assert doc["workers"]["slice-w0"]["status"] == "installed"
    assert doc["workers"]["slice-w0"]["recovered_lock"]["user"] == "alice"
    assert small.active() == {w: b for w in small.h.workers}


def test_bundle_status_flags_a_lane_whose_workers_disagree(small):
    a, b = small.lock("small-a"), small.lock("small-b")
    small.deploy("small-a")
    small.deploy("small-b")
    small.h.ssh(1, "ln", "-sfn", f"../../envs/{a}", "/var/lib/orch/lanes/cpu/active")
    proc = small.orch("small-b", "bundle", "status", check=False)
    assert proc.returncode == 1
    assert f"lane cpu is mixed: {b}: slice-w0, slice-w2; {a}: slice-w1" in proc.stderr
    small.deploy("small-b")


def test_a_second_deploy_while_one_runs_is_refused_naming_the_holder_whose_heartbeat_stays_fresh(small, monkeypatch):
    small.lock("small-a")
    small.deploy("small-a")
    b = small.lock("small-b")
    monkeypatch.setattr(deploy_job, "HEARTBEAT_EVERY", 0.5)
    monkeypatch.setattr(deploy_job, "LOCK_REFRESH_EVERY", 1)  # every beat refreshes the lock itself here
    fleet = load_fleet(small.fleet_path("small-b"))
    plan = core.plan_deploy(fleet, "cpu")
    first, gate, seen = threading.Lock(), threading.Event(), {}

    def lock_on_w0() -> dict:
        return json.loads(small.h.ssh(0, "cat", "/var/lib/orch/lanes/cpu/deploy.lock", check=True).stdout)

    def on_progress(worker: str, phase: str) -> None:
        if phase != "installing":
            return
        if first.acquire(blocking=False):  # every worker holds its lock now; none installs until this is done
            try:
                before = lock_on_w0()["heartbeat"]
                seen["second"] = small.deploy("small-b", check=False)
                seen["heartbeats"] = (before, lock_on_w0()["heartbeat"])
            finally:
                gate.set()
        gate.wait(600)

    with for_fleet(fleet, plan.workers) as t:
        report = core.execute(plan, t, progress=on_progress)
    assert report.ok, {n: o.reason for n, o in report.outcomes.items()}
    me = f"another deploy holds lane cpu: {getpass.getuser()}@{socket.gethostname()} pid {os.getpid()} (bundle {b}"
    second = seen["second"]["workers"]
    assert second["slice-w0"]["status"] == "failed" and second["slice-w0"]["reason"].startswith(me), second
    for name in ("slice-w1", "slice-w2"):  # refused at the lane's first worker, before touching these
        o = second[name]
        assert o["status"] == "failed" and o["reason"].startswith(
            "not deployed: lane cpu could not be locked on every worker (slice-w0: " + me
        ), o
    before, after = seen["heartbeats"]
    assert after > before  # refreshed by the first deploy's heartbeat thread while it waited
    assert small.active() == {w: b for w in small.h.workers}


def test_a_deploy_whose_lock_was_taken_over_does_not_activate_there(small):
    a = small.lock("small-a")
    small.deploy("small-a")
    b = small.lock("small-b")
    fleet = load_fleet(small.fleet_path("small-b"))
    plan = core.plan_deploy(fleet, "cpu")
    lock = {"token": "t1", "controller": "ops-laptop", "pid": 4242, "user": "alice", "bundle_id": "feedface"}

    def on_progress(worker: str, phase: str) -> None:
        if worker == "slice-w1" and phase == "activating":  # as a deploy that took ours for dead would
            small.h.ssh(
                1,
                "sh",
                "-c",
                'printf %s "$1" > /var/lib/orch/lanes/cpu/deploy.lock',
                "sh",
                json.dumps(dict(lock, heartbeat=time.time())),
                check=True,
            )

    with for_fleet(fleet, plan.workers) as t:
        report = core.execute(plan, t, progress=on_progress)
    assert report.outcomes["slice-w1"].status == "failed"
    assert report.outcomes["slice-w1"].reason == (
        "this deploy no longer holds lane cpu's deploy lock (held by alice@ops-laptop pid 4242 (bundle feedface)); "
        "not activating, the previous bundle stays active"
    )
    for name in ("slice-w0", "slice-w2"):  # they had switched: switched back, the lane stays whole
        o = report.outcomes[name]
        assert (o.status, o.reason) == ("failed", f"switched back to {a}: slice-w1 failed to switch"), o
    assert small.active() == {w: a for w in small.h.workers}
    held = small.h.ssh(1, "cat", "/var/lib/orch/lanes/cpu/deploy.lock", check=True).stdout
    assert json.loads(held)["token"] == "t1"  # the other deploy's lock is left alone
    small.h.ssh(1, "rm", "/var/lib/orch/lanes/cpu/deploy.lock", check=True)
    doc = small.deploy("small-b")
    assert doc["workers"]["slice-w1"]["status"] == "installed"
    assert small.active() == {w: b for w in small.h.workers}
