"""Compilation-cache ownership without a worker: paths and roles, the writer lease, evidence, verdicts.

The lease is exercised on real files and real processes (a live holder is a
running child, a dead one a child that has exited); verdicts are judged from
launch-record `cache` sections shaped exactly as the launcher writes them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hostside import launch_cache as lc
from hostside import launch_proc as lp
from hostside import lease
from hostside.layout import Layout
from orchestrator import cache
from orchestrator import restart_check as rc
from orchestrator.cli import main
from orchestrator.errors import ConfigError
from orchestrator.fleet import build_fleet, load_fleet
from orchestrator.launch import plan_launch
from orchestrator.probe import build_request
from orchestrator.yamlsrc import loads

FLEET = """\
version: 1
slices:
  s:
    root: /var/lib/orch
    shared_dir: /mnt/shared
    workers:
      - {index: 0, address: 10.0.0.1}
      - {index: 1, address: 10.0.0.2}
      - {index: 2, address: 10.0.0.3}
      - {index: 3, address: 10.0.0.4}
      - {index: 4, address: 10.0.0.5}
bundles:
  jax-cpu: {python: "3.11", pins: [jax==0.10.2, jaxlib==0.10.2]}
  xla: {python: "3.11", pins: [torch==2.9.0, torch_xla==2.9.0, jax==0.10.2]}
  torch-cpu: {python: "3.11", pins: [torch==2.13.0]}
cache_policies:
  local: {mode: per-host}
  shared: {mode: single-writer, root: /mnt/shared/cache}
  torch-writer: {mode: single-writer, root: /mnt/shared/cache, writer: 4}
  none: {mode: "off"}
lanes:
  train: {workers: 0-1, bundle: xla, cache: shared, platform: tpu}
  eval: {workers: 2, bundle: jax-cpu, cache: local, platform: cpu}
  plain: {workers: 3, bundle: torch-cpu, cache: none, platform: cpu}
  torch: {workers: 4, bundle: torch-cpu, cache: torch-writer, platform: cpu}
"""


@pytest.fixture
def fleet(tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text(FLEET)
    return load_fleet(path)


def problems_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        build_fleet(loads(textwrap.dedent(text), Path("fleet.yaml")))
    return info.value.problems


# -- paths and roles ----------------------------------------------------------------


def test_single_writer_gives_process_zero_the_writer_role_and_everyone_else_read_only(fleet):
    w0, w1 = fleet.lane_workers("train")
    writer, reader = cache.cache_plan(fleet, "train", w0), cache.cache_plan(fleet, "train", w1)
    assert (writer.role, reader.role) == ("writer", "reader")
    assert writer.writes and not reader.writes
    assert (
        writer.roots
        == reader.roots
        == {
            "jax": "/mnt/shared/cache/train/{bundle_id}/jax",
            "torch_xla": "/mnt/shared/cache/train/{bundle_id}/torch_xla",
        }
    )
    assert writer.lease == "/mnt/shared/cache/train/{bundle_id}/writer.lease"
    assert writer.writer == reader.writer == "s-w0" and writer.shared


def test_per_host_caches_live_under_each_worker_root_as_the_layout_says(fleet):
    (w2,) = fleet.lane_workers("eval")
    plan = cache.cache_plan(fleet, "eval", w2, "b1")
    assert plan.role == "private" and not plan.shared and plan.lease is None
    assert plan.roots == {f: Layout("/var/lib/orch").host_cache("eval", "b1", f) for f in ("jax", "torch_xla")}


def test_an_off_policy_configures_nothing(fleet):
    (w3,) = fleet.lane_workers("plain")
    plan = cache.cache_plan(fleet, "plain", w3)
    assert (plan.role, plan.base, plan.roots) == ("off", None, {"jax": None, "torch_xla": None})


def test_a_root_shared_by_two_frontends_is_impossible_by_construction(fleet):
    # Every path ends in /jax or /torch_xla under a lane- and bundle-keyed directory,
    # so no policy, lane or bundle can make two frontends (or two stacks) share a root.
    owner: dict[tuple, tuple] = {}
    for lane in ("train", "eval", "torch"):
        for w in fleet.lane_workers(lane):
            for bundle in ("b1", "b2"):
                plan = cache.cache_plan(fleet, lane, w, bundle)
                assert plan.roots["jax"].endswith(f"/{lane}/{bundle}/jax")
                assert plan.roots["torch_xla"].endswith(f"/{lane}/{bundle}/torch_xla")
                for frontend, root in plan.roots.items():
                    where = ("shared" if plan.shared else w.name, root)
                    assert owner.setdefault(where, (lane, bundle, frontend)) == (lane, bundle, frontend)
    assert len(owner) == 2 * 2 * 3


def test_a_restart_check_scope_puts_the_caches_beside_the_real_ones_never_in_them(fleet):
    w0 = fleet.lane_workers("train")[0]
    plan = cache.cache_plan(fleet, "train", w0, "b1", scope="rc-1")
    assert plan.base == "/mnt/shared/cache/.checks/rc-1/train/b1"
    assert plan.lease == "/mnt/shared/cache/.checks/rc-1/train/b1/writer.lease"
    assert plan.resolve("x") == plan


def test_the_planned_bundle_id_is_filled_in_on_the_worker(fleet):
    plan = cache.cache_plan(fleet, "train", fleet.lane_workers("train")[0]).resolve("abc123")
    assert plan.roots["jax"] == "/mnt/shared/cache/train/abc123/jax"
    assert plan.lease == "/mnt/shared/cache/train/abc123/writer.lease"


def test_probe_and_launch_take_their_cache_paths_from_cache_plan(fleet):
    w0, w1 = fleet.lane_workers("train")
    launch = plan_launch(fleet, "train", ["x.py"], run_id="r-1").cache
    for w in (w0, w1):
        expected = cache.cache_plan(fleet, "train", w)
        assert launch["processes"][w.name] == expected.to_dict()
        probe = build_request(fleet, w)["caches"]
        assert {(c["frontend"], c["path"]) for c in probe} == {(f, expected.roots[f]) for f in ("jax", "torch_xla")}
        assert {c["expect"] for c in probe} == {"writable" if expected.writes else "readonly"}
    assert (launch["mode"], launch["name"], launch["root"]) == ("single-writer", "shared", "/mnt/shared/cache")


def test_the_launch_file_carries_every_process_plan_and_the_dry_run_names_the_writer(fleet):
    plan = plan_launch(fleet, "train", ["x.py"], run_id="r-1")
    doc = plan.launch_doc(plan.processes[1])
    assert doc["cache"]["processes"]["s-w1"]["role"] == "reader"
    assert cache.describe(plan.cache) == (
        "cache policy shared: single-writer, s-w0 writes /mnt/shared/cache/"
        "train/<bundle-id>/{jax,torch_xla} under a lease, 1 reader only read"
    )
    assert "orch configures no compilation cache" in cache.describe(plan_launch(fleet, "plain", ["x.py"]).cache)


def test_a_torch_only_lane_may_name_any_worker_as_its_writer(fleet):
    (w4,) = fleet.lane_workers("torch")
    assert cache.cache_plan(fleet, "torch", w4).role == "writer"


def test_a_relative_cache_root_is_refused_once_naming_the_policy():
    text = FLEET.replace(
        "shared: {mode: single-writer, root: /mnt/shared/cache}", "shared: {mode: single-writer, root: cache}"
    )
    assert problems_of(text) == [
        "fleet.yaml:18 cache_policies.shared.root: cache root 'cache' must be an absolute path on the workers "
        "(it is used as given on every worker)"
    ]


# -- the writer lease ------------------------------------------------------------------


HOST = socket.gethostname()


def lease_doc(pid: int, *, host: str = HOST, beat: float | None = None, starttime=None) -> dict:
    return {
        "nonce": "n0",
        "holder": {
            "worker": "w0",
            "hostname": host,
            "pid": pid,
            "starttime": starttime,
            "run_id": "run-a",
            "bundle_id": "b1",
        },
        "heartbeat_at": time.time() if beat is None else beat,
    }


def test_a_lease_is_judged_by_its_holder_pid_on_its_own_host_and_never_by_another_hosts_timestamp():
    now = 1000.0
    alive = {10: True, 11: False}.get

    def judge(doc):
        reading = lease.Reading("absent") if doc is None else lease.parse(json.dumps(doc), lc.LEASE_FIELDS)
        return lc.judge_lease(reading, now=now, hostname="h0", ttl=20, alive=lambda pid, start=None: alive(pid, False))

    assert judge(None) == ("none", "no writer lease")
    assert judge(lease_doc(10, host="h0", beat=999.0))[0] == "live"
    assert judge(lease_doc(11, host="h0", beat=999.0)) == ("stale", "its holder (pid 11 on h0) is gone")
    # another host: its heartbeat's timestamp is another clock's, never compared with ours
    assert judge(lease_doc(11, host="h1", beat=990.0))[0] == "remote"
    assert judge(lease_doc(11, host="h1", beat=900.0))[0] == "remote"
    assert judge(lease_doc(10, host="h0", beat=900.0)) == ("stale", "its heartbeat expired 100s ago (ttl 20s)")
    assert judge({"holder": {}})[0] == "stale"  # no heartbeat: unreadable, so stale
    assert judge({"holder": {"hostname": "h0", "pid": "10"}, "heartbeat_at": 999.0})[0] == "stale"  # a pid not a number


@pytest.fixture
def child():
    """A live process (and its /proc starttime) that the test ends."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield proc.pid, lp.stat(proc.pid)["starttime"]
    finally:
        proc.kill()
        proc.wait()


def dead_pid() -> tuple[int, int]:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    start = lp.stat(proc.pid)["starttime"]
    proc.wait()
    return proc.pid, start


def holder(run: str) -> dict:
    return {
        "worker": "w0",
        "hostname": HOST,
        "pid": os.getpid(),
        "starttime": lp.stat(os.getpid())["starttime"],
        "run_id": run,
        "bundle_id": "b1",
    }


def test_a_second_writer_is_refused_naming_the_live_holder(tmp_path, child):
    path = tmp_path / "c" / "writer.lease"
    path.parent.mkdir()
    pid, start = child
    path.write_text(json.dumps(lease_doc(pid, starttime=start)))
    with pytest.raises(lc.CacheRefusal) as info:
        lc.Lease(str(path), holder("run-b"), ttl=20, interval=1).acquire()
    assert f"already has a live writer: w0 (host {HOST}, pid {pid}, run run-a, bundle b1)" in str(info.value)
    assert "orch stop run-a" in str(info.value)
    assert json.loads(path.read_text())["holder"]["pid"] == pid  # untouched


def test_a_lease_whose_holder_is_gone_is_reclaimed_and_says_from_whom(tmp_path):
    path = tmp_path / "writer.lease"
    pid, start = dead_pid()
    path.write_text(json.dumps(lease_doc(pid, starttime=start)))
    lease = lc.Lease(str(path), holder("run-b"), ttl=20, interval=1)
    lease.acquire()
    summary = lease.summary()
    assert (summary["state"], summary["acquired"]) == ("held", "reclaimed")
    assert summary["reclaimed_from"]["run_id"] == "run-a"
    assert summary["reclaimed_from"]["reason"] == f"its holder (pid {pid} on {HOST}) is gone"
    assert json.loads(path.read_text())["holder"]["run_id"] == "run-b"
    lease.release()
    assert not path.exists() and lease.state == "released"


def test_a_lease_from_another_host_is_judged_by_watching_its_heartbeat_whatever_its_clock_says(tmp_path):
    path = tmp_path / "writer.lease"
    # A writer on a host whose clock is an hour behind: its heartbeat looks ancient, but it beats.
    path.write_text(json.dumps(lease_doc(1, host="elsewhere", beat=time.time() - 3600)))
    stop = threading.Event()

    def beat() -> None:
        n = 0
        while not stop.wait(0.1):
            n += 1
            tmp = path.with_name(".beat")
            tmp.write_text(json.dumps(lease_doc(1, host="elsewhere", beat=time.time() - 3600 + n)))
            tmp.replace(path)

    beating = threading.Thread(target=beat, daemon=True)
    beating.start()
    try:
        with pytest.raises(lc.CacheRefusal, match="heartbeat changed while watched"):
            lc.Lease(str(path), holder("run-b"), ttl=2, interval=1).acquire()
    finally:
        stop.set()
        beating.join()
    # A writer on a host whose clock is an hour ahead, which stopped: reclaimed after ttl of silence, not before.
    path.write_text(json.dumps(lease_doc(1, host="elsewhere", beat=time.time() + 3600)))
    lease = lc.Lease(str(path), holder("run-b"), ttl=1, interval=1)
    t0 = time.monotonic()
    lease.acquire()
    assert time.monotonic() - t0 >= 1
    assert lease.reclaimed_from["reason"].startswith("its heartbeat did not change for")
    lease.release()


def test_two_writers_racing_for_an_abandoned_lease_end_with_exactly_one_holder(tmp_path):
    path = tmp_path / "writer.lease"
    pid, start = dead_pid()
    path.write_text(json.dumps(lease_doc(pid, starttime=start)))
    outcomes, barrier = {}, threading.Barrier(2)

    def contend(run: str):
        lease = lc.Lease(str(path), holder(run), ttl=20, interval=1)
        barrier.wait()
        try:
            lease.acquire()
            outcomes[run] = lease
        except lc.CacheRefusal as exc:
            outcomes[run] = exc

    threads = [threading.Thread(target=contend, args=(r,)) for r in ("run-b", "run-c")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    held = [r for r, o in outcomes.items() if isinstance(o, lc.Lease)]
    assert len(held) == 1, outcomes
    assert json.loads(path.read_text())["holder"]["run_id"] == held[0]
    assert not list(tmp_path.glob("writer.lease.*"))  # no stray temp or stale files
    outcomes[held[0]].release()


def test_the_heartbeat_keeps_the_lease_fresh_and_notices_a_takeover(tmp_path):
    path = tmp_path / "writer.lease"
    lease = lc.Lease(str(path), holder("run-b"), ttl=20, interval=1)
    lease.acquire()
    first = json.loads(path.read_text())["heartbeat_at"]
    time.sleep(0.01)
    assert lease.beat() and json.loads(path.read_text())["heartbeat_at"] > first
    lp.write_json_atomic(str(path), {**lease_doc(os.getpid()), "nonce": "someone-else"})
    assert not lease.beat()
    lease.release()
    assert lease.state == "lost" and "taken over by w0" in lease.lost_reason
    assert path.exists()  # never removes someone else's lease


def test_the_heartbeat_thread_beats_until_release(tmp_path):
    path = tmp_path / "writer.lease"
    lease = lc.Lease(str(path), holder("run-b"), ttl=20, interval=0.05)
    lease.acquire()
    lease.start()
    time.sleep(0.4)
    lease.release()
    assert lease.heartbeats >= 2 and lease.state == "released" and not path.exists()


# -- evidence and the status/clear jobs ---------------------------------------------------


def test_entries_are_counted_per_frontend_from_the_files_each_frontend_writes(tmp_path):
    jax_dir, xla_dir = tmp_path / "jax", tmp_path / "torch_xla"
    jax_dir.mkdir()
    xla_dir.mkdir()
    for name in ("jit_f-abc-cache", "jit_f-abc-atime", "jit_g-def-cache"):
        (jax_dir / name).write_bytes(b"x" * 10)
    (xla_dir / "123.bin").write_bytes(b"y" * 5)
    (xla_dir / "6225411816594850624650909673486042667").write_bytes(b"y" * 5)  # torch_xla 2.9 names
    assert {k: v for k, v in lc.count_entries(str(jax_dir), "jax").items() if k != "last_write"} == {
        "path": str(jax_dir),
        "exists": True,
        "entries": 2,
        "bytes": 30,
    }
    assert lc.count_entries(str(xla_dir), "torch_xla")["entries"] == 2
    assert lc.count_entries(str(tmp_path / "none"), "jax") == {
        "path": str(tmp_path / "none"),
        "exists": False,
        "entries": 0,
        "bytes": 0,
        "last_write": None,
    }


def test_jax_evidence_counts_hits_lookups_writes_and_compile_time_from_monitoring_events():
    ev = lc.JaxEvidence()
    for _ in range(3):
        ev.on_event(lc.JAX_REQUESTS)
    ev.on_event(lc.JAX_HITS)
    ev.on_event(lc.JAX_MISSES)  # jax 0.10 records this one when it writes an entry
    ev.on_duration(lc.JAX_SAVED, 2.5)
    ev.on_duration(lc.JAX_COMPILE, 1.0, fun_name="f")
    ev.on_duration(lc.JAX_COMPILE, 0.5, fun_name="g")
    s = ev.summary()
    assert (s["cache_hits"], s["cache_misses"], s["cache_writes"], s["compiles"]) == (1, 2, 1, 2)
    assert (s["compile_time_sec"], s["compile_time_saved_sec"]) == (1.5, 2.5)


def make_cache(tmp_path: Path, bundle: str, lease: dict | None = None) -> Path:
    base = tmp_path / "cache" / "cpu" / bundle
    (base / "jax").mkdir(parents=True)
    (base / "jax" / "k-cache").write_bytes(b"z" * 100)
    if lease is not None:
        (base / "writer.lease").write_text(json.dumps(lease))
    return base


def test_status_lists_every_bundle_with_entries_and_lease_state(tmp_path, child):
    pid, start = child
    make_cache(tmp_path, "b1", lease_doc(pid, starttime=start))
    make_cache(tmp_path, "b2")
    (tmp_path / "lanes" / "cpu").mkdir(parents=True)
    (tmp_path / "envs" / "b2").mkdir(parents=True)
    os.symlink(tmp_path / "envs" / "b2", tmp_path / "lanes" / "cpu" / "active")
    doc = lc.status(
        {"lane_dir": str(tmp_path / "cache" / "cpu"), "active": str(tmp_path / "lanes/cpu/active"), "ttl": 20}
    )
    by_id = {b["bundle_id"]: b for b in doc["bundles"]}
    assert by_id["b1"]["lease"]["state"] == "live" and by_id["b1"]["lease"]["holder"]["pid"] == pid
    assert by_id["b2"]["lease"]["state"] == "none" and by_id["b2"]["active"] and not by_id["b1"]["active"]
    assert by_id["b1"]["frontends"]["jax"]["entries"] == 1 and not by_id["b1"]["frontends"]["torch_xla"]["exists"]


def test_clear_leaves_a_cache_whose_writer_runs_and_removes_the_rest(tmp_path, child):
    pid, start = child
    live = make_cache(tmp_path, "b1", lease_doc(pid, starttime=start))
    dead = make_cache(tmp_path, "b2", lease_doc(*dead_pid()[:1]))
    doc = lc.clear({"lane_dir": str(tmp_path / "cache" / "cpu"), "ttl": 20})
    assert doc["removed"] == [str(dead)] and doc["freed"] > 100 and live.exists() and not dead.exists()
    assert doc["refused"][0].startswith(f"{live}: its writer is running: w0") and not doc["ok"]


def test_clearing_a_check_scope_refuses_anything_but_a_check_directory(tmp_path):
    assert lc.clear({"scope_dir": str(tmp_path)})["error"].startswith("refusing to remove")
    scope = tmp_path / ".checks" / "rc-1"
    (scope / "cpu").mkdir(parents=True)
    assert lc.clear({"scope_dir": str(scope)})["removed"] == [str(scope)]
    assert not (tmp_path / ".checks").exists()


class FakeRecord:
    def __init__(self):
        self.data, self.steps, self.notes, self.saved = {}, [], [], 0

    def step(self, name, status, started, detail="", **extra):
        self.steps.append((name, status, detail))

    def note(self, text):
        self.notes.append(text)

    def save(self):
        self.saved += 1


def test_init_resolves_the_bundle_id_and_records_the_plan_even_without_a_cache_frontend(fleet, tmp_path, monkeypatch):
    bundle = "5748b3c35b095645"
    (tmp_path / "envs" / bundle).mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "envs" / bundle))
    plan = plan_launch(fleet, "torch", ["x.py"], run_id="r-1")
    doc = plan.launch_doc(plan.processes[0])
    rec = FakeRecord()
    state = lc.init(doc, rec)
    assert lc.bundle_id_of_this_python() == bundle
    assert state["role"] == "writer" and state["lease"] is None  # torch alone: no cache, no lease
    assert state["roots"]["jax"] == f"/mnt/shared/cache/torch/{bundle}/jax"
    assert any("no frontend with a persistent compilation cache" in c for c in state["caveats"])
    assert rec.steps == [("cache-init", "done", "single-writer cache, role writer: nothing to configure")]
    lc.close()
    assert rec.data["cache"]["closed_at"] and rec.saved == 1
    assert set(rec.data["cache"]) >= {"policy", "role", "roots", "lease", "evidence"}


# -- verdicts --------------------------------------------------------------------------


def section(role: str, *, mode: str = "single-writer", frontend: str = "jax", writer: str = "w0", **ev) -> dict:
    base = {
        "entries_before": 0,
        "entries_after": 0,
        "cache_hits": 0,
        "cache_misses": 0,
        "compile_time_sec": 0.0,
        "compiles": 0,
    }
    return {
        "policy": mode,
        "role": role,
        "writer": writer,
        "configured": {frontend: True},
        "evidence": {frontend: {**base, **ev}},
    }


def test_process_zero_reused_when_it_hit_and_compiled_in_a_fraction_of_the_cold_time():
    v = rc.judge(
        "jax",
        section("writer", compiles=10, compile_time_sec=8.0, entries_after=10),
        section("writer", compiles=10, compile_time_sec=0.4, cache_hits=10, entries_before=10, entries_after=10),
        worker="w0",
        process_id=0,
        num_processes=4,
        platform="cpu",
    )
    assert (v.verdict, v.expected, v.ratio, v.entries_written, v.passed) == ("reused", True, 0.05, 10, True)
    assert v.cause == "10 cache hits; warm compile 0.40s vs cold 8.00s (ratio 0.05 <= 0.5)"


def test_a_cpu_reader_with_process_zeros_entries_is_written_not_reused_and_not_expected_to_reuse():
    v = rc.judge(
        "jax",
        section("reader", compiles=10, compile_time_sec=8.0),
        section("reader", compiles=10, compile_time_sec=5.0, cache_misses=10, entries_before=10),
        worker="w1",
        process_id=1,
        num_processes=4,
        platform="cpu",
    )
    assert (v.verdict, v.expected, v.passed) == ("written-not-reused", False, True)
    assert "on CPU the JAX cache key differs per process" in v.cause
    assert v.entries_written is None


def test_on_tpu_a_single_writer_reader_is_expected_to_reuse_process_zeros_entries():
    v = rc.judge(
        "jax",
        section("reader", compiles=3, compile_time_sec=60.0),
        section("reader", compiles=3, compile_time_sec=50.0, cache_misses=3, entries_before=3),
        worker="w1",
        process_id=1,
        num_processes=4,
        platform="tpu",
    )
    assert (v.verdict, v.expected, v.passed) == ("written-not-reused", True, False)
    assert "cache keys differ between the runs" in v.cause


def test_per_host_jax_processes_other_than_zero_are_not_written_with_the_reason():
    v = rc.judge(
        "jax",
        section("private", mode="per-host", compiles=10, compile_time_sec=8.0),
        section("private", mode="per-host", compiles=10, compile_time_sec=7.0, cache_misses=10),
        worker="w2",
        process_id=2,
        num_processes=4,
        platform="cpu",
    )
    assert (v.verdict, v.expected) == ("not-written", False)
    assert v.cause == "JAX writes its persistent cache only from process 0: this private cache stayed empty"
    assert v.expectation.startswith("JAX writes its persistent cache only from process 0")


def test_torch_xla_entries_that_fail_to_deserialize_are_written_not_reused_with_the_log_evidence():
    log = (
        "step 0\n2026-01-01 E0000 pjrt_computation_client.cc:123] Failed to deserialize executable: "
        "UNIMPLEMENTED: Deserializing serialized executable not supported.\n" * 3
    )
    lines = rc.evidence_lines(log)
    assert lines == (
        "Failed to deserialize executable: UNIMPLEMENTED: Deserializing serialized executable not supported.",
    )
    v = rc.judge(
        "torch_xla",
        section("private", mode="per-host", frontend="torch_xla", compiles=4, compile_time_sec=11.5, entries_after=4),
        section(
            "private",
            mode="per-host",
            frontend="torch_xla",
            compiles=4,
            compile_time_sec=11.2,
            cache_misses=0,
            deserialize_failures=4,
            entries_before=4,
            entries_after=4,
        ),
        worker="w0",
        process_id=0,
        num_processes=1,
        platform="cpu",
        log_lines=lines,
    )
    assert (v.verdict, v.expected, v.passed) == ("written-not-reused", True, False)
    assert v.cause.startswith("4 entries on disk, 4 deserialize failures")
    assert "UNIMPLEMENTED" in v.evidence[0]


def test_hits_that_save_no_time_are_not_reuse():
    v = rc.judge(
        "jax",
        section("writer", compiles=2, compile_time_sec=1.0, entries_after=2),
        section("writer", compiles=2, compile_time_sec=0.9, cache_hits=2, entries_before=2),
        worker="w0",
        process_id=0,
        num_processes=1,
        platform="cpu",
    )
    assert v.verdict == "written-not-reused" and "ratio 0.9 > 0.5" in v.cause


def test_a_frontend_that_compiled_nothing_is_not_expected_to_reuse_anything():
    v = rc.judge(
        "jax", section("writer"), section("writer"), worker="w0", process_id=0, num_processes=1, platform="cpu"
    )
    assert (v.verdict, v.expected) == ("not-written", False)
    assert v.cause == "the cold run compiled nothing with jax"


def test_the_check_passes_only_when_every_expected_process_reused():
    reused = rc.judge(
        "jax",
        section("writer", compiles=1, compile_time_sec=4.0, entries_after=1),
        section("writer", compiles=1, compile_time_sec=0.2, cache_hits=1, entries_before=1),
        worker="w0",
        process_id=0,
        num_processes=2,
        platform="cpu",
    )
    other = rc.judge(
        "jax",
        section("reader", compiles=1, compile_time_sec=4.0),
        section("reader", compiles=1, compile_time_sec=4.0, cache_misses=1, entries_before=1),
        worker="w1",
        process_id=1,
        num_processes=2,
        platform="cpu",
    )
    check = rc.RestartCheck(
        check_id="rc",
        lane="cpu",
        platform="cpu",
        policy="shared",
        mode="single-writer",
        threshold=0.5,
        num_processes=2,
        roots={},
        verdicts=[reused, other],
    )
    assert check.ok and check.exit_code == 0
    assert check.message == (
        "reused by every process expected to reuse (1 of 2: process 0; warm/cold compile ratio 0.05 <= 0.5)"
    )
    text = rc.render(check)
    assert "PASSED" in text and "written-not-reused" in text and "expected to reuse: no (on CPU" in text
    failed = rc.RestartCheck(**{**check.__dict__, "verdicts": [other]})
    assert not failed.ok and failed.message.startswith("no process was expected to reuse")


def test_both_runs_of_a_check_share_one_fresh_root_and_an_off_lane_is_refused(fleet):
    cold, warm = rc.plan_runs(fleet, "train", ["x.py"], check_id="rc-1")
    assert (cold.run_id, warm.run_id) == ("rc-1-cold", "rc-1-warm")
    assert cold.cache == warm.cache and cold.cache["scope"] == "rc-1"
    assert cold.cache["processes"]["s-w0"]["base"] == "/mnt/shared/cache/.checks/rc-1/train/{bundle_id}"
    with pytest.raises(ConfigError, match="lane 'plain' has no compilation cache"):
        rc.plan_runs(fleet, "plain", ["x.py"], check_id="rc-2")


def test_cache_clear_asks_before_removing_and_refuses_silently_running_without_yes(fleet):
    result = CliRunner().invoke(main, ["--fleet", str(fleet.path), "cache", "clear", "--lane", "train"])
    assert result.exit_code == 2
    assert "needs --yes when not interactive" in result.output


def test_a_python_that_is_no_bundle_environment_runs_without_a_cache_and_inherited_cache_paths_are_unset(
    fleet, tmp_path, monkeypatch
):
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "some-venv"))
    monkeypatch.setenv("XLA_PERSISTENT_CACHE_PATH", "/tmp/somebody-elses-cache")
    plan = plan_launch(fleet, "torch", ["x.py"], run_id="r-2")
    rec = FakeRecord()
    state = lc.init(plan.launch_doc(plan.processes[0]), rec)
    lc.close()
    assert state["role"] == "off" and state["bundle_id"] is None
    assert any("is not a deployed bundle environment" in c for c in state["caveats"])
    assert rec.steps[0][1] == "skipped"

    (tmp_path / "envs" / "abc").mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "envs" / "abc"))
    state = lc.init(plan.launch_doc(plan.processes[0]), FakeRecord())
    lc.close()
    assert "XLA_PERSISTENT_CACHE_PATH" not in os.environ
    assert any("the lane's cache policy replaces it (unset for this process)" in c for c in state["caveats"])


def test_a_writer_that_loses_its_lease_is_told_once_and_records_that_it_stops_writing(tmp_path):
    path = tmp_path / "writer.lease"
    lease = lc.Lease(str(path), holder("run-b"), ttl=20, interval=0.05)
    lease.acquire()
    lost = []
    lease.on_lost = lost.append
    lease.start()
    lp.write_json_atomic(str(path), {**lease_doc(os.getpid()), "nonce": "the-reclaimer"})
    deadline = time.monotonic() + 5
    while not lost and time.monotonic() < deadline:
        time.sleep(0.02)
    lease.release()
    assert lost == [lease] and lease.state == "lost"
    state = {"configured": {"torch_xla": True}, "caveats": []}
    lc._stop_writing(lease, state, lc.Session(FakeRecord(), state, ["torch_xla"]))
    assert state["caveats"] == [
        f"cache writer lease lost ({lease.lost_reason}); torch_xla's cache stays writable "
        "in this process (it cannot be made read-only after init)"
    ]
