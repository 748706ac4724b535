"""The local pod slice: real sshd workers on one Linux machine.

Each worker is one OpenSSH `sshd` started inside its own mount and UTS
namespace (`unshare`), so it has its own hostname (`slice-w3`), listens on its
own loopback address (127.0.1.4:22) and sees private directories at the paths
a real worker uses:

    /var/lib/orch       <dir>/workers/<name>/root    the worker root
    /tmp                <dir>/workers/<name>/tmp
    /root               <dir>/workers/<name>/home    empty shell startup files
    /mnt/orch-shared    <dir>/shared                 one directory for all workers
    /etc/hosts          <dir>/hosts                  every worker's hostname -> its address

Because /tmp, /root, /var/lib/orch and /mnt/orch-shared are rebound inside the
workers, the sandbox directory itself must live elsewhere (sshd inside a worker
reads its config and keys from it); the default is /var/tmp/orch-sandbox.

`up` writes keys, known_hosts and a ready `<dir>/fleet.yaml`, starts the
workers and waits until every sshd answers; `state.json` records what runs.
A worker is everything in its namespace: the sshd, each session it forked and
anything those left behind, so `pause`/`resume`/`kill`/`down` act on the
sshd's process tree plus every process in its namespaces.
"""

from __future__ import annotations

import errno
import fcntl
import ipaddress
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from orchestrator.errors import SandboxError

SLICE = "slice"
DEFAULT_DIR = "/var/tmp/orch-sandbox"
DIR_ENV = "ORCH_SANDBOX_DIR"
DEFAULT_BASE_ADDRESS = "127.0.1.1"
PORT = 22
WORKER_ROOT = "/var/lib/orch"
SHARED_MOUNT = "/mnt/orch-shared"
WORKER_HOME = "/root"
SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = "/run/sshd"
READY_TIMEOUT = 20.0
MAX_WORKERS = 256
STATE_SCHEMA = 1
CHIPS_PER_WORKER = 4  # v6e hosts carry 4 chips each; only the name uses it here

# Paths a worker rebinds to private copies (or the shared dir): the sandbox
# directory must not be under any of them.
REBOUND_PATHS = ("/tmp", WORKER_HOME, WORKER_ROOT, SHARED_MOUNT)

# The files `down` removes; anything else in the directory is left alone.
_OWNED_FILES = ("state.json", "fleet.yaml", "known_hosts", "authorized_keys", "id_ed25519", "id_ed25519.pub", "hosts")
_OWNED_DIRS = ("workers", "shared")

# The real bundles the sandbox fleet defines (later features and tests use these names).
BUNDLES: dict[str, dict] = {
    "jax-cpu": {
        "python": "3.11",
        "pins": ["jax==0.10.2", "jaxlib==0.10.2"],
        "note": "stock jax/jaxlib 0.10.2 on the CPU backend (the last jax line for Python 3.11); "
        "multi-process with gloo collectives",
    },
    "jax-libtpu": {
        "python": "3.11",
        "pins": ["jax==0.10.2", "jaxlib==0.10.2", "libtpu==0.0.42.1"],
        "note": "jax 0.10.2 with libtpu 0.0.42.1: a lane that intends a TPU; with no chip, jax falls "
        "back to CPU unless JAX_PLATFORMS=tpu makes the failure explicit",
    },
    "torch-cpu": {
        "python": "3.11",
        "pins": ["torch==2.13.0+cpu"],
        "note": "PyTorch 2.13.0 CPU-only build (no CUDA libraries); torch.distributed over gloo",
    },
}
PLATFORMS = ("cpu", "tpu")
FORBIDDEN_VARS = ("XLA_USE_BF16", "XLA_USE_SPMD")
RUNTIME_PROFILES: dict[str, dict[str, str]] = {
    "cpu": {"JAX_PLATFORMS": "cpu", "PJRT_DEVICE": "CPU"},
    "tpu": {"PJRT_DEVICE": "TPU"},
}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


# ---------------------------------------------------------------------------
# Data


@dataclass(frozen=True)
class LaneSpec:
    """A lane of the sandbox fleet: the next `count` workers, in index order."""

    name: str
    count: int
    platform: str
    bundle: str

    def __str__(self) -> str:
        return f"{self.name}:{self.count}:{self.platform}:{self.bundle}"


@dataclass(frozen=True)
class WorkerState:
    """One running worker as `up` started it."""

    name: str
    index: int
    address: str
    port: int
    hostname: str
    pid: int  # the worker's sshd (listener); its namespaces live as long as it does
    starttime: int  # /proc/<pid>/stat field 22: guards against a reused pid
    mnt_ns: int  # namespace inodes: find everything that runs "on" this worker
    uts_ns: int


@dataclass(frozen=True)
class SandboxState:
    """What `up` started (and `state.json` records)."""

    dir: str
    slice: str
    base_address: str
    port: int
    lanes: tuple[LaneSpec, ...]
    workers: tuple[WorkerState, ...]
    fleet_path: str
    started_at: float
    already_running: bool = False  # `up` found this sandbox running with the same shape
    restarted: tuple[str, ...] = ()  # workers `up` found dead and started again

    @property
    def shape(self) -> dict:
        return _shape(len(self.workers), self.lanes, self.base_address, self.port)

    def worker(self, ref: str | int) -> WorkerState:
        return _find_worker(self, ref)

    def to_dict(self) -> dict:
        return {
            "schema_version": STATE_SCHEMA,
            "dir": self.dir,
            "slice": self.slice,
            "base_address": self.base_address,
            "port": self.port,
            "lanes": [asdict(lane) for lane in self.lanes],
            "workers": [asdict(w) for w in self.workers],
            "fleet_path": self.fleet_path,
            "started_at": self.started_at,
        }

    @classmethod
    def from_dict(cls, doc: dict) -> SandboxState:
        return cls(
            dir=doc["dir"],
            slice=doc["slice"],
            base_address=doc["base_address"],
            port=doc["port"],
            lanes=tuple(LaneSpec(**lane) for lane in doc["lanes"]),
            workers=tuple(WorkerState(**w) for w in doc["workers"]),
            fleet_path=doc["fleet_path"],
            started_at=doc["started_at"],
        )


@dataclass(frozen=True)
class WorkerStatus:
    """A worker as it is now: running, paused (SIGSTOPped) or dead."""

    name: str
    index: int
    address: str
    port: int
    hostname: str
    pid: int
    state: str
    processes: int  # processes on the worker (sshd, sessions, what they started)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SandboxStatus:
    """Every worker of the sandbox in `dir` (none when nothing is up)."""

    dir: str
    fleet_path: str | None
    workers: tuple[WorkerStatus, ...]

    @property
    def up(self) -> bool:
        return bool(self.workers)

    def to_dict(self) -> dict:
        return {
            "schema_version": STATE_SCHEMA,
            "dir": self.dir,
            "up": self.up,
            "fleet_path": self.fleet_path,
            "workers": [w.to_dict() for w in self.workers],
        }


@dataclass(frozen=True)
class WorkerAction:
    """What `pause`, `resume` or `kill` did to one worker."""

    name: str
    action: str
    pids: tuple[int, ...]


@dataclass(frozen=True)
class DownResult:
    """What `down` stopped and removed."""

    dir: str
    stopped: tuple[str, ...]  # workers whose processes were ended
    killed: int  # processes ended
    removed: tuple[str, ...] = field(default=())  # paths removed


# ---------------------------------------------------------------------------
# Pure parts: directory rules, addresses, lanes, files


def sandbox_dir(value: str | os.PathLike | None = None) -> Path:
    """The sandbox directory: `value`, then $ORCH_SANDBOX_DIR, then /var/tmp/orch-sandbox."""
    return Path(value or os.environ.get(DIR_ENV) or DEFAULT_DIR)


def check_dir(value: str | os.PathLike) -> Path:
    """The absolute sandbox directory, or SandboxError if workers could not see it."""
    path = Path(os.path.abspath(os.path.expanduser(str(value))))
    real = Path(os.path.realpath(path))
    if real == Path("/"):
        raise SandboxError(
            f"sandbox dir {path} is the filesystem root", hint=f"use a directory of its own, e.g. --dir {DEFAULT_DIR}"
        )
    for candidate in (path, real):
        for rebound in REBOUND_PATHS:
            if candidate == Path(rebound) or Path(rebound) in candidate.parents:
                raise SandboxError(
                    f"sandbox dir {path} is under {rebound}, which every worker replaces with its own "
                    f"private copy, so a worker's sshd could not read its config and keys there",
                    hint=f"use a directory elsewhere, e.g. --dir {DEFAULT_DIR}",
                )
    return path


def worker_name(index: int) -> str:
    return f"{SLICE}-w{index}"


def worker_addresses(base_address: str, workers: int) -> list[str]:
    """Consecutive loopback addresses from `base_address`, one per worker."""
    if not 1 <= workers <= MAX_WORKERS:
        raise SandboxError(f"--workers {workers}: expected 1 to {MAX_WORKERS}")
    try:
        base = ipaddress.IPv4Address(base_address)
    except ValueError:
        raise SandboxError(
            f"--base-address {base_address!r} is not an IPv4 address",
            hint=f"use a loopback address such as {DEFAULT_BASE_ADDRESS}",
        ) from None
    loopback = ipaddress.IPv4Network("127.0.0.0/8")
    last = int(base) + workers - 1
    if base not in loopback or last >= int(loopback.broadcast_address) or base == loopback.network_address:
        raise SandboxError(
            f"--base-address {base_address}: {workers} worker address(es) from there must stay "
            f"inside 127.0.0.1-127.255.255.254 (every 127.x.y.z is this machine's loopback)",
            hint=f"use e.g. --base-address {DEFAULT_BASE_ADDRESS}",
        )
    return [str(ipaddress.IPv4Address(int(base) + i)) for i in range(workers)]


def parse_lane_spec(text: str) -> LaneSpec:
    """`NAME:COUNT:PLATFORM:BUNDLE` -> LaneSpec, or SandboxError saying what is wrong."""
    from orchestrator.yamlsrc import did_you_mean

    usage = "expected NAME:COUNT:PLATFORM:BUNDLE, e.g. cpu:4:cpu:jax-cpu"
    parts = text.split(":")
    if len(parts) != 4 or not all(parts):
        raise SandboxError(f"--lane {text!r}: {usage}")
    name, count, platform, bundle = parts
    if not _NAME.match(name):
        raise SandboxError(f"--lane {text!r}: lane name '{name}' must be letters, digits, '.', '_' or '-'")
    if not count.isdigit() or int(count) < 1:
        raise SandboxError(f"--lane {text!r}: COUNT '{count}' must be a whole number of workers, at least 1")
    if platform not in PLATFORMS:
        raise SandboxError(
            f"--lane {text!r}: PLATFORM '{platform}' must be one of: {', '.join(PLATFORMS)}"
            f"{did_you_mean(platform, PLATFORMS)}"
        )
    if bundle not in BUNDLES:
        raise SandboxError(
            f"--lane {text!r}: no bundle '{bundle}'{did_you_mean(bundle, BUNDLES)} "
            f"(sandbox bundles: {', '.join(BUNDLES)})"
        )
    return LaneSpec(name=name, count=int(count), platform=platform, bundle=bundle)


def plan_lanes(workers: int, lanes: Sequence[LaneSpec | str] | None) -> tuple[LaneSpec, ...]:
    """The sandbox's lanes: one `cpu` lane over all workers by default, else the given split."""
    if not lanes:
        return (LaneSpec(name="cpu", count=workers, platform="cpu", bundle="jax-cpu"),)
    specs = tuple(lane if isinstance(lane, LaneSpec) else parse_lane_spec(lane) for lane in lanes)
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise SandboxError(f"--lane: lane '{spec.name}' is given twice; each lane needs its own name")
        seen.add(spec.name)
    total = sum(spec.count for spec in specs)
    if total != workers:
        counts = " + ".join(str(spec.count) for spec in specs)
        raise SandboxError(
            f"--lane counts add up to {total} ({counts}) but --workers is {workers}; "
            f"every worker belongs to exactly one lane"
        )
    return specs


def known_hosts_name(address: str, port: int) -> str:
    """How ssh and paramiko name a host in known_hosts."""
    return address if port == 22 else f"[{address}]:{port}"


def _c(text: str, comment: str) -> str:
    """A YAML line with its comment in the comment column."""
    return f"{text:<36}# {comment}"


def render_fleet(dir: str | os.PathLike, addresses: Sequence[str], lanes: Sequence[LaneSpec], port: int = PORT) -> str:
    """The sandbox's fleet.yaml text (paths relative to the file)."""
    q = json.dumps  # a JSON string is a YAML scalar that never changes meaning
    n = len(addresses)
    lines = [
        f"# Local pod slice written by `orch sandbox up` in {dir}.",
        f"# {n} real sshd worker(s) on loopback, each in its own mount + UTS namespace: own",
        f"# hostname, own {WORKER_ROOT}, /tmp and home; {SHARED_MOUNT} is one directory every",
        "# worker sees. `orch sandbox down` stops the workers and removes this file.",
        "version: 1",
        "",
        "ssh:",
        _c("  known_hosts: known_hosts", "this sandbox's host keys, written by `up`"),
        "  host_key_policy: strict",
        "  connect_timeout: 5",
        "",
        "slices:",
        f"  {SLICE}:",
        _c(f"    accelerator_type: v6e-{CHIPS_PER_WORKER * n}", "nominal: no TPU chips here"),
        f"    root: {WORKER_ROOT}",
        _c(f"    shared_dir: {SHARED_MOUNT}", "stand-in for a Filestore/NFS mount"),
        _c("    python: python3", "Debian's /usr/bin/python3 inside a worker"),
        "    user: root",
        "    identity_file: id_ed25519",
        _c("    skip_metadata_query: true", "off-GCE: libtpu must not wait for a metadata server"),
    ]
    if port != 22:
        lines.append(f"    port: {port}")
    lines.append("    workers:")
    lines += [f"      - {{index: {i}, address: {a}}}" for i, a in enumerate(addresses)]
    lines += ["", "# Sources left empty: pip's own configuration says where wheels come from.", "bundles:"]
    for name, b in BUNDLES.items():
        lines += [
            f"  {name}:",
            f"    python: {q(b['python'])}",
            f"    pins: [{', '.join(b['pins'])}]",
            "    provenance:",
            f"      note: {q(b['note'])}",
        ]
    lines += ["", "# Environment applied before any frontend is imported.", "runtime_profiles:"]
    for name, env in RUNTIME_PROFILES.items():
        lines += [f"  {name}:", "    env:"] + [f"      {k}: {q(v)}" for k, v in env.items()]
        lines.append(f"    forbid: [{', '.join(FORBIDDEN_VARS)}]")
    lines += [
        "",
        "cache_policies:",
        "  per-host:",
        _c("    mode: per-host", "<root>/cache on each worker's own disk"),
        "  shared:",
        _c("    mode: single-writer", "process 0 warms, the others read"),
        f"    root: {SHARED_MOUNT}/cache",
        "",
        "lanes:",
    ]
    start = 0
    for lane in lanes:
        end = start + lane.count - 1
        workers = str(start) if lane.count == 1 else q(f"{start}-{end}")
        lines += [
            f"  {lane.name}:",
            f"    workers: {workers}",
            f"    bundle: {lane.bundle}",
            f"    runtime: {lane.platform}",
            "    cache: per-host",
            f"    platform: {lane.platform}",
        ]
        start = end + 1
    return "\n".join(lines) + "\n"


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


def _shape(workers: int, lanes: Sequence[LaneSpec], base_address: str, port: int) -> dict:
    return {"workers": workers, "lanes": [str(lane) for lane in lanes], "base_address": base_address, "port": port}


def _describe_shape(shape: dict) -> str:
    return (
        f"{shape['workers']} worker(s) from {shape['base_address']}:{shape['port']}, lanes {' '.join(shape['lanes'])}"
    )


# ---------------------------------------------------------------------------
# Processes (Linux /proc)


@dataclass(frozen=True)
class _Proc:
    ppid: int
    state: str
    starttime: int


def _proc(pid: int) -> _Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    rest = raw[raw.rindex(")") + 2 :].split()  # comm may hold spaces and parentheses
    return _Proc(ppid=int(rest[1]), state=rest[0], starttime=int(rest[19]))


def _processes() -> dict[int, _Proc]:
    procs = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = _proc(int(entry))
            if info is not None:
                procs[int(entry)] = info
    return procs


def _ns(pid: int | str, kind: str) -> int | None:
    try:
        link = os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None
    match = re.search(r"\[(\d+)\]", link)
    return int(match.group(1)) if match else None


def _alive(ws: WorkerState, procs: dict[int, _Proc] | None = None) -> _Proc | None:
    """The worker's sshd if it is still the process `up` started (not a reused pid, not a zombie)."""
    info = procs.get(ws.pid) if procs is not None else _proc(ws.pid)
    if info is None or info.starttime != ws.starttime or info.state in ("Z", "X", "x"):
        return None
    return info


def _ancestors() -> set[int]:
    """This process and its ancestors: never signalled, even when run inside a worker."""
    chain, pid = set(), os.getpid()
    while pid > 1 and pid not in chain:
        chain.add(pid)
        info = _proc(pid)
        pid = info.ppid if info else 0
    return chain


def _worker_processes(ws: WorkerState, procs: dict[int, _Proc] | None = None) -> set[int]:
    """The worker's sshd, its descendants, and anything else in its namespaces."""
    procs = procs if procs is not None else _processes()
    found: set[int] = set()
    if _alive(ws, procs):
        children: dict[int, list[int]] = {}
        for pid, info in procs.items():
            children.setdefault(info.ppid, []).append(pid)
        stack = [ws.pid]
        while stack:
            pid = stack.pop()
            if pid not in found:
                found.add(pid)
                stack.extend(children.get(pid, ()))
    # Processes that left the tree (daemonized, reparented to init) still run
    # "on" this worker: they share its namespaces. Both inodes must match, and
    # never the host's own namespaces.
    host = (_ns("self", "mnt"), _ns("self", "uts"), _ns(1, "mnt"), _ns(1, "uts"))
    if ws.mnt_ns and ws.uts_ns and ws.mnt_ns not in host and ws.uts_ns not in host:
        for pid, info in procs.items():
            if (
                info.state not in ("Z", "X", "x")
                and pid not in found
                and _ns(pid, "mnt") == ws.mnt_ns
                and _ns(pid, "uts") == ws.uts_ns
            ):
                found.add(pid)
    return {pid for pid in found if procs.get(pid) and procs[pid].state not in ("Z", "X", "x")} - _ancestors()


def _signal(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _stop_all(ws: WorkerState) -> set[int]:
    """SIGSTOP the worker's processes until no new ones appear (a running one could fork)."""
    stopped: set[int] = set()
    for _ in range(20):
        fresh = _worker_processes(ws) - stopped
        if not fresh:
            break
        # The listener first, so it accepts no more sessions while we walk the rest.
        _signal(sorted(fresh, key=lambda p: p != ws.pid), signal.SIGSTOP)
        stopped |= fresh
    return stopped


def _kill_all(ws: WorkerState) -> set[int]:
    """SIGKILL everything on the worker (stopped first, so nothing escapes by forking)."""
    pids = _stop_all(ws)
    _signal(pids, signal.SIGKILL)
    _wait_gone(pids)
    return pids


def _wait_gone(pids: Iterable[int], timeout: float = 5.0) -> None:
    pending = set(pids)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            info = _proc(pid)
            if info is None or info.state in ("Z", "X", "x"):
                pending.discard(pid)
        if pending:
            time.sleep(0.02)


def _stray_sshds(dir: Path, known: Iterable[int]) -> list[int]:
    """sshd processes started for `dir` that state.json does not know (e.g. an interrupted `up`)."""
    marker = f"{dir}/workers/".encode()
    known = set(known)
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in known:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = fh.read().rstrip(b"\0").split(b"\0")
        except OSError:
            continue
        # sshd rewrites its title into argv[0] ("sshd: /usr/sbin/sshd -D ... [listener]");
        # sh and unshare are a worker still starting up.
        program = os.path.basename(argv[0].split(b":")[0].split(b" ")[0])
        if program in (b"sshd", b"sh", b"unshare") and marker in b" ".join(argv):
            found.append(int(entry))
    return found


def _as_worker_state(pid: int, name: str = "?") -> WorkerState | None:
    info = _proc(pid)
    if info is None:
        return None
    return WorkerState(
        name=name,
        index=-1,
        address="",
        port=0,
        hostname="",
        pid=pid,
        starttime=info.starttime,
        mnt_ns=_ns(pid, "mnt") or 0,
        uts_ns=_ns(pid, "uts") or 0,
    )


# ---------------------------------------------------------------------------
# Files


def _write_atomic(path: Path, data: str | bytes, mode: int = 0o644) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data.encode() if isinstance(data, str) else data)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def _new_key(path: Path, comment: str) -> str:
    """Write an ed25519 private key (OpenSSH format) and its .pub; return the public line."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    _write_atomic(path, private, 0o600)
    _write_atomic(path.with_name(path.name + ".pub"), f"{public} {comment}\n", 0o644)
    return public


def _public_key(path: Path) -> str:
    return " ".join(path.with_name(path.name + ".pub").read_text().split()[:2])


def _read_state(dir: Path) -> SandboxState | None:
    path = dir / "state.json"
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise SandboxError(
            f"{path}: unreadable sandbox state ({exc})",
            hint=f"`orch sandbox down --dir {dir}` stops what it can find and removes it",
        ) from None
    if doc.get("schema_version") != STATE_SCHEMA:
        raise SandboxError(
            f"{path}: state schema_version {doc.get('schema_version')!r}, expected {STATE_SCHEMA}",
            hint=f"`orch sandbox down --dir {dir}`",
        )
    return SandboxState.from_dict(doc)


def _write_state(state: SandboxState) -> None:
    _write_atomic(Path(state.dir) / "state.json", json.dumps(state.to_dict(), indent=2) + "\n")


@contextmanager
def _locked(dir: Path) -> Iterator[None]:
    """One sandbox command at a time per directory."""
    fd = os.open(dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _find_worker(state: SandboxState, ref: str | int) -> WorkerState:
    from orchestrator.yamlsrc import did_you_mean

    text = str(ref)
    for w in state.workers:
        if text in (w.name, str(w.index)):
            return w
    names = [w.name for w in state.workers]
    raise SandboxError(
        f"no sandbox worker '{text}'{did_you_mean(text, names)} (workers: {', '.join(names)}; "
        f"or their index 0-{len(names) - 1})"
    )


# ---------------------------------------------------------------------------
# Preflight


def _sshd_version() -> tuple[int, int] | None:
    try:
        out = subprocess.run([SSHD, "-V"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"OpenSSH_(\d+)\.(\d+)", out.stderr + out.stdout)
    return (int(match.group(1)), int(match.group(2))) if match else None


def preflight() -> None:
    """Raise SandboxError with the exact fix if this machine cannot run the sandbox."""
    if os.geteuid() != 0:
        raise SandboxError(
            "the local slice needs root (it creates mount namespaces and binds sshd to port 22)",
            hint="run it as root, e.g. `sudo orch sandbox up ...`",
        )
    if not os.path.exists(SSHD):
        raise SandboxError(f"no OpenSSH server: {SSHD} is missing", hint="apt-get install openssh-server")
    for tool, package in (
        ("unshare", "util-linux"),
        ("setsid", "util-linux"),
        ("mount", "mount"),
        ("hostname", "hostname"),
    ):
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
    try:
        with open("/etc/shadow") as fh:
            root = next((line.split(":") for line in fh if line.startswith("root:")), None)
    except OSError:
        root = None
    if root and len(root) > 1 and root[1].startswith("!"):
        # With UsePAM no, sshd refuses every login to a locked account, keys included.
        raise SandboxError(
            "root's account is locked ('!' in /etc/shadow), so sshd refuses key logins as root",
            hint="usermod -p '*' root   (no password, but not locked)",
        )


def _address_free(address: str, port: int) -> bool:
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
    return all(_address_free(a, port) for a in addresses)


def _check_addresses(addresses: Sequence[str], port: int, workers: int) -> None:
    busy = [a for a in addresses if not _address_free(a, port)]
    if not busy:
        return
    suggestion = None
    base = ipaddress.IPv4Address(addresses[0])
    for step in range(1, 64):
        candidate = str(ipaddress.IPv4Address((int(base) & ~0xFF) + step * 256 + 1))
        try:
            if addresses_free(worker_addresses(candidate, workers), port):
                suggestion = candidate
                break
        except SandboxError:
            break
    raise SandboxError(
        f"{', '.join(f'{a}:{port}' for a in busy)} already in use (another sandbox or sshd listens there)",
        hint=(f"pick free addresses, e.g. --base-address {suggestion}, " if suggestion else "")
        + f"or find the listener with `ss -ltnp 'sport = :{port}'` and stop it "
        "(a sandbox: `orch sandbox down --dir ITS_DIR`)",
    )


# ---------------------------------------------------------------------------
# Starting workers


def _start_worker(dir: Path, name: str, address: str, port: int) -> None:
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
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    with open(wdir / "sshd.log", "ab") as log:
        # setsid -f forks and returns at once: the worker is never our child, so
        # it outlives this process and never lingers as our zombie.
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, check=True, timeout=30)


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


def _wait_ready(dir: Path, wanted: dict[str, tuple[int, str]], port: int, timeout: float) -> list[WorkerState]:
    """Wait until each sshd answers with a banner; name stragglers and failures."""
    pending = dict(wanted)
    ready: list[WorkerState] = []
    deadline = time.monotonic() + timeout
    while pending:
        for name, (index, address) in list(pending.items()):
            try:
                pid = int((dir / "workers" / name / "sshd.pid").read_text().strip())
            except (OSError, ValueError):
                continue
            info = _proc(pid)
            if info is None or info.state in ("Z", "X", "x"):
                raise SandboxError(
                    f"{name}: sshd exited during start-up: {_log_tail(dir, name) or 'no output'}",
                    hint=f"see {dir / 'workers' / name / 'sshd.log'}",
                )
            if _banner(address, port):
                ready.append(
                    WorkerState(
                        name=name,
                        index=index,
                        address=address,
                        port=port,
                        hostname=name,
                        pid=pid,
                        starttime=info.starttime,
                        mnt_ns=_ns(pid, "mnt") or 0,
                        uts_ns=_ns(pid, "uts") or 0,
                    )
                )
                del pending[name]
        if not pending:
            break
        if time.monotonic() > deadline:
            late = ", ".join(
                f"{n} ({a}:{port}{': ' + _log_tail(dir, n, 1) if _log_tail(dir, n, 1) else ''})"
                for n, (_, a) in pending.items()
            )
            raise SandboxError(
                f"{len(wanted) - len(pending)}/{len(wanted)} workers ready after {timeout:g}s; not answering: {late}",
                hint=f"logs: {dir / 'workers'}/<worker>/sshd.log",
            )
        time.sleep(0.05)
    return sorted(ready, key=lambda w: w.index)


def _prepare(dir: Path, addresses: Sequence[str], lanes: Sequence[LaneSpec], port: int) -> None:
    """Keys, known_hosts, authorized_keys, worker directories and configs, fleet.yaml."""
    for mount_point in (WORKER_ROOT, SHARED_MOUNT, PRIVSEP_DIR):
        os.makedirs(mount_point, exist_ok=True)
    os.chmod(PRIVSEP_DIR, 0o755)
    (dir / "shared").mkdir(mode=0o755, exist_ok=True)
    client = _new_key(dir / "id_ed25519", "orch-sandbox-client")
    _write_atomic(dir / "authorized_keys", f"{client} orch-sandbox-client\n", 0o600)
    version = _sshd_version()
    known = []
    for index, address in enumerate(addresses):
        name = worker_name(index)
        wdir = dir / "workers" / name
        for sub, mode in (("root", 0o755), ("home", 0o700), ("tmp", 0o1777)):
            (wdir / sub).mkdir(parents=True, exist_ok=True)
            os.chmod(wdir / sub, mode)
        for rc in (".bashrc", ".profile"):
            # A real worker VM's fresh home: no startup work per remote command.
            _write_atomic(wdir / "home" / rc, f"# {name}: sandbox worker home\n")
        host = _new_key(wdir / "ssh_host_ed25519_key", f"root@{name}")
        known.append(f"{known_hosts_name(address, port)} {host}")
        _write_atomic(wdir / "sshd_config", sshd_config(dir, name, address, port, version))
    _write_atomic(dir / "known_hosts", "\n".join(known) + "\n")
    # Like a slice's VPC DNS: every worker resolves every worker's hostname
    # (collective backends bind to the address their own hostname resolves to).
    _write_atomic(
        dir / "hosts",
        "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n"
        + "".join(f"{a} {worker_name(i)}\n" for i, a in enumerate(addresses)),
    )
    check = subprocess.run(
        [SSHD, "-t", "-f", str(dir / "workers" / worker_name(0) / "sshd_config")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if check.returncode != 0:
        raise SandboxError(
            f"sshd rejects the generated config: {check.stderr.strip()}",
            hint=f"see {dir / 'workers' / worker_name(0) / 'sshd_config'}",
        )
    _write_atomic(dir / "fleet.yaml", render_fleet(dir, addresses, lanes, port))


# ---------------------------------------------------------------------------
# Public operations


def up(
    dir: str | os.PathLike,
    workers: int,
    lanes: Sequence[LaneSpec | str] | None = None,
    base_address: str = DEFAULT_BASE_ADDRESS,
    *,
    port: int = PORT,
    timeout: float = READY_TIMEOUT,
) -> SandboxState:
    """Start a local slice of `workers` sshd workers in `dir` and write `dir/fleet.yaml`.

    Running it again with the same shape changes nothing (workers found dead
    are started again); a different shape is refused until `down`.
    """
    path = check_dir(dir)
    addresses = worker_addresses(base_address, workers)
    specs = plan_lanes(workers, lanes)
    shape = _shape(workers, specs, base_address, port)
    preflight()
    path.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        state = _read_state(path)
        if state is not None:
            alive = [w for w in state.workers if _alive(w)]
            if alive and state.shape != shape:
                raise SandboxError(
                    f"a sandbox is already running in {path} ({_describe_shape(state.shape)}); "
                    f"asked for {_describe_shape(shape)}",
                    hint=f"run `orch sandbox down --dir {path}` first",
                )
            if alive:
                return _restart_dead(path, state, timeout)
        _teardown(path, state)
        _check_addresses(addresses, port, workers)
        try:
            _prepare(path, addresses, specs, port)
            for index, address in enumerate(addresses):
                _start_worker(path, worker_name(index), address, port)
            started = _wait_ready(path, {worker_name(i): (i, a) for i, a in enumerate(addresses)}, port, timeout)
        except BaseException:
            _teardown(path, _read_state(path))
            raise
        state = SandboxState(
            dir=str(path),
            slice=SLICE,
            base_address=base_address,
            port=port,
            lanes=specs,
            workers=tuple(started),
            fleet_path=str(path / "fleet.yaml"),
            started_at=time.time(),
        )
        _write_state(state)
        return state


def _restart_dead(dir: Path, state: SandboxState, timeout: float) -> SandboxState:
    dead = [w for w in state.workers if not _alive(w)]
    if not dead:
        return SandboxState(**{**state.__dict__, "already_running": True})
    for w in dead:
        _kill_all(w)  # leftovers in its old namespaces
    busy = [w for w in dead if not _address_free(w.address, w.port)]
    if busy:
        raise SandboxError(
            f"cannot restart {', '.join(w.name for w in busy)}: "
            f"{', '.join(f'{w.address}:{w.port}' for w in busy)} taken by another process",
            hint=f"run `orch sandbox down --dir {dir}` first",
        )
    for w in dead:
        _start_worker(dir, w.name, w.address, w.port)
    fresh = {w.name: w for w in _wait_ready(dir, {w.name: (w.index, w.address) for w in dead}, state.port, timeout)}
    workers = tuple(fresh.get(w.name, w) for w in state.workers)
    new = SandboxState(**{**state.__dict__, "workers": workers})
    _write_state(new)
    return SandboxState(**{**new.__dict__, "already_running": True, "restarted": tuple(fresh)})


def _teardown(dir: Path, state: SandboxState | None) -> tuple[list[str], int, list[str]]:
    """Kill every worker process of `dir` (known or stray) and remove what `up` created."""
    stopped, killed = [], 0
    known = list(state.workers) if state else []
    for w in known:
        pids = _kill_all(w)
        if pids:
            stopped.append(w.name)
            killed += len(pids)
    for pid in _stray_sshds(dir, [w.pid for w in known]):
        stray = _as_worker_state(pid)
        if stray is not None:
            killed += len(_kill_all(stray))
    removed = []
    for name in _OWNED_DIRS:
        target = dir / name
        if target.exists():
            shutil.rmtree(target)
            removed.append(str(target))
    for name in _OWNED_FILES:
        target = dir / name
        if target.exists():
            target.unlink()
            removed.append(str(target))
    return stopped, killed, removed


def down(dir: str | os.PathLike) -> DownResult:
    """Stop every worker and everything running on it, and remove the sandbox's files.

    Worker roots, /tmp copies, homes and the shared directory go too (they may
    hold GBs of environments and caches). Other files in `dir` are kept; `dir`
    itself is removed when empty. `down` on nothing is fine.
    """
    path = check_dir(dir)
    if not path.is_dir():
        return DownResult(dir=str(path), stopped=(), killed=0)
    with _locked(path):
        stopped, killed, removed = _teardown(path, _read_state(path))
    try:
        path.rmdir()
    except OSError:
        pass
    return DownResult(dir=str(path), stopped=tuple(stopped), killed=killed, removed=tuple(removed))


def status(dir: str | os.PathLike) -> SandboxStatus:
    """Each worker's state now: running, paused or dead."""
    path = check_dir(dir)
    state = _read_state(path) if path.is_dir() else None
    if state is None:
        return SandboxStatus(dir=str(path), fleet_path=None, workers=())
    procs = _processes()
    rows = []
    for w in state.workers:
        info = _alive(w, procs)
        if info is None:
            condition = "dead"
        elif info.state in ("T", "t"):
            condition = "paused"
        else:
            condition = "running"
        members = _worker_processes(w, procs)
        rows.append(
            WorkerStatus(
                name=w.name,
                index=w.index,
                address=w.address,
                port=w.port,
                hostname=w.hostname,
                pid=w.pid,
                state=condition,
                processes=len(members),
            )
        )
    return SandboxStatus(dir=str(path), fleet_path=state.fleet_path, workers=tuple(rows))


def load_state(dir: str | os.PathLike) -> SandboxState:
    """The running sandbox's state, or SandboxError when there is none."""
    path = check_dir(dir)
    state = _read_state(path) if path.is_dir() else None
    if state is None:
        raise SandboxError(f"no sandbox in {path}", hint=f"start one with `orch sandbox up --dir {path} --workers N`")
    return state


def _live_worker(dir: str | os.PathLike, worker: str | int) -> tuple[SandboxState, WorkerState]:
    state = load_state(dir)
    ws = state.worker(worker)
    if not _alive(ws):
        raise SandboxError(
            f"{ws.name} is dead (its sshd {ws.pid} is gone)",
            hint=f"`orch sandbox up --dir {state.dir} --workers {len(state.workers)}` "
            "with the same options starts it again",
        )
    return state, ws


def pause(dir: str | os.PathLike, worker: str | int) -> WorkerAction:
    """SIGSTOP everything on a worker: a hung host (TCP still connects, nothing answers)."""
    _, ws = _live_worker(dir, worker)
    return WorkerAction(name=ws.name, action="paused", pids=tuple(sorted(_stop_all(ws))))


def resume(dir: str | os.PathLike, worker: str | int) -> WorkerAction:
    """SIGCONT everything on a paused worker."""
    _, ws = _live_worker(dir, worker)
    pids = _worker_processes(ws)
    _signal(pids, signal.SIGCONT)
    return WorkerAction(name=ws.name, action="resumed", pids=tuple(sorted(pids)))


def kill(dir: str | os.PathLike, worker: str | int) -> WorkerAction:
    """SIGKILL everything on a worker: a dead host (connections are refused)."""
    state = load_state(dir)
    ws = state.worker(worker)
    return WorkerAction(name=ws.name, action="killed", pids=tuple(sorted(_kill_all(ws))))


def regenerate_host_key(dir: str | os.PathLike, worker: str | int, *, timeout: float = READY_TIMEOUT) -> str:
    """Give a worker a new host key and restart its sshd, as a rebuilt VM would be.

    known_hosts keeps the old key on purpose: clients must now refuse the
    worker. Returns the new public key line.
    """
    path = check_dir(dir)
    with _locked(path):
        state = load_state(path)
        ws = state.worker(worker)
        _kill_all(ws)
        public = _new_key(path / "workers" / ws.name / "ssh_host_ed25519_key", f"root@{ws.name}")
        _start_worker(path, ws.name, ws.address, ws.port)
        fresh = _wait_ready(path, {ws.name: (ws.index, ws.address)}, ws.port, timeout)[0]
        _write_state(
            SandboxState(
                **{**state.__dict__, "workers": tuple(fresh if w.name == ws.name else w for w in state.workers)}
            )
        )
    return public


def host_key(dir: str | os.PathLike, worker: str | int) -> str:
    """A worker's current public host key line (`ssh-ed25519 AAAA...`)."""
    path = check_dir(dir)
    ws = load_state(path).worker(worker)
    return _public_key(path / "workers" / ws.name / "ssh_host_ed25519_key")
