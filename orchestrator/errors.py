"""One error tree for orch.

Every error carries a message, optionally the host it concerns and a hint
(the exact next step). This module imports nothing else from the package so
that every layer can raise these without import cycles.
"""

from __future__ import annotations


class OrchError(Exception):
    """Base of every error orch reports to a user (exit code 2 unless set)."""

    exit_code = 2

    def __init__(self, message: str, *, host: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.host = host
        self.hint = hint

    def __str__(self) -> str:
        text = f"{self.host}: {self.message}" if self.host else self.message
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class ConfigError(OrchError):
    """fleet.yaml, a playbook or a lock file is malformed or inconsistent."""

    def __init__(self, problems: list[str] | str, *, hint: str | None = None):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems), hint=hint)


class TransportError(OrchError):
    """A worker could not be reached or refused us (SSH, host key, auth)."""


class HostKeyError(TransportError):
    """A worker's host key is unknown or changed; never silently accepted."""


class BundleError(OrchError):
    """A bundle could not be locked, checked, pushed or installed."""


class LockHeldError(OrchError):
    """Another orch command holds a lock we need."""


class LaunchError(OrchError):
    """A launch was refused by preflight or failed as a gang."""

    exit_code = 1


class SandboxError(OrchError):
    """The local slice cannot be started, stopped or changed."""
