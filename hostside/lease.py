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
from dataclasses import dataclass, field
from typing import Any, Literal

from hostside import files

MODE = 0o644  # readable by other users' status commands; only the holder writes it


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
