"""Which frontends a bundle has (hostside.frontends): one answer for the launch plan, the launcher and
the probe, on the controller and on the worker."""

from __future__ import annotations

import pytest

from hostside import frontends, launcher, probe_bundle
from hostside.pins import pinned_versions


@pytest.mark.parametrize(
    ("dists", "expected"),
    [
        ({"jax", "jaxlib", "libtpu"}, ("jax",)),
        ({"torch"}, ("torch",)),
        ({"torch", "torch-xla", "jax"}, ("torch_xla", "jax")),  # torch_xla imports torch itself
        ({"torch", "torch-tpu"}, ("torch_tpu",)),
        ({"torch", "torch-xla", "torch-tpu", "jax"}, ("torch_xla", "torch_tpu", "jax")),
        ({"Torch_XLA", "JAX"}, ("torch_xla", "jax")),  # any spelling of a name
        ({"numpy"}, ()),
    ],
)
def test_the_frontends_of_a_bundle_come_in_start_up_order(dists, expected):
    assert frontends.frontends(dists) == expected


def test_the_frontends_of_pins_ignore_extras_and_versions():
    assert frontends.bundle_frontends(["torch_xla[tpu]==2.9.0", "torch==2.9.0", "jax==0.10.2"]) == ("torch_xla", "jax")


def test_plain_torch_proves_nothing_on_a_tpu_lane():
    assert frontends.provable(("torch",), "tpu") == ()
    assert frontends.provable(("torch",), "cpu") == ("torch",)
    assert frontends.provable(("torch_tpu", "jax"), "tpu") == ("torch_tpu", "jax")


def test_the_launcher_knows_how_to_import_every_frontend():
    assert set(launcher.FRONTEND_MODULES) == set(frontends.DISTRIBUTION)
    assert launcher.FRONTEND_MODULES["torch_tpu"] == ("torch", "torch_tpu")


@pytest.mark.parametrize(
    "pins",
    [
        ["jax==0.10.2", "jaxlib==0.10.2", "libtpu==0.0.42.1"],
        ["torch==2.9.0", "torch_xla[tpu]==2.9.0"],
        ["torch==2.9.0", "torch_tpu==0.1.0"],
        ["torch==2.13.0+cpu"],
    ],
)
@pytest.mark.parametrize("platform", ["tpu", "cpu"])
def test_the_worker_probes_what_the_controller_plans_from_the_pins(pins, platform):
    # The worker sees the installed distributions; the controller sees the pins.
    installed = pinned_versions(pins)
    planned = list(frontends.provable(frontends.bundle_frontends(pins), platform))
    assert probe_bundle.runtime_frontends(installed, platform) == planned
