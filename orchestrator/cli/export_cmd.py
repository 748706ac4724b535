"""`orch export jobset`: a lane as a GKE JobSet carrying the same bundle, policy and receipts contract."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # the CLI imports core modules only when a verb runs
    from orchestrator.cli import Context


@click.group("export")
def export() -> None:
    """Render a lane for another scheduler (a GKE JobSet), with orch's bundle, policy and receipts."""


@export.command("jobset", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--lane", required=True, help="The lane to export (one Job per slice, one pod per worker).")
@click.option("--image", help="Container image with the bundle's Python (default: python:<bundle python>-slim).")
@click.option(
    "--wheels",
    default="/wheels",
    show_default=True,
    help="Where the pods find the locked wheels: gcs:BUCKET[/PREFIX] (mounted read-only), an https:// page "
    "of links, or a path in the image (pip --find-links).",
)
@click.option("--max-restarts", type=int, default=0, show_default=True, help="JobSet failurePolicy.maxRestarts.")
@click.option(
    "--receipts-volume",
    metavar="gcs:BUCKET|pvc:CLAIM",
    help="Where receipts and logs go (a GCS FUSE bucket or a claim); default: an emptyDir that dies with the pod.",
)
@click.option("--name", help="The JobSet's name (default: from the run id).")
@click.option("--port", type=int, help="Coordinator port (default: derived from the run id).")
@click.option("--run-id", "run_id", help="Use this run id (reproducible manifests).")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), help="Write the manifest here.")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_obj
def jobset(
    obj: Context,
    lane: str,
    image: str | None,
    wheels: str,
    max_restarts: int,
    receipts_volume: str | None,
    name: str | None,
    port: int | None,
    run_id: str | None,
    output: str | None,
    argv: tuple[str, ...],
) -> None:
    """Render LANE as a JobSet (jobset.x-k8s.io/v1alpha2) running `-- SCRIPT.py ARGS...` or `-- -m MODULE ARGS...`."""
    from orchestrator.export import JobSetOptions, export_jobset, render_yaml

    args = list(argv)
    options = JobSetOptions(
        image=image,
        wheels=wheels,
        max_restarts=max_restarts,
        receipts_volume=receipts_volume,
        name=name,
        run_id=run_id,
        port=port,
    )
    exported = export_jobset(obj.fleet(), lane, args, options)
    text = render_yaml(exported.objects)
    if output:
        from hostside.files import write_atomic

        write_atomic(output, text.encode())
        click.echo(f"{output}: JobSet {exported.jobset['metadata']['name']} (run {exported.plan.run_id})", err=True)
    else:
        click.echo(text, nl=False)
    if receipts_volume is None:
        click.echo("orch: no --receipts-volume: receipts and logs stay in each pod's emptyDir", err=True)
