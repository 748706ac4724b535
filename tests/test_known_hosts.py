"""known_hosts is read line by line: a bad line is skipped and named file:line, a @revoked key
is refused everywhere (accept-new included), a host vouched for only by a @cert-authority line
is refused loudly. Against real sshd workers of the local slice."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator import sandbox
from orchestrator.transport.hostkeys import read_known_hosts

ED25519 = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def test_the_reader_keeps_good_lines_and_names_every_line_it_cannot_use(tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(
        "# a comment\n"
        "\n"
        "10.0.0.1 ssh-ed25519 !!!not-base64\n"
        f"10.0.0.2 ssh-ed25519 {ED25519}\n"
        f"@revoked * ssh-ed25519 {ED25519}\n"
        f"@cert-authority *.example.internal,!bad.example.internal ssh-ed25519 {ED25519}\n"
        "@weird 10.0.0.3 ssh-ed25519 AAAA\n"
        "only-two fields\n"
    )
    kh = read_known_hosts(known)
    assert [line for line, _ in kh.unreadable] == [3, 7, 8]
    assert kh.entries == []  # the one good key is revoked on line 5
    assert [line for line, _ in kh.revoked] == [5]
    assert kh.authority_line("w0.example.internal") == 6
    assert kh.authority_line("bad.example.internal") is None
    assert read_known_hosts(tmp_path / "absent").entries == []


def test_a_connection_gets_the_keys_paramiko_looks_up_for_its_host_hashed_and_bracketed_names_included(tmp_path):
    import paramiko
    from paramiko.hostkeys import HostKeys

    a, b, c = (paramiko.ECDSAKey.generate() for _ in range(3))
    known = tmp_path / "known_hosts"
    hashed = HostKeys.hash_host("10.0.0.7")
    known.write_text(
        f"10.0.0.5 {a.get_name()} {a.get_base64()}\n"
        f"{hashed} {b.get_name()} {b.get_base64()}\n"
        f"[10.0.0.9]:2222 {c.get_name()} {c.get_base64()}\n"
    )
    kh = read_known_hosts(known)
    for host, port, key in [("10.0.0.5", 22, a), ("10.0.0.7", 22, b), ("10.0.0.9", 2222, c)]:
        table = HostKeys()
        kh.add_host_to(table, host, port)
        name = host if port == 22 else f"[{host}]:{port}"
        assert table.lookup(name)[key.get_name()] == key
        assert len(list(table)) == 1  # that host's keys, not the file's
    table = HostKeys()
    kh.add_host_to(table, "10.0.0.9", 22)  # the key is for port 2222 only
    assert table.lookup("10.0.0.9") is None


def test_one_fan_out_reads_known_hosts_once_and_again_when_the_file_changes(tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(f"10.0.0.2 ssh-ed25519 {ED25519}\n")
    cache: dict = {}
    first = read_known_hosts(known, cache)
    assert read_known_hosts(known, cache) is first
    with known.open("a") as fh:  # what accept-new does
        fh.write(f"10.0.0.3 ssh-ed25519 {ED25519}\n")
    again = read_known_hosts(known, cache)
    assert again is not first and len(again.entries) == 2
    assert read_known_hosts(known) is not again  # without a cache: read every time


def _worker_line(sb, known: Path) -> str:
    address = sb.address(0)
    [line] = [x for x in known.read_text().splitlines() if x.startswith(address + " ")]
    return line


@pytest.mark.ssh
def test_a_bad_line_is_skipped_so_other_workers_connect_and_a_missing_key_names_it(make_sandbox):
    sb = make_sandbox(workers=2)
    known = sb.dir / "known_hosts"
    lines = known.read_text().splitlines()
    w1 = next(x for x in lines if x.startswith(sb.address(1) + " "))
    kept = [x for x in lines if x != w1]
    known.write_text("garbage ssh-ed25519 !!!\n" + "\n".join(kept) + "\n")
    proc = sb.orch("exec", "--", "hostname", check=False)
    assert "slice-w0 | slice-w0" in proc.stdout  # one bad line no longer fails every worker
    [failure] = [x for x in proc.stderr.splitlines() if "FAILED slice-w1" in x]
    assert f"host key for {sb.address(1)} is not in {known}" in failure
    assert f"{known}:1 skipped: not a known_hosts line" in failure


@pytest.mark.ssh
def test_a_revoked_key_is_refused_even_when_listed_and_never_recorded_by_accept_new(make_sandbox):
    sb = make_sandbox(workers=1)
    known = sb.dir / "known_hosts"
    line = _worker_line(sb, known)
    _, keytype, blob = line.split()[:3]
    known.write_text(known.read_text() + f"@revoked * {keytype} {blob}\n")
    revoked_at = len(known.read_text().splitlines())
    for policy in ("strict", "accept-new"):
        proc = sb.orch("--host-key-policy", policy, "exec", "--", "true", check=False)
        assert proc.returncode == 1
        assert f"is REVOKED in {known}:{revoked_at}; refusing to connect" in proc.stderr, proc.stderr
    assert known.read_text().count(blob) == 2  # accept-new wrote nothing


@pytest.mark.ssh
def test_a_worker_vouched_for_only_by_a_cert_authority_is_refused_naming_the_line(make_sandbox):
    sb = make_sandbox(workers=1)
    known = sb.dir / "known_hosts"
    line = _worker_line(sb, known)
    ca_key = sandbox.host_key(sb.dir, 0).split()[1]
    known.write_text(known.read_text().replace(line + "\n", "") + f"@cert-authority 127.* ssh-ed25519 {ca_key}\n")
    proc = sb.orch("exec", "--", "true", check=False)
    assert proc.returncode == 1
    assert f"only by the @cert-authority line {known}:" in proc.stderr, proc.stderr
    assert "orch does not check host certificates" in proc.stderr
