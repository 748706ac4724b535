"""The frozen Result every remote operation returns, one per worker.

Its home is here, apart from the transport package, so that `orch exec`'s warm
fast path (`entry.py`) can build and render Results without importing the
fleet model or SSH; everything else imports it from `orchestrator.transport`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TAIL_LINES = 20


@dataclass(frozen=True)
class Result:
    """What one remote operation did on one worker."""

    host: str
    argv: tuple[str, ...]
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    elapsed: float = 0.0
    error: str | None = None  # transport-level failure, when there is no exit code
    # "timeout", "connect", "host-key", "auth": the worker could not be talked to;
    # "remote": it answered with an error (e.g. SFTP: disk full, no such directory);
    # "local": the controller's side failed (e.g. the local file is missing).
    error_kind: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.exit_code == 0

    @property
    def failed(self) -> bool:
        return not self.ok

    def tail(self, stream: str = "stderr", lines: int = TAIL_LINES) -> str:
        text = self.stderr if stream == "stderr" else self.stdout
        return "\n".join(text.rstrip("\n").splitlines()[-lines:])

    def describe(self) -> str:
        """One line for a summary: why this host failed (or 'ok')."""
        if self.ok:
            return "ok"
        if self.error:
            return self.error
        last = self.tail("stderr", 1) or self.tail("stdout", 1)
        return f"exit {self.exit_code}" + (f": {last}" if last else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "argv": list(self.argv),
            "ok": self.ok,
            "exit_code": self.exit_code,
            "stdout_tail": self.tail("stdout"),
            "stderr_tail": self.tail("stderr"),
            "elapsed": round(self.elapsed, 3),
            "error": self.error,
            "error_kind": self.error_kind,
        }
