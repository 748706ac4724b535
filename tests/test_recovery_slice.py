"""Recovery on the local slice: a gang restarted after a lost worker, and a re-created worker brought back.

Both run on one private 2-worker sandbox with jax-cpu deployed, so the shared
slice's workers and lanes are never killed or replaced. `orch sandbox kill`
then `up` is a host that died and came back; `orch sandbox replace` is what
the cloud does to a preempted TPU VM: same address, a new host key, an empty
disk.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from conftest import orch_executable, start_sandbox
from waiting import wait_for

from orchestrator import sandbox

pytestmark = [pytest.mark.ssh, pytest.mark.e2e]

HELLO = "import jax\nprint('HELLO', jax.process_index(), jax.process_count())\n"
RESTARTABLE = """\
import os, sys, time
attempt = int(os.environ.get("ORCH_RESTART_ATTEMPT", "-1"))
count = os.environ.get("TORCHELASTIC_RESTART_COUNT")
print("ATTEMPT", attempt, f"count={count}", os.environ.get("ORCH_RESTART_PREVIOUS", "-"), flush=True)
if attempt == 0:
    time.sleep(600)
"""
USER_FAILURE = "import sys\nprint('FAILING', flush=True)\nsys.exit(3)\n"
# Prints "pid" for every live process on this worker whose environment names a run starting with argv[1].
RUN_PROCESSES = r"""
import os, sys
rid = b'ORCH_RUN_ID=' + sys.argv[1].encode()
for p in os.listdir('/proc'):
    if p.isdigit() and int(p) != os.getpid():
        try:
            env = open(f'/proc/{p}/environ', 'rb').read().split(b'\0')
            state = open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[0]
        except OSError:
            continue
        if state != 'Z' and any(e.startswith(rid) for e in env):
            print(p)
"""


@pytest.fixture(scope="module")
def pair(slice4, jax_cpu_lane):
    """A private 2-worker slice with lane cpu on jax-cpu (the shared slice's lock, deployed here)."""
    handle = start_sandbox(2)
    try:
        (handle.dir / "locks").mkdir()
        shutil.copy(Path(slice4.dir) / "locks" / "jax-cpu.lock.json", handle.dir / "locks")
        handle.orch("deploy", "--lane", "cpu", timeout=1200)
        yield handle
    finally:
        handle.down()


@pytest.fixture(scope="module")
def code(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("recovery-code")
    for name, text in (("hello.py", HELLO), ("restartable.py", RESTARTABLE), ("user_failure.py", USER_FAILURE)):
        (root / name).write_text(text)
    return root


def run_processes(pair, run_id: str) -> dict[str, list[str]]:
    res = pair.orch("exec", "--", "python3", "-c", RUN_PROCESSES, run_id, check=False)
    out: dict[str, list[str]] = {w: [] for w in pair.workers}
    for line in res.stdout.splitlines():
        worker, _, pid = line.partition(" | ")
        out.setdefault(worker.strip(), []).append(pid)
    return out


def test_a_gang_that_lost_a_worker_is_restarted_and_the_record_shows_both_attempts(pair, code, tmp_path):
    runs_dir = tmp_path / "runs"
    argv = [orch_executable(), "launch", "--lane", "cpu", "--workdir", str(code), "--max-restarts", "2"]
    argv += ["--backoff", "1", "--lost-after", "8", "--", "restartable.py"]
    env = {**os.environ, "ORCH_FLEET": str(pair.fleet_path), "ORCH_SANDBOX_DIR": str(pair.dir)}
    env["ORCH_RUNS_DIR"] = str(runs_dir)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: list[str] = []
    err: list[str] = []
    readers = [
        threading.Thread(target=lambda s=s, sink=sink: sink.extend(s), daemon=True)
        for s, sink in ((proc.stdout, out), (proc.stderr, err))
    ]
    for r in readers:
        r.start()
    try:
        wait_for(lambda: sum("ATTEMPT 0" in line for line in out) == 2, 240, "both workers running attempt 0")
        sandbox.kill(pair.dir, 1)  # the host dies ...
        sandbox.up(pair.dir, 2, None, pair.state.base_address)  # ... and comes back (same key, same disk)
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
        for r in readers:
            r.join(timeout=10)
    stderr = "".join(err)
    assert proc.returncode == 0, stderr
    assert "restarting in 1s: transport is restartable" in stderr
    again = [line for line in out if "ATTEMPT 1" in line]
    assert len(again) == 2 and all("count=1 transport: slice-w1 lost" in line for line in again), out
    first = re.search(r"orch: run (\S+):", stderr).group(1)
    attempts = json.loads((runs_dir / first / "run.json").read_text())["attempts"]
    assert [(a["attempt"], a["run_id"], a["status"]) for a in attempts] == [
        (1, first, "failed"),
        (2, f"{first}.a2", "succeeded"),
    ]
    assert attempts[0]["cause"]["layer"] == "transport" and attempts[0]["cause"]["restart"] is True
    assert (runs_dir / f"{first}.a2" / "slice-w0" / "record.json").exists()  # each attempt has its receipts
    status = pair.orch("status", first, env={"ORCH_RUNS_DIR": str(runs_dir)}, check=False)
    assert f"attempt 2  {first}.a2  succeeded" in status.stdout
    assert run_processes(pair, first) == {w: [] for w in pair.workers}  # no orphan of either attempt


def test_a_programs_own_failure_is_not_restarted_and_says_why(pair, code, tmp_path):
    res = pair.orch(
        "launch",
        "--lane",
        "cpu",
        "--workdir",
        str(code),
        "--max-restarts",
        "2",
        "--backoff",
        "0",
        "--",
        "user_failure.py",
        env={"ORCH_RUNS_DIR": str(tmp_path)},
        check=False,
        timeout=300,
    )
    assert res.returncode != 0
    assert sum("FAILING" in line for line in res.stdout.splitlines()) == 2  # one attempt only
    assert "not restarted: a user-code failure is not restarted (--restart-on: " in res.stderr
    assert "restarting" not in res.stderr


def test_a_replaced_worker_is_refused_until_trusted_then_deploy_sends_it_only_what_it_lacks(pair, code, tmp_path):
    env = {"ORCH_RUNS_DIR": str(tmp_path / "runs")}
    launch = ("launch", "--lane", "cpu", "--workdir", str(code), "--", "hello.py")

    replaced = pair.orch("sandbox", "replace", "1")
    assert "slice-w1 replaced: new host key" in replaced.stdout

    refused = pair.orch(*launch, env=env, check=False, timeout=300)
    assert refused.returncode != 0
    assert "slice-w1" in refused.stderr and "HOST KEY CHANGED" in refused.stderr
    assert "orch fleet trust slice-w1" in refused.stderr
    assert "HELLO" not in refused.stdout

    unasked = pair.orch("fleet", "trust", "1", input="n\n", check=False)
    assert unasked.returncode != 0 and "nothing recorded" in unasked.stderr
    assert "CHANGED" in unasked.stdout
    wrong = pair.orch("fleet", "trust", "1", "--fingerprint", "SHA256:notTheOneOffered", check=False)
    assert wrong.returncode != 0 and "refusing to record" in wrong.stderr
    new_key = pair.orch("fleet", "trust", "1", "--yes")
    assert "recorded 1 key(s)" in new_key.stderr
    lines = (pair.dir / "known_hosts").read_text().splitlines()
    assert len(lines) == 2 and sum(line.startswith(pair.state.workers[1].address + " ") for line in lines) == 1

    repaired = pair.orch("deploy", "--lane", "cpu", timeout=1200)
    assert "slice-w0: unchanged" in repaired.stderr + repaired.stdout
    assert "slice-w1: installed" in repaired.stderr + repaired.stdout

    ran = pair.orch(*launch, env=env, timeout=300)
    assert sorted(line.split("| ", 1)[1] for line in ran.stdout.splitlines() if "HELLO" in line) == [
        "HELLO 0 2",
        "HELLO 1 2",
    ]
