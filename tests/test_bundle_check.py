"""`orch bundle check`: findings from the wheels' own metadata (local mirrors and PyPI, no torch download)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from orchestrator.bundle import WheelMeta, lock_bundle
from orchestrator.bundle.check import Finding, check_bundle, check_wheels
from orchestrator.cli import main
from orchestrator.fleet import load_fleet

XLA_TPU = "torch_xla 2.9.0 [tpu] requires libtpu==0.0.21, but the bundle pins libtpu 0.0.36"


def write_fleet(directory: Path, bundles: dict, lanes: dict | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    doc = {"version": 1, "slices": {"s": {"workers": [{"index": 0, "address": "127.0.0.1"}]}}, "bundles": bundles}
    if lanes:
        doc["lanes"] = lanes
    path = directory / "fleet.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def messages(findings) -> list[str]:
    return [str(f) for f in findings]


@pytest.fixture(scope="module")
def xla_fleet(tmp_path_factory) -> Path:
    # Stock PyPI torch_xla 2.9.0 against the libtpu of the team's receipt: pip cannot lock this.
    return write_fleet(
        tmp_path_factory.mktemp("xla"),
        {"torch-2.9": {"python": "3.11", "pins": ["torch_xla[tpu]==2.9.0", "libtpu==0.0.36", "jax==0.10.2"]}},
    )


@pytest.fixture(scope="module")
def xla_report(xla_fleet):
    return check_bundle(load_fleet(xla_fleet), "torch-2.9")


def test_check_finds_that_stock_torch_xla_tpu_wants_an_older_libtpu_than_the_pin(xla_report):
    report = xla_report
    assert report.metadata_from == "index" and report.bundle_id is None and not report.ok
    assert sorted(w.filename for w in report.wheels) == [
        "jax-0.10.2-py3-none-any.whl",
        "libtpu-0.0.36-cp311-cp311-manylinux_2_31_x86_64.whl",
        "torch_xla-2.9.0-cp311-cp311-manylinux_2_28_x86_64.whl",
    ]
    libtpu, jax = [f for f in report.findings if f.kind == "libtpu"]
    assert str(libtpu) == f"error: {XLA_TPU}"
    assert (libtpu.wheel, libtpu.other, libtpu.requirement) == (
        "torch_xla 2.9.0 [tpu]",
        "libtpu 0.0.36",
        "libtpu==0.0.21",
    )
    # Stock torch_xla declares no torch requirement; the bundle forgot torch altogether.
    assert "error: torch_xla 2.9.0 needs torch 2.9.* (its own release line), but the bundle has no torch" in messages(
        report.findings
    )
    # jax's [tpu] extra names the libtpu jax was released with: worth a warning, not a refusal.
    assert str(jax) == (
        "warning: jax 0.10.2 [tpu] requires libtpu==0.0.42.*, but the bundle pins libtpu 0.0.36 "
        "(jax's [tpu] extra is not requested)"
    )
    assert [f.severity for f in report.findings] == ["error", "error", "warning"]


def test_the_torch_xla_release_libtpu_counts_even_without_the_tpu_extra(xla_report):
    wheels = xla_report.wheels
    findings = check_wheels("b", "3.11", ["torch_xla==2.9.0", "libtpu==0.0.36"], wheels, complete=False)
    assert f"error: {XLA_TPU} (torch_xla's [tpu] extra is not requested)" in messages(findings)
    libtpu_021 = [w for w in wheels if w.name == "libtpu"][0]
    same = check_wheels(
        "b",
        "3.11",
        ["torch_xla[tpu]==2.9.0", "libtpu==0.0.21"],
        [w for w in wheels if w.name != "libtpu"] + [_as_version(libtpu_021, "0.0.21")],
        complete=False,
    )
    assert not [f for f in same if f.kind == "libtpu" and f.wheel.startswith("torch_xla")]


def _as_version(wheel: WheelMeta, version: str) -> WheelMeta:
    return WheelMeta(
        wheel.name,
        version,
        wheel.filename.replace(wheel.version, version),
        wheel.requires_python,
        wheel.requires_dist,
        wheel.tags,
    )


def test_check_finds_a_jax_jaxlib_mismatch_from_jaxs_own_requirement(tmp_path):
    path = write_fleet(tmp_path, {"skew": {"python": "3.11", "pins": ["jax==0.10.2", "jaxlib==0.4.30"]}})
    out = CliRunner().invoke(main, ["--fleet", str(path), "bundle", "check", "skew", "--json"])
    assert out.exit_code == 1
    doc = json.loads(out.output)
    assert (doc["ok"], doc["errors"], doc["warnings"], doc["metadata_from"]) == (False, 1, 0, "index")
    assert [w["filename"] for w in doc["wheels"]] == [
        "jax-0.10.2-py3-none-any.whl",
        "jaxlib-0.4.30-cp311-cp311-manylinux2014_x86_64.whl",
    ]
    assert doc["findings"] == [
        {
            "severity": "error",
            "kind": "jax-jaxlib",
            "message": "jax 0.10.2 requires jaxlib<=0.10.2,>=0.10.1, but the bundle pins jaxlib 0.4.30",
            "wheel": "jax 0.10.2",
            "other": "jaxlib 0.4.30",
            "requirement": "jaxlib<=0.10.2,>=0.10.1",
        }
    ]


@pytest.fixture(scope="module")
def locked_small(tmp_path_factory):
    directory = tmp_path_factory.mktemp("small")
    bundles = {"small": {"python": "3.11", "pins": ["ml_dtypes==0.5.4"]}}
    fleet = load_fleet(write_fleet(directory, bundles))
    lock_bundle(fleet, "small", cache_root=tmp_path_factory.mktemp("cache"))
    return directory, bundles


def test_a_consistent_locked_bundle_checks_clean(locked_small):
    directory, _ = locked_small
    report = check_bundle(load_fleet(directory / "fleet.yaml"), "small")
    assert report.metadata_from == "lock" and report.ok and report.findings == ()
    assert report.bundle_id and [w.name for w in report.wheels] == ["ml-dtypes", "numpy"]
    out = CliRunner().invoke(main, ["--fleet", str(directory / "fleet.yaml"), "bundle", "check", "small"])
    assert out.exit_code == 0 and "bundle small: ok: 0 error(s), 0 warning(s), 2 wheels" in out.output


def test_cp311_wheels_in_a_bundle_that_now_declares_python_312_are_errors(locked_small):
    directory, bundles = locked_small
    write_fleet(directory, {"small": {**bundles["small"], "python": "3.12"}})
    try:
        report = check_bundle(load_fleet(directory / "fleet.yaml"), "small")
    finally:
        write_fleet(directory, bundles)
    assert messages(report.findings) == [
        "error: ml_dtypes 0.5.4 (ml_dtypes-0.5.4-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl) "
        "is built for cp311, but the bundle's Python is 3.12",
        "error: numpy 2.4.6 (numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl) "
        "is built for cp311, but the bundle's Python is 3.12",
        "warning: the lock was made for Python 3.11, but bundle 'small' now declares Python 3.12; "
        "re-run `orch bundle lock small`",
    ]
    assert report.findings[0].kind == "python" and report.findings[0].other == "Python 3.12"


def test_orch_bundle_check_prints_each_finding_and_exits_non_zero_on_errors(locked_small):
    directory, bundles = locked_small
    write_fleet(directory, {"small": {**bundles["small"], "python": "3.12"}})
    try:
        out = CliRunner().invoke(main, ["bundle", "check", "small", "--fleet", str(directory / "fleet.yaml")])
    finally:
        write_fleet(directory, bundles)
    assert out.exit_code == 1
    lines = out.output.splitlines()
    assert lines[0].startswith("error: ml_dtypes 0.5.4 (") and lines[2].startswith("warning: the lock was made")
    assert lines[3].startswith("bundle small: FAILED: 2 error(s), 1 warning(s), 2 wheels, Python 3.12 (lock ")


def test_an_unlocked_pin_with_only_a_cp311_wheel_is_reported_for_python_312(tmp_path):
    # torch 2.13.0+cpu exists here only as a cp311 wheel in /opt/wheels.
    fleet = load_fleet(
        write_fleet(
            tmp_path,
            {
                "torch312": {
                    "python": "3.12",
                    "pins": ["torch==2.13.0+cpu"],
                    "source": {"find_links": ["/opt/wheels"], "no_index": True},
                }
            },
        )
    )
    report = check_bundle(fleet, "torch312")
    assert messages(report.findings) == [
        "error: torch 2.13.0+cpu (torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl) is built for cp311, "
        "but the bundle's Python is 3.12"
    ]


def test_torch_xla_only_loads_into_torch_from_its_own_release_line(xla_report, tmp_path):
    fleet = load_fleet(
        write_fleet(
            tmp_path,
            {
                "torch": {
                    "python": "3.11",
                    "pins": ["torch==2.13.0+cpu"],
                    "source": {"find_links": ["/opt/wheels"], "no_index": True},
                }
            },
        )
    )
    torch = check_bundle(fleet, "torch").wheels
    xla = [w for w in xla_report.wheels if w.name == "torch-xla"]
    findings = check_wheels("b", "3.11", ["torch_xla==2.9.0", "torch==2.13.0+cpu"], [*xla, *torch], complete=False)
    assert messages(findings) == [
        "error: torch_xla 2.9.0 declares no torch requirement, but only loads into torch from its own release "
        "line (2.9.*), and the bundle pins torch 2.13.0+cpu"
    ]
    assert (findings[0].kind, findings[0].requirement) == ("torch_xla-torch", "torch==2.9.*")


def test_a_tpu_lane_needs_libtpu_in_its_bundle(xla_report):
    xla = [w for w in xla_report.wheels if w.name == "torch-xla"]
    findings = check_wheels("b", "3.11", ["torch_xla==2.9.0"], xla, complete=False, tpu_lanes=["operator"])
    assert (
        "error: lane operator runs this bundle on TPU, but the bundle has no libtpu "
        "(torch_xla 2.9.0 [tpu] requires libtpu==0.0.21)"
    ) in messages(findings)
    assert not [f for f in check_wheels("b", "3.11", ["torch_xla==2.9.0"], xla, complete=False) if f.kind == "libtpu"]


# Pure tag logic (the metadata here is hand-written on purpose).


def _wheel(filename: str, requires_python: str | None = None) -> WheelMeta:
    from orchestrator.bundle import wheel_tags

    name, version = filename.split("-")[:2]
    return WheelMeta(name.replace("_", "-"), version, filename, requires_python, (), wheel_tags(filename))


@pytest.mark.parametrize(
    "filename, expected",
    [
        (
            "jaxlib-0.4.30-cp311-cp311-macosx_11_0_arm64.whl",
            "error: jaxlib 0.4.30 (jaxlib-0.4.30-cp311-cp311-macosx_11_0_arm64.whl) is built for macosx_11_0_arm64, "
            "not linux x86_64",
        ),
        (
            "jaxlib-0.4.30-cp311-cp311-manylinux2014_aarch64.whl",
            "error: jaxlib 0.4.30 (jaxlib-0.4.30-cp311-cp311-manylinux2014_aarch64.whl) is built for "
            "manylinux2014_aarch64, not linux x86_64",
        ),
        (
            "x-1.0-cp311-cp311-manylinux_2_38_x86_64.whl",
            "warning: x 1.0 (x-1.0-cp311-cp311-manylinux_2_38_x86_64.whl) needs glibc 2.38, newer than the glibc 2.35 "
            "of TPU VM images",
        ),
        ("libtpu-0.0.37+custom-cp311-cp311-linux_x86_64.whl", None),
        ("opt_einsum-3.4.0-py3-none-any.whl", None),
        ("uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", None),
        (
            "ml_dtypes-0.5.4-cp312-cp312-manylinux_2_27_x86_64.whl",
            "error: ml_dtypes 0.5.4 (ml_dtypes-0.5.4-cp312-cp312-manylinux_2_27_x86_64.whl) is built for cp312, "
            "but the bundle's Python is 3.11",
        ),
    ],
)
def test_platform_and_python_tags_are_checked_against_cpython_linux_x86_64(filename, expected):
    findings = check_wheels("b", "3.11", [], [_wheel(filename)], complete=False)
    assert messages(findings) == ([expected] if expected else [])


def test_requires_python_is_checked_against_the_bundle_python():
    findings = check_wheels("b", "3.11", [], [_wheel("jax-0.11.0-py3-none-any.whl", ">=3.12")], complete=False)
    assert findings == [
        Finding(
            "error",
            "python",
            "jax 0.11.0 requires Python >=3.12, but the bundle's Python is 3.11",
            wheel="jax 0.11.0",
            other="Python 3.11",
            requirement="Requires-Python >=3.12",
        )
    ]
