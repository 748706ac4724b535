"""The `orch` command line: parse, load the fleet, call one core function, render.

Each verb lives in its own module under `orchestrator/cli/` and registers
itself on `main`. Core modules never print or exit; this layer maps
`OrchError` to a short message and an exit code (a traceback only with
--debug).
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field

import click

from orchestrator.errors import OrchError

# Verb modules, each defining `register(main)`.
COMMAND_MODULES = [
    "fleet_cmd",
    "exec_cmd",
    "sandbox_cmd",
    "diagnose_cmd",
    "probe_cmd",
    "bundle_cmd",
    "deploy_cmd",
    "launch_cmd",
    "play_cmd",
    "receipts_cmd",
    "cache_cmd",
]


@dataclass
class Context:
    """Shared CLI state: where the fleet is, and how to talk to workers."""

    fleet_path: str | None = None
    debug: bool = False
    host_key_policy: str | None = None
    connect_timeout: float | None = None
    _fleet: object = field(default=None, repr=False)
    _transports: list = field(default_factory=list, repr=False)

    def fleet(self):
        """The validated fleet (loaded once per command)."""
        if self._fleet is None:
            from orchestrator.fleet import load_fleet

            self._fleet = load_fleet(self.fleet_path)
        return self._fleet

    def transport(self, workers, **overrides):
        """A Transport to `workers` with the fleet's SSH settings and CLI overrides."""
        from orchestrator.transport import for_fleet

        if self.host_key_policy:
            overrides.setdefault("host_key_policy", self.host_key_policy)
        if self.connect_timeout:
            overrides.setdefault("connect_timeout", self.connect_timeout)
        transport = for_fleet(self.fleet(), workers, **overrides)
        self._transports.append(transport)
        return transport

    def report_accepted_keys(self) -> None:
        """Say which first-seen host keys accept-new recorded (never silent)."""
        for t in self._transports:
            for worker, host, fingerprint in t.accepted_keys:
                click.echo(
                    f"orch: recorded new host key for {worker} ({host}) {fingerprint} in {t.known_hosts_display}",
                    err=True,
                )


class OrchGroup(click.Group):
    """Turns OrchError into a clean message and exit code."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except OrchError as exc:
            obj = ctx.obj if isinstance(ctx.obj, Context) else None
            if obj and obj.debug:
                raise
            click.echo(f"orch: error: {exc}", err=True)
            sys.exit(exc.exit_code)


@click.group(cls=OrchGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--fleet", "fleet_path", metavar="PATH", help="fleet.yaml (default: $ORCH_FLEET, then ./fleet.yaml).")
@click.option(
    "--host-key-policy",
    type=click.Choice(["strict", "accept-new"]),
    help="Override the fleet's host key policy for this command.",
)
@click.option("--connect-timeout", type=float, metavar="S", help="Override the SSH connect timeout.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.version_option(package_name="orch")
@click.pass_context
def main(ctx: click.Context, fleet_path, host_key_policy, connect_timeout, debug):
    """orch: bundles, launches, probes and receipts for TPU pod slices over SSH."""
    ctx.obj = Context(
        fleet_path=fleet_path, debug=debug, host_key_policy=host_key_policy, connect_timeout=connect_timeout
    )
    ctx.call_on_close(ctx.obj.report_accepted_keys)


for _name in COMMAND_MODULES:
    importlib.import_module(f"orchestrator.cli.{_name}").register(main)


def fail(message: str, code: int = 1) -> None:
    """Leave with a message on stderr (for outcomes that are not OrchErrors)."""
    click.echo(message, err=True)
    sys.exit(code)
