"""Multislice lanes without a worker: the fleet model, the env contract, the dry-run plan, the reach check.

The golden file pins the whole `--dry-run` output of a 2-slice x 2-worker lane;
regenerate it with ORCH_UPDATE_GOLDEN=1 after an intended change and review the diff.
"""

from __future__ import annotations

import json
import os
import socket
import textwrap
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from hostside import launch_reach
from orchestrator.cli import main
from orchestrator.errors import ConfigError
from orchestrator.fleet import load_fleet
from orchestrator.launch import plan_launch
from orchestrator.launch.preflight import Reply, reach_verdict
from orchestrator.policy import MEGASCALE_VARS, TOPOLOGY_VARS, runtime_policy
from orchestrator.sandbox import plan_lanes, render_fleet, worker_names

GOLDEN = Path(__file__).parent / "golden"
RUN_ID = "train-20260101-000000-beef"

FLEET = """\
version: 1
slices:
  pod-a:
    accelerator_type: v5p-16
    skip_metadata_query: true
    workers:
      - {index: 0, address: 34.1.0.2, internal_address: 10.128.0.2}
      - {index: 1, address: 34.1.0.3, internal_address: 10.128.0.3}
  pod-b:
    accelerator_type: v5p-16
    skip_metadata_query: true
    workers:
      - {index: 0, address: 34.1.1.2, internal_address: 10.129.0.2}
      - {index: 1, address: 34.1.1.3, internal_address: 10.129.0.3}
  small:
    accelerator_type: v5p-8
    workers:
      - {index: 0, address: 34.1.2.2}
bundles:
  jax:
    python: "3.11"
    pins: [jax==0.10.2, jaxlib==0.10.2, libtpu==0.0.42.1]
runtime_profiles:
  tpu:
    env: {JAX_PLATFORMS: tpu}
lanes:
"""

MULTI = """\
train:
  slices: [pod-a, pod-b]
  bundle: jax
  runtime: tpu
  platform: tpu
"""


def fleet_with(tmp_path: Path, lanes: str):
    path = tmp_path / "fleet.yaml"
    path.write_text(FLEET + textwrap.indent(textwrap.dedent(lanes), "  "))
    return load_fleet(path)


def problems(tmp_path: Path, lanes: str) -> str:
    with pytest.raises(ConfigError) as err:
        fleet_with(tmp_path, lanes)
    return str(err.value)


def test_process_ids_run_slice_by_slice_and_each_slice_keeps_its_own_tpu_worker_ids(tmp_path):
    fleet = fleet_with(tmp_path, MULTI)
    plan = plan_launch(fleet, "train", ["train.py"], run_id=RUN_ID)
    assert [(p.process_id, p.worker, p.slice) for p in plan.processes] == [
        (0, "pod-a-w0", "pod-a"),
        (1, "pod-a-w1", "pod-a"),
        (2, "pod-b-w0", "pod-b"),
        (3, "pod-b-w1", "pod-b"),
    ]
    env = [p.env for p in plan.processes]
    assert [e["TPU_WORKER_ID"] for e in env] == ["0", "1", "0", "1"]
    assert env[0]["TPU_WORKER_HOSTNAMES"] == "10.128.0.2,10.128.0.3"
    assert env[3]["TPU_WORKER_HOSTNAMES"] == "10.129.0.2,10.129.0.3"
    assert [e["MEGASCALE_SLICE_ID"] for e in env] == ["0", "0", "1", "1"]
    assert {e["MEGASCALE_COORDINATOR_ADDRESS"] for e in env} == {"10.128.0.2"}
    assert {e["MEGASCALE_NUM_SLICES"] for e in env} == {"2"}
    assert {e["MEGASCALE_PORT"] for e in env} == {"8081"}
    assert plan.coordinator_address == "10.128.0.2" and plan.all_slices == ("pod-a", "pod-b")


def test_the_launch_file_and_run_record_carry_the_slice_of_every_process(tmp_path):
    plan = plan_launch(fleet_with(tmp_path, MULTI), "train", ["train.py"], run_id=RUN_ID)
    doc = plan.launch_doc(plan.processes[2])
    assert (doc["slice"], doc["slice_id"], doc["num_slices"], doc["process_id"]) == ("pod-b", 1, 2, 2)
    assert not set(doc["unset"]) & set(doc["env"])  # what the plan sets is set, not removed
    again = type(plan).from_dict(json.loads(json.dumps(plan.to_dict())))
    assert again.all_slices == ("pod-a", "pod-b") and again.megascale_port == 8081
    assert [p.slice for p in again.processes] == ["pod-a", "pod-a", "pod-b", "pod-b"]


def test_a_single_slice_lane_sets_no_megascale_and_removes_inherited_topology(tmp_path):
    fleet = fleet_with(tmp_path, "one:\n  slice: pod-a\n  bundle: jax\n  platform: tpu\n")
    plan = plan_launch(fleet, "one", ["train.py"], run_id=RUN_ID)
    doc = plan.launch_doc(plan.processes[0])
    assert not set(MEGASCALE_VARS) & set(doc["env"])
    assert set(MEGASCALE_VARS) <= set(doc["unset"])
    assert plan.megascale_port is None and not plan.multislice
    policy = runtime_policy(fleet, "one", fleet.lane_workers("one")[0]).to_dict()
    assert set(policy["unset"]) == set(TOPOLOGY_VARS) - set(policy["env"])


def test_the_megascale_port_is_a_lane_setting(tmp_path):
    fleet = fleet_with(tmp_path, MULTI + "  megascale_port: 9555\n")
    plan = plan_launch(fleet, "train", ["train.py"], run_id=RUN_ID)
    assert {p.env["MEGASCALE_PORT"] for p in plan.processes} == {"9555"} and plan.megascale_port == 9555


@pytest.mark.parametrize(
    ("lanes", "expected"),
    [
        (
            "mixed:\n  slices: [pod-a, small]\n  bundle: jax\n  platform: tpu\n",
            "fleet.yaml:28 lanes.mixed.slices: the slices of multislice lane 'mixed' differ in accelerator type "
            "(pod-a: v5p-16, small: v5p-8); one gang spans slices of one type and shape",
        ),
        (
            "both:\n  slice: pod-a\n  slices: [pod-a, pod-b]\n  bundle: jax\n  platform: tpu\n",
            "lanes.both.slice: give 'slice' or 'slices', not both",
        ),
        (
            "part:\n  slices: [pod-a, pod-b]\n  workers: 0\n  bundle: jax\n  platform: tpu\n",
            "lanes.part.workers: a multislice lane takes every worker of each slice",
        ),
        (
            "lonely:\n  slices: [pod-a]\n  bundle: jax\n  platform: tpu\n",
            "lanes.lonely.slices: a multislice lane needs two or more slices, got 1; use 'slice: NAME' for one",
        ),
        (
            "typo:\n  slices: [pod-a, pod-c]\n  bundle: jax\n  platform: tpu\n",
            "lanes.typo.slices[1]: no slice 'pod-c'",
        ),
        (
            "twice:\n  slices: [pod-a, pod-a]\n  bundle: jax\n  platform: tpu\n",
            "lanes.twice.slices: slice pod-a is listed twice",
        ),
        (
            "nobundle:\n  slices: [pod-a, pod-b]\n  bundle: jaxx\n  platform: tpu\n",
            "lanes.nobundle.bundle: no bundle 'jaxx'",
        ),
    ],
)
def test_a_lane_that_cannot_run_as_one_multislice_gang_is_refused_at_validate_time(tmp_path, lanes, expected):
    assert expected in problems(tmp_path, lanes)


def test_a_worker_is_in_one_lane_even_across_slices(tmp_path):
    text = MULTI + "solo:\n  slice: pod-b\n  workers: 1\n  bundle: jax\n  platform: tpu\n"
    assert "worker pod-b-w1 is already in lane 'train'" in problems(tmp_path, text)


def test_dry_run_of_a_two_slice_lane_matches_the_golden_file(tmp_path):
    fleet = fleet_with(tmp_path, MULTI)
    argv = ["--fleet", str(fleet.path), "launch", "--lane", "train", "--dry-run", "--run-id", RUN_ID, "--", "train.py"]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    golden = GOLDEN / "launch_dry_run_2_slices.txt"
    if os.environ.get("ORCH_UPDATE_GOLDEN"):
        golden.write_text(result.output)
    assert result.output == golden.read_text()


def test_the_sandbox_makes_slices_of_its_own_with_one_multislice_lane(tmp_path):
    addresses = [f"127.0.9.{i}" for i in range(1, 5)]
    (lane,) = plan_lanes(4, None, slices=2)
    (tmp_path / "fleet.yaml").write_text(render_fleet(tmp_path, addresses, [lane], slices=2))
    fleet = load_fleet(tmp_path / "fleet.yaml")
    assert [w.name for w in fleet.lane_workers("cpu")] == worker_names(4, 2)
    assert worker_names(4, 2) == ["slice-a-w0", "slice-a-w1", "slice-b-w0", "slice-b-w1"]
    assert [w.host for w in fleet.lane_workers("cpu")] == addresses
    assert fleet.lane_slices("cpu") == ["slice-a", "slice-b"]


# -- the reach check: real sockets on this machine ----------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_every_peer_reaches_a_listener_that_comes_up_after_it_started_trying():
    port = free_port()
    result: dict = {}
    peer = threading.Thread(target=lambda: result.update(launch_reach.connect([f"127.0.0.1:{port}"], 10.0)))
    peer.start()
    listened = launch_reach.listen([port], expect=1, deadline=10.0)
    peer.join()
    assert listened["ok"] and listened["accepted"] == [{"port": port, "peers": ["127.0.0.1"]}]
    assert result["ok"] and result["reached"][0]["error"] is None
    with socket.socket() as again:  # the listener's port is free for the coordinator right after
        again.bind(("0.0.0.0", port))


def test_a_port_nobody_listens_on_fails_by_its_own_deadline_naming_it():
    port = free_port()
    result = launch_reach.connect([f"127.0.0.1:{port}"], 0.5)
    (hit,) = result["reached"]
    assert not result["ok"] and hit["target"] == f"127.0.0.1:{port}" and hit["error"]
    assert hit["seconds"] < 5


def test_a_listener_port_held_by_another_process_is_named():
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen(1)
        port = held.getsockname()[1]
        doc = launch_reach.listen([port], expect=1, deadline=0.2)
    assert not doc["ok"] and doc["listen_errors"][0]["port"] == port


def test_the_verdict_names_worker_port_and_layer(tmp_path):
    plan = plan_launch(fleet_with(tmp_path, MULTI), "train", ["train.py"], run_id=RUN_ID, port=23000)
    replies = {
        "pod-a-w0": Reply({"ok": True, "listen_errors": [], "accepted": []}),
        "pod-a-w1": Reply({"ok": True, "reached": [{"target": "10.128.0.2:23000", "ok": True}]}),
        "pod-b-w0": Reply({"ok": False, "reached": [{"target": "10.128.0.2:8081", "ok": False, "error": "timed out"}]}),
        "pod-b-w1": Reply(None, "ssh: connection refused"),
    }
    lines = reach_verdict(plan, replies, 5.0)
    assert lines == [
        "pod-b-w0: cannot reach the MEGASCALE port 10.128.0.2:8081 on pod-a-w0 within 5s (timed out); "
        "layer network: a firewall rule or route between the workers blocks it (the run would hang in "
        "initialisation)",
        "pod-b-w1: the network check did not run: ssh: connection refused",
    ]


# -- receipts of a multislice run ----------------------------------------------


def test_a_multislice_report_groups_rows_by_slice_and_names_a_slice_whose_workers_disagree():
    from test_receipts import a_receipt, a_run

    from orchestrator import receipts
    from orchestrator.cli.receipts_cmd import render_report

    docs = {}
    for pid, (worker, sl) in enumerate((("a-w0", "pod-a"), ("a-w1", "pod-a"), ("b-w0", "pod-b"), ("b-w1", "pod-b"))):
        doc = a_receipt(worker, pid, slice=sl, slice_id=pid // 2, num_slices=2)
        if worker == "b-w1":
            doc["bundle_id"] = "0000aaaabbbbcccc"
        docs[worker] = doc
    rep = receipts.build_report(a_run(docs))
    assert [r.slice for r in rep.rows] == ["pod-a", "pod-a", "pod-b", "pod-b"]
    flags = [f for f in rep.flags if f.kind == "slice-differs"]
    assert len(flags) == 1 and flags[0].message.startswith("slice pod-b: its workers ran different bundles")
    text = render_report(rep)
    assert text.splitlines()[3].split()[:2] == ["slice", "worker"]
    assert [line.split()[0] for line in text.splitlines()[4:8]] == ["pod-a", "pod-a", "pod-b", "pod-b"]
