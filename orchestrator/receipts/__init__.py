"""Receipts: what every process of a run actually ran, gathered, reported and compared.

Each process of an `orch launch` run leaves a receipt (`record.json`, written
by the hostside launcher, documented by `schema/receipt.schema.json`) in its
worker's run directory. One module per concept:

- `schema`      the receipt model: `validate(doc)` checks a receipt against the shipped
                schema (no extra dependency);
- `copies`      a run's receipts as the controller holds them: `load_run(record)`
                (gathered copies first, else what the launch collected);
- `gathering`   `gather(...)` copies every worker's receipt and logs to
                `runs/<run-id>/<worker>/` in parallel, resumably, and says which workers
                are missing and why;
- `model`       the report as data (`Report`, `WorkerRow`, `Flag`);
- `reporting`   `build_report(run)`: per-worker stack, device, backend, timings, exit,
                and the flags (stack differences across workers, unreduced "global"
                metrics, CPU fallback on a TPU lane, differing backends);
- `comparison`  `compare(a, b)`: two runs side by side, every figure labelled with lane
                and bundle; refused across lanes or bundles unless explicitly allowed;
- `html`        `render_html(report)`: a static, self-contained page with an inline SVG plot.

Plain functions returning result objects; the CLI renders them. The modules are
not named after the functions they hold (`gather`, `report`, `compare`), so that
`receipts.gather` is always the function and never, depending on import order,
the module.
"""

from hostside.rundir import RECORD_FILE
from orchestrator.receipts.comparison import (
    Comparison,
    Difference,
    Figure,
    compare,
    figures,
    format_value,
    stack_differences,
)
from orchestrator.receipts.copies import GATHER_FILE, RunReceipts, load_run
from orchestrator.receipts.gathering import GatherResult, WorkerGather, fetch_plan, gather
from orchestrator.receipts.html import plot_svg, render_html
from orchestrator.receipts.model import Flag, Report, WorkerRow
from orchestrator.receipts.reporting import REL_TOL, build_report, report
from orchestrator.receipts.schema import (
    SCHEMA_PATH,
    SCHEMA_VERSION,
    STACK_KEYS,
    STARTUP_RANK,
    SUPPORTED_KEYWORDS,
    load_schema,
    validate,
)

__all__ = [
    "GATHER_FILE",
    "RECORD_FILE",
    "REL_TOL",
    "SCHEMA_PATH",
    "SCHEMA_VERSION",
    "STACK_KEYS",
    "STARTUP_RANK",
    "SUPPORTED_KEYWORDS",
    "Comparison",
    "Difference",
    "Figure",
    "Flag",
    "GatherResult",
    "Report",
    "RunReceipts",
    "WorkerGather",
    "WorkerRow",
    "build_report",
    "compare",
    "fetch_plan",
    "figures",
    "format_value",
    "gather",
    "load_run",
    "load_schema",
    "plot_svg",
    "render_html",
    "report",
    "stack_differences",
    "validate",
]
