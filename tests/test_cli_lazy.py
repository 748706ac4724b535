"""The CLI starts fast: `orch --help` and `orch <verb> --help` import no core module.

Timing lives in bench/cli_startup.py; these tests check the imports themselves,
and that the short help `orch --help` prints without importing a verb is the
verb's own.
"""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from orchestrator.cli import VERBS, main

# What `--help` may import from orch's own packages: the CLI layer, never the core.
ALLOWED = ("orchestrator", "orchestrator.cli")


def imported_after(*args: str) -> list[str]:
    """orch's own modules (and the heavy libraries) imported by `orch ARGS` in a fresh interpreter."""
    code = f"""
import json, sys
from orchestrator.cli import main
try:
    main({list(args)!r}, prog_name="orch")
except SystemExit:
    pass
watched = ("orchestrator", "hostside", "pydantic", "fabric", "paramiko", "rich", "yaml")
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in watched)), file=sys.stderr)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return json.loads(proc.stderr.strip().splitlines()[-1])


def test_top_level_help_imports_no_core_and_no_verb_module():
    assert imported_after("--help") == sorted(ALLOWED)


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_a_verbs_help_imports_only_cli_modules(verb):
    extra = [m for m in imported_after(verb, "--help") if m != "orchestrator" and not m.startswith("orchestrator.cli")]
    assert not extra, f"`orch {verb} --help` imported {extra}"


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_the_short_help_in_the_verb_map_is_the_verbs_own(verb):
    command = main.get_command(click.Context(main), verb)
    assert command is not None
    assert VERBS[verb][1] == command.get_short_help_str(1000)


def test_every_verb_is_in_the_map_and_listed_in_the_help():
    out = CliRunner().invoke(main, ["--help"]).output
    listed = [line.split()[0] for line in out.split("Commands:\n", 1)[1].splitlines() if line.strip()]
    assert listed == sorted(VERBS)


def test_the_restart_check_help_shows_the_real_default_threshold():
    from orchestrator.restart_check import DEFAULT_THRESHOLD

    out = CliRunner().invoke(main, ["restart-check", "--help"]).output
    assert f"[default: {DEFAULT_THRESHOLD:g}]" in out


def test_the_sandbox_help_shows_the_sandboxs_real_defaults():
    from orchestrator import sandbox
    from orchestrator.cli import sandbox_cmd

    for name in ("DIR_ENV", "DEFAULT_DIR", "DEFAULT_BASE_ADDRESS", "READY_TIMEOUT", "MAX_WORKERS", "MAX_SLICES"):
        assert getattr(sandbox_cmd, name) == getattr(sandbox, name), name
