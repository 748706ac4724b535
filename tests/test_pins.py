"""The one pin parser (hostside.pins): exact pins with extras and any spelling of a name."""

from __future__ import annotations

import pytest

from hostside import pins


def test_an_exact_pin_parses_with_extras_and_a_normalized_name():
    assert pins.parse_pin("torch_xla[tpu]==2.9.0") == pins.Pin("torch-xla", ("tpu",), "2.9.0")
    assert pins.parse_pin("  JAX == 0.9.0 ") == pins.Pin("jax", (), "0.9.0")
    assert pins.parse_pin("libtpu===0.0.36") == pins.Pin("libtpu", (), "0.0.36")
    assert pins.parse_pin("a.b_c[X, y_z]==1+local").extras == ("x", "y-z")
    assert pins.parse_pin("torch==2.13.0+cpu").version == "2.13.0+cpu"


@pytest.mark.parametrize(
    "text", ["jax", "jax>=0.9", "jax==", "jax ~= 0.9", "jax==0.9; python_version>'3'", "jax @ https://x/y.whl", ""]
)
def test_anything_but_an_exact_pin_is_refused(text):
    assert not pins.is_exact(text)
    with pytest.raises(ValueError, match="not exact"):
        pins.parse_pin(text)


def test_pinned_versions_keep_the_exact_pins_by_normalized_name():
    assert pins.pinned_versions(["torch_xla[tpu]==2.9.0", "JAX==0.9.0", "libtpu===0.0.36", "numpy>=2"]) == {
        "torch-xla": "2.9.0",
        "jax": "0.9.0",
        "libtpu": "0.0.36",
    }


def test_the_project_name_of_any_requirement_is_normalized():
    assert pins.project_name("Torch_XLA[tpu]>=2") == "torch-xla"
    assert pins.project_name("jax.lib ==1") == "jax-lib"
    assert pins.project_names(["jax==1", "torch~=2", ""]) == {"jax", "torch"}
