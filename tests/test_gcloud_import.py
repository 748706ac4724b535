"""`orch fleet import-gcloud`: a slice entry from `gcloud compute tpus tpu-vm describe --format=json`.

The inputs in tests/data/gcloud/ have the shape gcloud prints (see the README
there for where it comes from).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from orchestrator.cli import main
from orchestrator.errors import ConfigError
from orchestrator.fleet import build_fleet, load_fleet
from orchestrator.gcloud import add_slice, import_describe, slice_from_text
from orchestrator.yamlsrc import loads

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "gcloud"
V6E_32 = DATA / "v6e-32-external-ips.json"
V5P_32 = DATA / "v5p-32-internal-only.json"
V4_32 = DATA / "v4-32-accelerator-config.json"
V6E_8 = DATA / "v6e-8-single-host.json"

# A fleet whose lanes name their slice, so a second slice keeps it valid.
FLEET = """\
# a fleet with comments that must survive
version: 1

ssh:
  host_key_policy: strict   # never auto-add

slices:
  local:
    python: python3
    workers:
      - {index: 0, address: 10.9.0.1}
      - {index: 1, address: 10.9.0.2}   # the last worker

# bundles below
bundles:
  jax-cpu: {python: "3.11", pins: [jax==0.10.2, jaxlib==0.10.2]}

lanes:
  cpu: {slice: local, workers: all, bundle: jax-cpu, platform: cpu}
"""


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def describe(path: Path) -> dict:
    return json.loads(path.read_text())


def import_doc(doc, tmp_path: Path, name: str = "tpu.json", **options):
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=2))
    return import_describe(path, **options)


def problems_of(doc, tmp_path: Path) -> list[str]:
    with pytest.raises(ConfigError) as info:
        import_doc(doc, tmp_path)
    return info.value.problems


# ---------------------------------------------------------------------------
# The four documents


def test_a_v6e_32_with_external_ips_prints_eight_workers_reached_at_their_external_address():
    out = run(
        "fleet", "import-gcloud", str(V6E_32), "--user", "tpu-ops", "--identity-file", "~/.ssh/google_compute_engine"
    )
    assert out.exit_code == 0, out.output
    assert out.stdout == textwrap.dedent("""\
        slices:
          train-v6e-32:
            # imported from v6e-32-external-ips.json: projects/tpu-training-prod/locations/us-east5-b/nodes/train-v6e-32
            # runtime version v2-alpha-tpuv6e; topology 4x8; zone us-east5-b
            accelerator_type: v6e-32
            skip_metadata_query: false   # GCE: libtpu reads the topology from the metadata server
            user: tpu-ops
            identity_file: ~/.ssh/google_compute_engine
            workers:
              - {index: 0, address: 203.0.113.21, internal_address: 10.202.0.2}
              - {index: 1, address: 203.0.113.22, internal_address: 10.202.0.3}
              - {index: 2, address: 203.0.113.23, internal_address: 10.202.0.4}
              - {index: 3, address: 203.0.113.24, internal_address: 10.202.0.5}
              - {index: 4, address: 203.0.113.25, internal_address: 10.202.0.6}
              - {index: 5, address: 203.0.113.26, internal_address: 10.202.0.7}
              - {index: 6, address: 203.0.113.27, internal_address: 10.202.0.8}
              - {index: 7, address: 203.0.113.28, internal_address: 10.202.0.9}
        """)
    assert out.stderr == ""


def test_the_printed_snippet_is_a_valid_fleet_whose_workers_connect_outside_and_talk_inside():
    out = run("fleet", "import-gcloud", str(V6E_32))
    fleet = build_fleet(loads(out.stdout, Path("fleet.yaml")))
    sl = fleet.model.slices["train-v6e-32"]
    assert sl.accelerator_type == "v6e-32"
    assert sl.skip_metadata_query is False
    assert [(w.name, w.host, w.internal_address) for w in fleet.workers][:2] == [
        ("train-v6e-32-w0", "203.0.113.21", "10.202.0.2"),
        ("train-v6e-32-w1", "203.0.113.22", "10.202.0.3"),
    ]
    assert [w.index for w in fleet.workers] == list(range(8))


def test_a_slice_without_external_ips_is_reached_at_its_internal_addresses():
    imported = import_describe(V5P_32)
    assert imported.accelerator_type == "v5p-32"
    assert imported.runtime_version == "v2-alpha-tpuv5"
    assert imported.topology == "2x2x4"
    assert imported.entry()["workers"] == [{"index": i, "address": f"10.164.0.{10 + i}"} for i in range(4)]
    assert imported.warnings == ()


def test_an_accelerator_config_without_accelerator_type_counts_v4_tensorcores():
    imported = import_describe(V4_32)
    assert imported.accelerator_type == "v4-32"  # 2x2x4 = 16 chips, 2 TensorCores each
    assert imported.name == "v4-32-topology"
    assert len(imported.workers) == 4


def test_a_single_host_v6e_8_is_one_worker():
    imported = import_describe(V6E_8)
    assert (imported.accelerator_type, imported.zone) == ("v6e-8", "europe-west4-a")
    assert [(w.index, w.address, w.internal_address) for w in imported.workers] == [(0, "203.0.113.90", "10.146.0.7")]


@pytest.mark.parametrize(
    "kind, topology, expected",
    [
        ("V6E", "4x8", "v6e-32"),
        ("V6E", "2x4", "v6e-8"),
        ("V5LITE_POD", "4x4", "v5litepod-16"),
        ("V5P", "2x2x4", "v5p-32"),
        ("V4", "2x2x1", "v4-8"),
        ("V3", "2x2", "v3-8"),
        ("V2", "4x4", "v2-32"),
    ],
)
def test_accelerator_types_derived_from_config_follow_each_generations_naming(tmp_path, kind, topology, expected):
    doc = describe(V4_32)
    doc["acceleratorConfig"] = {"type": kind, "topology": topology}
    assert import_doc(doc, tmp_path).accelerator_type == expected


def test_slice_name_and_ssh_settings_come_from_the_options():
    imported = import_describe(V6E_8, name="dev", user="me", identity_file="keys/id_ed25519")
    assert imported.name == "dev"
    assert imported.entry() == {
        "accelerator_type": "v6e-8",
        "skip_metadata_query": False,
        "user": "me",
        "identity_file": "keys/id_ed25519",
        "workers": [{"index": 0, "address": "203.0.113.90", "internal_address": "10.146.0.7"}],
    }


def test_an_accelerator_config_that_disagrees_with_the_type_is_a_warning(tmp_path):
    doc = describe(V6E_32)
    doc["acceleratorConfig"]["topology"] = "4x4"
    imported = import_doc(doc, tmp_path)
    assert imported.accelerator_type == "v6e-32"
    assert imported.warnings == (
        "tpu.json: acceleratorType v6e-32 does not match acceleratorConfig (v6e-16); using acceleratorType",
    )


def test_a_one_element_list_from_tpu_vm_list_is_accepted(tmp_path):
    assert import_doc([describe(V6E_8)], tmp_path).name == "dev-v6e-8"


# ---------------------------------------------------------------------------
# Malformed input names the file and the JSON path


def test_a_missing_ip_address_names_file_and_json_path(tmp_path):
    doc = describe(V6E_32)
    del doc["networkEndpoints"][2]["ipAddress"]
    path = tmp_path / "tpu.json"
    path.write_text(json.dumps(doc))
    out = run("fleet", "import-gcloud", str(path))
    assert out.exit_code == 2
    assert out.stderr == "orch: error: tpu.json: networkEndpoints[2].ipAddress: missing\n"
    assert out.stdout == ""


def test_every_problem_is_listed_at_once(tmp_path):
    doc = describe(V6E_32)
    doc["networkEndpoints"][1]["ipAddress"] = "10.202.0.300"
    doc["networkEndpoints"][5]["accessConfig"] = "203.0.113.9"
    doc["networkEndpoints"][6] = "10.202.0.8"
    doc["networkEndpoints"][7]["accessConfig"]["externalIp"] = "203.0.113.21"
    del doc["acceleratorType"]
    doc["acceleratorConfig"]["type"] = "V9Z"
    assert problems_of(doc, tmp_path) == [
        "tpu.json: acceleratorConfig.type: unknown TPU type 'V9Z' (known: V2, V3, V4, V5LITE_POD, V5P, V6E)",
        "tpu.json: networkEndpoints[1].ipAddress: '10.202.0.300' is not an IP address",
        "tpu.json: networkEndpoints[5].accessConfig: expected an object, got a string",
        "tpu.json: networkEndpoints[6]: expected an object, got a string",
        "tpu.json: networkEndpoints[7].accessConfig.externalIp: 203.0.113.21 is also "
        "networkEndpoints[0].accessConfig.externalIp",
    ]


@pytest.mark.parametrize(
    "change, problem",
    [
        (
            lambda d: d.pop("networkEndpoints"),
            "tpu.json: networkEndpoints: missing (state: READY; a slice has endpoints once it is READY)",
        ),
        (
            lambda d: d.update(networkEndpoints=[], state="CREATING"),
            "tpu.json: networkEndpoints: empty: the TPU has no workers (state: CREATING)",
        ),
        (
            lambda d: d.update(networkEndpoints={"ipAddress": "10.0.0.1"}),
            "tpu.json: networkEndpoints: expected a list, got an object",
        ),
        (
            lambda d: (d.pop("acceleratorType"), d.pop("acceleratorConfig")),
            "tpu.json: acceleratorType: missing (and no acceleratorConfig to derive it from)",
        ),
        (
            lambda d: (d.pop("acceleratorType"), d["acceleratorConfig"].pop("topology")),
            "tpu.json: acceleratorConfig.topology: missing (needed to derive the accelerator type)",
        ),
        (lambda d: d.update(acceleratorType=32), "tpu.json: acceleratorType: expected a string, got a number"),
        (
            lambda d: (d.update(acceleratorType=""), d["acceleratorConfig"].update(topology="4by4")),
            "tpu.json: acceleratorType: empty, and acceleratorConfig does not give a valid type",
        ),
        (
            lambda d: d.update(name="projects/p/locations/z/nodes/My TPU!"),
            "tpu.json: name: 'My TPU!' is not a valid slice name (letters, digits, '.', '_' or '-')",
        ),
    ],
)
def test_each_malformed_field_is_reported_with_its_path(tmp_path, change, problem):
    doc = describe(V5P_32)
    change(doc)
    assert problems_of(doc, tmp_path) == [problem]


def test_text_that_is_not_json_names_file_line_and_column():
    with pytest.raises(ConfigError) as info:
        slice_from_text('{"name": "x",\n  "state" "READY"}', source="tpu.json")
    assert str(info.value).startswith("tpu.json:2:11: not JSON: Expecting ':' delimiter")


def test_a_list_of_several_tpus_is_refused_with_their_names(tmp_path):
    with pytest.raises(ConfigError) as info:
        import_doc([describe(V6E_8), describe(V5P_32)], tmp_path)
    assert info.value.problems == ["tpu.json: a list of 2 TPUs (dev-v6e-8, v5p-32-eval); import one at a time"]


def test_a_missing_file_says_how_to_make_one(tmp_path):
    out = run("fleet", "import-gcloud", str(tmp_path / "nope.json"))
    assert out.exit_code == 2
    assert "nope.json: no such file" in out.stderr
    assert "tpu-vm describe NAME --zone ZONE --format=json" in out.stderr


def test_a_slice_that_is_not_ready_still_imports_with_a_warning(tmp_path):
    doc = describe(V6E_8)
    doc.update(state="STOPPED", health="UNHEALTHY_MAINTENANCE")
    path = tmp_path / "tpu.json"
    path.write_text(json.dumps(doc))
    out = run("fleet", "import-gcloud", str(path))
    assert out.exit_code == 0
    assert "orch: warning: tpu.json: state is STOPPED, not READY" in out.stderr
    assert "health is UNHEALTHY_MAINTENANCE" in out.stderr
    assert out.stdout.startswith("slices:\n  dev-v6e-8:\n")


# ---------------------------------------------------------------------------
# --write


def test_write_appends_the_slice_and_keeps_every_other_byte(tmp_path):
    fleet_path = tmp_path / "fleet.yaml"
    fleet_path.write_text(FLEET)
    out = run("fleet", "import-gcloud", str(V5P_32), "--write", "--fleet", str(fleet_path))
    assert out.exit_code == 0, out.output
    assert out.stdout == (
        f"{fleet_path}: updated: slice 'v5p-32-eval' (v5p-32, 4 worker(s)); validated: 2 slice(s), 6 worker(s)\n"
    )
    text = fleet_path.read_text()
    cut = FLEET.index("# the last worker\n") + len("# the last worker\n")
    inserted = text[cut : len(text) - (len(FLEET) - cut)]
    assert text[:cut] + text[cut + len(inserted) :] == FLEET
    assert inserted.startswith("  v5p-32-eval:\n    # imported from v5p-32-internal-only.json")
    fleet = load_fleet(fleet_path)
    assert list(fleet.model.slices) == ["local", "v5p-32-eval"]
    assert fleet.lane_members["cpu"] == ("local-w0", "local-w1")


def test_write_follows_the_files_own_indentation(tmp_path):
    fleet_path = tmp_path / "fleet.yaml"
    fleet_path.write_text("slices:\n    a:\n        workers:\n            - {index: 0, address: 10.9.0.1}\n")
    assert run("--fleet", str(fleet_path), "fleet", "import-gcloud", str(V6E_8), "--write").exit_code == 0
    text = fleet_path.read_text()
    assert "\n    dev-v6e-8:\n        # imported" in text
    assert "\n            - {index: 0, address: 203.0.113.90, internal_address: 10.146.0.7}\n" in text
    assert yaml.safe_load(text)["slices"]["dev-v6e-8"]["accelerator_type"] == "v6e-8"


def test_write_refuses_a_slice_name_that_exists_and_leaves_the_file_alone(tmp_path):
    fleet_path = tmp_path / "fleet.yaml"
    fleet_path.write_text(FLEET)
    out = run("fleet", "import-gcloud", str(V6E_8), "--slice", "local", "--write", "--fleet", str(fleet_path))
    assert out.exit_code == 2
    assert "fleet.yaml:8 slices.local: a slice named 'local' already exists" in out.stderr
    assert "hint: pass --slice NAME" in out.stderr
    assert fleet_path.read_text() == FLEET


def test_write_refuses_a_result_that_would_not_validate(tmp_path):
    # The example fleet's lanes name no slice: with a second slice they must.
    fleet_path = tmp_path / "fleet.yaml"
    original = (ROOT / "fleet.yaml").read_text()
    fleet_path.write_text(original)
    out = run("fleet", "import-gcloud", str(V6E_8), "--write", "--fleet", str(fleet_path))
    assert out.exit_code == 2
    assert "lanes.operator: 'slice' is required when the fleet has several slices" in out.stderr
    assert fleet_path.read_text() == original


def test_importing_the_same_tpu_twice_is_refused_as_a_duplicate_worker(tmp_path):
    fleet_path = tmp_path / "fleet.yaml"
    fleet_path.write_text(FLEET)
    assert run("fleet", "import-gcloud", str(V5P_32), "--write", "--fleet", str(fleet_path)).exit_code == 0
    once = fleet_path.read_text()
    out = run("fleet", "import-gcloud", str(V5P_32), "--slice", "again", "--write", "--fleet", str(fleet_path))
    assert out.exit_code == 2
    assert "duplicate worker: 10.164.0.10:22 is also slices.v5p-32-eval.workers[0]" in out.stderr
    assert fleet_path.read_text() == once


def test_write_creates_a_fleet_file_that_loads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ORCH_FLEET", raising=False)
    out = run("fleet", "import-gcloud", str(V6E_32), "--write", "--user", "tpu-ops")
    assert out.exit_code == 0, out.output
    assert out.stdout.startswith("fleet.yaml: created: slice 'train-v6e-32' (v6e-32, 8 worker(s))")
    fleet = load_fleet(tmp_path / "fleet.yaml")
    assert len(fleet.workers) == 8 and fleet.workers[0].user == "tpu-ops"
    assert (tmp_path / "fleet.yaml").stat().st_mode & 0o777 == 0o644


def test_write_adds_a_slices_section_when_there_is_none():
    text = add_slice("version: 1\nbundles: {}", Path("fleet.yaml"), import_describe(V6E_8))
    assert text.startswith("version: 1\nbundles: {}\n\nslices:\n  dev-v6e-8:\n")
    assert build_fleet(loads(text, Path("fleet.yaml"))).model.slices["dev-v6e-8"].accelerator_type == "v6e-8"


def test_write_refuses_flow_style_slices():
    with pytest.raises(ConfigError) as info:
        add_slice(
            "slices: {a: {workers: [{index: 0, address: 10.9.0.1}]}}\n", Path("fleet.yaml"), import_describe(V6E_8)
        )
    assert str(info.value).startswith("fleet.yaml:1 slices: not a block mapping; add the slice by hand")


def test_the_last_line_without_a_newline_still_gets_one():
    text = add_slice(
        "slices:\n  a:\n    workers: [{index: 0, address: 10.9.0.1}]", Path("fleet.yaml"), import_describe(V6E_8)
    )
    assert text.startswith("slices:\n  a:\n    workers: [{index: 0, address: 10.9.0.1}]\n  dev-v6e-8:\n")
    build_fleet(loads(text, Path("fleet.yaml")))


@pytest.mark.parametrize("field", ["runtimeVersion", "name"])
def test_a_line_break_in_a_describe_field_cannot_add_keys_through_a_comment(tmp_path, field):
    doc = describe(V5P_32)
    doc[field] = doc[field] + "\nshared_dir: /evil\r\u2028python: -c"
    (tmp_path / "tpu.json").write_text(json.dumps(doc))
    imp = import_describe(tmp_path / "tpu.json", name="v5p")
    fleet_path = tmp_path / "fleet.yaml"
    fleet_path.write_text(FLEET)
    from orchestrator.gcloud import write_slice

    write_slice(fleet_path, imp)
    data = yaml.safe_load(fleet_path.read_text())
    assert set(data["slices"][imp.name]) == {"accelerator_type", "skip_metadata_query", "workers"}
    assert "\\nshared_dir: /evil\\r\\u2028python: -c" in fleet_path.read_text()


@pytest.mark.parametrize(
    "content",
    [b"\xff\xfe{\x00", b'{"name": "caf\xe9"}', b'{"a": ' + b"1" * 5000 + b"}", b"[" * 100_000 + b"]" * 100_000],
)
def test_undecodable_or_absurd_describe_files_are_refused_cleanly(tmp_path, content):
    path = tmp_path / "tpu.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError):
        import_describe(path)
