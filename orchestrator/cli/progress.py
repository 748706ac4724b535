"""A live per-worker status board for long fan-out verbs (deploy, launch).

Up to SUMMARY_THRESHOLD workers it shows a row per worker; above that, a row
per phase with its count and its workers' names compacted, so 256 workers fit
a terminal (failed phases last, where the eye ends).
"""

from __future__ import annotations

import threading
from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.table import Table

from orchestrator.cli.render import cell, compact_names, summarize


class WorkerBoard:
    """One row per worker with its current phase; plain lines when not a terminal."""

    def __init__(self, workers: list[str], title: str, verbose: bool = False):
        self.phases = {w: "waiting" for w in workers}
        self.title = title
        self.by_phase = summarize(len(workers), verbose)
        self.lock = threading.Lock()
        self.console = Console(stderr=True)
        self.live = (
            Live(self._table(), console=self.console, refresh_per_second=8, transient=False)
            if self.console.is_terminal
            else None
        )

    @staticmethod
    def _style(phase: str) -> str:
        return "red" if phase.startswith("failed") else "green" if phase in ("installed", "unchanged") else ""

    def _table(self) -> Table:
        if self.by_phase:
            return self._phase_table()
        table = Table(title=self.title, show_edge=False)
        table.add_column("worker")
        table.add_column("phase")
        for w, phase in self.phases.items():
            table.add_row(w, cell(phase, self._style(phase)))  # a phase can carry a worker's message
        return table

    def _phase_table(self) -> Table:
        table = Table(title=f"{self.title} ({len(self.phases)} workers)", show_edge=False)
        table.add_column("phase")
        table.add_column("workers", justify="right")
        table.add_column("which", overflow="fold")
        groups: dict[str, list[str]] = {}
        for w, phase in self.phases.items():
            groups.setdefault(phase, []).append(w)
        for phase, names in sorted(groups.items(), key=lambda kv: (kv[0].startswith("failed"), kv[0])):
            style = self._style(phase)
            table.add_row(cell(phase, style), str(len(names)), cell(compact_names(names)))
        return table

    def update(self, worker: str, phase: str) -> None:
        with self.lock:
            self.phases[worker] = phase
            if self.live:
                self.live.update(self._table())

    def __enter__(self) -> WorkerBoard:
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.live:
            self.live.__exit__(kind, exc, tb)
