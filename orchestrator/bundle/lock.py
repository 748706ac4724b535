"""`bundle lock`: resolve a bundle's pins with pip into an exact, hashed wheel list.

pip resolves (see `resolve`), its markers are re-evaluated for the bundle's own
Python, every wheel lands verified in the controller's cache (see `store`), its
own METADATA is read back, and the lock file is written only when it changed.
"""

from __future__ import annotations

import email.parser
import re
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict
from urllib.parse import urlparse, urlunparse
from urllib.request import url2pathname

from packaging.utils import canonicalize_name

from orchestrator.bundle.interpreter import artifact_filename, inspect_archive, require_fit
from orchestrator.bundle.lockfile import Lock, LockedInterpreter, LockedWheel, read_lock, wheel_tags, write_lock
from orchestrator.bundle.resolve import (
    PipInterpreter,
    ResolvedWheel,
    closure,
    pip_interpreter,
    pip_resolve,
    source_args,
)
from orchestrator.bundle.store import CachedFiles, FetchStats, fetch_artifact, fetch_resolved, wheel_cache_root
from orchestrator.bundle.target import WheelTarget
from orchestrator.errors import BundleError, ConfigError

if TYPE_CHECKING:
    from orchestrator.fleet import Bundle, Fleet


class WheelMetadata(TypedDict):
    """The fields of a wheel's METADATA that a lock records."""

    name: str
    version: str
    requires_python: str | None
    requires_dist: tuple[str, ...]


def read_wheel_metadata(path: Path) -> WheelMetadata:
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

    def to_json(self) -> dict[str, object]:
        """The `orch bundle lock --json` document."""
        return {
            "schema_version": 1,
            "bundle": self.bundle,
            "bundle_id": self.lock.bundle_id,
            "lock": str(self.path),
            "written": self.written,
            "previous_bundle_id": self.previous_id,
            "wheels": len(self.lock.wheels),
            "interpreter": self.lock.interpreter.to_json() if self.lock.interpreter else None,
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


def lock_bundle(
    fleet: Fleet, name: str, *, cache_root: Path | None = None, interpreter: str | None = None
) -> LockResult:
    """Resolve bundle `name` with pip, cache and verify its wheels, write its lock file."""
    started = time.monotonic()
    bundle = fleet.bundle(name)
    base_dir = fleet.base_dir.resolve()
    target = WheelTarget(bundle.python)
    root = cache_root or wheel_cache_root()
    stats = FetchStats()
    interp = _locked_interpreter(name, bundle, root, base_dir, stats)  # a wrong archive fails before pip runs
    if interp is not None:
        require_fit(name, interp, bundle.python, [])
    pip_python = pip_interpreter(bundle.python, interpreter)
    resolution = pip_resolve(name, bundle, base_dir, interpreter=pip_python)
    kept, notes = _for_target(name, bundle, resolution.wheels, target, pip_python)
    files = fetch_resolved(name, kept, root, target, pip_python, source_args(bundle, base_dir), stats)
    if interp is not None:
        require_fit(name, interp, bundle.python, [w.meta() for w in kept])
    lock = Lock(
        bundle=name,
        interpreter=interp,
        python=bundle.python,
        pins=tuple(bundle.pins),
        source=bundle.source.model_dump(mode="json"),
        provenance=dict(bundle.provenance),
        target=target.to_json(),
        # No interpreter path or patch level: they differ between controllers, the lock must not.
        resolver={"tool": "pip", "pip_version": resolution.pip_version},
        wheels=tuple(sorted(_locked_wheels(name, kept, files, base_dir), key=lambda w: (w.name, w.filename))),
    )
    path = fleet.lock_path(name)
    previous = _previous_id(path, notes)
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


def _locked_interpreter(
    name: str, bundle: Bundle, root: Path, base_dir: Path, stats: FetchStats
) -> LockedInterpreter | None:
    """The bundle's interpreter archive, in the cache by the sha256 fleet.yaml states, as the lock records it."""
    spec = bundle.interpreter
    if spec is None:
        return None
    filename = artifact_filename(spec.source)
    try:
        path, size, fetched = fetch_artifact(filename, spec.source, spec.sha256, base_dir, root=root)
    except BundleError as exc:
        raise BundleError(f"bundle '{name}': interpreter: {exc.message}", hint=exc.hint) from None
    if fetched:
        stats.fetched += size
    else:
        stats.reused += size
    info = inspect_archive(path, spec.source)
    if spec.url:
        source = _relative_source(spec.url, base_dir)
    else:
        given = Path(spec.path or "").expanduser()
        source = _relative_source((given if given.is_absolute() else base_dir / given).resolve().as_uri(), base_dir)
    return LockedInterpreter(
        filename=filename,
        sha256=spec.sha256,
        size=size,
        source=source,
        version=info.version,
        abi=info.abi,
        build=info.build,
    )


def _for_target(
    name: str, bundle: Bundle, wheels: Sequence[ResolvedWheel], target: WheelTarget, pip_python: PipInterpreter
) -> tuple[list[ResolvedWheel], list[str]]:
    """The resolved wheels the bundle's own Python needs, and a note for each one left out.

    pip evaluates environment markers against the interpreter running it; walk the
    requirements again under the bundle's own markers.
    """
    metas = {w.name: w.meta() for w in wheels}
    reached, missing = closure(bundle.pins, metas, target.marker_environment())
    if missing:
        wheel, req = missing[0]
        raise BundleError(
            f"bundle '{name}': on Python {bundle.python}, {wheel.label} requires {req}, which pip did not "
            f"resolve (pip ran on Python {pip_python.version} and evaluated markers for it)",
            hint=f"lock with a Python {bundle.python} interpreter: orch bundle lock {name} --python PATH",
        )
    notes = [
        f"left out {w.filename}: not required on Python {bundle.python} "
        f"(pip evaluated markers for Python {pip_python.version})"
        for w in wheels
        if w.name not in reached
    ]
    return [w for w in wheels if w.name in reached], notes


def _locked_wheels(name: str, kept: Sequence[ResolvedWheel], files: CachedFiles, base_dir: Path) -> list[LockedWheel]:
    """Each cached wheel with the metadata its own METADATA states (which must agree with pip)."""
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
    return wheels


def _previous_id(path: Path, notes: list[str]) -> str | None:
    """The bundle id of the lock file being replaced; an unreadable one is noted."""
    if not path.exists():
        return None
    try:
        return read_lock(path).bundle_id
    except ConfigError:
        notes.append(f"replaced an unreadable lock file at {path}")
        return None
