"""Can this machine run a sandbox, and are the addresses it wants free? Each refusal says the fix."""

from __future__ import annotations

import errno
import ipaddress
import os
import shutil
import socket
import subprocess
from collections.abc import Sequence

import orchestrator.sandbox.sshd as sshd
from orchestrator.errors import SandboxError
from orchestrator.sandbox.spec import DEFAULT_BASE_ADDRESS, PORT, worker_addresses

_TOOLS = (("unshare", "util-linux"), ("setsid", "util-linux"), ("mount", "mount"), ("hostname", "hostname"))


def preflight() -> None:
    """Raise SandboxError with the exact fix if this machine cannot run the sandbox."""
    if os.geteuid() != 0:
        raise SandboxError(
            "the local slice needs root (it creates mount namespaces and binds sshd to port 22)",
            hint="run it as root, e.g. `sudo orch sandbox up ...`",
        )
    if not os.path.exists(sshd.SSHD):
        raise SandboxError(f"no OpenSSH server: {sshd.SSHD} is missing", hint="apt-get install openssh-server")
    for tool, package in _TOOLS:
        if not shutil.which(tool):
            raise SandboxError(f"`{tool}` is not installed", hint=f"apt-get install {package}")
    probe = subprocess.run(
        ["unshare", "--mount", "--uts", "--propagation", "private", "true"], capture_output=True, text=True, timeout=30
    )
    if probe.returncode != 0:
        raise SandboxError(
            f"cannot create mount/UTS namespaces: {probe.stderr.strip() or probe.returncode}",
            hint="run as root on a host or VM that allows them (in a container: --privileged, "
            "or at least CAP_SYS_ADMIN with unconfined seccomp/AppArmor)",
        )
    if _root_locked():
        # With UsePAM no, sshd refuses every login to a locked account, keys included.
        raise SandboxError(
            "root's account is locked ('!' in /etc/shadow), so sshd refuses key logins as root",
            hint="usermod -p '*' root   (no password, but not locked)",
        )


def _root_locked() -> bool:
    try:
        with open("/etc/shadow") as fh:
            root = next((line.split(":") for line in fh if line.startswith("root:")), None)
    except OSError:
        return False
    return bool(root and len(root) > 1 and root[1].startswith("!"))


def address_free(address: str, port: int) -> bool:
    """True when nothing listens on `address:port` (SandboxError when it is not a local address)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as sshd does: TIME_WAIT is no conflict
        try:
            sock.bind((address, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            if exc.errno == errno.EADDRNOTAVAIL:
                raise SandboxError(
                    f"{address} is not a local address on this machine",
                    hint=f"use a 127.x.y.z address, e.g. --base-address {DEFAULT_BASE_ADDRESS}",
                ) from None
            raise
    return True


def addresses_free(addresses: Sequence[str], port: int = PORT) -> bool:
    """True when nothing listens on any of `addresses` at `port`."""
    return all(address_free(a, port) for a in addresses)


def check_addresses(addresses: Sequence[str], port: int, workers: int) -> None:
    """SandboxError naming the busy addresses and, when there is one, a free base address."""
    busy = [a for a in addresses if not address_free(a, port)]
    if not busy:
        return
    suggestion = _free_base(addresses[0], port, workers)
    raise SandboxError(
        f"{', '.join(f'{a}:{port}' for a in busy)} already in use (another sandbox or sshd listens there)",
        hint=(f"pick free addresses, e.g. --base-address {suggestion}, " if suggestion else "")
        + f"or find the listener with `ss -ltnp 'sport = :{port}'` and stop it "
        "(a sandbox: `orch sandbox down --dir ITS_DIR`)",
    )


def _free_base(first: str, port: int, workers: int) -> str | None:
    """The next x.y.(z+k).1 from which `workers` addresses are free."""
    base = ipaddress.IPv4Address(first)
    for step in range(1, 64):
        candidate = str(ipaddress.IPv4Address((int(base) & ~0xFF) + step * 256 + 1))
        try:
            if addresses_free(worker_addresses(candidate, workers), port):
                return candidate
        except SandboxError:
            return None
    return None
