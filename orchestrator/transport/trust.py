"""Trusting a worker's new host key on purpose: `orch fleet trust`.

A TPU VM that Google re-creates after a preemption or maintenance comes back
at the same address with a new host key and an empty disk. Every connection
refuses it (strict host keys are never relaxed), so the way back is explicit:
`scan` reads the key the worker offers now (the SSH key exchange only: no
authentication, no command runs on a host not yet trusted), the operator sees
both fingerprints, and `record` replaces the worker's entries in known_hosts
with the new key, leaving every other line as it was.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hostside.files import write_atomic
from orchestrator.errors import HostKeyError
from orchestrator.workers import WorkerRef


@dataclass(frozen=True)
class OfferedKey:
    """The host key a worker offers now, next to what known_hosts says of it."""

    worker: str
    known_name: str  # how known_hosts names it: `host` or `[host]:port`
    key_type: str
    key_base64: str
    fingerprint: str
    known: tuple[str, ...]  # fingerprints known_hosts holds for that name now

    @property
    def changed(self) -> bool:
        return bool(self.known) and self.fingerprint not in self.known

    @property
    def already_trusted(self) -> bool:
        return self.fingerprint in self.known

    def to_dict(self) -> dict[str, object]:
        return {
            "worker": self.worker,
            "known_name": self.known_name,
            "key_type": self.key_type,
            "fingerprint": self.fingerprint,
            "known": list(self.known),
            "state": "trusted" if self.already_trusted else "changed" if self.changed else "unknown",
        }


def known_name(worker: WorkerRef) -> str:
    """The name ssh and paramiko give the worker in known_hosts."""
    port = worker.port or 22
    return worker.host if port == 22 else f"[{worker.host}]:{port}"


def scan(worker: WorkerRef, known_hosts: Path, *, timeout: float = 10.0) -> OfferedKey:
    """The host key `worker` offers (key exchange only), with the fingerprints known_hosts has for it.

    The worker is reached at its fleet address directly (an ssh alias must resolve by DNS; a key behind
    a jump host is read with ssh-keyscan through that route instead).
    """
    import paramiko

    port = worker.port or 22
    try:
        sock = socket.create_connection((worker.host, port), timeout=timeout)
    except OSError as exc:
        raise HostKeyError(
            f"cannot read {worker.name}'s host key: {worker.host}:{port}: {exc.strerror or exc}", host=worker.name
        ) from None
    transport = paramiko.Transport(sock)
    try:
        transport.banner_timeout = timeout
        transport.start_client(timeout=timeout)
        key = transport.get_remote_server_key()
    except (paramiko.SSHException, OSError, EOFError) as exc:
        raise HostKeyError(f"cannot read {worker.name}'s host key: {exc}", host=worker.name) from None
    finally:
        transport.close()
    name = known_name(worker)
    return OfferedKey(
        worker=worker.name,
        known_name=name,
        key_type=key.get_name(),
        key_base64=key.get_base64(),
        fingerprint=key.fingerprint,
        known=tuple(fingerprint(line) for line in entries_for(known_hosts, name)),
    )


def record(known_hosts: Path, offered: Sequence[OfferedKey]) -> None:
    """Replace each worker's known_hosts entries with the key it offered (every other line kept)."""
    try:
        lines = known_hosts.read_text().splitlines()
        mode = known_hosts.stat().st_mode & 0o777
    except FileNotFoundError:
        lines, mode = [], 0o600
    names = {o.known_name for o in offered}
    kept = [line for line in lines if not any(_names_host(line, n) for n in names)]
    kept += [f"{o.known_name} {o.key_type} {o.key_base64}" for o in offered]
    known_hosts.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(str(known_hosts), "\n".join(kept) + "\n", mode=mode)


def entries_for(known_hosts: Path, name: str) -> list[str]:
    """known_hosts lines (plain or hashed, @revoked and @cert-authority excluded) that name `name`."""
    try:
        lines = known_hosts.read_text().splitlines()
    except FileNotFoundError:
        return []
    return [line for line in lines if not line.startswith("@") and _names_host(line, name)]


def fingerprint(line: str) -> str:
    """`SHA256:...` of a known_hosts line's key (as OpenSSH prints it), or `?` for a line it cannot read."""
    parts = line.split()
    try:
        blob = base64.b64decode(parts[2], validate=True)
    except (IndexError, ValueError):
        return "?"
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def _names_host(line: str, name: str) -> bool:
    fields = line.split()
    if not fields or line.lstrip().startswith("#"):
        return False
    hosts = fields[1] if fields[0].startswith("@") and len(fields) > 1 else fields[0]
    for pattern in hosts.split(","):
        if pattern.startswith("|1|"):
            try:
                _, _, salt, digest = pattern.split("|")
                mac = hmac.new(base64.b64decode(salt), name.encode(), hashlib.sha1).digest()
            except (ValueError, TypeError):
                continue
            if hmac.compare_digest(base64.b64encode(mac).decode(), digest):
                return True
        elif pattern == name:
            return True
    return False
