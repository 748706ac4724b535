"""The worker side of run output, on this machine: the supervisor's pump and the output watch.

Real processes and real pipes (no SSH): the slice tests in test_launch_output_slice.py prove
the whole path from a worker's program to the controller's stdout and stderr.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hostside import launch_output
from hostside import launch_proc as lp

ROOT = Path(__file__).resolve().parent.parent

# Interleaves the two streams, writes a line in two pieces and ends stderr without a newline.
WRITER = r"""
import sys
for i in range(300):
    sys.stdout.write(f"out {i}\n")
    if i % 3 == 0:
        sys.stderr.write(f"err {i}\n")
sys.stdout.write("half a ")
sys.stdout.flush()
sys.stderr.write("an interruption\n")
sys.stderr.flush()
sys.stdout.write("line\n")
sys.stderr.write("no newline at the end")
"""


def pump_a_process(run_dir: Path, code: str) -> launch_output.OutputPump:
    import os

    fds = {s: os.pipe() for s in launch_output.STREAMS}
    proc = subprocess.Popen(
        [sys.executable, "-u", "-c", code], stdout=fds["stdout"][1], stderr=fds["stderr"][1], stdin=subprocess.DEVNULL
    )
    for _, w in fds.values():
        os.close(w)
    pump = launch_output.OutputPump(str(run_dir), {s: r for s, (r, _) in fds.items()})
    while pump.open:
        pump.drain(idle=5.0, limit=5.0)
    proc.wait()
    return pump


def test_the_pump_keeps_each_stream_apart_and_output_log_holds_whole_lines_of_both(tmp_path):
    pump = pump_a_process(tmp_path, WRITER)
    assert pump.counts() == {"stdout": 301, "stderr": 102}
    pump.close()
    out = Path(launch_output.stream_path(str(tmp_path), "stdout")).read_text()
    err = Path(launch_output.stream_path(str(tmp_path), "stderr")).read_text()
    assert out == "".join(f"out {i}\n" for i in range(300)) + "half a line\n"
    assert err == "".join(f"err {i}\n" for i in range(0, 300, 3)) + "an interruption\nno newline at the end"
    combined = (tmp_path / lp.LOG_FILE).read_text().splitlines()
    assert "half a line" in combined and "an interruption" in combined  # never "half a an interruption"
    assert sorted(combined) == sorted(out.splitlines() + err.splitlines())
    assert [ln for ln in combined if ln.startswith("out ")] == [f"out {i}" for i in range(300)]


def finished_run(tmp_path: Path) -> Path:
    """A run directory whose process wrote its output and ended (as the supervisor leaves it)."""
    pump = pump_a_process(tmp_path, WRITER)
    lp.write_json_atomic(str(tmp_path / lp.PID_FILE), {"pid": 1, "supervisor_pid": 1})
    lp.write_json_atomic(str(tmp_path / lp.EXIT_FILE), {"exit_code": 0, "signal": None, "lines": pump.counts()})
    pump.close()
    return tmp_path


def watch(run_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hostside.launch_watch", str(run_dir), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_output_watch_streams_stdout_to_stdout_and_stderr_to_stderr_with_no_events(tmp_path):
    run = finished_run(tmp_path)
    res = watch(run, "--stream", "output")
    assert res.returncode == 0
    assert res.stdout.splitlines() == [f"out {i}" for i in range(300)] + ["half a line"]
    assert res.stderr.splitlines() == [f"err {i}" for i in range(0, 300, 3)] + [
        "an interruption",
        "no newline at the end",
    ]


def test_a_resumed_output_watch_skips_exactly_the_lines_already_delivered(tmp_path):
    run = finished_run(tmp_path)
    res = watch(run, "--stream", "output", "--skip", "295", "100")
    assert res.stdout.splitlines() == [f"out {i}" for i in range(295, 300)] + ["half a line"]
    assert res.stderr.splitlines() == ["an interruption", "no newline at the end"]


def test_the_events_watch_carries_the_line_counts_and_no_output(tmp_path):
    run = finished_run(tmp_path)
    res = watch(run, "--stream", "events")
    assert res.stdout == ""
    events = [json.loads(line[6:]) for line in res.stderr.splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "supervisor" and kinds[-1] == "exit"
    assert events[-1]["lines"] == {"stdout": 301, "stderr": 102}


def test_a_watch_of_a_run_started_by_an_older_orch_streams_its_output_log(tmp_path):
    (tmp_path / lp.LOG_FILE).write_text("one\ntwo\n")
    lp.write_json_atomic(str(tmp_path / lp.PID_FILE), {"pid": 1, "supervisor_pid": 1})
    lp.write_json_atomic(str(tmp_path / lp.EXIT_FILE), {"exit_code": 0, "signal": None})
    res = watch(tmp_path, "--stream", "output")
    assert res.stdout == "one\ntwo\n" and res.stderr == ""


def test_forwarded_stdin_reaches_the_process_and_it_reads_eof_once_the_input_ends(tmp_path):
    import os
    import threading

    from hostside import launch_stdin, launch_supervise

    reader, holder = launch_supervise._stdin(str(tmp_path), {"stdin": True})
    cat = subprocess.Popen(["cat"], stdin=reader, stdout=subprocess.PIPE)
    os.close(reader)
    source_r, source_w = os.pipe()
    done: list[dict] = []
    feeder = threading.Thread(target=lambda: done.append(launch_stdin.forward(str(tmp_path), source_r)))
    feeder.start()
    os.write(source_w, b"".join(b"line %d\n" % i for i in range(1000)))
    os.close(source_w)
    feeder.join(30)
    assert done == [{"ok": True, "bytes": 8890}]
    assert (tmp_path / launch_stdin.EOF_MARK).exists()
    launch_supervise._release_stdin(holder)  # what the supervisor does on seeing the mark
    out, _ = cat.communicate(timeout=30)
    assert out.splitlines()[-1] == b"line 999" and len(out.splitlines()) == 1000
    assert oct((tmp_path / launch_stdin.FIFO).stat().st_mode & 0o777) == "0o600"
