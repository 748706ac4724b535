"""The files a sandbox directory holds: keys, known_hosts, worker directories, configs, fleet.yaml.

    <dir>/id_ed25519[.pub]   the client key every worker accepts (authorized_keys)
    <dir>/known_hosts        every worker's host key, for strict host key checking
    <dir>/hosts              every worker's hostname -> its address (each worker's /etc/hosts)
    <dir>/fleet.yaml         the fleet a controller uses to reach the workers
    <dir>/shared             one directory every worker sees at /mnt/orch-shared
    <dir>/workers/<name>/    root, home, tmp, sshd_config, host key, sshd.pid, sshd.log

`remove_owned` removes exactly these; anything else in the directory is left alone.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import orchestrator.sandbox.sshd as sshd
from hostside.files import write_atomic
from orchestrator.sandbox.fleetfile import known_hosts_name, render_fleet
from orchestrator.sandbox.spec import SHARED_MOUNT, WORKER_ROOT, LaneSpec, worker_names
from orchestrator.sandbox.state import STATE_FILE

OWNED_FILES = (STATE_FILE, "fleet.yaml", "known_hosts", "authorized_keys", "id_ed25519", "id_ed25519.pub", "hosts")
OWNED_DIRS = ("workers", "shared")
HOST_KEY = "ssh_host_ed25519_key"


def prepare(dir: Path, addresses: Sequence[str], lanes: Sequence[LaneSpec], port: int, slices: int = 1) -> None:
    """Keys, known_hosts, authorized_keys, worker directories and configs, fleet.yaml."""
    for mount_point in (WORKER_ROOT, SHARED_MOUNT, sshd.PRIVSEP_DIR):
        os.makedirs(mount_point, exist_ok=True)
    os.chmod(sshd.PRIVSEP_DIR, 0o755)
    (dir / "shared").mkdir(mode=0o755, exist_ok=True)
    client = new_key(dir / "id_ed25519", "orch-sandbox-client")
    _write(dir / "authorized_keys", f"{client} orch-sandbox-client\n", 0o600)
    version = sshd.sshd_version()
    known = []
    names = worker_names(len(addresses), slices)
    for name, address in zip(names, addresses, strict=True):
        host = _prepare_worker(dir, name, address, port, version)
        known.append(f"{known_hosts_name(address, port)} {host}")
    _write(dir / "known_hosts", "\n".join(known) + "\n")
    # Like a slice's VPC DNS: every worker resolves every worker's hostname
    # (collective backends bind to the address their own hostname resolves to).
    _write(
        dir / "hosts",
        "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n"
        + "".join(f"{a} {name}\n" for name, a in zip(names, addresses, strict=True)),
    )
    sshd.check_config(dir / "workers" / names[0] / "sshd_config")
    _write(dir / "fleet.yaml", render_fleet(dir, addresses, lanes, port, slices))


def _prepare_worker(dir: Path, name: str, address: str, port: int, version: tuple[int, int] | None) -> str:
    """One worker's directories, host key and sshd_config; returns its public host key."""
    wdir = dir / "workers" / name
    for sub, mode in (("root", 0o755), ("home", 0o700), ("tmp", 0o1777)):
        (wdir / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(wdir / sub, mode)
    for rc in (".bashrc", ".profile"):
        # A real worker VM's fresh home: no startup work per remote command.
        _write(wdir / "home" / rc, f"# {name}: sandbox worker home\n")
    host = new_key(wdir / HOST_KEY, f"root@{name}")
    _write(wdir / "sshd_config", sshd.sshd_config(dir, name, address, port, version))
    return host


def new_key(path: Path, comment: str) -> str:
    """Write an ed25519 private key (OpenSSH format) and its .pub; return the public line."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    _write(path, private.decode("ascii"), 0o600)
    _write(path.with_name(path.name + ".pub"), f"{public} {comment}\n")
    return public


def host_key_path(dir: Path, worker: str) -> Path:
    """Where a worker's private host key is."""
    return dir / "workers" / worker / HOST_KEY


def public_key(path: Path) -> str:
    """The `type base64` part of the public key beside the private key at `path`."""
    return " ".join(path.with_name(path.name + ".pub").read_text().split()[:2])


def remove_owned(dir: Path) -> list[str]:
    """Remove what `up` created in `dir` (and nothing else); returns the paths removed."""
    removed = []
    for name in OWNED_DIRS:
        target = dir / name
        if target.exists():
            shutil.rmtree(target)
            removed.append(str(target))
    for name in OWNED_FILES:
        target = dir / name
        if target.exists():
            target.unlink()
            removed.append(str(target))
    return removed


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    write_atomic(str(path), text, mode=mode)
