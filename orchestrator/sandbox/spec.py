"""What a sandbox is asked to be: its directory, its workers' addresses and its lanes (pure).

Every rule here is checked before anything is started, so a bad request never
leaves half a sandbox behind.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hostside.folklore import FOLKLORE_VARS
from orchestrator.errors import SandboxError

SLICE = "slice"
DEFAULT_DIR = "/var/tmp/orch-sandbox"
DIR_ENV = "ORCH_SANDBOX_DIR"
DEFAULT_BASE_ADDRESS = "127.0.1.1"
PORT = 22
WORKER_ROOT = "/var/lib/orch"
SHARED_MOUNT = "/mnt/orch-shared"
WORKER_HOME = "/root"
READY_TIMEOUT = 20.0
MAX_WORKERS = 256
MAX_SLICES = 8
CHIPS_PER_WORKER = 4  # v6e hosts carry 4 chips each; only the name uses it here

# Paths a worker rebinds to private copies (or the shared dir): the sandbox
# directory must not be under any of them.
REBOUND_PATHS = ("/tmp", WORKER_HOME, WORKER_ROOT, SHARED_MOUNT)


@dataclass(frozen=True)
class SandboxBundle:
    """A bundle the sandbox fleet defines."""

    python: str
    pins: tuple[str, ...]
    note: str


# The real bundles the sandbox fleet defines (later features and tests use these names).
BUNDLES: dict[str, SandboxBundle] = {
    "jax-cpu": SandboxBundle(
        python="3.11",
        pins=("jax==0.10.2", "jaxlib==0.10.2"),
        note="stock jax/jaxlib 0.10.2 on the CPU backend (the last jax line for Python 3.11); "
        "multi-process with gloo collectives",
    ),
    "jax-libtpu": SandboxBundle(
        python="3.11",
        pins=("jax==0.10.2", "jaxlib==0.10.2", "libtpu==0.0.42.1"),
        note="jax 0.10.2 with libtpu 0.0.42.1: a lane that intends a TPU; with no chip, jax falls "
        "back to CPU unless JAX_PLATFORMS=tpu makes the failure explicit",
    ),
    "torch-cpu": SandboxBundle(
        python="3.11",
        pins=("torch==2.13.0+cpu",),
        note="PyTorch 2.13.0 CPU-only build (no CUDA libraries); torch.distributed over gloo",
    ),
}
PLATFORMS = ("cpu", "tpu")
FORBIDDEN_VARS = tuple(FOLKLORE_VARS)
RUNTIME_PROFILES: dict[str, dict[str, str]] = {
    "cpu": {"JAX_PLATFORMS": "cpu", "PJRT_DEVICE": "CPU"},
    "tpu": {"PJRT_DEVICE": "TPU"},
}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class LaneSpec:
    """A lane of the sandbox fleet: the next `count` workers, in index order."""

    name: str
    count: int
    platform: str
    bundle: str

    def __str__(self) -> str:
        return f"{self.name}:{self.count}:{self.platform}:{self.bundle}"


@dataclass(frozen=True)
class Shape:
    """What must match for `up` to find a running sandbox to be the one asked for."""

    workers: int
    lanes: tuple[LaneSpec, ...]
    base_address: str
    port: int
    slices: int = 1

    def __str__(self) -> str:
        across = f" in {self.slices} slices" if self.slices > 1 else ""
        return (
            f"{self.workers} worker(s){across} from {self.base_address}:{self.port}, "
            f"lanes {' '.join(str(lane) for lane in self.lanes)}"
        )


def sandbox_dir(value: str | os.PathLike[str] | None = None) -> Path:
    """The sandbox directory: `value`, then $ORCH_SANDBOX_DIR, then /var/tmp/orch-sandbox."""
    return Path(value or os.environ.get(DIR_ENV) or DEFAULT_DIR)


def check_dir(value: str | os.PathLike[str]) -> Path:
    """The absolute sandbox directory, or SandboxError if workers could not see it."""
    path = Path(os.path.abspath(os.path.expanduser(str(value))))
    real = Path(os.path.realpath(path))
    if real == Path("/"):
        raise SandboxError(
            f"sandbox dir {path} is the filesystem root", hint=f"use a directory of its own, e.g. --dir {DEFAULT_DIR}"
        )
    for candidate in (path, real):
        for rebound in REBOUND_PATHS:
            if candidate == Path(rebound) or Path(rebound) in candidate.parents:
                raise SandboxError(
                    f"sandbox dir {path} is under {rebound}, which every worker replaces with its own "
                    f"private copy, so a worker's sshd could not read its config and keys there",
                    hint=f"use a directory elsewhere, e.g. --dir {DEFAULT_DIR}",
                )
    return path


def worker_name(index: int) -> str:
    """The name (and hostname) of worker `index`: `slice-w3`."""
    return f"{SLICE}-w{index}"


def slice_names(slices: int) -> list[str]:
    """The sandbox's slice names: `slice` alone, or `slice-a`, `slice-b`, ... for a multislice sandbox."""
    if not 1 <= slices <= MAX_SLICES:
        raise SandboxError(f"--slices {slices}: expected 1 to {MAX_SLICES}")
    return [SLICE] if slices == 1 else [f"{SLICE}-{chr(ord('a') + i)}" for i in range(slices)]


def worker_names(workers: int, slices: int = 1) -> list[str]:
    """Every worker's name (and hostname), slice by slice: `slice-a-w0`, `slice-a-w1`, `slice-b-w0`, ..."""
    per = workers // slices
    return [f"{name}-w{i}" for name in slice_names(slices) for i in range(per)]


def worker_addresses(base_address: str, workers: int) -> list[str]:
    """Consecutive loopback addresses from `base_address`, one per worker."""
    if not 1 <= workers <= MAX_WORKERS:
        raise SandboxError(f"--workers {workers}: expected 1 to {MAX_WORKERS}")
    try:
        base = ipaddress.IPv4Address(base_address)
    except ValueError:
        raise SandboxError(
            f"--base-address {base_address!r} is not an IPv4 address",
            hint=f"use a loopback address such as {DEFAULT_BASE_ADDRESS}",
        ) from None
    loopback = ipaddress.IPv4Network("127.0.0.0/8")
    last = int(base) + workers - 1
    if base not in loopback or last >= int(loopback.broadcast_address) or base == loopback.network_address:
        raise SandboxError(
            f"--base-address {base_address}: {workers} worker address(es) from there must stay "
            f"inside 127.0.0.1-127.255.255.254 (every 127.x.y.z is this machine's loopback)",
            hint=f"use e.g. --base-address {DEFAULT_BASE_ADDRESS}",
        )
    return [str(ipaddress.IPv4Address(int(base) + i)) for i in range(workers)]


def parse_lane_spec(text: str) -> LaneSpec:
    """`NAME:COUNT:PLATFORM:BUNDLE` -> LaneSpec, or SandboxError saying what is wrong."""
    from orchestrator.yamlsrc import did_you_mean

    usage = "expected NAME:COUNT:PLATFORM:BUNDLE, e.g. cpu:4:cpu:jax-cpu"
    parts = text.split(":")
    if len(parts) != 4 or not all(parts):
        raise SandboxError(f"--lane {text!r}: {usage}")
    name, count, platform, bundle = parts
    if not _NAME.match(name):
        raise SandboxError(f"--lane {text!r}: lane name '{name}' must be letters, digits, '.', '_' or '-'")
    if not count.isdigit() or int(count) < 1:
        raise SandboxError(f"--lane {text!r}: COUNT '{count}' must be a whole number of workers, at least 1")
    if platform not in PLATFORMS:
        raise SandboxError(
            f"--lane {text!r}: PLATFORM '{platform}' must be one of: {', '.join(PLATFORMS)}"
            f"{did_you_mean(platform, PLATFORMS)}"
        )
    if bundle not in BUNDLES:
        raise SandboxError(
            f"--lane {text!r}: no bundle '{bundle}'{did_you_mean(bundle, BUNDLES)} "
            f"(sandbox bundles: {', '.join(BUNDLES)})"
        )
    return LaneSpec(name=name, count=int(count), platform=platform, bundle=bundle)


def plan_lanes(workers: int, lanes: Sequence[LaneSpec | str] | None, slices: int = 1) -> tuple[LaneSpec, ...]:
    """The sandbox's lanes: one `cpu` lane over all workers by default, else the given split.

    A multislice sandbox has exactly that one lane, across every slice.
    """
    if slices > 1 and lanes:
        raise SandboxError(
            "--lane splits the workers of one slice; a sandbox with --slices has one multislice lane, cpu"
        )
    if not lanes:
        return (LaneSpec(name="cpu", count=workers, platform="cpu", bundle="jax-cpu"),)
    specs = tuple(lane if isinstance(lane, LaneSpec) else parse_lane_spec(lane) for lane in lanes)
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise SandboxError(f"--lane: lane '{spec.name}' is given twice; each lane needs its own name")
        seen.add(spec.name)
    total = sum(spec.count for spec in specs)
    if total != workers:
        counts = " + ".join(str(spec.count) for spec in specs)
        raise SandboxError(
            f"--lane counts add up to {total} ({counts}) but --workers is {workers}; "
            f"every worker belongs to exactly one lane"
        )
    return specs
