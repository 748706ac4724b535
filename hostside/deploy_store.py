"""The deploy's things on a worker: the wheel store and the lanes' environments.

Uploaded wheels enter the store only after their sha256 and size are checked
(`receive`); an environment is complete once its marker file exists. Every
deploy step fails with a DeployFailure, whose text is shown to the operator.
"""

from __future__ import annotations

import os
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
    return os.path.exists(os.path.join(layout.env(bundle_id), COMPLETE))


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
