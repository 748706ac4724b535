"""A run's receipts as the controller holds them, and what receipts needs to know of a run.

The controller keeps its copies under the run record: `<record>/<worker>/record.json`
(gathered from the worker) and, failing that, the receipt the launch collected in
`<record>/workers/<worker>.json`. `gather.json` says what the last gather did.

The run record and its plan are described here as protocols (the few facts
receipts reads), so this package depends on no launch module.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from hostside.files import write_atomic
from hostside.rundir import RECORD_FILE
from orchestrator.receipts.schema import Doc

GATHER_FILE = "gather.json"


class ProcessFacts(Protocol):
    """One process of a run's plan, as receipts reads it."""

    @property
    def worker(self) -> str: ...
    @property
    def process_id(self) -> int: ...
    @property
    def run_dir(self) -> str: ...


class TargetFacts(Protocol):
    """What a run ran."""

    def argv(self) -> list[str]: ...


class PlanFacts(Protocol):
    """A run's plan, as receipts reads it (orchestrator.launch's LaunchPlan is one)."""

    @property
    def run_id(self) -> str: ...
    @property
    def lane(self) -> str: ...
    @property
    def bundle(self) -> str | None: ...
    @property
    def platform(self) -> str | None: ...
    @property
    def target(self) -> TargetFacts: ...
    @property
    def workers(self) -> Sequence[str]: ...
    @property
    def processes(self) -> Sequence[ProcessFacts]: ...
    def process(self, worker: str) -> ProcessFacts: ...


class RunRecordFacts(Protocol):
    """The controller's record of a run (orchestrator.runs' RunRecord is one)."""

    @property
    def dir(self) -> str | os.PathLike[str]: ...
    def plan(self) -> PlanFacts: ...
    def info(self) -> Doc: ...


@dataclass(frozen=True)
class RunReceipts:
    """A run's plan facts and each worker's receipt (None when the controller has none)."""

    run_id: str
    lane: str
    bundle: str | None
    platform: str | None
    target: tuple[str, ...]
    state: str | None
    start_skew: float | None
    workers: tuple[str, ...]  # in process order
    process_ids: Mapping[str, int]
    receipts: Mapping[str, Doc | None]
    sources: Mapping[str, str | None]  # gathered | launch-collect | None
    gather: Doc | None = None
    dir: str | None = None


def receipt_path(root: Path, worker: str) -> Path:
    """Where the controller keeps `worker`'s gathered receipt of the run recorded in `root`."""
    return root / worker / RECORD_FILE


def load_run(record: RunRecordFacts) -> RunReceipts:
    """The receipts of a recorded run: gathered copies first, else what the launch collected."""
    plan = record.plan()
    info = record.info()
    root = Path(record.dir)
    receipts: dict[str, Doc | None] = {}
    sources: dict[str, str | None] = {}
    for name in plan.workers:
        receipts[name], sources[name] = _one_receipt(root, name)
    outcome = info.get("outcome")
    outcome = outcome if isinstance(outcome, dict) else {}
    skew, state = outcome.get("start_skew"), info.get("state")
    return RunReceipts(
        run_id=plan.run_id,
        lane=plan.lane,
        bundle=plan.bundle,
        platform=plan.platform,
        target=tuple(plan.target.argv()),
        state=state if isinstance(state, str) else None,
        start_skew=float(skew) if isinstance(skew, (int, float)) and not isinstance(skew, bool) else None,
        workers=tuple(plan.workers),
        process_ids={p.worker: p.process_id for p in plan.processes},
        receipts=receipts,
        sources=sources,
        gather=read_json(root / GATHER_FILE),
        dir=str(root),
    )


def _one_receipt(root: Path, worker: str) -> tuple[Doc | None, str | None]:
    gathered = read_json(receipt_path(root, worker))
    if gathered is not None:
        return gathered, "gathered"
    collected = (read_json(root / "workers" / f"{worker}.json") or {}).get("record")
    return (collected, "launch-collect") if isinstance(collected, dict) and collected else (None, None)


def read_json(path: Path) -> Doc | None:
    """The JSON object at `path`, or None when absent or unreadable."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def write_json(path: Path, doc: Doc) -> None:
    """Write `doc` so readers see the old or the new file, never half of one."""
    write_atomic(str(path), json.dumps(doc, indent=2, default=str) + "\n", mode=0o644)
