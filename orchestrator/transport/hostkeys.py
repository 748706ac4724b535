"""Host-key checks: refuse unknown keys (strict) or record them (accept-new).

Fabric's own default is paramiko's AutoAddPolicy with no known_hosts loaded,
so `FabricTransport` replaces the policy with `_HostKeyPolicy` and loads the
right known_hosts on every connection, including every ProxyJump hop (Fabric
would build those itself, unchecked).
"""

from __future__ import annotations

import shlex
import threading
from pathlib import Path
from typing import Any, Protocol

from orchestrator.errors import HostKeyError
from orchestrator.fleet import WorkerRef


class KnownHosts(Protocol):
    """What the host-key policy reads and records on its transport."""

    @property
    def host_key_policy(self) -> str: ...

    @property
    def known_hosts_path(self) -> Path: ...

    @property
    def known_hosts_display(self) -> str: ...

    @property
    def accepted_keys(self) -> list[tuple[str, str, str]]: ...

    @property
    def _known_hosts_lock(self) -> threading.Lock: ...


class _HostKeyPolicy:
    """Refuse unknown keys (strict) or record them (accept-new); never auto-add silently."""

    def __init__(self, transport: KnownHosts, worker: WorkerRef, role: str = "") -> None:
        self.transport = transport
        self.worker = worker
        self.role = role  # "jump host " for a ProxyJump hop on the way to `worker`

    def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:  # paramiko's policy interface
        t = self.transport
        fingerprint = key.fingerprint
        if t.host_key_policy == "accept-new" and t.known_hosts_path is not None:
            with t._known_hosts_lock:
                t.known_hosts_path.parent.mkdir(parents=True, exist_ok=True)
                with open(t.known_hosts_path, "a") as fh:
                    fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
            t.accepted_keys.append((self.worker.name, hostname, fingerprint))
            return
        raise HostKeyError(
            f"host key for {self.role}{hostname} is not in {t.known_hosts_display} ({key.get_name()} {fingerprint}); "
            "refusing to connect",
            host=self.worker.name,
            hint=f"verify that fingerprint out of band, then add it: {_keyscan_fix(hostname, t.known_hosts_display)}"
            " (or run once with --host-key-policy accept-new)",
        )


def _keyscan_fix(known_name: str, known_hosts: str) -> str:
    host, port = known_name, "22"
    if known_name.startswith("["):
        host, port = known_name[1:].split("]:")
    return f"ssh-keyscan -p {port} {shlex.quote(host)} >> {shlex.quote(known_hosts)}"
