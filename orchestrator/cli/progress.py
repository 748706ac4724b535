"""A live per-worker status board for long fan-out verbs (deploy, launch)."""

from __future__ import annotations

import threading
from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.table import Table

from orchestrator.cli.render import cell


class WorkerBoard:
    """One row per worker with its current phase; plain lines when not a terminal."""

    def __init__(self, workers: list[str], title: str):
        self.phases = {w: "waiting" for w in workers}
        self.title = title
        self.lock = threading.Lock()
        self.console = Console(stderr=True)
        self.live = (
            Live(self._table(), console=self.console, refresh_per_second=8, transient=False)
            if self.console.is_terminal
            else None
        )

    def _table(self) -> Table:
        table = Table(title=self.title, show_edge=False)
        table.add_column("worker")
        table.add_column("phase")
        for w, phase in self.phases.items():
            style = "red" if phase.startswith("failed") else "green" if phase in ("installed", "unchanged") else ""
            table.add_row(w, cell(phase, style))  # a phase can carry a worker's message
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
