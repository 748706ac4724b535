"""Replaying connections: a plain `orch exec` without pydantic, YAML, click or Fabric on its path.

A cold `orch exec` spent most of its time before the first packet: importing
the fleet model (pydantic), YAML, click, Fabric and invoke (invoke alone pulls
in unittest.mock and asyncio). Every command after the first on an unchanged
fleet recomputes the same things: the validated workers, their SSH settings,
and what Fabric resolved from ssh_config for each worker (host name, port,
user, keys). So the full command line, when it connected, writes a *record*
of exactly that (`save`), and the next plain `orch exec` reads it (`load`)
and connects with paramiko alone (`DirectConnection`), through the same
`FabricTransport` (same host-key policy, timeouts, failure reports, command
ending) and prints what `cli/exec_cmd.py` prints.

A record is used only while everything it was derived from is unchanged: the
fleet file's bytes and the command-line SSH settings (the record's name is
the warm holder's key for them, `connections.holder_key`), every file Fabric
read to resolve the workers (ssh_config files and Fabric's own config files,
by content), and the interpreter. A worker reached through a gateway
(ProxyJump, ProxyCommand), with agent forwarding, with an authentication
strategy or with any connect argument outside `_PLAIN` (a password or a
passphrase is never written down) gets no record, and a command that needs
one takes the full command line. So does any doubt: a record that does not
parse into exactly the expected shape is ignored. The file lives in the
private holder directory (0700) and is written 0600, atomically.

paramiko alone: `paramiko.config` imports invoke only to evaluate `Match
exec` lines in ssh_config, which a replayed connection never reads; it is
imported here with invoke hidden (`import_paramiko`), saving about 100 ms. Its `__init__`
also asks `importlib.metadata` for its own version, which imports `email` and scans every installed
distribution (about 30 ms); the version is read from the name of its `.dist-info` directory
instead, when there is exactly one next to the package.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import connections as wire
from orchestrator.workers import WorkerRef

if TYPE_CHECKING:
    from orchestrator.fleet import Fleet

VERSION = 1
SUFFIX = ".replay.json"
# Plain connect arguments a record may carry, each with the types its value may have.
_PLAIN: dict[str, tuple[type, ...]] = {
    "key_filename": (list,),
    "look_for_keys": (bool,),
    "allow_agent": (bool,),
    "banner_timeout": (int, float),
    "auth_timeout": (int, float),
    "channel_timeout": (int, float),
    "compress": (bool,),
}
# What the record holds of the fleet's `ssh:` settings (transport/fabric.py's SshOptions).
_SSH_FIELDS: dict[str, tuple[type, ...]] = {
    "connect_timeout": (int, float),
    "command_timeout": (int, float),
    "max_parallel": (int,),
    "host_key_policy": (str,),
    "known_hosts": (str, type(None)),
    "config_file": (str, type(None)),
    "persist": (int, float),
}
_WORKER_FIELDS: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "slice": (str,),
    "index": (int,),
    "host": (str,),
    "port": (int, type(None)),
    "user": (str, type(None)),
    "identity_file": (str, type(None)),
    "internal_address": (str,),
    "root": (str,),
    "shared_dir": (str, type(None)),
    "python": (str,),
    "lane": (str, type(None)),
}
_CONNECT_FIELDS: dict[str, tuple[type, ...]] = {
    "host": (str,),
    "port": (int,),
    "user": (str,),
    "connect_timeout": (int, float, type(None)),
    "kwargs": (dict,),
}
_FABRIC_CONFIGS = ("/etc/fabric", "~/.fabric")
_FABRIC_SUFFIXES = ("yaml", "yml", "json", "py")


class RecordedSsh:
    """The fleet's `ssh:` settings as a record holds them (what FabricTransport reads)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.connect_timeout = float(values["connect_timeout"])
        self.command_timeout = float(values["command_timeout"])
        self.max_parallel = int(values["max_parallel"])
        self.host_key_policy = str(values["host_key_policy"])
        self.known_hosts: str | None = values["known_hosts"]
        self.config_file: str | None = values["config_file"]
        self.persist = float(values["persist"])


class Replay:
    """A validated record: the fleet's workers, lanes, SSH settings, and each worker's resolved connection."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.base_dir = Path(data["base_dir"])
        self.ssh = RecordedSsh(data["ssh"])
        self.workers = tuple(WorkerRef(**w) for w in data["workers"])
        self.lanes: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in data["lanes"].items()}
        self.connections: dict[str, dict[str, Any]] = dict(data["connections"])

    def select(self, lane: str | None, selection: str | None) -> list[WorkerRef] | None:
        """The workers `--lane`/`--workers` pick, as Fleet.select does; None when the full CLI must say why."""
        from orchestrator.errors import ConfigError
        from orchestrator.workers import select_workers

        if lane is not None and lane not in self.lanes:
            return None
        by_name = {w.name: w for w in self.workers}
        if lane is not None and not all(n in by_name for n in self.lanes[lane]):
            return None
        # the lane's own order (its process ids), as Fleet.lane_workers gives it
        pool = list(self.workers) if lane is None else [by_name[n] for n in self.lanes[lane]]
        if not pool:
            return None
        try:
            return pool if selection is None else select_workers(pool, selection)
        except ConfigError:
            return None


# -- what a connection resolved ----------------------------------------------


def record(conn: Any) -> dict[str, Any] | None:
    """What Fabric resolved for an open, direct connection, as plain data; None when it cannot be replayed."""
    if conn.gateway or conn.forward_agent or conn.authentication.strategy_class is not None:
        return None
    kwargs = {k: v for k, v in dict(conn.connect_kwargs).items() if k != "transport_factory"}
    if "key_filename" in kwargs:
        keys = kwargs["key_filename"]
        kwargs["key_filename"] = [keys] if isinstance(keys, str) else list(keys or [])
    if not all(k in _PLAIN and _typed(v, _PLAIN[k]) for k, v in kwargs.items()):
        return None
    if not all(isinstance(k, str) for k in kwargs.get("key_filename", [])):
        return None
    return {
        "host": str(conn.host),
        "port": int(conn.port),
        "user": str(conn.user),
        "connect_timeout": conn.connect_timeout,
        "kwargs": kwargs,
    }


def import_paramiko() -> None:
    """Import paramiko without invoke and without `importlib.metadata` (see the module docstring); a
    no-op once paramiko is imported."""
    if "paramiko" in sys.modules or "invoke" in sys.modules:
        return
    hidden: dict[str, Any] = {"invoke": None}  # None makes `import invoke` raise ImportError
    version = _installed_version("paramiko")
    if version is not None and "importlib.metadata" not in sys.modules:
        hidden["importlib.metadata"] = _VersionOnly("paramiko", version)
    sys.modules.update(hidden)
    try:
        import paramiko  # noqa: F401
    finally:
        for name, stand_in in hidden.items():
            if sys.modules.get(name, 0) is stand_in:
                del sys.modules[name]


class _VersionOnly(types.ModuleType):
    """Stands in for `importlib.metadata` while paramiko is imported: its `__init__` asks only for its
    own version, which the real module answers after importing `email` and reading every installed
    distribution's metadata (about 30 ms of a cold command). Any other question goes to the real one."""

    def __init__(self, name: str, version: str) -> None:
        super().__init__("importlib.metadata")
        self._name, self._version = name, version

    def version(self, name: str) -> str:
        if name == self._name:
            return self._version
        if sys.modules.get("importlib.metadata") is self:
            del sys.modules["importlib.metadata"]  # step aside: the real module is imported in its place
        from importlib import metadata

        return metadata.version(name)


def _installed_version(name: str) -> str | None:
    """The version of the distribution `name` from its `NAME-VERSION.dist-info` directory next to the
    package, when there is exactly one; None when that is not certain."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith("__init__.py"):
        return None
    site = os.path.dirname(os.path.dirname(spec.origin))
    try:
        found = [
            entry[len(name) + 1 : -len(".dist-info")]
            for entry in os.listdir(site)
            if entry.lower().startswith(name + "-") and entry.endswith(".dist-info")
        ]
    except OSError:
        return None
    if len(found) != 1 or not found[0] or not all(c.isalnum() or c in ".+!_" for c in found[0]):
        return None
    return found[0]


class DirectConnection:
    """A connection opened from a record with paramiko's SSHClient, shaped as FabricTransport uses Fabric's.

    It serves commands read on their session (`create_session`) and closing;
    stdin streams and SFTP copies are Fabric's, and a replayed `orch exec` has neither.
    """

    gateway = False
    forward_agent = False

    def __init__(self, resolved: Mapping[str, Any]) -> None:
        import_paramiko()
        from paramiko import SSHClient

        from orchestrator.transport.algorithms import transport_class

        self.host: str = resolved["host"]
        self.original_host = self.host
        self.port: int = resolved["port"]
        self.user: str = resolved["user"]
        self.connect_timeout: float | None = resolved["connect_timeout"]
        self.connect_kwargs = {**resolved["kwargs"], "transport_factory": transport_class()}
        self.client = SSHClient()
        self.transport: Any = None

    @property
    def is_connected(self) -> bool:
        return bool(self.transport is not None and self.transport.active)

    def open(self) -> None:
        """Connect as Fabric's `Connection.open` does with the same arguments."""
        kwargs = dict(self.connect_kwargs, username=self.user, hostname=self.host, port=self.port)
        if self.connect_timeout:
            kwargs["timeout"] = self.connect_timeout
        if not kwargs.get("key_filename"):
            kwargs.pop("key_filename", None)
        self.client.connect(**kwargs)
        self.transport = self.client.get_transport()

    def create_session(self) -> Any:
        return self.transport.open_session()

    def close(self) -> None:
        self.client.close()
        self.transport = None


# -- the record on disk ------------------------------------------------------


def _typed(value: Any, types: tuple[type, ...]) -> bool:
    """isinstance, where a bool is not an int (JSON keeps them apart; so does a record)."""
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


def _read_file(path: str) -> bytes | None:
    """A file's content; None when absent."""
    try:
        return Path(os.path.expanduser(path)).read_bytes()
    except FileNotFoundError:
        return None


def depends_on(config_file: str | None) -> list[str]:
    """The files whose content decides what Fabric resolves for a worker (as fabric.Config loads them)."""
    ssh = [config_file] if config_file else ["~/.ssh/config", "/etc/ssh/ssh_config"]
    return ssh + [f"{prefix}.{suffix}" for prefix in _FABRIC_CONFIGS for suffix in _FABRIC_SUFFIXES]


def stamps(files: list[str]) -> dict[str, str | None] | None:
    """Each file's digest; None when an ssh_config file has a `Match` line (it may answer differently later)."""
    out: dict[str, str | None] = {}
    for name in files:
        content = _read_file(name)
        out[name] = hashlib.sha256(content).hexdigest() if content is not None else None
        if content is not None and "fabric" not in Path(name).name:
            text = content.decode(errors="replace")
            if any(line.strip().lower().startswith("match") for line in text.splitlines()):
                return None
    return out


def record_path(directory: Path, key: str) -> Path:
    return directory / f"{key}{SUFFIX}"


def save(
    fleet: Fleet, content: bytes, keyed: Mapping[str, Any], connections: Mapping[str, Mapping[str, Any]]
) -> Path | None:
    """Write (merge into) the record of `fleet`, validated from `content` and used with the command-line
    SSH settings `keyed`; the path, or None when there is nothing to replay.

    Connections recorded earlier under the same key and file stamps are kept;
    records of the same fleet file under other keys (an older content) are removed.
    """
    from dataclasses import asdict

    from hostside.files import write_atomic

    fleet_path = fleet.path.resolve()
    key = wire.holder_key(fleet_path, content, keyed)
    ssh = fleet.model.ssh.model_dump()
    files = depends_on(ssh.get("config_file"))
    current = stamps(files)
    if current is None:
        return None
    directory = wire.holder_dir()
    path = record_path(directory, key)
    merged: dict[str, Any] = {}
    old = _read(path)
    if old is not None and old.get("stamps") == current:
        merged.update(old["connections"])
    merged.update(connections)
    if not merged:
        return None
    doc = {
        "version": VERSION,
        "interpreter": sys.executable,
        "fleet": str(fleet_path),
        "base_dir": str(fleet.base_dir.resolve()),
        "stamps": current,
        "ssh": {k: ssh.get(k) for k in _SSH_FIELDS},
        "workers": [asdict(w) for w in fleet.workers],
        "lanes": {k: list(v) for k, v in fleet.lane_members.items()},
        "connections": merged,
    }
    if _valid(doc) is None:
        return None
    for other in directory.glob(f"*{SUFFIX}"):  # the same fleet's older records, and those of gone fleets
        named = str((_read(other) or {}).get("fleet"))
        if other != path and (named == str(fleet_path) or not os.path.exists(named)):
            other.unlink(missing_ok=True)
    write_atomic(path, json.dumps(doc, sort_keys=True).encode(), mode=0o600)
    return path


def load(key: str) -> Replay | None:
    """The record for `key` when it is whole and everything it was derived from is unchanged; else None."""
    try:
        directory = wire.holder_dir(create=False)
    except (OSError, wire.WireError):
        return None
    doc = _read(record_path(directory, key))
    if doc is None or doc.get("interpreter") != sys.executable:
        return None
    valid = _valid(doc)
    if valid is None or stamps(list(doc["stamps"])) != doc["stamps"]:
        return None
    return valid


def _read(path: Path) -> dict[str, Any] | None:
    try:
        st = os.lstat(path)
        if not os.path.isfile(path) or os.path.islink(path) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            return None
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _fields(value: Any, shape: Mapping[str, tuple[type, ...]]) -> bool:
    return (
        isinstance(value, dict)
        and set(value) == set(shape)
        and all(_typed(value[k], types) for k, types in shape.items())
    )


def _valid(doc: Mapping[str, Any]) -> Replay | None:
    """The record as a `Replay` when it has exactly the expected shape (it is read back, so untrusted)."""
    try:
        ok = (
            doc.get("version") == VERSION
            and isinstance(doc.get("fleet"), str)
            and isinstance(doc.get("base_dir"), str)
            and isinstance(doc.get("stamps"), dict)
            and all(isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in doc["stamps"].items())
            and _fields(doc.get("ssh"), _SSH_FIELDS)
            and doc["ssh"]["host_key_policy"] in ("strict", "accept-new")
            and isinstance(doc.get("workers"), list)
            and all(_fields(w, _WORKER_FIELDS) for w in doc["workers"])
            and isinstance(doc.get("lanes"), dict)
            and all(isinstance(v, list) and all(isinstance(n, str) for n in v) for v in doc["lanes"].values())
            and isinstance(doc.get("connections"), dict)
            and all(_connection_ok(v) for v in doc["connections"].values())
        )
        return Replay(doc) if ok else None
    except (KeyError, TypeError, ValueError):
        return None


def _connection_ok(value: Any) -> bool:
    if not _fields(value, _CONNECT_FIELDS):
        return False
    kwargs = value["kwargs"]
    return (
        all(k in _PLAIN and _typed(v, _PLAIN[k]) for k, v in kwargs.items())
        and all(isinstance(k, str) for k in kwargs.get("key_filename", []))
        and 0 < value["port"] < 65536
    )
