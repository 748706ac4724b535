"""The controller's content-addressed wheel cache, which deploy pushes wheels from.

Wheels live at `<root>/sha256/<hex>/<filename>`; the root is `$ORCH_WHEEL_CACHE`,
else `$XDG_CACHE_HOME/orch/wheels`, else `~/.cache/orch/wheels`. Nothing enters
the cache unverified: bytes are hashed while they are copied in, and a file
whose size or sha256 no longer matches is removed when it is next looked up.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlparse
from urllib.request import url2pathname

from packaging.utils import canonicalize_name

from hostside.files import sha256_file
from orchestrator.bundle.lockfile import Lock, LockedWheel
from orchestrator.bundle.resolve import PipInterpreter, ResolvedWheel, pip_download, pip_resolve
from orchestrator.bundle.target import MACHINE, WheelTarget
from orchestrator.errors import BundleError

CACHE_ENV = "ORCH_WHEEL_CACHE"
_CHUNK = 1 << 20

# filename -> (path in the cache, sha256, size)
CachedFiles = dict[str, tuple[Path, str, int]]


def wheel_cache_root() -> Path:
    """$ORCH_WHEEL_CACHE, else $XDG_CACHE_HOME/orch/wheels, else ~/.cache/orch/wheels."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "orch" / "wheels"


def cache_path(sha256: str, filename: str, root: Path | None = None) -> Path:
    """Where the cache keeps the file `filename` with content `sha256` (whether or not it is there)."""
    return (root or wheel_cache_root()) / "sha256" / sha256 / filename


def cached_wheel_path(wheel: LockedWheel, root: Path | None = None) -> Path:
    """Where the cache keeps a locked wheel (whether or not it is there)."""
    return cache_path(wheel.sha256, wheel.filename, root)


def cached_wheel(
    sha256: str,
    filename: str,
    *,
    size: int | None = None,
    root: Path | None = None,
    verify: bool = True,
    damaged: list[str] | None = None,
) -> Path | None:
    """The cached file if present and intact (size and, with verify, sha256); a damaged one is removed,
    and what was wrong with it appended to `damaged`."""
    path = cache_path(sha256, filename, root)
    try:
        actual_size = path.stat().st_size
    except OSError:
        return None
    why = None
    if size is not None and actual_size != size:
        why = f"{actual_size} bytes, not {size}"
    elif verify and (actual := sha256_file(str(path))) != sha256:
        why = f"sha256 {actual[:16]}..., not {sha256[:16]}..."
    if why is not None:
        path.unlink(missing_ok=True)
        if damaged is not None:
            damaged.append(f"{filename} in the controller's wheel cache ({path}) was damaged ({why}); removed")
        return None
    return path


def _store(
    src: BinaryIO, filename: str, root: Path, expected_sha256: str | None, expected_size: int | None, origin: str
) -> tuple[Path, str, int]:
    """Copy a stream into the cache under its sha256, verifying what was expected."""
    tmp_dir = root / "tmp"
    tmp_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f"{filename}.", dir=tmp_dir)
    try:
        with os.fdopen(fd, "wb") as out:
            sha, size = _copy_hashing(src, out)
        _verify(filename, origin, sha, size, expected_sha256, expected_size)
        final = cache_path(sha, filename, root)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, final)
        return final, sha, size
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _copy_hashing(src: BinaryIO, out: BinaryIO) -> tuple[str, int]:
    """Copy `src` to `out`; the sha256 and size of what went through."""
    digest, size = hashlib.sha256(), 0
    while chunk := src.read(_CHUNK):
        digest.update(chunk)
        size += len(chunk)
        out.write(chunk)
    return digest.hexdigest(), size


def _verify(
    filename: str, origin: str, sha: str, size: int, expected_sha256: str | None, expected_size: int | None
) -> None:
    if expected_sha256 and sha != expected_sha256:
        raise BundleError(
            f"{filename} from {origin}: sha256 {sha} does not match the expected "
            f"{expected_sha256}; the file was not kept"
        )
    if expected_size is not None and size != expected_size:
        raise BundleError(f"{filename} from {origin}: {size} bytes, expected {expected_size}; the file was not kept")


def source_location(source: str, base_dir: Path) -> tuple[str, Path | None]:
    """(url, local path or None) for a lock's `source` entry."""
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", source):
        parsed = urlparse(source)
        return source, (Path(url2pathname(parsed.path)) if parsed.scheme == "file" else None)
    path = Path(source)
    path = path if path.is_absolute() else base_dir / path
    return path.resolve().as_uri(), path


# ---------------------------------------------------------------------------
# Filling the cache


def fetch_wheels(
    lock: Lock, base_dir: Path, *, root: Path | None = None, repaired: list[str] | None = None
) -> dict[str, Path]:
    """Make sure every wheel of `lock` and its interpreter archive are in the cache (fetching from
    their source); sha256 -> path.

    A cached wheel whose size or sha256 no longer matches the lock is removed and fetched again;
    each such repair is said in `repaired` (what was wrong, where it came from again)."""
    root = root or wheel_cache_root()
    out = {}
    if lock.interpreter is not None:
        i = lock.interpreter
        try:
            out[i.sha256] = fetch_artifact(i.filename, i.source, i.sha256, base_dir, root=root, size=i.size)[0]
        except BundleError as exc:
            raise BundleError(
                f"bundle '{lock.bundle}': interpreter refused before any worker was contacted: {exc.message}",
                hint="restore the archive the lock names (by its sha256), or pack a new one and lock again",
            ) from None
    for w in lock.wheels:
        damaged: list[str] = []
        hit = cached_wheel(w.sha256, w.filename, size=w.size, root=root, damaged=damaged)
        if hit is None:
            try:
                hit = _fetch_locked(w, base_dir, root)
            except OSError as exc:
                raise BundleError(
                    f"bundle '{lock.bundle}': cannot fetch {w.filename} from {w.source}: {exc}"
                    + (f" ({damaged[0]})" if damaged else ""),
                    hint="the wheel is not in the controller's cache; restore its source or re-lock",
                ) from None
            if repaired is not None:
                repaired += [f"{d}; fetched again from {w.source} and verified" for d in damaged]
        out[w.sha256] = hit
    return out


def _fetch_locked(w: LockedWheel, base_dir: Path, root: Path) -> Path:
    """Copy or download a locked wheel from its recorded source into the cache."""
    url, local = source_location(w.source, base_dir)
    if local is not None:
        with open(local, "rb") as src:
            return _store(src, w.filename, root, w.sha256, w.size, str(local))[0]
    from urllib.request import urlopen

    with urlopen(url, timeout=120) as src:
        return _store(src, w.filename, root, w.sha256, w.size, url)[0]


def fetch_artifact(
    filename: str, source: str, sha256: str, base_dir: Path, *, root: Path | None = None, size: int | None = None
) -> tuple[Path, int, bool]:
    """A file that must have `sha256` (an interpreter archive) in the cache, fetched from `source`
    (a path relative to `base_dir`, or a URL) if absent: (path, size, whether it was fetched).
    Bytes with another hash are refused and not kept."""
    root = root or wheel_cache_root()
    hit = cached_wheel(sha256, filename, size=size, root=root)
    if hit is not None:
        return hit, hit.stat().st_size, False
    url, local = source_location(source, base_dir)
    try:
        if local is not None:
            with open(local, "rb") as src:
                path, _, got = _store(src, filename, root, sha256, size, str(local))
        else:
            from urllib.request import urlopen

            with urlopen(url, timeout=120) as src:
                path, _, got = _store(src, filename, root, sha256, size, url)
    except OSError as exc:
        raise BundleError(
            f"cannot fetch {filename} from {source}: {exc}",
            hint="restore the file at its recorded source, or fix its path/url in fleet.yaml and lock again",
        ) from None
    return path, got, True


@dataclass
class FetchStats:
    """Bytes put into the cache vs found there already (verified)."""

    fetched: int = 0
    reused: int = 0


def fetch_resolved(
    bundle_name: str,
    wheels: Sequence[ResolvedWheel],
    root: Path,
    target: WheelTarget,
    interpreter: PipInterpreter,
    extra_args: Sequence[str],
    stats: FetchStats,
) -> CachedFiles:
    """Put every resolved wheel into the cache; returns filename -> (path, sha256, size)."""
    out: CachedFiles = {}
    remote: list[ResolvedWheel] = []
    for w in wheels:
        parsed = urlparse(w.url)
        if parsed.scheme == "file":
            out[w.filename], copied = _cache_local(w, Path(url2pathname(parsed.path)), root)
            if copied:
                stats.fetched += out[w.filename][2]
            else:
                stats.reused += out[w.filename][2]
            continue
        if w.sha256 and (hit := cached_wheel(w.sha256, w.filename, root=root)):
            out[w.filename] = (hit, w.sha256, hit.stat().st_size)
            stats.reused += out[w.filename][2]
        else:
            remote.append(w)
    if remote:
        out.update(_download(bundle_name, remote, root, target, interpreter, extra_args, stats))
    return out


def _cache_local(w: ResolvedWheel, local: Path, root: Path) -> tuple[tuple[Path, str, int], bool]:
    """The cache entry of a resolved local wheel file, copying it in if needed (True: it was copied)."""
    sha = w.sha256
    if sha:
        hit = cached_wheel(sha, w.filename, root=root)
        if hit:
            return (hit, sha, hit.stat().st_size), False
    else:
        # pip reports no hash for a local file: hash it once, and hold the copy to that hash.
        sha, size = sha256_file(str(local)), local.stat().st_size
        hit = cached_wheel(sha, w.filename, size=size, root=root, verify=False)
        if hit:
            return (hit, sha, size), False
    with open(local, "rb") as src:
        return _store(src, w.filename, root, sha, None, str(local)), True


def _download(
    bundle_name: str,
    wheels: Sequence[ResolvedWheel],
    root: Path,
    target: WheelTarget,
    interpreter: PipInterpreter,
    extra_args: Sequence[str],
    stats: FetchStats,
) -> CachedFiles:
    """Download `wheels` with pip into a scratch directory of the cache, then store them verified."""
    (root / "tmp").mkdir(parents=True, exist_ok=True)
    out: CachedFiles = {}
    with tempfile.TemporaryDirectory(prefix="download-", dir=root / "tmp") as tmp:
        pip_download(bundle_name, wheels, Path(tmp), target, interpreter, extra_args)
        for w in wheels:
            path = Path(tmp) / w.filename
            if not path.exists():
                raise BundleError(f"bundle '{bundle_name}': pip reported success but {w.filename} is missing")
            with open(path, "rb") as src:
                out[w.filename] = _store(src, w.filename, root, w.sha256, None, w.url)
            stats.fetched += out[w.filename][2]
    return out


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

    def request(self) -> dict[str, str | int]:
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
    from orchestrator.fleet import Bundle

    root = root or wheel_cache_root()
    key = canonicalize_name(name)
    version = version or _installed_version(name)
    memo = root / "tools" / f"{key}-{version}-cp{python.replace('.', '')}-linux_{MACHINE}.json"
    known = _remembered_tool(memo, key, version, root)
    if known is not None:
        return known
    spec = Bundle.model_validate({"python": python, "pins": [f"{name}=={version}"]})
    resolution = pip_resolve(f"tool:{name}", spec, Path.cwd(), no_deps=True)
    files = fetch_resolved(
        f"tool:{name}", resolution.wheels, root, WheelTarget(python), resolution.interpreter, [], FetchStats()
    )
    path, sha, size = files[resolution.wheels[0].filename]
    memo.parent.mkdir(parents=True, exist_ok=True)
    memo.write_text(json.dumps({"filename": path.name, "sha256": sha, "size": size}) + "\n")
    return CachedWheel(key, version, path.name, sha, size, path)


def _installed_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed_version

    try:
        return installed_version(name)
    except PackageNotFoundError:
        raise BundleError(f"{name} is not installed on the controller; cannot pick its version") from None


def _remembered_tool(memo: Path, key: str, version: str, root: Path) -> CachedWheel | None:
    """The tool wheel a memo file names, if that wheel is still intact in the cache."""
    try:
        known = json.loads(memo.read_text())
        filename, sha, size = str(known["filename"]), str(known["sha256"]), int(known["size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    hit = cached_wheel(sha, filename, size=size, root=root)
    return CachedWheel(key, version, filename, sha, size, hit) if hit else None
