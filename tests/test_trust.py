"""`orch fleet trust`'s known_hosts edits (pure file work; the slice test covers the real key exchange)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

from orchestrator.fleet import WorkerRef
from orchestrator.transport.trust import OfferedKey, entries_for, fingerprint, known_name, record

OLD = "AAAAC3NzaC1lZDI1NTE5AAAAIOuYsrzTd6ue8mPqO0V5nRlMXgkP9WqE2vYxXH3U2mmc"
NEW = "AAAAC3NzaC1lZDI1NTE5AAAAIBhTGOmFJmzbaXgkP9WqE2vYxXH3U2mmcOuYsrzTd6ue"


def hashed(name: str, salt: bytes = b"0123456789abcdef0123") -> str:
    mac = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(mac).decode()}"


def worker(host: str, port: int | None = None) -> WorkerRef:
    return WorkerRef(
        name="s-w1",
        slice="s",
        index=1,
        host=host,
        port=port,
        user=None,
        identity_file=None,
        internal_address=host,
        root="/var/lib/orch",
        shared_dir=None,
        python="python3",
        lane=None,
    )


def offered(name: str) -> OfferedKey:
    return OfferedKey("s-w1", name, "ssh-ed25519", NEW, fingerprint(f"x ssh-ed25519 {NEW}"), ())


def test_known_hosts_names_a_worker_as_ssh_does():
    assert known_name(worker("10.0.0.2")) == "10.0.0.2"
    assert known_name(worker("10.0.0.2", 2222)) == "[10.0.0.2]:2222"


def test_trust_replaces_only_that_workers_entries_plain_or_hashed_and_keeps_everything_else(tmp_path):
    path = tmp_path / "known_hosts"
    path.write_text(
        "# fleet hosts\n"
        f"10.0.0.1 ssh-ed25519 {OLD}\n"
        f"10.0.0.2 ssh-ed25519 {OLD}\n"
        f"{hashed('10.0.0.2')} ssh-ed25519 {OLD}\n"
        f"10.0.0.20 ssh-ed25519 {OLD}\n"
        f"@revoked 10.0.0.9 ssh-ed25519 {OLD}\n"
    )
    os.chmod(path, 0o644)
    assert len(entries_for(path, "10.0.0.2")) == 2
    record(path, [offered("10.0.0.2")])
    lines = path.read_text().splitlines()
    assert lines == [
        "# fleet hosts",
        f"10.0.0.1 ssh-ed25519 {OLD}",
        f"10.0.0.20 ssh-ed25519 {OLD}",
        f"@revoked 10.0.0.9 ssh-ed25519 {OLD}",
        f"10.0.0.2 ssh-ed25519 {NEW}",
    ]
    assert path.stat().st_mode & 0o777 == 0o644
    assert [fingerprint(line) for line in entries_for(path, "10.0.0.2")] == [offered("10.0.0.2").fingerprint]


def test_a_known_hosts_that_does_not_exist_yet_is_created_owner_only(tmp_path):
    path = tmp_path / "ssh" / "known_hosts"
    record(path, [offered("[10.0.0.2]:2222")])
    assert path.read_text() == f"[10.0.0.2]:2222 ssh-ed25519 {NEW}\n"
    assert path.stat().st_mode & 0o777 == 0o600


def test_an_unreadable_key_has_no_fingerprint_instead_of_a_crash():
    assert fingerprint("10.0.0.2 ssh-ed25519 !!!notbase64") == "?"
    assert fingerprint("10.0.0.2") == "?"
