"""The HTML report at 64 workers: grouped by outcome, tables summarised, plots sorted and legible.

`synthetic_report(n)` is also what docs/cli-reference.md's screenshot check renders
(`python tests/test_receipts_html_scale.py OUT.html`).
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from test_receipts import a_receipt, a_run

from orchestrator import receipts
from orchestrator.receipts.html import MANY

SVG = {"s": "http://www.w3.org/2000/svg"}


def synthetic_report(n: int = 64) -> receipts.Report:
    """n workers of one run: two exit 3, one never wrote a receipt, one much slower, the rest spread a little."""
    docs: dict[str, dict | None] = {}
    for i in range(n):
        w = f"slice-w{i}"
        if i == n - 1:
            docs[w] = None
            continue
        compile_s = 0.4 + (i * 37 % 17) / 20 + (2.5 if i == 8 else 0.0)
        steps = [0.010 + (i * 13 % 7) / 1000 + k / 1000 for k in range(3)]
        changes = {
            "cache__evidence__jax__compile_time_sec": compile_s,
            "training__timings__step__samples": steps,
            "training__timings__step__min": min(steps),
            "training__timings__step__max": max(steps),
        }
        if i in (17, 42):
            changes["exit__code"] = 3
        docs[w] = a_receipt(w, i, num_processes=n, **changes)
    return receipts.build_report(a_run(docs))


def test_the_report_of_64_workers_groups_them_by_outcome_and_folds_the_successes():
    page = receipts.render_html(synthetic_report(64))
    outcome = page[page.index("<h2>Outcome</h2>") : page.index("<h2>Workers by outcome</h2>")]
    assert re.search(r"exit 3</td><td class=num>2</td><td class=\"names\">slice-w\[17,42\]", outcome), outcome
    assert re.search(r"no receipt</td><td class=num>1</td><td class=\"names\">slice-w63<", outcome), outcome
    assert re.search(r"exit 0</td><td class=num>61</td>", outcome), outcome
    assert outcome.index("exit 3") < outcome.index("exit 0")  # failures first
    assert page.count("<details>") == 1 and "<summary>exit 0: 61 workers (every row)</summary>" in page
    assert all(f"<td>slice-w{i}</td>" in page for i in range(64))  # every row is still there


def test_the_report_of_64_workers_summarises_the_tables_that_had_a_column_per_worker():
    page = receipts.render_html(synthetic_report(64))
    metrics = page[page.index("<h2>Metrics") :]
    header = metrics[: metrics.index("</tr>")]
    assert header.count("<th>") == 8 and "slice-w" not in header
    assert "<td>loss</td><td>global</td><td>psum</td><td class=num>63</td>" in metrics
    versions = page[page.index("<h2>Versions") : page.index("<h2>Metrics")]
    assert versions.count("<tr>") == 2 and "63: slice-w[0-62]" in versions  # one row: everyone agrees


def test_the_plots_of_64_workers_sort_their_bars_name_the_slowest_and_mark_the_median():
    svg = ET.fromstring(receipts.plot_svg(synthetic_report(64).rows))
    panels = {g.get("data-kind"): g for g in svg.findall("s:g", SVG)}
    bars = panels["compile"].findall("s:rect", SVG)
    values = [float(b.get("data-value")) for b in bars]
    assert len(bars) == 63 and values == sorted(values, reverse=True)
    assert bars[0].get("data-worker") == "slice-w8"
    assert not [t for t in panels["compile"].findall("s:text", SVG) if (t.text or "").startswith("slice-w")]
    slowest = panels["compile"].find("s:text[@class='slowest']", SVG).text
    named = ", ".join(f"{b.get('data-worker')} {float(b.get('data-value')):.3g} s" for b in bars[:5])
    assert slowest == f"slowest: {named}"
    assert panels["step"].find("s:line[@class='median']", SVG) is not None
    text = ET.tostring(panels["compile"], encoding="unicode")
    assert "63 workers, slowest first; 1 with no compile time" in text


def test_a_report_of_a_few_workers_keeps_one_table_and_a_bar_label_each():
    rep = synthetic_report(MANY)
    page = receipts.render_html(rep)
    assert "<details>" not in page and "<h2>Workers</h2>" in page
    svg = ET.fromstring(receipts.plot_svg(rep.rows))
    compile_panel = next(g for g in svg.findall("s:g", SVG) if g.get("data-kind") == "compile")
    named = [t.text for t in compile_panel.findall("s:text", SVG) if (t.text or "").startswith("slice-w")]
    assert len(named) == MANY


if __name__ == "__main__":  # write the 64-worker page for a look in a browser
    Path(sys.argv[1]).write_text(receipts.render_html(synthetic_report(int(sys.argv[2]) if len(sys.argv) > 2 else 64)))
