"""orch as an installed tool: `orch --version` says exactly what runs, and `uv tool install .` ships hostside.

The install test copies the tracked files to a clean directory and installs them
with `uv tool install` (uv comes with orch) into a temporary tool directory: it
resolves orch's dependencies from the package index, so it is in the opt-in
tier (ORCH_SLOW_TESTS=1).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli import main
from orchestrator.remote import hostside_archive

ROOT = Path(__file__).resolve().parent.parent


def test_version_names_the_orch_version_and_the_digest_of_the_hostside_it_ships():
    out = CliRunner().invoke(main, ["--version"]).stdout
    digest, _ = hostside_archive()
    assert out.startswith(f"orch {version('orch')} (hostside {digest}, "), out
    assert out.rstrip().endswith(f"{ROOT / 'hostside'})")


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("ORCH_SLOW_TESTS") != "1", reason="opt-in tier: ORCH_SLOW_TESTS=1 (package index)")
def test_uv_tool_install_from_a_clean_copy_runs_the_same_orch_and_hostside(tmp_path):
    src = tmp_path / "src"
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for name in files:
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_bytes((ROOT / name).read_bytes())
    env = {
        **os.environ,
        "UV_TOOL_DIR": str(tmp_path / "tools"),
        "UV_TOOL_BIN_DIR": str(tmp_path / "bin"),
    }
    links = ["--find-links", os.environ["PIP_FIND_LINKS"]] if os.environ.get("PIP_FIND_LINKS") else []
    uv = Path(sys.executable).parent / "uv"
    subprocess.run([str(uv), "tool", "install", *links, str(src)], env=env, check=True, timeout=900)
    orch = tmp_path / "bin" / "orch"
    out = subprocess.run([str(orch), "--version"], capture_output=True, text=True, check=True).stdout
    digest, _ = hostside_archive()
    assert re.fullmatch(rf"orch {re.escape(version('orch'))} \(hostside {digest}, {tmp_path / 'tools'}/.+\)\n", out)
    script = subprocess.run([str(orch), "completion", "bash"], capture_output=True, text=True, check=True).stdout
    assert "_ORCH_COMPLETE=bash_complete" in script
