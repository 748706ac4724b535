"""Host-key checks: refuse unknown keys (strict) or record them (accept-new).

Fabric's own default is paramiko's AutoAddPolicy with no known_hosts loaded,
so `FabricTransport` replaces the policy with `_HostKeyPolicy` and loads the
right known_hosts on every connection, including every ProxyJump hop (Fabric
would build those itself, unchecked).

known_hosts is read here, not by paramiko (whose reader stops at the first
line it cannot decode, so one bad line failed every worker): a line that
cannot be read is skipped, as OpenSSH does, and named `file:line` when a
host's key is then not found. `@revoked` keys are never accepted, for any
host, and never recorded by accept-new. `@cert-authority` lines are not
honoured (paramiko cannot check host certificates): a host that only a
certificate authority vouches for is refused, naming that line.
"""

from __future__ import annotations

import fnmatch
import shlex
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from orchestrator.errors import HostKeyError
from orchestrator.workers import WorkerRef


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


@dataclass
class KnownHostsFile:
    """A known_hosts file as orch reads it: usable entries, and the lines it did not use."""

    path: Path
    entries: list[Any] = field(default_factory=list)  # paramiko HostKeyEntry, revoked keys left out
    revoked: list[tuple[int, Any]] = field(default_factory=list)  # (line, key)
    cert_authorities: list[tuple[int, list[str]]] = field(default_factory=list)  # (line, host patterns)
    unreadable: list[tuple[int, str]] = field(default_factory=list)  # (line, why)
    table: Any = None  # the usable entries as one paramiko HostKeys, filled by `read_known_hosts`

    def revoked_line(self, key: Any) -> int | None:
        """The line that revokes `key`, if one does."""
        return next((line for line, k in self.revoked if k == key), None)

    def authority_line(self, hostname: str) -> int | None:
        """The first @cert-authority line whose host patterns match `hostname`."""
        for line, patterns in self.cert_authorities:
            if any(fnmatch.fnmatchcase(hostname, p) for p in patterns if not p.startswith("!")) and not any(
                fnmatch.fnmatchcase(hostname, p[1:]) for p in patterns if p.startswith("!")
            ):
                return line
        return None

    def add_to(self, host_keys: Any) -> None:
        """Put the usable entries into paramiko's `HostKeys`."""
        for entry in self.entries:
            for name in entry.hostnames:
                host_keys.add(name, entry.key.get_name(), entry.key)

    def add_host_to(self, host_keys: Any, host: str, port: int | None) -> None:
        """Put into `host_keys` the keys paramiko looks up for `host:port` (exactly what it finds once
        `add_to` put every entry there), and no others: a connection to one worker then costs one
        lookup, not a copy of the whole file (which made a 256-worker fan-out quadratic)."""
        name = host if port in (None, 22) else f"[{host}]:{port}"
        found = self.table.lookup(name) if self.table is not None else None
        if found:
            for keytype in found.keys():
                host_keys.add(name, keytype, found[keytype])


_read_lock = threading.Lock()
# The key under which `read_known_hosts` keeps its last reading in a caller's cache.
READING = "known-hosts-reading"


def read_known_hosts(path: Path, cache: dict[str, Any] | None = None) -> KnownHostsFile:
    """`path` read line by line (an absent file is empty; a bad line never raises).

    With `cache` (one fan-out's: the transport's memo), the reading is kept there and the file read
    again only when it changed (size, times or inode): the connections of one fan-out check against
    one reading instead of each parsing every key of the file again, and a key that accept-new
    records is seen by the next connection.
    """
    if cache is None:
        return read_known_hosts_now(path)
    try:
        st = path.stat()
        stamp: tuple[int, ...] | None = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
    except OSError:
        stamp = None
    with _read_lock:
        cached = cache.get(READING)
        if cached is not None and stamp is not None and cached[:2] == (path, stamp):
            known: KnownHostsFile = cached[2]
            return known
        known = read_known_hosts_now(path)
        cache[READING] = (path, stamp, known)
        return known


def read_known_hosts_now(path: Path) -> KnownHostsFile:
    """Read `path` line by line (an absent file is empty); never raises on a bad line."""
    from paramiko.hostkeys import HostKeyEntry, HostKeys, InvalidHostKey

    out = KnownHostsFile(path)
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return out
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        marker = line.split(None, 1)[0] if line.startswith("@") else None
        body = line.split(None, 1)[1] if marker and len(line.split(None, 1)) > 1 else line
        if marker not in (None, "@revoked", "@cert-authority"):
            out.unreadable.append((number, f"unknown marker {marker[:40]!r}"))
            continue
        if len(body.split()) < 3:
            out.unreadable.append((number, "expected HOSTS KEYTYPE KEY"))
            continue
        try:
            entry = HostKeyEntry.from_line(body, number)
        except (InvalidHostKey, ValueError, TypeError, IndexError) as exc:
            why = exc.args[1] if isinstance(exc, InvalidHostKey) and len(exc.args) > 1 else exc
            out.unreadable.append((number, f"not a known_hosts line ({str(why)[:80]})"))
            continue
        except Exception as exc:  # paramiko raises its own SSHException for a malformed key blob
            out.unreadable.append((number, f"not a known_hosts line ({type(exc).__name__}: {str(exc)[:80]})"))
            continue
        if entry is None:
            continue  # a key type paramiko does not know: not usable, not an error (as paramiko)
        if marker == "@revoked":
            out.revoked.append((number, entry.key))
        elif marker == "@cert-authority":
            out.cert_authorities.append((number, list(entry.hostnames)))
        else:
            out.entries.append(entry)
    revoked = [k for _, k in out.revoked]
    out.entries = [e for e in out.entries if e.key not in revoked]
    out.table = HostKeys()
    out.add_to(out.table)
    return out


class _HostKeyPolicy:
    """Refuse unknown keys (strict) or record them (accept-new); never auto-add silently or a revoked key."""

    def __init__(
        self, transport: KnownHosts, worker: WorkerRef, role: str = "", known: KnownHostsFile | None = None
    ) -> None:
        self.transport = transport
        self.worker = worker
        self.role = role  # "jump host " for a ProxyJump hop on the way to `worker`
        self.known = known or KnownHostsFile(transport.known_hosts_path)

    def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:  # paramiko's policy interface
        t = self.transport
        fingerprint = key.fingerprint
        where = t.known_hosts_display
        revoked = self.known.revoked_line(key)
        if revoked is not None:
            raise HostKeyError(
                f"host key for {self.role}{hostname} ({key.get_name()} {fingerprint}) is REVOKED in "
                f"{where}:{revoked}; refusing to connect",
                host=self.worker.name,
                hint="the worker presents a key its owners withdrew: find out why before anything else",
            )
        authority = self.known.authority_line(hostname)
        if authority is not None:
            raise HostKeyError(
                f"host key for {self.role}{hostname} is vouched for only by the @cert-authority line "
                f"{where}:{authority}; orch does not check host certificates, so it refuses to connect",
                host=self.worker.name,
                hint=f"add the worker's own host key: {_keyscan_fix(hostname, where)}",
            )
        if t.host_key_policy == "accept-new" and t.known_hosts_path is not None:
            with t._known_hosts_lock:
                t.known_hosts_path.parent.mkdir(parents=True, exist_ok=True)
                with open(t.known_hosts_path, "a") as fh:
                    fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
            t.accepted_keys.append((self.worker.name, hostname, fingerprint))
            return
        skipped = "; ".join(f"{where}:{line} skipped: {why}" for line, why in self.known.unreadable[:3])
        raise HostKeyError(
            f"host key for {self.role}{hostname} is not in {where} ({key.get_name()} {fingerprint}); "
            "refusing to connect" + (f" ({skipped})" if skipped else ""),
            host=self.worker.name,
            hint=f"verify that fingerprint out of band, then add it: {_keyscan_fix(hostname, t.known_hosts_display)}"
            " (or run once with --host-key-policy accept-new)",
        )


def _keyscan_fix(known_name: str, known_hosts: str) -> str:
    host, port = known_name, "22"
    if known_name.startswith("["):
        host, port = known_name[1:].split("]:")
    return f"ssh-keyscan -p {port} {shlex.quote(host)} >> {shlex.quote(known_hosts)}"
