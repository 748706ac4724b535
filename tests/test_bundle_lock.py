"""`orch bundle lock`: real pip resolution against the local wheel mirrors, real wheels in the cache."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from orchestrator.bundle import (
    LockedWheel,
    ResolutionError,
    cache_path,
    compute_bundle_id,
    lock_bundle,
    read_lock,
    write_lock,
)
from orchestrator.cli import main
from orchestrator.errors import BundleError, ConfigError
from orchestrator.fleet import load_fleet

MIRROR = Path("/opt/pypi/files")


def write_fleet(directory: Path, bundles: dict, lanes: dict | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    doc = {"version": 1, "slices": {"s": {"workers": [{"index": 0, "address": "127.0.0.1"}]}}, "bundles": bundles}
    if lanes:
        doc["lanes"] = lanes
    path = directory / "fleet.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("wheel-cache")


SMALL = {"small": {"python": "3.11", "pins": ["ml_dtypes==0.5.4"], "provenance": {"note": "mirror wheels"}}}


@pytest.fixture(scope="module")
def small_lock(tmp_path_factory, cache):
    fleet = load_fleet(write_fleet(tmp_path_factory.mktemp("small"), SMALL))
    return fleet, lock_bundle(fleet, "small", cache_root=cache)


def test_locking_a_small_bundle_lists_every_wheel_with_hash_size_source_and_its_own_metadata(small_lock, cache):
    fleet, result = small_lock
    lock = result.lock
    assert result.written and result.path == fleet.base_dir / "locks" / "small.lock.json"
    assert [w.name for w in lock.wheels] == ["ml-dtypes", "numpy"]
    ml, numpy = lock.wheels
    assert ml.version == "0.5.4" and ml.filename.startswith("ml_dtypes-0.5.4-cp311-cp311-manylinux")
    for wheel in lock.wheels:
        cached = cache_path(wheel.sha256, wheel.filename, cache)
        assert sha256_of(cached) == wheel.sha256 and cached.stat().st_size == wheel.size
        assert Path(wheel.source).is_file() and sha256_of(Path(wheel.source)) == wheel.sha256
        assert wheel.tags and all(t.startswith("cp311-cp311-manylinux_2_2") for t in wheel.tags)
    assert "numpy>=1.21" in ml.requires_dist and ml.requires_python == ">=3.9"
    assert numpy.requires_python == ">=3.11" and numpy.requires_dist == ()
    assert (lock.python, lock.pins, lock.provenance) == ("3.11", ("ml_dtypes==0.5.4",), {"note": "mirror wheels"})
    assert lock.resolver["tool"] == "pip" and lock.resolver["pip_version"]
    assert lock.target == {
        "implementation": "cp",
        "python": "3.11",
        "platform": "linux",
        "machine": "x86_64",
        "max_glibc": "2.35",
    }
    assert read_lock(result.path) == lock
    assert result.fetched_bytes == lock.total_size == ml.size + numpy.size


def test_locking_twice_with_nothing_changed_leaves_the_file_byte_identical(small_lock, cache, tmp_path):
    fleet, first = small_lock
    before = first.path.read_bytes()
    mtime = first.path.stat().st_mtime_ns
    again = lock_bundle(fleet, "small", cache_root=cache)
    assert not again.written and again.path.read_bytes() == before and again.path.stat().st_mtime_ns == mtime
    assert again.lock.bundle_id == first.lock.bundle_id == again.previous_id
    assert again.fetched_bytes == 0 and again.reused_bytes == first.lock.total_size
    # A second checkout of the same fleet locks to the same bytes.
    other = load_fleet(write_fleet(tmp_path / "checkout", SMALL))
    assert lock_bundle(other, "small", cache_root=cache).path.read_bytes() == before


def test_the_lock_file_is_pretty_json_in_a_fixed_order(small_lock):
    _, result = small_lock
    text = result.path.read_text()
    doc = json.loads(text)
    assert text == json.dumps(doc, indent=2) + "\n"
    assert list(doc) == ["schema_version", "bundle", "bundle_id", "spec", "target", "resolver", "wheels"]
    assert doc["schema_version"] == 1 and doc["bundle_id"] == result.lock.bundle_id
    assert list(doc["spec"]) == ["python", "pins", "source", "provenance"]
    assert list(doc["wheels"][0]) == [
        "name",
        "version",
        "filename",
        "sha256",
        "size",
        "source",
        "requires_python",
        "requires_dist",
        "tags",
    ]
    assert [w["name"] for w in doc["wheels"]] == sorted(w["name"] for w in doc["wheels"])
    assert "time" not in text and "date" not in text


def test_the_bundle_id_covers_the_python_and_the_exact_files_but_not_notes_or_sources(small_lock):
    _, result = small_lock
    lock = result.lock
    assert len(lock.bundle_id) == 16 and lock.bundle_id == compute_bundle_id("3.11", reversed(lock.wheels))
    noted = dataclasses.replace(
        lock,
        provenance={"note": "other"},
        wheels=tuple(dataclasses.replace(w, source="https://mirror.example/" + w.filename) for w in lock.wheels),
    )
    assert noted.bundle_id == lock.bundle_id and noted.digest != lock.digest
    assert dataclasses.replace(lock, python="3.12").bundle_id != lock.bundle_id
    other = dataclasses.replace(lock.wheels[1], sha256="0" * 64)
    assert dataclasses.replace(lock, wheels=(lock.wheels[0], other)).bundle_id != lock.bundle_id


def test_a_hand_edited_lock_is_refused(small_lock, tmp_path):
    _, result = small_lock
    doc = json.loads(result.path.read_text())
    doc["wheels"][1]["sha256"] = "f" * 64
    edited = tmp_path / "edited.lock.json"
    edited.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="does not match the wheels listed"):
        read_lock(edited)
    doc["schema_version"] = 99
    edited.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="schema_version 99"):
        read_lock(edited)
    with pytest.raises(ConfigError, match="no lock file"):
        read_lock(tmp_path / "absent.lock.json")


def test_write_lock_replaces_the_file_atomically_and_only_when_it_changes(small_lock, tmp_path):
    _, result = small_lock
    path = tmp_path / "locks" / "x.lock.json"
    assert write_lock(path, result.lock) is True
    assert write_lock(path, result.lock) is False
    changed = dataclasses.replace(result.lock, provenance={"note": "rebuilt"})
    assert write_lock(path, changed) is True and read_lock(path) == changed
    assert sorted(p.name for p in path.parent.iterdir()) == ["x.lock.json"]


def test_a_damaged_wheel_in_the_cache_is_fetched_again_and_verified(tmp_path):
    fleet = load_fleet(write_fleet(tmp_path / "fleet", {"tiny": {"python": "3.11", "pins": ["opt_einsum==3.4.0"]}}))
    cache = tmp_path / "cache"
    first = lock_bundle(fleet, "tiny", cache_root=cache)
    wheel = first.lock.wheels[0]
    cached = cache_path(wheel.sha256, wheel.filename, cache)
    cached.write_bytes(cached.read_bytes()[:-10] + b"x" * 10)
    again = lock_bundle(fleet, "tiny", cache_root=cache)
    assert again.fetched_bytes == wheel.size and sha256_of(cached) == wheel.sha256
    assert not again.written


def test_wheels_from_a_wheelhouse_next_to_fleet_yaml_are_recorded_relative_to_it(tmp_path):
    house = tmp_path / "fleet" / "wheels" / "custom"
    house.mkdir(parents=True)
    shutil.copy(MIRROR / "opt_einsum-3.4.0-py3-none-any.whl", house)
    fleet = load_fleet(
        write_fleet(
            tmp_path / "fleet",
            {
                "house": {
                    "python": "3.11",
                    "pins": ["opt_einsum==3.4.0"],
                    "source": {"find_links": ["wheels/custom"], "no_index": True},
                }
            },
        )
    )
    lock = lock_bundle(fleet, "house", cache_root=tmp_path / "cache").lock
    (wheel,) = lock.wheels
    assert wheel.source == "wheels/custom/opt_einsum-3.4.0-py3-none-any.whl"
    assert wheel.sha256 == sha256_of(house / wheel.filename)
    assert lock.source == {"find_links": ["wheels/custom"], "index_url": None, "extra_index_urls": [], "no_index": True}


def test_a_missing_wheelhouse_is_named_with_its_path(tmp_path):
    fleet = load_fleet(
        write_fleet(
            tmp_path,
            {"house": {"python": "3.11", "pins": ["opt_einsum==3.4.0"], "source": {"find_links": ["wheels/none"]}}},
        )
    )
    with pytest.raises(BundleError, match=r"find_links entry 'wheels/none' is not a directory \(.*wheels/none\)"):
        lock_bundle(fleet, "house", cache_root=tmp_path / "cache")


def test_conflicting_pins_fail_with_the_bundle_the_pins_and_pips_own_reason(tmp_path):
    fleet = load_fleet(write_fleet(tmp_path, {"skew": {"python": "3.11", "pins": ["jax==0.10.2", "numpy==1.26.4"]}}))
    with pytest.raises(ResolutionError) as info:
        lock_bundle(fleet, "skew", cache_root=tmp_path / "cache")
    err = info.value
    assert str(err).startswith("bundle 'skew': pip cannot resolve pins jax==0.10.2, numpy==1.26.4 for CPython 3.11")
    assert "The user requested numpy==1.26.4; jax 0.10.2 depends on numpy>=2.0" in err.reason
    assert "ERROR: Cannot install jax==0.10.2 and numpy==1.26.4" in err.tail
    assert err.pins == ["jax==0.10.2", "numpy==1.26.4"]
    assert not (tmp_path / "locks").exists()


def test_a_version_that_does_not_exist_names_that_pin(tmp_path):
    fleet = load_fleet(
        write_fleet(tmp_path, {"typo": {"python": "3.11", "pins": ["ml_dtypes==0.5.4", "opt_einsum==9.9.9"]}})
    )
    with pytest.raises(ResolutionError) as info:
        lock_bundle(fleet, "typo", cache_root=tmp_path / "cache")
    assert info.value.pins == ["opt_einsum==9.9.9"]
    assert "pin opt_einsum==9.9.9" in str(info.value)
    assert "No matching distribution found for opt_einsum==9.9.9" in info.value.reason


def test_locking_the_jax_cpu_bundle_caches_every_wheel_in_under_a_minute(tmp_path, cache):
    fleet = load_fleet(
        write_fleet(tmp_path, {"jax-cpu": {"python": "3.11", "pins": ["jax==0.10.2", "jaxlib==0.10.2"]}})
    )
    start = time.monotonic()
    result = lock_bundle(fleet, "jax-cpu", cache_root=cache)
    elapsed = time.monotonic() - start
    lock = result.lock
    assert {w.name: w.version for w in lock.wheels}.keys() == {
        "jax",
        "jaxlib",
        "ml-dtypes",
        "numpy",
        "opt-einsum",
        "scipy",
    }
    assert lock.wheel("jaxlib").version == "0.10.2" and lock.wheel("jaxlib").size > 80_000_000
    assert "jaxlib<=0.10.2,>=0.10.1" in lock.wheel("jax").requires_dist
    for wheel in lock.wheels:
        assert cache_path(wheel.sha256, wheel.filename, cache).stat().st_size == wheel.size
    assert elapsed < 60, f"locking jax-cpu took {elapsed:.1f}s"
    again = lock_bundle(fleet, "jax-cpu", cache_root=cache)
    assert not again.written and again.fetched_bytes == 0 and again.lock.bundle_id == lock.bundle_id


def test_orch_bundle_lock_prints_the_bundle_id_and_the_lock_path(tmp_path):
    path = write_fleet(tmp_path / "fleet", {"tiny": {"python": "3.11", "pins": ["opt_einsum==3.4.0"]}})
    env = {"ORCH_WHEEL_CACHE": str(tmp_path / "cache")}
    out = CliRunner().invoke(main, ["bundle", "lock", "tiny", "--fleet", str(path)], env=env)
    assert out.exit_code == 0, out.output
    lock = read_lock(tmp_path / "fleet" / "locks" / "tiny.lock.json")
    assert f"bundle tiny: 1 wheels, 71.9 kB, bundle id {lock.bundle_id}" in out.output
    assert "(written)" in out.output
    out = CliRunner().invoke(main, ["--fleet", str(path), "bundle", "lock", "tiny", "--json"], env=env)
    doc = json.loads(out.output)
    assert (doc["bundle_id"], doc["written"], doc["fetched_bytes"]) == (lock.bundle_id, False, 0)
    out = CliRunner().invoke(main, ["--fleet", str(path), "bundle", "lock", "nope"], env=env)
    assert out.exit_code == 2 and "no bundle 'nope'" in out.output


def test_locked_wheels_round_trip_through_json():
    wheel = LockedWheel(
        name="torch-xla",
        version="2.9.0",
        filename="torch_xla-2.9.0-cp311-cp311-x.whl",
        requires_python=">=3.10.0",
        requires_dist=('libtpu==0.0.21; extra == "tpu"',),
        tags=("cp311-cp311-x",),
        sha256="a" * 64,
        size=1,
        source="https://x/y.whl",
    )
    assert LockedWheel.from_json(json.loads(json.dumps(wheel.to_json())), "w") == wheel
    assert wheel.project == "torch_xla" and wheel.label == "torch_xla 2.9.0"


def test_a_damaged_wheel_in_the_controllers_cache_is_refetched_and_the_repair_is_said(tmp_path):
    import hashlib

    from orchestrator.bundle import fetch_wheels
    from orchestrator.bundle.lockfile import Lock
    from orchestrator.bundle.store import cache_path

    data = b"PK wheel bytes"
    source = tmp_path / "src" / "tiny-1.0-py3-none-any.whl"
    source.parent.mkdir()
    source.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    wheel = LockedWheel(
        name="tiny",
        version="1.0",
        filename=source.name,
        requires_python=None,
        requires_dist=(),
        tags=("py3-none-any",),
        sha256=sha,
        size=len(data),
        source=str(source),
    )
    lock = Lock(
        bundle="tiny", python="3.11", pins=(), source={}, provenance={}, target={}, resolver={}, wheels=(wheel,)
    )
    root = tmp_path / "cache"
    fetch_wheels(lock, tmp_path, root=root)
    cached = cache_path(sha, source.name, root)
    cached.write_bytes(b"PK wheel byteZ")  # same size, flipped byte: only the hash tells

    repaired: list[str] = []
    paths = fetch_wheels(lock, tmp_path, root=root, repaired=repaired)

    assert paths[sha].read_bytes() == data
    (said,) = repaired
    assert said.startswith(f"{source.name} in the controller's wheel cache ({cached}) was damaged (sha256 ")
    assert said.endswith(f"; fetched again from {source} and verified")
    repaired.clear()
    fetch_wheels(lock, tmp_path, root=root, repaired=repaired)
    assert repaired == []  # intact now: nothing to say
