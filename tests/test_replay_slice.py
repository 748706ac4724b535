"""A replayed `orch exec` on the local slice (transport/replay.py): with warm connections off, a plain
exec after a first one connects with paramiko alone from the record the first one left, prints exactly
what the full command line prints, checks host keys as strictly, and steps aside when anything the
record was derived from changed."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator import connections as wire
from orchestrator.fleet import load_fleet
from orchestrator.transport.fabric import FabricTransport

pytestmark = pytest.mark.ssh

# (paramiko looks for invoke, which it is not given: "invoke" itself shows up as a failed lookup)
HEAVY = {"click", "pydantic", "yaml", "fabric", "invoke.context", "rich", "importlib.metadata", "email"}


@pytest.fixture
def own_fleet(slice4, tmp_path):
    """The shared slice's workers under a fleet file of the test's own (its own known_hosts and records)."""
    for name in ("fleet.yaml", "known_hosts", "id_ed25519"):
        shutil.copy2(slice4.dir / name, tmp_path / name)
    env = {wire.PERSIST_ENV: "0", wire.DIR_ENV: str(tmp_path / "h"), "ORCH_FLEET": str(tmp_path / "fleet.yaml")}
    try:
        yield tmp_path, env
    finally:
        if (tmp_path / "h").exists():
            wire.stop_holders(tmp_path / "h")


def imported(slice4, env: dict, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )
    names = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    proc.stderr = "".join(line + "\n" for line in proc.stderr.splitlines() if not line.startswith("import time:"))
    return proc, names


def masked(text: str) -> list[str]:
    return sorted(re.sub(r"\d+\.\d\ds\)", "T)", re.sub(r"slowest \S+", "slowest W", text)).splitlines())


def test_a_replayed_exec_prints_what_the_full_command_line_prints(slice4, own_fleet):
    directory, env = own_fleet
    argv = [
        "exec",
        "--workers",
        "slice-w[0-2]",
        "--",
        "sh",
        "-c",
        'echo out; echo err >&2; [ "$(hostname)" != slice-w1 ]',
    ]
    full, names = imported(slice4, env, *argv)  # no record yet: the full command line, which leaves one
    assert "pydantic" in names and full.returncode == 1
    replayed, names = imported(slice4, env, *argv)
    assert not HEAVY & names, HEAVY & names
    assert replayed.returncode == full.returncode == 1
    assert sorted(replayed.stdout.splitlines()) == sorted(full.stdout.splitlines())
    assert masked(replayed.stderr) == masked(full.stderr)
    assert "FAILED slice-w1: exit 1" in replayed.stderr
    as_json = [*argv[:3], "--json", *argv[3:]]
    docs = []
    for record in (True, False):
        if not record:
            for path in (directory / "h").glob("*.replay.json"):
                path.unlink()
        proc, names = imported(slice4, env, *as_json)
        assert ("pydantic" in names) is not record
        doc = json.loads(proc.stdout)
        for r in doc["results"]:
            r.pop("elapsed")
        docs.append(doc)
    assert docs[0] == docs[1]


def test_a_replayed_exec_refuses_a_changed_host_key_as_the_full_command_line_does(slice4, own_fleet):
    directory, env = own_fleet
    imported(slice4, env, "exec", "--", "true")  # leaves the record
    known = directory / "known_hosts"
    address = slice4.address(1)
    lines = known.read_text().splitlines()
    other = subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(directory / "other")], capture_output=True
    )
    assert other.returncode == 0
    fake = (directory / "other.pub").read_text().split()[:2]
    known.write_text(
        "\n".join(line if not line.startswith(address + " ") else f"{address} {' '.join(fake)}" for line in lines)
        + "\n"
    )
    replayed, names = imported(slice4, env, "exec", "--", "true")
    assert not HEAVY & names
    for path in (directory / "h").glob("*.replay.json"):
        path.unlink()
    full, names = imported(slice4, env, "exec", "--", "true")
    assert "pydantic" in names
    assert replayed.returncode == full.returncode == 1
    assert masked(replayed.stderr) == masked(full.stderr)
    assert "slice-w1" in replayed.stderr and "ssh-keygen" in replayed.stderr


def test_a_changed_fleet_or_another_selection_takes_the_full_command_line(slice4, own_fleet):
    directory, env = own_fleet
    imported(slice4, env, "exec", "--workers", "0-1", "--", "true")
    _, names = imported(slice4, env, "exec", "--workers", "0", "--", "true")
    assert not HEAVY & names
    # A worker the first command did not reach has no record yet; a lane that does not exist is the CLI's to say.
    _, names = imported(slice4, env, "exec", "--workers", "3", "--", "true")
    assert "pydantic" in names
    bad, names = imported(slice4, env, "exec", "--lane", "nope", "--", "true")
    assert bad.returncode == 2 and "no lane 'nope'" in bad.stderr and "pydantic" in names
    fleet = directory / "fleet.yaml"
    fleet.write_text(fleet.read_text().replace("connect_timeout: 5", "connect_timeout: 6"))
    _, names = imported(slice4, env, "exec", "--workers", "0", "--", "true")
    assert "pydantic" in names
    _, names = imported(slice4, env, "exec", "--workers", "0", "--", "true")
    assert not HEAVY & names
    # With warm connections on, the CLI takes the command and starts a holder, so the next one is warm.
    proc, names = imported(slice4, {**env, wire.PERSIST_ENV: ""}, "exec", "--workers", "0", "--", "true")
    assert proc.returncode == 0 and "pydantic" in names and wire.holders(directory / "h")


def test_every_connection_has_nagle_off(slice4):
    fleet = load_fleet(slice4.fleet_path)
    worker = fleet.workers[0]
    transport = FabricTransport([worker], fleet.model.ssh, base_dir=fleet.base_dir)
    try:
        assert transport.run_one(worker.name, ["true"]).ok
        sock = transport._connection(worker.name).transport.sock
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        assert transport.resolved[worker.name]["host"] == worker.host
    finally:
        transport.close()


def test_records_stay_in_the_private_directory(slice4, own_fleet):
    directory, env = own_fleet
    imported(slice4, env, "exec", "--", "true")
    (record,) = Path(directory / "h").glob("*.replay.json")
    assert record.stat().st_mode & 0o777 == 0o600 and (directory / "h").stat().st_mode & 0o777 == 0o700
