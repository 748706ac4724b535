"""The signature table of `orch diagnose`: layers, their default remedies, and every known message.

Data only: each `Signature` is a real message taken from a public issue, source
file or documentation page (`source`), the layer that owned the failure there,
a priority (its specificity, see orchestrator/diagnose.py) and a remedy. A
signature marked `consequence` names a failure a worker shows only because
another one failed first (a peer's heartbeat stopped, the gang was torn down);
`orch diagnose RUN` uses that to find the worker that failed first.

The signatures live by layer, in order: diagnose_table_reach.py (transport,
device-ownership), diagnose_table_runtime.py (runtime-proof), diagnose_table_driver.py (the
accelerator driver stack under the frameworks: runtime-proof, bundle-skew, hardware),
diagnose_table_native.py (native builds and toolchains: bundle-skew), diagnose_table_bundle.py
(bundle-skew), diagnose_table_resources.py (cache, memory), diagnose_table_gang.py (collective)
and diagnose_table_host.py (disk, hardware, other); this module
gathers them into `SIGNATURES`. The order only breaks a tie between two
signatures of equal priority on one line.

To add a signature: copy the message from its public source into `example`,
write the narrowest pattern that matches it (for the *class* of the failure,
as other versions and tools phrase it), pick the layer the source's
resolution names, put it in that layer's module (or the driver stack's, or the native builds'), and
add a corpus entry (tests/data/diagnosis/corpus.yaml) if the source is a real failure log.
"""

from __future__ import annotations

from orchestrator.diagnose_sig import Signature
from orchestrator.diagnose_table_bundle import BUNDLE_SIGNATURES
from orchestrator.diagnose_table_driver import DRIVER_SIGNATURES
from orchestrator.diagnose_table_gang import GANG_SIGNATURES
from orchestrator.diagnose_table_host import HOST_SIGNATURES
from orchestrator.diagnose_table_native import NATIVE_SIGNATURES
from orchestrator.diagnose_table_reach import REACH_SIGNATURES
from orchestrator.diagnose_table_resources import RESOURCE_SIGNATURES
from orchestrator.diagnose_table_runtime import RUNTIME_SIGNATURES

LAYERS = (
    "transport",
    "device-ownership",
    "runtime-proof",
    "bundle-skew",
    "cache",
    "memory",
    "collective",
    "disk",
    "hardware",
    "other",
)

# What each layer owns, and what to do when it fails and no signature says more.
LAYER_INFO: dict[str, tuple[str, str]] = {
    "transport": (
        "Reaching the worker: SSH, host keys, authentication, the network path.",
        "Check the worker is up and reachable (sshd running, address and port, firewall) and that the "
        "fleet's known_hosts and key match; re-test with `orch exec -- true`.",
    ),
    "device-ownership": (
        "Who holds the chip: the libtpu lockfile (/tmp/libtpu_lockfile), /dev/accel* and /dev/vfio/*.",
        "Another process holds the chip: find it (`lsof -w /dev/accel0`, /proc/locks for "
        "/tmp/libtpu_lockfile), stop it if it is an orphan of an earlier run, and remove a lockfile "
        "only when no process holds it.",
    ),
    "runtime-proof": (
        "Whether the runtime really came up on the intended device, under the policy set before import.",
        "The runtime did not answer from the intended device: check the lane's runtime profile "
        "(PJRT_DEVICE, JAX_PLATFORMS, TPU_* topology env) is applied before import and that libtpu is "
        "installed, then re-run `orch probe`; a CPU answer on a TPU lane is a failure.",
    ),
    "bundle-skew": (
        "Whether torch, torch_xla, jax/jaxlib and libtpu installed on the worker belong to one bundle.",
        "The installed wheels do not belong together: redeploy the lane's locked bundle so torch, "
        "torch_xla, jax/jaxlib and libtpu move as one; never upgrade one of them alone.",
    ),
    "cache": (
        "Compilation caches: where they live, who writes them, and whether a warm restart reuses them.",
        "The compilation cache is not being reused: check the lane's cache path and ownership (one "
        "writer or one cache per host), clear entries written by another bundle, and prove reuse with "
        "a warm restart under the same pre-import policy.",
    ),
    "memory": (
        "Device memory (HBM, VMEM) and host RAM.",
        "Memory ran out: reduce the batch, sequence or per-device footprint (sharding), look for "
        "leftover processes holding memory, and compare with the bundle's validated settings.",
    ),
    "collective": (
        "The gang: coordinator, rendezvous, barriers, heartbeats, gloo/XLA collectives between workers.",
        "A peer did not join or died: find the first worker that failed (its own log has the cause), "
        "check the coordinator address/port and timeouts, and relaunch the whole gang.",
    ),
    "disk": (
        "Local and mounted storage: free space, quotas, /dev/shm, the filesystems checkpoints and logs go to.",
        "A filesystem is full or over quota: find which one (`df -h`, `df -i`, the path in the message), "
        "free or enlarge it, and keep checkpoints and caches off the boot disk.",
    ),
    "hardware": (
        "The accelerator hardware and its host: chip, ICI links, a worker VM the platform marks unhealthy.",
        "The platform reports a chip or worker fault: note the worker it names, take it out of the fleet "
        "(or recreate the slice) and relaunch; software on the other workers is not the cause.",
    ),
    "other": (
        "Crashes with no more specific owner.",
        "No owning layer recognised: read the first error in the log and run `orch probe` on the worker.",
    ),
}

# The operators' debugging order: shown at the top of docs/troubleshooting.md.
DEBUGGING_ORDER = (
    "Which frontend owned the failing path (torch_xla, JAX, or both in one process)?",
    "Is the chip already owned by another process?",
    "Which runtime policy was selected before import (PJRT_DEVICE, XLA flags, cache path)?",
    "Which backend actually ran, according to the execution record?",
    "Does the failure end in application routing, the frontend bridge, or a libtpu-owned "
    "runtime/cache boundary? Keep troubleshooting inside the owning layer.",
)

# Lines longer than this are only searched in their first part (logs can hold
# megabyte-long single lines, e.g. dumped HLO).
MAX_LINE_SEARCH = 20_000

# Every signature, in layer order (the order breaks ties between equal priorities on one line).
SIGNATURES: tuple[Signature, ...] = (
    *REACH_SIGNATURES,
    *RUNTIME_SIGNATURES,
    *DRIVER_SIGNATURES,
    *NATIVE_SIGNATURES,
    *BUNDLE_SIGNATURES,
    *RESOURCE_SIGNATURES,
    *GANG_SIGNATURES,
    *HOST_SIGNATURES,
)

__all__ = ["DEBUGGING_ORDER", "LAYERS", "LAYER_INFO", "MAX_LINE_SEARCH", "SIGNATURES", "Signature"]
