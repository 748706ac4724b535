"""`orch diagnose [FILE|-|RUN] [--json] [--all]`: name the layer that owns a failure in a log or a run."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # the CLI imports core modules only when a verb runs
    from orchestrator.diagnose import Verdict
    from orchestrator.diagnose_run import RunDiagnosis


def register(main: click.Group) -> None:
    """Add `diagnose` to the top-level group."""
    main.add_command(diagnose)


def read_log(path: str) -> str:
    """The log's text (`-` is stdin); undecodable bytes are replaced, never fatal."""
    if path == "-":
        return sys.stdin.buffer.read().decode("utf-8", errors="replace")
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", errors="replace")
    except OSError as exc:
        from orchestrator.errors import OrchError

        raise OrchError(
            f"cannot read log {path}: {exc.strerror or exc}", hint="give a readable log file, or `-` to read stdin"
        ) from None


def resolve_run(path: str) -> Path | None:
    """The run directory `path` names (a directory, or a run id/name/`last` in the runs root), else None."""
    if os.path.isdir(path):
        return Path(path)
    if path == "-" or os.path.exists(path) or os.sep in path:
        return None
    from orchestrator.errors import OrchError
    from orchestrator.runs import find_run

    try:
        return Path(find_run(path).dir)
    except OrchError:
        return None


@click.command("diagnose")
@click.argument("path", metavar="[FILE|-|RUN]", default="-")
@click.option("--json", "as_json", is_flag=True, help="One JSON document (layer, signature, remedy, ...).")
@click.option("--all", "show_all", is_flag=True, help="List every matching line, not only the winner.")
def diagnose(path: str, as_json: bool, show_all: bool) -> None:
    """Classify a log or a gathered run: which layer owns the failure, the line that shows it, and the remedy.

    Reads FILE (or stdin with `-` or no argument). The most specific line wins;
    see docs/troubleshooting.md. A log with no confident signature answers
    "unknown" with the closest candidate layers. With a run (its directory under
    runs/, or its id, name or `last`), every gathered worker log is read: the
    worker that failed first, its layer, and the workers that only failed
    because it did. Informational: exits 0 whether or not a known signature matched.
    """
    from orchestrator import diagnose as diag

    run_dir = resolve_run(path)
    if run_dir is not None:
        from orchestrator.diagnose_run import diagnose_run

        show_run(diagnose_run(run_dir), as_json, show_all)
        return
    text = read_log(path)
    findings = diag.classify(text)
    verdict = diag.verdict(text)
    best = verdict.finding
    if as_json:
        doc: dict[str, object] = {"schema_version": 1, "source_file": path}
        doc.update(verdict.to_dict())
        if show_all:
            doc["matches"] = [f.to_dict() for f in findings]
        click.echo(json.dumps(doc, indent=2))
        return
    if show_all:
        for f in findings:
            mark = "*" if f == best else " "
            click.echo(f"{mark} {f.line_number:>6}  {f.layer:<16} {f.signature_id:<34} {f.line.strip()}")
        if findings:
            click.echo("")
    if best is None:
        click.echo(f"no known signature ({len(text.splitlines())} lines read)")
        if verdict.known:  # a low-confidence layer needs no matched line (its traceback's deepest frame)
            click.echo(f"layer:     {verdict.layer} (low confidence: {low_why(verdict)}, no known message)")
            click.echo(f"remedy:    {verdict.remedy}")
            return
        click.echo(f"layer:     {diag.UNKNOWN}")
        if verdict.candidates:
            click.echo(f"closest:   {', '.join(verdict.candidates)}")
        return
    if verdict.confidence == "low":
        click.echo(f"layer:     {verdict.layer} (low confidence: {low_why(verdict)}, no known message)")
    else:
        click.echo(f"layer:     {verdict.layer}")
    if not verdict.known:
        click.echo(f"closest:   {', '.join(verdict.candidates) or '(no candidate layer)'}")
    click.echo(f"line {best.line_number}:".ljust(11) + best.line.strip())
    click.echo(f"signature: {best.signature_id}")
    click.echo(f"remedy:    {verdict.remedy}")
    click.echo(f"source:    {best.source}")


def low_why(verdict: Verdict) -> str:
    """What a low-confidence verdict rests on, in words."""
    return {
        "words": "the log's words agree with its keywords",
        "frame": "its traceback's deepest frame is that layer's code",
        "stall": "its log stops where that layer's wait begins",
    }.get(verdict.basis, "several weak signals agree")


def show_run(run: RunDiagnosis, as_json: bool, show_all: bool) -> None:
    """Print a run's diagnosis: the first failure and its layer, then one line per worker."""
    if as_json:
        click.echo(json.dumps(run.to_dict(), indent=2))
        return
    click.echo(f"run:       {run.run_id} ({run.dir})")
    if run.first_failure is None:
        click.echo(f"no worker failed ({len(run.workers)} workers)")
    else:
        click.echo(f"failed:    {run.first_failure} first; layer {run.layer}")
        if run.candidates:
            click.echo(f"closest:   {', '.join(run.candidates)}")
        if run.finding is not None:
            click.echo(f"line {run.finding.line_number}:".ljust(11) + run.finding.line.strip())
            click.echo(f"signature: {run.finding.signature_id}")
            click.echo(f"remedy:    {run.finding.remedy}")
        if run.followers:
            click.echo(f"followed:  {', '.join(run.followers)} (failed because {run.first_failure} did)")
    click.echo("")
    for w in run.workers:
        how = (
            f"signal {w.signal}"
            if w.signal
            else (f"exit {w.exit_code}" if w.exit_code is not None else (w.reason or "-"))
        )
        finding = w.cause or (w.verdict.finding if w.verdict is not None else None)
        line = finding.line.strip() if finding is not None and (show_all or w.status == "failed") else ""
        click.echo(f"  {w.worker:<14} {w.role:<14} {how:<10} {w.layer or '-':<17} {line}".rstrip())
