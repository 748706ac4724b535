"""Who holds a file or a device (hostside.procfs): the lock table parser, the matching rule, and one
answer for the probe and the launch preflight on a real held lockfile."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hostside import launch_preflight, probe_device, procfs

# Captured from a worker: a jax process holding /tmp/libtpu_lockfile, a flock with a waiter,
# an OFD lock (no owning pid), and a lock on the same inode number on another device.
PROC_LOCKS = textwrap.dedent("""\
    1: POSIX  ADVISORY  WRITE 9018 fe:00:2146719 0 EOF
    2: FLOCK  ADVISORY  WRITE 812 00:19:1203 0 EOF
    2: -> FLOCK  ADVISORY  WRITE 990 00:19:1203 0 EOF
    3: OFDLCK ADVISORY  READ  -1 fe:00:555 0 EOF
    4: POSIX  ADVISORY  WRITE 4242 fe:01:2146719 0 EOF
    garbage line
    5: POSIX  ADVISORY  WRITE notapid fe:00:1 0 EOF
    """)


def dev(major: int, minor: int) -> int:
    return os.makedev(major, minor)


def test_lock_table_lines_parse_into_pid_device_and_inode_and_junk_is_skipped():
    entries = procfs.parse_locks(PROC_LOCKS)
    assert entries[0] == procfs.LockEntry(
        pid=9018, kind="POSIX", mode="ADVISORY", access="WRITE", blocked=False, major=0xFE, minor=0, inode=2146719
    )
    assert [e.pid for e in entries] == [9018, 812, 990, -1, 4242]
    assert [e.blocked for e in entries] == [False, False, True, False, False]


def test_a_holder_is_matched_by_device_and_inode_and_waiters_do_not_count():
    entries = procfs.parse_locks(PROC_LOCKS)
    assert procfs.holders_of(entries, dev(0xFE, 0), 2146719) == [9018]
    assert procfs.holders_of(entries, dev(0, 0x19), 1203) == [812]
    assert procfs.holders_of(entries, dev(0xFE, 0), 555) == [-1]  # an OFD lock: held, owner unknown


def test_when_no_device_matches_the_inode_alone_counts_unless_the_process_shows_it_lacks_the_file():
    entries = procfs.parse_locks(PROC_LOCKS)
    # stat() reports another device than the lock table (btrfs subvolume, overlayfs)
    assert procfs.holders_of(entries, dev(0, 0x2A), 2146719) == [4242, 9018]
    assert procfs.holders_of(entries, dev(0, 0x2A), 2146719, has_open=lambda pid: pid == 9018) == [9018]
    assert procfs.holders_of(entries, dev(0, 0x2A), 2146719, has_open=lambda pid: None) == [4242, 9018]
    assert procfs.holders_of(entries, dev(0xFE, 0), 77) == []


def test_this_process_and_its_parent_are_never_holders():
    own = procfs.own_process_ids()
    assert os.getpid() in own and os.getppid() in own


def test_the_vfio_container_node_is_not_a_chip():
    assert procfs.is_chip_device("/dev/accel0") and procfs.is_chip_device("/dev/vfio/3")
    assert not procfs.is_chip_device("/dev/vfio/vfio") and not procfs.is_chip_device("/dev/null")


HOLD = {
    "fcntl": "import fcntl, sys, time; f = open(sys.argv[1], 'a'); fcntl.lockf(f, fcntl.LOCK_EX); "
    "print('locked', flush=True); time.sleep(60)",
    "flock": "import fcntl, sys, time; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
    "print('locked', flush=True); time.sleep(60)",
}


def probe_says(lockfile: Path) -> list[int]:
    check = probe_device.check_device({"platform": "tpu", "lockfile": str(lockfile)}, {}).to_dict()
    return [h["pid"] for h in check["data"]["lockfile"]["holders"]]


def preflight_says(root: Path, lockfile: Path) -> list[int]:
    doc = launch_preflight.preflight({"root": str(root), "lane": "l", "run_id": "r", "lockfile": str(lockfile)})
    return [h["pid"] for h in doc["lock_holders"]]


@pytest.mark.parametrize("kind", sorted(HOLD))
def test_the_probe_and_the_launch_preflight_agree_on_a_held_lockfile(tmp_path, kind):
    lockfile = tmp_path / "libtpu_lockfile"
    holder = subprocess.Popen([sys.executable, "-c", HOLD[kind], str(lockfile)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        assert probe_says(lockfile) == preflight_says(tmp_path / "root", lockfile) == [holder.pid]
    finally:
        holder.kill()
        holder.wait()
    # Once the holder is gone the file is stale: nobody holds it, for both.
    assert probe_says(lockfile) == preflight_says(tmp_path / "root", lockfile) == []
