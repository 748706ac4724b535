"""The deploy's things on a worker: the wheel store and the lanes' environments.

Uploaded wheels enter the store only after their sha256 and size are checked
(`receive`). An environment counts as installed only if `env_problem` finds
nothing wrong with it: its completion marker (written last, inside the build
directory, before the rename into place), a manifest naming it, a `bin/python`
that resolves to an executable, and every distribution the manifest records
present with its METADATA, its RECORD and every file its RECORD lists. Every
deploy step fails with a DeployFailure, whose text is shown to the operator.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import re
from typing import Any

from hostside.files import sha256_file as _sha256
from hostside.layout import Layout

COMPLETE = ".orch-complete"
MANIFEST = "orch-bundle.json"


class DeployFailure(Exception):
    """A step failed; `reason` is shown to the operator as is."""


def _env_id(layout: Layout, link: str) -> str | None:
    try:
        return os.path.basename(os.readlink(link).rstrip("/"))
    except OSError:
        return None


def _complete(layout: Layout, bundle_id: str) -> bool:
    """Whether `envs/<bundle_id>` is a complete, intact environment (see `env_problem`)."""
    return env_problem(layout.env(bundle_id), bundle_id) is None


def env_problem(env: str, bundle_id: str | None = None) -> str | None:
    """Why the environment at `env` is not complete (None: it is; "not installed": absent).

    Checks what an interrupted install or a damaged disk leaves behind; never
    runs the environment's Python (it stats files, reads the manifest and the
    distributions' RECORD files)."""
    if not os.path.lexists(env):
        return "not installed"
    if not os.path.isdir(env):
        return f"{env} is not a directory"
    if not os.path.exists(os.path.join(env, COMPLETE)):
        return f"no completion marker {COMPLETE} (its install did not finish)"
    try:
        with open(os.path.join(env, MANIFEST)) as fh:
            manifest = json.load(fh)
    except (OSError, ValueError) as exc:
        return f"manifest {MANIFEST} unreadable ({exc.__class__.__name__})"
    if not isinstance(manifest, dict) or not isinstance(manifest.get("distributions"), dict):
        return f"manifest {MANIFEST} lists no distributions"
    if bundle_id is not None and manifest.get("bundle_id") != bundle_id:
        return f"manifest {MANIFEST} names bundle id {manifest.get('bundle_id')}, not {bundle_id}"
    python = os.path.join(env, "bin", "python")
    if not os.path.lexists(python):
        return "bin/python is missing"
    if not os.access(python, os.X_OK):  # follows the link: its interpreter must be there too
        return f"bin/python does not resolve to an executable ({os.path.realpath(python)})"
    return _distributions_problem(env, manifest["distributions"])


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _dist_infos(env: str) -> dict[str, str]:
    """{normalized name: dist-info directory} of an environment's site-packages."""
    found: dict[str, str] = {}
    for info in glob.glob(os.path.join(env, "lib", "python*", "site-packages", "*.dist-info")):
        found[_norm(os.path.basename(info).partition("-")[0])] = info
    return found


def _distributions_problem(env: str, wanted: dict[str, Any]) -> str | None:
    found = _dist_infos(env)
    for name, version in sorted(wanted.items()):
        if _norm(name) not in found:
            return f"distribution {name} {version} is missing (no dist-info)"
        have = _metadata_version(os.path.join(found[_norm(name)], "METADATA"))
        if have is not None and have != str(version):
            return f"distribution {name} is {have}, the manifest says {version}"
        problem = files_problem(env, name, found)
        if problem:
            return problem
    return None


def files_problem(env: str, name: str, found: dict[str, str] | None = None) -> str | None:
    """What an installed distribution lacks: its METADATA, its RECORD, a file its
    RECORD lists (compiled .pyc files are optional). None also when it is not installed at all."""
    info = (found if found is not None else _dist_infos(env)).get(_norm(name))
    if info is None:
        return None
    for part in ("METADATA", "RECORD"):
        if not os.path.isfile(os.path.join(info, part)):
            return f"distribution {name} has no {part}"
    missing = _record_missing(info)
    return f"distribution {name} lacks {missing} (listed in its RECORD)" if missing else None


def _metadata_version(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
                if not line.strip():
                    break
    except OSError:
        pass
    return None


def _record_missing(info: str) -> str | None:
    """The first file a dist-info's RECORD lists that is not there (compiled .pyc files are optional)."""
    site = os.path.dirname(info)
    try:
        with open(os.path.join(info, "RECORD"), newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error):
        return "a readable RECORD"
    for row in rows:
        if not row or not row[0] or row[0].endswith(".pyc"):
            continue
        if not os.path.lexists(os.path.normpath(os.path.join(site, row[0]))):
            return row[0]
    return None


def _stored(layout: Layout, wheel: dict[str, Any]) -> bool:
    """In the store with the right size (the hash is checked when installing)."""
    try:
        return bool(os.path.getsize(layout.wheel(wheel["sha256"], wheel["filename"])) == wheel["size"])
    except OSError:
        return False


def _drop_corrupt(layout: Layout, wheels: list[dict[str, Any]]) -> list[str]:
    """Remove store files whose sha256 is wrong (so a re-run pushes them again)."""
    bad = []
    for w in wheels:
        path = layout.wheel(w["sha256"], w["filename"])
        if os.path.exists(path) and _sha256(path) != w["sha256"]:
            os.unlink(path)
            bad.append(w["filename"])
    return bad


def receive(req: dict[str, Any]) -> dict[str, Any]:
    """Move uploaded files (in the store's incoming dir) into the store after
    checking sha256 and size; a mismatching file is deleted, never kept."""
    layout = Layout(req["root"])
    stored, bad = [], []
    for item in req["files"]:
        src = item["path"]
        try:
            size = os.path.getsize(src)
            digest = _sha256(src)
        except OSError as exc:
            bad.append({"filename": item["filename"], "reason": f"unreadable upload: {exc.strerror}"})
            continue
        if digest != item["sha256"] or size != item["size"]:
            os.unlink(src)
            bad.append(
                {
                    "filename": item["filename"],
                    "reason": f"sha256 mismatch: expected {item['sha256']} ({item['size']} bytes), "
                    f"got {digest} ({size} bytes); file discarded",
                }
            )
            continue
        dest = layout.wheel(item["sha256"], item["filename"])
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        os.replace(src, dest)
        stored.append(item["filename"])
    return {"stored": stored, "bad": bad}
