"""Bundle pins (`NAME[EXTRAS]==VERSION`): the one parser both sides use (stdlib only)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_PIN = re.compile(
    rf"^\s*(?P<name>{_NAME})\s*(?:\[\s*(?P<extras>{_NAME}(?:\s*,\s*{_NAME})*)?\s*\])?\s*===?\s*(?P<version>[^\s;]+)\s*$"
)
_REQUIREMENT_NAME = re.compile(rf"^\s*({_NAME})")


@dataclass(frozen=True)
class Pin:
    """One exact pin: its normalized project name, extras and version."""

    name: str  # PEP 503 normalized: 'Torch_XLA' -> 'torch-xla'
    extras: tuple[str, ...]
    version: str


def normalize(name: str) -> str:
    """PEP 503 name normalization: 'Torch_XLA' -> 'torch-xla'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pin(text: str) -> Pin:
    """`NAME[EXTRAS]==VERSION` (or `===`); ValueError for anything else (a range, a URL, a marker)."""
    m = _PIN.match(text)
    if not m:
        raise ValueError(f"pin {text!r} is not exact; expected NAME==VERSION (e.g. 'jax==0.10.2')")
    extras = tuple(normalize(e.strip()) for e in (m.group("extras") or "").split(",") if e.strip())
    return Pin(name=normalize(m.group("name")), extras=extras, version=m.group("version"))


def is_exact(text: str) -> bool:
    """True when `text` is an exact pin `parse_pin` accepts."""
    return _PIN.match(text) is not None


def pinned_versions(pins: Iterable[str]) -> dict[str, str]:
    """{normalized name: version} of the exact pins among `pins` (others are left out)."""
    out = {}
    for text in pins:
        if is_exact(text):
            pin = parse_pin(text)
            out[pin.name] = pin.version
    return out


def project_name(requirement: str) -> str:
    """The normalized project name of any requirement string ('torch_xla[tpu]>=2' -> 'torch-xla'); '' if none."""
    m = _REQUIREMENT_NAME.match(requirement)
    return normalize(m.group(1)) if m else ""


def project_names(pins: Iterable[str]) -> set[str]:
    """The normalized project names of some requirements."""
    return {name for name in map(project_name, pins) if name}
