"""Receipts without a slice: the schema, the training-code API, the launcher's receipt,
the report's flags, compare's refusal, gather's fetch plan, and the HTML plot."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from orchestrator import receipts
from orchestrator.cli import main
from orchestrator.fleet import load_fleet
from orchestrator.launch import plan_launch
from orchestrator.receipts.listing import ListedFile
from orchestrator.runs import RunRecord

ROOT = Path(__file__).resolve().parent.parent


def jsonschema_errors(doc) -> list[str]:
    validator = jsonschema.Draft202012Validator(receipts.load_schema())
    return sorted(f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc))


def a_receipt(worker: str = "w0", process_id: int = 0, num_processes: int = 4, **changes) -> dict:
    """A complete, valid receipt as the launcher writes it (JAX on CPU, 2 devices per process)."""
    doc = {
        "schema_version": 1,
        "kind": "launch-record",
        "run_id": "r1",
        "name": None,
        "lane": "cpu",
        "bundle": "jax-cpu",
        "bundle_id": "5748b3c35b095645",
        "bundle_env": "/var/lib/orch/envs/5748b3c35b095645",
        "platform": "cpu",
        "worker": worker,
        "worker_index": process_id,
        "process_id": process_id,
        "num_processes": num_processes,
        "coordinator": "10.0.0.1:20000",
        "hostname": worker,
        "pid": 100,
        "python": "3.11.2",
        "python_executable": "/var/lib/orch/lanes/cpu/active/bin/python",
        "target": {"kind": "script", "path": "train.py", "module": None, "args": []},
        "phase": "exited",
        "launched_at": 1000.0,
        "ready_at": 1001.0,
        "release_at": 1002.0,
        "released_at": 1002.0,
        "started_at": 1002.0,
        "finished_at": 1010.0,
        "steps": [
            {"name": n, "status": "done", "started": 1000.0 + i, "ended": 1000.5 + i, "detail": ""}
            for i, n in enumerate(
                ["policy", "import jax", "cache-init", "wait-release", "distributed-init", "user-code"]
            )
        ],
        "policy": {
            "profile": "cpu",
            "env": {"JAX_PLATFORMS": "cpu"},
            "forbid": ["XLA_USE_BF16"],
            "checked_absent": ["XLA_USE_BF16", "XLA_USE_SPMD"],
        },
        "versions": {
            "python": "3.11.2",
            "torch": None,
            "torch_xla": None,
            "jax": "0.10.2",
            "jaxlib": "0.10.2",
            "libtpu": None,
            "torch_tpu": None,
        },
        "versions_reported": {"python": "3.11.2", "jax": "0.10.2", "jaxlib": "0.10.2", "jax_backend": "cpu"},
        "devices": {
            "jax": {"initialized": True, "platform": "cpu", "device_kind": "cpu", "count": 8, "local_count": 2},
            "summary": {"frontend": "jax", "kind": "cpu", "device_kind": "cpu", "count": 8, "local_count": 2},
        },
        "capabilities": {"jax.experimental.pallas": {"present": True, "how": "module"}},
        "training": {
            "backends": {"main": {"name": "jax_cpu_xla", "frontend": "jax", "detail": None, "recorded_at": 1003.0}},
            "metrics": {
                "loss": {
                    "value": 0.125,
                    "scope": "global",
                    "reduced_by": "psum",
                    "over": num_processes,
                    "step": 7,
                    "unit": None,
                    "detail": None,
                    "count": 8,
                    "recorded_at": 1009.0,
                    "flag": None,
                }
            },
            "timings": {
                "compile": {"count": 1, "total": 0.5, "min": 0.5, "max": 0.5, "last": 0.5, "samples": [0.5]},
                "step": {
                    "count": 3,
                    "total": 0.06,
                    "min": 0.01,
                    "max": 0.03,
                    "last": 0.02,
                    "samples": [0.01, 0.03, 0.02],
                },
            },
            "values": {},
            "notes": [],
        },
        "cache": {
            "policy": "per-host",
            "role": "writer",
            "roots": {"jax": "/var/lib/orch/cache/cpu/x/jax", "torch_xla": None},
            "lease": None,
            "evidence": {
                "jax": {
                    "cache_hits": 0,
                    "cache_misses": 4,
                    "compile_time_saved_sec": 0.0,
                    "compile_time_sec": 0.25,
                    "entries_before": 0,
                    "entries_after": 4,
                }
            },
        },
        "notes": [],
        "exit": {"code": 0, "signal": None, "ended_at": 1010.0, "source": "launcher"},
    }
    for path, value in changes.items():
        node = doc
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    return doc


def a_run(
    receipts_by_worker: dict, *, lane="cpu", bundle="jax-cpu", platform="cpu", run_id="r1", sources=None
) -> receipts.RunReceipts:
    workers = tuple(receipts_by_worker)
    return receipts.RunReceipts(
        run_id=run_id,
        lane=lane,
        bundle=bundle,
        platform=platform,
        target=("train.py",),
        state="succeeded",
        start_skew=0.004,
        workers=workers,
        process_ids={w: i for i, w in enumerate(workers)},
        receipts=receipts_by_worker,
        sources=sources or {w: ("gathered" if d else None) for w, d in receipts_by_worker.items()},
    )


def four(**per_worker) -> dict:
    """Receipts of workers w0..w3, with per-worker changes; `wN=None` leaves that worker without one."""
    out = {}
    for i in range(4):
        w = f"w{i}"
        out[w] = None if (w in per_worker and per_worker[w] is None) else a_receipt(w, i, **per_worker.get(w, {}))
    return out


def kinds(report) -> list[str]:
    return [f.kind for f in report.flags]


# ---------------------------------------------------------------------------
# The schema


def test_the_receipt_schema_is_valid_json_schema_within_the_keywords_the_builtin_validator_knows():
    schema = receipts.load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    used = set()

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                used.add(k)
                if k in ("properties", "$defs"):
                    for sub in v.values():
                        walk(sub)
                elif k not in ("enum", "required"):
                    walk(v)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(schema)
    assert used <= receipts.SUPPORTED_KEYWORDS, used - receipts.SUPPORTED_KEYWORDS


def test_a_complete_receipt_is_valid_for_jsonschema_and_the_builtin_validator():
    doc = a_receipt()
    assert jsonschema_errors(doc) == []
    assert receipts.validate(doc) == []


@pytest.mark.parametrize(
    "change",
    [
        {"process_id": -1},
        {"exit__code": "0"},
        {"training__metrics__loss__scope": "world"},
        {"devices__summary__count": 2.5},
        {"versions__jax": 10},
        {"steps": [{"name": "policy"}]},
        {"cache__evidence__jax__cache_hits": "many"},
        {"phase": "done"},
        {"capabilities": {"x": {"how": "module"}}},
    ],
)
def test_the_builtin_validator_and_jsonschema_agree_on_broken_receipts(change):
    doc = a_receipt(**change)
    assert jsonschema_errors(doc), change
    assert receipts.validate(doc), change


def test_a_receipt_without_required_keys_names_each_missing_key():
    doc = a_receipt()
    del doc["run_id"]
    del doc["exit"]
    assert receipts.validate(doc) == ["$: missing required key 'run_id'", "$: missing required key 'exit'"]


# ---------------------------------------------------------------------------
# The training-code API


@pytest.fixture
def api():
    from hostside import orch_receipt

    return importlib.reload(orch_receipt)  # a fresh, unbound module state for every test


def test_the_api_works_unbound_and_flags_a_global_metric_without_a_reduction(api, capsys):
    assert not api.active()
    api.record_backend("xla_flash_pallas", component="attention", frontend="torch_xla")
    api.record_metric("loss", 0.5, scope="global", reduced_by="mesh_reduce", over=4, step=3)
    api.record_metric("acc", 0.9, scope="global")
    api.record_metric("acc", 0.8, scope="global")
    api.record_metric("grad_norm", 1.5, scope="local")
    got = api.recorded()
    assert got["backends"]["attention"]["name"] == "xla_flash_pallas"
    assert got["metrics"]["loss"]["flag"] is None and got["metrics"]["loss"]["over"] == 4
    assert got["metrics"]["acc"]["flag"] == api.UNREDUCED_FLAG and got["metrics"]["acc"]["count"] == 2
    assert got["metrics"]["grad_norm"]["flag"] is None
    assert capsys.readouterr().err.count("metric 'acc' recorded as global without a reduction") == 1


def test_the_api_refuses_nonsense_and_keeps_nonfinite_values_as_null(api):
    with pytest.raises(ValueError, match="scope must be one of"):
        api.record_metric("loss", 1.0, scope="world")
    with pytest.raises(ValueError, match="expected a number"):
        api.record_metric("loss", "high", scope="local")
    with pytest.raises(ValueError, match="non-empty string"):
        api.record_backend("")
    with pytest.raises(TypeError):
        api.record("blob", object())
    api.record_metric("loss", float("nan"), scope="local")
    assert api.recorded()["metrics"]["loss"]["value"] is None
    assert api.recorded()["metrics"]["loss"]["nonfinite"] == "nan"


def test_timings_keep_count_total_extremes_and_a_bounded_window_of_samples(api, monkeypatch):
    monkeypatch.setattr(api, "SAMPLES_KEPT", 3)
    for s in (0.5, 0.1, 0.2, 0.3):
        api.record_time("step", s)
    t = api.recorded()["timings"]["step"]
    assert (t["count"], round(t["total"], 6), t["min"], t["max"], t["last"]) == (4, 1.1, 0.1, 0.5, 0.3)
    assert t["samples"] == [0.1, 0.2, 0.3]


def test_a_bound_api_writes_through_the_launchers_record(api, tmp_path):
    from hostside import launcher

    doc = {
        "run_id": "r",
        "lane": "l",
        "worker": "w",
        "index": 0,
        "process_id": 0,
        "num_processes": 1,
        "target": {"kind": "script", "path": "x.py", "module": None, "args": []},
        "run_dir": str(tmp_path),
    }
    rec = launcher.Record(str(tmp_path / "record.json"), doc)
    api._bind(rec)
    assert api.active()
    api.record_metric("loss", 2.0, scope="local")
    on_disk = json.loads((tmp_path / "record.json").read_text())
    assert on_disk["training"]["metrics"]["loss"]["value"] == 2.0


def test_version_gated_capabilities_are_recorded_present_or_not_and_never_raise(monkeypatch):
    import types

    from hostside import receipt_facts

    fake = types.ModuleType("torch_xla")  # a build without torch_xla.experimental, with the memory binding
    fake._XLAC = types.SimpleNamespace(_xla_runtime_memory_info=lambda *a: {})
    runtime = types.ModuleType("torch_xla.runtime")
    monkeypatch.setitem(sys.modules, "torch_xla", fake)
    monkeypatch.setitem(sys.modules, "torch_xla._XLAC", fake._XLAC)
    monkeypatch.setitem(sys.modules, "torch_xla.runtime", runtime)
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    caps = receipt_facts.capabilities()
    assert caps["torch_xla.experimental.scan_layers"]["present"] is False
    assert "error" in caps["torch_xla.experimental.scan_layers"]
    assert caps["torch_xla._XLAC._xla_runtime_memory_info"] == {"present": True, "how": "attribute"}
    assert caps["torch_xla.runtime.initialize_cache"] == {"present": False, "how": "attribute"}
    assert not any(name.startswith("jax") for name in caps)  # jax not imported: not checked, not imported
    assert "jax" not in sys.modules


def test_the_bundle_id_is_the_environment_directory_under_envs(tmp_path):
    from hostside import receipt_facts

    env = tmp_path / "root" / "envs" / "5748b3c35b095645"
    env.mkdir(parents=True)
    (tmp_path / "active").symlink_to(env)
    assert receipt_facts.bundle_id(str(tmp_path / "active")) == "5748b3c35b095645"
    assert receipt_facts.bundle_id(str(tmp_path)) is None


# ---------------------------------------------------------------------------
# The launcher's receipt, from a real launcher process (no frontend, no slice)


USER_SCRIPT = """
import json, sys
import orch_receipt
hostside_on_path = [p for p in sys.path if p.rstrip('/') == {root!r}]
orch_receipt.record_backend("pure_python")
orch_receipt.record_metric("local_mean", 0.5, scope="global")
orch_receipt.record_metric("loss", 0.25, scope="global", reduced_by="all_reduce", over=1)
orch_receipt.record_time("step", 0.01)
orch_receipt.record("hostside_on_path", hostside_on_path)
print("active", orch_receipt.active())
if __name__ == "__main__":   # a spawned child (xmp.spawn, multiprocessing) imports it too, unbound
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        print("child", pool.apply(_child_active))
"""

CHILD = """
def _child_active():
    import orch_receipt
    return orch_receipt.active()
"""


def test_the_launcher_writes_a_schema_valid_receipt_with_what_the_training_code_recorded(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    script = tmp_path / "train.py"
    script.write_text(CHILD + USER_SCRIPT.format(root=str(ROOT)))
    (run_dir / "launch.json").write_text(
        json.dumps(
            {
                "schema_version": 1,
                "run_id": "r1",
                "name": None,
                "lane": "cpu",
                "bundle": "none",
                "platform": "cpu",
                "worker": "w0",
                "index": 0,
                "process_id": 0,
                "num_processes": 1,
                "coordinator": None,
                "run_dir": str(run_dir),
                "env": {"ORCH_RUN_ID": "r1"},
                "forbid": [],
                "frontends": [],
                "contract": [],
                "target": {"kind": "script", "path": str(script), "module": None, "args": []},
                "distributions": [],
            }
        )
    )
    (run_dir / "release").write_text(json.dumps({"release_at": 0}))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ORCH_HOSTSIDE": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "hostside.launcher", str(run_dir / "launch.json")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "active True" in proc.stdout and "child False" in proc.stdout
    doc = json.loads((run_dir / "record.json").read_text())
    assert jsonschema_errors(doc) == []
    assert receipts.validate(doc) == []
    assert doc["training"]["values"]["hostside_on_path"] == []  # importable, yet hostside is not on sys.path
    assert doc["training"]["backends"]["main"]["name"] == "pure_python"
    assert (
        doc["training"]["metrics"]["local_mean"]["flag"] == "recorded as global without a reduction: "
        "this may be one process's local value"
    )
    assert set(doc["versions"]) >= {"python", "torch", "torch_xla", "jax", "jaxlib", "libtpu", "torch_tpu"}
    assert doc["exit"]["code"] == 0 and doc["phase"] == "exited" and doc["finished_at"]
    assert [s["name"] for s in doc["steps"]][-1] == "user-code"
    assert not [p for p in os.listdir(run_dir) if ".tmp-" in p]


# ---------------------------------------------------------------------------
# The report


def test_a_consistent_run_has_no_warnings_and_one_row_per_worker():
    rep = receipts.build_report(a_run(four()))
    assert rep.warnings == []
    assert [r.worker for r in rep.rows] == ["w0", "w1", "w2", "w3"]
    row = rep.rows[0]
    assert (row.device_text(), row.backend_text(), row.exit_text()) == ("cpu x8 (2 local)", "jax_cpu_xla", "exit 0")
    assert row.compile_s == 0.25 and row.compile_source == "cache evidence (jax)"  # the runtime's own figure
    assert row.step_s == 0.02 and (row.step_min, row.step_max) == (0.01, 0.03)
    assert row.cache_text() == "per-host/writer jax 0h/4m"
    assert rep.label == "cpu/jax-cpu@5748b3c3"


def test_compile_time_comes_from_the_training_code_when_there_is_no_cache_evidence():
    doc = a_receipt(cache=None)
    row = receipts.build_report(a_run({"w0": doc})).rows[0]
    assert (row.compile_s, row.compile_source) == (0.5, "training code")


def test_a_global_metric_recorded_without_a_reduction_is_flagged_naming_the_workers():
    unreduced = {"training__metrics__loss__reduced_by": None}
    rep = receipts.build_report(a_run(four(w0=unreduced, w1=unreduced, w2=unreduced, w3=unreduced)))
    flag = next(f for f in rep.flags if f.kind == "unreduced-metric")
    assert flag.message.startswith(
        "metric 'loss' is recorded as global but was not reduced across processes on all 4 workers"
    )
    assert flag.workers == ("w0", "w1", "w2", "w3")


def test_a_local_metric_and_a_one_process_run_are_not_flagged_as_unreduced():
    local = {"training__metrics__loss__scope": "local", "training__metrics__loss__reduced_by": None}
    assert "unreduced-metric" not in kinds(receipts.build_report(a_run(four(w0=local, w1=local, w2=local, w3=local))))
    single = a_receipt(num_processes=1, training__metrics__loss__reduced_by=None)
    assert "unreduced-metric" not in kinds(receipts.build_report(a_run({"w0": single})))


def test_a_global_metric_whose_value_differs_across_workers_is_flagged():
    rep = receipts.build_report(a_run(four(w2={"training__metrics__loss__value": 0.5})))
    flag = next(f for f in rep.flags if f.kind == "global-metric-differs")
    assert "0.125 on w0, w1, w3; 0.5 on w2" in flag.message


def test_a_reduction_over_fewer_processes_than_the_run_has_is_flagged():
    rep = receipts.build_report(a_run(four(w0={"training__metrics__loss__over": 2})))
    assert next(f for f in rep.flags if f.kind == "partial-reduction").workers == ("w0",)


def test_versions_and_bundles_that_differ_across_workers_are_flagged_with_each_group():
    rep = receipts.build_report(a_run(four(w3={"versions__jax": "0.10.1", "bundle_id": "ffff0000ffff0000"})))
    messages = [f.message for f in rep.flags]
    assert "jax (installed) differs across workers: 0.10.2 on w0, w1, w2; 0.10.1 on w3" in messages
    bundle = next(f for f in rep.flags if f.kind == "bundle-differs")
    assert "jax-cpu@5748b3c35b09 on w0, w1, w2; jax-cpu@ffff0000ffff on w3" in bundle.message


def test_cpu_fallback_is_flagged_on_a_tpu_lane_only():
    assert "cpu-fallback" not in kinds(receipts.build_report(a_run(four())))
    rep = receipts.build_report(a_run(four(), lane="tpu", platform="tpu"))
    flag = next(f for f in rep.flags if f.kind == "cpu-fallback")
    assert "lane tpu intends a TPU, but the device that answered was CPU on all 4 workers" in flag.message


def test_backends_that_differ_across_workers_are_flagged():
    fallback = {"training__backends__main__name": "pure_pytorch_fallback"}
    rep = receipts.build_report(a_run(four(w1=fallback)))
    flag = next(f for f in rep.flags if f.kind == "backends-differ")
    assert flag.message == "backend differs across workers: jax_cpu_xla on w0, w2, w3; pure_pytorch_fallback on w1"


def test_a_missing_receipt_is_named_and_the_rest_is_still_reported():
    rep = receipts.build_report(a_run(four(w2=None)))
    assert rep.flags[0].kind == "missing-receipt" and rep.flags[0].workers == ("w2",)
    assert rep.rows[2].exit_text() == "no receipt" and rep.rows[1].has_receipt


def test_out_of_order_start_up_and_failed_processes_are_flagged():
    steps = a_receipt()["steps"]
    swapped = [steps[0], steps[1], steps[5], steps[4]]
    rep = receipts.build_report(a_run(four(w1={"steps": swapped}, w3={"exit__code": 3})))
    order = next(f for f in rep.flags if f.kind == "startup-order")
    assert order.message == "w1: start-up steps ran out of order: policy -> import jax -> user-code -> distributed-init"
    assert next(f for f in rep.flags if f.kind == "failed-process").workers == ("w3",)


def test_processes_failing_alike_are_one_entry_with_their_workers_compacted():
    rep = receipts.build_report(a_run(four(w0={"exit__code": 2}, w1={"exit__code": 2}, w2={"exit__code": 2})))
    flag = next(f for f in rep.flags if f.kind == "failed-process")
    assert flag.workers == ("w0", "w1", "w2")
    assert flag.message.startswith("processes that did not exit 0: w[0-2] (exit 2")
    assert flag.message.count("(exit") == 1


# ---------------------------------------------------------------------------
# Compare


def test_compare_refuses_runs_from_different_lanes_or_bundles():
    a = receipts.build_report(a_run(four(), run_id="a"))
    other = {"bundle": "torch-cpu", "bundle_id": "9f8e7d6c5b4a3210", "lane": "torch"}
    b = receipts.build_report(
        a_run(
            {w: a_receipt(w, i, **other) for i, w in enumerate(["w0", "w1", "w2", "w3"])},
            run_id="b",
            lane="torch",
            bundle="torch-cpu",
        )
    )
    c = receipts.compare(a, b)
    assert c.refused == (
        "runs a and b come from different lanes and bundles (lanes cpu vs torch; bundles "
        "jax-cpu@5748b3c3 vs torch-cpu@9f8e7d6c): results from different lanes or bundles are "
        "not comparable by default"
    )
    assert c.figures == ()
    redeployed = receipts.build_report(
        a_run(four(**{w: {"bundle_id": "1111222233334444"} for w in ("w0", "w1", "w2", "w3")}), run_id="c")
    )
    assert "different bundles" in receipts.compare(a, redeployed).refused


def test_compare_of_a_run_without_receipts_asks_for_a_gather_instead_of_calling_the_bundles_different():
    a = receipts.build_report(a_run(four(), run_id="a"))
    b = receipts.build_report(a_run(four(w0=None, w1=None, w2=None, w3=None), run_id="b"))
    for allow in (False, True):
        c = receipts.compare(a, b, allow_cross_lane=allow)
        assert c.refused == "run b has no receipts here, so its bundle is unknown: gather first (orch gather b)"
    # gathered receipts from a Python outside a bundle environment: compared (and flagged), not "gather first"
    c = receipts.build_report(a_run(four(**{w: {"bundle_id": None} for w in ("w0", "w1", "w2", "w3")}), run_id="c"))
    assert "gather first" not in (receipts.compare(a, c).refused or "")


def test_compare_across_lanes_when_allowed_leads_with_the_stack_differences_and_labels_every_figure():
    a = receipts.build_report(a_run(four(), run_id="a"))
    torch_side = {
        "bundle": "torch-cpu",
        "bundle_id": "9f8e7d6c5b4a3210",
        "versions__jax": None,
        "versions__jaxlib": None,
        "versions__torch": "2.13.0+cpu",
        "training__backends__main__name": "torch_gloo_cpu",
    }
    b = receipts.build_report(
        a_run(
            {w: a_receipt(w, i, **torch_side) for i, w in enumerate(["w0", "w1"])},
            run_id="b",
            lane="torch",
            bundle="torch-cpu",
        )
    )
    c = receipts.compare(a, b, allow_cross_lane=True)
    assert c.refused is None and c.cross_lane
    assert [d.item for d in c.differences][:5] == [
        "lane",
        "bundle",
        "torch (installed)",
        "jax (installed)",
        "jaxlib (installed)",
    ]
    assert c.differences[2].a == "none" and c.differences[2].b == "2.13.0+cpu"
    doc = c.to_dict()
    assert doc["stack_differences"][0] == {"item": "lane", "a": "cpu", "b": "torch"}
    for fig in doc["figures"]:
        assert fig["a"]["label"] == "cpu/jax-cpu@5748b3c3" and fig["b"]["label"] == "torch/torch-cpu@9f8e7d6c"
    by_name = {f["name"]: f for f in doc["figures"]}
    assert by_name["processes"]["a"]["value"] == 4 and by_name["processes"]["b"]["value"] == 2
    assert by_name["metric loss"]["a"]["value"] == 0.125


def test_two_runs_of_one_lane_and_bundle_compare_without_stack_differences():
    a = receipts.build_report(a_run(four(), run_id="a"))
    b = receipts.build_report(a_run(four(w0={"training__metrics__loss__value": 0.125}), run_id="b"))
    c = receipts.compare(a, b)
    assert c.refused is None and not c.cross_lane and c.differences == ()


# ---------------------------------------------------------------------------
# Gather's plan


def test_gather_fetches_only_files_it_does_not_hold_already():
    aa, bb, cc = ("a" * 64, "b" * 64, "c" * 64)
    listing = {
        "record.json": ListedFile(size=10, sha256=aa),
        "output.log": ListedFile(size=99, sha256=bb),
        "exit.json": ListedFile(size=5, sha256=cc),
        "huge.bin": ListedFile(size=1 << 40, sha256=None, too_large=True),
    }
    local = {"record.json": aa, "output.log": "old", "exit.json": None, "huge.bin": None}
    assert receipts.fetch_plan(listing, local) == (["exit.json", "output.log"], ["record.json"], ["huge.bin"])


# ---------------------------------------------------------------------------
# HTML and its plot


def test_the_plot_has_one_bar_per_worker_in_each_panel_scaled_to_the_values():
    rows = receipts.build_report(
        a_run(four(w1={"cache__evidence__jax__compile_time_sec": 1.0}, w3={"training__timings__step__samples": []}))
    ).rows
    svg = ET.fromstring(receipts.plot_svg(rows))
    ns = {"s": "http://www.w3.org/2000/svg"}
    panels = {g.get("data-kind"): g for g in svg.findall("s:g", ns)}
    compile_bars = {b.get("data-worker"): float(b.get("height")) for b in panels["compile"].findall("s:rect", ns)}
    assert list(compile_bars) == ["w0", "w1", "w2", "w3"]
    assert compile_bars["w1"] == pytest.approx(4 * compile_bars["w0"], rel=0.01)
    step_bars = [b.get("data-worker") for b in panels["step"].findall("s:rect", ns)]
    assert step_bars == ["w0", "w1", "w2"]  # w3 recorded no step time: shown as n/a, not as zero
    assert "n/a" in ET.tostring(panels["step"], encoding="unicode")
    whiskers = panels["step"].findall("s:line[@class='whisker']", ns)
    assert len(whiskers) == 3


def test_the_plot_says_so_when_nothing_was_timed():
    rows = receipts.build_report(a_run({"w0": a_receipt(cache=None, training=None)})).rows
    svg = receipts.plot_svg(rows)
    ET.fromstring(svg)
    assert "no compile times recorded" in svg and "no step times recorded" in svg


def test_the_html_report_is_self_contained_and_shows_the_flags():
    rep = receipts.build_report(a_run(four(w0={"training__metrics__loss__reduced_by": None})))
    page = receipts.render_html(rep)
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    assert "<script" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "unreduced-metric" in page and "NOT REDUCED" in page


# ---------------------------------------------------------------------------
# The CLI on a recorded run (no workers contacted)


def record_run(root: Path, lane: str, run_id: str, changes: dict | None = None) -> RunRecord:
    fleet = load_fleet(ROOT / "fleet.yaml")
    plan = plan_launch(fleet, lane, ["train.py"], run_id=run_id)
    record = RunRecord.create(plan, root=root)
    record.update(state="succeeded", outcome={"start_skew": 0.003})
    for p in plan.processes:
        doc = a_receipt(
            p.worker,
            p.process_id,
            plan.num_processes,
            lane=lane,
            bundle=plan.bundle,
            bundle_id=f"{plan.bundle}-id",
            platform="tpu",
            **(changes or {}),
        )
        (record.dir / p.worker).mkdir()
        (record.dir / p.worker / "record.json").write_text(json.dumps(doc))
    return record


def test_report_and_compare_on_the_command_line(tmp_path):
    record_run(tmp_path, "operator", "op-1")
    record_run(tmp_path, "validation", "val-1", {"versions__jax": "0.9.0"})
    runner = CliRunner()
    env = {"ORCH_RUNS_DIR": str(tmp_path)}
    rep = runner.invoke(main, ["report", "op-1"], env=env)
    assert rep.exit_code == 0, rep.output
    assert "run op-1: lane operator, bundle torch-2.9@torch-2." in rep.output
    assert (
        "[cpu-fallback] lane operator intends a TPU, but the device that answered was CPU on all 6 workers"
        in rep.output
    )
    as_json = json.loads(runner.invoke(main, ["report", "op-1", "--json"], env=env).output)
    assert len(as_json["workers"]) == 6 and as_json["flags"][0]["kind"] == "cpu-fallback"
    page = tmp_path / "op.html"
    assert runner.invoke(main, ["report", "op-1", "--html", str(page)], env=env).exit_code == 0
    assert "<svg" in page.read_text()

    refused = runner.invoke(main, ["compare", "op-1", "val-1"], env=env)
    assert refused.exit_code == 1
    assert "refusing to compare: runs op-1 and val-1 come from different lanes and bundles" in refused.output
    allowed = runner.invoke(main, ["compare", "op-1", "val-1", "--allow-cross-lane"], env=env)
    assert allowed.exit_code == 0, allowed.output
    body = allowed.output.split("stack differences", 1)
    assert "figures:" not in body[0] and body[1].index("lane") < body[1].index("figures:")
    assert "jax (installed)" in body[1]
    assert "    A [operator/torch-2.9@torch-2.]" in allowed.output
    assert "    B [validation/torch-2.11-rc@torch-2.]" in allowed.output


@pytest.mark.parametrize(
    "changes",
    [
        {"training": []},
        {"exit": [1]},
        {"steps": [{"name": ["user-code"], "started": "x", "ended": None}]},
        {"training__timings__compile__total": "0.5"},
        {"training__metrics__loss__scope": {"global": True}},
        {"training__metrics__loss__over": "all"},
        {"devices__summary": {"kind": 3, "count": "8"}},
        {"versions": {"jax": ["0.10.2"]}, "bundle_id": 7},
        {"started_at": 10**400, "exit__ended_at": float("inf")},  # numbers, but no time: not read
        {"cache": {"policy": ["x"], "evidence": {"jax": {"compile_time_sec": "1"}}}},
    ],
)
def test_a_receipt_of_the_wrong_types_is_flagged_and_report_compare_and_html_still_work(changes):
    from orchestrator.cli.receipts_cmd import render_comparison, render_report

    bad = a_receipt("w1", 1, 2, **changes)
    report = receipts.build_report(a_run({"w0": a_receipt("w0", 0, 2), "w1": bad}))
    numbers_only = "started_at" in changes
    assert numbers_only or any(f.kind == "invalid-receipt" and f.workers == ("w1",) for f in report.flags)
    render_report(report)
    receipts.render_html(report)
    render_comparison(receipts.compare(report, report))
    json.dumps(report.to_dict())
