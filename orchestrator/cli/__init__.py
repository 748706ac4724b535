"""The `orch` command line: parse, load the fleet, call one core function, render.

Each verb lives in a module under `orchestrator/cli/`, imported only when that
verb runs (or shows its help): `orch --help` imports no core module and no
verb module. `VERBS` maps each verb to "module:attribute" and its one-line
help (tests/test_cli_lazy.py keeps those lines equal to the commands' own).
Core modules never print or exit; this layer maps `OrchError` to a short
message and an exit code (a traceback only with --debug).
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

import click

if TYPE_CHECKING:
    from orchestrator.errors import OrchError
    from orchestrator.fleet import Fleet, WorkerRef
    from orchestrator.transport import FabricTransport

# verb -> ("module:attribute", its short help)
VERBS: dict[str, tuple[str, str]] = {
    "attach": (
        "orchestrator.cli.launch_cmd:attach",
        "Resume watching a detached run: stream its output and apply the gang rule again.",
    ),
    "bundle": ("orchestrator.cli.bundle_cmd:bundle", "Lock and check bundles: exact wheels for a pinned stack."),
    "cache": ("orchestrator.cli.cache_cmd:cache", "Compilation caches: who writes them, what is in them."),
    "completion": (
        "orchestrator.cli.complete:completion",
        "Print the shell completion script for bash, zsh or fish.",
    ),
    "compare": (
        "orchestrator.cli.receipts_cmd:compare_",
        "Two runs side by side, every figure labelled with its lane and bundle.",
    ),
    "connections": (
        "orchestrator.cli.connections_cmd:connections",
        "Show the holders keeping fleets' SSH connections open (pid, fleet, workers held, idle time left).",
    ),
    "deploy": (
        "orchestrator.cli.deploy_cmd:deploy",
        "Push the lane's locked bundle to its workers, install it, switch atomically.",
    ),
    "diagnose": (
        "orchestrator.cli.diagnose_cmd:diagnose",
        "Classify a log or a gathered run: which layer owns the failure, the line that shows it, and the remedy.",
    ),
    "exec": ("orchestrator.cli.exec_cmd:exec_", "Run a command on workers in parallel; exit non-zero if any failed."),
    "export": (
        "orchestrator.cli.export_cmd:export",
        "Render a lane for another scheduler (a GKE JobSet), with orch's bundle, policy and receipts.",
    ),
    "fleet": ("orchestrator.cli.fleet_cmd:fleet", "Inspect and validate fleet.yaml."),
    "gather": (
        "orchestrator.cli.receipts_cmd:gather_",
        "Copy every worker's receipt and logs of RUN to runs/<run-id>/<worker>/.",
    ),
    "launch": ("orchestrator.cli.launch_cmd:launch", "Launch one process per worker of a lane, together, as a gang."),
    "logs": ("orchestrator.cli.launch_cmd:logs", "Print a run's output logs from the workers, worker-prefixed."),
    "play": ("orchestrator.cli.play_cmd:play", "Run a playbook's steps in order; stop at the first failing rung."),
    "probe": (
        "orchestrator.cli.probe_cmd:probe",
        "Prove on every worker that the runtime answers from the intended device.",
    ),
    "report": (
        "orchestrator.cli.receipts_cmd:report_",
        "One view of RUN from its receipts: per worker versions, bundle, device, backend, timings, exit; flags.",
    ),
    "restart-check": (
        "orchestrator.cli.cache_cmd:restart_check",
        "Launch the same command cold, then warm, and say per process whether the cache was reused.",
    ),
    "rollback": (
        "orchestrator.cli.deploy_cmd:rollback",
        "Re-activate the previous bundle on every worker of the lane.",
    ),
    "runs": ("orchestrator.cli.launch_cmd:runs_", "List the runs recorded on this controller (newest first)."),
    "sandbox": (
        "orchestrator.cli.sandbox_cmd:sandbox_group",
        "A local pod slice: one real sshd per worker, in its own namespaces, on loopback.",
    ),
    "status": ("orchestrator.cli.launch_cmd:status", "Show a run's state on every worker (live, from the workers)."),
    "stop": ("orchestrator.cli.launch_cmd:stop", "End every process of a run on every worker (TERM, grace, KILL)."),
}


@dataclass
class Context:
    """Shared CLI state: where the fleet is, and how to talk to workers."""

    fleet_path: str | None = None
    debug: bool = False
    host_key_policy: str | None = None
    connect_timeout: float | None = None
    _fleet: Fleet | None = field(default=None, repr=False)
    _fleet_content: bytes | None = field(default=None, repr=False)
    _transports: list[FabricTransport] = field(default_factory=list, repr=False)
    _plain: list[FabricTransport] = field(default_factory=list, repr=False)  # with the fleet's settings only

    def fleet(self) -> Fleet:
        """The validated fleet (loaded once per command)."""
        if self._fleet is None:
            from orchestrator import connections
            from orchestrator.fleet import load_fleet

            found = connections.fleet_file(self.fleet_path)
            content = found.read_bytes() if found is not None else None
            self._fleet = load_fleet(self.fleet_path)
            self._fleet_content = content
        return self._fleet

    def transport(self, workers: list[WorkerRef] | tuple[WorkerRef, ...], **overrides: Any) -> FabricTransport:
        """A Transport to `workers` with the fleet's SSH settings and CLI overrides."""
        from orchestrator.transport import for_fleet

        if self.host_key_policy:
            overrides.setdefault("host_key_policy", self.host_key_policy)
        if self.connect_timeout:
            overrides.setdefault("connect_timeout", self.connect_timeout)
        transport = for_fleet(self.fleet(), workers, **overrides)
        self._transports.append(transport)
        if set(overrides) <= {"host_key_policy", "connect_timeout"}:
            self._plain.append(transport)
        return transport

    def remember_connections(self) -> None:
        """Record what this command's direct connections resolved, for a replayed `orch exec`
        (transport/replay.py); only when the fleet file still holds what was validated."""
        resolved = {name: r for t in self._plain for name, r in t.resolved.items()}
        if not resolved or self._fleet is None or self._fleet_content is None:
            return
        from orchestrator import connections
        from orchestrator.transport import replay

        keyed = {
            k: v for k, v in (("host_key_policy", self.host_key_policy), ("connect_timeout", self.connect_timeout))
        }
        try:
            if self._fleet.path.read_bytes() == self._fleet_content:
                replay.save(self._fleet, self._fleet_content, {k: v for k, v in keyed.items() if v}, resolved)
        except (OSError, connections.WireError):
            pass  # a record only saves time; without one the next command connects as this one did

    def report_accepted_keys(self) -> None:
        """Say which first-seen host keys accept-new recorded (never silent)."""
        for t in self._transports:
            for worker, host, fingerprint in t.accepted_keys:
                click.echo(
                    f"orch: recorded new host key for {worker} ({host}) {fingerprint} in {t.known_hosts_display}",
                    err=True,
                )


class LazyCommands(MutableMapping[str, click.Command]):
    """A group's commands by name, each imported from "module:attribute" when first looked up.

    Listing the names imports nothing; looking one up (as click's
    `get_command` does, or any tool reading `group.commands`) imports its module.
    """

    def __init__(self, lazy: Mapping[str, tuple[str, str]]) -> None:
        self.lazy = dict(lazy)
        self.loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self.loaded:
            if name not in self.lazy:
                raise KeyError(name)
            module, _, attr = self.lazy[name][0].partition(":")
            command = getattr(importlib.import_module(module), attr)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self.lazy[name][0]} is not a click command")
            self.loaded[name] = command
        return self.loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self.loaded.pop(name, None)
        self.lazy.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self.loaded or name in self.lazy

    def __iter__(self) -> Iterator[str]:
        return iter(sorted({*self.loaded, *self.lazy}))

    def __len__(self) -> int:
        return len({*self.loaded, *self.lazy})

    def short_help(self, name: str, limit: int) -> str:
        """A verb's short help, shortened as click does, without importing a verb not loaded yet."""
        if name in self.loaded:
            return self.loaded[name].get_short_help_str(limit)
        # a stand-in carrying the verb's help line, shortened exactly as click shortens it
        return click.Command(name, help=self.lazy[name][1]).get_short_help_str(limit)

    def hidden(self, name: str) -> bool:
        return name in self.loaded and self.loaded[name].hidden


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use and listed from `lazy` without importing them."""

    def __init__(self, *args: Any, lazy: Mapping[str, tuple[str, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        table = LazyCommands(lazy or {})
        for name, command in self.commands.items():
            table[name] = command
        self.commands = table

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The verbs and their short help (click's own would import every verb)."""
        table = self.commands
        assert isinstance(table, LazyCommands)
        names = [n for n in self.list_commands(ctx) if not table.hidden(n)]
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        with formatter.section("Commands"):
            formatter.write_dl([(name, table.short_help(name, limit)) for name in names])


class OrchGroup(LazyGroup):
    """Turns OrchError into a clean message and exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        tokens = list(ctx.args)  # the verb's own arguments (click consumes them below)
        as_json = "--json" in tokens[: tokens.index("--") if "--" in tokens else len(tokens)]
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise  # click's own (help, usage errors): no need to import the error tree
        except Exception as exc:
            from orchestrator.errors import OrchError

            if not isinstance(exc, OrchError):
                raise
            obj = ctx.obj if isinstance(ctx.obj, Context) else None
            if obj and obj.debug:
                raise
            if as_json:  # a script asked for JSON: it gets a document on stdout for an error too
                click.echo(json.dumps(error_document(exc), indent=2))
            click.echo(f"orch: error: {exc}", err=True)
            sys.exit(exc.exit_code)


@click.group(cls=OrchGroup, lazy=VERBS, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--fleet", "fleet_path", metavar="PATH", help="fleet.yaml (default: $ORCH_FLEET, then ./fleet.yaml).")
@click.option(
    "--host-key-policy",
    type=click.Choice(["strict", "accept-new"]),
    help="Override the fleet's host key policy for this command.",
)
@click.option("--connect-timeout", type=float, metavar="S", help="Override the SSH connect timeout.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=lambda ctx, _param, value: _print_version(ctx) if value else None,
    help="Show the orch version and the digest of the hostside code it ships, and exit.",
)
@click.pass_context
def main(
    ctx: click.Context, fleet_path: str | None, host_key_policy: str | None, connect_timeout: float | None, debug: bool
) -> None:
    """orch: bundles, launches, probes and receipts for TPU pod slices over SSH."""
    ctx.obj = Context(
        fleet_path=fleet_path, debug=debug, host_key_policy=host_key_policy, connect_timeout=connect_timeout
    )
    ctx.call_on_close(ctx.obj.report_accepted_keys)
    ctx.call_on_close(ctx.obj.remember_connections)


def error_document(exc: OrchError) -> dict[str, Any]:
    """What `--json` prints on stdout when the verb ends in an OrchError (exit code as without --json)."""
    return {
        "schema_version": 1,
        "ok": False,
        "error": {
            "type": type(exc).__name__,
            "message": exc.message,
            "host": exc.host,
            "hint": exc.hint,
            "exit_code": exc.exit_code,
        },
    }


def version_text() -> str:
    """`orch <version> (hostside <digest>, <where it is installed>)`: exactly what runs.

    The digest is the one workers hold this controller's hostside under
    (`<root>/hostside/<digest>/`), so two controllers agree on the code they
    run on workers exactly when their digests match.
    """
    from importlib.metadata import PackageNotFoundError, version

    from orchestrator.remote import HOSTSIDE_DIR, hostside_archive

    try:
        number = version("orch")
    except PackageNotFoundError:  # run from a checkout that was never installed
        number = "unknown"
    digest, _ = hostside_archive()
    return f"orch {number} (hostside {digest}, {HOSTSIDE_DIR})"


def _print_version(ctx: click.Context) -> None:
    click.echo(version_text())
    ctx.exit()


def fail(message: str, code: int = 1) -> NoReturn:
    """Leave with a message on stderr (for outcomes that are not OrchErrors)."""
    click.echo(message, err=True)
    sys.exit(code)
