"""The lock model: a bundle's exact wheels as `locks/<bundle>.lock.json` records them.

A lock names every wheel of a bundle, dependencies included, with its sha256,
size, where it came from and its own metadata (Requires-Dist, Requires-Python,
tags). It is committed next to fleet.yaml.

The bundle id is a digest of what gets installed: the Python version and the
exact wheel files (name, version, filename, sha256, size). Provenance notes,
wheel sources and the pip version used are recorded in the lock but do not
change the id, so moving a mirror or editing a note does not force every
worker to rebuild an identical environment. `Lock.digest` covers the whole
file.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from hostside.files import write_atomic
from orchestrator.errors import BundleError, ConfigError

SCHEMA_VERSION = 1
_RELOCK_HINT = "re-create it with `orch bundle lock BUNDLE`"


@dataclass(frozen=True)
class WheelMeta:
    """A wheel's identity and its own metadata."""

    name: str  # canonical (PEP 503) name, e.g. "torch-xla"
    version: str
    filename: str
    requires_python: str | None
    requires_dist: tuple[str, ...]
    tags: tuple[str, ...]  # expanded from the filename, e.g. "cp311-cp311-manylinux_2_27_x86_64"

    @property
    def project(self) -> str:
        """The name as the wheel file spells it (torch_xla, ml_dtypes)."""
        return self.filename.split("-", 1)[0]

    @property
    def label(self) -> str:
        """'<project> <version>' for messages."""
        return f"{self.project} {self.version}"


def wheel_tags(filename: str) -> tuple[str, ...]:
    """Every tag a wheel file name stands for, expanded and sorted."""
    try:
        _, _, _, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename as exc:
        raise BundleError(f"{filename}: not a wheel file name ({exc})") from None
    return tuple(sorted(str(t) for t in tags))


@dataclass(frozen=True)
class LockedWheel(WheelMeta):
    """A wheel of a lock: metadata plus the exact bytes and where they came from."""

    sha256: str
    size: int
    source: str  # URL, or a path (relative paths are relative to fleet.yaml)

    def to_json(self) -> dict[str, object]:
        """The wheel's entry in the lock file."""
        return {
            "name": self.name,
            "version": self.version,
            "filename": self.filename,
            "sha256": self.sha256,
            "size": self.size,
            "source": self.source,
            "requires_python": self.requires_python,
            "requires_dist": list(self.requires_dist),
            "tags": list(self.tags),
        }

    @classmethod
    def from_json(cls, doc: object, where: str) -> LockedWheel:
        """Validate one `wheels[]` entry; raises ValueError naming `where`."""
        if not isinstance(doc, dict):
            raise ValueError(f"{where}: expected an object")
        try:
            wheel = cls(
                name=_str(doc, "name", where),
                version=_str(doc, "version", where),
                filename=_str(doc, "filename", where),
                sha256=_str(doc, "sha256", where),
                size=int(doc["size"]),
                source=_str(doc, "source", where),
                requires_python=doc.get("requires_python"),
                requires_dist=_strings(doc.get("requires_dist")),
                tags=_strings(doc.get("tags")),
            )
        except KeyError as missing:
            raise ValueError(f"{where}: missing {missing}") from None
        if not re.fullmatch(r"[0-9a-f]{64}", wheel.sha256):
            raise ValueError(f"{where}.sha256: expected 64 lowercase hex digits")
        return wheel


def _str(doc: Mapping[str, object], key: str, where: str) -> str:
    value = doc[key]
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}.{key}: expected a non-empty string")
    return value


def _strings(value: object) -> tuple[str, ...]:
    """A JSON list (or nothing) as a tuple of strings."""
    if not value:
        return ()
    if not isinstance(value, Iterable):
        raise TypeError(f"expected a list, got {value!r}")
    return tuple(str(v) for v in value)


def _str_map(value: object) -> dict[str, str]:
    """A JSON object (or nothing) as str -> str."""
    if not value:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"expected an object, got {value!r}")
    return {str(k): str(v) for k, v in value.items()}


def compute_bundle_id(python: str, wheels: Iterable[LockedWheel]) -> str:
    """16 hex digits of sha256 over the Python version and the exact wheel files."""
    doc = {
        "orch-bundle": 1,
        "python": python,
        "wheels": [
            [w.name, w.version, w.filename, w.sha256, w.size]
            for w in sorted(wheels, key=lambda w: (w.name, w.filename))
        ],
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Lock:
    """The content of a lock file."""

    bundle: str
    python: str
    pins: tuple[str, ...]
    source: dict[str, object]  # the bundle's `source` from fleet.yaml, as JSON
    provenance: dict[str, str]
    target: dict[str, str]
    resolver: dict[str, str]
    wheels: tuple[LockedWheel, ...]

    @property
    def bundle_id(self) -> str:
        """The id workers know the installed environment by (see the module docstring)."""
        return compute_bundle_id(self.python, self.wheels)

    @property
    def total_size(self) -> int:
        """Bytes of all wheels together."""
        return sum(w.size for w in self.wheels)

    @property
    def digest(self) -> str:
        """sha256 of the lock file's exact bytes."""
        return hashlib.sha256(self.dumps().encode()).hexdigest()

    def wheel(self, name: str) -> LockedWheel | None:
        """The wheel of distribution `name` (any spelling), if the lock has one."""
        key = canonicalize_name(name)
        return next((w for w in self.wheels if w.name == key), None)

    def to_json(self) -> dict[str, object]:
        """The lock file's document."""
        return {
            "schema_version": SCHEMA_VERSION,
            "bundle": self.bundle,
            "bundle_id": self.bundle_id,
            "spec": {
                "python": self.python,
                "pins": list(self.pins),
                "source": self.source,
                "provenance": dict(sorted(self.provenance.items())),
            },
            "target": self.target,
            "resolver": self.resolver,
            "wheels": [w.to_json() for w in sorted(self.wheels, key=lambda w: (w.name, w.filename))],
        }

    def dumps(self) -> str:
        """The committed form: pretty, stable key order, one trailing newline."""
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"


def read_lock(path: Path | str) -> Lock:
    """Load and validate a lock file (its stored bundle id must match its content)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no lock file", hint=_RELOCK_HINT) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable lock file: {exc}", hint=_RELOCK_HINT) from None
    try:
        lock = _lock_from_json(doc)
    except KeyError as missing:
        raise ConfigError(f"{path}: not a valid lock file: missing {missing}", hint=_RELOCK_HINT) from None
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{path}: not a valid lock file: {exc}", hint=_RELOCK_HINT) from None
    if doc.get("bundle_id") != lock.bundle_id:
        raise ConfigError(
            f"{path}: bundle_id {doc.get('bundle_id')!r} does not match the wheels listed "
            f"({lock.bundle_id}); the file was edited by hand",
            hint=_RELOCK_HINT,
        )
    return lock


def _lock_from_json(doc: object) -> Lock:
    """The lock a parsed document describes; raises KeyError, ValueError or TypeError."""
    if not isinstance(doc, dict):
        raise ValueError("expected a JSON object")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"schema_version {doc.get('schema_version')!r}, this orch reads {SCHEMA_VERSION}")
    spec = doc["spec"]
    wheels = doc["wheels"]
    if not isinstance(spec, dict) or not isinstance(wheels, list):
        raise ValueError("'spec' must be an object and 'wheels' a list")
    return Lock(
        bundle=_str(doc, "bundle", "bundle"),
        python=_str(spec, "python", "spec"),
        pins=_strings(spec.get("pins")),
        source=dict(spec.get("source") or {}),
        provenance=_str_map(spec.get("provenance")),
        target=_str_map(doc.get("target")),
        resolver=_str_map(doc.get("resolver")),
        wheels=tuple(LockedWheel.from_json(w, f"wheels[{i}]") for i, w in enumerate(wheels)),
    )


def write_lock(path: Path | str, lock: Lock) -> bool:
    """Write `lock` atomically; returns False (and touches nothing) when the file is already identical."""
    path = Path(path)
    text = lock.dumps()
    try:
        if path.read_bytes() == text.encode():
            return False
    except OSError:
        pass
    write_atomic(str(path), text)
    return True
