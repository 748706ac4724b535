"""Test tiers: plain `pytest` runs the unit tier and says how to run the others.

The default deselection lives in pyproject.toml (`addopts = -m "not ssh and
not e2e"`); `bash scripts/test` (the README's test command, what CI runs)
passes `-m ""` and so runs every tier. This plugin only says so, once, when
the default left tests out.
"""

from __future__ import annotations

import pytest

UNIT_ONLY = "not ssh and not e2e"
HOW = (
    "unit tier only (ssh/e2e deselected). Every tier, as CI runs it: bash scripts/test; "
    "the local-slice tiers alone: pytest -m ssh, pytest -m e2e (need root and sshd; see CONTRIBUTING.md)"
)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """One line after the summary when the default left the slice tiers out."""
    if config.option.markexpr == UNIT_ONLY and terminalreporter.stats.get("deselected"):
        terminalreporter.write_line(HOW)
