"""GKE's names for a TPU slice: the one table from a Cloud TPU accelerator type to node labels and shape.

A TPU VM slice is named by its accelerator type (`v5p-16`, `v5litepod-16`,
`v6e-16`, `v4-16`); GKE schedules a multi-host slice on a node pool whose
nodes carry `cloud.google.com/gke-tpu-accelerator` and
`cloud.google.com/gke-tpu-topology`, one pod per host requesting
`google.com/tpu` = the chips of that host. Sources (GKE documentation):

- https://cloud.google.com/kubernetes-engine/docs/concepts/plan-tpus
  (accelerator names, topologies, chips per VM, single- and multi-host shapes)
- https://cloud.google.com/kubernetes-engine/docs/concepts/tpus
  (TPU terminology on GKE: slice, topology, node pool per slice)

The suffix of v4 and v5p types counts TensorCores (two per chip); that of
v5e (`v5litepod`) and v6e types counts chips. Multi-host slices carry four
chips per host.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.errors import ConfigError

ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
TPU_RESOURCE = "google.com/tpu"


@dataclass(frozen=True)
class GkeTpu:
    """How GKE names and places one slice of an accelerator type."""

    accelerator_type: str
    accelerator: str  # cloud.google.com/gke-tpu-accelerator
    topology: str  # cloud.google.com/gke-tpu-topology
    chips: int
    hosts: int

    @property
    def chips_per_host(self) -> int:
        return self.chips // self.hosts


# (accelerator type prefix, GKE accelerator label, suffix counts cores?) and the topology per chip count.
_FAMILIES = {
    "v4": ("tpu-v4-podslice", True),
    "v5p": ("tpu-v5p-slice", True),
    "v5litepod": ("tpu-v5-lite-podslice", False),
    "v6e": ("tpu-v6e-slice", False),
}
_TOPOLOGY_3D = {4: "2x2x1", 8: "2x2x2", 16: "2x2x4", 32: "2x4x4", 64: "4x4x4", 128: "4x4x8", 256: "4x8x8"}
_TOPOLOGY_2D = {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16", 256: "16x16"}
SINGLE_HOST_2D = (1, 4, 8)  # v5e/v6e shapes that fit one VM (8 chips on one host at most)


def gke_tpu(accelerator_type: str) -> GkeTpu:
    """GKE's accelerator label, topology, chips and hosts for a Cloud TPU accelerator type."""
    family, _, size = accelerator_type.rpartition("-")
    if family not in _FAMILIES or not size.isdigit():
        raise ConfigError(
            f"accelerator type {accelerator_type!r}: no GKE mapping (known families: {', '.join(_FAMILIES)}, "
            "e.g. v5p-16, v5litepod-16, v6e-16)"
        )
    accelerator, counts_cores = _FAMILIES[family]
    chips = int(size) // 2 if counts_cores else int(size)
    table = _TOPOLOGY_3D if counts_cores else _TOPOLOGY_2D
    if chips not in table:
        raise ConfigError(
            f"accelerator type {accelerator_type!r}: {chips} chips is not a {family} slice shape GKE offers "
            f"(chips: {', '.join(str(c) for c in table)})"
        )
    hosts = 1 if (not counts_cores and chips in SINGLE_HOST_2D) else max(1, chips // 4)
    return GkeTpu(accelerator_type, accelerator, table[chips], chips, hosts)
