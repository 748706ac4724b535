"""Bundle locks: resolve a bundle's pins with pip into an exact, hashed wheel list.

A lock names every wheel of a bundle, dependencies included, with its sha256,
size, where it came from and its own metadata (Requires-Dist, Requires-Python,
tags). It is committed next to fleet.yaml (`locks/<bundle>.lock.json`).

Resolution is pip's (`pip install --dry-run --report`), for the bundle's
Python version on linux x86_64 (manylinux up to the glibc of TPU VM images),
not for the controller. The wheel bytes land in a content-addressed cache on
the controller (`~/.cache/orch/wheels/sha256/<hex>/<filename>`, or
`$ORCH_WHEEL_CACHE/sha256/...`), verified by sha256 and size, because deploy
pushes them from there.

The bundle id is a digest of what gets installed: the Python version and the
exact wheel files (name, version, filename, sha256, size). Provenance notes,
wheel sources and the pip version used are recorded in the lock but do not
change the id, so moving a mirror or editing a note does not force every
worker to rebuild an identical environment. `Lock.digest` covers the whole
file.
"""

from __future__ import annotations

import email.parser
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import unquote, urlparse, urlunparse
from urllib.request import url2pathname

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from orchestrator.errors import BundleError, ConfigError

SCHEMA_VERSION = 1
CACHE_ENV = "ORCH_WHEEL_CACHE"
MACHINE = "x86_64"
# TPU VM images are Ubuntu 22.04 (glibc 2.35): a manylinux_2_36 wheel would not load there.
MAX_GLIBC = (2, 35)
PIP_TIMEOUT = 1800.0
MIN_PIP = (23, 0)  # `--report` format 1 is stable from pip 23.0
_CHUNK = 1 << 20
# pip warns about every extra index that lacks a project page; that is noise in an error.
_PIP_NOISE = re.compile(r"^WARNING: Location '.*' is ignored: it is neither a file nor a directory\.$")


# ---------------------------------------------------------------------------
# Target: what the bundle environment runs on


@dataclass(frozen=True)
class Target:
    """CPython `python` on linux `machine` with glibc up to `max_glibc`."""

    python: str
    machine: str = MACHINE
    max_glibc: tuple[int, int] = MAX_GLIBC

    @property
    def version_info(self) -> tuple[int, int]:
        major, minor = self.python.split(".")
        return int(major), int(minor)

    @property
    def abi(self) -> str:
        return "cp{}{}".format(*self.version_info)

    def platforms(self) -> list[str]:
        """Accepted platform tags, most preferred first (pip's own order for a host)."""
        legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
        out = []
        for minor in range(self.max_glibc[1], 4, -1):
            out.append(f"manylinux_2_{minor}_{self.machine}")
            if minor in legacy:
                out.append(f"{legacy[minor]}_{self.machine}")
        out.append(f"linux_{self.machine}")
        return out

    def supported_tags(self) -> list[Tag]:
        platforms = self.platforms()
        return [
            *cpython_tags(self.version_info, abis=[self.abi], platforms=platforms),
            *compatible_tags(self.version_info, "cp", platforms),
        ]

    def pip_args(self) -> list[str]:
        args = ["--python-version", self.python, "--implementation", "cp", "--abi", self.abi]
        for plat in self.platforms():
            args += ["--platform", plat]
        return args

    def marker_environment(self) -> dict[str, str]:
        """PEP 508 marker values on the worker (patch level unknown: .0)."""
        env = default_environment()
        env.update(
            {
                "implementation_name": "cpython",
                "implementation_version": f"{self.python}.0",
                "os_name": "posix",
                "platform_machine": self.machine,
                "platform_system": "Linux",
                "platform_python_implementation": "CPython",
                "python_full_version": f"{self.python}.0",
                "python_version": self.python,
                "sys_platform": "linux",
                "platform_release": "",
                "platform_version": "",
            }
        )
        return env

    def describe(self) -> str:
        return f"CPython {self.python} on linux {self.machine} (glibc <= {self.max_glibc[0]}.{self.max_glibc[1]})"

    def to_json(self) -> dict[str, str]:
        return {
            "implementation": "cp",
            "python": self.python,
            "platform": "linux",
            "machine": self.machine,
            "max_glibc": "{}.{}".format(*self.max_glibc),
        }


# ---------------------------------------------------------------------------
# Wheels and locks


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
        return f"{self.project} {self.version}"


@dataclass(frozen=True)
class LockedWheel(WheelMeta):
    """A wheel of a lock: metadata plus the exact bytes and where they came from."""

    sha256: str
    size: int
    source: str  # URL, or a path (relative paths are relative to fleet.yaml)

    def to_json(self) -> dict[str, Any]:
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
    def from_json(cls, doc: Any, where: str) -> LockedWheel:
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
                requires_dist=tuple(str(r) for r in doc.get("requires_dist") or ()),
                tags=tuple(str(t) for t in doc.get("tags") or ()),
            )
        except KeyError as missing:
            raise ValueError(f"{where}: missing {missing}") from None
        if not re.fullmatch(r"[0-9a-f]{64}", wheel.sha256):
            raise ValueError(f"{where}.sha256: expected 64 lowercase hex digits")
        return wheel


def _str(doc: dict, key: str, where: str) -> str:
    value = doc[key]
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}.{key}: expected a non-empty string")
    return value


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
    source: dict[str, Any]
    provenance: dict[str, str]
    target: dict[str, str]
    resolver: dict[str, str]
    wheels: tuple[LockedWheel, ...]

    @property
    def bundle_id(self) -> str:
        return compute_bundle_id(self.python, self.wheels)

    @property
    def total_size(self) -> int:
        return sum(w.size for w in self.wheels)

    @property
    def digest(self) -> str:
        """sha256 of the lock file's exact bytes."""
        return hashlib.sha256(self.dumps().encode()).hexdigest()

    def wheel(self, name: str) -> LockedWheel | None:
        key = canonicalize_name(name)
        return next((w for w in self.wheels if w.name == key), None)

    def to_json(self) -> dict[str, Any]:
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
    hint = "re-create it with `orch bundle lock BUNDLE`"
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no lock file", hint=hint) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable lock file: {exc}", hint=hint) from None
    try:
        if not isinstance(doc, dict):
            raise ValueError("expected a JSON object")
        if doc.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"schema_version {doc.get('schema_version')!r}, this orch reads {SCHEMA_VERSION}")
        spec = doc["spec"]
        wheels = doc["wheels"]
        if not isinstance(spec, dict) or not isinstance(wheels, list):
            raise ValueError("'spec' must be an object and 'wheels' a list")
        lock = Lock(
            bundle=_str(doc, "bundle", "bundle"),
            python=_str(spec, "python", "spec"),
            pins=tuple(str(p) for p in spec.get("pins") or ()),
            source=dict(spec.get("source") or {}),
            provenance={str(k): str(v) for k, v in (spec.get("provenance") or {}).items()},
            target={str(k): str(v) for k, v in (doc.get("target") or {}).items()},
            resolver={str(k): str(v) for k, v in (doc.get("resolver") or {}).items()},
            wheels=tuple(LockedWheel.from_json(w, f"wheels[{i}]") for i, w in enumerate(wheels)),
        )
    except KeyError as missing:
        raise ConfigError(f"{path}: not a valid lock file: missing {missing}", hint=hint) from None
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{path}: not a valid lock file: {exc}", hint=hint) from None
    if doc.get("bundle_id") != lock.bundle_id:
        raise ConfigError(
            f"{path}: bundle_id {doc.get('bundle_id')!r} does not match the wheels listed "
            f"({lock.bundle_id}); the file was edited by hand",
            hint=hint,
        )
    return lock


def write_lock(path: Path | str, lock: Lock) -> bool:
    """Write `lock` atomically; returns False (and touches nothing) when the file is already identical."""
    path = Path(path)
    text = lock.dumps().encode()
    try:
        if path.read_bytes() == text:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


# ---------------------------------------------------------------------------
# Content-addressed wheel cache on the controller


def wheel_cache_root() -> Path:
    """$ORCH_WHEEL_CACHE, else $XDG_CACHE_HOME/orch/wheels, else ~/.cache/orch/wheels."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "orch" / "wheels"


def cache_path(sha256: str, filename: str, root: Path | None = None) -> Path:
    return (root or wheel_cache_root()) / "sha256" / sha256 / filename


def cached_wheel_path(wheel: LockedWheel, root: Path | None = None) -> Path:
    """Where the cache keeps a locked wheel (whether or not it is there)."""
    return cache_path(wheel.sha256, wheel.filename, root)


def _hash_file(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def cached_wheel(
    sha256: str, filename: str, *, size: int | None = None, root: Path | None = None, verify: bool = True
) -> Path | None:
    """The cached file if present and intact (size and, with verify, sha256); a damaged one is removed."""
    path = cache_path(sha256, filename, root)
    try:
        actual_size = path.stat().st_size
    except OSError:
        return None
    if (size is not None and actual_size != size) or (verify and _hash_file(path)[0] != sha256):
        path.unlink(missing_ok=True)
        return None
    return path


def _store(
    src: BinaryIO, filename: str, root: Path, expected_sha256: str | None, expected_size: int | None, origin: str
) -> tuple[Path, str, int]:
    """Copy a stream into the cache under its sha256, verifying what was expected."""
    tmp_dir = root / "tmp"
    tmp_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f"{filename}.", dir=tmp_dir)
    digest, size = hashlib.sha256(), 0
    try:
        with os.fdopen(fd, "wb") as out:
            while chunk := src.read(_CHUNK):
                digest.update(chunk)
                size += len(chunk)
                out.write(chunk)
        sha = digest.hexdigest()
        if expected_sha256 and sha != expected_sha256:
            raise BundleError(
                f"{filename} from {origin}: sha256 {sha} does not match the expected "
                f"{expected_sha256}; the file was not kept"
            )
        if expected_size is not None and size != expected_size:
            raise BundleError(
                f"{filename} from {origin}: {size} bytes, expected {expected_size}; the file was not kept"
            )
        final = cache_path(sha, filename, root)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, final)
        return final, sha, size
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def source_location(source: str, base_dir: Path) -> tuple[str, Path | None]:
    """(url, local path or None) for a lock's `source` entry."""
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", source):
        parsed = urlparse(source)
        return source, (Path(url2pathname(parsed.path)) if parsed.scheme == "file" else None)
    path = Path(source)
    path = path if path.is_absolute() else base_dir / path
    return path.resolve().as_uri(), path


# ---------------------------------------------------------------------------
# Running pip


@dataclass(frozen=True)
class PipInterpreter:
    """The Python that runs pip; markers are evaluated against it."""

    executable: str
    version: str  # full, e.g. 3.11.7
    pip_version: str

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])


_PROBE = "import sys, pip; print('%d.%d.%d' % sys.version_info[:3]); print(pip.__version__)"


def _probe_interpreter(executable: str) -> PipInterpreter | None:
    try:
        proc = subprocess.run([executable, "-c", _PROBE], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = proc.stdout.split()
    if proc.returncode != 0 or len(lines) != 2:
        return None
    pip_version = tuple(int(p) for p in re.findall(r"\d+", lines[1])[:2])
    if pip_version < MIN_PIP:
        return None
    return PipInterpreter(executable, lines[0], lines[1])


def pip_interpreter(python: str, explicit: str | None = None) -> PipInterpreter:
    """The interpreter to run pip with: `explicit`, else this one if it is Python `python`,
    else `python<X.Y>` from PATH, else this one (markers then need the target check)."""
    if explicit:
        found = _probe_interpreter(explicit)
        if found is None:
            raise BundleError(f"{explicit}: not a Python with pip >= {MIN_PIP[0]}.{MIN_PIP[1]}")
        return found
    here = _probe_interpreter(sys.executable)
    if here is None:
        raise BundleError(
            f"{sys.executable}: pip >= {MIN_PIP[0]}.{MIN_PIP[1]} is needed to lock bundles",
            hint=f"{sys.executable} -m pip install -U pip",
        )
    if here.minor == python:
        return here
    candidate = shutil.which(f"python{python}")
    found = _probe_interpreter(candidate) if candidate else None
    return found if found and found.minor == python else here


def source_args(bundle, base_dir: Path) -> list[str]:
    """pip options for a bundle's `source` (added to pip's own configuration)."""
    src = bundle.source
    args: list[str] = []
    if src.no_index:
        args.append("--no-index")
    if src.index_url:
        args += ["--index-url", src.index_url]
    for url in src.extra_index_urls:
        args += ["--extra-index-url", url]
    for link in src.find_links:
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", link):
            args += ["--find-links", link]
            continue
        path = Path(os.path.expanduser(link))
        path = path if path.is_absolute() else base_dir / path
        if not path.is_dir():
            raise BundleError(
                f"find_links entry '{link}' is not a directory ({path})",
                hint="find_links paths are relative to fleet.yaml",
            )
        args += ["--find-links", str(path)]
    return args


def _pip_env() -> dict[str, str]:
    return {
        **os.environ,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
        "PIP_PROGRESS_BAR": "off",
        "PYTHONIOENCODING": "utf-8",
    }


class ResolutionError(BundleError):
    """pip could not resolve (some of) a bundle's pins; carries pip's own reason."""

    def __init__(self, message: str, *, reason: str, pins: Sequence[str], tail: str, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.reason = reason
        self.pins = list(pins)
        self.tail = tail


def _named_pins(pins: Sequence[str], text: str) -> list[str]:
    words = {canonicalize_name(w) for w in re.findall(r"[A-Za-z0-9][A-Za-z0-9._-]*", text)}
    return [p for p in pins if canonicalize_name(Requirement(p).name) in words]


def _resolution_error(
    bundle_name: str, target: Target, pins: Sequence[str], proc: subprocess.CompletedProcess
) -> ResolutionError:
    out = [ln.rstrip() for ln in (proc.stdout or "").splitlines()]
    err = [ln.rstrip() for ln in (proc.stderr or "").splitlines() if ln.strip() and not _PIP_NOISE.match(ln)]
    reasons = [
        ln.removeprefix("ERROR: ").rstrip(".")
        for ln in err
        if ln.startswith("ERROR:") and "ResolutionImpossible: for help visit" not in ln
    ]
    if "The conflict is caused by:" in out:
        start = out.index("The conflict is caused by:") + 1
        conflict = []
        for ln in out[start:]:
            if not ln.startswith(" "):
                break
            conflict.append(ln.strip())
        reasons.append("the conflict is caused by: " + "; ".join(conflict))
    reason = "; ".join(reasons) or (err[-1] if err else f"pip exited with {proc.returncode}")
    named = _named_pins(pins, " ".join(reasons)) or list(pins)
    tail = "\n".join(([ln for ln in out if ln.strip()] + err)[-15:])
    what = "pin" if len(named) == 1 else "pins"
    return ResolutionError(
        f"bundle '{bundle_name}': pip cannot resolve {what} {', '.join(named)} for {target.describe()}: "
        f"{reason}\n  pip's output (last lines):\n    " + tail.replace("\n", "\n    "),
        reason=reason,
        pins=named,
        tail=tail,
        hint=f"fix the pins of bundle '{bundle_name}' in fleet.yaml; "
        f"`orch bundle check {bundle_name}` compares the pins' own metadata without resolving",
    )


@dataclass(frozen=True)
class ResolvedWheel:
    """One entry of pip's installation report."""

    name: str
    version: str
    url: str
    filename: str
    sha256: str | None
    metadata: dict[str, Any]
    requested_extras: tuple[str, ...]

    def meta(self) -> WheelMeta:
        return WheelMeta(
            name=self.name,
            version=self.version,
            filename=self.filename,
            requires_python=self.metadata.get("requires_python"),
            requires_dist=tuple(self.metadata.get("requires_dist") or ()),
            tags=wheel_tags(self.filename),
        )


@dataclass(frozen=True)
class Resolution:
    wheels: tuple[ResolvedWheel, ...]
    interpreter: PipInterpreter
    pip_version: str


def wheel_tags(filename: str) -> tuple[str, ...]:
    try:
        _, _, _, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename as exc:
        raise BundleError(f"{filename}: not a wheel file name ({exc})") from None
    return tuple(sorted(str(t) for t in tags))


def pip_resolve(
    bundle_name: str,
    bundle,
    base_dir: Path,
    *,
    pins: Sequence[str] | None = None,
    no_deps: bool = False,
    relaxed: bool = False,
    interpreter: PipInterpreter | None = None,
) -> Resolution:
    """Ask pip which wheels `pins` (default: the bundle's) resolve to, with their metadata.

    `relaxed` resolves for the controller's own interpreter and platform and ignores
    Requires-Python: it finds what exists, so that `bundle check` can say why it does
    not fit the bundle's Python.
    """
    target = Target(bundle.python)
    pins = list(pins if pins is not None else bundle.pins)
    interpreter = interpreter or pip_interpreter(bundle.python)
    with tempfile.TemporaryDirectory(prefix="orch-pip-") as tmp:
        report = Path(tmp) / "report.json"
        argv = [
            interpreter.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--report",
            str(report),
            "--only-binary=:all:",
        ]
        if relaxed:
            argv += ["--ignore-requires-python"]
        else:
            argv += [*target.pip_args(), "--target", str(Path(tmp) / "target")]
        if no_deps:
            argv.append("--no-deps")
        argv += [*source_args(bundle, base_dir), *pins]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT, env=_pip_env(), cwd=tmp)
        except subprocess.TimeoutExpired:
            raise BundleError(
                f"bundle '{bundle_name}': pip did not finish resolving within {PIP_TIMEOUT:.0f}s"
            ) from None
        if proc.returncode != 0 or not report.exists():
            raise _resolution_error(bundle_name, target, pins, proc)
        doc = json.loads(report.read_text())
    wheels = []
    for item in doc.get("install", []):
        info = item.get("download_info") or {}
        url = info.get("url", "")
        meta = item.get("metadata") or {}
        filename = unquote(urlparse(url).path.rsplit("/", 1)[-1])
        if not filename.endswith(".whl"):
            raise BundleError(f"bundle '{bundle_name}': pip chose {url}, which is not a wheel")
        hashes = (info.get("archive_info") or {}).get("hashes") or {}
        wheels.append(
            ResolvedWheel(
                name=canonicalize_name(meta.get("name", filename.split("-")[0])),
                version=str(meta.get("version", "")),
                url=url,
                filename=filename,
                sha256=hashes.get("sha256"),
                metadata=meta,
                requested_extras=tuple(item.get("requested_extras") or ()),
            )
        )
    return Resolution(tuple(wheels), interpreter, str(doc.get("pip_version", interpreter.pip_version)))


# ---------------------------------------------------------------------------
# Dependency closure under the target's markers


def requirement_applies(req: Requirement, env: dict[str, str], extras: Iterable[str]) -> str | None:
    """None if `req` does not apply; '' if it applies unconditionally; else the extra that enables it."""
    if req.marker is None or req.marker.evaluate({**env, "extra": ""}):
        return ""
    for extra in sorted(extras):
        if req.marker.evaluate({**env, "extra": extra}):
            return extra
    return None


def parse_requirements(wheel: WheelMeta) -> list[Requirement]:
    out = []
    for text in wheel.requires_dist:
        try:
            out.append(Requirement(text))
        except InvalidRequirement:
            continue
    return out


def closure(
    pins: Sequence[str], wheels: dict[str, WheelMeta], env: dict[str, str]
) -> tuple[dict[str, set[str]], list[tuple[WheelMeta, Requirement]]]:
    """Walk requirements from the pins under the target's markers.

    Returns the reached distributions with the extras requested of each, and the
    requirements whose distribution is not among `wheels`.
    """
    reached: dict[str, set[str]] = {}
    missing: list[tuple[WheelMeta, Requirement]] = []
    todo = [(canonicalize_name(r.name), set(r.extras)) for r in map(Requirement, pins)]
    while todo:
        name, extras = todo.pop()
        if name in reached and extras <= reached[name]:
            continue
        reached.setdefault(name, set()).update(extras)
        wheel = wheels.get(name)
        if wheel is None:
            continue
        for req in parse_requirements(wheel):
            if requirement_applies(req, env, reached[name]) is None:
                continue
            dep = canonicalize_name(req.name)
            if dep not in wheels:
                missing.append((wheel, req))
            todo.append((dep, set(req.extras)))
    return reached, missing


# ---------------------------------------------------------------------------
# Fetching wheel bytes into the cache


@dataclass
class _Fetch:
    fetched: int = 0
    reused: int = 0


def read_wheel_metadata(path: Path) -> dict[str, Any]:
    """Name, version, Requires-Python and Requires-Dist from the wheel's own METADATA."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(names) != 1:
                raise BundleError(f"{path.name}: expected one .dist-info/METADATA, found {len(names)}")
            raw = zf.read(names[0])
    except zipfile.BadZipFile as exc:
        raise BundleError(f"{path.name}: not a valid wheel ({exc})") from None
    msg = email.parser.BytesParser().parsebytes(raw, headersonly=True)
    requires_python = msg.get("Requires-Python")
    return {
        "name": str(msg.get("Name", "")).strip(),
        "version": str(msg.get("Version", "")).strip(),
        "requires_python": str(requires_python).strip() if requires_python else None,
        "requires_dist": tuple(" ".join(str(r).split()) for r in msg.get_all("Requires-Dist") or ()),
    }


def _fetch_resolved(
    bundle_name: str,
    wheels: Sequence[ResolvedWheel],
    root: Path,
    target: Target,
    interpreter: PipInterpreter,
    extra_args: list[str],
    stats: _Fetch,
) -> dict[str, tuple[Path, str, int]]:
    """Put every resolved wheel into the cache; returns filename -> (path, sha256, size)."""
    out: dict[str, tuple[Path, str, int]] = {}
    remote: list[ResolvedWheel] = []
    for w in wheels:
        if w.sha256:
            hit = cached_wheel(w.sha256, w.filename, root=root)
            if hit:
                out[w.filename] = (hit, w.sha256, hit.stat().st_size)
                stats.reused += out[w.filename][2]
                continue
        parsed = urlparse(w.url)
        if parsed.scheme != "file":
            remote.append(w)
            continue
        local = Path(url2pathname(parsed.path))
        sha = w.sha256
        if not sha:
            sha, size = _hash_file(local)
            hit = cached_wheel(sha, w.filename, size=size, root=root, verify=False)
            if hit:
                out[w.filename] = (hit, sha, size)
                stats.reused += size
                continue
        with open(local, "rb") as src:
            out[w.filename] = _store(src, w.filename, root, sha, None, str(local))
        stats.fetched += out[w.filename][2]
    if remote:
        out.update(_download(bundle_name, remote, root, target, interpreter, extra_args, stats))
    return out


def _download(
    bundle_name: str,
    wheels: Sequence[ResolvedWheel],
    root: Path,
    target: Target,
    interpreter: PipInterpreter,
    extra_args: list[str],
    stats: _Fetch,
) -> dict[str, tuple[Path, str, int]]:
    # pip downloads, so proxies, certificates and index credentials behave as in resolution.
    (root / "tmp").mkdir(parents=True, exist_ok=True)
    out = {}
    with tempfile.TemporaryDirectory(prefix="download-", dir=root / "tmp") as tmp:
        reqs = []
        for w in wheels:
            url = urlunparse(urlparse(w.url)._replace(fragment=""))
            reqs.append(f"{w.name} @ {url}" + (f"#sha256={w.sha256}" if w.sha256 else ""))
        argv = [
            interpreter.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            *target.pip_args(),
            *extra_args,
            "--dest",
            tmp,
            *reqs,
        ]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT, env=_pip_env())
        except subprocess.TimeoutExpired:
            raise BundleError(
                f"bundle '{bundle_name}': downloading {len(wheels)} wheel(s) took longer than {PIP_TIMEOUT:.0f}s"
            ) from None
        if proc.returncode != 0:
            tail = "\n    ".join([ln for ln in proc.stderr.splitlines() if ln.strip()][-10:])
            raise BundleError(
                f"bundle '{bundle_name}': pip could not download {', '.join(w.filename for w in wheels)}:\n    {tail}"
            )
        for w in wheels:
            path = Path(tmp) / w.filename
            if not path.exists():
                raise BundleError(f"bundle '{bundle_name}': pip reported success but {w.filename} is missing")
            with open(path, "rb") as src:
                out[w.filename] = _store(src, w.filename, root, w.sha256, None, w.url)
            stats.fetched += out[w.filename][2]
    return out


def fetch_wheels(lock: Lock, base_dir: Path, *, root: Path | None = None) -> dict[str, Path]:
    """Make sure every wheel of `lock` is in the cache (fetching from its source); sha256 -> path."""
    root = root or wheel_cache_root()
    out = {}
    for w in lock.wheels:
        hit = cached_wheel(w.sha256, w.filename, size=w.size, root=root)
        if hit is None:
            url, local = source_location(w.source, base_dir)
            try:
                if local is not None:
                    with open(local, "rb") as src:
                        hit = _store(src, w.filename, root, w.sha256, w.size, str(local))[0]
                else:
                    from urllib.request import urlopen

                    with urlopen(url, timeout=120) as src:
                        hit = _store(src, w.filename, root, w.sha256, w.size, url)[0]
            except OSError as exc:
                raise BundleError(
                    f"bundle '{lock.bundle}': cannot fetch {w.filename} from {w.source}: {exc}",
                    hint="the wheel is not in the controller's cache; restore its source or re-lock",
                ) from None
        out[w.sha256] = hit
    return out


# ---------------------------------------------------------------------------
# Locking


@dataclass(frozen=True)
class LockResult:
    """What `lock_bundle` did."""

    bundle: str
    lock: Lock
    path: Path
    written: bool  # False: the file on disk was already identical
    previous_id: str | None  # bundle id of the lock that was there before, if readable
    fetched_bytes: int  # bytes copied or downloaded into the wheel cache
    reused_bytes: int  # bytes already in the cache (verified)
    cache_root: Path
    interpreter: PipInterpreter
    elapsed: float
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "bundle": self.bundle,
            "bundle_id": self.lock.bundle_id,
            "lock": str(self.path),
            "written": self.written,
            "previous_bundle_id": self.previous_id,
            "wheels": len(self.lock.wheels),
            "total_bytes": self.lock.total_size,
            "fetched_bytes": self.fetched_bytes,
            "reused_bytes": self.reused_bytes,
            "cache": str(self.cache_root),
            "pip_python": self.interpreter.executable,
            "elapsed": round(self.elapsed, 3),
            "notes": list(self.notes),
        }


def _relative_source(url: str, base_dir: Path) -> str:
    parsed = urlparse(url)
    if parsed.scheme != "file":
        # Never record credentials that may sit in an index URL.
        netloc = parsed.netloc.rsplit("@", 1)[-1]
        return urlunparse(parsed._replace(netloc=netloc, fragment=""))
    path = Path(url2pathname(parsed.path)).resolve()
    try:
        return path.relative_to(base_dir.resolve()).as_posix()
    except ValueError:
        return str(path)


def lock_bundle(fleet, name: str, *, cache_root: Path | None = None, interpreter: str | None = None) -> LockResult:
    """Resolve bundle `name` with pip, cache and verify its wheels, write its lock file."""
    started = time.monotonic()
    bundle = fleet.bundle(name)
    base_dir = fleet.base_dir.resolve()
    target = Target(bundle.python)
    root = cache_root or wheel_cache_root()
    pip_python = pip_interpreter(bundle.python, interpreter)
    resolution = pip_resolve(name, bundle, base_dir, interpreter=pip_python)
    notes: list[str] = []

    # pip evaluates environment markers against the interpreter running it; walk the
    # requirements again under the bundle's own markers.
    metas = {w.name: w.meta() for w in resolution.wheels}
    reached, missing = closure(bundle.pins, metas, target.marker_environment())
    if missing:
        wheel, req = missing[0]
        raise BundleError(
            f"bundle '{name}': on Python {bundle.python}, {wheel.label} requires {req}, which pip did not "
            f"resolve (pip ran on Python {pip_python.version} and evaluated markers for it)",
            hint=f"lock with a Python {bundle.python} interpreter: orch bundle lock {name} --python PATH",
        )
    kept = [w for w in resolution.wheels if w.name in reached]
    for w in resolution.wheels:
        if w.name not in reached:
            notes.append(
                f"left out {w.filename}: not required on Python {bundle.python} "
                f"(pip evaluated markers for Python {pip_python.version})"
            )

    stats = _Fetch()
    files = _fetch_resolved(name, kept, root, target, pip_python, source_args(bundle, base_dir), stats)
    wheels = []
    for w in kept:
        path, sha, size = files[w.filename]
        meta = read_wheel_metadata(path)
        if canonicalize_name(meta["name"]) != w.name or meta["version"] != w.version:
            raise BundleError(
                f"bundle '{name}': {w.filename} says it is {meta['name']} {meta['version']} "
                f"in its METADATA, pip resolved {w.name} {w.version}"
            )
        wheels.append(
            LockedWheel(
                name=w.name,
                version=w.version,
                filename=w.filename,
                requires_python=meta["requires_python"],
                requires_dist=meta["requires_dist"],
                tags=wheel_tags(w.filename),
                sha256=sha,
                size=size,
                source=_relative_source(w.url, base_dir),
            )
        )
    lock = Lock(
        bundle=name,
        python=bundle.python,
        pins=tuple(bundle.pins),
        source=bundle.source.model_dump(mode="json"),
        provenance=dict(bundle.provenance),
        target=target.to_json(),
        # No interpreter path or patch level: they differ between controllers, the lock must not.
        resolver={"tool": "pip", "pip_version": resolution.pip_version},
        wheels=tuple(sorted(wheels, key=lambda w: (w.name, w.filename))),
    )
    path = fleet.lock_path(name)
    previous = None
    if path.exists():
        try:
            previous = read_lock(path).bundle_id
        except ConfigError:
            notes.append(f"replaced an unreadable lock file at {path}")
    written = write_lock(path, lock)
    return LockResult(
        bundle=name,
        lock=lock,
        path=path,
        written=written,
        previous_id=previous,
        fetched_bytes=stats.fetched,
        reused_bytes=stats.reused,
        cache_root=root,
        interpreter=pip_python,
        elapsed=time.monotonic() - started,
        notes=tuple(notes),
    )


# ---------------------------------------------------------------------------
# Tool wheels (installers that travel to workers like any other wheel)


@dataclass(frozen=True)
class CachedWheel:
    """A wheel in the controller's cache."""

    name: str
    version: str
    filename: str
    sha256: str
    size: int
    path: Path

    def request(self) -> dict:
        """The wheel as a worker's deploy request names it (no controller path)."""
        return {
            "name": self.name,
            "version": self.version,
            "filename": self.filename,
            "sha256": self.sha256,
            "size": self.size,
        }


def tool_wheel(name: str, version: str | None = None, *, python: str = "3.11", root: Path | None = None) -> CachedWheel:
    """The linux x86_64 wheel of tool `name` (default: the controller's installed version), cached.

    Which file that is gets remembered under <cache>/tools/, so later calls cost no pip run.
    """
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed_version

    from orchestrator.fleet import Bundle

    root = root or wheel_cache_root()
    key = canonicalize_name(name)
    if version is None:
        try:
            version = installed_version(name)
        except PackageNotFoundError:
            raise BundleError(f"{name} is not installed on the controller; cannot pick its version") from None
    memo = root / "tools" / f"{key}-{version}-cp{python.replace('.', '')}-linux_{MACHINE}.json"
    try:
        known = json.loads(memo.read_text())
        hit = cached_wheel(known["sha256"], known["filename"], size=known["size"], root=root)
        if hit:
            return CachedWheel(key, version, known["filename"], known["sha256"], known["size"], hit)
    except (OSError, ValueError, KeyError):
        pass
    spec = Bundle(python=python, pins=[f"{name}=={version}"])
    resolution = pip_resolve(f"tool:{name}", spec, Path.cwd(), no_deps=True)
    files = _fetch_resolved(
        f"tool:{name}", resolution.wheels, root, Target(python), resolution.interpreter, [], _Fetch()
    )
    path, sha, size = files[resolution.wheels[0].filename]
    memo.parent.mkdir(parents=True, exist_ok=True)
    memo.write_text(json.dumps({"filename": path.name, "sha256": sha, "size": size}) + "\n")
    return CachedWheel(key, version, path.name, sha, size, path)
