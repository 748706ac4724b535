"""The report as a static, self-contained HTML page, with an inline SVG plot.

No scripts and no external resources: the page opens anywhere, offline, and
can be attached to a ticket as it is.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.names import compact_names
from orchestrator.receipts.model import Report, WorkerRow
from orchestrator.receipts.schema import STACK_KEYS

_CSS = """
body { font-family: sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.flag { margin: 0.3em 0; padding: 0.4em 0.6em; border-left: 4px solid #e15759; background: #fdf0f0; }
.flag.info { border-color: #76b7b2; background: #eef7f6; }
.ok { color: #2a7a2a; } .meta { color: #555; } .bad { color: #b22; }
h3 { font-size: 1em; margin: 1em 0 0.3em; } details > summary { cursor: pointer; margin: 0.6em 0; }
td.names { max-width: 60em; word-break: break-word; }
"""
# More workers than this: the workers table is grouped by outcome (successes folded away),
# tables of one column or row per worker are summarised, and the plots sort their bars.
MANY = 16
_e = html.escape


# -- the page ---------------------------------------------------------------------------


def render_html(r: Report) -> str:
    """The report as one static, self-contained HTML page (inline CSS and SVG, no scripts)."""
    have = [x for x in r.rows if x.has_receipt]
    many = len(r.rows) > MANY
    parts = [
        *_head(r),
        *_flags(r),
        *_outcomes(r.rows),
        *(_grouped_workers(r.rows) if many else _workers_table(r.rows)),
        "<h2>Compile and step times</h2>",
        plot_svg(r.rows),
        *(_versions_grouped(have) if many else _versions_table(have)),
        *(_metrics_summary(have) if many else _metrics_table(have)),
        *_startup(have),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _num(v: float | None, digits: int = 4) -> str:
    return "-" if v is None else f"{v:.{digits}g}"


def _head(r: Report) -> list[str]:
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>orch report {_e(r.run_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Run {_e(r.run_id)}</h1>",
        f'<p class="meta">lane <b>{_e(r.lane)}</b> &middot; bundle <b>{_e(r.bundle_label)}</b> &middot; '
        f"platform {_e(str(r.platform))} &middot; state {_e(str(r.state))} &middot; "
        f"{len(r.rows)} processes &middot; program <code>{_e(' '.join(r.target))}</code></p>",
    ]


def _flags(r: Report) -> list[str]:
    if not r.flags:
        return [
            "<h2>Flags</h2>",
            '<p class="ok">none: every worker ran the same stack and backend, and every global metric was reduced</p>',
        ]
    return ["<h2>Flags</h2>"] + [
        f'<div class="flag {_e(f.level)}"><b>{_e(f.kind)}</b>: {_e(f.message)}</div>' for f in r.flags
    ]


def _by_outcome(rows: Sequence[WorkerRow]) -> list[tuple[str, list[WorkerRow]]]:
    """Rows grouped by how each worker ended, failures first and the largest group first among equals."""
    groups: dict[str, list[WorkerRow]] = {}
    for x in rows:
        groups.setdefault(x.exit_text(), []).append(x)
    return sorted(groups.items(), key=lambda kv: (kv[0] == "exit 0", -len(kv[1]), kv[0]))


def _outcomes(rows: Sequence[WorkerRow]) -> list[str]:
    parts = ["<h2>Outcome</h2>", "<table><tr><th>outcome</th><th>workers</th><th>which</th></tr>"]
    for outcome, members in _by_outcome(rows):
        cls = "ok" if outcome == "exit 0" else "bad"
        parts.append(
            f'<tr><td class="{cls}">{_e(outcome)}</td><td class=num>{len(members)}</td>'
            f'<td class="names">{_e(compact_names(x.worker for x in members))}</td></tr>'
        )
    parts.append("</table>")
    return parts


def _grouped_workers(rows: Sequence[WorkerRow]) -> list[str]:
    """One table per outcome; the successful workers folded (open them to read every row)."""
    parts = ["<h2>Workers by outcome</h2>"]
    for outcome, members in _by_outcome(rows):
        table = _workers_table(members)[1:]
        title = f"{_e(outcome)}: {len(members)} worker{'s' if len(members) != 1 else ''}"
        if outcome == "exit 0":
            parts += [f"<details><summary>{title} (every row)</summary>", *table, "</details>"]
        else:
            parts += [f'<h3 class="bad">{title}</h3>', *table]
    return parts


def _workers_table(rows: Sequence[WorkerRow]) -> list[str]:
    parts = [
        "<h2>Workers</h2>",
        "<table><tr><th>worker</th><th>process</th><th>bundle</th><th>device</th>"
        "<th>backend</th><th>compile s</th><th>step s (median)</th><th>steps</th><th>user code s</th>"
        "<th>cache</th><th>exit</th><th>receipt</th></tr>",
    ]
    for x in rows:
        parts.append(
            f"<tr><td>{_e(x.worker)}</td><td class=num>{x.process_id}</td>"
            f"<td>{_e(str(x.bundle))}@{_e((x.bundle_id or '?')[:12])}</td><td>{_e(x.device_text())}</td>"
            f"<td>{_e(x.backend_text())}</td><td class=num>{_num(x.compile_s)}</td>"
            f"<td class=num>{_num(x.step_s)}</td><td class=num>{x.steps}</td>"
            f"<td class=num>{_num(x.user_code_s)}</td><td>{_e(x.cache_text())}</td>"
            f"<td>{_e(x.exit_text())}</td>"
            f"<td>{_e(x.source or 'missing')}</td></tr>"
        )
    parts.append("</table>")
    return parts


def _versions_table(have: Sequence[WorkerRow]) -> list[str]:
    keys = [k for k in STACK_KEYS if any(x.versions.get(k) for x in have)] + sorted(
        {k for x in have for k in x.versions} - set(STACK_KEYS)
    )
    parts = [
        "<h2>Versions (installed / reported by the runtime)</h2>",
        "<table><tr><th>worker</th>" + "".join(f"<th>{_e(k)}</th>" for k in keys) + "</tr>",
    ]
    for x in have:
        cells = []
        for k in keys:
            inst, rep = x.versions.get(k), x.versions_reported.get(k)
            cells.append(f"<td>{_e(str(inst or '-'))}" + (f" / {_e(rep)}" if rep and rep != inst else "") + "</td>")
        parts.append(f"<tr><td>{_e(x.worker)}</td>{''.join(cells)}</tr>")
    parts.append("</table>")
    return parts


def _versions_grouped(have: Sequence[WorkerRow]) -> list[str]:
    """One row per distinct set of versions, with the workers that have it."""
    keys = [k for k in STACK_KEYS if any(x.versions.get(k) for x in have)] + sorted(
        {k for x in have for k in x.versions} - set(STACK_KEYS)
    )
    groups: dict[tuple[str, ...], list[str]] = {}
    for x in have:
        cells = []
        for k in keys:
            inst, rep = x.versions.get(k), x.versions_reported.get(k)
            cells.append(str(inst or "-") + (f" / {rep}" if rep and rep != inst else ""))
        groups.setdefault(tuple(cells), []).append(x.worker)
    parts = [
        "<h2>Versions (installed / reported by the runtime), by worker group</h2>",
        "<table><tr><th>workers</th>" + "".join(f"<th>{_e(k)}</th>" for k in keys) + "</tr>",
    ]
    for row, workers in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        parts.append(
            f'<tr><td class="names">{len(workers)}: {_e(compact_names(workers))}</td>'
            + "".join(f"<td>{_e(c)}</td>" for c in row)
            + "</tr>"
        )
    parts.append("</table>")
    return parts


def _metrics_summary(have: Sequence[WorkerRow]) -> list[str]:
    """Per metric: min, median and max over the workers, and how many distinct values they reported."""
    metrics = sorted({m for x in have for m in x.metrics})
    if not metrics:
        return []
    parts = [
        "<h2>Metrics (over the workers)</h2>",
        "<table><tr><th>metric</th><th>scope</th><th>reduced by</th><th>workers</th><th>min</th>"
        "<th>median</th><th>max</th><th>distinct values</th></tr>",
    ]
    for m in metrics:
        entries = [x.metrics.get(m) or {} for x in have]
        scope = "/".join(sorted({str(en.get("scope")) for en in entries if en}))
        how = "/".join(sorted({str(en.get("reduced_by") or "NOT REDUCED") for en in entries if en}))
        values = sorted(v for en in entries if isinstance(v := en.get("value"), (int, float)))
        mid = values[len(values) // 2] if values else None
        parts.append(
            f"<tr><td>{_e(m)}</td><td>{_e(scope)}</td><td>{_e(how)}</td><td class=num>{len(values)}</td>"
            + "".join(f"<td class=num>{_num(v, 8)}</td>" for v in (values[0] if values else None, mid))
            + f"<td class=num>{_num(values[-1] if values else None, 8)}</td>"
            + f"<td class=num>{len(set(values))}</td></tr>"
        )
    parts.append("</table>")
    return parts


def _metrics_table(have: Sequence[WorkerRow]) -> list[str]:
    metrics = sorted({m for x in have for m in x.metrics})
    if not metrics:
        return []
    parts = [
        "<h2>Metrics</h2>",
        "<table><tr><th>metric</th><th>scope</th><th>reduced by</th>"
        + "".join(f"<th>{_e(x.worker)}</th>" for x in have)
        + "</tr>",
    ]
    for m in metrics:
        entries = [x.metrics.get(m) or {} for x in have]
        scope = "/".join(sorted({str(en.get("scope")) for en in entries if en}))
        how = "/".join(sorted({str(en.get("reduced_by") or "NOT REDUCED") for en in entries if en}))
        parts.append(
            f"<tr><td>{_e(m)}</td><td>{_e(scope)}</td><td>{_e(how)}</td>"
            + "".join(f"<td class=num>{_num(en.get('value'), 8)}</td>" for en in entries)
            + "</tr>"
        )
    parts.append("</table>")
    return parts


def _startup(have: Sequence[WorkerRow]) -> list[str]:
    orders = {" -> ".join(x.startup) for x in have}
    return ["<h2>Start-up order</h2>"] + [f"<p><code>{_e(s)}</code></p>" for s in sorted(orders)]


# -- the plot ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Bar:
    """One worker's bar: a value, and for step times the min-max whisker."""

    worker: str
    value: float | None
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class _Frame:
    """Where a panel's plot area is, and its scale."""

    left: float
    width: float
    height: float
    base: float  # y of the axis line
    ymax: float

    def y(self, value: float) -> float:
        return self.base - self.height * value / self.ymax


_LEFT, _RIGHT, _TOP, _BOTTOM, _GAP = 64, 16, 34, 70, 24


def plot_svg(rows: Sequence[WorkerRow], *, width: int = 760, panel_height: int = 230) -> str:
    """An inline SVG: per-worker compile time (bars) and step time (median bar, min-max whisker).

    Above MANY workers the bars are sorted slowest first, only the slowest are
    named (every bar keeps its name as a tooltip) and a dashed line marks the median.
    """
    panels = [
        ("compile time per worker (s)", [_Bar(r.worker, r.compile_s) for r in rows], "compile"),
        (
            "step time per worker (s): median, min to max",
            [_Bar(r.worker, r.step_s, r.step_min, r.step_max) for r in rows],
            "step",
        ),
    ]
    height = len(panels) * (panel_height + _GAP)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11" role="img" '
        f'aria-label="per-worker compile and step times">'
    ]
    for i, (title, bars, kind) in enumerate(panels):
        out += _panel(
            title,
            bars,
            kind,
            y0=i * (panel_height + _GAP),
            width=width,
            panel_height=panel_height,
            many=len(rows) > MANY,
        )
    out.append("</svg>")
    return "\n".join(out)


def _panel(
    title: str, bars: Sequence[_Bar], kind: str, *, y0: int, width: int, panel_height: int, many: bool = False
) -> list[str]:
    plot_h = panel_height - _TOP - _BOTTOM
    plot_w = width - _LEFT - _RIGHT
    base = y0 + _TOP + plot_h
    out = [
        f'<g class="panel" data-kind="{kind}">',
        f'<text x="{_LEFT}" y="{y0 + 18}" font-size="13" font-weight="bold">{_e(title)}</text>',
    ]
    values = [v for b in bars for v in (b.value, b.high) if isinstance(v, (int, float))]
    if not values:
        out.append(
            f'<text x="{_LEFT}" y="{y0 + _TOP + plot_h / 2:.1f}" fill="#666">no {kind} times recorded '
            f'(orch_receipt.record_time("{kind}", seconds) or cache evidence)</text></g>'
        )
        return out
    frame = _Frame(left=_LEFT, width=plot_w, height=plot_h, base=base, ymax=_nice_max(max(values)))
    out += _axes(frame)
    if many:
        out += _sorted_bars(bars, kind, frame)
        out.append("</g>")
        return out
    slot = plot_w / max(len(bars), 1)
    bar_w = max(4.0, min(48.0, slot * 0.6))
    for j, bar in enumerate(bars):
        out += _bar(bar, kind, frame, cx=_LEFT + slot * (j + 0.5), bar_w=bar_w)
    out.append("</g>")
    return out


def _axes(f: _Frame) -> list[str]:
    out = []
    for k in range(5):
        ty = f.base - f.height * k / 4
        out.append(f'<line x1="{f.left}" x2="{f.left + f.width}" y1="{ty:.1f}" y2="{ty:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{f.left - 6}" y="{ty + 4:.1f}" text-anchor="end">{_fmt_tick(f.ymax * k / 4)}</text>')
    out.append(f'<line x1="{f.left}" x2="{f.left}" y1="{f.base - f.height}" y2="{f.base}" stroke="#333"/>')
    out.append(f'<line x1="{f.left}" x2="{f.left + f.width}" y1="{f.base}" y2="{f.base}" stroke="#333"/>')
    return out


def _bar(bar: _Bar, kind: str, f: _Frame, *, cx: float, bar_w: float, caps: bool = True) -> list[str]:
    label = _e(bar.worker)
    base = f.base
    out = [
        f'<text x="{cx:.1f}" y="{base + 14}" text-anchor="end" '
        f'transform="rotate(-35 {cx:.1f} {base + 14})">{label}</text>'
    ]
    v = bar.value
    if not isinstance(v, (int, float)):
        out.append(f'<text x="{cx:.1f}" y="{base - 4}" text-anchor="middle" fill="#999">n/a</text>')
        return out
    h = f.height * v / f.ymax
    out.append(
        f'<rect class="bar" data-worker="{label}" data-value="{v:.6g}" x="{cx - bar_w / 2:.1f}" '
        f'y="{base - h:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
        f'fill="{"#4e79a7" if kind == "compile" else "#59a14f"}">'
        f"<title>{label}: {v:.4g} s</title></rect>"
    )
    if isinstance(bar.low, (int, float)) and isinstance(bar.high, (int, float)):
        ylo, yhi = f.y(bar.low), f.y(bar.high)
        out.append(
            f'<line class="whisker" data-worker="{label}" x1="{cx:.1f}" x2="{cx:.1f}" '
            f'y1="{ylo:.1f}" y2="{yhi:.1f}" '
            + ('stroke="#222"/>' if caps else 'stroke="#555" stroke-width="0.6"/>')  # thin when there are many
        )
        for yy in (ylo, yhi) if caps else ():
            out.append(f'<line x1="{cx - 5:.1f}" x2="{cx + 5:.1f}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#222"/>')
    return out


_NAMED = 5  # above MANY workers, how many of the slowest bars carry their worker's name


def _sorted_bars(bars: Sequence[_Bar], kind: str, f: _Frame) -> list[str]:
    """Many workers: bars slowest first and thin, the slowest few named, the median dashed, the rest counted."""
    timed = sorted((b for b in bars if isinstance(b.value, (int, float))), key=lambda b: -(b.value or 0.0))
    slot = f.width / max(len(timed), 1)
    bar_w = max(1.0, slot * 0.8)
    out = []
    for j, bar in enumerate(timed):
        cx = f.left + slot * (j + 0.5)
        drawn = _bar(bar, kind, f, cx=cx, bar_w=bar_w, caps=False)
        out += drawn[1:]  # drawn[0] is the name under the axis: too many to read, the slowest are named below
    median = timed[len(timed) // 2].value or 0.0
    ym = f.y(median)
    out.append(
        f'<line class="median" x1="{f.left}" x2="{f.left + f.width}" y1="{ym:.1f}" y2="{ym:.1f}" '
        'stroke="#e15759" stroke-dasharray="5,3"/>'
    )
    out.append(
        f'<text x="{f.left + f.width}" y="{ym - 4:.1f}" text-anchor="end" fill="#e15759">median {median:.4g} s</text>'
    )
    slowest = ", ".join(f"{b.worker} {b.value:.3g} s" for b in timed[:_NAMED])
    out.append(f'<text class="slowest" x="{f.left}" y="{f.base + 18}">slowest: {_e(slowest)}</text>')
    missing = len(bars) - len(timed)
    caption = f"{len(timed)} workers, slowest first" + (f"; {missing} with no {kind} time" if missing else "")
    out.append(f'<text x="{f.left}" y="{f.base + 34}" fill="#555">{_e(caption)}</text>')
    return out


def _nice_max(value: float) -> float:
    """The smallest 1-2-5 x 10^k at or above `value` (the plot's axis end)."""
    if value <= 0:
        return 1.0
    exp = math.floor(math.log10(value))
    for m in (1, 2, 2.5, 5, 10):
        top = m * 10**exp
        if top >= value * (1 - 1e-9):
            return float(top)
    return float(10 ** (exp + 1))


def _fmt_tick(value: float) -> str:
    return f"{value:.3g}"
