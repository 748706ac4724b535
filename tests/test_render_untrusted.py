"""Text that comes from a worker is shown as text: rich markup in it (`[/bold]`, `[link=...]`)
is neither parsed nor obeyed, and terminal control sequences are escaped."""

from __future__ import annotations

import io

from rich.console import Console

from orchestrator.cli.probe_cmd import render
from orchestrator.cli.progress import WorkerBoard
from orchestrator.cli.render import cell, shown
from orchestrator.probe import ProbeReport, WorkerProbe

HOSTILE = "[/bold] [link=https://evil.example]click[/link] \x1b[2J\x1b]8;;x\x07"


def test_a_cell_is_never_read_as_markup_and_escapes_control_characters():
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(cell(HOSTILE))
    assert out.getvalue().rstrip("\n") == "[/bold] [link=https://evil.example]click[/link] \\x1b[2J\\x1b]8;;x\\x07"
    assert shown("tab\tand\nnewline") == "tab\tand\nnewline"


def test_the_probe_table_shows_a_workers_markup_and_escape_sequences_as_text(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    row = WorkerProbe(
        worker="s-w0",
        lane="cpu",
        platform="cpu",
        bundle_id="[/bold]",
        answered="[link=https://evil.example]cpu[/link]",
        verdict="fail",
        layer="[red]transport",
        remedy=None,
        evidence=HOSTILE,
    )
    render(ProbeReport(rows=(row,), deep=False, elapsed=0.1))
    out = capsys.readouterr().out
    assert "[/bold]" in out and "[link=https://evil.example]" in out and "[red]transport" in out
    assert "\x1b" not in out


def test_the_progress_board_shows_a_failed_phase_with_brackets_as_text():
    board = WorkerBoard(["s-w0"], "deploy")
    board.phases["s-w0"] = "failed: " + HOSTILE
    out = io.StringIO()
    Console(file=out, width=300, color_system=None).print(board._table())
    assert "failed: [/bold] [link=https://evil.example]click[/link]" in out.getvalue()
    assert "\x1b" not in out.getvalue()
