"""The validation ladder on the local slice: real sshd workers, real jax processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator import sandbox

pytestmark = [pytest.mark.ssh, pytest.mark.e2e]

LADDER = Path(__file__).resolve().parent.parent / "playbooks" / "validation-ladder.yaml"


def play(handle, *args, fleet: Path | None = None, runs: Path, timeout: float = 900):
    pre = ("--fleet", fleet) if fleet else ()
    proc = handle.orch(*pre, *args, "--json", check=False, timeout=timeout, env={"ORCH_RUNS_DIR": str(runs)})
    doc = json.loads(proc.stdout)
    assert (proc.returncode == 0) == doc["ok"], proc.stderr
    return doc


def verdicts(doc: dict) -> dict[str, str]:
    return {r["name"]: r["verdict"] for r in doc["rungs"]}


def test_a_healthy_lane_passes_every_rung_and_leaves_a_ladder_record(slice4, jax_cpu_lane):
    runs = slice4.dir / "runs"
    doc = play(slice4, "play", LADDER, runs=runs)
    assert doc["ok"], doc
    assert set(verdicts(doc).values()) == {"passed"}
    record = json.loads(Path(sorted((runs / "ladders").glob("validation-ladder-*.json"))[-1]).read_text())
    assert record["rungs"][0]["name"] == "reachable" and record["stopped_at"] is None
    smoke = next(r for r in doc["rungs"] if r["name"] == "smoke")
    assert smoke["run_id"] and (runs / smoke["run_id"]).is_dir()
    # the record alone says what the warm-restart rung proved, per process, and where its runs are
    restart = next(r for r in record["rungs"] if r["name"] == "restart")
    assert restart["summary"][0].startswith("reused by every process expected to reuse")
    assert any(line.startswith("process 0 (slice-w0) jax: reused, warm/cold ") for line in restart["summary"])
    assert set(restart["runs"]) == {"cold", "warm"} and all((runs / r).is_dir() for r in restart["runs"].values())


def test_a_lane_intending_tpu_stops_at_the_deep_probe_as_runtime_proof(slice4, jax_libtpu_lane, tpu_fleet):
    doc = play(slice4, "play", LADDER, "--lane", "tpu", fleet=tpu_fleet, runs=slice4.dir / "runs")
    assert not doc["ok"]
    assert doc["stopped_at"] == "runtime" and doc["layer"] == "runtime-proof"
    v = verdicts(doc)
    assert [v[n] for n in ("reachable", "pinned", "deploy", "runtime", "smoke")] == [
        "passed",
        "passed",
        "passed",
        "failed",
        "skipped",
    ]
    rung = next(r for r in doc["rungs"] if r["name"] == "runtime")
    assert "tpu" in rung["evidence"].lower() and rung["remedy"]


def test_a_paused_worker_stops_the_ladder_at_the_first_rung_as_transport(make_sandbox):
    sb = make_sandbox(workers=2)
    sandbox.pause(sb.dir, 1)
    try:
        doc = play(sb, "--connect-timeout", "2", "play", LADDER, runs=sb.dir / "runs", timeout=300)
    finally:
        sandbox.resume(sb.dir, 1)
    assert doc["stopped_at"] == "reachable" and doc["layer"] == "transport"
    assert doc["rungs"][0]["evidence"].startswith("slice-w1: ")
    assert {r["verdict"] for r in doc["rungs"][1:]} == {"skipped"}


def test_from_starts_the_ladder_at_a_named_rung(slice4, jax_cpu_lane):
    doc = play(slice4, "play", LADDER, "--from", "smoke", runs=slice4.dir / "runs")
    v = verdicts(doc)
    assert v["reachable"] == "skipped" and v["smoke"] == "passed"


def test_upgrade_validation_runs_end_to_end_on_two_lanes_with_two_real_bundles(make_sandbox):
    sb = make_sandbox(workers=4, lanes=["operator:2:cpu:jax-cpu", "validation:2:cpu:jax-libtpu"])
    runs = sb.dir / "runs"
    for lane in ("operator", "validation"):
        sb.orch("bundle", "lock", "--lane", lane, timeout=600)
    sb.orch("deploy", "--lane", "operator", timeout=900)  # the operator lane as it runs today
    book = LADDER.parent / "upgrade-validation.yaml"
    proc = sb.orch("play", book, check=False, timeout=1200, env={"ORCH_RUNS_DIR": str(runs)})
    assert proc.returncode == 0, proc.stderr
    assert "ladder passed" in proc.stderr
    compare = [line.split("] ", 1)[1] for line in proc.stderr.splitlines() if line.startswith("[compare] ")]
    # labelled by lane and bundle, the stack differences first
    assert compare[0].startswith("A  operator-") and "[operator/jax-cpu@" in compare[0]
    assert compare[1].startswith("B  validation-") and "[validation/jax-libtpu@" in compare[1]
    assert compare[3].startswith("stack differences")
    assert compare.index("figures:") > compare.index(next(c for c in compare if "libtpu (installed)" in c))
    status = json.loads(sb.orch("bundle", "status", "--json").stdout)
    assert status["mixed"] == {}  # each lane on its own bundle, neither mixed
