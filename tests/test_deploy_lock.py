"""The lane deploy lock: taking it, keeping it fresh, losing it, and telling a
dead holder from a live one. Hostside actions run in-process on a temp root;
controller logic runs against a fake transport."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_env import complete_env
from fakes import worker
from waiting import wait_for

from hostside import deploy as hd
from hostside import deploy_lock as dl
from hostside import lease
from hostside.layout import Layout
from hostside.procfs import host_identity
from orchestrator import deploy as core
from orchestrator.bundle import CachedWheel
from orchestrator.deploy import lane_lock

OURS = {"token": "0a0a", "user": "me", "controller": "here", "pid": 1, "bundle_id": "new"}
THEIRS = {"token": "beef", "user": "alice", "controller": "ops-laptop", "pid": 4242, "bundle_id": "feedface"}


def request(root: Path, **extra) -> dict:
    return {
        "root": str(root),
        "lane": "cpu",
        "bundle_id": "new",
        "bundle": "b",
        "holder": OURS,
        "wheels": [],
        "stale_after": 300,
        **extra,
    }


def lock_path(root: Path) -> Path:
    return Path(Layout(str(root)).deploy_lock("cpu"))


def hold(root: Path, holder: dict, heartbeat: float) -> None:
    path = lock_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(".hold")
    tmp.write_text(json.dumps(dict(holder, heartbeat=heartbeat)))
    tmp.replace(path)  # whole, as the worker writes it


def read(root: Path) -> dict:
    return json.loads(lock_path(root).read_text())


def make_env(root: Path, bundle_id: str) -> None:
    complete_env(root, bundle_id)


def active(root: Path) -> str:
    return os.path.basename(os.readlink(root / "lanes" / "cpu" / "active"))


# -- taking the lock ----------------------------------------------------------


def test_begin_takes_a_free_lane_with_the_whole_lock_written_at_once(tmp_path):
    doc = hd.begin(request(tmp_path))
    assert doc["state"] == "locked-by-us"
    assert read(tmp_path)["token"] == OURS["token"]
    assert oct(lock_path(tmp_path).stat().st_mode & 0o777) == "0o644"
    assert sorted(p.name for p in lock_path(tmp_path).parent.iterdir()) == [".deploy-mutex", "deploy.lock"]


def test_begin_refuses_a_fresh_lock_and_names_its_holder(tmp_path):
    hold(tmp_path, THEIRS, time.time() - 10)
    doc = hd.begin(request(tmp_path))
    assert doc["state"] == "locked" and doc["holder"]["user"] == "alice" and 9 < doc["heartbeat_age"] < 60
    assert read(tmp_path)["token"] == THEIRS["token"]


def test_begin_recovers_a_lock_whose_heartbeat_is_older_than_stale_after(tmp_path):
    hold(tmp_path, THEIRS, time.time() - 301)
    doc = hd.begin(request(tmp_path))
    assert doc["state"] == "locked-by-us" and doc["recovered_lock"]["user"] == "alice"
    assert read(tmp_path)["token"] == OURS["token"]


def test_an_empty_lock_file_with_a_fresh_mtime_is_not_taken(tmp_path):
    lock_path(tmp_path).parent.mkdir(parents=True)
    lock_path(tmp_path).write_text("")  # what a concurrent begin used to see between create and write
    doc = hd.begin(request(tmp_path))
    assert doc["state"] == "locked" and doc["heartbeat_age"] < 60
    assert lock_path(tmp_path).read_text() == ""


def test_an_unreadable_lock_file_older_than_stale_after_is_recovered(tmp_path):
    lock_path(tmp_path).parent.mkdir(parents=True)
    lock_path(tmp_path).write_text("{torn")
    old = time.time() - 400
    os.utime(lock_path(tmp_path), (old, old))
    doc = hd.begin(request(tmp_path))
    assert doc["state"] == "locked-by-us" and doc["recovered_lock"]["holder"] == "unreadable lock file"


@pytest.mark.parametrize(
    "content", ["null", "[]", '{"token": "t", "heartbeat": "soon"}', '{"token": 7, "heartbeat": 1}']
)
def test_a_damaged_lock_file_is_never_locked_forever_nor_a_crash(tmp_path, content):
    lock_path(tmp_path).parent.mkdir(parents=True)
    lock_path(tmp_path).write_text(content)
    fresh = hd.begin(request(tmp_path))
    assert fresh["state"] == "locked" and fresh["holder"]["holder"] == "unreadable lock file"
    assert fresh["holder"]["reason"]  # says what is wrong with it
    old = time.time() - 400
    os.utime(lock_path(tmp_path), (old, old))
    doc = hd.begin(request(tmp_path))
    assert doc["state"] == "locked-by-us" and doc["recovered_lock"]["holder"] == "unreadable lock file"


def test_the_controller_names_a_damaged_lock_file_and_when_it_counts_as_stale(tmp_path, scripted_transport):
    plan = plan_with(1, [])
    plan = dataclasses.replace(plan, uv=on_disk(tmp_path, wheel("uv", 1)))
    fake = scripted_transport(plan.workers)
    damaged = {"holder": "unreadable lock file", "reason": "a JSON NoneType, not an object", "heartbeat": 1.0}
    fake.expect_job(
        "w0", "deploy", ["begin"], answer={"ok": True, "state": "locked", "holder": damaged, "heartbeat_age": 100.0}
    )
    report = core.execute(plan, fake)
    assert report.outcomes["w0"].reason == (
        "lane cpu's deploy lock file is damaged (a JSON NoneType, not an object); it counts as stale 200s from now, "
        "or remove /var/lib/orch/lanes/cpu/deploy.lock if no deploy runs"
    )


def test_begin_takes_the_lock_even_where_the_bundle_is_already_active(tmp_path):
    make_env(tmp_path, "new")
    (tmp_path / "lanes" / "cpu").mkdir(parents=True, exist_ok=True)
    os.symlink("../../envs/new", tmp_path / "lanes" / "cpu" / "active")
    assert hd.begin(request(tmp_path))["state"] == "unchanged"
    assert read(tmp_path)["token"] == OURS["token"]  # all or nothing: a racing deploy is refused here too
    assert hd.begin(request(tmp_path, holder=THEIRS))["state"] == "locked"


def test_rollback_waits_for_no_deploy_and_releases_the_lock_it_was_given(tmp_path):
    for bid in ("old", "new"):
        make_env(tmp_path, bid)
    lane = tmp_path / "lanes" / "cpu"
    lane.mkdir(parents=True)
    os.symlink("../../envs/new", lane / "active")
    os.symlink("../../envs/old", lane / "previous")
    hold(tmp_path, THEIRS, time.time())
    with pytest.raises(hd.DeployFailure, match="this deploy no longer holds lane cpu's deploy lock"):
        hd.rollback(request(tmp_path))
    with pytest.raises(hd.DeployFailure, match="a deploy holds lane cpu .held by alice@ops-laptop pid 4242"):
        hd.rollback({"root": str(tmp_path), "lane": "cpu"})
    assert active(tmp_path) == "new"
    hold(tmp_path, OURS, time.time())
    assert hd.rollback(request(tmp_path)) == {"active": "old", "previous": "new"}
    assert active(tmp_path) == "old" and not lock_path(tmp_path).exists()


def test_status_says_whether_a_lock_is_stale_and_bundle_status_calls_it_holder_gone(tmp_path):
    from orchestrator.cli.bundle_cmd import lock_note

    hold(tmp_path, THEIRS, time.time() - 1000)
    info = hd.status({"root": str(tmp_path), "lanes": ["cpu"]})["lanes"]["cpu"]
    assert info["lock_state"] == "stale"
    assert lock_note(info) == (
        "stale deploy lock (holder gone): alice@ops-laptop pid 4242 (bundle feedface); the next deploy takes it over"
    )
    hold(tmp_path, THEIRS, time.time())
    info = hd.status({"root": str(tmp_path), "lanes": ["cpu"]})["lanes"]["cpu"]
    assert lock_note(info) == "deploy in progress by alice@ops-laptop pid 4242 (bundle feedface)"


def test_begin_sweeps_partial_uploads_left_by_a_dead_deploy_and_keeps_live_ones(tmp_path):
    incoming = tmp_path / "store" / "sha256" / ".incoming"
    incoming.mkdir(parents=True)
    (incoming / "dead.0a0b.part").write_text("x")
    old = time.time() - 3600
    os.utime(incoming / "dead.0a0b.part", (old, old))
    (incoming / "live.0c0d.part").write_text("x")
    assert hd.begin(request(tmp_path))["swept"] == ["dead.0a0b.part"]
    assert [p.name for p in incoming.iterdir()] == ["live.0c0d.part"]


def test_concurrent_begins_let_exactly_one_deploy_take_the_lane(tmp_path):
    script = "import json, sys; from hostside import deploy as hd; print(hd.begin(json.loads(sys.argv[1]))['state'])"
    reqs = [request(tmp_path, holder=dict(OURS, token=f"{i:04x}")) for i in range(6)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, json.dumps(r)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(hd.__file__).parent.parent,
        )
        for r in reqs
    ]
    states = sorted(p.communicate()[0].strip() for p in procs)
    assert states == ["locked"] * 5 + ["locked-by-us"]


# -- losing it ----------------------------------------------------------------


def test_activate_refuses_when_the_lock_is_not_ours_and_the_old_bundle_stays_active(tmp_path):
    make_env(tmp_path, "old")
    make_env(tmp_path, "new")
    (tmp_path / "lanes" / "cpu").mkdir(parents=True)
    os.symlink("../../envs/old", tmp_path / "lanes" / "cpu" / "active")
    hold(tmp_path, THEIRS, time.time())
    with pytest.raises(hd.DeployFailure) as exc:
        hd.activate(request(tmp_path))
    assert str(exc.value) == (
        "this deploy no longer holds lane cpu's deploy lock (held by alice@ops-laptop pid 4242 "
        "(bundle feedface)); not activating, the previous bundle stays active"
    )
    assert active(tmp_path) == "old" and read(tmp_path)["token"] == THEIRS["token"]


def test_activate_with_our_lock_switches_the_lane_and_releases_the_lock(tmp_path):
    make_env(tmp_path, "new")
    hold(tmp_path, OURS, time.time())
    assert hd.activate(request(tmp_path))["active"] == "new"
    assert active(tmp_path) == "new" and not lock_path(tmp_path).exists()


def test_install_refuses_without_our_lock_and_leaves_a_half_built_env_alone(tmp_path):
    half = tmp_path / "envs" / "new" / "bin"
    half.mkdir(parents=True)  # perhaps the deploy that took the lock is building it
    hold(tmp_path, THEIRS, time.time())
    with pytest.raises(hd.DeployFailure, match=r"no longer holds lane cpu's deploy lock \(held by alice@ops-laptop"):
        hd.install(request(tmp_path, uv={}, python="3.11"))
    assert half.is_dir()


def test_install_refuses_when_the_lock_was_released(tmp_path):
    with pytest.raises(hd.DeployFailure, match=r"\(no deploy holds it now\); not installing"):
        hd.install(request(tmp_path, uv={}, python="3.11"))


def test_unlock_and_heartbeat_leave_another_deploys_lock_alone(tmp_path):
    hold(tmp_path, THEIRS, 1000.0)
    assert hd.unlock(request(tmp_path)) == {"released": False}
    assert hd.heartbeat(request(tmp_path))["holder"]["token"] == THEIRS["token"]
    assert read(tmp_path) == dict(THEIRS, heartbeat=1000.0)


def test_heartbeat_after_unlock_does_not_bring_the_lock_back(tmp_path):
    hd.begin(request(tmp_path))
    hd.unlock(request(tmp_path))
    assert hd.heartbeat(request(tmp_path)) == {"refreshed": False, "holder": None}
    assert not lock_path(tmp_path).exists()


# -- keeping it fresh ---------------------------------------------------------


def test_a_watcher_calls_lost_once_the_controller_stops_renewing_and_not_while_it_renews(tmp_path, monkeypatch):
    # While the controller renews, the watcher judges on a clock that moves only with the renewals:
    # two ttls of them pass on it however slowly this machine schedules the two threads (a real
    # clock made the test depend on each 0.1 s sleep ending within the 0.5 s ttl).
    clock = [0.0]
    monkeypatch.setattr(lease, "Observer", functools.partial(lease.Observer, clock=lambda: clock[0]))
    hold(tmp_path, OURS, 1000.0)
    lost: list[str] = []
    stop = lease.watch(
        str(lock_path(tmp_path)), hd.LOCK_FIELDS, OURS["token"], ttl=0.5, every=0.01, on_lost=lost.append
    )
    for beat in range(1001, 1011):  # the controller renews: never lost
        hold(tmp_path, OURS, float(beat))
        time.sleep(0.02)
        clock[0] += 0.1
    assert lost == []
    clock[0] += 0.6  # then a ttl without a renewal
    wait_for(lambda: lost, 10, "the watcher to give up on a silent controller")
    stop.set()
    assert "was not renewed" in lost[0] and len(lost) == 1


def renew(root: Path, token: str, count: int) -> subprocess.CompletedProcess[str]:
    """The controller's renewal command, run here as a worker's shell runs it."""
    argv = dl.renew_argv(str(root), "cpu", token, count)
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def test_the_renewal_command_writes_the_token_and_count_beside_the_lock_atomically(tmp_path):
    hold(tmp_path, OURS, 1000.0)
    assert renew(tmp_path, OURS["token"], 7).returncode == 0
    renewed = Path(Layout(str(tmp_path)).deploy_renewed("cpu"))
    assert json.loads(renewed.read_text()) == {"token": OURS["token"], "renewed": 7}
    assert lease.renewal(str(renewed), OURS["token"]) == 7 and lease.renewal(str(renewed), "beef") is None
    assert sorted(p.name for p in renewed.parent.iterdir()) == ["deploy.lock", "deploy.renewed"]  # no temp file left
    assert renew(tmp_path / "elsewhere", OURS["token"], 8).returncode != 0  # no lane directory: nothing made


@pytest.mark.parametrize("text", ["", "[]", '{"token": "0a0a"}', '{"token": "0a0a", "renewed": true}', "{" * 5000])
def test_a_renewal_file_of_another_shape_is_no_renewal(tmp_path, text):
    path = tmp_path / "deploy.renewed"
    path.write_text(text)
    assert lease.renewal(str(path), "0a0a") is None


def test_a_watcher_takes_the_cheap_renewals_for_the_controller_lease_and_only_its_own(tmp_path):
    hold(tmp_path, OURS, 1000.0)  # the lock's own heartbeat never changes here
    layout = Layout(str(tmp_path))
    lost: list[str] = []
    stop = dl.watch_lease(layout, request(tmp_path, holder=OURS), ttl=5.0, on_lost=lost.append)
    renewed_until = time.monotonic() + 7.0  # longer than the ttl
    count = 0
    while time.monotonic() < renewed_until:  # the controller renews with the shell command only: never lost
        count += 1
        assert renew(tmp_path, OURS["token"], count).returncode == 0
        time.sleep(0.1)
    assert lost == []
    deadline = time.monotonic() + 30.0
    while not lost and time.monotonic() < deadline:  # another deploy's renewals are none of ours
        count += 1
        renew(tmp_path, THEIRS["token"], count)
        time.sleep(0.1)
    wait_for(lambda: lost, 10, "the watcher to give up on a silent controller")
    stop.set()
    assert "was not renewed" in lost[0] and len(lost) == 1


def test_a_watcher_calls_lost_when_the_lock_is_released_or_taken(tmp_path):
    for after in (None, THEIRS):
        hold(tmp_path, OURS, 1000.0)
        lost: list[str] = []
        lease.watch(str(lock_path(tmp_path)), hd.LOCK_FIELDS, OURS["token"], ttl=60, every=0.02, on_lost=lost.append)
        if after is None:
            lock_path(tmp_path).unlink()
        else:
            hold(tmp_path, after, 1000.0)
        wait_for(lambda seen=lost: seen, 10, "the watcher to notice")
        assert ("released" if after is None else "taken by another holder") in lost[0]


def test_staleness_is_judged_from_observed_changes_on_the_readers_clock_never_the_writers():
    now = [0.0]
    obs = lease.Observer(ttl=20, clock=lambda: now[0])
    assert obs.see(1e12)  # a heartbeat from a clock far in the future is just a value
    now[0] = 15
    assert obs.see(1e12 + 5)  # it changed: renewed
    now[0] = 34
    assert obs.see(1e12 + 5)  # 19 s of silence
    now[0] = 36
    assert not obs.see(1e12 + 5)  # 21 s: stale, whatever the writer's clock says


@pytest.mark.parametrize("action", hd.LONG_ACTIONS)
def test_long_actions_run_watched_by_the_controller_lease(tmp_path, monkeypatch, capsys, action):
    hold(tmp_path, OURS, 1000.0)
    watched = []

    @contextlib.contextmanager
    def spy(req, name):
        watched.append(name)
        yield

    monkeypatch.setattr(hd, "_watched", spy)
    monkeypatch.setitem(hd.ACTIONS, action, lambda req: {})
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(request(tmp_path))))
    assert hd.main([action]) == 0
    assert watched == [action] and json.loads(capsys.readouterr().out)["ok"]


def test_an_install_abandoned_by_its_controller_kills_uv_removes_its_build_and_records_why(tmp_path):
    """In a child process (abandon exits): a never-renewed lock ends a running child within the ttl."""
    hold(tmp_path, OURS, 1000.0)
    code = f"""
import json, sys, time
from hostside import deploy_lock as dl
req = json.loads({json.dumps(json.dumps(request(tmp_path)))})
import os
build = os.path.join(req["root"], "envs", ".new.build-0a0a")
os.makedirs(build)
dl._cleanups.append(lambda: __import__("shutil").rmtree(build))
with dl._watched(req, "install", ttl=0.5):
    dl.run_child(["sleep", "60"], dict(os.environ))
print("not abandoned")
"""
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert time.monotonic() - t0 < 30
    assert "install: abandoned, the lease at" in proc.stderr and "not renewed" in proc.stderr
    assert not (tmp_path / "envs" / ".new.build-0a0a").exists()
    record = json.loads((tmp_path / "receipts" / "deploy" / "cpu.jsonl").read_text().splitlines()[-1])
    assert record["event"] == "abandoned" and record["action"] == "install" and record["token"] == "0a0a"


def test_the_controller_heartbeat_beats_until_the_block_ends_even_on_failure():
    beats = []
    with pytest.raises(KeyboardInterrupt):
        with core._Heartbeat(lambda: beats.append(time.monotonic()), every=0.02) as hb:
            while len(beats) < 3:
                time.sleep(0.01)
            raise KeyboardInterrupt
    assert not hb._thread.is_alive()
    n = len(beats)
    time.sleep(0.1)
    assert len(beats) == n


# -- is the holder dead? --------------------------------------------------------


@pytest.fixture
def state_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


def holder_here(token: str, **extra) -> dict:
    return {"token": token, "controller": "vm", **host_identity(), "pid": os.getpid(), **extra}


def test_a_running_deploy_on_this_host_is_alive_and_is_dead_once_it_ends(state_home):
    h = holder_here("ab12", liveness=str(core._liveness_path("ab12")))
    with core._liveness("ab12"):
        assert core._holder_is_dead(h) is False
    assert core._holder_is_dead(h) is True  # our own pid lives on, but that deploy is over


def test_a_deploy_under_another_state_dir_is_found_through_the_path_its_lock_names(state_home, monkeypatch):
    h = holder_here("cd34", liveness=str(core._liveness_path("cd34")))
    with core._liveness("cd34"):
        monkeypatch.setenv("XDG_STATE_HOME", str(state_home.parent / "elsewhere"))  # another user, or sudo
        assert core._holder_is_dead(h) is False


def test_a_crashed_deploy_is_dead_even_though_its_liveness_file_is_left(state_home):
    h = holder_here("ef56", liveness=str(core._liveness_path("ef56")))
    core._liveness_path("ef56").parent.mkdir(parents=True)
    core._liveness_path("ef56").write_text("")  # the kernel dropped the flock with the process
    assert core._holder_is_dead(h) is True and not core._liveness_path("ef56").exists()


@pytest.fixture
def gone_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", ""])
    proc.wait()
    return proc.pid


def test_a_lock_from_an_older_controller_without_its_file_here_is_dead_only_if_its_pid_is_gone(state_home, gone_pid):
    assert core._holder_is_dead(holder_here("aa11")) is False  # our pid runs: the heartbeat decides
    assert core._holder_is_dead(holder_here("aa11", pid=gone_pid)) is True


def test_a_liveness_file_this_user_cannot_read_leaves_it_to_the_pid(state_home, gone_pid, monkeypatch):
    named = state_home.parent / "home-of-alice" / "orch" / "deploys" / "bb22.lock"

    def refuse(path, *args, **kw):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(lane_lock, "open", refuse, raising=False)  # as a 0700 home of another user does
    assert core._holder_is_dead(holder_here("bb22", liveness=str(named))) is False
    assert core._holder_is_dead(holder_here("bb22", liveness=str(named), pid=gone_pid)) is True


def test_a_lock_naming_some_other_file_is_not_trusted_and_that_file_is_never_removed(state_home, tmp_path):
    victim = tmp_path / "precious"
    victim.write_text("keep me")
    assert core._holder_is_dead(holder_here("cc33", liveness=str(victim))) is False  # falls back to our live pid
    assert victim.read_text() == "keep me"


def test_a_holder_on_another_host_is_never_judged_here_even_under_our_hostname(state_home, gone_pid):
    other = holder_here("dd44", machine_id="0" * 32, controller=lane_lock.socket.gethostname(), pid=gone_pid)
    assert core._holder_is_dead(other) is False  # a gone pid here says nothing about another machine
    assert (
        core._holder_is_dead({"token": "dd44", "controller": lane_lock.socket.gethostname(), "pid": gone_pid}) is False
    )


def test_a_holder_from_an_earlier_boot_of_this_host_is_dead(state_home):
    assert core._holder_is_dead(holder_here("ee55", boot_id="not-this-boot")) is True


# -- disk space -----------------------------------------------------------------


def wheel(name: str, size: int) -> CachedWheel:
    return CachedWheel(
        name=name,
        version="1",
        filename=f"{name}-1-py3-none-any.whl",
        sha256=name * 8,
        size=size,
        path=Path("/nonexistent"),
    )


def on_disk(tmp_path: Path, w: CachedWheel) -> CachedWheel:
    """`w` with a (sparse) file of its size in the controller's cache, as deploy checks before it starts."""
    path = tmp_path / "wheels" / w.filename
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.truncate(w.size)
    return CachedWheel(name=w.name, version=w.version, filename=w.filename, sha256=w.sha256, size=w.size, path=path)


def plan_with(workers: int, missing: list[CachedWheel]) -> core.DeployPlan:
    return core.DeployPlan(
        lane="cpu",
        bundle="b",
        bundle_id="new",
        lock_digest="d",
        python="3.11",
        workers=tuple(worker(i) for i in range(workers)),
        wheels=tuple(missing),
        uv=wheel("uv", 1),
    )


def begins(missing: list[CachedWheel], free: int) -> dict:
    return {
        "ok": True,
        "state": "locked-by-us",
        "active": "old",
        "missing": [x.request() for x in missing],
        "disk_free_bytes": free,
    }


def test_a_worker_without_room_for_the_wheels_stops_the_deploy_everywhere_before_anything_is_sent(
    tmp_path, scripted_transport, state_home
):
    mib = 2**20
    torch = on_disk(tmp_path, wheel("torch", 80 * mib))
    plan = dataclasses.replace(plan_with(2, [torch]), uv=on_disk(tmp_path, wheel("uv", 1)))
    fake = scripted_transport(plan.workers)
    # w0 has room and gets its wheel; w1 is refused on its begin reply alone, before anything is sent.
    fake.expect_job("w0", "deploy", ["begin"], answer=begins([torch], 1000 * mib))
    fake.expect_job("w1", "deploy", ["begin"], answer=begins([torch], 100 * mib))
    # w1 is refused on its begin reply alone: the lane is locked on all workers or on none, so both release.
    fake.expect_job("w0", "deploy", ["unlock"])
    fake.expect_job("w1", "deploy", ["unlock"])

    report = core.execute(plan, fake)

    assert report.outcomes["w1"].status == "failed"
    assert report.outcomes["w1"].reason == (
        "not enough disk space: needs 104 MiB (80 MiB of wheels + 24 MiB headroom), 100 MiB free under /var/lib/orch"
    )
    assert report.outcomes["w0"].status == "failed"
    assert report.outcomes["w0"].reason.startswith("not deployed: lane cpu could not be locked on every worker (w1: ")
    assert fake.calls_to("w0", "put") == fake.calls_to("w1", "put") == []
    assert fake.calls_to("w1", "put") == []


def test_the_seed_is_a_worker_with_room_for_every_wheel_anyone_lacks(scripted_transport, state_home):
    mib = 2**20
    a, b, c = wheel("a", 20 * mib), wheel("b", 20 * mib), wheel("c", 40 * mib)
    plan = plan_with(2, [a, b, c])
    job = core._Deploy(plan, scripted_transport(plan.workers), dict(OURS), lambda w, p: None)
    job.free = {"w0": 100 * mib, "w1": 1000 * mib}  # w0 has room for its own 40 MiB, not for all 80
    pushed: dict[str, list[str]] = {}
    job.push = lambda w, wheels: pushed.setdefault(w.name, [x.name for x in wheels])
    job.serve = lambda w: None  # no relay: peers get theirs pushed
    job.transfer({"w0": [a.request(), b.request()], "w1": [c.request()]})
    assert job.seed == "w1" and pushed == {"w1": ["a", "b", "c"], "w0": ["a", "b"]}


def test_the_controller_renews_with_the_shell_command_and_refreshes_the_lock_every_few_beats(
    scripted_transport, state_home
):
    plan = plan_with(1, [])
    fake = scripted_transport(plan.workers)
    job = core._Deploy(plan, fake, dict(OURS), lambda w, p: None)
    job.locked = {"w0"}
    counts: list[str] = []
    for beat in range(1, 2 * lane_lock.LOCK_REFRESH_EVERY + 1):
        if (beat - 1) % lane_lock.LOCK_REFRESH_EVERY == 0:
            fake.expect_job("w0", "deploy", ["heartbeat"], answer={"ok": True, "refreshed": True})
        else:
            fake.expect_run("w0", ["sh", "-c", dl.RENEW_SCRIPT], check=lambda c: counts.append(c.argv[-2]))
    for _ in range(2 * lane_lock.LOCK_REFRESH_EVERY):
        job.beat()
        wait_for(lambda: not job.beating, 10, "the beat to end")
    fake.verify()
    every = lane_lock.LOCK_REFRESH_EVERY
    assert counts == [str(n) for n in range(1, 2 * every + 1) if (n - 1) % every != 0]
    assert job.lost == {}
