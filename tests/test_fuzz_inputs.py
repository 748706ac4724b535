"""Property-based tests of every reader of untrusted input: any input gives a result or an
OrchError with a message, never another exception, and nothing is written outside the
directory it belongs in.

Inputs are mutations of real, valid documents (a fleet file, a lock, a receipt, a gather
listing, a gcloud describe document, a run directory) plus free-form bytes: a mutation
keeps most of the document valid, so the checks behind the first one are reached too.
The example budget is fixed and the search derandomized, so CI runs the same examples
every time, in a few seconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator import receipts
from orchestrator.bundle import read_lock
from orchestrator.errors import OrchError
from orchestrator.fleet import build_fleet
from orchestrator.gcloud import render_snippet, slice_from_text
from orchestrator.receipts.listing import parse_listing
from orchestrator.yamlsrc import decode, loads
from tests.fakes import ScriptedTransport, exits, worker
from tests.test_fleet import GOOD
from tests.test_gather_listing import RUN_DIR, _Record
from tests.test_lock_untrusted import a_lock_doc
from tests.test_receipts import a_receipt, a_run

BUDGET = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
DESCRIBE = Path(__file__).parent / "data" / "gcloud" / "v5p-32-internal-only.json"

# -- strategies ------------------------------------------------------------------------

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(["../../x", "/etc/passwd", ".", "..", "a\nb", "[/bold]", "-rf", "0-200000000", "\x00"])
)
json_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into a JSON document (keys and list indices)."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _set(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return doc


@st.composite
def mutated(draw: st.DrawFn, original: Any, most: int = 3) -> Any:
    """`original` (a JSON document) with up to `most` of its values replaced by anything."""
    doc = json.loads(json.dumps(original))
    for _ in range(draw(st.integers(0, most))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths[1:] if len(paths) > 1 else paths))
        doc = _set(doc, path, draw(json_values))
    return doc


@st.composite
def mutated_text(draw: st.DrawFn, original: str) -> str:
    """`original` with a few slices cut out or replaced by YAML-ish fragments."""
    text = original
    fragments = st.sampled_from(
        ["&a ", "*a", "!foo ", "!!python/name:os.system ", "<<: ", "\x00", "\t", "- ", ": ", "{", "[", "'", '"', "\n"]
    ) | st.text(max_size=6)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 8)))
        text = text[:i] + draw(fragments) + text[j:]
    return text


def _files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


# -- the fleet loader --------------------------------------------------------------------


@BUDGET
@given(text=mutated_text(GOOD))
def test_any_fleet_text_loads_or_is_refused_with_a_config_error(text):
    try:
        build_fleet(loads(text, Path("conf/fleet.yaml")))
    except OrchError as exc:
        assert str(exc).startswith("conf/fleet.yaml"), str(exc)


@BUDGET
@given(data=st.binary(max_size=64) | st.builds(str.encode, st.text(max_size=64)))
def test_any_bytes_decode_and_load_or_are_refused_with_a_config_error(data):
    try:
        build_fleet(loads(decode(data, Path("fleet.yaml")), Path("fleet.yaml")))
    except OrchError as exc:
        assert str(exc).startswith("fleet.yaml")


# -- the lock reader ---------------------------------------------------------------------


@BUDGET
@given(doc=mutated(a_lock_doc()))
def test_any_lock_document_reads_or_is_refused_with_a_config_error(tmp_path, doc):
    path = tmp_path / "small.lock.json"
    path.write_text(json.dumps(doc))
    try:
        lock = read_lock(path)
    except OrchError as exc:
        assert str(path) in str(exc)
    else:
        for w in lock.wheels:
            assert "/" not in w.filename and "\n" not in w.version and not w.filename.startswith(".")


# -- receipts: report, compare, html -----------------------------------------------------


@BUDGET
@given(a=mutated(a_receipt("w0", 0, 2)), b=mutated(a_receipt("w1", 1, 2)), other=mutated(a_receipt("w0", 0, 2)))
def test_any_receipts_give_a_report_a_comparison_and_a_page(a, b, other):
    from orchestrator.cli.receipts_cmd import render_comparison, render_report

    try:
        report = receipts.build_report(a_run({"w0": a, "w1": b}))
        second = receipts.build_report(a_run({"w0": other, "w1": None}))
        json.dumps(report.to_dict(), default=str)
        render_report(report)
        receipts.render_html(report)
        for allow in (False, True):
            comparison = receipts.compare(report, second, allow_cross_lane=allow)
            json.dumps(comparison.to_dict(), default=str)
            render_comparison(comparison)
    except OrchError:
        pass


# -- gather's listing --------------------------------------------------------------------


@BUDGET
@given(
    files=st.dictionaries(
        st.sampled_from(["record.json", "output.log", "../x", "/tmp/abs", ".hidden", "a/b", "..", ""])
        | st.text(max_size=8),
        st.fixed_dictionaries({"size": st.integers(0, 10), "sha256": st.sampled_from([None, "a" * 64])}) | json_values,
        max_size=4,
    ),
    extra=json_values,
)
def test_any_listing_is_parsed_or_refused_naming_the_worker(files, extra):
    for doc in ({"exists": True, "live": False, "files": files}, extra):
        try:
            listing = parse_listing(doc, "w0")
        except OrchError as exc:
            assert exc.host == "w0"
        else:
            assert all("/" not in n and not n.startswith(".") for n in listing.files)


@BUDGET
@given(names=st.lists(st.text(min_size=1, max_size=6) | st.sampled_from(["../../x", "/x", "..", ".p"]), max_size=3))
def test_gather_never_writes_outside_the_workers_directory(tmp_path_factory, names):
    base = tmp_path_factory.mktemp("gather")
    run = base / "run"
    fake = ScriptedTransport([worker(0)])
    data = b"x"
    import hashlib

    sha = hashlib.sha256(data).hexdigest()
    files = {n: {"size": 1, "sha256": sha} for n in names}
    fake.expect_job("w0", "gather", [RUN_DIR], answer={"exists": True, "live": False, "files": files})
    for n in sorted(files):

        def writes(call):
            Path(call.argv[2]).write_bytes(data)
            return exits(0)(call)

        fake.expect_get("w0", f"{RUN_DIR}/{n}", writes)
    result = receipts.gather(_Record(run, ("w0",)), fake)
    written = _files_under(base)
    allowed = {"run", "run/gather.json", "run/w0"} | {f"run/w0/{n}" for n in names}
    assert written <= allowed, written - allowed
    if result.workers["w0"].status == "missing":
        assert "refused" in (result.workers["w0"].error or "")


# -- gcloud import -----------------------------------------------------------------------


@BUDGET
@given(doc=mutated(json.loads(DESCRIBE.read_text())))
def test_any_describe_document_imports_or_is_refused_and_the_snippet_adds_no_keys(doc):
    try:
        imp = slice_from_text(json.dumps(doc), source="tpu.json")
    except OrchError:
        return
    import yaml

    loaded = yaml.safe_load(render_snippet(imp))
    assert set(loaded) == {"slices"} and set(loaded["slices"]) == {imp.name}
    assert set(loaded["slices"][imp.name]) <= {"accelerator_type", "skip_metadata_query", "workers"}


# -- diagnose ----------------------------------------------------------------------------


@BUDGET
@given(
    run_json=json_values,
    receipt=mutated(a_receipt("w0", 0, 1), most=2),
    exit_doc=json_values,
    log=st.text(max_size=80),
)
def test_any_run_directory_is_diagnosed_or_refused_with_an_orch_error(
    tmp_path_factory, run_json, receipt, exit_doc, log
):
    from orchestrator.diagnose_run import diagnose_run

    run = tmp_path_factory.mktemp("run")
    (run / "run.json").write_text(json.dumps(run_json))
    (run / "w0").mkdir()
    (run / "w0" / "record.json").write_text(json.dumps(receipt))
    (run / "w0" / "exit.json").write_text(json.dumps(exit_doc))
    (run / "w0" / "output.log").write_text(log)
    before = _files_under(run)
    try:
        json.dumps(diagnose_run(run).to_dict())
    except OrchError:
        pass
    assert _files_under(run) == before


# -- probe: a worker's probe document ------------------------------------------------------

PROBE_DOC = {
    "job": "probe",
    "ok": True,
    "platform": "cpu",
    "bundle_id": "5748b3c35b095645",
    "checks": [
        {"name": "host", "status": "ok", "summary": "python 3.11", "evidence": ["x"], "elapsed": 0.1},
        {
            "name": "runtime",
            "status": "fail",
            "summary": "no TPU",
            "evidence": ["RuntimeError: Unable to initialize backend 'tpu'"],
            "headline": "the runtime did not come up",
            "data": {"answered": {"platform": "cpu", "device_kind": "cpu", "device_count": 1}},
        },
    ],
}


@settings(BUDGET, max_examples=50)  # each example renders a rich table
@given(doc=mutated(PROBE_DOC))
def test_any_probe_document_gives_a_row_and_a_table(doc, monkeypatch):
    from orchestrator import probe
    from orchestrator.cli.probe_cmd import render

    monkeypatch.setenv("COLUMNS", "200")
    w = worker(0, lane=None)
    fake = ScriptedTransport([w])
    fake.expect_job("w0", "probe", answer=doc if isinstance(doc, dict) else {"checks": doc})
    request = probe.ProbeRequest(worker=w, lane=None, doc={"schema_version": 1, "root": "/var/lib/orch"})
    report = probe.sweep(probe.ProbePlan(requests=(request,), deep=False, timeout=30.0), fake)
    json.dumps(report.to_dict(), default=str)
    render(report)
