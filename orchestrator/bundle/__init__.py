"""Bundles: a pinned stack resolved into exact, hashed wheels, cached on the controller.

One concept per module:

- `target`: what the wheels must fit (`WheelTarget`: CPython X.Y, linux x86_64, glibc of TPU VM images);
- `lockfile`: the lock model (`Lock`, `LockedWheel`) and its file, `locks/<bundle>.lock.json`;
- `resolve`: every pip run (resolution with `--report`, downloads) and the dependency closure
  under the target's markers;
- `store`: the controller's content-addressed wheel cache that deploy pushes from;
- `lock`: `bundle lock`, resolve with pip into a lock file;
- `check`: `bundle check`, cross-check a bundle's wheels against each other;
- `interpreter`: a bundle's own Python (a relocatable CPython archive), and
  `interpreter_pack`, `bundle interpreter pack` that makes one.

The names below are the package's public surface; import them from `orchestrator.bundle`.
"""

from orchestrator.bundle.lock import LockResult, WheelMetadata, lock_bundle, read_wheel_metadata
from orchestrator.bundle.lockfile import (
    SCHEMA_VERSION,
    Lock,
    LockedInterpreter,
    LockedWheel,
    WheelMeta,
    compute_bundle_id,
    read_lock,
    wheel_tags,
    write_lock,
)
from orchestrator.bundle.resolve import (
    MIN_PIP,
    PIP_TIMEOUT,
    PipInterpreter,
    Resolution,
    ResolutionError,
    ResolvedWheel,
    closure,
    parse_requirements,
    pip_interpreter,
    pip_resolve,
    requirement_applies,
    source_args,
)
from orchestrator.bundle.store import (
    CACHE_ENV,
    CachedWheel,
    cache_path,
    cached_wheel,
    cached_wheel_path,
    fetch_wheels,
    source_location,
    tool_wheel,
    wheel_cache_root,
)
from orchestrator.bundle.target import MACHINE, MAX_GLIBC, WheelTarget

__all__ = [
    "CACHE_ENV",
    "MACHINE",
    "MAX_GLIBC",
    "MIN_PIP",
    "PIP_TIMEOUT",
    "SCHEMA_VERSION",
    "CachedWheel",
    "Lock",
    "LockResult",
    "LockedInterpreter",
    "LockedWheel",
    "PipInterpreter",
    "Resolution",
    "ResolutionError",
    "ResolvedWheel",
    "WheelMeta",
    "WheelMetadata",
    "WheelTarget",
    "cache_path",
    "cached_wheel",
    "cached_wheel_path",
    "closure",
    "compute_bundle_id",
    "fetch_wheels",
    "lock_bundle",
    "parse_requirements",
    "pip_interpreter",
    "pip_resolve",
    "read_lock",
    "read_wheel_metadata",
    "requirement_applies",
    "source_args",
    "source_location",
    "tool_wheel",
    "wheel_cache_root",
    "wheel_tags",
    "write_lock",
]
