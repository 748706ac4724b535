"""The launch plan (pure) and the hostside pieces that run without a worker.

The golden file pins the whole `--dry-run` output for a 4-worker TPU lane;
regenerate it with ORCH_UPDATE_GOLDEN=1 after an intended change and review
the diff.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hostside import launch_proc, launch_sync
from hostside import launcher as hostside_launcher
from orchestrator.cli import main
from orchestrator.errors import LaunchError
from orchestrator.fleet import load_fleet
from orchestrator.launch import (
    LaunchOutcome,
    LaunchPlan,
    WorkerEnd,
    bundle_frontends,
    default_port,
    parse_target,
    plan_launch,
    render_plan,
    with_ports,
)

GOLDEN = Path(__file__).parent / "golden"
RUN_ID = "train-20260101-000000-beef"

FLEET = """\
version: 1
slices:
  v6e-16:
    accelerator_type: v6e-16
    root: /var/lib/orch
    skip_metadata_query: true
    user: tpu-ops
    workers:
      - {index: 0, address: 34.1.0.2, internal_address: 10.128.0.2}
      - {index: 1, address: 34.1.0.3, internal_address: 10.128.0.3}
      - {index: 2, address: 34.1.0.4, internal_address: 10.128.0.4}
      - {index: 3, address: 34.1.0.5, internal_address: 10.128.0.5}
bundles:
  torch-2.9:
    python: "3.11"
    pins: [torch==2.9.0, torch_xla==2.9.0, jax==0.9.0, jaxlib==0.9.0, libtpu==0.0.36]
  jax-cpu:
    python: "3.11"
    pins: [jax==0.10.2, jaxlib==0.10.2]
  torch-cpu:
    python: "3.11"
    pins: [torch==2.13.0+cpu]
runtime_profiles:
  tpu-default:
    env:
      PJRT_DEVICE: TPU
      XLA_NO_SPECIAL_SCALARS: "1"
      XLA_FLAGS: --xla_tpu_enable_async_collective_fusion=true
    forbid: [XLA_USE_BF16, XLA_USE_SPMD]
  cpu:
    env: {JAX_PLATFORMS: cpu}
  claims-rank:
    env: {RANK: "7"}
cache_policies:
  per-host: {mode: per-host}
lanes:
  train:
    workers: all
    bundle: torch-2.9
    runtime: tpu-default
    cache: per-host
    platform: tpu
"""


def fleet_with(tmp_path: Path, lanes: str | None = None):
    text = FLEET
    if lanes is not None:
        text = text[: text.index("lanes:")] + "lanes:\n" + textwrap.indent(textwrap.dedent(lanes), "  ")
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return load_fleet(path)


@pytest.fixture
def fleet(tmp_path):
    return fleet_with(tmp_path)


def test_dry_run_of_a_four_worker_plan_matches_the_golden_file(tmp_path, fleet):
    result = CliRunner().invoke(
        main,
        [
            "--fleet",
            str(fleet.path),
            "launch",
            "--lane",
            "train",
            "--dry-run",
            "--run-id",
            RUN_ID,
            "--timeout",
            "3600",
            "--name",
            "train",
            "--",
            "train.py",
            "--steps",
            "100",
        ],
    )
    assert result.exit_code == 0, result.output
    golden = GOLDEN / "launch_dry_run_4_workers.txt"
    if os.environ.get("ORCH_UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(result.output)
    assert result.output == golden.read_text()


def test_dry_run_as_json_is_the_plan_and_contacts_no_worker(fleet):
    result = CliRunner().invoke(
        main,
        [
            "--fleet",
            str(fleet.path),
            "launch",
            "--lane",
            "train",
            "--dry-run",
            "--json",
            "--run-id",
            RUN_ID,
            "--",
            "-m",
            "pkg.train",
            "--fast",
        ],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["run_id"] == RUN_ID
    assert doc["target"] == {"kind": "module", "path": None, "module": "pkg.train", "args": ["--fast"]}
    assert [p["process_id"] for p in doc["processes"]] == [0, 1, 2, 3]


def test_process_ids_follow_the_lane_order_and_tpu_worker_id_stays_the_slice_index(tmp_path):
    fleet = fleet_with(
        tmp_path,
        lanes="""\
        a: {workers: "0-1", bundle: jax-cpu, runtime: cpu, platform: cpu}
        b: {workers: [3, 2], bundle: jax-cpu, runtime: cpu, platform: cpu}
        """,
    )
    plan = plan_launch(fleet, "b", ["x.py"], run_id=RUN_ID)
    assert [(p.worker, p.process_id) for p in plan.processes] == [("v6e-16-w2", 0), ("v6e-16-w3", 1)]
    assert [p.env["TPU_WORKER_ID"] for p in plan.processes] == ["2", "3"]
    assert [p.env["RANK"] for p in plan.processes] == ["0", "1"]
    assert {p.env["WORLD_SIZE"] for p in plan.processes} == {"2"}
    assert plan.coordinator_address == "10.128.0.4"  # process 0's internal address
    assert {p.env["MASTER_ADDR"] for p in plan.processes} == {"10.128.0.4"}


def test_every_process_gets_torchruns_environment_for_one_process_per_node(tmp_path):
    """As `torchrun --nnodes=N --nproc_per_node=1` sets it (torch.distributed.elastic's agent)."""
    fleet = fleet_with(tmp_path, lanes="a: {workers: [3, 2], bundle: jax-cpu, runtime: cpu, platform: cpu}\n")
    plan = plan_launch(fleet, "a", ["x.py"], run_id=RUN_ID)
    for p in plan.processes:
        rank = str(p.process_id)
        assert {k: p.env[k] for k in ("RANK", "GROUP_RANK", "ROLE_RANK", "LOCAL_RANK")} == {
            "RANK": rank,
            "GROUP_RANK": rank,
            "ROLE_RANK": rank,
            "LOCAL_RANK": "0",
        }
        assert {k: p.env[k] for k in ("WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "LOCAL_WORLD_SIZE")} == {
            "WORLD_SIZE": "2",
            "GROUP_WORLD_SIZE": "2",
            "ROLE_WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "1",
        }
        assert p.env["ROLE_NAME"] == "default" and p.env["TORCHELASTIC_RUN_ID"] == RUN_ID
        assert (p.env["TORCHELASTIC_RESTART_COUNT"], p.env["TORCHELASTIC_MAX_RESTARTS"]) == ("0", "0")
        assert p.env["TORCHELASTIC_USE_AGENT_STORE"] == "False"  # rank 0 creates the store itself
    with pytest.raises(LaunchError, match="GROUP_RANK, which orch launch sets"):
        plan_launch(fleet, "a", ["x.py"], run_id=RUN_ID, extra_env={"GROUP_RANK": "7"})


def test_the_coordinator_port_comes_from_the_run_id_and_master_port_is_the_next_one(fleet):
    plan = plan_launch(fleet, "train", ["x.py"], run_id=RUN_ID)
    assert (
        plan.coordinator_port
        == default_port(RUN_ID)
        == plan_launch(fleet, "train", ["x.py"], run_id=RUN_ID).coordinator_port
    )
    assert plan.coordinator_port % 2 == 0 and 20000 <= plan.coordinator_port < 30000
    assert plan.processes[1].env["ORCH_COORDINATOR"] == f"10.128.0.2:{plan.coordinator_port}"
    assert plan.processes[1].env["MASTER_PORT"] == str(plan.coordinator_port + 1)
    moved = with_ports(plan, 31000)
    assert moved.coordinator == "10.128.0.2:31000"
    assert {p.env["MASTER_PORT"] for p in moved.processes} == {"31001"}
    assert plan_launch(fleet, "train", ["x.py"], run_id=RUN_ID, port=40000).master_port == 40001


def test_each_lane_gets_its_frontends_start_up_contract(tmp_path):
    fleet = fleet_with(
        tmp_path,
        lanes="""\
        jaxcpu: {workers: "0-1", bundle: jax-cpu, runtime: cpu, platform: cpu}
        torch: {workers: "2-3", bundle: torch-cpu, runtime: cpu, platform: cpu}
        """,
    )
    jax_plan = plan_launch(fleet, "jaxcpu", ["x.py"], run_id=RUN_ID)
    assert [c.action for c in jax_plan.contract] == ["jax.distributed.initialize"]
    torch_plan = plan_launch(fleet, "torch", ["x.py"], run_id=RUN_ID)
    assert [c.action for c in torch_plan.contract] == ["torch.distributed.env"]
    assert bundle_frontends(["torch==2.9.0", "torch_xla[tpu]==2.9.0", "jax==0.9.0"]) == ("torch_xla", "jax")
    tpu_plan = plan_launch(fleet_with(tmp_path), "train", ["x.py"], run_id=RUN_ID)
    assert [c.action for c in tpu_plan.contract] == ["torch_xla.use_spmd", "jax.runtime-discovery"]


def test_folklore_variables_and_orch_owned_variables_are_refused_at_plan_time(tmp_path, fleet):
    with pytest.raises(LaunchError, match="XLA_USE_BF16 breaks the current Pallas attention path"):
        plan_launch(fleet, "train", ["x.py"], extra_env={"XLA_USE_BF16": "1"})
    with pytest.raises(LaunchError, match="--env sets MASTER_PORT, which orch launch sets for every process"):
        plan_launch(fleet, "train", ["x.py"], extra_env={"MASTER_PORT": "1"})
    claims = fleet_with(tmp_path, lanes="x: {workers: all, bundle: jax-cpu, runtime: claims-rank, platform: cpu}\n")
    with pytest.raises(LaunchError, match="runtime profile 'claims-rank' sets RANK"):
        plan_launch(claims, "x", ["x.py"])


def test_extra_environment_joins_the_policy_before_orch_variables(fleet):
    plan = plan_launch(fleet, "train", ["x.py"], run_id=RUN_ID, extra_env={"JAX_NUM_CPU_DEVICES": "2"})
    env = plan.processes[3].env
    assert env["JAX_NUM_CPU_DEVICES"] == "2" and env["PJRT_DEVICE"] == "TPU"
    assert env["TPU_SKIP_MDS_QUERY"] == "1" and env["TPU_ACCELERATOR_TYPE"] == "v6e-16"
    assert env["TPU_WORKER_HOSTNAMES"] == "10.128.0.2,10.128.0.3,10.128.0.4,10.128.0.5"
    assert env["ORCH_PROCESS_ID"] == "3" and env["ORCH_NUM_PROCESSES"] == "4" and env["ORCH_RUN_ID"] == RUN_ID


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "nothing to launch"),
        (["-m"], "-m needs a module name"),
        (["-m", "not a module"], "-m needs a module name"),
        (["--steps", "3"], "expected SCRIPT.py or -m MODULE"),
    ],
)
def test_a_launch_without_a_script_or_module_is_refused(argv, message):
    with pytest.raises(LaunchError, match=message):
        parse_target(argv)


def test_a_script_inside_the_workdir_runs_from_the_synced_copy(tmp_path, fleet):
    code = tmp_path / "code"
    code.mkdir()
    plan = plan_launch(fleet, "train", [str(code / "train.py"), "-v"], run_id=RUN_ID, workdir=str(code))
    assert plan.target.path == "train.py"
    assert plan.workdir.remote.startswith("/var/lib/orch/code/code-")
    assert plan.launch_doc(plan.processes[0])["cwd"] == plan.workdir.remote
    with pytest.raises(LaunchError, match="is not inside --workdir"):
        plan_launch(fleet, "train", ["/elsewhere/train.py"], workdir=str(code))


def test_a_plan_survives_the_run_record_round_trip(fleet):
    plan = plan_launch(fleet, "train", ["-m", "pkg.train", "a"], run_id=RUN_ID, timeout=60, name="n")
    assert LaunchPlan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
    assert render_plan(LaunchPlan.from_dict(plan.to_dict())) == render_plan(plan)


def test_the_first_failure_is_the_earliest_non_zero_exit_and_torn_down_workers_are_not_failures(fleet):
    plan = plan_launch(fleet, "train", ["x.py"], run_id=RUN_ID)
    ends = {
        "v6e-16-w2": WorkerEnd("v6e-16-w2", 2, 3, ended_at=100.0),
        "v6e-16-w0": WorkerEnd("v6e-16-w0", 0, None, signal=9, signal_name="SIGKILL", stopped=True, ended_at=100.2),
        "v6e-16-w1": WorkerEnd("v6e-16-w1", 1, 134, ended_at=100.4),
        "v6e-16-w3": WorkerEnd("v6e-16-w3", 3, 0, ended_at=99.0),
    }
    failures = sorted((e for e in ends.values() if e.failed and not e.stopped), key=lambda e: e.ended_at)
    assert [e.worker for e in failures] == ["v6e-16-w2", "v6e-16-w1"]
    assert ends["v6e-16-w0"].how() == "killed by signal 9 (SIGKILL)"
    assert not ends["v6e-16-w3"].failed
    out = LaunchOutcome(
        run_id=RUN_ID,
        status="failed",
        plan=plan,
        ends=ends,
        first_failure=failures[0],
        teardown={"done_at": 100.9},
        released_at={"a": 10.0, "b": 10.004},
    )
    assert out.teardown_latency == pytest.approx(0.9)
    assert out.start_skew == pytest.approx(0.004)
    assert out.exit_code == 1 and not out.ok


# -- hostside pieces, run locally -------------------------------------------------


def test_a_posix_lock_on_the_libtpu_lockfile_is_found_with_its_holders_pid_and_command(tmp_path):
    lockfile = tmp_path / "libtpu_lockfile"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl,sys,time; f=open(sys.argv[1],'a'); "
            "fcntl.lockf(f, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(60)",
            str(lockfile),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        found = launch_proc.lock_holders(str(lockfile))
        assert [h["pid"] for h in found] == [holder.pid]
        assert "fcntl.lockf" in found[0]["command"]
    finally:
        holder.kill()
        holder.wait()
    assert launch_proc.lock_holders(str(lockfile)) == []  # a stale file without a lock holds nothing


def _ignores_term(pid: int) -> bool:
    """The process ignores SIGTERM (its SigIgn mask in /proc/PID/status has it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")), 16)
    return bool(mask & (1 << (signal.SIGTERM - 1)))


def test_terminate_ends_a_whole_process_group_and_escalates_to_kill(tmp_path):
    # A leader that ignores TERM, with a child that ignores it too.
    code = (
        "import signal,subprocess,sys,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "subprocess.Popen([sys.executable,'-c','import signal,time; signal.signal(signal.SIGTERM, "
        "signal.SIG_IGN); time.sleep(60)']); print('up', flush=True); time.sleep(60)"
    )
    leader = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert leader.stdout.readline().strip() == "up"
    info = {
        "pid": leader.pid,
        "pgid": leader.pid,
        "sid": leader.pid,
        "starttime": launch_proc.stat(leader.pid)["starttime"],
    }
    assert launch_proc.verified_pgid(info) == leader.pid
    assert launch_proc.verified_pgid({**info, "starttime": 1}) is None  # a reused pid is not our group

    def both_ignore_term() -> list[int]:
        members = launch_proc.run_members("no-such-run", "w", info)
        return members if len(members) == 2 and all(_ignores_term(p) for p in members) else []

    members = wait_for(both_ignore_term, "the leader and its child to ignore SIGTERM")
    assert leader.pid in members
    report = launch_proc.terminate(
        lambda: launch_proc.run_members("no-such-run", "w", info), grace=0.3, pgid=leader.pid
    )
    leader.wait(5)
    assert leader.returncode == -signal.SIGKILL
    assert sorted(report["kill"]) == sorted(members) and report["left"] == []


def test_workdir_sync_ships_only_changes_removes_extras_and_verifies(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "pkg").mkdir(parents=True)
    (src / "train.py").write_text("print('hi')\n")
    (src / "pkg" / "m.py").write_text("X = 1\n")
    (src / "pkg" / "__pycache__").mkdir()
    (src / "pkg" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"junk")
    wanted = launch_sync.manifest(str(src))
    assert sorted(wanted) == ["pkg/m.py", "train.py"]
    (dst / "old").mkdir(parents=True)
    (dst / "old" / "gone.py").write_text("")
    (dst / "train.py").write_text("print('hi')\n")
    archive = tmp_path / "a.tgz"
    import tarfile

    with tarfile.open(archive, "w:gz") as tar:
        tar.add(src / "pkg" / "m.py", arcname="pkg/m.py")
    result = launch_sync.apply(str(dst), wanted, str(archive))
    assert result == {"ok": True, "changed": ["pkg/m.py"], "deleted": ["old/gone.py"], "verified": 2, "mismatches": []}
    assert not (dst / "old").exists()
    (dst / "train.py").write_text("tampered\n")
    assert launch_sync.apply(str(dst), wanted, None)["mismatches"] == ["train.py"]


def test_the_launcher_refuses_folklore_from_the_worker_environment_before_any_import(tmp_path, monkeypatch):
    monkeypatch.setenv("XLA_USE_SPMD", "1")
    doc = {
        "run_id": "r",
        "lane": "l",
        "worker": "w",
        "index": 0,
        "process_id": 0,
        "num_processes": 1,
        "target": {"kind": "script", "path": "x.py", "module": None, "args": []},
        "env": {"PJRT_DEVICE": "CPU"},
        "forbid": [],
        "run_dir": str(tmp_path),
    }
    rec = hostside_launcher.Record(str(tmp_path / "record.json"), doc)
    monkeypatch.setattr(os, "environ", dict(os.environ))  # keep the test process's environment untouched
    with pytest.raises(
        hostside_launcher.Refusal,
        match=r"XLA_USE_SPMD='1' is set: is not the SPMD switch.*"
        r"worker's environment",
    ):
        hostside_launcher.apply_policy(doc, rec)


def test_the_watcher_sees_ready_even_when_two_record_writes_share_one_timestamp(tmp_path):
    """Kernels with coarse timestamps can give cache-init's and ready's record writes the same
    mtime; a watcher keyed on mtime alone never reports ready and the gang stalls to its timeout."""
    run = tmp_path / "run"
    run.mkdir()
    me = launch_proc.stat(os.getpid())
    launch_proc.write_json_atomic(
        str(run / launch_proc.PID_FILE),
        {
            "pid": os.getpid(),
            "starttime": me["starttime"],
            "pgid": os.getpgid(0),
            "supervisor_pid": os.getpid(),
            "supervisor_starttime": me["starttime"],
            "started_at": time.time(),
        },
    )
    record = run / launch_proc.RECORD_FILE
    launch_proc.write_json_atomic(str(record), {"steps": ["cache-init"]})
    first = os.stat(record).st_mtime_ns
    watcher = subprocess.Popen(
        [sys.executable, "-m", "hostside.launch_watch", str(run), "--until", "started"],
        cwd=Path(__file__).resolve().parent.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # The first heartbeat comes after the watcher's first look at the record.
        seen = read_events_until(watcher, "hb")
        launch_proc.write_json_atomic(str(record), {"steps": ["cache-init", "ready"], "ready_at": time.time()})
        os.utime(record, ns=(first, first))  # ...and the second write lands in the same tick
        seen += read_events_until(watcher, "ready")
        launch_proc.write_json_atomic(str(run / launch_proc.EXIT_FILE), {"exit_code": 0, "signal": None})
        watcher.communicate(timeout=30)
    finally:
        watcher.kill()
    assert "ready" in seen


def read_events_until(watcher: subprocess.Popen, kind: str, timeout: float = 30.0) -> list[str]:
    """The watcher's `@orch` event kinds, read from its stderr up to the first `kind` (heartbeats
    arrive every second, so the deadline is checked at least that often)."""
    kinds: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = watcher.stderr.readline()
        if not line:
            raise AssertionError(f"the watcher ended before a {kind!r} event; saw {kinds}")
        if line.startswith("@orch "):
            kinds.append(json.loads(line[6:])["event"])
            if kinds[-1] == kind:
                return kinds
    raise AssertionError(f"no {kind!r} event from the watcher within {timeout:g}s; saw {kinds}")


def test_a_stop_that_arrives_before_the_start_makes_the_late_start_and_the_release_wait_refuse(tmp_path):
    """Ctrl-C while the gang is starting: a worker whose start comes after the stop must not sit
    alone waiting for a release that never comes."""
    from hostside import launch_ctl, launch_start

    run = tmp_path / "run"
    report = launch_ctl.stop(str(run), grace=1.0, reason="Ctrl-C on the controller")
    assert report["ok"] and "a later start of it will refuse" in report["note"]
    started = launch_start.start({"run_dir": str(run)})
    assert started == {"ok": False, "error": "the run was stopped before it started here (Ctrl-C on the controller)"}
    assert not (run / launch_proc.PID_FILE).exists() and not (run / launch_proc.LAUNCH_FILE).exists()

    rec = hostside_launcher.Record(
        str(run / launch_proc.RECORD_FILE),
        {"run_id": "r", "lane": "cpu", "worker": "w", "index": 0, "process_id": 0, "num_processes": 1, "target": {}},
    )
    with pytest.raises(hostside_launcher.Refusal, match=r"stopped by orch before the release \(Ctrl-C"):
        hostside_launcher.wait_for_release({"run_dir": str(run), "ready_timeout": 5}, rec)


def test_a_torch_xla_lane_gets_its_policy_before_import_and_use_spmd_before_user_code(tmp_path):
    """The real launcher, with a stand-in torch_xla that records what it saw and when."""
    fake = tmp_path / "site" / "torch_xla"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "import os\nEVENTS = [('import', os.environ.get('PJRT_DEVICE'), os.environ.get('XLA_NO_SPECIAL_SCALARS'))]\n"
    )
    (fake / "runtime.py").write_text("import torch_xla\ndef use_spmd():\n    torch_xla.EVENTS.append(('use_spmd',))\n")
    (tmp_path / "site" / "torch").mkdir()
    (tmp_path / "site" / "torch" / "__init__.py").write_text("")
    script = tmp_path / "train.py"
    script.write_text("import torch_xla\ntorch_xla.EVENTS.append(('user-code',))\nprint('EVENTS', torch_xla.EVENTS)\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "launch.json").write_text(
        json.dumps(
            {
                "schema_version": 1,
                "run_id": "r1",
                "name": None,
                "lane": "tpu",
                "bundle": "b",
                "platform": "tpu",
                "worker": "w0",
                "index": 0,
                "process_id": 0,
                "num_processes": 1,
                "coordinator": None,
                "run_dir": str(run),
                "forbid": ["XLA_USE_BF16", "XLA_USE_SPMD"],
                "frontends": ["torch_xla"],
                "env": {"PJRT_DEVICE": "TPU", "XLA_NO_SPECIAL_SCALARS": "1"},
                "contract": [{"frontend": "torch_xla", "action": "torch_xla.use_spmd", "detail": ""}],
                "target": {"kind": "script", "path": str(script), "module": None, "args": []},
                "distributions": [],
            }
        )
    )
    (run / "release").write_text(json.dumps({"release_at": 0}))
    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k not in ("PJRT_DEVICE", "XLA_USE_SPMD", "XLA_USE_BF16")}
    proc = subprocess.run(
        [sys.executable, "-m", "hostside.launcher", str(run / "launch.json")],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": f"{root}:{tmp_path / 'site'}", "ORCH_HOSTSIDE": str(root)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "EVENTS [('import', 'TPU', '1'), ('use_spmd',), ('user-code',)]" in proc.stdout
    steps = [s["name"] for s in json.loads((run / "record.json").read_text())["steps"]]
    assert steps == ["policy", "import torch_xla", "cache-init", "wait-release", "spmd-init", "user-code"]


def wait_for(condition, what: str, timeout: float = 30.0, interval: float = 0.01):
    """Poll `condition` until it returns something true; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = condition()
        if got:
            return got
        time.sleep(interval)
    raise AssertionError(f"still waiting after {timeout:g}s for {what}")


def deliver(sig: int) -> None:
    """Send `sig` to this process's main thread, the one whose handlers run it.

    A process-directed os.kill() may land on any thread, and its Python handler runs only at the
    main thread's next check, however late that comes under load; pthread_kill() targets the main
    thread and runs the handler before it returns."""
    signal.pthread_kill(threading.main_thread().ident, sig)


def test_interrupts_are_dropped_during_a_teardown_and_work_again_after_it():
    from orchestrator.launch import signals

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        signals.interrupt_on_termination()
        dropped = signals.dropped_interrupts()

        def teardown():
            deliver(signal.SIGINT)  # a second Ctrl-C while the gang is being stopped
            deliver(signal.SIGTERM)
            wait_for(lambda: signals.dropped_interrupts() == dropped + 2, "both interrupts to be dropped")
            return "stopped"

        assert signals.shielded(teardown) == "stopped"
        for sig, name in ((signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM"), (signal.SIGHUP, "SIGHUP")):
            with pytest.raises(KeyboardInterrupt) as info:
                deliver(sig)
                wait_for(lambda: False, f"{name} to raise KeyboardInterrupt")
            assert signals.interruption(info.value) == name
    finally:
        for s, h in before.items():
            signal.signal(s, h)


def test_an_interrupt_during_a_deferred_section_is_raised_once_it_is_done():
    """The gang driver carries out a decision (a release) to its end, then sees the Ctrl-C."""
    from orchestrator.launch import signals

    before = signal.getsignal(signal.SIGINT)
    done = []
    try:
        signals.interrupt_on_termination()

        def release():
            deliver(signal.SIGINT)
            done.append("released")

        with pytest.raises(KeyboardInterrupt) as info:
            signals.deferred(release)
        assert done == ["released"] and signals.interruption(info.value) == "Ctrl-C"
        assert signals.deferred(lambda: "quiet") == "quiet"  # nothing left pending
    finally:
        signal.signal(signal.SIGINT, before)


def test_an_interrupt_held_by_a_deferred_section_that_fails_does_not_outlive_it():
    """The section's error ends the work; the next deferred section must not raise a stale Ctrl-C."""
    from orchestrator.launch import signals

    before = signal.getsignal(signal.SIGINT)
    try:
        signals.interrupt_on_termination()

        def failing_release():
            deliver(signal.SIGINT)
            raise RuntimeError("release failed")

        with pytest.raises(RuntimeError, match="release failed"):
            signals.deferred(failing_release)
        assert signals.deferred(lambda: "next") == "next"
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_closed_terminal_cannot_break_the_gangs_reporting():
    from orchestrator.launch import signals

    def closed(*_):
        raise OSError(5, "Input/output error")

    signals.never_raising(closed)("slice-w0", "line")  # no exception: the teardown goes on
    assert signals.never_raising(None) is None


@pytest.mark.parametrize("code", [None, 3])
def test_a_supervisor_that_does_not_start_the_run_in_time_is_told_apart_from_one_that_ended(
    tmp_path, monkeypatch, code
):
    from hostside import launch_start

    class Supervisor:
        def __init__(self, *args, **kwargs):
            pass

        def poll(self):
            return code

    monkeypatch.setattr(launch_start.subprocess, "Popen", Supervisor)
    monkeypatch.setattr(launch_start, "START_WAIT", 0.05)
    started = launch_start.start({"run_dir": str(tmp_path / "run")})
    assert started["ok"] is False
    if code is None:
        assert (
            started["error"] == "the supervisor had not started the run after 0.05s (the worker is overloaded or slow)"
        )
    else:
        assert started["error"] == "the supervisor ended (exit 3) without starting the run"
