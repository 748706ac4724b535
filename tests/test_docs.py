"""The docs stay true: the fleet reference matches the model, every `orch ...` command they
show exists with the options they use, and every relative link resolves."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from orchestrator.cli import main
from orchestrator.fleet_docs import render_reference

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = DOCS + [ROOT / "README.md"]


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# ---------------------------------------------------------------------------
# Code in markdown


FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)
SPAN = re.compile(r"(`+)(.+?)\1", re.S)
# `orch`, `.venv/bin/orch`, `$ orch`, at the start of a command (not `orchestrator`, not `orch:`).
ORCH = re.compile(r"(?:^|(?<=[\s;&|(]))(?:[\w./-]*/)?orch(?=[ \t])")


def code_of(text: str) -> list[tuple[int, str]]:
    """(line, code) for every line of a fenced or indented block and every inline code span."""
    out = []
    for m in FENCE.finditer(text):
        first = text.count("\n", 0, m.start()) + 1
        for i, line in enumerate(m.group(0).splitlines()[1:-1], start=first + 1):
            out.append((i, line))
    rest = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    prose = []
    in_block, previous_blank = False, True
    for i, line in enumerate(rest.split("\n"), start=1):
        if line.startswith(("    ", "\t")) and (in_block or previous_blank):
            out.append((i, line.strip()))
            in_block = True
            prose.append("")
        else:
            in_block = in_block and not line.strip()
            prose.append(line)
        previous_blank = not line.strip()
    rest = "\n".join(prose)
    for m in SPAN.finditer(rest):
        out.append((rest.count("\n", 0, m.start()) + 1, m.group(2).replace("\n", " ")))
    return out


def orch_commands(text: str) -> list[tuple[int, list[str]]]:
    """Every `orch ...` invocation in the code of a page, as argv after `orch`."""
    found = []
    for line_no, code in code_of(text):
        for m in ORCH.finditer(code):
            tail = code[m.end() :]
            tail = re.split(r"\s#|[;|]|&&|\|\||[<>]", tail, maxsplit=1)[0]  # comment, pipe, next command
            try:
                argv = shlex.split(tail)
            except ValueError:
                argv = tail.split()
            found.append((line_no, argv))
    return found


def check_command(argv: list[str]) -> str | None:
    """None if `orch ARGV` names a real command path with real options; else what is wrong."""
    command: click.Command = main
    path = ["orch"]
    args = list(argv)
    while args:
        token = args.pop(0)
        if token == "--":
            return None
        if token.startswith("-"):
            name = token.split("=", 1)[0]
            option = next(
                (
                    p
                    for p in command.params
                    if isinstance(p, click.Option) and (name in p.opts or name in p.secondary_opts)
                ),
                None,
            )
            if option is None and name not in ("-h", "--help"):
                return f"{' '.join(path)} has no option {name}"
            if option is not None and not option.is_flag and "=" not in token and args and not option.count:
                args.pop(0)  # the option's value
            continue
        if isinstance(command, click.Group):
            sub = command.commands.get(token)
            if sub is None:
                if re.fullmatch(r"[A-Z_.\[\]-]+|<[^>]+>|\.\.\.", token):
                    return None  # a placeholder such as VERB
                return f"{' '.join(path)} has no command '{token}' (has: {', '.join(sorted(command.commands))})"
            command, path = sub, path + [token]
            continue
        # an argument of a leaf command: the options after it are still checked
    return None


def test_the_fleet_reference_is_generated_from_the_current_model():
    committed = (ROOT / "docs" / "fleet-reference.md").read_text()
    assert committed == render_reference(), (
        "regenerate: .venv/bin/python -m orchestrator.fleet_docs > docs/fleet-reference.md"
    )


def test_the_docs_exist():
    names = {p.name for p in DOCS}
    assert {
        "index.md",
        "concepts.md",
        "bring-up.md",
        "fleet-reference.md",
        "performance.md",
        "troubleshooting.md",
        "gke.md",
    } <= names


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_orch_command_in_the_docs_exists_with_its_options(page):
    commands = orch_commands(page.read_text())
    problems = [
        f"{rel(page)}:{line}: orch {' '.join(argv)}: {why}" for line, argv in commands if (why := check_command(argv))
    ]
    assert not problems, "\n".join(problems)


def test_the_command_check_catches_unknown_verbs_and_options():
    assert check_command(["deploy", "--lane", "cpu"]) is None
    assert check_command(["--fleet", "x.yaml", "fleet", "validate"]) is None
    assert check_command(["launch", "--lane", "cpu", "--", "train.py", "--steps", "3"]) is None
    assert check_command(["bundle", "lock", "NAME"]) is None
    assert "has no command 'deply'" in check_command(["deply", "--lane", "cpu"])
    assert "orch deploy has no option --lanes" in check_command(["deploy", "--lanes", "cpu"])
    assert "orch fleet has no command 'import'" in check_command(["fleet", "import", "tpu.json"])
    assert orch_commands(
        "Run `orch probe --lane cpu` then\n\n```\n$ .venv/bin/orch deploy --lane cpu  # go\norch: error: nothing\n```\n"
    ) == [(4, ["deploy", "--lane", "cpu"]), (1, ["probe", "--lane", "cpu"])]


# ---------------------------------------------------------------------------
# Links


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def anchors_of(text: str) -> set[str]:
    """GitHub's anchors for the headings of a page."""
    out = set()
    for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", FENCE.sub("", text), re.M):
        title = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))
        out.add(re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-"))
    return out


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_relative_links_resolve(page):
    text = FENCE.sub("", page.read_text())
    problems = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            problems.append(f"{rel(page)}: link to {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors_of(dest.read_text()):
            problems.append(f"{rel(page)}: link to {target}: no heading '{anchor}' in {dest.name}")
    assert not problems, "\n".join(problems)
