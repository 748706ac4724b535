"""Which frontends a bundle has, from its distributions: the one answer for launcher and probe (stdlib only).

A frontend is what a program imports to reach a device: jax, torch_xla,
torch_tpu, or plain torch. torch_xla and torch_tpu import torch themselves,
so plain torch counts only in a bundle that has neither. The order is the
start-up order the launcher imports them in (torch_xla's path before jax).
"""

from __future__ import annotations

from collections.abc import Iterable

from hostside.pins import normalize, project_names

# frontend -> the distribution (normalized name) that provides it, in start-up order
DISTRIBUTION = {"torch_xla": "torch-xla", "torch_tpu": "torch-tpu", "torch": "torch", "jax": "jax"}
# frontend -> the modules the launcher imports for it, in order
MODULES = {
    "torch_xla": ("torch", "torch_xla"),
    "torch_tpu": ("torch", "torch_tpu"),
    "torch": ("torch",),
    "jax": ("jax",),
}
# Frontends that reach an accelerator; plain torch only ever answers from the CPU.
DEVICE_FRONTENDS = ("torch_xla", "torch_tpu", "jax")
# Frontends with a persistent compilation cache orch manages.
CACHE_FRONTENDS = ("jax", "torch_xla")


def frontends(distributions: Iterable[str]) -> tuple[str, ...]:
    """The frontends of a bundle whose distributions (any spelling) are `distributions`, in start-up order."""
    have = {normalize(d) for d in distributions}
    out = [f for f in DEVICE_FRONTENDS if DISTRIBUTION[f] in have]
    if "torch" in have and not {"torch_xla", "torch_tpu"} & set(out):
        out.append("torch")
    return tuple(f for f in DISTRIBUTION if f in out)


def bundle_frontends(pins: Iterable[str]) -> tuple[str, ...]:
    """The frontends of a bundle, from its pins ('jax==0.10.2', 'torch_xla[tpu]==2.9.0', ...)."""
    return frontends(project_names(pins))


def provable(frontends_: Iterable[str], platform: str | None) -> tuple[str, ...]:
    """The frontends a runtime probe can prove on `platform`: plain torch proves nothing on a TPU lane."""
    return tuple(f for f in frontends_ if not (f == "torch" and platform == "tpu"))
