"""Folklore variables: stale advice that breaks current stacks (FIELD-GUIDE section 3).

Refused on every lane, on top of a runtime profile's own `forbid` list: the
fleet refuses a profile that sets one, the launch plan refuses `--env` that
sets one, and the launcher refuses to start while one is set. One list, one
wording of why.
"""

from __future__ import annotations

FOLKLORE_VARS: dict[str, str] = {
    "XLA_USE_BF16": "breaks the current Pallas attention path; use dtype policy in code",
    "XLA_USE_SPMD": "is not the SPMD switch; the launcher calls torch_xla.runtime.use_spmd()",
}


def why(var: str) -> str | None:
    """Why `var` is refused, or None when it is not folklore."""
    return FOLKLORE_VARS.get(var)
