"""`orch launch` on the local slice: real sshd workers, real jax and torch processes.

Which processes belong to a run is checked independently of orch's own
bookkeeping: on every worker, every process whose environment carries the
run's ORCH_RUN_ID or whose command line names the run's directory.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import orch_executable

pytestmark = [pytest.mark.ssh, pytest.mark.e2e]

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# Prints "pid command" for every process of run argv[1] on this worker.
LIST_RUN = r"""
import os, sys
rid = sys.argv[1].encode()
for p in os.listdir('/proc'):
    if not p.isdigit() or int(p) == os.getpid():
        continue
    try:
        env = open(f'/proc/{p}/environ', 'rb').read().split(b'\0')
        cmd = open(f'/proc/{p}/cmdline', 'rb').read().replace(b'\0', b' ')
        state = open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[0]
    except OSError:
        continue
    if state != 'Z' and (b'ORCH_RUN_ID=' + rid in env or b'/runs/' + rid in cmd):
        print(p, cmd.decode(errors='replace')[:200])
if sys.argv[2:] == ['--stamp']:
    import time
    print('@', time.time())  # when the listing was complete
"""


@pytest.fixture
def runs_dir(tmp_path) -> Path:
    return tmp_path / "runs"


def orch(slice4, runs_dir, *args, fleet=None, **kwargs):
    env = {"ORCH_RUNS_DIR": str(runs_dir), **({"ORCH_FLEET": str(fleet)} if fleet else {})}
    return slice4.orch(*args, env=env, **kwargs)


def run_processes(slice4, run_id: str, workers=None) -> dict[str, list[str]]:
    """Processes of `run_id`, listed on every worker (in parallel, so one round is one SSH round trip)."""
    from concurrent.futures import ThreadPoolExecutor

    def listing(w):
        res = slice4.ssh(w, "python3", "-c", LIST_RUN, run_id, check=True)
        return [line for line in res.stdout.splitlines() if line.strip()]

    workers = list(workers or slice4.workers)
    with ThreadPoolExecutor(len(workers)) as pool:
        return dict(zip(workers, pool.map(listing, workers), strict=True))


def emptied_at(slice4, run_id: str) -> float | None:
    """When (wall clock, as each worker finished its listing) no worker had a process of `run_id`
    left; None while some remain. The local slice's workers share the test's clock."""
    from concurrent.futures import ThreadPoolExecutor

    def listing(w):
        lines = slice4.ssh(w, "python3", "-c", LIST_RUN, run_id, "--stamp", check=True).stdout.splitlines()
        return float(lines[-1].split()[1]), [line for line in lines[:-1] if line.strip()]

    with ThreadPoolExecutor(len(slice4.workers)) as pool:
        listings = list(pool.map(listing, slice4.workers))
    if any(procs for _, procs in listings):
        return None
    return max(stamp for stamp, _ in listings)


def no_processes_left(slice4, run_id: str) -> bool:
    return not any(run_processes(slice4, run_id).values())


def results(stdout: str) -> list[dict]:
    """The RESULT lines the examples print, one per process."""
    found = []
    for line in stdout.splitlines():
        m = re.search(r"\| RESULT (.*)$", line)
        if m:
            found.append(dict(kv.split("=", 1) for kv in m.group(1).split()))
    return found


def run_record(runs_dir: Path, run_id: str) -> dict:
    return json.loads((runs_dir / run_id / "run.json").read_text())


def run_id_from(stderr: str) -> str:
    return re.search(r"orch: run (\S+):", stderr).group(1)


def start_orch(slice4, runs_dir, *args, fleet=None) -> subprocess.Popen:
    import os

    from orchestrator import sandbox

    env = {
        **os.environ,
        "ORCH_FLEET": str(fleet or slice4.fleet_path),
        sandbox.DIR_ENV: str(slice4.dir),
        "ORCH_RUNS_DIR": str(runs_dir),
    }
    return subprocess.Popen(
        [orch_executable(), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )


# Seconds a controller may take, after an interrupt, to tear the gang down (TERM, grace, KILL),
# wait for the exit reports, record the outcome and gather the receipts. Each of those steps
# has its own bound in orch (the stop's SSH timeout is grace + 20 s, the exit reports are
# waited for 10 s, collecting the records 30 s, gathering 120 s per worker); on a loaded
# 2-core machine their sum, not the few seconds they take on a quiet one, is the honest limit.
TEARDOWN_AND_GATHER = 180


def wait_for(condition, what: str, timeout: float = 120.0, interval: float = 0.2):
    """Poll `condition` until it returns something true (and return that); fail naming `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = condition()
        if got:
            return got
        time.sleep(interval)
    raise AssertionError(f"still waiting after {timeout:g}s for {what}")


def read_until(proc: subprocess.Popen, pattern: str, timeout: float = 180) -> list[str]:
    seen = []
    deadline = time.monotonic() + timeout
    for line in proc.stdout:
        seen.append(line)
        if re.search(pattern, line):
            return seen
        if time.monotonic() > deadline:
            break
    raise AssertionError(f"no line matching {pattern!r} in:\n{''.join(seen[-40:])}")


# -- acceptance: the examples ---------------------------------------------------------


def test_jax_example_runs_on_four_workers_and_every_worker_reports_the_same_global_loss(slice4, jax_cpu_lane, runs_dir):
    res = orch(
        slice4,
        runs_dir,
        "launch",
        "--lane",
        "cpu",
        "--env",
        "JAX_NUM_CPU_DEVICES=2",
        "--workdir",
        str(EXAMPLES),
        "--",
        "jax_spmd.py",
        "--steps",
        "8",
        timeout=300,
    )
    found = results(res.stdout)
    assert sorted(int(r["process"]) for r in found) == [0, 1, 2, 3]
    assert {r["processes"] for r in found} == {"4"}
    assert {r["global_devices"] for r in found} == {"8"}  # 4 processes x 2 CPU devices
    assert len({r["loss"] for r in found}) == 1
    run_id = run_id_from(res.stderr)
    rec = run_record(runs_dir, run_id)
    assert rec["state"] == "succeeded"
    assert rec["outcome"]["start_skew"] < 0.5
    worker = json.loads((runs_dir / run_id / "workers" / "slice-w2.json").read_text())["record"]
    assert [s["name"] for s in worker["steps"]] == [
        "policy",
        "import jax",
        "cache-init",
        "wait-release",
        "distributed-init",
        "user-code",
    ]
    assert [s["status"] for s in worker["steps"]][2] == "done"
    assert worker["process_id"] == 2 and worker["num_processes"] == 4
    assert worker["jax_distributed_owner"] == "launcher"
    assert any("called jax.distributed.initialize(); the launcher already did" in n["text"] for n in worker["notes"])
    assert worker["versions"]["jax"] == "0.10.2"
    assert worker["exit"]["code"] == 0
    assert no_processes_left(slice4, run_id)


def test_torch_ddp_example_runs_on_four_workers_over_gloo(slice4, torch_cpu_lane, torch_cpu_fleet, runs_dir):
    res = orch(
        slice4,
        runs_dir,
        "launch",
        "--lane",
        "torch",
        "--workdir",
        str(EXAMPLES),
        "--",
        "torch_ddp.py",
        "--steps",
        "8",
        fleet=torch_cpu_fleet,
        timeout=300,
    )
    found = results(res.stdout)
    assert sorted(int(r["process"]) for r in found) == [0, 1, 2, 3]
    assert {r["processes"] for r in found} == {"4"}
    assert {r["global_devices"] for r in found} == {"4"}
    assert len({r["loss"] for r in found}) == 1
    assert "rank 3: collective check ok (global sum 10)" in res.stdout
    assert no_processes_left(slice4, run_id_from(res.stderr))


def test_a_torchrun_program_that_checks_group_and_role_ranks_runs_unmodified(
    slice4, torch_cpu_lane, torch_cpu_fleet, runs_dir
):
    res = orch(
        slice4,
        runs_dir,
        "launch",
        "--lane",
        "torch",
        "--workdir",
        str(EXAMPLES),
        "--",
        "torchrun_env.py",
        fleet=torch_cpu_fleet,
        timeout=300,
    )
    assert sorted(re.findall(r"torchrun-env ok rank (\d)/4", res.stdout)) == ["0", "1", "2", "3"]
    run_id = run_id_from(res.stderr)
    record = json.loads((runs_dir / run_id / "workers" / "slice-w2.json").read_text())["record"]
    env = record["policy"]["env"]  # the receipt records the contract it ran under
    assert {k: env[k] for k in ("GROUP_RANK", "ROLE_RANK", "ROLE_WORLD_SIZE", "TORCHELASTIC_RUN_ID")} == {
        "GROUP_RANK": "2",
        "ROLE_RANK": "2",
        "ROLE_WORLD_SIZE": "4",
        "TORCHELASTIC_RUN_ID": run_id,
    }


# -- gang semantics ------------------------------------------------------------------


def test_a_worker_exiting_3_takes_the_gang_down_in_seconds_not_at_a_timeout(slice4, jax_cpu_lane, runs_dir):
    proc = start_orch(
        slice4,
        runs_dir,
        "launch",
        "--lane",
        "cpu",
        "--workdir",
        str(EXAMPLES),
        "--",
        "jax_spmd.py",
        "--steps",
        "1000",
        "--step-sleep",
        "0.2",
        "--fail-process",
        "2",
        "--fail-after",
        "3",
        "--fail-code",
        "3",
    )
    try:
        seen = read_until(proc, r"slice-w2 \| process 2: failing on purpose")
        failed_at = time.time()
        run_id = run_id_from("".join(seen))
        # Timed by the listings themselves: a check's own SSH round trips, slow on a loaded
        # machine, must not count as processes still running.
        gone_at = wait_for(lambda: emptied_at(slice4, run_id), "every process of the run to end", 60, interval=0.05)
        gone_after = gone_at - failed_at
        rest = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    assert "slice-w2 (process 2) failed first: exit code 3" in rest
    rec = run_record(runs_dir, run_id)
    assert rec["outcome"]["first_failure"]["worker"] == "slice-w2"
    # How fast is bench/launch.py's figure (about 1 s on 8 workers); here the bound only tells a
    # teardown driven by the failure from one that waits for --lost-after (30 s) or a collective's
    # own timeout, with room for a loaded 2-core machine.
    assert rec["outcome"]["teardown_latency"] < 10.0
    assert gone_after < 10.0
    # Every survivor was ended by the teardown, or ended itself no earlier than the failure
    # (a peer's collective may notice the dead process first and exit on its own).
    first = rec["outcome"]["ends"]["slice-w2"]["ended_at"]
    for w, e in rec["outcome"]["ends"].items():
        if w != "slice-w2":
            assert e["stopped"] or (e["ended_at"] is not None and e["ended_at"] >= first), (w, e)


def test_a_worker_that_goes_silent_is_lost_the_gang_is_torn_down_and_stop_finishes_it_after_resume(
    slice4, jax_cpu_lane, runs_dir
):
    from orchestrator import sandbox

    proc = start_orch(
        slice4,
        runs_dir,
        "launch",
        "--lane",
        "cpu",
        "--lost-after",
        "3",
        "--grace",
        "1",
        "--workdir",
        str(EXAMPLES),
        "--",
        "jax_spmd.py",
        "--steps",
        "1000",
        "--step-sleep",
        "0.2",
    )
    try:
        seen = read_until(proc, r"step 3 loss")
        run_id = run_id_from("".join(seen))
        paused = {str(pid) for pid in sandbox.pause(slice4.dir, 3).pids}  # a hung host: TCP connects, nothing answers
        try:
            read_until(proc, r"slice-w3 lost: ", timeout=60)
            lost_at = time.monotonic()

            def healthy_left() -> list[str]:
                # Workers share one pid namespace: a listing shows the paused worker's processes too.
                return [
                    line
                    for line in run_processes(slice4, run_id, slice4.workers[:1])[slice4.workers[0]]
                    if line.split()[0] not in paused
                ]

            while healthy_left():
                assert time.monotonic() - lost_at < 5.0, healthy_left()
                time.sleep(0.1)
        finally:
            sandbox.resume(slice4.dir, 3)
        rest = proc.communicate(timeout=120)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, rest
    rec = run_record(runs_dir, run_id)
    assert rec["outcome"]["first_failure"]["worker"] == "slice-w3" and rec["outcome"]["first_failure"]["lost"]
    # The paused worker could not be stopped while it was hung; the operator's `orch stop` finishes it.
    orch(slice4, runs_dir, "stop", run_id, timeout=120)
    assert no_processes_left(slice4, run_id)


@pytest.mark.parametrize("sig, said", [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")])
def test_ctrl_c_on_the_controller_leaves_no_process_on_any_worker(slice4, jax_cpu_lane, runs_dir, sig, said):
    proc = start_orch(
        slice4,
        runs_dir,
        "launch",
        "--lane",
        "cpu",
        "--workdir",
        str(EXAMPLES),
        "--",
        "jax_spmd.py",
        "--steps",
        "1000",
        "--step-sleep",
        "0.2",
    )
    try:
        seen = read_until(proc, r"step 3 loss")
        run_id = run_id_from("".join(seen))
        assert any(run_processes(slice4, run_id).values())
        proc.send_signal(sig)
        # After the teardown the controller also records the outcome and gathers every worker's
        # receipts and logs: SSH and SFTP round trips whose time grows with the machine's load.
        # The deadline bounds the whole of that, generously; the teardown itself is checked below.
        rest = proc.communicate(timeout=TEARDOWN_AND_GATHER)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert f"interrupted ({said}) on the controller" in rest
    assert no_processes_left(slice4, run_id)
    teardown = run_record(runs_dir, run_id)["outcome"]["teardown"]
    assert teardown["reason"] == f"{said} on the controller"
    assert not any(w.get("left") or w.get("error") for w in teardown["workers"].values()), teardown


def test_timeout_tears_the_gang_down(slice4, jax_cpu_lane, runs_dir):
    res = orch(
        slice4,
        runs_dir,
        "launch",
        "--lane",
        "cpu",
        "--timeout",
        "4",
        "--grace",
        "1",
        "--workdir",
        str(EXAMPLES),
        "--",
        "jax_spmd.py",
        "--steps",
        "1000",
        "--step-sleep",
        "0.2",
        check=False,
        timeout=180,
    )
    assert res.returncode == 124, res.stderr
    assert "exceeded its timeout of 4s" in res.stderr
    assert no_processes_left(slice4, run_id_from(res.stderr))


# -- preflight ------------------------------------------------------------------------


HOLD_LOCK = "import fcntl, time; f = open('/tmp/libtpu_lockfile', 'a'); fcntl.lockf(f, fcntl.LOCK_EX); time.sleep(600)"


def test_a_foreign_libtpu_lock_blocks_the_launch_and_reclaim_removes_only_orchs_orphans(
    slice4, jax_cpu_lane, runs_dir, tmp_path
):
    sleeper = tmp_path / "code"
    sleeper.mkdir()
    (sleeper / "sleep.py").write_text("import time\nprint('sleeping', flush=True)\ntime.sleep(600)\n")
    # An orphan of an earlier orch run: a detached run whose supervisors are then killed.
    earlier = orch(
        slice4,
        runs_dir,
        "launch",
        "--lane",
        "cpu",
        "--detach",
        "--workdir",
        str(sleeper),
        "--",
        "sleep.py",
        timeout=180,
    ).stdout.strip()
    slice4.ssh(
        "slice-w3",
        "sh",
        "-c",
        f'kill -9 $(python3 -c "import json; '
        f"print(json.load(open('/var/lib/orch/runs/{earlier}/pid'))['supervisor_pid'])\")",
        check=True,
    )
    holder = slice4.ssh(
        "slice-w1", "sh", "-c", f'setsid python3 -c "{HOLD_LOCK}" </dev/null >/dev/null 2>&1 & echo $!', check=True
    ).stdout.strip()
    try:
        wait_for(
            lambda: slice4.ssh("slice-w1", "grep", "-qw", holder, "/proc/locks").returncode == 0,
            f"pid {holder} to hold the lock on slice-w1",
        )
        refused = orch(
            slice4,
            runs_dir,
            "launch",
            "--lane",
            "cpu",
            "--workdir",
            str(EXAMPLES),
            "--",
            "jax_spmd.py",
            check=False,
            timeout=120,
        )
        assert refused.returncode == 1
        assert re.search(
            rf"slice-w1: /tmp/libtpu_lockfile is locked by pid {holder} \(python3 -c import fcntl", refused.stderr
        ), refused.stderr
        assert "not started by orch, so --reclaim leaves it alone" in refused.stderr
        assert f"earlier run {earlier} still has" in refused.stderr
        assert any(run_processes(slice4, earlier).values())

        reclaimed = orch(
            slice4,
            runs_dir,
            "launch",
            "--lane",
            "cpu",
            "--reclaim",
            "--workdir",
            str(EXAMPLES),
            "--",
            "jax_spmd.py",
            check=False,
            timeout=120,
        )
        assert reclaimed.returncode == 1  # still refused: the foreign holder stays
        assert f"slice-w3: ended 1 process(es) of earlier run {earlier}" in reclaimed.stderr
        assert f"is locked by pid {holder}" in reclaimed.stderr
        assert no_processes_left(slice4, earlier)
        assert slice4.ssh("slice-w1", "kill", "-0", holder).returncode == 0
    finally:
        slice4.ssh("slice-w1", "kill", holder)
        orch(slice4, runs_dir, "stop", earlier, "--grace", "1", check=False)
        # The shared slice must not keep the stale lockfile the holder leaves: a later probe warns on it.
        wait_for(lambda: slice4.ssh("slice-w1", "kill", "-0", holder).returncode != 0, f"pid {holder} gone")
        slice4.ssh("slice-w1", "rm", "-f", "/tmp/libtpu_lockfile", check=True)


def test_a_coordinator_port_that_is_taken_refuses_the_launch_before_anything_starts(slice4, jax_cpu_lane, runs_dir):
    import socket

    with socket.socket() as held:  # the workers share this machine's network stack
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        res = orch(
            slice4,
            runs_dir,
            "launch",
            "--lane",
            "cpu",
            "--port",
            str(port),
            "--workdir",
            str(EXAMPLES),
            "--",
            "jax_spmd.py",
            check=False,
            timeout=120,
        )
    assert res.returncode != 0
    assert f"slice-w0: coordinator port {port} is taken" in res.stderr and "choose another with --port" in res.stderr
    [record] = [json.loads(r.read_text()) for r in runs_dir.glob("*/run.json")]
    assert record["state"] == "refused" and "pids" not in record


def test_a_lane_with_two_bundles_active_is_refused_naming_workers_and_bundles(slice4, jax_cpu_lane, runs_dir):
    active = "/var/lib/orch/lanes/cpu/active"
    link = slice4.ssh("slice-w2", "readlink", active, check=True).stdout.strip()  # restored exactly
    target = slice4.ssh("slice-w2", "readlink", "-f", active, check=True).stdout.strip()
    other = "/var/lib/orch/envs/other-jax-cpu"
    slice4.ssh(
        "slice-w2",
        "sh",
        "-c",
        f'mkdir -p {other}/bin && ln -sfn "$(readlink -f {target}/bin/python)" '
        f"{other}/bin/python && ln -sfn {other} {active}",
        check=True,
    )
    try:
        res = orch(slice4, runs_dir, "launch", "--lane", "cpu", "--", "/nonexistent.py", check=False, timeout=120)
    finally:
        slice4.ssh("slice-w2", "sh", "-c", f"ln -sfn {link} {active} && rm -rf {other}", check=True)
    assert res.returncode == 1
    assert (
        f"lane 'cpu' has a mixed stack: slice-w0, slice-w1, slice-w3 run {Path(target).name} ({target}); "
        f"slice-w2 runs other-jax-cpu ({other})"
    ) in res.stderr


# -- detached runs ----------------------------------------------------------------------


def test_a_detached_run_can_be_listed_inspected_followed_and_stopped(slice4, jax_cpu_lane, runs_dir):
    res = orch(
        slice4,
        runs_dir,
        "launch",
        "--lane",
        "cpu",
        "--detach",
        "--name",
        "bg",
        "--workdir",
        str(EXAMPLES),
        "--",
        "jax_spmd.py",
        "--steps",
        "1000",
        "--step-sleep",
        "0.2",
        timeout=180,
    )
    run_id = res.stdout.strip()
    assert re.fullmatch(r"bg-\d{8}-\d{6}-[0-9a-f]{4}", run_id), res.stdout
    try:
        assert run_id in orch(slice4, runs_dir, "runs").stdout
        status = json.loads(orch(slice4, runs_dir, "status", "bg", "--json").stdout)
        assert status["state"] == "running"
        assert {w["state"] for w in status["workers"].values()} == {"running"}

        def logged_step_0() -> str | None:
            out = orch(slice4, runs_dir, "logs", run_id, "--worker", "slice-w1").stdout
            return out if "slice-w1 | process 1 step 0 loss" in out else None

        logs = wait_for(logged_step_0, "step 0 in slice-w1's log")
        assert "slice-w1 | process 1 step 0 loss" in logs
        stopped = orch(slice4, runs_dir, "stop", "bg", "--grace", "1", timeout=60)
        assert "ended 4 process(es) on 4 workers" in stopped.stderr
        assert no_processes_left(slice4, run_id)
        after = json.loads(orch(slice4, runs_dir, "status", run_id, "--json", check=False).stdout)
        assert {w["state"] for w in after["workers"].values()} == {"exited"}
        assert all("stopped by orch" in w["exit"]["reason"] for w in after["workers"].values())
    finally:
        orch(slice4, runs_dir, "stop", run_id, "--grace", "1", check=False)


def test_attach_resumes_the_gang_rule_for_a_detached_run(slice4, jax_cpu_lane, runs_dir):
    run_id = orch(
        slice4,
        runs_dir,
        "launch",
        "--lane",
        "cpu",
        "--detach",
        "--workdir",
        str(EXAMPLES),
        "--",
        "jax_spmd.py",
        "--steps",
        "1000",
        "--step-sleep",
        "0.2",
        "--fail-process",
        "1",
        "--fail-after",
        "25",
        timeout=180,
    ).stdout.strip()
    try:
        res = orch(slice4, runs_dir, "attach", run_id, check=False, timeout=120)
        assert res.returncode == 1, res.stderr
        assert "slice-w1 (process 1) failed first: exit code 3" in res.stderr
        assert "slice-w0 | process 0 step" in res.stdout
        assert no_processes_left(slice4, run_id)
    finally:
        orch(slice4, runs_dir, "stop", run_id, "--grace", "1", check=False)
