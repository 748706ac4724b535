"""Replaying a fleet record (transport/replay.py): what a connection record may hold, and a record read
back is trusted only in exactly the shape orch writes, from the user's private directory."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator import connections as wire
from orchestrator.fleet import load_fleet
from orchestrator.transport import replay
from orchestrator.transport.algorithms import QuickAckSocket, quick_ack

FLEET = """\
version: 1
ssh: {known_hosts: known_hosts, connect_timeout: 4, persist: 0}
slices:
  s:
    accelerator_type: v6e-8
    root: /var/lib/orch
    python: python3
    user: root
    identity_file: id_ed25519
    workers:
      - {index: 0, address: 127.0.9.1}
      - {index: 1, address: 127.0.9.2}
bundles:
  b: {python: "3.11", pins: [jax==0.10.2, jaxlib==0.10.2]}
lanes:
  cpu: {workers: 0-1, bundle: b, platform: cpu}
"""


def conn(**over):
    """What FabricTransport reads of an opened Fabric Connection."""
    base = dict(
        host="127.0.9.1",
        port=22,
        user="root",
        connect_timeout=4,
        gateway=False,
        forward_agent=False,
        authentication=SimpleNamespace(strategy_class=None),
        connect_kwargs={"key_filename": ["/k/id"], "look_for_keys": False, "transport_factory": object},
    )
    base.update(over)
    return SimpleNamespace(**base)


@pytest.fixture
def private(tmp_path, monkeypatch):
    directory = tmp_path / "h"
    monkeypatch.setenv(wire.DIR_ENV, str(directory))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.ssh/config or ~/.fabric.* of the user's
    (tmp_path / "fleet.yaml").write_text(FLEET)
    return tmp_path


def test_a_direct_connection_records_its_resolved_address_user_and_plain_arguments():
    assert replay.record(conn()) == {
        "host": "127.0.9.1",
        "port": 22,
        "user": "root",
        "connect_timeout": 4,
        "kwargs": {"key_filename": ["/k/id"], "look_for_keys": False},
    }


@pytest.mark.parametrize(
    "over",
    [
        {"gateway": "ssh -W %h:%p bastion"},
        {"gateway": SimpleNamespace()},
        {"forward_agent": True},
        {"authentication": SimpleNamespace(strategy_class=object)},
        {"connect_kwargs": {"password": "hunter2"}},
        {"connect_kwargs": {"passphrase": "x", "key_filename": ["/k/id"]}},
        {"connect_kwargs": {"pkey": object()}},
        {"connect_kwargs": {"sock": object()}},
        {"connect_kwargs": {"look_for_keys": "yes"}},
    ],
)
def test_a_gateway_agent_forwarding_a_secret_or_an_unknown_argument_is_never_recorded(over):
    assert replay.record(conn(**over)) is None


def test_a_saved_record_loads_back_whole_and_picks_workers_as_the_fleet_does(private):
    fleet = load_fleet(private / "fleet.yaml")
    content = (private / "fleet.yaml").read_bytes()
    rec = {w.name: replay.record(conn(host=w.host)) for w in fleet.workers}
    path = replay.save(fleet, content, {}, rec)
    assert path is not None and path.stat().st_mode & 0o777 == 0o600
    key = wire.holder_key(fleet.path.resolve(), content, {})
    loaded = replay.load(key)
    assert loaded is not None
    assert loaded.workers == fleet.workers
    assert loaded.connections == rec
    assert loaded.ssh.connect_timeout == 4 and loaded.ssh.persist == 0
    assert [w.name for w in loaded.select("cpu", "1")] == [w.name for w in fleet.select(lane="cpu", workers="1")]
    # What the full command line must say itself: an unknown lane, a selection that matches nothing.
    assert loaded.select("nope", None) is None and loaded.select(None, "s-w9") is None
    # Another key (other command-line settings, other content) has no record.
    assert replay.load(wire.holder_key(fleet.path.resolve(), content, {"connect_timeout": 9.0})) is None


def test_a_record_is_not_used_once_a_file_it_was_derived_from_changes(private):
    fleet = load_fleet(private / "fleet.yaml")
    content = (private / "fleet.yaml").read_bytes()
    replay.save(fleet, content, {}, {"s-w0": replay.record(conn())})
    key = wire.holder_key(fleet.path.resolve(), content, {})
    assert replay.load(key) is not None
    ssh = private / "home" / ".ssh"
    ssh.mkdir(parents=True)
    (ssh / "config").write_text("Host 127.0.9.1\n  User other\n")
    assert replay.load(key) is None  # ssh_config changed what the worker resolves to
    (ssh / "config").unlink()
    assert replay.load(key) is not None
    (private / "home" / ".fabric.yaml").write_text("user: other\n")
    assert replay.load(key) is None


def test_an_ssh_config_with_a_match_line_is_never_recorded(private):
    ssh = private / "home" / ".ssh"
    ssh.mkdir(parents=True)
    (ssh / "config").write_text('Match exec "on-vpn"\n  ProxyJump bastion\n')
    fleet = load_fleet(private / "fleet.yaml")
    assert replay.save(fleet, (private / "fleet.yaml").read_bytes(), {}, {"s-w0": replay.record(conn())}) is None


def test_a_record_others_can_read_or_write_is_ignored(private):
    fleet = load_fleet(private / "fleet.yaml")
    content = (private / "fleet.yaml").read_bytes()
    path = replay.save(fleet, content, {}, {"s-w0": replay.record(conn())})
    key = wire.holder_key(fleet.path.resolve(), content, {})
    os.chmod(path, 0o644)
    assert replay.load(key) is None
    os.chmod(path, 0o600)
    assert replay.load(key) is not None


def test_records_of_an_older_content_and_of_gone_fleets_are_removed_when_a_new_one_is_saved(private):
    fleet = load_fleet(private / "fleet.yaml")
    first = replay.save(fleet, (private / "fleet.yaml").read_bytes(), {}, {"s-w0": replay.record(conn())})
    (private / "fleet.yaml").write_text(FLEET.replace("connect_timeout: 4", "connect_timeout: 5"))
    fleet = load_fleet(private / "fleet.yaml")
    second = replay.save(fleet, (private / "fleet.yaml").read_bytes(), {}, {"s-w0": replay.record(conn())})
    assert first is not None and second is not None and not first.exists() and second.exists()


def _saved(private: Path) -> tuple[Path, str, dict]:
    fleet = load_fleet(private / "fleet.yaml")
    content = (private / "fleet.yaml").read_bytes()
    path = replay.save(fleet, content, {}, {"s-w0": replay.record(conn())})
    assert path is not None
    return path, wire.holder_key(fleet.path.resolve(), content, {}), json.loads(path.read_text())


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.update(version=2),
        lambda d: d["workers"][0].update(index="0"),
        lambda d: d["workers"][0].update(extra=1),
        lambda d: d["ssh"].update(host_key_policy="auto-add"),
        lambda d: d["ssh"].pop("known_hosts"),
        lambda d: d["connections"]["s-w0"].update(port=70000),
        lambda d: d["connections"]["s-w0"]["kwargs"].update(password="x"),
        lambda d: d["connections"]["s-w0"]["kwargs"].update(key_filename=[3]),
        lambda d: d["connections"]["s-w0"].update(port=True),
        lambda d: d["lanes"].update(cpu="s-w0"),
        lambda d: d.update(interpreter="/usr/bin/python9"),
    ],
)
def test_a_record_of_another_shape_is_ignored(private, damage):
    path, key, doc = _saved(private)
    damage(doc)
    path.write_text(json.dumps(doc))
    assert replay.load(key) is None


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)


@given(st.sampled_from(["version", "fleet", "base_dir", "stamps", "ssh", "workers", "lanes", "connections"]), JSON)
def test_no_value_in_a_record_makes_the_reader_raise(field, value):
    doc = {
        "version": 1,
        "fleet": "/f/fleet.yaml",
        "base_dir": "/f",
        "stamps": {},
        "ssh": dict.fromkeys(["known_hosts", "config_file"])
        | {"connect_timeout": 1, "command_timeout": 1, "max_parallel": 1, "host_key_policy": "strict", "persist": 0},
        "workers": [],
        "lanes": {},
        "connections": {},
    }
    assert replay._valid(doc) is not None
    doc[field] = value
    replay._valid(doc)  # a Replay or None, never an exception


def test_a_tcp_socket_gets_no_nagle_and_quick_acks_and_anything_else_is_left_as_it_is():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        client = socket.create_connection(server.getsockname(), timeout=3)
        quick = quick_ack(client)
        peer, _ = server.accept()
        with quick, peer:
            assert isinstance(quick, QuickAckSocket) and quick.gettimeout() == 3
            assert quick.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
            peer.sendall(b"hello")
            assert quick.recv(5) == b"hello"
    other = object()
    assert quick_ack(other) is other
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as unix:
        assert quick_ack(unix) is unix


def test_paramiko_is_imported_without_invoke_or_importlib_metadata_and_knows_its_own_version():
    code = (
        "import sys, json\n"
        "from orchestrator.transport.replay import import_paramiko\n"
        "import_paramiko()\n"
        "import paramiko\n"
        "skipped = [m for m in ('invoke', 'importlib.metadata', 'email') if m in sys.modules]\n"
        "from importlib import metadata\n"  # the real module, once paramiko is in
        "print(json.dumps([skipped, paramiko.__version__, metadata.version('paramiko'), type(metadata).__name__]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    skipped, told, real, kind = json.loads(proc.stdout)
    assert skipped == [] and told == real and kind == "module"


def test_the_version_stand_in_sends_any_other_question_to_the_real_module(monkeypatch):
    from importlib import metadata

    from orchestrator.transport.replay import _installed_version, _VersionOnly

    assert _installed_version("paramiko") == metadata.version("paramiko")
    assert _installed_version("no-such-distribution") is None
    stand_in = _VersionOnly("paramiko", "0.0-test")
    monkeypatch.setitem(sys.modules, "importlib.metadata", stand_in)
    assert stand_in.version("paramiko") == "0.0-test"
    assert stand_in.version("click") == metadata.version("click")
    assert sys.modules["importlib.metadata"] is not stand_in  # it stepped aside for the real module
