"""A worker's listing of its run directory, validated before the controller acts on it.

`hostside.gather` answers with `{name: {size, mtime, sha256, ...}}`. The names become
paths on the controller (`<run record>/<worker>/<name>`), so a name is accepted only
when it is one plain path component: not empty, not `.`/`..`, no leading dot (the
controller's own `.part` files start with one), no `/`, `\\`, NUL or control
character. A listing with one bad name is refused as a whole, naming the worker: a
worker that lists `../../.bashrc` is broken or hostile, and nothing it says is copied.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.errors import OrchError

SHA256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
_PLAIN = re.compile(r"[^./\\\x00-\x1f\x7f][^/\\\x00-\x1f\x7f]{0,254}")


class ListedFile(BaseModel):
    """One file of a worker's run directory, as the worker describes it."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    size: Annotated[int, Field(ge=0)] | None = None
    sha256: SHA256 | None = None
    too_large: bool = False
    error: Annotated[str, Field(max_length=1000)] | None = None


class Listing(BaseModel):
    """What `hostside.gather` answered for one run directory."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    exists: bool
    live: bool = False
    files: dict[str, ListedFile] = Field(default_factory=dict)


def is_plain_name(name: str) -> bool:
    """True when `name` is one path component that stays inside the directory it is joined to."""
    return bool(_PLAIN.fullmatch(name)) and name not in (".", "..") and len(name.encode()) <= 255


def parse_listing(doc: object, worker: str) -> Listing:
    """The worker's listing as a validated `Listing`, or an OrchError naming the worker."""
    try:
        listing = Listing.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "document"
        raise OrchError(f"refused the worker's run-directory listing: {where}: {first['msg']}", host=worker) from None
    for name in listing.files:
        if not is_plain_name(name):
            raise OrchError(
                f"refused the worker's run-directory listing: file name {name[:200]!r} is not one plain "
                "path component (no '/', '..', leading dot or control character); nothing was copied",
                host=worker,
                hint="the worker's run directory or its hostside is corrupted: look at it before gathering again",
            )
    return listing


def inside(directory: Path, name: str) -> Path:
    """`directory / name`, checked to resolve to a direct child of `directory`."""
    path = directory / name
    if not is_plain_name(name) or path.resolve().parent != directory.resolve():
        raise OrchError(f"{name[:200]!r} would be written outside {directory}")
    return path
