"""Warm connections on the local slice: a holder keeps each fleet's SSH connections open for the
next command, only for this user, per fleet identity, reconnecting once, and goes away when idle
or stopped. Every test has its own holder directory, and stops its holders when it ends."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from waiting import wait_for

from orchestrator import connections as wire
from orchestrator import sandbox

pytestmark = pytest.mark.ssh


class Warm:
    """Environment for `orch` with warm connections on, in a private holder directory."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="orch-warm-")) / "h"  # short: a socket path has ~100 bytes
        self.env = {wire.PERSIST_ENV: "", wire.DIR_ENV: str(self.dir)}

    def holders(self) -> list[dict]:
        return wire.holders(self.dir) if self.dir.exists() else []

    def pids(self) -> list[int]:
        out = subprocess.run(
            ["pgrep", "-f", f"orchestrator.transport.persist .*--dir {self.dir} "], capture_output=True
        )
        return [int(p) for p in out.stdout.split()]

    def stop(self) -> None:
        if self.dir.exists():
            wire.stop_holders(self.dir)
        for pid in self.pids():  # one that did not answer: never leave it behind
            os.kill(pid, 9)
        wait_for(lambda: not self.pids(), 30, "every holder of the test gone")
        shutil.rmtree(self.dir.parent, ignore_errors=True)


@pytest.fixture
def warm():
    w = Warm()
    try:
        yield w
    finally:
        w.stop()


def connections(handle, warm) -> list[dict]:
    doc = json.loads(handle.orch("connections", "--json", env=warm.env).stdout)
    assert doc["schema_version"] == 1
    return doc["holders"]


def test_the_second_command_reuses_the_connections_the_first_one_opened(slice4, warm):
    first = slice4.orch("exec", "--", "hostname", env=warm.env)
    assert sorted(first.stdout.splitlines()) == sorted(f"{w} | {w}" for w in slice4.workers)
    slice4.orch("exec", "--json", "--", "true", env=warm.env)
    slice4.orch("exec", "--workers", "slice-w1", "--", "true", env=warm.env)
    (holder,) = connections(slice4, warm)
    assert holder["fleet"] == str(slice4.fleet_path.resolve())
    assert holder["held"] == sorted(slice4.workers)
    assert holder["connects"] == {w: 1 for w in slice4.workers}, "a later command opened its own connection"
    assert holder["requests"] == 3 and holder["refused"] == 0
    assert 0 < holder["idle_left"] <= 600
    assert holder["pid"] in warm.pids()
    mode = os.stat(holder["socket"]).st_mode
    assert mode & 0o777 == 0o600 and warm.dir.stat().st_mode & 0o777 == 0o700
    human = slice4.orch("connections", env=warm.env).stdout
    assert f"pid {holder['pid']}" in human and "4/4 workers held" in human


def test_the_transport_api_runs_puts_gets_and_streams_stdin_through_the_holder(slice4, warm, tmp_path, monkeypatch):
    from orchestrator.transport import for_fleet
    from orchestrator.transport.warm import WarmTransport

    for k, v in warm.env.items():
        monkeypatch.setenv(k, v)
    src = tmp_path / "src.txt"
    src.write_text("by path\n")
    lines: list[tuple[str, str, str]] = []
    with for_fleet(slice4.fleet, slice4.fleet.workers) as t:
        assert isinstance(t, WarmTransport)
        ran = t.run(["sh", "-c", "cat; echo err >&2; exit 3"], stdin="doc\n", on_line=lambda *a: lines.append(a))
        assert {r.exit_code for r in ran.values()} == {3} and ran["slice-w0"].stdout == "doc\n"
        assert ("slice-w2", "stderr", "err") in lines and ("slice-w2", "stdout", "doc") in lines
        assert all(t.put(src, "/tmp/warm-by-path").values())
        assert all(r.ok for r in t.put(io.BytesIO(b"by object\n"), "/tmp/warm-by-object", ["slice-w1"]).values())
        got = t.get("/tmp/warm-by-object", lambda w: tmp_path / w.name / "copy", ["slice-w1"])
        assert got["slice-w1"].ok and (tmp_path / "slice-w1" / "copy").read_text() == "by object\n"
        assert t.run_one("slice-w3", ["cat", "/tmp/warm-by-path"]).stdout == "by path\n"

        class Chunks:
            parts = ["a\n", "b\n", ""]

            def read(self, n: int) -> str:
                return self.parts.pop(0)

        streamed = t.run_one("slice-w0", ["cat"], stdin=Chunks())
        assert streamed.ok and streamed.stdout == "a\nb\n"
        slow = t.run_one("slice-w0", ["sleep", "5"], timeout=0.5, end_on_timeout=True)
        assert slow.error_kind == "timeout" and "timed out after 0.5s" in (slow.error or "")
        missing = t.get_one("slice-w0", "/no/such/file", tmp_path / "x")
        assert missing.error_kind == "remote"
    (holder,) = warm.holders()
    assert holder["connects"] == {w: 1 for w in slice4.workers}


def test_run_each_sends_one_request_per_distinct_command_and_reports_each_worker_as_it_answers(
    slice4, warm, monkeypatch
):
    import queue

    from orchestrator.transport import for_fleet

    for k, v in warm.env.items():
        monkeypatch.setenv(k, v)
    heard: queue.Queue = queue.Queue()
    with for_fleet(slice4.fleet, slice4.fleet.workers) as t:
        t.run("true")  # the holder and its connections up
        before = warm.holders()[0]["requests"]
        quick = ["sh", "-c", "hostname"]
        # the sandbox's workers share this machine's processes: the hang is a sleep no other process runs,
        # and only it is ended below (a bare `pkill sleep` would end every sleep on the machine)
        hang = ["sleep", "30.25"]
        commands = {w: quick for w in slice4.workers if w != "slice-w3"} | {"slice-w3": hang}
        t.run_each(commands, timeout=60, on_result=heard.put)  # returns at once
        firsts = [heard.get(timeout=30) for _ in range(3)]  # the hung worker holds back no other
        assert {r.host: r.stdout.strip() for r in firsts} == {w: w for w in commands if w != "slice-w3"}
        assert heard.empty()
        assert warm.holders()[0]["requests"] == before + 2, "one request per distinct command"
        t.run_one("slice-w3", ["pkill", "-f", "-x", " ".join(hang)])
        assert heard.get(timeout=30).host == "slice-w3"


def test_another_user_cannot_reach_the_holder_and_is_refused_when_the_files_let_it(slice4, warm):
    slice4.orch("exec", "--", "true", env=warm.env)
    (holder,) = connections(slice4, warm)
    probe = (
        "import socket, struct, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        "    s.connect(sys.argv[1])\n"
        "except OSError as e:\n"
        "    print('cannot connect:', type(e).__name__); sys.exit(0)\n"
        "n = struct.unpack('>I', s.recv(4))[0]\n"
        "print(s.recv(n).decode())\n"
    )
    as_nobody = ["/usr/bin/python3", "-c", probe, holder["socket"]]
    # The directory (0700) and the socket (0600) keep another user out...
    out = subprocess.run(as_nobody, user="nobody", capture_output=True, text=True, timeout=30, cwd="/")
    assert out.stdout.strip() == "cannot connect: PermissionError", out
    # ...and were they opened up, the holder itself refuses a peer of another uid (SO_PEERCRED).
    os.chmod(warm.dir.parent, 0o711)
    os.chmod(warm.dir, 0o711)
    os.chmod(holder["socket"], 0o666)
    try:
        out = subprocess.run(as_nobody, user="nobody", capture_output=True, text=True, timeout=30, cwd="/")
    finally:
        os.chmod(holder["socket"], 0o600)
        os.chmod(warm.dir, 0o700)
        os.chmod(warm.dir.parent, 0o700)
    reply = json.loads(out.stdout)
    assert reply["ok"] is False and "is not this holder's user" in reply["error"], out
    (holder,) = connections(slice4, warm)
    assert holder["refused"] == 1 and holder["requests"] == 1


def test_a_changed_fleet_gets_a_holder_of_its_own(slice4, warm, tmp_path):
    fleet = tmp_path / "fleet.yaml"
    shutil.copy(slice4.fleet_path, fleet)
    text = fleet.read_text().replace("known_hosts: known_hosts", f"known_hosts: {slice4.dir / 'known_hosts'}")
    text = text.replace("identity_file: id_ed25519", f"identity_file: {slice4.dir / 'id_ed25519'}")
    fleet.write_text(text)
    env = {**warm.env, "ORCH_FLEET": str(fleet)}
    slice4.orch("exec", "--", "true", env=env)
    slice4.orch("exec", "--", "true", env=env)
    assert len(warm.holders()) == 1
    fleet.write_text(text + "# changed\n")
    slice4.orch("exec", "--", "true", env=env)
    slice4.orch("--host-key-policy", "accept-new", "exec", "--", "true", env=env)
    holders = warm.holders()
    assert len(holders) == 3 and len({h["key"] for h in holders}) == 3
    assert sorted(h["host_key_policy"] for h in holders) == ["accept-new", "strict", "strict"]


def test_a_lost_connection_is_reconnected_and_a_dead_worker_is_reported_by_the_transport(make_sandbox, warm):
    s = make_sandbox(2)
    s.orch("exec", "--", "true", env=warm.env)
    # End the sshd session that serves the holder's connection to worker 0 (not the listener).
    listener = s.state.worker(0).pid
    sessions = subprocess.run(["pgrep", "-P", str(listener)], capture_output=True, text=True).stdout.split()
    assert sessions, "the holder's session on worker 0"
    for pid in sessions:
        os.kill(int(pid), 9)
    again = s.orch("exec", "--", "hostname", env=warm.env)
    assert "slice-w0 | slice-w0" in again.stdout
    (holder,) = warm.holders()
    assert holder["connects"]["slice-w0"] == 2 and holder["connects"]["slice-w1"] == 1
    sandbox.kill(s.dir, 1)
    proc = s.orch("exec", "--json", "--", "true", env=warm.env, check=False)
    assert proc.returncode == 1
    results = {r["host"]: r for r in json.loads(proc.stdout)["results"]}
    assert results["slice-w0"]["ok"]
    assert results["slice-w1"]["error_kind"] == "connect", results["slice-w1"]


def test_an_idle_holder_exits_and_the_next_command_starts_a_new_one(slice4, warm):
    env = {**warm.env, wire.PERSIST_ENV: "2"}
    slice4.orch("exec", "--", "true", env=env)
    (first,) = warm.holders()
    assert first["persist"] == 2
    wait_for(lambda: first["pid"] not in warm.pids(), 60, "the idle holder to exit")
    assert not list(warm.dir.glob("*.sock"))
    slice4.orch("exec", "--", "true", env=env)
    (second,) = warm.holders()
    assert second["pid"] != first["pid"]


def test_connections_stop_stops_every_holder_and_persist_zero_starts_none(slice4, warm):
    slice4.orch("exec", "--", "true", env=warm.env)
    (holder,) = warm.holders()
    stopped = json.loads(slice4.orch("connections", "stop", "--json", env=warm.env).stdout)
    assert stopped["stopped"] == [{"key": holder["key"], "pid": holder["pid"], "stopped": True}]
    assert warm.pids() == [] and connections(slice4, warm) == []
    slice4.orch("exec", "--", "true", env={**warm.env, wire.PERSIST_ENV: "0"})
    assert warm.pids() == []


def test_a_holder_directory_others_can_read_means_connecting_directly(slice4, warm):
    warm.dir.mkdir(mode=0o755)
    warm.dir.chmod(0o755)
    out = slice4.orch("exec", "--", "hostname", env=warm.env)
    assert sorted(out.stdout.splitlines()) == sorted(f"{w} | {w}" for w in slice4.workers)
    assert warm.pids() == []


def test_warm_exec_prints_what_exec_prints_without_the_holder_and_hands_unusual_forms_to_the_cli(slice4, warm):
    import re

    def masked(text: str) -> str:
        return re.sub(r"\d+\.\d\ds\)", "T)", re.sub(r"slowest \S+", "slowest W", text))

    argv = [
        "exec",
        "--workers",
        "slice-w[0-2]",
        "--",
        "sh",
        "-c",
        'echo out; echo err >&2; [ "$(hostname)" != slice-w1 ]',
    ]
    cold = slice4.orch(*argv, check=False, env={wire.PERSIST_ENV: "0"})
    slice4.orch("exec", "--", "true", env=warm.env)  # starts the holder
    fast = slice4.orch(*argv, check=False, env=warm.env)
    assert (fast.returncode, sorted(fast.stdout.splitlines())) == (cold.returncode, sorted(cold.stdout.splitlines()))
    assert sorted(masked(fast.stderr).splitlines()) == sorted(masked(cold.stderr).splitlines())
    as_json = [*argv[:3], "--json", *argv[3:]]
    cold_doc = json.loads(slice4.orch(*as_json, check=False, env={wire.PERSIST_ENV: "0"}).stdout)
    fast_doc = json.loads(slice4.orch(*as_json, check=False, env=warm.env).stdout)
    for doc in (cold_doc, fast_doc):
        for r in doc["results"]:
            r.pop("elapsed")
    assert fast_doc == cold_doc
    # A lane that does not exist: the holder refuses, the CLI says why (exit 2).
    bad = slice4.orch("exec", "--lane", "nope", "--", "true", check=False, env=warm.env)
    assert bad.returncode == 2 and "no lane 'nope'" in bad.stderr
    (holder,) = warm.holders()
    assert holder["connects"] == {w: 1 for w in slice4.workers}


def test_warm_exec_hands_the_command_over_before_importing_click_pydantic_yaml_or_paramiko(slice4, warm):
    slice4.orch("exec", "--", "true", env=warm.env)  # starts the holder
    env = {**os.environ, **warm.env, "ORCH_FLEET": str(slice4.fleet_path)}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "orchestrator", "exec", "--", "true"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert imported and not {"click", "pydantic", "yaml", "paramiko", "fabric", "rich"} & imported


def test_known_hosts_is_checked_again_when_it_changes_and_only_a_worker_it_no_longer_vouches_for_is_dropped(
    make_sandbox, warm
):
    s = make_sandbox(2)
    s.orch("exec", "--", "true", env=warm.env)
    known = s.dir / "known_hosts"
    lines = known.read_text().splitlines(keepends=True)
    known.write_text("".join(lines) + "# a comment: nothing changes\n")
    s.orch("exec", "--", "true", env=warm.env)
    (holder,) = warm.holders()
    assert holder["connects"] == {"slice-w0": 1, "slice-w1": 1}, "a harmless edit dropped a held connection"
    w0 = s.address(0)
    known.write_text("".join(line for line in lines if w0 not in line))
    proc = s.orch("exec", "--json", "--", "true", env=warm.env, check=False)
    results = {r["host"]: r for r in json.loads(proc.stdout)["results"]}
    assert results["slice-w0"]["error_kind"] == "host-key" and "not in" in results["slice-w0"]["error"]
    assert results["slice-w1"]["ok"]
    (holder,) = warm.holders()
    assert holder["connects"]["slice-w1"] == 1 and holder["held"] == ["slice-w1"]


def test_commands_copying_to_one_worker_at_once_share_its_held_connection_safely(slice4, warm, monkeypatch):
    import threading

    from orchestrator.transport import for_fleet

    for k, v in warm.env.items():
        monkeypatch.setenv(k, v)
    data = os.urandom(4 << 20)
    results: list = []

    def copy(i: int) -> None:
        with for_fleet(slice4.fleet, slice4.fleet.workers) as t:
            results.append(t.put(io.BytesIO(data), f"/tmp/warm-concurrent-{i}", ["slice-w0"])["slice-w0"])

    threads = [threading.Thread(target=copy, args=(i,)) for i in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert len(results) == 3 and all(r.ok for r in results), results
    sums = slice4.ssh(0, "sh", "-c", "cat /tmp/warm-concurrent-* | wc -c", check=True).stdout
    assert int(sums) == 3 * len(data)
    (holder,) = warm.holders()
    assert holder["connects"]["slice-w0"] == 1


def test_a_command_whose_client_goes_away_has_its_session_closed_by_the_holder(slice4, warm, tmp_path):
    from conftest import orch_executable

    slice4.orch("exec", "--", "true", env=warm.env)  # the holder is up
    tag = f"orch-gone-{os.getpid()}"
    loop = f"while :; do echo {tag}; sleep 0.1; done"
    env = {**os.environ, "ORCH_FLEET": str(slice4.fleet_path), sandbox.DIR_ENV: str(slice4.dir), **warm.env}
    out = (tmp_path / "out").open("w+")
    client = subprocess.Popen(
        [orch_executable(), "exec", "--workers", "slice-w0", "--", "sh", "-c", loop], stdout=out, env=env
    )
    try:
        wait_for(lambda: tag in (tmp_path / "out").read_text(), 30, "the command's first line")
    finally:
        client.kill()
        client.wait()
    # The holder closes the session: the loop's next echo has nowhere to go and the shell ends.
    # ([o]rch-gone-...: the pattern does not match the probe's own command line.)
    check = f"pgrep -f '[{tag[0]}]{tag[1:]}' >/dev/null && echo running || true"
    probe = ["exec", "--workers", "slice-w0", "--", "sh", "-c", check]
    wait_for(lambda: "running" not in slice4.orch(*probe, env=warm.env).stdout, 30, "the command ended on the worker")


def test_held_connections_run_commands_on_an_agent_and_a_dead_agent_is_replaced(slice4, warm):
    """A command on a held connection runs under the worker's agent (hostside/agent.py), not in a
    session of its own; an agent killed on its worker costs the next command nothing but the agent."""
    slice4.orch("exec", "--", "true", env=warm.env)
    agents = wait_for(lambda: (a := warm.holders()[0]["agents"]) and len(a) == 4 and a, 30, "an agent per worker")
    # The command's parent is its `timeout -k` wrapper, whose parent is the agent.
    script = 'tr "\\0" " " < /proc/$PPID/cmdline; echo; tr "\\0" " " < /proc/$(cut -d" " -f4 /proc/$PPID/stat)/cmdline'
    parent = ["exec", "--json", "--", "sh", "-c", script]
    ran = json.loads(slice4.orch(*parent, env=warm.env).stdout)["results"]
    assert all("timeout -k 3" in r["stdout_tail"].splitlines()[0] and "orch-agent" in r["stdout_tail"] for r in ran), [
        r["stdout_tail"] for r in ran
    ]
    os.kill(agents["slice-w1"], 9)  # the sandbox's workers share this machine's pids
    wait_for(lambda: "slice-w1" not in warm.holders()[0]["agents"], 30, "the holder to see its agent gone")
    again = slice4.orch("exec", "--", "hostname", env=warm.env)
    assert sorted(again.stdout.splitlines()) == sorted(f"{w} | {w}" for w in slice4.workers)
    wait_for(
        lambda: warm.holders()[0]["agents"].get("slice-w1", agents["slice-w1"]) != agents["slice-w1"], 30, "a new agent"
    )
    (holder,) = warm.holders()
    assert holder["connects"] == {w: 1 for w in slice4.workers}, "the connection outlived its agent"
    assert "4 with an agent" in slice4.orch("connections", env=warm.env).stdout


def test_a_command_on_an_agent_is_ended_on_the_worker_at_its_timeout(slice4, warm):
    slice4.orch("exec", "--", "true", env=warm.env)
    wait_for(lambda: len(warm.holders()[0]["agents"]) == 4, 30, "an agent per worker")
    tag = f"sleep 290.{os.getpid()}"
    proc = slice4.orch(
        "exec",
        "--json",
        "--workers",
        "slice-w0",
        "--timeout",
        "1",
        "--",
        "sh",
        "-c",
        f"{tag} & {tag}",
        env=warm.env,
        check=False,
    )
    (result,) = json.loads(proc.stdout)["results"]
    assert result["error_kind"] == "timeout" and result["error"] == "timed out after 1s; ended on the worker"
    assert subprocess.run(["pgrep", "-f", tag], capture_output=True).returncode == 1, "nothing of it left"
