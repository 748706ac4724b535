"""The controller lease at launch: launchers waiting for their release end themselves when the
controller that started them is SIGKILLed, within the documented bound (docs/reliability.md)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import orch_executable
from waiting import wait_for

from hostside.lease import CONTROLLER_LEASE_TTL
from orchestrator import sandbox

pytestmark = [pytest.mark.ssh, pytest.mark.e2e]

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
BOUND = 30.0  # docs/reliability.md
assert CONTROLLER_LEASE_TTL < BOUND

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
"""


def recorded_state(runs_dir: Path, run_id: str) -> str | None:
    try:
        return json.loads((runs_dir / run_id / "run.json").read_text()).get("state")
    except (OSError, ValueError):
        return None  # not written yet, or being replaced


def run_processes(slice4, run_id: str, skip: set[str]) -> list[str]:
    """Processes of `run_id` on the slice (one pid namespace: one listing sees every worker's), but `skip`."""
    out = slice4.ssh(0, "python3", "-c", LIST_RUN, run_id, check=True).stdout
    return [line for line in out.splitlines() if line.strip() and line.split()[0] not in skip]


def test_a_controller_killed_before_the_release_leaves_no_launcher_waiting_beyond_the_bound(
    slice4, jax_cpu_lane, tmp_path
):
    runs_dir = tmp_path / "runs"
    env = {
        **os.environ,
        "ORCH_FLEET": str(slice4.fleet_path),
        sandbox.DIR_ENV: str(slice4.dir),
        "ORCH_RUNS_DIR": str(runs_dir),
    }
    argv = [orch_executable(), "launch", "--lane", "cpu", "--workdir", str(EXAMPLES), "--", "jax_spmd.py"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    paused: set[str] = set()
    try:
        run_id = wait_for(lambda: next(iter(os.listdir(runs_dir)), None), 300, "the run's record")
        # Once preflight passed on every worker, worker 3 hangs as the controller starts the gang: its
        # launcher never gets to be ready (paused before its start, or while it imports its frontends),
        # so the gang is never released and the others' launchers wait for it. Pausing it later, once
        # every launcher had started, raced the release: four launchers can be ready before a loaded
        # controller has written that they started.
        wait_for(lambda: recorded_state(runs_dir, run_id) == "starting", 300, "preflight to pass on every worker")
        paused = {str(pid) for pid in sandbox.pause(slice4.dir, 3).pids}
        ready = f"/var/lib/orch/runs/{run_id}/ready"
        wait_for(
            lambda: all(slice4.ssh(w, "test", "-e", ready).returncode == 0 for w in slice4.workers[:3]),
            180,
            "workers 0-2 to be ready and wait for the release",
        )
        proc.kill()
        proc.communicate()
        killed = time.monotonic()
        left: list[str] = []

        def none_left() -> bool:
            left[:] = run_processes(slice4, run_id, paused)
            return not left

        try:
            wait_for(none_left, BOUND, "every waiting launcher to end")
        except AssertionError as exc:
            after = time.monotonic() - killed
            raise AssertionError(f"{exc}; still running {after:.1f}s after the kill: {left}") from exc
        took = time.monotonic() - killed
        print(f"every waiting launcher ended {took:.1f}s after the controller was killed")
        assert took <= BOUND
    finally:
        if proc.poll() is None:
            proc.kill()
        if paused:
            sandbox.resume(slice4.dir, 3)
    record = json.loads(slice4.ssh(0, "cat", f"/var/lib/orch/runs/{run_id}/record.json", check=True).stdout)
    assert "the controller stopped renewing its lease" in json.dumps(record), record
    # The paused worker, resumed, finds no controller either: nothing of the run is left anywhere.
    wait_for(lambda: not run_processes(slice4, run_id, set()), 2 * BOUND + 60, "the resumed worker's processes to end")
    # `orch runs` and `orch status` agree: the workers say how the run ended, and the record follows them.
    assert_runs_and_status_agree(env, run_id, "failed", None)


def orch_json(env: dict[str, str], *args: str) -> dict:
    res = subprocess.run([orch_executable(), *args, "--json"], env=env, capture_output=True, text=True, timeout=180)
    return json.loads(res.stdout)


def assert_runs_and_status_agree(env: dict[str, str], run_id: str, state: str, why: str | None) -> None:
    """Before `orch status`, `orch runs` flags the run's controller as gone; `orch status` says what the workers
    say (`state`, each worker's exit naming `why` if given), and from then on `orch runs` says the same."""
    (listed,) = [r for r in orch_json(env, "runs")["runs"] if r["run_id"] == run_id]
    assert "is gone" in listed.get("controller_gone", ""), listed
    status = orch_json(env, "status", run_id)
    assert status["state"] == state and "is gone" in status["controller_gone"], status
    why = why or ""
    assert all(why in (w.get("exit") or {}).get("reason", "") for w in status["workers"].values()), status
    (listed,) = [r for r in orch_json(env, "runs")["runs"] if r["run_id"] == run_id]
    assert listed["state"] == state and "controller_gone" not in listed, listed
    assert listed["ended_by"] == "controller gone" and why in listed["outcome"]["message"], listed


def test_an_attached_run_ends_within_the_bound_when_its_controller_is_killed_and_a_detached_one_does_not(
    slice4, jax_cpu_lane, tmp_path
):
    code = tmp_path / "code"
    code.mkdir()
    (code / "sleep.py").write_text("import time\nprint('sleeping', flush=True)\ntime.sleep(900)\n")
    runs_dir = tmp_path / "runs"
    env = {
        **os.environ,
        "ORCH_FLEET": str(slice4.fleet_path),
        sandbox.DIR_ENV: str(slice4.dir),
        "ORCH_RUNS_DIR": str(runs_dir),
    }
    launch = [orch_executable(), "launch", "--lane", "cpu", "--workdir", str(code)]
    detached = subprocess.run(
        [*launch, "--detach", "--name", "bg", "--", "sleep.py"], env=env, capture_output=True, text=True, timeout=300
    )
    assert detached.returncode == 0, detached.stderr
    bg = detached.stdout.strip()
    proc = subprocess.Popen(
        [*launch, "--name", "fg", "--", "sleep.py"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        sleeping = 0
        for line in proc.stdout:  # type: ignore[union-attr]
            sleeping += "sleeping" in line
            if sleeping == len(slice4.workers):
                break  # released: every worker's process runs
        fg = next(r["run_id"] for r in orch_json(env, "runs")["runs"] if r.get("name") == "fg")
        proc.kill()
        proc.communicate()
        killed = time.monotonic()
        wait_for(lambda: not run_processes(slice4, fg, set()), BOUND, "every process of the attached run to end")
        assert time.monotonic() - killed <= BOUND
        # The detached run, watched by no controller for as long, runs on.
        assert len(run_processes(slice4, bg, set())) >= len(slice4.workers)
        assert orch_json(env, "status", bg)["state"] == "running"
    finally:
        if proc.poll() is None:
            proc.kill()
        subprocess.run([orch_executable(), "stop", bg, "--grace", "1"], env=env, capture_output=True, timeout=120)
    assert_runs_and_status_agree(env, fg, "stopped", "controller gone")
