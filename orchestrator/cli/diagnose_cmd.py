"""`orch diagnose [FILE|-] [--json] [--all]`: name the layer that owns a failure in a log."""

from __future__ import annotations

import json
import sys

import click

from orchestrator import diagnose as diag
from orchestrator.errors import OrchError


def register(main: click.Group) -> None:
    main.add_command(diagnose)


def read_log(path: str) -> str:
    """The log's text (`-` is stdin); undecodable bytes are replaced, never fatal."""
    if path == "-":
        return sys.stdin.buffer.read().decode("utf-8", errors="replace")
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", errors="replace")
    except OSError as exc:
        raise OrchError(
            f"cannot read log {path}: {exc.strerror or exc}", hint="give a readable log file, or `-` to read stdin"
        ) from None


@click.command("diagnose")
@click.argument("path", metavar="[FILE|-]", default="-")
@click.option("--json", "as_json", is_flag=True, help="One JSON document (layer, signature, remedy, ...).")
@click.option("--all", "show_all", is_flag=True, help="List every matching line, not only the winner.")
def diagnose(path, as_json, show_all):
    """Classify a log: which layer owns the failure, the line that shows it, and the remedy.

    Reads FILE (or stdin with `-` or no argument). The most specific line wins;
    see docs/troubleshooting.md. Informational: exits 0 whether or not a known
    signature matched.
    """
    text = read_log(path)
    findings = diag.classify(text)
    best = diag.winner(findings)
    if as_json:
        doc = {"schema_version": 1, "source_file": path}
        doc.update(
            best.to_dict()
            if best
            else {"layer": None, "signature": None, "id": None, "line": None, "remedy": None, "source": None}
        )
        if show_all:
            doc["matches"] = [f.to_dict() for f in findings]
        click.echo(json.dumps(doc, indent=2))
        return
    if show_all:
        for f in findings:
            mark = "*" if f is best else " "
            click.echo(f"{mark} {f.line_number:>6}  {f.layer:<16} {f.signature_id:<34} {f.line.strip()}")
        if findings:
            click.echo("")
    if best is None:
        click.echo(f"no known signature ({len(text.splitlines())} lines read)")
        return
    click.echo(f"layer:     {best.layer}")
    click.echo(f"line {best.line_number}:".ljust(11) + best.line.strip())
    click.echo(f"signature: {best.signature_id}")
    click.echo(f"remedy:    {best.remedy}")
    click.echo(f"source:    {best.source}")
