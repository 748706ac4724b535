"""Heartbeat leases in a file: the lane's deploy lock and the cache writer's lease (stdlib only).

A lease is one JSON object in a file, created whole (temp file, then a hard
link into place, so a reader never sees half of one and two creators cannot
both win), carrying its holder's `token` and a `heartbeat` (wall-clock
seconds) that the holder rewrites while it works. Only the holder (same
token) refreshes or releases it. Everyone else judges it: a lease whose
heartbeat is older than the TTL is stale and may be taken over.

What a lease file says is untrusted (written by another host, by hand, or
torn by a full disk): `read` never raises on its content. `null`, a list, a
non-numeric heartbeat or a non-string token make an "unreadable" `Reading`,
with the reason. A lease without a token is held by nobody who can refresh
or release it: it only ages.

The two leases name their fields differently on disk (the deploy lock
`token`/`heartbeat`, the cache lease `nonce`/`heartbeat_at`); a `Fields`
says which. Staleness is decided in one place, `judge`.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from hostside import files

MODE = 0o644  # readable by other users' status commands; only the holder writes it

# The controller lease: every helper orch leaves running on a worker while its
# controller works (a deploy's long actions and wheel relay, a launcher waiting
# for its release) ends itself when the controller has not renewed its lease for
# CONTROLLER_LEASE_TTL seconds of the worker's own monotonic clock. The
# controller renews every CONTROLLER_RENEW_EVERY seconds. docs/reliability.md
# documents the resulting bound (30 s).
CONTROLLER_LEASE_TTL = 20.0
CONTROLLER_RENEW_EVERY = 5.0


@dataclass(frozen=True)
class Fields:
    """The names of a lease's token and heartbeat fields in its file."""

    token: str = "token"
    heartbeat: str = "heartbeat"


@dataclass(frozen=True)
class Reading:
    """What a lease file said when read. `doc` is the parsed object only when `state` is held."""

    state: Literal["absent", "unreadable", "held"]
    doc: dict[str, Any] = field(default_factory=dict)
    token: str | None = None
    heartbeat: float | None = None
    mtime: float | None = None  # the file's, for an unreadable lease
    reason: str = ""  # why unreadable

    def is_ours(self, token: str | None) -> bool:
        """Held, and by `token`."""
        return self.state == "held" and token is not None and self.token == token


@dataclass(frozen=True)
class Verdict:
    """`absent`, `live` or `stale`, why, and the heartbeat's age in seconds (None when absent)."""

    state: Literal["absent", "live", "stale"]
    reason: str
    age: float | None = None


def parse(text: str, fields: Fields) -> Reading:
    """A lease from a file's text (pure): unreadable unless an object with a numeric heartbeat (and a string
    token, if any)."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        return Reading("unreadable", reason=f"not JSON ({getattr(exc, 'msg', exc)})")
    if not isinstance(doc, dict):
        return Reading("unreadable", reason=f"a JSON {type(doc).__name__}, not an object")
    token, beat = doc.get(fields.token), doc.get(fields.heartbeat)
    if token is not None and not isinstance(token, str):
        return Reading("unreadable", reason=f"{fields.token!r} is {token!r}, not a string")
    if isinstance(beat, bool) or not isinstance(beat, (int, float)) or beat != beat:
        return Reading("unreadable", reason=f"{fields.heartbeat!r} is {beat!r}, not a number")
    return Reading("held", doc=doc, token=token, heartbeat=float(beat))


def read(path: str, fields: Fields) -> Reading:
    """The lease at `path`; never raises on what the file says."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
            mtime: float | None = os.fstat(fh.fileno()).st_mtime
    except FileNotFoundError:
        return Reading("absent")
    except OSError as exc:
        return Reading("unreadable", mtime=_mtime(path), reason=f"cannot read it: {exc.strerror or exc}")
    reading = parse(text, fields)
    if reading.state == "unreadable":
        return Reading("unreadable", mtime=mtime, reason=reading.reason)
    return reading


def _mtime(path: str) -> float | None:
    try:
        return os.path.getmtime(path)
    except OSError:
        return None


def judge(reading: Reading, *, now: float, ttl: float, unreadable: Literal["age-by-mtime", "stale"]) -> Verdict:
    """Live or stale: a heartbeat older than `ttl` seconds is stale.

    An unreadable lease is either stale at once, or ages from its file's
    modification time (so a lease torn a moment ago is not taken while fresh).
    """
    if reading.state == "absent":
        return Verdict("absent", "no lease")
    if reading.state == "unreadable":
        if unreadable == "stale" or reading.mtime is None:
            return Verdict("stale", f"the lease file is unreadable: {reading.reason}")
        age = now - reading.mtime
        what = f"the lease file is unreadable ({reading.reason}) and was written"
        if age > ttl:
            return Verdict("stale", f"{what} {age:.0f}s ago (ttl {ttl:g}s)", age)
        return Verdict("live", f"{what} {max(age, 0.0):.1f}s ago", age)
    assert reading.heartbeat is not None
    age = now - reading.heartbeat
    if age > ttl:
        return Verdict("stale", f"its heartbeat expired {age:.0f}s ago (ttl {ttl:g}s)", age)
    return Verdict("live", f"heartbeat {max(age, 0.0):.1f}s ago", age)


def create(path: str, doc: dict[str, Any]) -> bool:
    """Create the lease file holding `doc`, whole, only if none exists; False when one does."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}-", dir=directory)
    text = json.dumps(doc, indent=1) + "\n"
    try:
        os.fchmod(fd, MODE)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.link(tmp, path)  # atomic and exclusive, also on NFS
        return True
    except FileExistsError:
        return False
    except OSError:
        # A filesystem without hard links: O_EXCL creation, then the content.
        try:
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, MODE)
        except FileExistsError:
            return False
        with os.fdopen(out, "w") as fh:
            fh.write(text)
        return True
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def refresh(path: str, fields: Fields, token: str, *, now: float, extra: dict[str, Any] | None = None) -> Reading:
    """Rewrite the heartbeat (and `extra`) if the lease is `token`'s; returns what was read before.

    `reading.is_ours(token)` says whether it was refreshed. Raises OSError when the write fails.
    """
    reading = read(path, fields)
    if reading.is_ours(token):
        files.write_json_atomic(path, {**reading.doc, **(extra or {}), fields.heartbeat: now}, mode=MODE)
    return reading


def release(path: str, fields: Fields, token: str) -> bool:
    """Remove the lease if it is `token`'s; False (and nothing touched) otherwise."""
    if not read(path, fields).is_ours(token):
        return False
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def remove_stale(path: str, fields: Fields, seen: Reading, tag: str) -> bool:
    """Remove the lease judged stale from `seen`, unless someone replaced it meanwhile.

    Moves the file aside first (one contender wins the rename), then checks it
    is still the lease that was judged; a fresh one is put back untouched.
    True when this call removed it; False when it was replaced or already gone.
    """
    aside = f"{path}.stale-{tag}"
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return False
    moved = read(aside, fields)
    if moved.state != seen.state or moved.token != seen.token or moved.heartbeat != seen.heartbeat:
        try:
            os.link(aside, path)
        except OSError:
            pass
        os.unlink(aside)
        return False
    os.unlink(aside)
    return True


class Observer:
    """Judges a lease from changes the reader itself observed, on its own monotonic clock.

    The heartbeat value is compared only with earlier values of itself, never
    with this host's clock: a holder on another host with a skewed clock is
    judged exactly as one here. The lease is live while its heartbeat changed
    within the last `ttl` seconds of the reader's watching (and from the first
    sighting, for `ttl` seconds: a reader that just arrived gives the holder a
    full ttl to show it renews)."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic):
        self.ttl, self.clock = ttl, clock
        self.last: object = _UNSEEN
        self.changed_at = clock()

    def see(self, value: object) -> bool:
        """Record one reading of the heartbeat; True while the lease is live."""
        now = self.clock()
        if value != self.last:
            self.last, self.changed_at = value, now
        return now - self.changed_at <= self.ttl

    def silent_for(self) -> float:
        """Seconds since the heartbeat last changed (or since the first reading)."""
        return self.clock() - self.changed_at


_UNSEEN = object()


def renewal(path: str, token: str) -> int | None:
    """The count in a renewal file (`{"token": T, "renewed": N}`, written by a shell command of the
    controller's) when it is `token`'s; None when absent, another token's or not that shape."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            doc = json.loads(fh.read(4096))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("token") != token:
        return None
    count = doc.get("renewed")
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def watch(
    path: str,
    fields: Fields,
    token: str,
    *,
    ttl: float,
    every: float,
    on_lost: Callable[[str], None],
    renewals: str | None = None,
) -> threading.Event:
    """Watch `token`'s lease at `path` from a daemon thread; call `on_lost(why)` once, when
    it is released, taken by another token, or it has not been renewed for `ttl` seconds of
    this reader's monotonic clock. A renewal is a change of its heartbeat or, with
    `renewals`, of that file's count for `token` (see `renewal`). Set the returned event to
    stop watching."""
    stop = threading.Event()
    observer = Observer(ttl)
    last: list[object] = [_UNSEEN]  # the last heartbeat read

    def loop() -> None:
        while not stop.wait(every):
            reading = read(path, fields)
            if reading.state == "absent" or (reading.state == "held" and reading.token != token):
                why = "released" if reading.state == "absent" else "taken by another holder"
                on_lost(f"the lease at {path} was {why}")
                return
            # An unreadable file (torn by a full disk) is no renewal: it only ages.
            if reading.state == "held":
                last[0] = reading.heartbeat
            beat = last[0] if renewals is None else (last[0], renewal(renewals, token))
            if not observer.see(beat):
                on_lost(f"the lease at {path} was not renewed for {observer.silent_for():.0f}s (bound {ttl:g}s)")
                return

    threading.Thread(target=loop, name="lease-watch", daemon=True).start()
    return stop
