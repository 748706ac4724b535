"""Test tiers: plain `pytest` runs the unit tier and says how to run the others.

With no test paths and no `-m`, the `ssh` and `e2e` tiers (real sshd workers
on a local slice; they need root) are deselected, and one line at the end
says how to run them. Naming files or tests (`pytest tests/test_exec_slice.py`)
or a marker expression (`-m ssh`) runs what was asked, and `--all-tiers`
(what `bash scripts/test`, the README's test command and CI, passes) runs
everything.
"""

from __future__ import annotations

import pytest

SLICE_TIERS = ("ssh", "e2e")
HOW = (
    "unit tier only (ssh/e2e deselected). Every tier, as CI runs it: bash scripts/test; "
    "one tier: pytest -m ssh, pytest -m e2e (root and sshd; see CONTRIBUTING.md)"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--all-tiers", action="store_true", help="run the ssh and e2e tiers too (scripts/test does)")


def unit_only(config: pytest.Config) -> bool:
    """Whether this is a default run: no paths, no marker expression, no --all-tiers."""
    return (
        not config.getoption("--all-tiers")
        and not config.option.markexpr
        and config.args_source == pytest.Config.ArgsSource.TESTPATHS
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not unit_only(config):
        return
    slice_tests = [item for item in items if any(item.get_closest_marker(m) for m in SLICE_TIERS)]
    if slice_tests:
        config.hook.pytest_deselected(items=slice_tests)
        items[:] = [item for item in items if item not in slice_tests]
        config.stash[_DESELECTED] = len(slice_tests)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """One line after the summary when the default left the slice tiers out."""
    if config.stash.get(_DESELECTED, 0):
        terminalreporter.write_line(HOW)


_DESELECTED = pytest.StashKey[int]()
