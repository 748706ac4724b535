"""The controller lease before a launch's release, and the release as a delay on the worker's own clock."""

from __future__ import annotations

import functools
import json
import subprocess
import threading
import time

import pytest
from waiting import wait_for

from hostside import launch_ctl, launch_proc, lease
from hostside import launcher as hostside_launcher


def renew(run, count: int) -> None:
    """What the controller runs on the worker to renew its lease (launch/control.py)."""
    subprocess.run(launch_ctl.renew_argv(str(run), count), check=True, timeout=30)


def record(run) -> hostside_launcher.Record:
    doc = {"run_id": "r", "lane": "cpu", "worker": "w", "index": 0, "process_id": 0, "num_processes": 1, "target": {}}
    return hostside_launcher.Record(str(run / launch_proc.RECORD_FILE), doc)


def test_a_launcher_waiting_for_its_release_ends_itself_when_the_controller_stops_renewing(tmp_path, monkeypatch):
    monkeypatch.setattr(lease, "CONTROLLER_LEASE_TTL", 0.5)
    run = tmp_path / "run"
    run.mkdir()
    renew(run, 1)  # renewed once, then the controller is gone
    t0 = time.monotonic()
    with pytest.raises(hostside_launcher.Refusal, match="the controller stopped renewing its lease"):
        hostside_launcher.wait_for_release({"run_dir": str(run), "ready_timeout": 60}, record(run))
    assert time.monotonic() - t0 < 10  # the lease's ttl, far below the start timeout


def test_a_launcher_waits_while_the_controller_renews_and_starts_on_the_release(tmp_path, monkeypatch):
    # The launcher judges the lease on a clock that moves only as the controller renews: three ttls
    # of renewals pass on it however slowly this machine schedules the two (a real clock here made
    # the test fail on a loaded machine, when one renewal's `sh` took longer than the ttl to start).
    # Judged by anything but the renewals' changes, the launcher would refuse after the first ttl.
    monkeypatch.setattr(lease, "CONTROLLER_LEASE_TTL", 0.5)
    clock = [0.0]
    monkeypatch.setattr(lease, "Observer", functools.partial(lease.Observer, clock=lambda: clock[0]))
    monkeypatch.setattr(hostside_launcher, "LEASE_CHECK", 0.01)  # it looks at the lease between renewals
    run = tmp_path / "run"
    run.mkdir()
    done = threading.Event()

    def controller() -> None:
        for count in range(1, 16):  # 1.5 s of the launcher's clock: three ttls of renewals, then the release
            renew(run, count)
            time.sleep(0.02)
            clock[0] += 0.1
        done.set()  # before the release: the launcher may return before this thread runs again
        launch_ctl.release_in(str(run), 0.0)

    threading.Thread(target=controller, daemon=True).start()
    rec = record(run)
    hostside_launcher.wait_for_release({"run_dir": str(run), "ready_timeout": 60}, rec)
    assert done.is_set() and rec.data["released_at"] >= rec.data["release_at"] - 0.01
    assert clock[0] > 3 * lease.CONTROLLER_LEASE_TTL


def shell_release(run_dir: str, delay: float) -> dict:
    """The controller's form of the release: `release_argv`, a shell command."""
    done = subprocess.run(launch_ctl.release_argv(run_dir, delay), capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


RELEASES = {"python": launch_ctl.release_in, "shell": shell_release}


@pytest.mark.parametrize("form", RELEASES)
def test_a_release_is_a_delay_from_its_arrival_on_the_workers_clock_and_is_capped(tmp_path, form):
    release_in = RELEASES[form]
    run = tmp_path / "run"
    run.mkdir()
    before = time.time()
    reply = release_in(str(run), 3600.0)  # a controller whose clock is an hour ahead would have said this
    doc = json.loads((run / launch_proc.RELEASE_FILE).read_text())
    assert before + launch_ctl.RELEASE_CAP - 1 <= doc["release_at"] <= time.time() + launch_ctl.RELEASE_CAP
    assert reply["ok"] is True and reply["release_at"] == doc["release_at"]
    assert before <= doc["written_at"] <= time.time()
    release_in(str(run), -5.0)
    assert json.loads((run / launch_proc.RELEASE_FILE).read_text())["release_at"] <= time.time()
    assert sorted(p.name for p in run.iterdir()) == [launch_proc.RELEASE_FILE], "no temp file left"


def test_the_shell_release_names_a_missing_run_directory(tmp_path):
    done = subprocess.run(launch_ctl.release_argv(str(tmp_path / "gone"), 0.0), capture_output=True, text=True)
    assert done.returncode == 1 and "no run directory" in done.stderr and not (tmp_path / "gone").exists()


@pytest.mark.parametrize("form", RELEASES)
def test_a_waiting_launcher_sleeps_on_its_bell_and_wakes_on_the_release(tmp_path, monkeypatch, form):
    """No polling while it waits: the release rings the bell, and the bell is gone afterwards."""
    monkeypatch.setattr(hostside_launcher, "LEASE_CHECK", 30.0)  # only the bell can wake it in time
    run = tmp_path / "run"
    run.mkdir()
    renew(run, 1)
    looks: list[float] = []
    real_read = launch_proc.read_json

    def counted(path):
        if path.endswith(launch_proc.RELEASE_FILE):
            looks.append(time.monotonic())
        return real_read(path)

    monkeypatch.setattr(launch_proc, "read_json", counted)

    def controller() -> None:
        while not (run / launch_proc.RELEASE_BELL).exists():
            time.sleep(0.01)
        time.sleep(0.3)
        RELEASES[form](str(run), 0.0)

    threading.Thread(target=controller, daemon=True).start()
    rec = record(run)
    t0 = time.monotonic()
    hostside_launcher.wait_for_release({"run_dir": str(run), "ready_timeout": 60}, rec)
    assert time.monotonic() - t0 < 20  # woken by the bell, not by the 30 s lease check
    assert len(looks) <= 3  # a look before the release, one after it (a poll every 5 ms made 60)
    assert not (run / launch_proc.RELEASE_BELL).exists()


def test_a_stop_rings_the_bell_of_a_waiting_launcher(tmp_path, monkeypatch):
    monkeypatch.setattr(hostside_launcher, "LEASE_CHECK", 30.0)
    run = tmp_path / "run"
    run.mkdir()
    renew(run, 1)

    def controller() -> None:
        while not (run / launch_proc.RELEASE_BELL).exists():
            time.sleep(0.01)
        launch_ctl.stop(str(run), grace=1.0, reason="Ctrl-C on the controller")

    threading.Thread(target=controller, daemon=True).start()
    t0 = time.monotonic()
    with pytest.raises(hostside_launcher.Refusal, match=r"stopped by orch before the release \(Ctrl-C"):
        hostside_launcher.wait_for_release({"run_dir": str(run), "ready_timeout": 60}, record(run))
    assert time.monotonic() - t0 < 20


def test_a_bell_wakes_only_when_rung_and_ringing_with_no_one_waiting_does_nothing(tmp_path):
    from hostside import files

    path = tmp_path / "bell"
    files.ring(path)  # no bell: nothing, no file made
    assert not path.exists()
    fd = files.open_bell(path)
    assert fd is not None and (path.stat().st_mode & 0o777) == 0o600
    t0 = time.monotonic()
    files.wait_bell(fd, 0.2)  # nobody rang: sleeps its timeout (a FIFO at end-of-file would not)
    assert time.monotonic() - t0 >= 0.15
    for _ in range(3):
        files.ring(path)
    t0 = time.monotonic()
    files.wait_bell(fd, 10)
    assert time.monotonic() - t0 < 5
    t0 = time.monotonic()
    files.wait_bell(fd, 0.2)  # the three rings were swallowed together
    assert time.monotonic() - t0 >= 0.15
    files.close_bell(fd, path)
    assert not path.exists()
    (tmp_path / "plain").write_text("x")
    files.ring(tmp_path / "plain")  # a regular file is not a bell: left as it was
    assert (tmp_path / "plain").read_text() == "x"
    assert files.open_bell(tmp_path / "plain") is None


def test_the_controller_renews_every_worker_each_round_and_skips_only_a_worker_whose_renewal_hangs(tmp_path):
    from types import SimpleNamespace

    from orchestrator.launch.control import LeaseRenewer
    from orchestrator.transport import FanOut, Result

    hung = threading.Event()
    sent: list[tuple[str, str]] = []

    class Renewals(FanOut):
        def run_one(self, name, argv, **_kw):
            sent.append((name, argv[5]))
            if name == "w1":
                hung.wait(30)
            else:
                subprocess.run(argv, check=True)
            return Result(host=name, argv=tuple(argv), exit_code=0)

    workers = ("w0", "w1", "w2")
    for w in workers:
        (tmp_path / w).mkdir()
    plan = SimpleNamespace(workers=workers, process=lambda w: SimpleNamespace(run_dir=str(tmp_path / w)))
    renewer = LeaseRenewer(plan, Renewals(), every=0.05).start()  # type: ignore[arg-type]
    try:
        wait_for(lambda: sum(1 for w, _ in sent if w == "w0") >= 5, 30, "five rounds")
    finally:
        renewer.stop()
        hung.set()
    assert [n for w, n in sent if w == "w1"] == ["1"], "a renewal still in flight is not sent again"
    counts = [int(n) for w, n in sent if w == "w2"]
    assert counts == sorted(counts) and len(counts) >= 5
    assert json.loads((tmp_path / "w0" / launch_ctl.CONTROLLER_LEASE_FILE).read_text())["renewed"] >= 5
