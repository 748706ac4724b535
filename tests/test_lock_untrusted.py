"""A lock file is untrusted input: every field that becomes a path or a requirement line on a
worker is checked when the lock is read, and a broken file is a ConfigError naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.bundle import Lock, LockedWheel, compute_bundle_id, read_lock, write_lock
from orchestrator.errors import ConfigError


def a_wheel(**changes) -> LockedWheel:
    fields = {
        "name": "ml-dtypes",
        "version": "0.5.4",
        "filename": "ml_dtypes-0.5.4-cp311-cp311-manylinux_2_27_x86_64.whl",
        "requires_python": ">=3.9",
        "requires_dist": ("numpy>=1.21",),
        "tags": ("cp311-cp311-manylinux_2_27_x86_64",),
        "sha256": "a" * 64,
        "size": 1234,
        "source": "https://mirror.example/ml_dtypes-0.5.4-cp311-cp311-manylinux_2_27_x86_64.whl",
    }
    return LockedWheel(**{**fields, **changes})


def a_lock_doc(**wheel_changes) -> dict:
    lock = Lock(
        bundle="small",
        python="3.11",
        pins=("ml_dtypes==0.5.4",),
        source={},
        provenance={},
        target={},
        resolver={},
        wheels=(a_wheel(),),
    )
    doc = lock.to_json()
    doc["wheels"][0].update(wheel_changes)
    # keep the stored id consistent, so only the field under test is wrong
    wheels = [LockedWheel(**{**a_wheel().__dict__, **wheel_changes})] if "size" not in wheel_changes else []
    if wheels:
        doc["bundle_id"] = compute_bundle_id("3.11", wheels)
    return doc


def refusal(tmp_path: Path, doc: object) -> str:
    path = tmp_path / "small.lock.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as info:
        read_lock(path)
    assert str(path) in str(info.value)
    return str(info.value)


def test_a_well_formed_lock_reads_back(tmp_path):
    path = tmp_path / "small.lock.json"
    path.write_text(json.dumps(a_lock_doc()))
    lock = read_lock(path)
    assert lock.wheels == (a_wheel(),)
    write_lock(tmp_path / "again.lock.json", lock)
    assert read_lock(tmp_path / "again.lock.json") == lock


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"filename": "../../../.bashrc"}, "wheels[0].filename: '../../../.bashrc' is not a wheel file name"),
        ({"filename": "/etc/ml_dtypes-0.5.4-py3-none-any.whl"}, "is not a wheel file name"),
        ({"filename": "sub/ml_dtypes-0.5.4-py3-none-any.whl"}, "is not a wheel file name"),
        ({"filename": ".ml_dtypes-0.5.4-py3-none-any.whl"}, "is not a wheel file name"),
        ({"filename": "numpy-2.0.0-py3-none-any.whl"}, "is not a wheel of ml-dtypes 0.5.4"),
        ({"version": "0.5.4\nevil==1.0"}, "wheels[0].version: '0.5.4\\nevil==1.0' is not a version"),
        ({"version": "0.5.4 --index-url=http://x"}, "is not a version"),
        ({"version": "not.a.version!"}, "is not a PEP 440 version"),
        ({"name": "ML_Dtypes"}, "wheels[0].name: 'ML_Dtypes' is not a canonical distribution name"),
        ({"size": "12"}, "wheels[0].size: expected a number of bytes"),
        ({"size": -1}, "wheels[0].size: expected a number of bytes"),
        ({"size": True}, "wheels[0].size: expected a number of bytes"),
        ({"tags": "cp311"}, "wheels[0].tags: expected a list of strings"),
        ({"requires_dist": [1]}, "wheels[0].requires_dist: expected a list of strings"),
        ({"requires_python": 3}, "wheels[0].requires_python: expected a non-empty string"),
        ({"source": "https://x\n"}, "wheels[0].source: has a control character"),
        ({"sha256": "A" * 64}, "wheels[0].sha256: expected 64 lowercase hex digits"),
    ],
)
def test_a_wheel_entry_that_would_escape_a_directory_or_add_a_requirement_line_is_refused(tmp_path, change, problem):
    assert problem in refusal(tmp_path, a_lock_doc(**change))


@pytest.mark.parametrize(
    "doc",
    [None, [], "lock", 1, {"schema_version": 1}, {"schema_version": 1, "spec": [], "wheels": []}],
)
def test_a_lock_of_the_wrong_shape_is_refused(tmp_path, doc):
    assert "not a valid lock file" in refusal(tmp_path, doc)


def test_a_lock_whose_bundle_or_python_is_not_plain_is_refused(tmp_path):
    doc = a_lock_doc()
    assert "bundle: '../x' is not a bundle name" in refusal(tmp_path, {**doc, "bundle": "../x"})
    spec = {**doc["spec"], "python": "3.11\n"}
    assert "spec.python: expected a Python version" in refusal(tmp_path, {**doc, "spec": spec})
    assert "spec.source: expected an object" in refusal(tmp_path, {**doc, "spec": {**doc["spec"], "source": [1]}})


def test_undecodable_and_absurd_lock_files_are_refused(tmp_path):
    path = tmp_path / "small.lock.json"
    for content in (b"\xff\xfe\x00", b"[" * 100_000, b'{"schema_version": ' + b"9" * 5000 + b"}"):
        path.write_bytes(content)
        with pytest.raises(ConfigError, match="small.lock.json: not a readable lock file"):
            read_lock(path)
