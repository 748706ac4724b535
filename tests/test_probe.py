"""Probe logic without workers: parsers of captured runtime output, /proc/locks, verdicts, plans.

The runtime log lines below were captured on this machine from jax 0.10.2 +
libtpu 0.0.42.1 with no TPU attached (see FIELD-GUIDE section 9); the
/proc/locks lines from a real jax process holding /tmp/libtpu_lockfile.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hostside import launch_proc, probe_bundle, probe_device, probe_runtime_check
from hostside import probe as hp
from orchestrator import probe as op
from orchestrator.fleet import load_fleet
from orchestrator.transport import Result

REPO = Path(__file__).resolve().parent.parent

# Captured: jax with libtpu, no chip, explicit topology (TPU_SKIP_MDS_QUERY=1 ...).
JAX_FALLBACK_STDERR = textwrap.dedent("""\
    I1122 04:28:21.555981   10679 pjrt_client.cc:579] PjRt-IFRT device count: total=1, addressable=1
    I1122 04:28:21.586655   10679 pjrt_api.cc:119] GetPjrtApi was found for tpu at /var/lib/orch/envs/b/lib/python3.11/site-packages/libtpu/libtpu.so
    INFO jax._src.xla_bridge: Unable to initialize backend 'tpu': INTERNAL: Failed to get global TPU topology.
    """)  # noqa: E501 (a captured log line, kept whole)
LIBTPU_ERROR_LOG = (
    "E1122 04:30:07.378848   13156 tpu_util.cc:19] Failed to get TPU topology: NOT_FOUND: "
    "embed://tpu_chip_config/jellyfish_chip_configs_megachip_tccontrol.binarypb does not exist."
)
# Captured: the same without topology env; and with a second process holding the lockfile.
JAX_NO_DEVICE_LINE = (
    "INFO jax._src.xla_bridge: Unable to initialize backend 'tpu': NOT_FOUND: TPU initialization "
    "failed: No jellyfish device found."
)
JAX_LOCK_LINE = (
    "INFO jax._src.xla_bridge: Unable to initialize backend 'tpu': ABORTED: Internal error when "
    'accessing libtpu multi-process lockfile. Run "$ sudo rm /tmp/libtpu_lockfile".'
)
# Captured: JAX_PLATFORMS=tpu turns the fallback into an error.
JAX_PLATFORMS_TPU_ERROR = (
    "RuntimeError: Unable to initialize backend 'tpu': NOT_FOUND: TPU initialization failed: "
    "No jellyfish device found. (set JAX_PLATFORMS='' to automatically choose an available "
    "backend)"
)

PROC_LOCKS = textwrap.dedent("""\
    1: POSIX  ADVISORY  WRITE 9018 fe:00:2146719 0 EOF
    2: FLOCK  ADVISORY  WRITE 812 00:19:1203 0 EOF
    2: -> FLOCK  ADVISORY  WRITE 990 00:19:1203 0 EOF
    3: OFDLCK ADVISORY  READ  -1 fe:00:555 0 EOF
    4: POSIX  ADVISORY  WRITE 4242 fe:01:2146719 0 EOF
    """)


def result_line(**fields) -> str:
    base = {
        "frontend": "jax",
        "version": "0.10.2",
        "device_count": 1,
        "platform": "cpu",
        "device_kind": "cpu",
        "value": 3920.0,
        "expected": 3920.0,
        "computed": True,
    }
    return probe_runtime_check.RESULT_MARK + json.dumps({**base, **fields}) + "\n"


# ---------------------------------------------------------------------------
# /proc/locks and the lockfile


def test_lockfile_is_absent_held_or_stale():
    assert probe_device.lockfile_state(False, [])["state"] == "absent"
    assert probe_device.lockfile_state(True, [])["state"] == "stale"
    held = probe_device.lockfile_state(True, [{"pid": 9018, "command": "python train.py"}])
    assert held == {"state": "held", "holders": [{"pid": 9018, "command": "python train.py"}]}


def test_the_device_check_names_the_pid_and_command_holding_a_real_lockfile(tmp_path):
    lockfile = tmp_path / "libtpu_lockfile"
    code = (
        "import fcntl, sys, time; f = open(sys.argv[1], 'w'); fcntl.lockf(f, fcntl.LOCK_EX); "
        "print('locked', flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(lockfile), "train-step"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        check = probe_device.check_device({"platform": "tpu", "lockfile": str(lockfile)}, {}).to_dict()
        assert check["status"] == "fail" and check["layer"] == "device-ownership"
        assert check["data"]["lockfile"]["state"] == "held"
        assert check["data"]["lockfile"]["holders"][0]["pid"] == holder.pid
        assert f"held by pid {holder.pid} ({sys.executable} -c import fcntl" in check["headline"]
        cpu_lane = probe_device.check_device({"platform": "cpu", "lockfile": str(lockfile)}, {}).to_dict()
        assert cpu_lane["status"] == "warn"
    finally:
        holder.kill()
        holder.wait()
    stale = probe_device.check_device({"platform": "tpu", "lockfile": str(lockfile)}, {}).to_dict()
    assert stale["data"]["lockfile"]["state"] == "stale"
    assert stale["status"] == "warn" and any("stale libtpu lockfile" in e for e in stale["evidence"])


# ---------------------------------------------------------------------------
# Runtime output


def test_a_tpu_lane_answered_by_cpu_is_a_silent_fallback_failure_with_the_runtime_reason():
    verdict = probe_runtime_check.parse_runtime_output(
        "jax", result_line(), JAX_FALLBACK_STDERR, 0, intended="tpu", extra_log=LIBTPU_ERROR_LOG
    )
    assert verdict["status"] == "fail"
    assert "intended tpu, answered from cpu" in verdict["summary"] and "silent fallback" in verdict["summary"]
    assert verdict["evidence"][0].endswith("Failed to get global TPU topology.")
    assert verdict["evidence"][1] == LIBTPU_ERROR_LOG
    assert not any("PjRt-IFRT device count" in line for line in verdict["evidence"])


def test_a_cpu_lane_answered_by_cpu_is_ok():
    verdict = probe_runtime_check.parse_runtime_output("jax", result_line(), "", 0, intended="cpu")
    assert verdict["status"] == "ok"
    assert verdict["summary"] == "jax 0.10.2: 1 cpu device(s), computation ok"


def test_a_runtime_error_is_a_failure_carrying_the_error_line():
    stdout = probe_runtime_check.RESULT_MARK + json.dumps({"frontend": "jax", "error": JAX_PLATFORMS_TPU_ERROR}) + "\n"
    verdict = probe_runtime_check.parse_runtime_output(
        "jax", stdout, "Traceback (most recent call last):\n" + JAX_PLATFORMS_TPU_ERROR + "\n", 1, intended="tpu"
    )
    assert verdict["status"] == "fail"
    assert verdict["evidence"][0] == JAX_PLATFORMS_TPU_ERROR
    assert verdict["evidence"].count(JAX_PLATFORMS_TPU_ERROR) == 1


def test_a_hung_runtime_is_a_failure_that_says_it_was_killed():
    verdict = probe_runtime_check.parse_runtime_output(
        "torch_xla", "", "I0000 starting\n", None, intended="tpu", timed_out=8
    )
    assert verdict["status"] == "fail" and "no answer within 8s (killed)" in verdict["summary"]


def test_a_child_that_died_without_a_result_shows_the_tail_of_its_stderr():
    verdict = probe_runtime_check.parse_runtime_output(
        "jax", "", "Fatal Python error: Segmentation fault\n", -11, intended="cpu"
    )
    assert verdict["status"] == "fail" and "exited -11 without a result" in verdict["summary"]
    assert "Fatal Python error: Segmentation fault" in verdict["evidence"]


def test_a_wrong_computation_is_a_failure_even_on_the_intended_device():
    verdict = probe_runtime_check.parse_runtime_output(
        "jax", result_line(value=0.0, computed=False), "", 0, intended="cpu"
    )
    assert verdict["status"] == "fail" and "computation gave 0.0" in verdict["summary"]


def test_key_lines_keep_reasons_and_drop_info_noise():
    text = JAX_FALLBACK_STDERR + JAX_LOCK_LINE + "\n" + JAX_LOCK_LINE + "\nplain output\n"
    assert probe_runtime_check.key_lines(text) == [JAX_FALLBACK_STDERR.splitlines()[2], JAX_LOCK_LINE]


def test_the_child_environment_applies_policy_and_removes_forbidden_variables():
    env, removed = probe_runtime_check.child_environment(
        {"env": {"PJRT_DEVICE": "TPU"}, "forbid": ["XLA_USE_BF16", "XLA_USE_SPMD"]},
        {"XLA_USE_BF16": "1", "PATH": "/usr/bin", "PYTHONPATH": "/x/hostside"},
    )
    assert removed == ["XLA_USE_BF16"]
    assert env["PJRT_DEVICE"] == "TPU" and "XLA_USE_BF16" not in env and "PYTHONPATH" not in env
    assert env["TF_CPP_MIN_LOG_LEVEL"] == "0"
    env, _ = probe_runtime_check.child_environment({"env": {"TF_CPP_MIN_LOG_LEVEL": "3"}}, {})
    assert env["TF_CPP_MIN_LOG_LEVEL"] == "3"


def test_the_runtime_child_reports_a_timeout_and_kills_its_process_group():
    rc, out, err, timed_out = probe_runtime_check.run_child(
        [sys.executable, "-c", "import time; print('x', flush=True); time.sleep(30)"], dict(os.environ), 1.0
    )
    assert timed_out and rc is None and out == "x\n"


def test_a_probe_that_is_terminated_takes_its_runtime_child_with_it(tmp_path):
    """The child runs in a session of its own; a TERMed probe (the transport's timeout) must not
    leave it behind holding libtpu's lock."""
    pidfile = tmp_path / "child.pid"
    child = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    probe = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, sys; from hostside.probe_runtime_check import run_child; "
            f"run_child([sys.executable, '-c', {child!r}], dict(os.environ), 60)",
        ],
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        deadline = time.monotonic() + 10
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        pid = int(pidfile.read_text())
        probe.send_signal(signal.SIGTERM)
        assert probe.wait(timeout=10) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 5
        while launch_proc.alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not launch_proc.alive(pid)
    finally:
        probe.kill()


# ---------------------------------------------------------------------------
# Bundle and cache checks on a fake worker root


def make_env(root: Path, bundle_id: str, dists: dict[str, str], lane: str = "cpu", manifest: dict | None = None):
    env = root / "envs" / bundle_id
    site = env / "lib" / "python3.11" / "site-packages"
    for name, version in dists.items():
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nbody\n")
        (info / "RECORD").write_text(f"{info.name}/METADATA,,\n{info.name}/RECORD,,\n")
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to(sys.executable)
    if manifest is not None:
        (env / "orch-bundle.json").write_text(json.dumps(manifest))
        (env / ".orch-complete").write_text("")
    (root / "lanes" / lane).mkdir(parents=True, exist_ok=True)
    (root / "lanes" / lane / "active").symlink_to(f"../../envs/{bundle_id}")
    return env


def test_installed_versions_come_from_dist_info_with_normalized_names(tmp_path):
    env = make_env(tmp_path, "b1", {"jax": "0.10.2", "torch_xla": "2.9.0", "libtpu": "0.0.42.1"})
    assert probe_bundle.installed_distributions(str(env)) == {
        "jax": "0.10.2",
        "torch-xla": "2.9.0",
        "libtpu": "0.0.42.1",
    }


def test_versions_compare_exactly_but_tolerate_trailing_zero_release_parts():
    assert probe_bundle.same_version("2.9", "2.9.0") and probe_bundle.same_version("2.13.0+cpu", "2.13.0+cpu")
    assert not probe_bundle.same_version("2.13.0+cpu", "2.13.0") and not probe_bundle.same_version("0.0.36", "0.0.37")


def test_a_lane_without_an_active_bundle_fails_as_bundle_skew(tmp_path):
    check = probe_bundle.check_bundle({"root": str(tmp_path), "lane": "cpu"}, {}).to_dict()
    assert check["status"] == "fail" and check["layer"] == "bundle-skew"
    assert "lane cpu has no active bundle" in check["headline"]


def test_a_shallow_probe_before_the_first_deploy_only_warns_but_a_dangling_pointer_fails(tmp_path):
    check = probe_bundle.check_bundle({"root": str(tmp_path), "lane": "cpu", "deep": False}, {}).to_dict()
    assert check["status"] == "warn" and "no bundle deployed here yet" in check["headline"]
    (tmp_path / "lanes" / "cpu").mkdir(parents=True)
    (tmp_path / "lanes" / "cpu" / "active").symlink_to("../../envs/gone")
    check = probe_bundle.check_bundle({"root": str(tmp_path), "lane": "cpu", "deep": False}, {}).to_dict()
    assert check["status"] == "fail" and "is dangling" in check["headline"]


def test_a_bundle_without_manifest_is_a_warning_and_reports_versions(tmp_path):
    make_env(tmp_path, "b1", {"jax": "0.10.2", "jaxlib": "0.10.2", "numpy": "2.4.6"})
    state: dict = {}
    check = probe_bundle.check_bundle(
        {
            "root": str(tmp_path),
            "lane": "cpu",
            "platform": "cpu",
            "bundle": {"name": "jax-cpu", "pins": {"jax": "0.10.2", "jaxlib": "0.10.2"}},
            "frontends": ["jax"],
        },
        state,
    ).to_dict()
    assert check["status"] == "warn" and check["headline"].startswith("no manifest")
    assert check["data"]["versions"] == {"jax": "0.10.2", "jaxlib": "0.10.2"}
    assert state["bundle_id"] == "b1" and state["frontends"] == ["jax"]


def test_installed_wheels_that_differ_from_the_manifest_or_the_pins_are_bundle_skew(tmp_path):
    make_env(
        tmp_path,
        "b2",
        {"jax": "0.10.2", "jaxlib": "0.9.0", "libtpu": "0.0.42.1"},
        lane="tpu",
        manifest={
            "schema_version": 1,
            "bundle_id": "b2",
            "bundle": "jax-libtpu",
            "python": "3.11",
            "distributions": {"jax": "0.10.2", "jaxlib": "0.10.2", "libtpu": "0.0.42.1"},
        },
    )
    check = probe_bundle.check_bundle(
        {
            "root": str(tmp_path),
            "lane": "tpu",
            "platform": "tpu",
            "bundle": {"name": "jax-tpu-next", "pins": {"jax": "0.10.2", "libtpu": "0.0.43"}},
            "frontends": ["jax", "torch_xla"],
        },
        {},
    ).to_dict()
    assert check["status"] == "fail" and check["layer"] == "bundle-skew"
    assert check["evidence"] == [
        "lane tpu runs bundle 'jax-libtpu' (b2), the fleet says 'jax-tpu-next'; redeploy the lane",
        "jaxlib installed 0.9.0, the bundle manifest says 0.10.2",
        "libtpu installed 0.0.42.1, the fleet pins says 0.0.43",
        "bundle b2 lacks frontend torch_xla (torch-xla not installed)",
    ]


def test_runtime_frontends_are_the_device_frontends_and_plain_torch_only_on_cpu():
    assert probe_bundle.runtime_frontends({"jax": "1", "torch": "2"}, "tpu") == ["jax"]
    assert probe_bundle.runtime_frontends({"torch": "2"}, "cpu") == ["torch"]
    assert probe_bundle.runtime_frontends({"torch": "2", "torch-xla": "2", "jax": "1"}, "cpu") == ["torch_xla", "jax"]
    assert probe_bundle.runtime_frontends({"torch": "2", "torch-tpu": "0.1"}, "tpu") == ["torch_tpu"]


def test_cache_directories_are_checked_against_the_role_the_policy_gives_the_worker(tmp_path):
    (tmp_path / "w" / "jax").mkdir(parents=True)
    (tmp_path / "r" / "jax").mkdir(parents=True)
    state = {"bundle_id": "b1", "frontends": ["jax"], "installed": {"jax": "0.10.2"}}
    writer = hp.check_cache(
        {"caches": [{"frontend": "jax", "path": str(tmp_path / "w" / "jax"), "expect": "writable"}]}, state
    ).to_dict()
    assert writer["status"] == "ok" and writer["summary"] == "jax rw ok"
    reader = hp.check_cache(
        {"caches": [{"frontend": "jax", "path": str(tmp_path / "r" / "jax"), "expect": "readonly"}]}, state
    ).to_dict()
    assert reader["status"] == "ok" and "read-only enforced by the launcher" in reader["summary"]
    fresh = hp.check_cache(
        {"caches": [{"frontend": "jax", "path": str(tmp_path / "c" / "{bundle_id}" / "jax"), "expect": "writable"}]},
        state,
    ).to_dict()
    assert fresh["status"] == "ok" and "created on first write" in fresh["summary"]
    assert fresh["data"]["caches"][0]["path"] == str(tmp_path / "c" / "b1" / "jax")
    cold = hp.check_cache(
        {"caches": [{"frontend": "jax", "path": str(tmp_path / "none" / "jax"), "expect": "readonly"}]}, state
    ).to_dict()
    assert cold["status"] == "warn" and "cold start" in cold["headline"]
    skipped = hp.check_cache(
        {"caches": [{"frontend": "torch_xla", "path": str(tmp_path), "expect": "writable"}]}, state
    ).to_dict()
    assert skipped["data"]["caches"] == []


def test_the_hostside_probe_prints_one_document_for_a_worker_in_no_lane(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hostside.probe",
            "--request",
            json.dumps({"root": str(tmp_path)}),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    doc = json.loads(proc.stdout)
    assert doc["schema_version"] == 1 and doc["job"] == "probe"
    assert [(c["name"], c["status"]) for c in doc["checks"]][1:] == [
        ("bundle", "skip"),
        ("device", doc["checks"][2]["status"]),
        ("runtime", "skip"),
        ("cache", "skip"),
    ]
    assert doc["checks"][0]["status"] == "ok"


def test_a_malformed_request_is_refused_with_a_message():
    proc = subprocess.run(
        [sys.executable, "-m", "hostside.probe", "--request", "[]"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "must be a JSON object" in proc.stderr and proc.stdout == ""


# ---------------------------------------------------------------------------
# Controller side: plans and verdicts


FLEET = textwrap.dedent("""\
    version: 1
    slices:
      s:
        accelerator_type: v6e-16
        skip_metadata_query: true
        shared_dir: /mnt/shared
        workers:
          - {index: 0, address: 10.0.0.1}
          - {index: 1, address: 10.0.0.2}
          - {index: 2, address: 10.0.0.3}
          - {index: 3, address: 10.0.0.4}
          - {index: 4, address: 10.0.0.5}
    bundles:
      jax-libtpu: {python: "3.11", pins: [jax==0.10.2, jaxlib==0.10.2, libtpu==0.0.42.1]}
      torch-cpu: {python: "3.11", pins: [torch==2.13.0+cpu]}
    runtime_profiles:
      tpu: {env: {PJRT_DEVICE: TPU}, forbid: [XLA_USE_BF16]}
    cache_policies:
      shared: {mode: single-writer, root: /mnt/shared/cache}
      local: {mode: per-host}
    lanes:
      tpu: {workers: 0-1, bundle: jax-libtpu, runtime: tpu, cache: shared, platform: tpu}
      cpu: {workers: 2-3, bundle: torch-cpu, cache: local, platform: cpu}
    """)


@pytest.fixture
def fleet(tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text(FLEET)
    return load_fleet(path)


def test_the_plan_carries_policy_topology_pins_frontends_and_cache_roles(fleet):
    plan = op.plan(fleet, fleet.workers, timeout=40)
    docs = {r.worker.name: r.doc for r in plan.requests}
    w1 = docs["s-w1"]
    assert w1["platform"] == "tpu" and w1["deep"] is True and w1["deadline"] == 36
    assert w1["policy"]["env"] == {
        "TPU_SKIP_MDS_QUERY": "1",
        "TPU_WORKER_ID": "1",
        "TPU_ACCELERATOR_TYPE": "v6e-16",
        "TPU_WORKER_HOSTNAMES": "10.0.0.1,10.0.0.2,10.0.0.3,10.0.0.4,10.0.0.5",
        "PJRT_DEVICE": "TPU",
    }
    assert w1["policy"]["forbid"] == ["XLA_USE_BF16"]
    assert w1["bundle"]["pins"] == {"jax": "0.10.2", "jaxlib": "0.10.2", "libtpu": "0.0.42.1"}
    assert w1["frontends"] == ["jax"]
    assert w1["caches"] == [{"frontend": "jax", "path": "/mnt/shared/cache/tpu/{bundle_id}/jax", "expect": "readonly"}]
    assert docs["s-w0"]["caches"][0]["expect"] == "writable"
    w2 = docs["s-w2"]
    assert w2["frontends"] == ["torch"] and w2["caches"] == [] and w2["policy"]["env"]["TPU_WORKER_ID"] == "2"
    assert docs["s-w4"] == {
        "schema_version": 1,
        "root": "/var/lib/orch",
        "lane": None,
        "deep": True,
        "deadline": 36,
        "runtime_timeout": 34,
    }


def test_a_shallow_plan_gets_the_shorter_default_timeout(fleet):
    plan = op.plan(fleet, fleet.workers[:1], deep=False)
    assert plan.timeout == op.DEFAULT_SHALLOW_TIMEOUT and plan.requests[0].doc["deep"] is False


def check(name, status, evidence=(), summary="", layer=None, data=None, headline=None):
    doc = {
        "name": name,
        "status": status,
        "summary": summary or (evidence[0] if evidence else status),
        "evidence": list(evidence),
        "elapsed": 0.1,
        "data": data or {},
    }
    if layer:
        doc["layer"] = layer
    if headline or (status in ("warn", "fail") and evidence):
        doc["headline"] = headline or evidence[0]
    return doc


ANSWERED_CPU = {"answered": {"platform": "cpu", "device_kind": "cpu", "device_count": 1}}


def test_a_healthy_worker_is_ok_and_shows_the_device_that_answered():
    doc = {
        "platform": "cpu",
        "bundle_id": "b1",
        "checks": [
            check("host", "ok"),
            check("bundle", "ok", summary="b1: jax 0.10.2"),
            check("device", "ok"),
            check("runtime", "ok", summary="jax 0.10.2: 1 cpu device(s), computation ok", data=ANSWERED_CPU),
            check("cache", "skip"),
        ],
    }
    row = op.judge("w0", "cpu", doc)
    assert (row.verdict, row.layer, row.answered) == ("ok", None, "cpu")
    assert row.evidence == "runtime: jax 0.10.2: 1 cpu device(s), computation ok"


def test_a_silent_fallback_is_runtime_proof_with_the_runtime_line_as_evidence():
    summary = "jax 0.10.2: intended tpu, answered from cpu (1 cpu device(s)): silent fallback"
    doc = {
        "platform": "tpu",
        "checks": [
            check("device", "warn", ["no /dev/accel* or /dev/vfio/* device nodes: this host shows no TPU chips"]),
            check(
                "runtime",
                "fail",
                [summary, "jax: " + JAX_NO_DEVICE_LINE],
                summary=summary,
                layer="runtime-proof",
                data=ANSWERED_CPU,
            ),
        ],
    }
    row = op.judge("w2", "tpu", doc)
    assert (row.verdict, row.layer, row.answered) == ("fail", "runtime-proof", "cpu")
    assert row.evidence == f"runtime: {summary} -- jax: {JAX_NO_DEVICE_LINE}"
    assert row.check("runtime").signature_id == "tpu-device-not-found"


def test_a_held_lockfile_makes_the_worker_device_ownership_even_though_the_runtime_also_failed():
    held = "libtpu lockfile /tmp/libtpu_lockfile is held by pid 4242 (python train.py): another process owns the TPU"
    doc = {
        "platform": "tpu",
        "checks": [
            check("device", "fail", [held], layer="device-ownership"),
            check(
                "runtime",
                "fail",
                ["jax: intended tpu, answered from cpu: silent fallback", "jax: " + JAX_LOCK_LINE],
                layer="runtime-proof",
            ),
        ],
    }
    row = op.judge("w1", "tpu", doc)
    assert (row.verdict, row.layer) == ("fail", "device-ownership")
    assert row.evidence == f"device: {held}"
    assert row.check("runtime").layer == "device-ownership"  # the lockfile line outranks the fallback


def test_a_stale_lockfile_is_a_warning_not_a_failure():
    stale = "stale libtpu lockfile /tmp/libtpu_lockfile: exists but no process holds it"
    row = op.judge("w1", "tpu", {"checks": [check("host", "ok"), check("device", "warn", [stale])]})
    assert (row.verdict, row.layer, row.evidence) == ("warn", None, f"device: {stale}")


def test_an_unmatched_failure_takes_the_layer_of_its_check_and_that_layers_remedy():
    from orchestrator.diagnose import layer_remedy

    row = op.judge(
        "w0", "cpu", {"checks": [check("cache", "fail", ["jax /c is not writable, but this worker writes the cache"])]}
    )
    assert (row.layer, row.remedy) == ("cache", layer_remedy("cache"))


def test_an_unreachable_worker_is_a_transport_row():
    result = Result(
        host="w3",
        argv=("ensure-hostside",),
        exit_code=None,
        elapsed=5.0,
        error="no SSH banner from 127.0.1.4:22 within 5s (host hung or overloaded)",
        error_kind="timeout",
    )
    row = op.unreachable("w3", "cpu", "cpu", result)
    assert (row.verdict, row.layer) == ("fail", "transport")
    assert row.evidence == result.error and "paused" in row.remedy


def test_a_probe_that_crashed_on_the_worker_is_not_blamed_on_transport():
    result = Result(
        host="w3", argv=("python3",), exit_code=1, stderr="/usr/bin/python3: No module named hostside.probe"
    )
    row = op.unreachable("w3", "cpu", "cpu", result)
    assert row.layer == "other" and "No module named hostside.probe" in row.evidence


def test_the_summary_counts_verdicts_and_lists_failing_workers_by_layer_in_layer_order():
    rows = (
        op.WorkerProbe("w0", "cpu", "cpu", "b", "cpu", "ok", None, None, "fine"),
        op.WorkerProbe("w1", "tpu", "tpu", "b", "cpu", "fail", "runtime-proof", "r", "x"),
        op.WorkerProbe("w2", "tpu", "tpu", None, None, "fail", "transport", "r", "y"),
        op.WorkerProbe("w3", "tpu", "tpu", "b", "cpu", "fail", "runtime-proof", "r", "z"),
    )
    report = op.ProbeReport(rows=rows, deep=True, elapsed=1.0)
    assert report.failed
    assert report.summary() == {
        "workers": 4,
        "ok": 1,
        "warn": 0,
        "fail": 3,
        "layers": {"transport": ["w2"], "runtime-proof": ["w1", "w3"]},
    }
    assert [r["worker"] for r in report.to_dict()["rows"]] == ["w0", "w1", "w2", "w3"]


def test_the_runtime_child_program_reports_a_frontend_it_cannot_import(tmp_path):
    """hostside/probe_runtime.py runs as the bundle's Python would run it (`-c`, no hostside on its path)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    rc, out, err, timed_out = probe_runtime_check.run_child(
        [sys.executable, "-c", probe_runtime_check.runtime_source(), "torch_tpu", probe_runtime_check.RESULT_MARK],
        env,
        60,
    )
    verdict = probe_runtime_check.parse_runtime_output("torch_tpu", out, err, rc, intended="tpu")
    assert not timed_out and rc == 1
    assert verdict["status"] == "fail" and "No module named 'torch" in verdict["summary"]
    assert verdict["result"]["frontend"] == "torch_tpu" and "elapsed" in verdict["result"]
