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
        for line in proc.stdout:  # type: ignore[union-attr]
            if "preflight ok" in line:
                break
        # Worker 3 hangs: the gang never gets to its release, the others' launchers wait for it.
        paused = {str(pid) for pid in sandbox.pause(slice4.dir, 3).pids}
        run_id = wait_for(lambda: next(iter(os.listdir(runs_dir)), None), 60, "the run's record")
        ready = f"/var/lib/orch/runs/{run_id}/ready"
        wait_for(
            lambda: all(slice4.ssh(w, "test", "-e", ready).returncode == 0 for w in slice4.workers[:3]),
            180,
            "workers 0-2 to be ready and wait for the release",
        )
        proc.kill()
        proc.communicate()
        killed = time.monotonic()
        wait_for(lambda: not run_processes(slice4, run_id, paused), BOUND, "every waiting launcher to end")
        took = time.monotonic() - killed
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
