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
from packaging.version import InvalidVersion, Version

from hostside.files import write_atomic
from orchestrator.errors import BundleError, ConfigError

SCHEMA_VERSION = 1
_RELOCK_HINT = "re-create it with `orch bundle lock BUNDLE`"
INTERPRETER_FILENAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]*\.tar\.gz")


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
            size = doc["size"]
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise ValueError(f"{where}.size: expected a number of bytes, got {_shown(size)}")
            requires_python = doc.get("requires_python")
            if requires_python is not None:
                requires_python = _str(doc, "requires_python", where)
            wheel = cls(
                name=_str(doc, "name", where),
                version=_str(doc, "version", where),
                filename=_str(doc, "filename", where),
                sha256=_str(doc, "sha256", where),
                size=size,
                source=_str(doc, "source", where),
                requires_python=requires_python,
                requires_dist=_strings(doc.get("requires_dist"), f"{where}.requires_dist"),
                tags=_strings(doc.get("tags"), f"{where}.tags"),
            )
        except KeyError as missing:
            raise ValueError(f"{where}: missing {missing}") from None
        _check_wheel(wheel, where)
        return wheel


@dataclass(frozen=True)
class LockedInterpreter:
    """A bundle's interpreter as its lock records it."""

    filename: str
    sha256: str
    size: int
    source: str  # URL, or a path (relative paths are relative to fleet.yaml)
    version: str
    abi: str
    build: str

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def label(self) -> str:
        """'CPython 3.13.0 (cp313)' for messages."""
        return f"CPython {self.version} ({self.abi})"

    def request(self) -> dict[str, object]:
        """The interpreter as a worker's deploy request names it (no controller path)."""
        return {
            "filename": self.filename,
            "sha256": self.sha256,
            "size": self.size,
            "version": self.version,
            "abi": self.abi,
            "build": self.build,
        }

    def to_json(self) -> dict[str, object]:
        """The lock file's `interpreter` entry."""
        return {**self.request(), "source": self.source}

    @classmethod
    def from_json(cls, doc: object, where: str = "interpreter") -> LockedInterpreter:
        """Validate a lock's `interpreter` entry; raises ValueError naming `where`."""
        if not isinstance(doc, dict):
            raise ValueError(f"{where}: expected an object")
        fields: dict[str, str] = {}
        for key in ("filename", "sha256", "source", "version", "abi", "build"):
            value = doc.get(key)
            if not isinstance(value, str) or not value or re.search(r"[\x00-\x1f\x7f]", value):
                raise ValueError(f"{where}.{key}: expected a non-empty string without control characters")
            fields[key] = value
        size = doc.get("size")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"{where}.size: expected a number of bytes")
        if not re.fullmatch(r"[0-9a-f]{64}", fields["sha256"]):
            raise ValueError(f"{where}.sha256: expected 64 lowercase hex digits")
        # One plain file name: it is joined onto the controller's cache and the workers' store.
        if not INTERPRETER_FILENAME.fullmatch(fields["filename"]) or len(fields["filename"]) > 255:
            raise ValueError(f"{where}.filename: {fields['filename']!r} is not a .tar.gz file name (one plain name)")
        if not re.fullmatch(r"3\.\d{1,3}\.\d{1,3}([a-z]+\d+)?\+?", fields["version"]):
            raise ValueError(f"{where}.version: {fields['version']!r} is not a CPython version")
        if not re.fullmatch(r"cp3\d{1,3}t?", fields["abi"]):
            raise ValueError(f"{where}.abi: {fields['abi']!r} is not a CPython ABI tag")
        return cls(size=size, **fields)


def _check_wheel(wheel: LockedWheel, where: str) -> None:
    """A locked wheel's fields are what they claim: they become paths and requirement lines on workers."""
    if not re.fullmatch(r"[0-9a-f]{64}", wheel.sha256):
        raise ValueError(f"{where}.sha256: expected 64 lowercase hex digits")
    if canonicalize_name(wheel.name) != wheel.name:
        raise ValueError(f"{where}.name: {_shown(wheel.name)} is not a canonical distribution name")
    if not re.fullmatch(r"[A-Za-z0-9.+!_-]+", wheel.version):
        raise ValueError(f"{where}.version: {_shown(wheel.version)} is not a version (letters, digits, '.+!_-')")
    try:
        version = Version(wheel.version)
    except InvalidVersion:
        raise ValueError(f"{where}.version: {_shown(wheel.version)} is not a PEP 440 version") from None
    # One plain file name: it is joined onto the controller's wheel cache and the workers' store.
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._+!-]*\.whl", wheel.filename) or len(wheel.filename) > 255:
        raise ValueError(f"{where}.filename: {_shown(wheel.filename)} is not a wheel file name (one plain name)")
    try:
        fname, fversion, _, _ = parse_wheel_filename(wheel.filename)
    except InvalidWheelFilename as exc:
        raise ValueError(f"{where}.filename: {exc}") from None
    if fname != wheel.name or fversion != version:
        raise ValueError(
            f"{where}.filename: {wheel.filename} is not a wheel of {wheel.name} {wheel.version} "
            f"(it says {fname} {fversion})"
        )
    for key, text in (("source", wheel.source), ("requires_python", wheel.requires_python or "")):
        if re.search(r"[\x00-\x1f\x7f]", text):
            raise ValueError(f"{where}.{key}: has a control character")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."


def _str(doc: Mapping[str, object], key: str, where: str) -> str:
    value = doc[key]
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}.{key}: expected a non-empty string")
    return value


def _strings(value: object, where: str) -> tuple[str, ...]:
    """A JSON list of strings (or nothing) as a tuple."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}: expected a list of strings, got {_shown(value)}")
    return tuple(value)


def _str_map(value: object, where: str) -> dict[str, str]:
    """A JSON object of strings (or nothing) as str -> str."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected an object, got {_shown(value)}")
    return {str(k): str(v) for k, v in value.items()}


def compute_bundle_id(python: str, wheels: Iterable[LockedWheel], interpreter: LockedInterpreter | None = None) -> str:
    """16 hex digits of sha256 over the Python version, the exact wheel files and the interpreter archive."""
    doc: dict[str, object] = {
        "orch-bundle": 1,
        "python": python,
        "wheels": [
            [w.name, w.version, w.filename, w.sha256, w.size]
            for w in sorted(wheels, key=lambda w: (w.name, w.filename))
        ],
    }
    if interpreter is not None:  # absent otherwise: bundles on the workers' own Python keep their ids
        doc["interpreter"] = [interpreter.filename, interpreter.sha256, interpreter.size]
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
    interpreter: LockedInterpreter | None = None  # the bundle's own Python; None: the workers' system Python

    @property
    def bundle_id(self) -> str:
        """The id workers know the installed environment by (see the module docstring)."""
        return compute_bundle_id(self.python, self.wheels, self.interpreter)

    @property
    def total_size(self) -> int:
        """Bytes of all wheels (and the interpreter archive) together."""
        return sum(w.size for w in self.wheels) + (self.interpreter.size if self.interpreter else 0)

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
        doc: dict[str, object] = {
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
        if self.interpreter is not None:  # absent otherwise: older lock files stay byte-identical
            doc["interpreter"] = self.interpreter.to_json()
        return doc

    def dumps(self) -> str:
        """The committed form: pretty, stable key order, one trailing newline."""
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"


def read_lock(path: Path | str) -> Lock:
    """Load and validate a lock file (its stored bundle id must match its content)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no lock file", hint=_RELOCK_HINT) from None
    except (OSError, ValueError, RecursionError) as exc:
        raise ConfigError(f"{path}: not a readable lock file: {exc}", hint=_RELOCK_HINT) from None
    try:
        lock = _lock_from_json(doc)
    except KeyError as missing:
        raise ConfigError(f"{path}: not a valid lock file: missing {missing}", hint=_RELOCK_HINT) from None
    except (ValueError, TypeError, RecursionError) as exc:
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
    source = spec.get("source") or {}
    if not isinstance(source, dict):
        raise ValueError(f"spec.source: expected an object, got {_shown(source)}")
    python = _str(spec, "python", "spec")
    if not re.fullmatch(r"3\.\d{1,3}", python):
        raise ValueError(f"spec.python: expected a Python version like '3.11', got {_shown(python)}")
    bundle = _str(doc, "bundle", "bundle")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", bundle):
        raise ValueError(f"bundle: {_shown(bundle)} is not a bundle name")
    interpreter = LockedInterpreter.from_json(doc["interpreter"]) if doc.get("interpreter") is not None else None
    if interpreter is not None and interpreter.minor != python:
        raise ValueError(f"interpreter: {interpreter.label} cannot run a bundle of Python {python}")
    return Lock(
        bundle=bundle,
        python=python,
        interpreter=interpreter,
        pins=_strings(spec.get("pins"), "spec.pins"),
        source=source,
        provenance=_str_map(spec.get("provenance"), "spec.provenance"),
        target=_str_map(doc.get("target"), "target"),
        resolver=_str_map(doc.get("resolver"), "resolver"),
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
