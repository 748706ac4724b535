"""The workers a command addresses: `WorkerRef`, and picking them by `--workers`.

Stdlib only (no pydantic, no YAML): the fleet model (fleet.py) builds these
from a validated fleet.yaml, and a plain `orch exec` replaying a validated
fleet (transport/replay.py) builds them from its record, so both pick workers
with the same code.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import ConfigError


@dataclass(frozen=True)
class WorkerRef:
    """A worker with everything needed to reach it and place it in its slice."""

    name: str  # "<slice>-w<index>", unique in the fleet
    slice: str
    index: int
    host: str  # address or ssh alias, as given to SSH
    port: int | None  # None: let ssh config decide
    user: str | None
    identity_file: str | None
    internal_address: str
    root: str
    shared_dir: str | None
    python: str
    lane: str | None


def select_workers(pool: list[WorkerRef], spec: str, *, fleet_path: Path | None = None) -> list[WorkerRef]:
    """Pick workers from `pool` by a comma list of names, globs or index ranges."""
    chosen: dict[str, WorkerRef] = {}
    tokens = [t.strip() for t in spec.split(",") if t.strip()]
    if not tokens:
        raise ConfigError(
            f"--workers {spec!r} names no worker; expected names, globs or index ranges, "
            f"comma-separated (have: {', '.join(w.name for w in pool)})"
        )
    for token in tokens:
        if re.fullmatch(r"\d{1,9}(-\d{1,9})?", token):
            lo, _, hi = token.partition("-")
            hits = [w for w in pool if int(lo) <= w.index <= int(hi or lo)]
        else:
            hits = [w for w in pool if fnmatch.fnmatchcase(w.name, token)]
        if not hits:
            from orchestrator.yamlsrc import did_you_mean  # only for the error: it imports YAML

            raise ConfigError(
                f"--workers: '{token}' matches no worker"
                f"{did_you_mean(token, [w.name for w in pool])} "
                f"(have: {', '.join(w.name for w in pool)})"
            )
        for w in hits:
            chosen[w.name] = w
    return sorted(chosen.values(), key=lambda w: (w.slice, w.index))
