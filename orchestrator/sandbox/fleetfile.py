"""The fleet.yaml a sandbox writes: its workers, the sandbox bundles, runtime profiles and lanes (pure)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from orchestrator.sandbox.spec import (
    BUNDLES,
    CHIPS_PER_WORKER,
    FORBIDDEN_VARS,
    PORT,
    RUNTIME_PROFILES,
    SHARED_MOUNT,
    WORKER_ROOT,
    LaneSpec,
    slice_names,
)


def known_hosts_name(address: str, port: int) -> str:
    """How ssh and paramiko name a host in known_hosts."""
    return address if port == 22 else f"[{address}]:{port}"


def _c(text: str, comment: str) -> str:
    """A YAML line with its comment in the comment column."""
    return f"{text:<36}# {comment}"


def render_fleet(
    dir: str | os.PathLike[str],
    addresses: Sequence[str],
    lanes: Sequence[LaneSpec],
    port: int = PORT,
    slices: int = 1,
) -> str:
    """The sandbox's fleet.yaml text (paths relative to the file)."""
    sections = (
        _slice(dir, addresses, port, slices),
        _bundles(),
        _runtime_profiles(),
        _cache_policies(),
        _lanes(lanes, slices),
    )
    return "\n".join(line for section in sections for line in section) + "\n"


def _q(text: str) -> str:
    """A JSON string is a YAML scalar that never changes meaning."""
    return json.dumps(text)


def _slice(dir: str | os.PathLike[str], addresses: Sequence[str], port: int, slices: int) -> list[str]:
    n = len(addresses)
    per = n // slices
    names = slice_names(slices)
    lines = [
        f"# Local pod slice written by `orch sandbox up` in {dir}.",
        f"# {n} real sshd worker(s) on loopback, each in its own mount + UTS namespace: own",
        f"# hostname, own {WORKER_ROOT}, /tmp and home; {SHARED_MOUNT} is one directory every",
        "# worker sees. `orch sandbox down` stops the workers and removes this file.",
        "version: 1",
        "",
        "ssh:",
        _c("  known_hosts: known_hosts", "this sandbox's host keys, written by `up`"),
        "  host_key_policy: strict",
        "  connect_timeout: 5",
        "",
        "slices:",
    ]
    for s, name in enumerate(names):
        lines += [
            f"  {name}:",
            _c(f"    accelerator_type: v6e-{CHIPS_PER_WORKER * per}", "nominal: no TPU chips here"),
            f"    root: {WORKER_ROOT}",
            _c(f"    shared_dir: {SHARED_MOUNT}", "stand-in for a Filestore/NFS mount"),
            _c("    python: python3", "Debian's /usr/bin/python3 inside a worker"),
            "    user: root",
            "    identity_file: id_ed25519",
            _c("    skip_metadata_query: true", "off-GCE: libtpu must not wait for a metadata server"),
        ]
        if port != 22:
            lines.append(f"    port: {port}")
        lines.append("    workers:")
        chunk = addresses[s * per : (s + 1) * per]
        lines += [f"      - {{index: {i}, address: {a}}}" for i, a in enumerate(chunk)]
    return lines


def _bundles() -> list[str]:
    lines = ["", "# Sources left empty: pip's own configuration says where wheels come from.", "bundles:"]
    for name, b in BUNDLES.items():
        lines += [
            f"  {name}:",
            f"    python: {_q(b.python)}",
            f"    pins: [{', '.join(b.pins)}]",
            "    provenance:",
            f"      note: {_q(b.note)}",
        ]
    return lines


def _runtime_profiles() -> list[str]:
    lines = ["", "# Environment applied before any frontend is imported.", "runtime_profiles:"]
    for name, env in RUNTIME_PROFILES.items():
        lines += [f"  {name}:", "    env:"] + [f"      {k}: {_q(v)}" for k, v in env.items()]
        lines.append(f"    forbid: [{', '.join(FORBIDDEN_VARS)}]")
    return lines


def _cache_policies() -> list[str]:
    return [
        "",
        "cache_policies:",
        "  per-host:",
        _c("    mode: per-host", "<root>/cache on each worker's own disk"),
        "  shared:",
        _c("    mode: single-writer", "process 0 warms, the others read"),
        f"    root: {SHARED_MOUNT}/cache",
    ]


def _lanes(lanes: Sequence[LaneSpec], slices: int) -> list[str]:
    lines = ["", "lanes:"]
    if slices > 1:
        (lane,) = lanes
        return lines + [
            f"  {lane.name}:",
            _c(f"    slices: [{', '.join(slice_names(slices))}]", "one gang across every slice (multislice)"),
            f"    bundle: {lane.bundle}",
            f"    runtime: {lane.platform}",
            "    cache: per-host",
            f"    platform: {lane.platform}",
        ]
    start = 0
    for lane in lanes:
        end = start + lane.count - 1
        workers = str(start) if lane.count == 1 else _q(f"{start}-{end}")
        lines += [
            f"  {lane.name}:",
            f"    workers: {workers}",
            f"    bundle: {lane.bundle}",
            f"    runtime: {lane.platform}",
            "    cache: per-host",
            f"    platform: {lane.platform}",
        ]
        start = end + 1
    return lines
