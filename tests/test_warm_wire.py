"""Warm connections, the unit tier: the framing between a command and its connection holder,
the holder's key and its private directory (the holder itself is tested on the local slice)."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

import pytest

from orchestrator import connections as wire


def pair() -> tuple[socket.socket, socket.socket]:
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)


def test_a_frame_comes_back_as_sent_with_its_payload_and_then_the_end_is_none():
    a, b = pair()
    with a, b:
        wire.send(a, {"op": "put", "remote": "/tmp/x", "text": "é\n"}, blob=b"\x00\xffdata")
        wire.send(a, {"t": "done"})
        a.shutdown(socket.SHUT_WR)
        assert wire.receive(b) == ({"op": "put", "remote": "/tmp/x", "text": "é\n", "blob": 6}, b"\x00\xffdata")
        assert wire.receive(b) == ({"t": "done"}, None)
        assert wire.receive(b) is None


def test_an_empty_payload_is_still_a_payload():
    a, b = pair()
    with a, b:
        wire.send(a, {"op": "put"}, blob=b"")
        assert wire.receive(b) == ({"op": "put", "blob": 0}, b"")


@pytest.mark.parametrize(
    "raw, says",
    [
        (struct.pack(">I", wire.MAX_FRAME + 1), "limit"),
        (struct.pack(">I", 10) + b"{}", "middle of a frame"),
        (b"\x00\x00", "middle of a frame"),
        (struct.pack(">I", 5) + b"[1,2]", "JSON object"),
        (struct.pack(">I", 3) + b"{x}", "not a JSON frame"),
        (struct.pack(">I", 11) + b'{"blob":-1}', "payload size"),
        (struct.pack(">I", 10) + b'{"blob":9}' + b"abc", "ended"),
        (struct.pack(">I", 10) + b'{"blob":9}', "before the payload"),
    ],
)
def test_a_broken_frame_is_a_wire_error_naming_what_is_wrong(raw, says):
    a, b = pair()
    with a, b:
        a.sendall(raw)
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(wire.WireError, match=says):
            wire.receive(b)


def test_frames_reads_until_the_peer_closes():
    a, b = pair()
    with a, b:
        for i in range(3):
            wire.send(a, {"t": "line", "i": i})
        a.close()
        assert [d["i"] for d in wire.frames(b)] == [0, 1, 2]


def test_the_holder_key_changes_with_the_fleet_content_path_and_host_key_settings(tmp_path):
    fleet = tmp_path / "fleet.yaml"
    base = wire.holder_key(fleet, b"version: 1\n", {})
    assert base == wire.holder_key(fleet, b"version: 1\n", {"connect_timeout": None})
    assert base != wire.holder_key(fleet, b"version: 1\n# changed\n", {})
    assert base != wire.holder_key(tmp_path / "other.yaml", b"version: 1\n", {})
    assert base != wire.holder_key(fleet, b"version: 1\n", {"host_key_policy": "accept-new"})
    assert base != wire.holder_key(fleet, b"version: 1\n", {"connect_timeout": 3.0})


def test_the_holder_directory_is_made_private_and_a_shared_one_is_refused(tmp_path, monkeypatch):
    made = tmp_path / "holders"
    monkeypatch.setenv(wire.DIR_ENV, str(made))
    assert wire.holder_dir() == made
    assert made.stat().st_mode & 0o777 == 0o700
    made.chmod(0o755)
    with pytest.raises(wire.WireError, match="not a private directory"):
        wire.holder_dir()
    link = tmp_path / "link"
    link.symlink_to(made)
    made.chmod(0o700)
    monkeypatch.setenv(wire.DIR_ENV, str(link))
    with pytest.raises(wire.WireError, match="not a private directory"):
        wire.holder_dir()


@pytest.mark.parametrize("value, off", [("0", True), ("off", True), ("", False), ("600", False), ("30", False)])
def test_orch_ssh_persist_zero_turns_warm_connections_off(value, off, monkeypatch):
    monkeypatch.setenv(wire.PERSIST_ENV, value)
    assert wire.persist_disabled() is off
    assert wire.persist_override() == (float(value) if value not in ("0", "off", "") else None)


def test_the_fleet_file_is_found_as_load_fleet_finds_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(wire.FLEET_ENV, raising=False)
    assert wire.fleet_file(None) is None
    (tmp_path / "fleet.yaml").write_text("version: 1\n")
    assert wire.fleet_file(None) == Path(os.path.realpath(tmp_path / "fleet.yaml"))
    monkeypatch.setenv(wire.FLEET_ENV, str(tmp_path / "elsewhere.yaml"))
    assert wire.fleet_file(None) is None
    assert wire.fleet_file(tmp_path / "fleet.yaml") == Path(os.path.realpath(tmp_path / "fleet.yaml"))


@pytest.mark.parametrize(
    "args, expected",
    [
        (["exec", "--", "true"], {"argv": ["true"], "json": False, "keyed": {}}),
        (
            [
                "--fleet",
                "f.yaml",
                "--host-key-policy",
                "accept-new",
                "exec",
                "--lane",
                "cpu",
                "--json",
                "--",
                "ls",
                "-l",
            ],
            {"fleet": "f.yaml", "keyed": {"host_key_policy": "accept-new"}, "json": True, "argv": ["ls", "-l"]},
        ),
        (
            ["--connect-timeout", "3", "exec", "--workers", "w[0-3]", "--timeout", "9", "--", "x"],
            {"keyed": {"connect_timeout": 3.0}, "timeout": 9.0, "select": {"lane": None, "workers": "w[0-3]"}},
        ),
        (["exec", "true"], None),  # no `--`: the CLI parses it
        (["--debug", "exec", "--", "true"], None),
        (["exec", "--verbose", "--", "true"], None),
        (["exec", "--timeout", "soon", "--", "true"], None),
        (["--host-key-policy", "yolo", "exec", "--", "true"], None),
        (["exec", "--"], None),
        (["probe", "--", "true"], None),
        (["exec", "--help"], None),
    ],
)
def test_only_plain_exec_commands_take_the_warm_fast_path(args, expected):
    from orchestrator.entry import parse

    got = parse(args)
    if expected is None:
        assert got is None
    else:
        assert got is not None and {k: got[k] for k in expected} == expected


LEAVE = "import sys\nfrom orchestrator.entry import _leave\nsys.stdout.write('held in the buffer')\n_leave(3)\n"


def test_a_fast_path_leaves_with_its_code_after_its_buffered_output():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", LEAVE], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (3, "held in the buffer")


def test_a_fast_path_whose_output_cannot_be_written_does_not_exit_as_if_it_had_been():
    import subprocess
    import sys

    reader, writer = os.pipe()
    os.close(reader)  # nobody reads: the flush fails with a broken pipe
    try:
        done = subprocess.run([sys.executable, "-c", LEAVE], stdout=writer, stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(writer)
    assert done.returncode not in (0, 3)


def test_a_connect_a_full_backlog_refuses_is_retried_until_the_holder_accepts(tmp_path):
    import threading
    import time

    path = tmp_path / "h.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    queued = []
    while True:  # fill the backlog: a connect with a timeout is now refused at once (EAGAIN)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(1.0)
        try:
            s.connect(str(path))
        except BlockingIOError:
            s.close()
            break
        queued.append(s)

    def holder() -> None:  # a busy holder that catches up after a while
        time.sleep(0.3)
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            wire.send(conn, {"ok": True, "protocol": wire.PROTOCOL})

    threading.Thread(target=holder, daemon=True).start()
    try:
        with wire.connect(path, timeout=10):
            pass
    finally:
        listener.close()
        for s in queued:
            s.close()


def test_the_holders_backlog_holds_a_fan_out_of_the_widest_max_parallel():
    from orchestrator.fleet import SshSettings

    widest = next(m.le for m in SshSettings.model_fields["max_parallel"].metadata if hasattr(m, "le"))
    assert wire.BACKLOG >= widest
