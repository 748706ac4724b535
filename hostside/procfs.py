"""Who holds a file or a device on this worker, read from Linux /proc (stdlib only).

One answer for every caller: the probe's device check and the launch
preflight both ask here, so they cannot disagree about libtpu's lockfile.

The lock rule (`lock_holders`): an entry of /proc/locks names its file as
`MAJOR:MINOR:INODE` (device numbers in hex, from the kernel's superblock),
while `stat()` reports `st_dev` in the userspace encoding that
`os.major`/`os.minor` decode. Normally the two name the same device and an
entry is a holder when device and inode both match. Some filesystems report
a different device to `stat()` than the lock table carries (btrfs
subvolumes, overlayfs), so when no entry matches exactly, an entry with the
same inode still counts, unless the process's own open files show that it
does not have this file open (a holder of a POSIX or flock lock keeps the
file open). Waiters (`->` lines) never count, and neither do this process
and its ancestors (the SSH session that runs the job).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

LOCKS = "/proc/locks"
# TPU chip device nodes. /dev/vfio/vfio is the VFIO container node every VFIO user opens: not a chip.
DEVICE_PREFIXES = ("/dev/accel", "/dev/vfio/")
VFIO_CONTAINER = "/dev/vfio/vfio"
_WHERE = re.compile(r"([0-9a-fA-F]+):([0-9a-fA-F]+):(\d+)")


@dataclass(frozen=True)
class LockEntry:
    """One line of /proc/locks."""

    pid: int  # -1 for an open-file-description lock (no owning process)
    kind: str  # POSIX | FLOCK | OFDLCK | ...
    mode: str  # ADVISORY | MANDATORY
    access: str  # READ | WRITE
    blocked: bool  # a process waiting for the lock, not holding it
    major: int
    minor: int
    inode: int


def parse_locks(text: str) -> list[LockEntry]:
    """Entries of /proc/locks (pure).

    A line reads `1: POSIX  ADVISORY  WRITE 9018 fe:00:2146719 0 EOF`, or with
    `->` after the id for a process waiting on that lock. Lines that do not
    parse are skipped.
    """
    entries = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 6 or not parts[0].endswith(":"):
            continue
        blocked = parts[1] == "->"
        fields = parts[2:] if blocked else parts[1:]
        if len(fields) < 5:
            continue
        kind, mode, access, pid_text, where = fields[:5]
        m = _WHERE.fullmatch(where)
        if not m:
            continue
        try:
            pid = int(pid_text)
        except ValueError:
            continue
        entries.append(
            LockEntry(
                pid=pid,
                kind=kind,
                mode=mode,
                access=access,
                blocked=blocked,
                major=int(m.group(1), 16),
                minor=int(m.group(2), 16),
                inode=int(m.group(3)),
            )
        )
    return entries


def holders_of(
    entries: list[LockEntry], st_dev: int, st_ino: int, has_open: Callable[[int], bool | None] | None = None
) -> list[int]:
    """Pids holding a lock on the file with this `stat()` device and inode (pure; the rule in the module doc).

    `has_open(pid)` answers whether `pid` has the file open (None: cannot tell); it
    only vets the inode-alone fallback.
    """
    held = [e for e in entries if not e.blocked and e.inode == st_ino]
    exact = [e for e in held if (e.major, e.minor) == (os.major(st_dev), os.minor(st_dev))]
    if exact:
        return sorted({e.pid for e in exact})
    if has_open is None:
        return sorted({e.pid for e in held})
    return sorted({e.pid for e in held if e.pid <= 0 or has_open(e.pid) is not False})


class HasOpen:
    """Callable: does `pid` have the file (device, inode) open? None when its fds cannot be read."""

    def __init__(self, st_dev: int, st_ino: int):
        self.key = (st_dev, st_ino)

    def __call__(self, pid: int) -> bool | None:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            return None
        for fd in fds:
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == self.key:
                return True
        return False


def own_process_ids() -> set[int]:
    """This process and its ancestors (the SSH session running the job): never counted as holders."""
    out: set[int] = set()
    pid = os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        st = stat(pid)
        if st is None:
            break
        pid = st["ppid"]
    return out


def lock_holders(path: str, *, locks_text: str | None = None) -> list[int]:
    """Pids holding a POSIX/flock/OFD lock on `path` (-1: an OFD lock, owner unknown); [] when absent.

    This process and its ancestors are left out. `locks_text` replaces
    /proc/locks (for tests).
    """
    try:
        st = os.stat(path)
    except OSError:
        return []
    if locks_text is None:
        try:
            with open(LOCKS) as fh:
                locks_text = fh.read()
        except OSError:
            return []
    own = own_process_ids()
    pids = holders_of(parse_locks(locks_text), st.st_dev, st.st_ino, HasOpen(st.st_dev, st.st_ino))
    return [p for p in pids if p not in own]


# -- processes -----------------------------------------------------------------


def pids() -> list[int]:
    """Every process id visible in /proc, ascending."""
    return sorted(int(p) for p in os.listdir("/proc") if p.isdigit())


class ProcStat(TypedDict):
    """The fields of /proc/<pid>/stat that orch uses."""

    state: str
    ppid: int
    pgid: int
    sid: int
    starttime: int  # clock ticks since boot: with the pid, a process's identity


def stat(pid: int) -> ProcStat | None:
    """state, ppid, pgid, sid and starttime (clock ticks since boot) of `pid`, or None."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            text = fh.read()
    except OSError:
        return None
    rest = text[text.rfind(")") + 2 :].split()
    try:
        return {
            "state": rest[0],
            "ppid": int(rest[1]),
            "pgid": int(rest[2]),
            "sid": int(rest[3]),
            "starttime": int(rest[19]),
        }
    except (IndexError, ValueError):
        return None


def alive(pid: int | None, starttime: int | None = None) -> bool:
    """True when `pid` runs (not a zombie) and, if given, started at `starttime` (no pid reuse)."""
    if not isinstance(pid, int) or pid <= 0:  # pid files are read from disk: anything may be there
        return False
    st = stat(pid)
    if st is None or st["state"] in ("Z", "X"):
        return False
    return starttime is None or st["starttime"] == starttime


def cmdline(pid: int) -> str:
    """A process's command line joined by spaces; '' when it cannot be read."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def environ(pid: int) -> dict[str, str] | None:
    """The environment `pid` was exec'd with, or None when not readable."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def open_files(pid: int) -> list[str] | None:
    """Targets of `pid`'s open file descriptors, or None when they cannot be read (another user)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    out = []
    for fd in fds:
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return out


def is_chip_device(path: str) -> bool:
    """A TPU chip device node (/dev/accel*, /dev/vfio/N), not the VFIO container node."""
    return path.startswith(DEVICE_PREFIXES) and path != VFIO_CONTAINER


@dataclass(frozen=True)
class DeviceScan:
    """Who has a TPU chip device open, and how many processes could not be inspected."""

    holders: dict[int, list[str]]  # pid -> chip device paths it has open
    uninspected: int


def device_holders() -> DeviceScan:
    """Processes (other than this one and its ancestors) with a TPU chip device open."""
    own = own_process_ids()
    holders: dict[int, list[str]] = {}
    hidden = 0
    for pid in pids():
        if pid in own:
            continue
        files = open_files(pid)
        if files is None:
            hidden += 1
            continue
        held = sorted({f for f in files if is_chip_device(f)})
        if held:
            holders[pid] = held
    return DeviceScan(holders=holders, uninspected=hidden)


def host_identity() -> dict[str, str]:
    """This host's machine id and boot id: with a pid and a user, who a process is across hosts and reboots.

    Hostnames repeat (two laptops called `vm`); the machine id does not, and
    the boot id changes at every boot, so a holder recorded under another boot
    id is gone. Either is '' where the file cannot be read."""

    def first_line(path: str) -> str:
        try:
            with open(path) as fh:
                return fh.readline().strip()
        except OSError:
            return ""

    return {
        "machine_id": first_line("/etc/machine-id") or first_line("/var/lib/dbus/machine-id"),
        "boot_id": first_line("/proc/sys/kernel/random/boot_id"),
    }
