"""Terminal output at scale: above 16 workers, per-worker rows collapse to a summary, and failures
alike are named once.

Synthetic 64-worker results (a probe sweep, a deploy, an exec, a live board)
rendered by the verbs' own render functions: the summary fits a screen, names
every failure and the slowest workers, and `--verbose` brings back every row.
"""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest
from fakes import launch_plan
from rich.console import Console

from orchestrator.cli import deploy_cmd, probe_cmd
from orchestrator.cli.progress import WorkerBoard
from orchestrator.cli.render import SUMMARY_THRESHOLD, compact_names, print_summary
from orchestrator.deploy import WorkerOutcome
from orchestrator.probe import ProbeReport, WorkerProbe
from orchestrator.transport import Result

N = 64
NAMES = [f"slice-w{i}" for i in range(N)]
SCREEN = 24  # lines


def probe_row(i: int) -> WorkerProbe:
    verdict, layer, evidence, remedy = "ok", None, "jax 0.10.2 answered from cpu", None
    if i in (17, 42):
        verdict, layer = "fail", "device-ownership"
        evidence, remedy = "/dev/vfio/0 held by pid 4242 (python3 train.py)", "end the holder or wait for it"
    elif i == 5:
        verdict, evidence = "warn", "compilation cache not writable by this user"
    elif i == 63:
        verdict, layer, evidence, remedy = "fail", "transport", "connect timed out after 10s", "check the VM is up"
    return WorkerProbe(
        worker=NAMES[i],
        lane="cpu",
        platform="cpu",
        bundle_id="5748b3c35b09",
        answered="cpu" if verdict != "fail" else None,
        verdict=verdict,
        layer=layer,
        remedy=remedy,
        evidence=evidence,
        elapsed=2.0 + i / 100 + (30.0 if i == 63 else 0.0),
    )


def probe_output(capsys, n: int, verbose: bool = False) -> list[str]:
    probe_cmd.render(ProbeReport(rows=tuple(probe_row(i) for i in range(n)), deep=True, elapsed=41.5), verbose)
    return capsys.readouterr().out.splitlines()


def test_probe_on_64_workers_prints_a_summary_that_fits_a_screen_and_names_every_failure(capsys):
    out = probe_output(capsys, N)
    text = "\n".join(out)
    print(text)  # shown with -s: what an operator sees
    assert len(out) <= SCREEN, text
    assert "64 workers: 60 ok, 1 warn, 3 fail" in text
    assert "slowest: slice-w63 32.6s, slice-w62 2.6s, slice-w61 2.6s" in text
    assert "1 x [device-ownership] /dev/vfio/0 held by pid 4242 (python3 train.py): slice-w[17,42]" not in text
    assert "2 x [device-ownership] /dev/vfio/0 held by pid 4242 (python3 train.py): slice-w[17,42]" in text
    assert "1 x [transport] connect timed out after 10s: slice-w63" in text
    assert "1 x compilation cache not writable by this user: slice-w5" in text
    assert "remedy: end the holder or wait for it" in text
    assert not any("slice-w30" in line for line in out)  # a healthy worker is counted, not listed


def test_probe_with_verbose_or_few_workers_prints_every_row(capsys):
    verbose = "\n".join(probe_output(capsys, N, verbose=True))
    assert all(name in verbose for name in NAMES)
    few = "\n".join(probe_output(capsys, SUMMARY_THRESHOLD))
    assert all(name in few for name in NAMES[:SUMMARY_THRESHOLD]) and "slowest" not in few


def deploy_report(n: int) -> SimpleNamespace:
    outcomes = {}
    for i, name in enumerate(NAMES[:n]):
        status, reason = ("installed", None) if i % 4 else ("unchanged", None)
        if i in (3, 9, 27):
            status, reason = "failed", "uv pip install: No space left on device"
        outcomes[name] = WorkerOutcome(worker=name, status=status, reason=reason, elapsed=10.0 + (i % 7))
    return SimpleNamespace(outcomes=outcomes)


def test_deploy_on_64_workers_is_counts_slowest_and_failures_by_reason():
    out = deploy_cmd.render(deploy_report(N))  # type: ignore[arg-type]
    text = "\n".join(out)
    print(text)
    assert len(out) <= 8, text
    assert out[0] == "64 workers: 45 installed, 16 unchanged, 3 failed"
    assert "slowest: slice-w6 16.0s, slice-w13 16.0s, slice-w20 16.0s" in text
    assert "3 x uv pip install: No space left on device: slice-w[3,9,27]" in text
    every = deploy_cmd.render(deploy_report(N), verbose=True)  # type: ignore[arg-type]
    assert len(every) == N and every[3] == "slice-w3: failed: uv pip install: No space left on device"


def test_exec_on_64_workers_groups_its_failures_by_reason(capsys):
    results = {}
    for i, name in enumerate(NAMES):
        code, error = (0, None) if i < 24 else (None, "connection refused") if i < 54 else (1, None)
        results[name] = Result(host=name, argv=("true",), exit_code=code, error=error, elapsed=0.2)
    print_summary(results)
    err = capsys.readouterr().err
    print(err)
    assert err.splitlines()[0].startswith("24/64 hosts ok")
    assert "30 x connection refused: slice-w[24-53]" in err
    assert "10 x exit 1: slice-w[54-63]" in err
    assert len(err.splitlines()) <= 8


def test_the_live_board_shows_a_row_per_phase_above_the_threshold():
    board = WorkerBoard(NAMES, "deploy jax-cpu -> lane cpu")
    for i, name in enumerate(NAMES):
        board.phases[name] = "installed" if i < 40 else "installing" if i < 60 else "failed: disk full"
    console = Console(file=io.StringIO(), width=100)
    console.print(board._table())
    text = console.file.getvalue()
    print(text)
    assert len(text.splitlines()) <= 8
    assert "slice-w[0-39]" in text and "slice-w[60-63]" in text
    assert text.index("installing") < text.index("failed: disk full")  # failures last


def test_compact_names_folds_numbered_runs_and_keeps_other_names():
    assert compact_names(["a-w0", "a-w1", "a-w2", "a-w7", "b-w3"]) == "a-w[0-2,7], b-w3"
    assert compact_names(["gpu-box", "a-w01", "a-w1"]) == "a-w1, gpu-box, a-w01"


def test_status_of_a_64_worker_run_counts_states_and_names_the_workers_that_ended_badly():
    from orchestrator.cli.launch_cmd import status_lines

    workers = {name: {"state": "running", "pid": 100 + i} for i, name in enumerate(NAMES)}
    for name in ("slice-w7", "slice-w8"):
        workers[name] = {"state": "exited", "exit": {"exit_code": 3, "reason": "exit code 3"}}
    workers["slice-w9"] = {"state": "unreachable", "error": "connect timed out"}
    doc = {"run_id": "r1", "lane": "cpu", "state": "degraded", "workers": workers}
    out = status_lines(doc)
    text = "\n".join(out)
    print(text)
    assert out[1] == "  64 workers: 61 running, 2 exited, 1 unreachable"
    assert "2 x exit code 3: slice-w[7-8]" in text and "1 x connect timed out: slice-w9" in text
    assert len(out) <= 10
    assert len(status_lines(doc, verbose=True)) == 1 + N


def test_reasons_that_differ_only_in_their_numbers_are_one_group_with_the_spread():
    from orchestrator.cli.render import Row, merge_details, summary_lines

    assert merge_details(["offset +2.6s", "offset +2.0s", "offset +2.6s"]) == "offset +2.0..2.6s"
    assert merge_details(["cannot reach 10.0.0.18:22", "cannot reach 10.0.0.43:22"]) == "cannot reach *:22"
    rows = [Row(f"w{i}", "warn", True, f"clock differs by +2.{i}s") for i in range(5)]
    assert summary_lines(rows, verbose_hint=False)[1:] == [
        "  warn (5):",
        "      5 x clock differs by +2.0..2.4s: w[0-4]",
    ]


def test_failures_alike_are_one_line_with_their_workers_compacted():
    from orchestrator.names import alike, alike_lines

    pairs = [(f"slice-w{i}", "timed out after 60s" if i % 3 else "disk full") for i in range(64)]
    assert alike(pairs) == [
        "22 x disk full: slice-w[0,3,6,9,12,15,18,21,24,27,30,33,36,39,42,45,48,51,54,57,60,63]",
        "42 x timed out after 60s: " + compact_names(f"slice-w{i}" for i in range(64) if i % 3),
    ]
    assert alike([("slice-w7", "exit 2: boom")]) == ["slice-w7: exit 2: boom"]  # one worker: as before
    lines = [f"{w}: {m}" for w, m in pairs[:4]] + ["the coordinator port is taken: 1234"]
    assert alike_lines(lines, NAMES) == [
        "the coordinator port is taken: 1234",  # not a worker's line: kept as it is
        "2 x disk full: slice-w[0,3]",
        "2 x timed out after 60s: slice-w[1-2]",
    ]


def test_a_start_that_fails_alike_on_64_workers_names_the_failure_once_and_stops_them_all(tmp_path, monkeypatch):
    from orchestrator import runs
    from orchestrator.errors import LaunchError
    from orchestrator.launch import lifecycle
    from orchestrator.launch.timing import LaunchTiming

    plan = launch_plan(NAMES)
    error = "the supervisor had not started the run after 15s (the worker is overloaded or slow)"
    slow = json.dumps({"schema_version": 1, "ok": False, "error": error})
    fine = json.dumps({"schema_version": 1, "ok": True, "pid": 1})

    def started(plan, transport, **kwargs):
        return {
            w: Result(host=w, argv=("launch_start",), exit_code=0, stdout=slow if i != 5 else fine)
            for i, w in enumerate(plan.workers)
        }

    stopped: list[str] = []
    monkeypatch.setattr(lifecycle, "start_workers", started)
    monkeypatch.setattr(lifecycle, "stop_workers", lambda plan, transport, **kw: stopped.extend(plan.workers))
    record = runs.RunRecord.create(plan, root=tmp_path)
    with pytest.raises(LaunchError) as caught:
        lifecycle.start(plan, object(), record, LaunchTiming())  # type: ignore[arg-type]
    text = str(caught.value)
    assert text.count("\n") == 1, text  # one line for 63 workers
    assert "63 x the supervisor had not started the run after 15s" in text and "slice-w[0-4,6-63]" in text
    assert stopped == NAMES  # every worker stopped, the one that started too
    assert len(record.info()["problems"]) == 63  # the run's record keeps each worker's own line
