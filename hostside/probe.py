"""Prove what a worker can run: `python3 -m hostside.probe [REQUEST.json | - | --request JSON]`.

Reads one JSON request (a file, stdin, or the argument after --request) and prints one JSON
document with a list of checks, each `{name, status, summary, evidence,
elapsed, data}` where status is ok, warn, fail or skip:

    host     hostname, Python, free disk at the worker root
    bundle   the lane's active bundle and the installed frontend/libtpu
             versions vs the bundle manifest and the fleet's pins
    device   accelerator device nodes and their holders, the libtpu
             lockfile (absent, held by which pid, or stale), tpu-info
    runtime  (deep) each frontend imported in a subprocess of the bundle's
             Python with the lane's policy applied before import: devices,
             a small computation, and the platform that actually answered
    cache    the lane's cache directories and their permissions

Request keys (all optional except root): root, lane, platform ("tpu" or
"cpu"), bundle {name, pins}, frontends, policy {env, forbid}, deep,
runtime_timeout, deadline, caches [{frontend, path, expect}],
min_free_bytes.

Stdlib only: this runs under the worker's plain Python. Frontends are only
ever imported inside the child process of the runtime check.

The checks live beside this entry point: `probe_bundle`, `probe_device`,
`probe_runtime_check` (which runs `probe_runtime` under the bundle's
Python); a check's outcome is a `probe_check.Check`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from hostside import SCHEMA_VERSION, frontends
from hostside.facts import collect
from hostside.probe_bundle import check_bundle
from hostside.probe_check import Check, worst
from hostside.probe_device import check_device
from hostside.probe_runtime_check import check_runtime

DEFAULT_MIN_FREE = 2 * 1024**3


def check_host(req: dict[str, Any]) -> Check:
    """Hostname, Python, free disk at the worker root."""
    c = Check("host")
    root = req["root"]
    facts = collect(root)
    c.data = {
        k: facts[k]
        for k in (
            "hostname",
            "python",
            "python_executable",
            "machine",
            "root_exists",
            "disk_free_bytes",
            "disk_total_bytes",
            "time",
        )
    }
    free = facts["disk_free_bytes"]
    parts = [facts["hostname"], f"python {facts['python']}", f"{free / 1024**3:.1f} GiB free at {root}"]
    min_free = int(req.get("min_free_bytes", DEFAULT_MIN_FREE))
    if free < min_free:
        c.mark(
            "warn" if free >= min_free // 4 else "fail",
            f"only {free / 1024**3:.2f} GiB free at {root} (want {min_free / 1024**3:.1f} GiB)",
            layer="other",
        )
    if not facts["root_exists"]:
        c.mark("warn", f"worker root {root} does not exist (nothing deployed yet)")
    # The worker's clock against the controller's is the controller's to judge (its `clock` finding, bounded
    # by the round trip): a difference taken here would count the request's transit and queueing as skew.
    c.summary = ", ".join(parts)
    return c


def check_cache(req: dict[str, Any], state: dict[str, Any]) -> Check:
    """The lane's cache directories exist (or can be created) with the access the worker's role needs."""
    c = Check("cache")
    caches = req.get("caches") or []
    if not caches:
        c.status, c.summary = "skip", "no cache policy for this lane"
        return c
    bundle_id = state.get("bundle_id")
    have = set(state.get("frontends") or []) | set(frontends.frontends(state.get("installed") or {}))
    rows, parts = [], []
    for entry in caches:
        frontend = entry.get("frontend")
        if state.get("installed") is not None and frontend and frontend not in have:
            continue
        path = str(entry["path"])
        if "{bundle_id}" in path:
            if not bundle_id:
                c.mark("skip")
                continue
            path = path.replace("{bundle_id}", bundle_id)
        expect = entry.get("expect", "writable")
        row = {"frontend": frontend, "path": path, "expect": expect, "exists": os.path.isdir(path)}
        rows.append(row)
        label = f"{frontend or 'cache'} {path}"
        if not row["exists"]:
            if os.path.exists(path):
                c.mark("fail", f"{label} exists but is not a directory", layer="cache")
            elif expect == "writable":
                parent = _existing_parent(path)
                if os.access(parent, os.W_OK):
                    # Normal before the first run on a fresh bundle: the runtime creates it.
                    parts.append(f"{frontend or 'cache'} rw (created on first write under {parent})")
                else:
                    c.mark("fail", f"{label} does not exist and {parent} is not writable", layer="cache")
            else:
                c.mark("warn", f"{label} does not exist: the writer has not warmed it yet (cold start)")
            continue
        row["writable"] = os.access(path, os.W_OK | os.X_OK)
        row["readable"] = os.access(path, os.R_OK | os.X_OK)
        if expect == "writable" and not row["writable"]:
            c.mark("fail", f"{label} is not writable, but this worker writes the cache", layer="cache")
        elif expect == "readonly" and not row["readable"]:
            c.mark("fail", f"{label} is not readable", layer="cache")
        elif expect == "readonly" and row["writable"]:
            # A shared mount is usually writable for everyone; orch's launcher opens it read-only.
            parts.append(f"{frontend or 'cache'} ro ok (read-only enforced by the launcher; the mount is writable)")
        else:
            parts.append(f"{frontend or 'cache'} {'rw' if expect == 'writable' else 'ro'} ok")
    c.data["caches"] = rows
    c.summary = ", ".join(parts) or (c.evidence[0] if c.evidence else "no cache directory to check")
    return c


def _existing_parent(path: str) -> str:
    parent = os.path.dirname(path.rstrip("/")) or "/"
    while not os.path.exists(parent) and parent != "/":
        parent = os.path.dirname(parent) or "/"
    return parent


# ---------------------------------------------------------------------------


def probe(req: dict[str, Any]) -> dict[str, Any]:
    """Run every check for one request; the document this job prints."""
    start = time.monotonic()
    deadline = start + float(req.get("deadline", 120))
    state: dict[str, Any] = {}
    checks: list[dict[str, Any]] = []
    steps: tuple[tuple[str, Callable[[], Check]], ...] = (
        ("host", lambda: check_host(req)),
        ("bundle", lambda: check_bundle(req, state)),
        ("device", lambda: check_device(req, state)),
        ("runtime", lambda: check_runtime(req, state, deadline)),
        ("cache", lambda: check_cache(req, state)),
    )
    for name, fn in steps:
        try:
            checks.append(fn().to_dict())
        except Exception as exc:  # a broken check is reported, the others still run
            checks.append(
                {
                    "name": name,
                    "status": "fail",
                    "summary": f"check crashed: {type(exc).__name__}: {exc}",
                    "evidence": [f"{type(exc).__name__}: {exc}"],
                    "elapsed": 0.0,
                    "data": {},
                    "layer": "other",
                }
            )
    return {
        "schema_version": SCHEMA_VERSION,
        "job": "probe",
        "lane": req.get("lane"),
        "platform": req.get("platform"),
        "bundle_id": state.get("bundle_id"),
        "status": worst(c["status"] for c in checks),
        "checks": checks,
        "elapsed": round(time.monotonic() - start, 3),
    }


# The first line a probe writes (stderr): this worker's wall clock as the job starts. The controller
# notes when it arrives, bounding the clock offset by the round trip (orchestrator/probe.py).
CLOCK_MARK = "@orch-clock"


def main(argv: list[str]) -> int:
    """Read the request, print the probe's document; 2 when the request is unreadable."""
    print(f"{CLOCK_MARK} {time.time()!r}", file=sys.stderr, flush=True)
    req: Any
    try:
        if argv[:1] == ["--request"] and len(argv) > 1:
            req = json.loads(argv[1])
        elif argv and argv[0] != "-":
            with open(argv[0]) as fh:
                req = json.load(fh)
        else:
            req = json.load(sys.stdin)
    except (OSError, ValueError) as exc:
        print(f"probe: cannot read the request: {exc}", file=sys.stderr)
        return 2
    if not isinstance(req, dict) or "root" not in req:
        print("probe: the request must be a JSON object with at least 'root'", file=sys.stderr)
        return 2
    print(json.dumps(probe(req)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
