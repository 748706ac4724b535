"""Run output on the local slice: every line arrives live, stderr stays stderr, a paused reader harms nothing.

Each worker's program writes numbered lines to stdout and, every so often, a
numbered line to stderr; the controller's own stdout and stderr are separate
files (or a pipe the test does not read for a while), so what arrived where,
and in which order, can be checked line by line.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import orch_executable

pytestmark = [pytest.mark.ssh, pytest.mark.e2e]

# argv: LINES EVERY. Writes `out W I` lines to stdout (I = 0..LINES-1) and `err W J` to stderr every EVERY lines.
CHATTER = r"""
import os, sys
n, every = int(sys.argv[1]), int(sys.argv[2])
me = os.environ["RANK"]
out, err = sys.stdout, sys.stderr
for i in range(n):
    out.write(f"out {me} {i} {'x' * 40}\n")
    if i % every == 0:
        err.write(f"err {me} {i // every}\n")
"""

SLOW = os.environ.get("ORCH_SLOW_TESTS") == "1"
# The acceptance size (4 workers x 200k lines) in the slow tier; a smaller run always.
LINES = 200_000 if SLOW else 20_000
EVERY = 100
# How long the paused reader does not read: the acceptance's 60 s in the slow tier; always
# longer than --lost-after, so a heartbeat held up by the paused output would lose a worker.
PAUSE = 60.0 if SLOW else 12.0
LOST_AFTER = 30.0 if SLOW else 6.0


@pytest.fixture
def program(tmp_path) -> Path:
    workdir = tmp_path / "code"
    workdir.mkdir()
    (workdir / "chatter.py").write_text(CHATTER)
    return workdir


def orch_env(slice4, runs_dir: Path) -> dict[str, str]:
    from orchestrator import sandbox

    return {
        **os.environ,
        "ORCH_FLEET": str(slice4.fleet_path),
        sandbox.DIR_ENV: str(slice4.dir),
        "ORCH_RUNS_DIR": str(runs_dir),
    }


def launch_argv(program: Path, lines: int, *extra: str) -> list[str]:
    return [
        orch_executable(),
        "launch",
        "--lane",
        "cpu",
        "--no-gather",
        "--workdir",
        str(program),
        *extra,
        "--",
        "chatter.py",
        str(lines),
        str(EVERY),
    ]


def check_streams(stdout: str, stderr: str, workers: list[str], lines: int) -> None:
    """Every worker's stdout lines, all of them and in order, on stdout only; its stderr lines on stderr only."""
    for rank, name in enumerate(workers):
        out = re.findall(rf"^{re.escape(name)}\s* \| out {rank} (\d+) x+$", stdout, re.M)
        assert len(out) == lines, f"{name}: {len(out)} of {lines} stdout lines arrived"
        assert out == [str(i) for i in range(lines)], f"{name}: stdout lines out of order"
        err = re.findall(rf"^{re.escape(name)}\s* \| err {rank} (\d+)$", stderr, re.M)
        assert err == [str(j) for j in range(lines // EVERY)], f"{name}: {len(err)} stderr lines, or out of order"
    assert " | err " not in stdout, "worker stderr reached the controller's stdout"
    assert " | out " not in stderr, "worker stdout reached the controller's stderr"
    assert "the live view missed" not in stderr


def test_every_line_of_four_workers_arrives_live_in_order_with_stderr_on_its_own_stream(
    slice4, jax_cpu_lane, program, tmp_path
):
    out_path, err_path = tmp_path / "stdout", tmp_path / "stderr"
    t0 = time.monotonic()
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.run(
            launch_argv(program, LINES),
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=orch_env(slice4, tmp_path / "runs"),
            timeout=900,
        )
    elapsed = time.monotonic() - t0
    stdout, stderr = out_path.read_text(), err_path.read_text()
    assert proc.returncode == 0, stderr[-3000:]
    check_streams(stdout, stderr, slice4.workers, LINES)
    size = out_path.stat().st_size
    print(f"{len(slice4.workers)} workers x {LINES} lines: {size / 1e6:.1f} MB of stdout in {elapsed:.1f}s")


def test_a_reader_that_pauses_longer_than_lost_after_does_not_fail_the_run(slice4, jax_cpu_lane, program, tmp_path):
    """The controller's stdout is a pipe nobody reads for PAUSE seconds (longer than --lost-after):
    heartbeats travel apart from the output, so no worker is lost; the run completes once the
    reader resumes, with every line."""
    lines = LINES // 4
    err_path = tmp_path / "stderr"
    with open(err_path, "w") as err:
        proc = subprocess.Popen(
            launch_argv(program, lines, "--lost-after", f"{LOST_AFTER:g}"),
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=orch_env(slice4, tmp_path / "runs"),
        )
        try:
            ended_during_pause = _wait_for_exit(proc, PAUSE)
            assert not ended_during_pause, f"orch ended while its reader was paused: {err_path.read_text()[-3000:]}"
            # Paused: the workers' programs ran to their end meanwhile (their output is on disk).
            chunks: list[bytes] = []
            reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True)
            reader.start()
            assert proc.wait(timeout=600) == 0, err_path.read_text()[-3000:]
            reader.join(60)
        finally:
            proc.kill()
            proc.wait()
    stderr = err_path.read_text()
    assert " lost" not in stderr
    check_streams(b"".join(chunks).decode(), stderr, slice4.workers, lines)


def _wait_for_exit(proc: subprocess.Popen, seconds: float) -> bool:
    """Whether `proc` ended within `seconds` (the pause itself: nothing else to wait on)."""
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


# Reads its whole stdin and says how many lines came, and the last one.
READER = r"""
import os, sys
lines = sys.stdin.read().splitlines()
print(f"stdin {os.environ['RANK']} {len(lines)} {lines[-1] if lines else '-'}", flush=True)
"""


@pytest.mark.parametrize(("option", "fed"), [("--stdin", {"0"}), ("--stdin-all", {"0", "1", "2", "3"})])
def test_the_controllers_stdin_reaches_process_0_or_every_process_and_ends_at_its_eof(
    slice4, jax_cpu_lane, tmp_path, option, fed
):
    workdir = tmp_path / "code"
    workdir.mkdir()
    (workdir / "reader.py").write_text(READER)
    given = "".join(f"line {i}\n" for i in range(5000))
    argv = [orch_executable(), "launch", "--lane", "cpu", "--no-gather", "--workdir", str(workdir), option]
    proc = subprocess.run(
        [*argv, "--", "reader.py"],
        input=given,
        capture_output=True,
        text=True,
        env=orch_env(slice4, tmp_path / "runs"),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = dict(re.findall(r"\| stdin (\d) (\d+ .+)$", proc.stdout, re.M))
    expected = {rank: ("5000 line 4999" if rank in fed else "0 -") for rank in ("0", "1", "2", "3")}
    assert said == expected, f"--- stdout\n{proc.stdout[-3000:]}--- stderr\n{proc.stderr[-3000:]}"
