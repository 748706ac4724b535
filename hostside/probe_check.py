"""One probe check's outcome, and how statuses rank (shared by the probe's checks)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

STATUSES = ("ok", "skip", "warn", "fail")


def worst(statuses: Iterable[str]) -> str:
    """The most severe of some statuses (ok < skip < warn < fail); ok for none."""
    ranked = [s for s in statuses if s in STATUSES]
    return max(ranked, key=STATUSES.index) if ranked else "ok"


class Check:
    """Accumulates one check's outcome and times it."""

    def __init__(self, name: str):
        self.name = name
        self.status = "ok"
        self.summary = ""
        self.evidence: list[str] = []
        self.data: dict[str, Any] = {}
        self.layer: str | None = None
        self.headline: str | None = None
        self._start = time.monotonic()

    def mark(self, status: str, line: str | None = None, *, layer: str | None = None) -> None:
        """Record a finding; the first line at the worst status becomes the headline."""
        if STATUSES.index(status) > STATUSES.index(self.status):
            self.status = status
            self.headline = line
            if layer:
                self.layer = layer
        elif status == self.status and self.headline is None:
            self.headline = line
        if line:
            self.evidence.append(line)

    def to_dict(self) -> dict[str, Any]:
        """The check as the probe's document carries it."""
        summary = self.summary or next(iter(self.evidence), "") or self.status
        doc: dict[str, Any] = {
            "name": self.name,
            "status": self.status,
            "summary": summary,
            "evidence": self.evidence,
            "elapsed": round(time.monotonic() - self._start, 3),
            "data": self.data,
        }
        if self.layer:
            doc["layer"] = self.layer
        if self.headline and self.status in ("warn", "fail"):
            doc["headline"] = self.headline
        return doc
