"""Checked value types of fleet.yaml: worker paths, commands, addresses, names.

These values end up on workers' command lines (every remote argument is quoted,
but a value that starts with '-' still becomes an option, and a newline still
splits a generated file), so they are checked where the file is read: a worker
path is absolute and normalised, nothing has a control character or a leading
'-', and an address that looks like an IP address is a real one.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from typing import Annotated

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
MAX_WORKERS = 4096  # workers in one slice: the largest TPU pod slices have a few thousand hosts
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_HOSTNAME = re.compile(r"(?=.{1,253}\Z)[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,62}))*\.?")
_LOOKS_NUMERIC = re.compile(r"[0-9.]+|.*:.*")


def is_name(value: object) -> bool:
    """True for a fleet name (slice, bundle, lane, ...): letters, digits, '.', '_', '-', not starting with a sign."""
    return isinstance(value, str) and NAME_RE.fullmatch(value) is not None


def _plain(value: str, what: str) -> str:
    if _CONTROL.search(value):
        raise PydanticCustomError("control_char", "{what} {value} has a control character", _ctx(what, value))
    if value.startswith("-"):
        raise PydanticCustomError(
            "leading_dash", "{what} {value} starts with '-' (it would be read as an option)", _ctx(what, value)
        )
    return value


def _ctx(what: str, value: str) -> dict[str, str]:
    return {"what": what, "value": repr(value[:200])}


def worker_path(value: str) -> str:
    """An absolute path on the workers, normalised ('/var/lib/orch/' -> '/var/lib/orch')."""
    _plain(value, "path")
    if not value.startswith("/"):
        raise PydanticCustomError(
            "relative_path", "path {value} must be absolute (it is used as given on every worker)", _ctx("", value)
        )
    return posixpath.normpath(value)


def command(value: str) -> str:
    """A program on the workers: a name looked up on PATH ('python3') or an absolute path."""
    _plain(value, "command")
    if not value or value.strip() != value or " " in value:
        raise PydanticCustomError("command", "command {value} must be one program, without spaces", _ctx("", value))
    return worker_path(value) if "/" in value else value


def address(value: str) -> str:
    """A host name or an IP address (v4 or v6), checked as one."""
    _plain(value, "address")
    if _LOOKS_NUMERIC.fullmatch(value):
        try:
            ipaddress.ip_address(value.strip("[]"))
        except ValueError:
            raise PydanticCustomError(
                "ip_address", "{value} is not an IP address (four numbers 0-255, or IPv6)", _ctx("", value)
            ) from None
    elif not _HOSTNAME.fullmatch(value):
        raise PydanticCustomError("hostname", "{value} is not a host name or an IP address", _ctx("", value))
    return value


def word(value: str) -> str:
    """A user name or an ssh alias: no control character, no leading '-', no space."""
    _plain(value, "value")
    if not value or any(c.isspace() for c in value):
        raise PydanticCustomError("word", "{value} must be one word without spaces", _ctx("", value))
    return value


WorkerPath = Annotated[str, AfterValidator(worker_path)]
Command = Annotated[str, AfterValidator(command)]
Address = Annotated[str, AfterValidator(address)]
Word = Annotated[str, AfterValidator(word)]
