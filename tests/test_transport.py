"""The SSH transport: ProxyJump hops, copy failures, exit codes (fakes first, then real sshd)."""

from __future__ import annotations

import io
import time
from pathlib import Path

import paramiko
import pytest

from orchestrator import sandbox
from orchestrator.errors import OrchError
from orchestrator.fleet import SshSettings, WorkerRef, load_fleet
from orchestrator.transport import FabricTransport, _HostKeyPolicy, for_fleet


def worker(name: str = "w0", host: str = "target", **kw) -> WorkerRef:
    fields = dict(
        name=name,
        slice="s",
        index=0,
        host=host,
        port=None,
        user=None,
        identity_file=None,
        internal_address=host,
        root="/var/lib/orch",
        shared_dir=None,
        python="python3",
        lane=None,
    )
    return WorkerRef(**{**fields, **kw})


def transport_with_ssh_config(tmp_path: Path, config: str, **kw) -> FabricTransport:
    (tmp_path / "ssh_config").write_text(config)
    known = tmp_path / "known_hosts"
    key = paramiko.ECDSAKey.generate()
    hop_key = paramiko.ECDSAKey.generate()
    known.write_text(
        f"other.example {key.get_name()} {key.get_base64()}\n"
        f"[bastion.example]:2222 {hop_key.get_name()} {hop_key.get_base64()}\n"
    )
    settings = SshSettings(config_file=str(tmp_path / "ssh_config"), connect_timeout=4)
    return FabricTransport([worker(**kw)], settings, known_hosts=known, base_dir=tmp_path)


def hops(conn) -> list:
    out = []
    while conn is not False:
        out.append(conn)
        conn = conn.gateway
    return out


# -- ProxyJump: every hop is ours, checked like a worker ---------------------


def test_a_proxyjump_hop_gets_our_host_key_policy_known_hosts_and_timeouts(tmp_path):
    t = transport_with_ssh_config(tmp_path, "Host target\n  HostName 10.0.0.5\n  ProxyJump ops@bastion.example:2222\n")
    conn = t._build_connection("w0")
    target, bastion = hops(conn)
    assert (target.host, bastion.host, bastion.user, bastion.port) == ("10.0.0.5", "bastion.example", "ops", 2222)
    policy = bastion.client._policy
    assert isinstance(policy, _HostKeyPolicy) and policy.role == "jump host "
    assert not isinstance(policy, paramiko.AutoAddPolicy)
    # our known_hosts (the hop's own keys from it, as paramiko looks them up), never written back
    assert "[bastion.example]:2222" in bastion.client.get_host_keys()
    assert "other.example" not in bastion.client.get_host_keys()
    assert bastion.client._host_keys_filename is None
    assert bastion.connect_timeout == 4
    assert {k: bastion.connect_kwargs[k] for k in ("banner_timeout", "auth_timeout", "channel_timeout")} == {
        "banner_timeout": 4,
        "auth_timeout": 4,
        "channel_timeout": 4,
    }


def test_an_unknown_jump_host_key_is_refused_naming_the_jump_host(tmp_path):
    t = transport_with_ssh_config(tmp_path, "Host target\n  ProxyJump bastion.example\n")
    bastion = t._build_connection("w0").gateway
    key = paramiko.ECDSAKey.generate()
    with pytest.raises(OrchError, match=r"host key for jump host bastion\.example is not in .*refusing to connect"):
        bastion.client._policy.missing_host_key(bastion.client, "bastion.example", key)


def test_proxyjump_hops_are_connected_in_the_order_given(tmp_path):
    t = transport_with_ssh_config(tmp_path, "Host target\n  ProxyJump first,second\n")
    assert [c.host for c in hops(t._build_connection("w0"))] == ["target", "second", "first"]


def test_a_jump_hosts_own_proxyjump_is_followed_and_a_loop_is_refused(tmp_path):
    t = transport_with_ssh_config(tmp_path, "Host target\n  ProxyJump inner\nHost inner\n  ProxyJump outer\n")
    assert [c.host for c in hops(t._build_connection("w0"))] == ["target", "inner", "outer"]
    t = transport_with_ssh_config(tmp_path, "Host target\n  ProxyJump inner\nHost inner\n  ProxyJump target\n")
    with pytest.raises(OrchError, match="ProxyJump loop in ssh config: target -> inner -> target"):
        t._build_connection("w0")


def test_proxyjump_none_and_a_wildcard_that_names_the_jump_host_itself_mean_direct(tmp_path):
    t = transport_with_ssh_config(tmp_path, "Host target\n  ProxyJump none\n")
    assert t._build_connection("w0").gateway is False
    t = transport_with_ssh_config(tmp_path, "Host *\n  ProxyJump bastion\n", host="bastion")
    assert t._build_connection("w0").gateway is False


def test_a_proxycommand_is_left_to_openssh_which_checks_that_hop_itself(tmp_path):
    t = transport_with_ssh_config(tmp_path, "Host target\n  ProxyCommand ssh -W %h:%p bastion\n")
    assert t._build_connection("w0").gateway == "ssh -W target:22 bastion"


# -- copy failures and exit codes, against a fake connection ----------------


class FakeConnection:
    """Just enough of a Fabric Connection for put_one/get_one/run_one."""

    def __init__(self, fail: BaseException | None = None, exited: int = 0, takes: float = 0.0):
        self.fail, self.exited, self.takes = fail, exited, takes
        self.is_connected = True
        self.closed = False
        self.gateway = False
        self.channel_timeout = None
        fake = self

        class Channel:
            def settimeout(self, value):
                fake.channel_timeout = value

        class Sftp:
            def get_channel(self):
                return Channel()

        self._sftp = Sftp()
        self.client = self

    def sftp(self):
        return self._sftp

    def put(self, local, remote):
        if self.fail:
            raise self.fail

    def create_session(self):
        class Session:  # no paramiko buffers: run_one uses run() below
            def close(self):
                pass

        return Session()

    def run(self, line, **kwargs):
        time.sleep(self.takes)

        class Res:
            exited = self.exited
            stdout = stderr = ""

        return Res()

    def close(self):
        self.closed = True


def fake_transport(conn: FakeConnection, **kw) -> FabricTransport:
    t = FabricTransport([worker("s-w3", host="10.0.0.9", port=22)], SshSettings(), **kw)
    t._connections["s-w3"] = conn
    return t


def sftp_status_error(code: int, text: str) -> BaseException:
    """The exception paramiko raises for an SFTP status reply (raised where paramiko raises it)."""
    msg = paramiko.Message()
    msg.add_int(code)
    msg.add_string(text)
    msg.rewind()
    try:
        paramiko.SFTPClient._convert_status(None, msg)
    except BaseException as exc:
        return exc
    raise AssertionError("no error raised")


def test_a_refused_sftp_request_is_a_remote_error_naming_worker_and_path_and_keeps_the_connection():
    conn = FakeConnection(fail=sftp_status_error(paramiko.sftp.SFTP_FAILURE, "Failure"))
    t = fake_transport(conn)
    res = t.put_one("s-w3", io.BytesIO(b"x"), "/var/lib/orch/store/a.part")
    assert (res.error_kind, res.error) == (
        "remote",
        (
            "SFTP put to s-w3:/var/lib/orch/store/a.part failed on the worker: "
            "Failure (the SFTP server gives no detail; usually a full disk or quota)"
        ),
    )
    assert t._connections["s-w3"] is conn and not conn.closed


def test_a_missing_remote_file_is_a_remote_error():
    conn = FakeConnection(fail=sftp_status_error(paramiko.sftp.SFTP_NO_SUCH_FILE, "No such file"))
    res = fake_transport(conn).put_one("s-w3", io.BytesIO(b"x"), "/nope/a")
    assert (res.error_kind, res.error) == ("remote", "SFTP put to s-w3:/nope/a failed on the worker: No such file")


def test_a_broken_socket_during_a_copy_is_still_a_connect_error_and_drops_the_connection():
    conn = FakeConnection(fail=OSError("Socket is closed"))
    t = fake_transport(conn)
    res = t.put_one("s-w3", io.BytesIO(b"x"), "/tmp/a")
    assert res.error_kind == "connect" and "cannot reach 10.0.0.9:22" in res.error
    assert "s-w3" not in t._connections and conn.closed


def test_a_silent_worker_during_a_copy_is_a_timeout_naming_it():
    conn = FakeConnection(fail=TimeoutError())
    t = fake_transport(conn, transfer_timeout=7)
    res = t.put_one("s-w3", io.BytesIO(b"x"), "/tmp/a")
    assert conn.channel_timeout == 7
    assert (res.error_kind, res.error) == (
        "timeout",
        "SFTP put to s-w3:/tmp/a timed out: 10.0.0.9:22 sent nothing for 7s (worker hung?)",
    )
    assert conn.closed


def test_a_missing_local_file_is_a_local_error():
    conn = FakeConnection(fail=FileNotFoundError(2, "No such file or directory", "/tmp/nope.whl"))
    res = fake_transport(conn).put_one("s-w3", "/tmp/nope.whl", "/tmp/a")
    assert (res.error_kind, res.error) == (
        "local",
        "SFTP put to s-w3:/tmp/a failed on this machine: [Errno 2] No such file or directory: '/tmp/nope.whl'",
    )
    assert not conn.closed


def test_the_transfer_timeout_defaults_to_thirty_seconds_and_never_below_the_connect_timeout():
    assert FabricTransport([worker()]).transfer_timeout == 30
    assert FabricTransport([worker()], connect_timeout=45).transfer_timeout == 45


def test_a_command_that_exits_124_by_itself_is_not_a_timeout():
    res = fake_transport(FakeConnection(exited=124)).run_one("s-w3", ["sh", "-c", "exit 124"], timeout=5)
    assert (res.exit_code, res.error, res.error_kind) == (124, None, None)


def test_exit_124_at_the_deadline_is_the_timeout_wrapper():
    res = fake_transport(FakeConnection(exited=124, takes=0.25)).run_one("s-w3", ["sleep", "9"], timeout=0.2)
    assert (res.exit_code, res.error, res.error_kind) == (None, "timed out after 0.2s", "timeout")


# -- against real sshd workers ------------------------------------------------


@pytest.mark.ssh
def test_a_copy_to_a_paused_worker_times_out_naming_it_while_the_others_succeed(make_sandbox):
    sb = make_sandbox(workers=2)
    fleet = load_fleet(sb.fleet_path)
    with for_fleet(fleet, fleet.workers, connect_timeout=2, transfer_timeout=2) as t:
        assert all(r.ok for r in t.put(io.BytesIO(b"first"), "/tmp/orch-copy-test").values())  # SFTP is open
        sandbox.pause(sb.dir, 1)
        try:
            start = time.monotonic()
            results = t.put(io.BytesIO(b"second"), "/tmp/orch-copy-test")
            elapsed = time.monotonic() - start
        finally:
            sandbox.resume(sb.dir, 1)
    assert results["slice-w0"].ok
    assert results["slice-w1"].error_kind == "timeout"
    assert results["slice-w1"].error == (
        f"SFTP put to slice-w1:/tmp/orch-copy-test timed out: {sb.address(1)}:22 sent nothing for 2s (worker hung?)"
    )
    assert elapsed < 2 * 2 + 2, elapsed  # Fabric's put makes two requests, each bounded
    assert sb.ssh(0, "cat", "/tmp/orch-copy-test").stdout == "second"


@pytest.mark.ssh
def test_a_download_from_a_paused_worker_times_out(make_sandbox, tmp_path):
    sb = make_sandbox(workers=2)
    fleet = load_fleet(sb.fleet_path)
    with for_fleet(fleet, fleet.workers, connect_timeout=2, transfer_timeout=2) as t:
        assert t.get_one("slice-w1", "/etc/hostname", tmp_path / "first").ok  # SFTP is open
        sandbox.pause(sb.dir, 1)
        try:
            start = time.monotonic()
            res = t.get_one("slice-w1", "/etc/hostname", tmp_path / "second")
            elapsed = time.monotonic() - start
        finally:
            sandbox.resume(sb.dir, 1)
        assert t.get_one("slice-w1", "/etc/hostname", tmp_path / "third").ok  # reconnects once resumed
    assert res.error_kind == "timeout" and res.error.startswith("SFTP get from slice-w1:/etc/hostname timed out")
    assert elapsed < 2 + 2, elapsed


@pytest.mark.ssh
def test_an_upload_the_worker_cannot_store_is_a_remote_error_and_the_connection_stays_up(slice4):
    with for_fleet(slice4.fleet, slice4.fleet.workers[:1]) as t:
        conn = t._connection("slice-w0")
        missing = t.put_one("slice-w0", io.BytesIO(b"x"), "/nonexistent-dir/a")
        full = t.put_one("slice-w0", io.BytesIO(b"x" * 100_000), "/dev/full")
        after = t.run_one("slice-w0", ["true"])
        assert t._connection("slice-w0") is conn
    assert (missing.error_kind, missing.error) == (
        "remote",
        "SFTP put to slice-w0:/nonexistent-dir/a failed on the worker: No such file",
    )
    assert full.error_kind == "remote"
    assert full.error.startswith("SFTP put to slice-w0:/dev/full failed on the worker: size mismatch in put!")
    assert "disk full?" in full.error
    assert after.ok


@pytest.mark.ssh
def test_a_proxyjump_bastion_is_host_key_checked_and_then_carries_the_connection(slice4, tmp_path):
    config = tmp_path / "ssh_config"
    key = slice4.dir / "id_ed25519"
    config.write_text(
        f"Host via-bastion\n  HostName {slice4.address(1)}\n  User root\n  IdentityFile {key}\n"
        f"  ProxyJump bastion\n"
        f"Host bastion\n  HostName {slice4.address(0)}\n  User root\n  IdentityFile {key}\n"
    )
    fleet = load_fleet(slice4.alias_fleet(config, 1, "via-bastion", tmp_path / "fleet.yaml"))

    known = slice4.dir / "known_hosts"
    without_bastion = tmp_path / "known_hosts"
    without_bastion.write_text(
        "".join(
            line for line in known.read_text().splitlines(keepends=True) if not line.startswith(slice4.address(0) + " ")
        )
    )
    with for_fleet(fleet, fleet.workers, known_hosts=without_bastion) as t:
        refused = t.run_one("slice-w1", ["hostname"])
    assert refused.error_kind == "host-key"
    assert f"host key for jump host {slice4.address(0)} is not in {without_bastion}" in refused.error

    with for_fleet(fleet, fleet.workers, known_hosts=known) as t:
        res = t.run_one("slice-w1", ["hostname"])
        assert t._connection("slice-w1").gateway.host == slice4.address(0)
    assert res.ok and res.stdout.strip() == "slice-w1"


def test_a_failure_in_invokes_stdin_thread_is_named_by_what_it_was_not_by_its_tracebacks():
    from invoke.exceptions import ThreadException
    from invoke.util import ExceptionWrapper

    from orchestrator.transport.failures import classify_exception

    class Reach:
        workers = {"w": WorkerRef("w", "s", 0, "127.0.0.9", 22, "root", None, "127.0.0.9", "/r", None, "python3", None)}
        known_hosts_display = "known_hosts"
        connect_timeout = 5.0

    broke = ThreadException([ExceptionWrapper({}, OSError, OSError("Socket is closed"), None)])
    assert classify_exception(broke, Reach(), "w") == (
        "connect",
        "cannot reach 127.0.0.9:22: OSError: Socket is closed",
    )


class _Sessions:
    """A connection as `_open_session` sees it: Fabric's `create_session` and paramiko's transport."""

    def __init__(self, active: bool | None, forward_agent: bool = False) -> None:
        self.forward_agent = forward_agent
        self.transport = (
            None if active is None else type("T", (), {"active": active, "open_session": lambda _: "paramiko"})()
        )

    def create_session(self) -> str:
        return "fabric"


@pytest.mark.parametrize(
    "conn, opened_by",
    [
        (_Sessions(active=True), "paramiko"),  # open, no agent: paramiko's open_session, without Fabric's decorator
        (_Sessions(active=True, forward_agent=True), "fabric"),  # Fabric attaches the agent handler
        (_Sessions(active=False), "fabric"),  # Fabric opens the connection first
        (_Sessions(active=None), "fabric"),
    ],
)
def test_a_session_is_opened_by_paramiko_only_on_an_open_connection_without_agent_forwarding(conn, opened_by):
    assert FabricTransport([worker()], SshSettings())._open_session(conn) == opened_by
