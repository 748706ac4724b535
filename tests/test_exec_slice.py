"""`orch exec` and the SSH transport against real sshd workers of the local slice."""

from __future__ import annotations

import json
import random
import time

import pytest
from waiting import wait_for

from orchestrator import sandbox
from orchestrator.fleet import load_fleet
from orchestrator.remote import job_document, run_hostside
from orchestrator.transport import for_fleet

pytestmark = pytest.mark.ssh


def test_exec_runs_on_every_worker_and_prefixes_each_line_with_the_worker(slice4):
    out = slice4.orch("exec", "--", "hostname").stdout
    lines = sorted(out.splitlines())
    assert lines == sorted(f"{w} | {w}" for w in slice4.workers)


def test_exec_passes_arguments_literally_with_no_shell_injection(slice4):
    arg = 'a;b $(x) "c"'
    out = slice4.orch("exec", "--", "echo", arg).stdout
    for w in slice4.workers:
        assert f"{w} | {arg}" in out.splitlines()


def test_exec_reports_every_host_and_exits_non_zero_when_one_fails(slice4):
    # worker 2 fails, the others succeed; nobody is skipped
    proc = slice4.orch(
        "exec", "--", "sh", "-c", 'test "$(hostname)" != slice-w2 || { echo boom >&2; exit 3; }', check=False
    )
    assert proc.returncode == 1
    assert "3/4 hosts ok" in proc.stderr
    assert "FAILED slice-w2: exit 3: boom" in proc.stderr


def test_exec_json_has_one_result_per_host(slice4):
    proc = slice4.orch("exec", "--json", "--workers", "slice-w0,slice-w3", "--", "uname", "-n")
    doc = json.loads(proc.stdout)
    assert doc["schema_version"] == 1
    assert [(r["host"], r["ok"], r["exit_code"], r["stdout_tail"]) for r in doc["results"]] == [
        ("slice-w0", True, 0, "slice-w0"),
        ("slice-w3", True, 0, "slice-w3"),
    ]


def test_a_timed_out_command_is_reported_only_once_it_is_ended_on_the_worker(slice4):
    # A duration no other test (or parallel session: workers share a pid namespace) sleeps for.
    duration = f"{30 + random.random():.6f}"
    proc = slice4.orch("exec", "--timeout", "1", "--workers", "1", "--", "sleep", duration, check=False)
    assert proc.returncode == 1
    [failure] = [line for line in proc.stderr.splitlines() if "FAILED slice-w1" in line]
    assert failure.startswith("  FAILED slice-w1: timed out after 1s; "), failure

    def left() -> str:
        return slice4.ssh(1, "pgrep", "-f", f"^sleep {duration}$", check=False).stdout.strip()

    if "still being ended" in failure:
        # The worker did not confirm in time: the report says so, and the command does end.
        wait_for(lambda: left() == "", timeout=30, what=f"the remote `sleep {duration}` to be ended")
    else:
        # The report promised it: the command is gone by the time it was printed.
        assert "; ended on the worker" in failure
        assert left() == ""


def test_a_command_that_ignores_term_is_killed_on_the_worker_before_the_timeout_is_reported(slice4):
    # The remote `timeout` would KILL it only 3 s later: the client, giving up first, ends it itself.
    duration = f"{30 + random.random():.6f}"
    script = f'trap "" TERM; sleep {duration}; :'
    proc = slice4.orch("exec", "--timeout", "1", "--workers", "2", "--", "sh", "-c", script, check=False)
    assert proc.returncode == 1
    [failure] = [line for line in proc.stderr.splitlines() if "FAILED slice-w2" in line]
    assert failure.startswith("  FAILED slice-w2: timed out after 1s; "), failure

    def left() -> str:
        # the wrapper, the shell and its sleep (not the remote shell running this pgrep)
        pattern = f"^(timeout|sh -c trap|sleep) .*{duration}"
        return slice4.ssh(2, "pgrep", "-af", pattern, check=False).stdout.strip()

    if "still being ended" in failure:
        wait_for(lambda: left() == "", timeout=30, what=f"the remote `sleep {duration}` to be ended")
    else:
        assert "; ended on the worker" in failure
        assert left() == ""


def test_a_command_that_exits_124_itself_reports_exit_124_not_a_timeout(slice4):
    proc = slice4.orch("exec", "--json", "--workers", "0", "--", "sh", "-c", "exit 124", check=False)
    assert proc.returncode == 1
    [result] = json.loads(proc.stdout)["results"]
    assert (result["exit_code"], result["error"], result["error_kind"]) == (124, None, None)
    proc = slice4.orch("exec", "--workers", "0", "--", "sh", "-c", "exit 124", check=False)
    assert "FAILED slice-w0: exit 124" in proc.stderr and "timed out" not in proc.stderr


def test_a_paused_worker_times_out_and_the_others_succeed(make_sandbox):
    sb = make_sandbox(workers=3)
    sandbox.pause(sb.dir, 1)
    try:
        start = time.monotonic()
        proc = sb.orch("--connect-timeout", "2", "exec", "--timeout", "3", "--", "hostname", check=False)
        elapsed = time.monotonic() - start
    finally:
        sandbox.resume(sb.dir, 1)
    assert proc.returncode == 1
    assert "2/3 hosts ok" in proc.stderr
    assert "FAILED slice-w1: no SSH banner from" in proc.stderr and "within 2s" in proc.stderr
    assert "slice-w0 | slice-w0" in proc.stdout and "slice-w2 | slice-w2" in proc.stdout
    assert elapsed < 6, elapsed


def test_a_worker_paused_mid_command_is_reported_timed_out(make_sandbox):
    sb = make_sandbox(workers=2)
    fleet = load_fleet(sb.fleet_path)
    with for_fleet(fleet, fleet.workers) as t:
        t.run(["true"])  # connections are up: the pause hits a running command
        import threading

        pausing = threading.Timer(0.5, sandbox.pause, (sb.dir, 1))
        pausing.start()
        try:
            start = time.monotonic()
            # The command outlasts the pause by seconds and the timeout outlasts the command by
            # seconds, so a loaded machine moves neither past the other.
            results = t.run(["sleep", "4"], timeout=8)
            elapsed = time.monotonic() - start
        finally:
            pausing.join()  # the pause has happened: only now can it be undone
            sandbox.resume(sb.dir, 1)
    assert results["slice-w0"].ok, results["slice-w0"]
    assert results["slice-w1"].error_kind == "timeout", results["slice-w1"]
    # Reported by the deadline, not at some later channel timeout (the sandbox's connect timeout is 5 s).
    assert elapsed < 8 + 4, elapsed


def test_a_changed_host_key_is_refused_with_the_fix_and_others_still_run(make_sandbox):
    sb = make_sandbox(workers=2)
    sandbox.regenerate_host_key(sb.dir, 1)
    proc = sb.orch("exec", "--", "hostname", check=False)
    assert proc.returncode == 1
    assert "slice-w0 | slice-w0" in proc.stdout
    failure = [line for line in proc.stderr.splitlines() if "FAILED slice-w1" in line]
    assert failure, proc.stderr
    address = sb.address(1)
    assert f"HOST KEY CHANGED for {address}" in failure[0]
    assert f"ssh-keygen -f {sb.dir / 'known_hosts'} -R {address}" in failure[0]


def test_an_unknown_host_key_is_refused_strictly_and_recorded_only_with_accept_new(make_sandbox):
    sb = make_sandbox(workers=2)
    known = sb.dir / "known_hosts"
    address = sb.address(1)
    kept = [line for line in known.read_text().splitlines() if not line.startswith(address + " ")]
    known.write_text("\n".join(kept) + "\n")
    proc = sb.orch("exec", "--", "true", check=False)
    assert proc.returncode == 1
    assert f"host key for {address} is not in {known}" in proc.stderr
    assert f"ssh-keyscan -p 22 {address} >> {known}" in proc.stderr
    assert address not in known.read_text()  # strict mode never writes

    proc = sb.orch("--host-key-policy", "accept-new", "exec", "--", "true")
    assert f"recorded new host key for slice-w1 ({address})" in proc.stderr
    assert f"{address} ssh-ed25519 {sandbox.host_key(sb.dir, 1).split()[1]}" in known.read_text()
    sb.orch("exec", "--", "true")  # and strict mode now accepts it


def test_ssh_config_aliases_are_honoured(slice4, tmp_path):
    config = slice4.dir / "ssh_config_alias"
    config.write_text(
        f"Host w-alias\n  HostName {slice4.address(0)}\n  User root\n  IdentityFile {slice4.dir / 'id_ed25519'}\n"
    )
    path = slice4.alias_fleet(config, 0, "w-alias", slice4.dir / "fleet-alias.yaml")
    out = slice4.orch("--fleet", path, "exec", "--", "hostname").stdout
    assert out.strip() == "slice-w0 | slice-w0"


def test_hostside_is_shipped_once_and_jobs_answer_with_json(slice4):
    fleet = slice4.fleet
    with for_fleet(fleet, fleet.workers) as t:
        first = t.map(lambda w: run_hostside(t, w, "facts", [w.root]))
        again = t.map(lambda w: run_hostside(t, w, "facts", [w.root]))
    for name, res in {**first, **again}.items():
        doc = job_document(res)
        assert doc["hostname"] == name
        assert doc["python_executable"] == "/usr/bin/python3"
