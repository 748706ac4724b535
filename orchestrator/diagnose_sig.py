"""The shape of one diagnosis signature (`Signature`) and the helper the table modules build it with.

Data only; the table itself is split by layer across orchestrator/diagnose_table_*.py and
gathered, in order, by orchestrator/diagnose_table.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Signature:
    """One known failure message: where it comes from and which layer owns it."""

    id: str
    pattern: re.Pattern[str]
    layer: str
    priority: int
    remedy: str
    source: str
    example: str  # a real line carrying the message, as published at `source`
    # True when the message shows a failure caused by another worker's (a lost peer,
    # a torn-down gang): `orch diagnose RUN` looks past it for the first failure.
    consequence: bool = False


def sig(
    id: str,
    layer: str,
    priority: int,
    pattern: str,
    remedy: str,
    source: str,
    example: str,
    flags: int = 0,
    *,
    consequence: bool = False,
) -> Signature:
    return Signature(
        id=id,
        pattern=re.compile(pattern, flags),
        layer=layer,
        priority=priority,
        remedy=remedy,
        source=source,
        example=example,
        consequence=consequence,
    )


XLA_GH = "https://github.com/openxla/xla/blob/main/"
JAX_GH = "https://github.com/jax-ml/jax/blob/main/"
PTXLA_GH = "https://github.com/pytorch/xla/blob/master/"
