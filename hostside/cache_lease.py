"""The single writer's lease on a shared compilation cache (`<cache dir>/writer.lease`).

A heartbeat lease (hostside.lease) naming its holder (worker, hostname,
machine id, boot id, pid, run id, bundle). A live lease held by another
process refuses a second writer (CacheRefusal); one whose holder is gone, or
whose heartbeat did not change for the TTL, is reclaimed. A holder on another
host is never judged by comparing its heartbeat's timestamp with this host's
clock: the second writer watches the heartbeat for up to the TTL instead.
A daemon thread rewrites the heartbeat while the writer runs.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from hostside import SCHEMA_VERSION, lease, procfs

LEASE_FILE = "writer.lease"
LEASE_ATTEMPTS = 6
# The writer lease is a heartbeat lease (hostside.lease) with these field names on disk.
LEASE_FIELDS = lease.Fields(token="nonce", heartbeat="heartbeat_at")


class CacheRefusal(Exception):
    """The cache policy cannot be applied: the launcher must not start the user code."""


def judge_lease(
    reading: lease.Reading,
    *,
    now: float,
    hostname: str,
    ttl: float,
    alive: Callable[..., bool] = procfs.alive,
    me: dict[str, str] | None = None,
) -> tuple[str, str]:
    """("none" | "live" | "stale" | "remote", why) for a writer lease as read.

    On the holder's own host (same machine id and boot id; the hostname for a
    lease that records neither) the holder's pid decides (a killed holder is
    stale at once), then the heartbeat, written by the same clock that judges
    it. A holder on another host is "remote": its heartbeat comes from another
    clock, so no timestamp comparison may call it stale; only watching the
    heartbeat change (`watch_remote`) can. An unreadable lease is stale.
    """
    if reading.state == "absent":
        return "none", "no writer lease"
    if reading.state == "held":
        holder = _holder_of(reading)
        where = _where(holder, hostname, me if me is not None else procfs.host_identity())
        if where == "earlier boot":
            return "stale", f"its holder's host ({holder.get('hostname')}) has rebooted since"
        if where == "remote":
            return "remote", f"held from another host ({holder.get('hostname', '?')}): judged by watching its heartbeat"
        pid, start = holder.get("pid"), holder.get("starttime")
        pid = pid if isinstance(pid, int) else None
        start = start if isinstance(start, int) else None
        if not alive(pid, start):
            return "stale", f"its holder (pid {holder.get('pid')} on {hostname}) is gone"
    verdict = lease.judge(reading, now=now, ttl=ttl, unreadable="stale")
    return verdict.state, verdict.reason


def _where(holder: dict[str, Any], hostname: str, me: dict[str, str]) -> str:
    """ "here", "earlier boot" (this machine, rebooted since) or "remote", for a lease's holder."""
    machine = holder.get("machine_id")
    if isinstance(machine, str) and machine and me.get("machine_id"):
        if machine != me["machine_id"]:
            return "remote"
        boot = holder.get("boot_id")
        return "earlier boot" if isinstance(boot, str) and boot and boot != me.get("boot_id") else "here"
    return "here" if holder.get("hostname") == hostname else "remote"


def watch_remote(path: str, seen: lease.Reading, ttl: float, every: float) -> tuple[str, str, lease.Reading]:
    """Watch a remote holder's lease until it shows itself live (its heartbeat changed) or stale (it did
    not change for `ttl` seconds of this host's monotonic clock); also "none" or "changed" (another
    lease replaced it). Returns the state, why, and the last reading."""
    observer = lease.Observer(ttl)
    observer.see(seen.heartbeat)
    while True:
        time.sleep(every)
        current = lease.read(path, LEASE_FIELDS)
        if current.state == "absent":
            return "none", "released while watched", current
        if current.state == "held" and current.token != seen.token:
            return "changed", "another writer took it while watched", current
        if current.state == "held" and current.heartbeat != seen.heartbeat:
            return "live", "its heartbeat changed while watched (holder on another host)", current
        if not observer.see(seen.heartbeat):
            why = f"its heartbeat did not change for {observer.silent_for():.0f}s of watching (ttl {ttl:g}s)"
            return "stale", why, current


def _holder_of(reading: lease.Reading) -> dict[str, Any]:
    holder = reading.doc.get("holder")
    return holder if isinstance(holder, dict) else {}


def describe_holder(holder: dict[str, Any]) -> str:
    """Who holds a writer lease, for messages."""
    return (
        f"{holder.get('worker', '?')} (host {holder.get('hostname', '?')}, pid {holder.get('pid', '?')}, "
        f"run {holder.get('run_id', '?')}, bundle {holder.get('bundle_id', '?')})"
    )


class Lease:
    """The single writer's lease on one cache directory (a hostside.lease), with its heartbeat thread."""

    def __init__(self, path: str, holder: dict[str, Any], *, ttl: float, interval: float):
        self.path = path
        self.holder = holder
        self.ttl = ttl
        self.interval = interval
        self.nonce = secrets.token_hex(8)
        self.acquired: str | None = None  # "new" | "reclaimed"
        self.reclaimed_from: dict[str, Any] | None = None  # the previous holder and why it was reclaimed
        self.state = "unheld"  # held | released | lost
        self.lost_reason: str | None = None
        self.heartbeats = 0
        self.on_lost: Callable[[Lease], None] | None = None  # called once (heartbeat thread) when lost
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _doc(self, now: float) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": "cache-writer-lease",
            "nonce": self.nonce,
            "holder": self.holder,
            "acquired_at": now,
            "heartbeat_at": now,
            "heartbeat_interval": self.interval,
            "ttl": self.ttl,
        }

    def acquire(self) -> None:
        """Take the lease, reclaiming an abandoned one; CacheRefusal while another writer's is live."""
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        hostname = socket.gethostname()
        for _ in range(LEASE_ATTEMPTS):
            if lease.create(self.path, self._doc(time.time())):
                self.acquired = "reclaimed" if self.reclaimed_from else "new"
                self.state = "held"
                return
            current = lease.read(self.path, LEASE_FIELDS)
            if current.state == "absent":
                continue  # released in between
            state, why = judge_lease(current, now=time.time(), hostname=hostname, ttl=self.ttl)
            if state == "remote":
                state, why, watched = watch_remote(self.path, current, self.ttl, min(1.0, self.ttl / 4))
                if state in ("none", "changed"):
                    continue
                current = watched
            if state == "live":
                holder = _holder_of(current)
                raise CacheRefusal(
                    f"the compilation cache {os.path.dirname(self.path)} already has a live writer: "
                    f"{describe_holder(holder)}, {why}. A second writer is refused; wait for that run to end "
                    f"or stop it (orch stop {holder.get('run_id', 'RUN')})"
                )
            if not lease.remove_stale(self.path, LEASE_FIELDS, current, self.nonce):
                continue  # someone else's fresh lease, or already gone: look again
            self.reclaimed_from = {**_holder_of(current), "reason": why, "heartbeat_at": current.heartbeat}
        raise CacheRefusal(
            f"could not take the writer lease {self.path} after {LEASE_ATTEMPTS} attempts "
            "(other writers keep taking it)"
        )

    def start(self) -> None:
        """Start the heartbeat thread."""
        self._thread = threading.Thread(target=self._beat, name="orch-cache-lease", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            if not self.beat():
                if self.on_lost is not None:
                    try:
                        self.on_lost(self)
                    except Exception as exc:  # the heartbeat thread must not die noisily
                        self.lost_reason = f"{self.lost_reason}; stopping writes failed: {exc}"
                return

    def beat(self) -> bool:
        """Rewrite the heartbeat if the lease is still ours; False once it is not."""
        try:
            current = lease.refresh(
                self.path, LEASE_FIELDS, self.nonce, now=time.time(), extra={"heartbeats": self.heartbeats + 1}
            )
        except OSError as exc:
            self.lost_reason = f"heartbeat failed: {exc}"
            return True
        if current.state == "unreadable":
            return True  # unreadable for a moment: look again at the next beat
        if not current.is_ours(self.nonce):
            self.state = "lost"
            self.lost_reason = (
                "the lease file was removed"
                if current.state == "absent"
                else f"taken over by {describe_holder(_holder_of(current))}"
            )
            return False
        self.heartbeats += 1
        return True

    def release(self) -> None:
        """Stop the heartbeat and remove the lease if it is still ours."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.interval + 1)
        if self.state != "held":
            return
        if lease.release(self.path, LEASE_FIELDS, self.nonce):
            self.state = "released"
        else:
            self.state = "lost"
            self.lost_reason = self.lost_reason or "the lease was not ours any more at exit"

    def summary(self) -> dict[str, Any]:
        """The lease as the process's record shows it."""
        return {
            "path": self.path,
            "state": self.state,
            "acquired": self.acquired,
            "holder": self.holder,
            "reclaimed_from": self.reclaimed_from,
            "ttl": self.ttl,
            "heartbeat_interval": self.interval,
            "heartbeats": self.heartbeats,
            "lost_reason": self.lost_reason,
        }
