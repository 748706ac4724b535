"""Shell completion: `orch completion bash|zsh|fish`, and the values options complete to.

Click completes verbs and options by itself; the callbacks here complete the
values that live in the operator's world: lane and worker names from the fleet
(`--fleet`, then $ORCH_FLEET, then ./fleet.yaml, as every verb finds it) and
run ids from the run records. A callback never fails: a fleet that does not
load completes to nothing (the verb itself will say what is wrong with it).

This module imports no core module at the top: every verb module imports it,
and `orch <verb> --help` must stay light (tests/test_cli_lazy.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from click.shell_completion import CompletionItem, get_completion_class

if TYPE_CHECKING:
    from orchestrator.fleet import Fleet

SHELLS = ("bash", "zsh", "fish")
# click's environment variable for `orch`: _ORCH_COMPLETE=bash_source|zsh_source|fish_source orch
COMPLETE_VAR = "_ORCH_COMPLETE"


def _fleet(ctx: click.Context) -> Fleet | None:
    """The fleet the command line names, or None when it does not load."""
    path = None
    while ctx is not None:  # the --fleet of the command itself (fleet import-gcloud, bundle) or of `orch`
        path = path or ctx.params.get("fleet_path")
        ctx = ctx.parent  # type: ignore[assignment]
    try:
        from orchestrator.fleet import load_fleet

        return load_fleet(path)
    except Exception:  # completion must never fail
        return None


def _matching(names: list[str], incomplete: str, help_of: dict[str, str] | None = None) -> list[CompletionItem]:
    return [CompletionItem(n, help=(help_of or {}).get(n)) for n in names if n.startswith(incomplete)]


def lanes(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Lane names of the fleet, with their worker counts."""
    fleet = _fleet(ctx)
    if fleet is None:
        return []
    counts = {n: len(m) for n, m in fleet.lane_members.items()}
    return _matching(list(fleet.model.lanes), incomplete, {n: f"{c} worker{'s' * (c != 1)}" for n, c in counts.items()})


def workers(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Worker names of the fleet (the last item of a comma list completes)."""
    fleet = _fleet(ctx)
    if fleet is None:
        return []
    done, sep, last = incomplete.rpartition(",")
    prefix = done + sep
    return [
        CompletionItem(prefix + w.name, help=w.lane and f"lane {w.lane}")
        for w in fleet.workers
        if w.name.startswith(last)
    ]


def runs(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Recorded run ids, newest first, with their state and lane."""
    try:
        from orchestrator.runs import list_runs

        items = list_runs()
    except Exception:  # completion must never fail
        return []
    return [
        CompletionItem(r["run_id"], help=f"{r.get('state', '?')}, lane {r.get('lane', '?')}")
        for r in items
        if str(r.get("run_id", "")).startswith(incomplete)
    ]


def script(shell: str, prog_name: str = "orch") -> str:
    """The completion script click generates for `shell`."""
    from orchestrator.cli import main

    cls = get_completion_class(shell)
    if cls is None:  # click.Choice keeps this out of reach of the command line
        raise click.BadParameter(f"no completion for {shell}")
    return cls(main, {}, prog_name, COMPLETE_VAR).source()


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the shell completion script for bash, zsh or fish.

    \b
        eval "$(orch completion bash)"                       # ~/.bashrc
        eval "$(orch completion zsh)"                        # ~/.zshrc
        orch completion fish > ~/.config/fish/completions/orch.fish

    Completes verbs, options, lane and worker names (from the fleet) and run
    ids (from the run records).
    """
    click.echo(script(shell), nl=False)
