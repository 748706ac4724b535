"""Fleet validation: every error names file, line, YAML path and what was expected."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml

from orchestrator.errors import ConfigError
from orchestrator.fleet import build_fleet, json_schema, load_fleet
from orchestrator.yamlsrc import loads

ROOT = Path(__file__).resolve().parent.parent

GOOD = """\
version: 1
slices:
  s:
    workers:
      - {index: 0, address: 10.0.0.1}
      - {index: 1, address: 10.0.0.2}
      - {index: 2, address: 10.0.0.3}
bundles:
  torch-2.11: {python: "3.11", pins: [torch==2.11.0]}
  jax-cpu: {python: "3.11", pins: [jax==0.10.2, jaxlib==0.10.2]}
runtime_profiles:
  tpu: {env: {PJRT_DEVICE: TPU}, forbid: [XLA_USE_BF16]}
cache_policies:
  per-host: {mode: per-host}
lanes:
  operator: {workers: 0-1, bundle: torch-2.11, runtime: tpu, cache: per-host, platform: tpu}
  validation: {workers: [2], bundle: jax-cpu, platform: cpu}
"""


def problems_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        build_fleet(loads(textwrap.dedent(text), Path("fleet.yaml")))
    return info.value.problems


def edit(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new)


def test_the_good_fleet_loads_and_orders_lane_workers_by_index():
    fleet = build_fleet(loads(GOOD, Path("fleet.yaml")))
    assert [w.name for w in fleet.lane_workers("operator")] == ["s-w0", "s-w1"]
    assert fleet.worker("s-w2").lane == "validation"
    assert fleet.worker("s-w0").port == 22


def test_a_misspelled_bundle_name_is_suggested_with_file_line_and_path():
    assert problems_of(edit("bundle: torch-2.11,", "bundle: torch211,")) == [
        "fleet.yaml:16 lanes.operator.bundle: no bundle 'torch211'; did you mean 'torch-2.11'? "
        "(defined: torch-2.11, jax-cpu)"
    ]


def test_a_misspelled_lane_key_is_suggested():
    assert problems_of(edit("platform: cpu}", "platfrom: cpu}")) == [
        "fleet.yaml:17 lanes.validation.platfrom: unknown key 'platfrom'; did you mean 'platform'? "
        "(expected one of: bundle, cache, megascale_port, platform, runtime, slice, slices, workers)"
    ]


def test_an_unknown_top_level_key_is_reported_with_its_line():
    assert problems_of(GOOD + "lane: {}\n") == [
        "fleet.yaml:18 lane: unknown key 'lane'; did you mean 'lanes'? (expected one of: bundles, "
        "cache_policies, lanes, runtime_profiles, slices, ssh, version)"
    ]


def test_a_wrong_type_says_what_was_expected():
    assert problems_of(edit("{index: 1, address: 10.0.0.2}", "{index: 1, address: 10.0.0.2, port: abc}")) == [
        "fleet.yaml:6 slices.s.workers[1].port: expected an integer, got 'abc'"
    ]


def test_an_unknown_platform_lists_the_choices():
    assert problems_of(edit("platform: cpu}", "platform: gpu}")) == [
        "fleet.yaml:17 lanes.validation.platform: expected one of 'tpu' or 'cpu', got 'gpu'; did you mean 'tpu'?"
    ]


def test_overlapping_lanes_are_an_error_naming_both():
    assert problems_of(edit("workers: [2]", "workers: [1, 2]")) == [
        "fleet.yaml:17 lanes.validation.workers: worker s-w1 is already in lane 'operator'; "
        "a worker belongs to one lane at a time"
    ]


def test_duplicate_worker_addresses_and_indices_are_errors():
    text = edit("{index: 2, address: 10.0.0.3}", "{index: 2, address: 10.0.0.2}")
    assert problems_of(text) == [
        "fleet.yaml:7 slices.s.workers[2]: duplicate worker: 10.0.0.2:22 is also slices.s.workers[1]",
        "fleet.yaml:17 lanes.validation.workers: slice 's' has no worker index 2 (indices: 0, 1)",
    ]
    assert problems_of(edit("{index: 2, address: 10.0.0.3}", "{index: 1, address: 10.0.0.3}"))[0] == (
        "fleet.yaml:7 slices.s.workers[2].index: duplicate worker index 1 (also slices.s.workers[1])"
    )


def test_a_lane_over_a_missing_worker_index_is_an_error():
    assert problems_of(edit("workers: [2]", "workers: [7]")) == [
        "fleet.yaml:17 lanes.validation.workers: slice 's' has no worker index 7 (indices: 0, 1, 2)"
    ]


def test_a_lane_with_no_workers_is_refused_naming_the_lane():
    assert problems_of(edit("workers: [2]", "workers: []")) == [
        "fleet.yaml:17 lanes.validation.workers: lane 'validation' has no workers; expected 'all', an index, "
        "a range like '0-5', or a non-empty list of those"
    ]


def test_unpinned_requirements_are_refused():
    assert problems_of(edit("pins: [torch==2.11.0]", "pins: [torch>=2.11]")) == [
        "fleet.yaml:9 bundles.torch-2.11: pin 'torch>=2.11' is not exact; expected NAME==VERSION (e.g. 'jax==0.10.2')"
    ]


def test_folklore_variables_in_a_profile_are_refused_with_the_reason():
    assert problems_of(edit("env: {PJRT_DEVICE: TPU}", "env: {PJRT_DEVICE: TPU, XLA_USE_SPMD: '1'}")) == [
        "fleet.yaml:12 runtime_profiles.tpu.env.XLA_USE_SPMD: XLA_USE_SPMD is not the SPMD switch; "
        "the launcher calls torch_xla.runtime.use_spmd()"
    ]


def test_unquoted_non_string_env_values_ask_for_quotes():
    assert problems_of(edit("env: {PJRT_DEVICE: TPU}", "env: {PJRT_DEVICE: TPU, X: [1]}")) == [
        "fleet.yaml:12 runtime_profiles.tpu: env.X: expected a string (quote it in YAML), got [1]"
    ]


def test_single_writer_cache_needs_a_shared_mount():
    text = edit("per-host: {mode: per-host}", "per-host: {mode: single-writer, root: /mnt/x/cache}")
    assert problems_of(text) == [
        "fleet.yaml:14 cache_policies.per-host.root: single-writer for lane 'operator' needs a shared "
        "mount, but slice 's' has no shared_dir"
    ]


def test_a_jax_cache_writer_that_is_not_process_zero_is_refused():
    text = (
        GOOD.replace("  s:\n", "  s:\n    shared_dir: /mnt/x\n")
        .replace("per-host: {mode: per-host}", "per-host: {mode: single-writer, root: /mnt/x/cache, writer: 2}")
        .replace("workers: [2], bundle: jax-cpu, platform: cpu}", "workers: [2], bundle: jax-cpu, platform: cpu}")
    )
    text = text.replace("operator: {workers: 0-1, bundle: torch-2.11,", "operator: {workers: 0-1, bundle: jax-cpu,")
    assert problems_of(text) == [
        "fleet.yaml:15 cache_policies.per-host.writer: writer 2 is not a worker of lane 'operator'"
    ]
    text = text.replace("writer: 2", "writer: 1")
    assert problems_of(text) == [
        "fleet.yaml:15 cache_policies.per-host.writer: lane 'operator' runs JAX, which only writes its cache "
        "from process 0 (worker 0); writer 1 would never write"
    ]


def test_duplicate_yaml_keys_are_an_error_not_last_wins():
    assert problems_of(GOOD + "lanes: {}\n") == [
        "fleet.yaml:18 lanes: duplicate key 'lanes' (first defined on line 15)"
    ]


def test_invalid_yaml_names_the_line():
    assert problems_of("slices: [1\n") == ["fleet.yaml:2 not valid YAML: expected ',' or ']', but got '<stream end>'"]


def test_a_missing_fleet_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.yaml: no such fleet file"):
        load_fleet(tmp_path / "nope.yaml")


def test_the_fleet_is_found_via_env_then_cwd(tmp_path, monkeypatch):
    (tmp_path / "fleet.yaml").write_text(GOOD)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ORCH_FLEET", raising=False)
    assert load_fleet().path == tmp_path / "fleet.yaml"
    other = tmp_path / "other.yaml"
    other.write_text(GOOD)
    monkeypatch.setenv("ORCH_FLEET", str(other))
    assert load_fleet().path == other


def test_worker_selection_by_name_glob_and_range():
    fleet = build_fleet(loads(GOOD, Path("fleet.yaml")))
    assert [w.name for w in fleet.select(workers="0-1")] == ["s-w0", "s-w1"]
    assert [w.name for w in fleet.select(workers="s-w2,s-w0")] == ["s-w0", "s-w2"]
    assert [w.name for w in fleet.select(lane="operator", workers="s-w*")] == ["s-w0", "s-w1"]
    with pytest.raises(
        ConfigError, match=r"'s-w9' matches no worker; did you mean 's-w2'\? \(have: s-w0, s-w1, s-w2\)"
    ):
        fleet.select(workers="s-w9")


@pytest.mark.parametrize("spec", [",", " , ", ""])
def test_a_worker_selection_that_names_nothing_is_refused_instead_of_running_nowhere(spec):
    fleet = build_fleet(loads(GOOD, Path("fleet.yaml")))
    with pytest.raises(ConfigError) as info:
        fleet.select(workers=spec)
    assert str(info.value) == (
        f"--workers {spec!r} names no worker; expected names, globs or index ranges, "
        "comma-separated (have: s-w0, s-w1, s-w2)"
    )


def test_exec_with_an_empty_worker_selection_says_so_without_a_traceback(tmp_path):
    from click.testing import CliRunner

    from orchestrator.cli import main

    (tmp_path / "fleet.yaml").write_text(GOOD)
    result = CliRunner().invoke(main, ["--fleet", str(tmp_path / "fleet.yaml"), "exec", "--workers", ",", "--", "true"])
    assert result.exit_code == 2
    assert "orch: error: --workers ',' names no worker" in result.output
    assert isinstance(result.exception, SystemExit)  # the CLI's clean exit, not a ValueError


def test_an_unknown_lane_on_the_command_line_is_suggested():
    fleet = build_fleet(loads(GOOD, Path("fleet.yaml")))
    with pytest.raises(ConfigError, match="no lane 'validaton'; did you mean 'validation'"):
        fleet.lane_workers("validaton")


def test_the_shipped_schema_is_generated_from_the_model():
    shipped = json.loads((ROOT / "orchestrator" / "schema" / "fleet.schema.json").read_text())
    assert shipped == json_schema(), "regenerate: orch fleet schema > orchestrator/schema/fleet.schema.json"


def test_the_example_fleet_validates_against_model_and_schema():
    jsonschema = pytest.importorskip("jsonschema")
    fleet = load_fleet(ROOT / "fleet.yaml")
    assert set(fleet.model.lanes) == {"operator", "validation"}
    jsonschema.validate(yaml.safe_load((ROOT / "fleet.yaml").read_text()), json_schema())


def test_an_unquoted_yaml_off_is_the_cache_mode_off():
    fleet = build_fleet(loads(GOOD.replace("per-host: {mode: per-host}", "per-host: {mode: off}"), Path("f.yaml")))
    assert fleet.model.cache_policies["per-host"].mode == "off"
