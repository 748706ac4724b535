"""Every benchmark in bench/ runs to the end at its smoke size, so a benchmark that rots fails here.

The benchmarks share one 2-worker slice (`--sandbox-dir`): the deploy
benchmark runs first and makes the cold deploy there, the others find the
bundle already active (their own `orch deploy` is a no-op). Each runs as a
subprocess, as an operator runs it, and must exit 0 and print its result lines.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import start_sandbox

pytestmark = [pytest.mark.ssh, pytest.mark.e2e]

BENCH = Path(__file__).resolve().parent.parent / "bench"

# Benchmark -> lines (substrings) its smoke run prints once it has measured everything.
RESULT_LINES = {
    "deploy.py": ["orch deploy (cold workers)", "sequential scp + pip install", "ratio baseline / orch deploy"],
    "fanout.py": ["sequential ssh loop", "ratio sequential / orch exec"],
    "probe.py": ["verdicts: ok", "ratio core sequential / core 2", "ratio cli sequential / cli 2"],
    "launch.py": ["start skew (release)", "teardown latency (all gone)", "processes left after teardown 0"],
    "restart.py": ["solo (1 process", "single-writer (2 processes", "reused (yes)"],
    "warm.py": ["cold, 1 worker", "warm, 2 workers", "ratio cold / warm, 2 workers"],
    "stream.py": ["orch launch, 2 workers", "plain parallel ssh, 2 workers", "ratio orch / ssh (lines/s)"],
    "renewals.py": ["one request per worker (before)", "one request per round (now)", "ratio before / now"],
}
# Benchmarks that bring their own setup: run with --smoke alone, when they exist.
STANDALONE = ["cli_startup.py", "diagnose.py", "diagnose_speed.py", "faults.py", "idle.py"]


@pytest.fixture(scope="module")
def bench_slice():
    """One 2-worker slice for every benchmark of this module."""
    handle = start_sandbox(2)
    try:
        yield handle
    finally:
        handle.down()


def run_bench(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), "--smoke", *args],
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, (
        f"bench/{script} --smoke exited {proc.returncode}\n--- stdout\n{proc.stdout}--- stderr\n{proc.stderr[-6000:]}"
    )
    return proc


@pytest.mark.parametrize("script", list(RESULT_LINES))
def test_a_benchmark_runs_at_smoke_size_on_a_shared_slice_and_prints_its_figures(bench_slice, script):
    out = run_bench(script, "--sandbox-dir", str(bench_slice.dir)).stdout
    missing = [line for line in RESULT_LINES[script] if line not in out]
    assert not missing, f"bench/{script} did not print {missing}:\n{out}"
    status = json.loads(bench_slice.orch("sandbox", "status", "--dir", str(bench_slice.dir), "--json").stdout)
    assert status["up"], f"bench/{script} took down the slice it was given"


@pytest.mark.parametrize("script", STANDALONE)
def test_a_standalone_benchmark_runs_at_smoke_size(script):
    if not (BENCH / script).exists():
        pytest.skip(f"bench/{script} does not exist in this checkout")
    out = run_bench(script).stdout
    assert out.strip(), f"bench/{script} --smoke printed nothing"
