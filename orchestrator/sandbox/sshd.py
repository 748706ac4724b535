"""One worker's OpenSSH server: its config, starting it in fresh namespaces, waiting for it.

Each worker is one `sshd -D` started inside its own mount and UTS namespace
(`unshare`), with the worker's private directories bound over the paths a real
worker uses and its own hostname.
"""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import orchestrator.sandbox.namespaces as namespaces
from orchestrator.errors import SandboxError
from orchestrator.sandbox.spec import SHARED_MOUNT, WORKER_HOME, WORKER_ROOT
from orchestrator.sandbox.state import WorkerState

SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = "/run/sshd"
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def sshd_config(dir: Path, name: str, address: str, port: int, sshd_version: tuple[int, int] | None) -> str:
    """One worker's sshd_config (used with `sshd -f`, so nothing comes from /etc/ssh)."""
    wdir = dir / "workers" / name
    lines = [
        f"# sshd for sandbox worker {name}",
        f"ListenAddress {address}:{port}",
        f"HostKey {wdir / 'ssh_host_ed25519_key'}",
        f"AuthorizedKeysFile {dir / 'authorized_keys'}",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "PermitRootLogin prohibit-password",
        # A worker's login environment may carry variables (~/.ssh/environment),
        # as real workers' do: stale ones are what the launcher must not inherit.
        "PermitUserEnvironment yes",
        "PidFile none",
        "StrictModes no",
        "Subsystem sftp internal-sftp",
        # Parallel fan-out opens one connection per worker per client; a few
        # test sessions at once must not hit the default 10:30:100 drops.
        "MaxStartups 128",
        "MaxSessions 64",
        "PrintMotd no",
        "PrintLastLog no",
        "UseDNS no",
        "LogLevel INFO",
    ]
    if sshd_version and sshd_version >= (9, 8):
        # Timeouts and refusals are what the fault tests provoke; never
        # penalize the loopback clients for them.
        lines.append("PerSourcePenalties no")
    return "\n".join(lines) + "\n"


def sshd_version() -> tuple[int, int] | None:
    """The installed OpenSSH's (major, minor), None when it cannot say."""
    try:
        out = subprocess.run([SSHD, "-V"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"OpenSSH_(\d+)\.(\d+)", out.stderr + out.stdout)
    return (int(match.group(1)), int(match.group(2))) if match else None


def check_config(path: Path) -> None:
    """SandboxError when `sshd -t` rejects the config at `path`."""
    check = subprocess.run([SSHD, "-t", "-f", str(path)], capture_output=True, text=True, timeout=30)
    if check.returncode != 0:
        raise SandboxError(f"sshd rejects the generated config: {check.stderr.strip()}", hint=f"see {path}")


def start_worker(dir: Path, name: str, address: str, port: int) -> None:
    """Start one worker's sshd in fresh namespaces, detached from us (its pid lands in sshd.pid)."""
    wdir = dir / "workers" / name
    pidfile = wdir / "sshd.pid"
    pidfile.unlink(missing_ok=True)
    steps = [
        ["mount", "--bind", str(wdir / "root"), WORKER_ROOT],
        ["mount", "--bind", str(wdir / "home"), WORKER_HOME],
        ["mount", "--bind", str(dir / "shared"), SHARED_MOUNT],
        ["mount", "--bind", str(wdir / "tmp"), "/tmp"],
        ["mount", "--bind", str(dir / "hosts"), "/etc/hosts"],
        ["hostname", name],
    ]
    # unshare execs sh, sh execs sshd: `$$` is the sshd's pid.
    script = (
        f"echo $$ > {shlex.quote(str(pidfile))} && "
        + " && ".join(shlex.join(s) for s in steps)
        + " && exec "
        + shlex.join([SSHD, "-D", "-e", "-f", str(wdir / "sshd_config")])
    )
    argv = ["setsid", "-f", "unshare", "--mount", "--uts", "--propagation", "private", "sh", "-c", script]
    env = {"PATH": _PATH, "LANG": "C.UTF-8"}
    with open(wdir / "sshd.log", "ab") as log:
        # setsid -f forks and returns at once: the worker is never our child, so
        # it outlives this process and never lingers as our zombie.
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, check=True, timeout=30)


def wait_ready(dir: Path, wanted: Mapping[str, tuple[int, str]], port: int, timeout: float) -> list[WorkerState]:
    """Wait until each sshd answers with a banner; name stragglers and failures.

    `wanted` maps a worker's name to its (index, address).
    """
    pending = dict(wanted)
    ready: list[WorkerState] = []
    deadline = time.monotonic() + timeout
    while pending:
        for name, (index, address) in list(pending.items()):
            state = _answering(dir, name, index, address, port)
            if state is not None:
                ready.append(state)
                del pending[name]
        if not pending:
            break
        if time.monotonic() > deadline:
            raise _not_ready(dir, wanted, pending, port, timeout)
        time.sleep(0.05)  # polling a socket of a process that is not ours: nothing to wait on
    return sorted(ready, key=lambda w: w.index)


def _answering(dir: Path, name: str, index: int, address: str, port: int) -> WorkerState | None:
    """The worker's state once its sshd answers; None while it is starting; SandboxError if it died."""
    try:
        pid = int((dir / "workers" / name / "sshd.pid").read_text().strip())
    except (OSError, ValueError):
        return None
    info = namespaces.proc(pid)
    if info is None or info.gone:
        raise SandboxError(
            f"{name}: sshd exited during start-up: {_log_tail(dir, name) or 'no output'}",
            hint=f"see {dir / 'workers' / name / 'sshd.log'}",
        )
    if not _banner(address, port):
        return None
    return WorkerState(
        name=name,
        index=index,
        address=address,
        port=port,
        hostname=name,
        pid=pid,
        starttime=info.starttime,
        mnt_ns=namespaces.namespace(pid, "mnt") or 0,
        uts_ns=namespaces.namespace(pid, "uts") or 0,
    )


def _not_ready(
    dir: Path, wanted: Mapping[str, tuple[int, str]], pending: Mapping[str, tuple[int, str]], port: int, timeout: float
) -> SandboxError:
    late = []
    for name, (_, address) in pending.items():
        tail = _log_tail(dir, name, 1)
        late.append(f"{name} ({address}:{port}{': ' + tail if tail else ''})")
    ready = len(wanted) - len(pending)
    return SandboxError(
        f"{ready}/{len(wanted)} workers ready after {timeout:g}s; not answering: {', '.join(late)}",
        hint=f"logs: {dir / 'workers'}/<worker>/sshd.log",
    )


def _log_tail(dir: Path, name: str, lines: int = 3) -> str:
    try:
        text = (dir / "workers" / name / "sshd.log").read_text(errors="replace")
    except OSError:
        return ""
    return " | ".join(text.strip().splitlines()[-lines:])


def _banner(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.5) as sock:
            sock.settimeout(1.0)
            return sock.recv(64).startswith(b"SSH-")
    except OSError:
        return False
