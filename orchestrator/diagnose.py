"""Known failure signatures, each mapped to the layer that owns the failure.

A log from a probe, a launch or a user's run is classified line by line
against `SIGNATURES`: real messages taken from public torch_xla, JAX, libtpu,
XLA, torch.distributed and SSH reports (each signature names its source).
The answer is the *owning layer*, one of `LAYERS`, with a one-line remedy, so
troubleshooting stays inside that layer:

    transport          the worker could not be reached (SSH, host keys, auth)
    device-ownership   another process holds the chip (libtpu lockfile, /dev/accel*, /dev/vfio)
    runtime-proof      the runtime did not come up on the intended device
                       (no TPU, libtpu missing, CPU fallback, policy set in the wrong order)
    bundle-skew        installed frontends/runtime do not belong together
    cache              the compilation cache is written but not reused, or refuses I/O
    memory             device (HBM/VMEM) or host memory ran out
    collective         a peer did not join or died (coordinator, barriers, gloo, heartbeats)
    other              a crash with no more specific owner

Tie-break (which line wins)
---------------------------
Every signature has a `priority`, its specificity: 80 and above names a root
cause outright ("The TPU is already in use by process with pid 176028"),
50-79 a specific failure that can still be the consequence of another one (a
heartbeat timeout after a peer crashed), 20-49 a symptom or a warning (a CPU
fallback, a deprecated variable), below 20 a generic crash (a segfault, a bare
Python exception line).

1. Each line gets at most one signature: the highest-priority one it matches
   (a line saying "Unable to initialize backend 'tpu': ABORTED: The TPU is
   already in use ..." is device-ownership, not the generic backend failure).
2. Across lines, the highest priority wins, wherever it appears: a JAX "falling
   back to cpu" warning (runtime-proof, 50s) that follows "already in use"
   (device-ownership, 90s) is device-ownership; a generic "RuntimeError: ..."
   line never beats a specific one, before or after it.
3. On equal priority the earliest line wins: later errors in a log are usually
   consequences of the first.

This module is pure: it classifies text that callers pass in and does no I/O.
The probe and launch code reuse `SIGNATURES`, `classify`, `diagnose` and
`layer_remedy`; `render_troubleshooting_markdown()` generates
docs/troubleshooting.md from the same table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LAYERS = (
    "transport",
    "device-ownership",
    "runtime-proof",
    "bundle-skew",
    "cache",
    "memory",
    "collective",
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


@dataclass(frozen=True)
class Signature:
    """One known failure message: where it comes from and which layer owns it."""

    id: str
    pattern: re.Pattern
    layer: str
    priority: int
    remedy: str
    source: str
    example: str  # a real line carrying the message, as published at `source`


@dataclass(frozen=True)
class Finding:
    """One log line matched by a signature."""

    layer: str
    signature_id: str
    line: str  # the matched line, exactly as in the log (without its newline)
    line_number: int  # 1-based
    remedy: str
    source: str
    priority: int

    def to_dict(self) -> dict:
        return {
            "layer": self.layer,
            "signature": self.line,
            "id": self.signature_id,
            "line": self.line_number,
            "remedy": self.remedy,
            "source": self.source,
            "priority": self.priority,
        }


def _sig(id, layer, priority, pattern, remedy, source, example, flags=0) -> Signature:
    return Signature(
        id=id,
        pattern=re.compile(pattern, flags),
        layer=layer,
        priority=priority,
        remedy=remedy,
        source=source,
        example=example,
    )


_XLA_GH = "https://github.com/openxla/xla/blob/main/"
_JAX_GH = "https://github.com/jax-ml/jax/blob/main/"
_PTXLA_GH = "https://github.com/pytorch/xla/blob/master/"

SIGNATURES: tuple[Signature, ...] = (
    # ---------------------------------------------------------------- transport
    _sig(
        "ssh-host-key-changed",
        "transport",
        95,
        r"REMOTE HOST IDENTIFICATION HAS CHANGED|HOST KEY CHANGED for \S+",
        "The worker's host key changed: if the worker was really rebuilt, remove the old key "
        "(`ssh-keygen -f KNOWN_HOSTS -R HOST`) and reconnect; otherwise stop and find out why.",
        "https://github.com/5calV/BytesOfProgress/issues/24",
        "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @",
    ),
    _sig(
        "ssh-host-key-verification-failed",
        "transport",
        85,
        r"Host key verification failed\.",
        "The worker's host key is unknown or differs from known_hosts: verify its fingerprint and add "
        "it to the fleet's known_hosts; never switch off strict checking.",
        "https://github.com/5calV/BytesOfProgress/issues/24",
        "Host key verification failed.",
    ),
    _sig(
        "ssh-permission-denied",
        "transport",
        75,
        r"Permission denied \((publickey|password|keyboard-interactive|gssapi)[^)]*\)",
        "The worker refused the login: check the fleet's ssh user and key for this worker "
        "(authorized_keys on the worker, key path and agent on this side).",
        "https://github.com/openai/tart/issues/1135",
        "admin@192.168.64.15: Permission denied (publickey,password,keyboard-interactive).",
    ),
    _sig(
        "ssh-connection-refused",
        "transport",
        60,
        r"ssh: connect to host \S+ port \d+: Connection refused"
        r"|connection to \S+ refused \(sshd not running\?\)",
        "Nothing listens on the worker's SSH port: start sshd on the worker or fix the port in fleet.yaml.",
        "https://github.com/rastasheep/ubuntu-sshd/issues/26",
        "ssh: connect to host localhost port 22: Connection refused",
    ),
    _sig(
        "ssh-connection-timed-out",
        "transport",
        60,
        r"ssh: connect to host \S+ port \d+: (Connection|Operation) timed out"
        r"|connect to \S+ timed out after [\d.]+s|no SSH banner from \S+ within",
        "The worker did not answer within the timeout: it is down, paused, overloaded or firewalled; "
        "check it from its console or cloud status and re-test with `orch exec -- true`.",
        "https://github.com/googledatalab/datalab/issues/2116",
        "ssh: connect to host 35.237.76.73 port 22: Connection timed out",
    ),
    _sig(
        "paramiko-no-valid-connections",
        "transport",
        60,
        r"NoValidConnectionsError: \[Errno None\] Unable to connect to port \d+ on \S+",
        "No TCP connection to the worker's SSH port: check the address, port and that sshd runs there.",
        "https://github.com/paramiko/paramiko/issues/2427",
        "paramiko.ssh_exception.NoValidConnectionsError: [Errno None] Unable to connect to port 22 on 10.0.89.23",
    ),
    _sig(
        "ssh-connection-dropped",
        "transport",
        50,
        r"Connection to \S+ closed by remote host|packet_write_wait: Connection to \S+ port \d+: Broken pipe",
        "The SSH session to the worker dropped mid-command: check the worker is still up (preemption, "
        "reboot, OOM of sshd) and the network path; the remote command may still be running.",
        "https://github.com/pytorch/xla/issues/3129",
        "packet_write_wait: Connection to 120.192.110.58 port 22: Broken pipe",
    ),
    # --------------------------------------------------------- device-ownership
    _sig(
        "tpu-in-use-by-pid",
        "device-ownership",
        95,
        r"The TPU is already in use by process with pid\b",
        "The named process holds the chip: inspect it (`ps -o pid,cmd -p PID`), stop it if it is an "
        "orphan of an earlier run, then retry; one chip serves one process.",
        "https://github.com/jax-ml/jax/issues/22070",
        "INFO:2024-06-25 00:34:55,142:jax._src.xla_bridge:889: Unable to initialize backend 'tpu': "
        "ABORTED: The TPU is already in use by process with pid 176028. Not attempting to load "
        "libtpu.so in this process.",
    ),
    _sig(
        "libtpu-lockfile-error",
        "device-ownership",
        95,
        r"Internal error when accessing libtpu multi-process lockfile",
        "/tmp/libtpu_lockfile is locked by a process libtpu could not identify: check /proc/locks for "
        "its holder and stop it; delete the file only when no process holds it (a stale file is harmless).",
        _XLA_GH + "xla/stream_executor/tpu/tpu_initializer_helper.cc",
        'ABORTED: Internal error when accessing libtpu multi-process lockfile. Run "$ sudo rm /tmp/libtpu_lockfile".',
    ),
    _sig(
        "tpu-in-use-other-user",
        "device-ownership",
        92,
        r"The TPU is already in use by another process probably owned by another user"
        r"|The TPU is already in use or the lock file is stale",
        "A process of another user (or a stale lock) holds the chip: `sudo lsof -w /dev/accel0` "
        "names it; stop it, and remove the lockfile only when nothing holds it.",
        _XLA_GH + "xla/stream_executor/tpu/tpu_initializer_helper.cc",
        "The TPU is already in use by another process probably owned by another user. Run "
        '"$ sudo lsof -w /dev/accel0" to figure out which process is using the TPU. If you still get '
        'this message, run "$ sudo rm /tmp/libtpu_lockfile".',
    ),
    _sig(
        "libtpu-already-in-use",
        "device-ownership",
        90,
        r"libtpu\.so already in used? by another process",
        "Another process has libtpu loaded on this host: find it (`sudo lsof -w /dev/accel0`) and stop "
        "it if it is an orphan; this process silently runs without the TPU otherwise.",
        "https://github.com/jax-ml/jax/issues/10192",
        "I0000 00:00:1649423660.053391 1924758 f236.cc:165] libtpu.so already in use by another process "
        'probably owned by another user. Run "$ sudo lsof -w /dev/accel0" to figure out which process '
        "is using the TPU. Not attempting to load libtpu.so in this process.",
    ),
    _sig(
        "tpu-vfio-busy",
        "device-ownership",
        90,
        r"open\(/dev/vfio/\d+\): Device or resource busy|Couldn't open iommu group /dev/vfio/\d+",
        "Another process has the TPU's VFIO device open: `fuser -v /dev/vfio/*` names it; stop the "
        "orphan (often a child process of an earlier run) and retry.",
        "https://github.com/marin-community/marin/issues/2618",
        "Failed to initialize TPU system with error: FAILED_PRECONDITION: open(/dev/vfio/0): Device or "
        "resource busy: Device or resource busy; Couldn't open iommu group /dev/vfio/0",
    ),
    _sig(
        "tpu-accel-open-denied",
        "device-ownership",
        80,
        r"Couldn't open device: /dev/accel\d+ \(Operation not permitted\)"
        r"|PERMISSION_DENIED: open\(/dev/accel\d+\)",
        "The TPU device node could not be opened: a dangling process may still hold it, or this user "
        "lacks permission; check `lsof -w /dev/accel0` and the device node's owner.",
        "https://github.com/pytorch/xla/issues/3165",
        "Invalid argument: Invalid fd: -1; Couldn't open device: /dev/accel0 (Operation not permitted); "
        "Unable to create Node RegisterInterface for node 0",
    ),
    # ------------------------------------------------------------ runtime-proof
    _sig(
        "tpu-device-not-found",
        "runtime-proof",
        80,
        r"(TPU initialization failed: |NOT_FOUND: )No \w+ device found",
        "libtpu found no TPU chip on this host: the lane intends tpu but the worker has none (check "
        "/dev/accel*, /dev/vfio/*); fix the worker or move it to a cpu lane.",
        "https://github.com/jax-ml/jax/issues/18780",
        "XlaRuntimeError: NOT_FOUND: No ba16c7433 device found.",
    ),
    _sig(
        "libtpu-not-found",
        "runtime-proof",
        80,
        r"(OSError|EnvironmentError): libtpu not found",
        "torch_xla with PJRT_DEVICE=TPU found no libtpu: the bundle lacks libtpu (or TPU_LIBRARY_PATH "
        "points nowhere); install the bundle's libtpu wheel.",
        _PTXLA_GH + "torch_xla/_internal/tpu.py",
        "OSError: libtpu not found",
    ),
    _sig(
        "libtpu-open-failed",
        "runtime-proof",
        75,
        r"Failed to open libtpu\.so",
        "JAX could not load libtpu.so: install the bundle's libtpu wheel, or point TPU_LIBRARY_PATH at it.",
        "https://github.com/google-deepmind/alphafold3/issues/656",
        "xla_bridge.py:841] Unable to initialize backend 'tpu': INTERNAL: Failed to open libtpu.so: "
        "libtpu.so: cannot open shared object file: No such file or directory",
    ),
    _sig(
        "no-tpu-platform",
        "runtime-proof",
        75,
        r"No TPU [Pp]latform (available|found)",
        "No TPU platform registered: libtpu is missing, did not initialise, or does not match this "
        "frontend; check the probe's device and bundle checks.",
        "https://github.com/jax-ml/jax/issues/13260",
        "jaxlib.xla_extension.XlaRuntimeError: UNAVAILABLE: No TPU Platform available.",
    ),
    _sig(
        "tpu-topology-worker-addresses",
        "runtime-proof",
        75,
        r"Invalid --\w+_slice_builder_worker_addresses specified",
        "The TPU topology env does not match the slice: TPU_WORKER_HOSTNAMES must list every worker of "
        "the slice, in order; let the fleet set it.",
        "https://github.com/Lightning-AI/pytorch-lightning/issues/20244",
        "RuntimeError: Bad StatusOr access: UNKNOWN: TPU initialization failed: Invalid "
        "--2a886c8_slice_builder_worker_addresses specified. Expected 4 worker addresses, got 1.",
    ),
    _sig(
        "tpu-topology-env-unset",
        "runtime-proof",
        70,
        r"could not determine TPU (accelerator type|worker hostnames)",
        "libtpu could not learn the slice topology: set TPU_SKIP_MDS_QUERY=1, TPU_ACCELERATOR_TYPE, "
        "TPU_WORKER_ID and TPU_WORKER_HOSTNAMES explicitly (the fleet's runtime policy does).",
        "https://pypi.org/project/libtpu/",
        "Failed to find host bounds for accelerator type: WARNING: could not determine TPU accelerator "
        "type, please set env var `TPU_ACCELERATOR_TYPE` manually, otherwise libtpu.so may not properly "
        "initialize.",
    ),
    _sig(
        "gce-metadata-fetch",
        "runtime-proof",
        65,
        r"Failed to fetch URL on try \d+ out of \d+|Failed to get TPU metadata",
        "libtpu is polling the GCE metadata server: set TPU_SKIP_MDS_QUERY=1 with explicit "
        "TPU_ACCELERATOR_TYPE, TPU_WORKER_ID and TPU_WORKER_HOSTNAMES (the fleet's runtime policy does).",
        "https://github.com/jax-ml/jax/issues/14300",
        "I0000 00:00:1671728351.222598      12 common_lib.cc:145] Failed to fetch URL on try 1 out of 6: "
        "Timeout was reached",
    ),
    _sig(
        "jax-distributed-after-backend",
        "runtime-proof",
        65,
        r"jax\.distributed\.initialize\(\) must be called before any JAX calls",
        "Something touched JAX before jax.distributed.initialize(): initialise distributed first, "
        "before any import-time device query.",
        "https://github.com/mlnomadpy/flaxchat/issues/8",
        "jax.distributed.initialize() must be called before any JAX calls that might initialise the XLA backend",
    ),
    _sig(
        "torch-xla-runtime-already-initialized",
        "runtime-proof",
        65,
        r"Runtime is already initialized\. Do not use the XLA device before calling xmp\.spawn",
        "An XLA device was used before xmp.spawn: set policy and spawn before creating any XLA tensor "
        "(and call use_spmd() before any tensor exists).",
        "https://github.com/pytorch/xla/issues/9303",
        "RuntimeError: Runtime is already initialized. Do not use the XLA device before calling xmp.spawn.",
    ),
    _sig(
        "jax-tpu-maybe-present-fallback",
        "runtime-proof",
        55,
        r"A Google TPU may be present on this machine, but either a TPU-enabled jaxlib or libtpu is not "
        r"installed",
        "JAX silently fell back to CPU although a TPU is present: libtpu is missing or could not take "
        "the chip (look for an earlier 'already in use' line); this run did not use the TPU.",
        "https://github.com/jax-ml/jax/issues/22070",
        "WARNING:2024-06-25 00:34:55,143:jax._src.xla_bridge:940: A Google TPU may be present on this "
        "machine, but either a TPU-enabled jaxlib or libtpu is not installed. Falling back to cpu.",
    ),
    _sig(
        "torch-xla-default-cpu",
        "runtime-proof",
        55,
        r"Defaulting to PJRT_DEVICE=CPU",
        "torch_xla picked CPU because PJRT_DEVICE was not set before import: set it in the lane's "
        "runtime profile; a CPU answer on a TPU lane is a failure.",
        "https://github.com/pytorch/xla/issues/8626",
        "WARNING:root:Defaulting to PJRT_DEVICE=CPU",
    ),
    _sig(
        "jax-no-gpu-tpu-fallback",
        "runtime-proof",
        50,
        r"No GPU/TPU found, falling back to CPU",
        "JAX ran on CPU: the TPU backend did not initialise (the reason is an earlier INFO line, "
        "'Unable to initialize backend'); set JAX_PLATFORMS=tpu to make it fail loudly.",
        "https://github.com/jax-ml/jax/issues/10192",
        "WARNING:absl:No GPU/TPU found, falling back to CPU. (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)",
    ),
    _sig(
        "jax-tpu-backend-init-failed",
        "runtime-proof",
        45,
        r"Unable to initialize backend 'tpu'|Backend 'tpu' failed to initialize",
        "JAX's TPU backend did not initialise; the rest of the line says why. Without JAX_PLATFORMS=tpu "
        "JAX continues on CPU.",
        "https://github.com/openai/grok/issues/40",
        "Unable to initialize backend 'tpu': UNIMPLEMENTED: LoadPjrtPlugin is not implemented on windows "
        "yet. (set JAX_PLATFORMS='' to automatically choose an available backend)",
    ),
    _sig(
        "xla-use-bf16-deprecated",
        "runtime-proof",
        30,
        r"XLA_USE_BF16 will be deprecated",
        "XLA_USE_BF16 is set: drop it from the runtime profile (it breaks the current Pallas attention "
        "path) and cast the model to bf16 in code.",
        _PTXLA_GH + "torch_xla/csrc/dtype.cpp",
        "XLA_USE_BF16 will be deprecated after the 2.5 release, please convert your model to bf16 directly",
    ),
    _sig(
        "xla-use-spmd-deprecated",
        "runtime-proof",
        30,
        r"XLA_USE_SPMD is being deprecated",
        "XLA_USE_SPMD is set: drop it; SPMD is switched on by torch_xla.runtime.use_spmd() before any "
        "XLA tensor exists.",
        _PTXLA_GH + "torch_xla/runtime.py",
        "XLA_USE_SPMD is being deprecated. Use torch_xla.runtime.use_spmd() without setting XLA_USE_SPMD env-var.",
    ),
    # -------------------------------------------------------------- bundle-skew
    _sig(
        "torch-xla-undefined-symbol",
        "bundle-skew",
        95,
        r"_XLAC\S*\.so: undefined symbol",
        "torch_xla was built against a different torch: install the exact torch build the bundle pins "
        "for this torch_xla (same version and build, e.g. both +cpu or both from one nightly).",
        "https://github.com/pytorch/xla/issues/8813",
        "ImportError: /workspaces/xla_workspace/pytorch/xla/_XLAC.cpython-310-x86_64-linux-gnu.so: "
        "undefined symbol: _ZN5torch4lazy13MetricFnValueEd",
    ),
    _sig(
        "jaxlib-newer-than-jax",
        "bundle-skew",
        95,
        r"jaxlib version \S+ is newer than and incompatible with jax version",
        "jax and jaxlib come from different releases: install the pair the bundle pins.",
        "https://github.com/jax-ml/jax/issues/17638",
        "RuntimeError: jaxlib version 0.4.14 is newer than and incompatible with jax version 0.4.6. "
        "Please update your jax and/or jaxlib packages.",
    ),
    _sig(
        "jaxlib-older-than-jax",
        "bundle-skew",
        95,
        r"jaxlib is version \S+, but this version of jax requires version",
        "jaxlib is older than this jax requires: install the pair the bundle pins.",
        "https://github.com/jax-ml/jax/issues/15876",
        "Windows RuntimeError: jaxlib is version 0.3.25, but this version of jax requires version >= 0.4.7.",
    ),
    _sig(
        "pjrt-plugin-abi-mismatch",
        "bundle-skew",
        95,
        r"Unexpected \w+_Args size: expected \d+, got \d+"
        r"|The plugin is likely built with a (later|earlier) version than the framework",
        "Frontend and libtpu disagree on the PJRT C API (struct sizes): use the libtpu validated with "
        "this torch_xla/jax; they move together as one bundle.",
        "https://github.com/vllm-project/tpu-inference/pull/1109",
        "F1114 22:32:47.676167 1232387 pjrt_c_api_helpers.cc:258] Unexpected error status Unexpected "
        "PJRT_Plugin_Attributes_Args size: expected 32, got 24. The plugin is likely built with a later "
        "version than the framework. This plugin is built with PJRT API version 0.75.",
    ),
    _sig(
        "libtpu-missing-symbol",
        "bundle-skew",
        80,
        r"\w+ not available in this library\.",
        "The loaded libtpu lacks a function this frontend needs: another framework's libtpu was loaded "
        "(TPU_LIBRARY_PATH, import order) or the wrong version is installed; use the bundle's libtpu.",
        "https://github.com/pytorch/xla/issues/3786",
        "2022-07-29 03:05:56.772945: F ./tensorflow/core/tpu/tpu_library_init_fns.inc:100] "
        "TpuEmbeddingEngine_CollateMemory not available in this library.",
    ),
    _sig(
        "pip-dependency-conflict",
        "bundle-skew",
        70,
        r"\S+ \S+ requires \S+, but you have \S+ \S+ which is incompatible",
        "The installed set violates a wheel's own requirements: lock and install the bundle as one set "
        "instead of adding packages to an existing environment.",
        "https://github.com/tenstorrent/tt-forge/issues/806",
        "pjrt-plugin-tt 0.8.0.dev20260112 requires torch==2.7.1, but you have torch 2.7.0 which is incompatible.",
    ),
    _sig(
        "frontend-module-missing",
        "bundle-skew",
        70,
        r"No module named '(torch_xla|torch_tpu|jax|jaxlib|libtpu)\b[\w.]*'",
        "A frontend (or a version-gated part of one) is not in this environment: check the lane's "
        "bundle includes it at a version that has the module.",
        "https://github.com/AI-Hypercomputer/torchprime/issues/259",
        "Error importing relative module: No module named 'torch_xla.experimental.splash_attention'",
    ),
    # -------------------------------------------------------------------- cache
    _sig(
        "xla-deserialize-unimplemented",
        "cache",
        85,
        r"Failed to deserialize executable: UNIMPLEMENTED: Deserializing serialized executable not supported",
        "The cache is written but never read back (torch_xla calls an unimplemented "
        "DeserializeExecutable on this backend): warm restarts recompile; use a torch_xla build that "
        "loads via LoadSerializedExecutable, and prove reuse by a faster warm restart.",
        "https://github.com/pytorch/xla/issues/9094",
        "W torch_xla/csrc/runtime/pjrt_computation_client.cc:680] Failed to deserialize executable: "
        "UNIMPLEMENTED: Deserializing serialized executable not supported.",
    ),
    _sig(
        "jax-cache-read-error",
        "cache",
        75,
        r"Error reading persistent compilation cache entry for",
        "JAX could not read a cache entry (permissions, a concurrent writer, or an entry from another "
        "bundle): give each host its own writable cache or one writer with read-only readers.",
        "https://github.com/jax-ml/jax/issues/22718",
        "UserWarning: Error reading persistent compilation cache entry for 'jit_run_evaluation_rollout': "
        "PermissionError: [Errno 13] Permission denied: ",
    ),
    _sig(
        "jax-cache-write-error",
        "cache",
        75,
        r"Error writing persistent compilation cache entry for",
        "JAX could not write a cache entry: a read-only reader is configured as a writer, or the cache "
        "directory is missing or full; match the lane's cache policy (one writer, read-only readers).",
        _JAX_GH + "jax/_src/compiler.py",
        "UserWarning: Error writing persistent compilation cache entry for 'jit_iota': OSError: [Errno 30] "
        "Read-only file system: '/tmp/rocache/jit_iota-0b184a1e3154e7f940fd1d474983357853d33ff0dcd1474f81c7c9"
        "1eea9d9d7f-cache'",
    ),
    _sig(
        "torch-xla-cache-single-module",
        "cache",
        70,
        r"Only a single module is supported for persistent computation caching",
        "torch_xla's persistent cache cannot hold this computation: unset XLA_PERSISTENT_CACHE_PATH for "
        "this run or restructure the step into one module.",
        "https://github.com/pytorch/xla/pull/5804",
        "Only a single module is supported for persistent computation caching. Please unset the "
        "XLA_PERSISTENT_CACHE_PATH variable to disable persistent caching.",
    ),
    _sig(
        "jax-cache-nonzero-process-skip",
        "cache",
        25,
        r"Not writing persistent cache entry since process_(id|index) != 0",
        "Expected on processes 1..N (only process 0 writes the JAX cache); judge the cache per process "
        "by its hits on a warm restart, not by files on disk.",
        _JAX_GH + "jax/_src/compiler.py",
        "DEBUG:jax._src.compiler:Not writing persistent cache entry since process_id != 0",
    ),
    # ------------------------------------------------------------------- memory
    _sig(
        "hbm-oom",
        "memory",
        90,
        r"Ran out of memory in memory space hbm",
        "The program needs more HBM than the chip has: reduce batch/sequence, shard more (or rematerialise) "
        "the largest allocations listed after this line.",
        "https://github.com/tensorflow/tpu/issues/385",
        "Compilation failure: Ran out of memory in memory space hbm. Used 8.38G of 8.00G hbm. Exceeded "
        "hbm capacity by 385.25M.",
    ),
    _sig(
        "vmem-oom",
        "memory",
        90,
        r"Ran out of memory in memory space vmem",
        "A kernel (often a Pallas kernel) needs more VMEM than available: use smaller block sizes or "
        "raise vmem_limit_bytes within the chip's capacity.",
        "https://github.com/pytorch/xla/issues/9524",
        "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out "
        "of memory in memory space vmem. Used 32.42M of 16.00M vmem. Exceeded vmem capacity by 16.42M",
    ),
    _sig(
        "device-allocation-failed",
        "memory",
        90,
        r"Attempting to (allocate|reserve) [\d.]+\w*( at the bottom of memory)?\. That was not possible",
        "A device buffer did not fit in free HBM: reduce the footprint, and check no earlier run or "
        "leftover array still holds memory on this chip.",
        "https://github.com/google-deepmind/gemma/issues/85",
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: "
        "Attempting to allocate 15.65G. That was not possible. There are 11.08G free.; (0x0x0_HBM0)",
    ),
    _sig(
        "host-oom-killer",
        "memory",
        85,
        r"Out of memory: Killed process \d+",
        "The kernel's OOM killer ended the process (host RAM, not HBM): lower host-side memory (data "
        "loading, checkpoint staging, number of processes per host).",
        "https://github.com/pcyin/tranX/issues/41",
        "[2059991.491542] Out of memory: Killed process 25315 (python3) total-vm:53312244",
    ),
    _sig(
        "resource-exhausted-allocate",
        "memory",
        70,
        r"RESOURCE_EXHAUSTED: Out of memory while trying to allocate \d+ bytes",
        "An allocation failed for lack of device memory: reduce the footprint or shard more.",
        "https://github.com/google-deepmind/alphafold/issues/1023",
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
        "7406166528 bytes.",
    ),
    _sig(
        "resource-exhausted",
        "memory",
        40,
        r"\bRESOURCE_EXHAUSTED\b|Resource exhausted:",
        "A runtime resource ran out, most often device memory: read the rest of the message for which.",
        "https://github.com/pytorch/xla/issues/1735",
        "RuntimeError: Resource exhausted: From /job:tpu_worker/replica:0/task:0:",
    ),
    _sig(
        "process-killed",
        "memory",
        20,
        r"^\s*Killed\s*$",
        "The process was killed with SIGKILL, most often by the OOM killer: check `dmesg` for "
        "'Out of memory' on that worker.",
        "https://github.com/tmux/tmux/issues/2364",
        "Killed",
    ),
    # --------------------------------------------------------------- collective
    _sig(
        "torch-dist-store-timeout",
        "collective",
        65,
        r"DistStoreError: Timed out after \d+ seconds waiting for (clients|workers)",
        "Not every rank reached the rendezvous store: a worker did not start or failed early (its log "
        "has the cause); check MASTER_ADDR/MASTER_PORT and WORLD_SIZE, then relaunch the gang.",
        "https://github.com/OpenRLHF/OpenRLHF/issues/1040",
        "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 1/3 clients joined.",
    ),
    _sig(
        "torch-dist-network-timeout",
        "collective",
        60,
        r"DistNetworkError: The client socket has timed out after \d+ms while trying to connect to",
        "A rank could not reach the rendezvous address: check MASTER_ADDR/MASTER_PORT are reachable "
        "from every worker and rank 0 is up.",
        "https://github.com/vllm-project/vllm/issues/19670",
        "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while "
        "trying to connect to (172.17.0.9, 46229).",
    ),
    _sig(
        "jax-barrier-timeout",
        "collective",
        65,
        r"DEADLINE_EXCEEDED: Barrier timed out",
        "Not every process reached jax.distributed.initialize in time: find the missing tasks named on "
        "the following lines (they did not start or crashed first) and relaunch the gang.",
        "https://github.com/ayaka14732/llama-2-jax/issues/20",
        "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: "
        "PjRT_Client_Connect. Timed out task names:",
    ),
    _sig(
        "jax-register-task-deadline",
        "collective",
        65,
        r"CoordinationService/RegisterTask|Coordination service agent in error status: DEADLINE_EXCEEDED",
        "Not every process registered with the JAX coordinator in time: a worker did not start or "
        "cannot reach the coordinator (process 0); check every worker started and the coordinator "
        "address/port, then relaunch the gang.",
        "https://github.com/google/paxml/issues/77",
        "2024-04-12 23:39:41.656900: E external/xla/xla/pjrt/distributed/client.cc:96] Coordination "
        "service agent in error status: DEADLINE_EXCEEDED: Deadline Exceeded",
    ),
    _sig(
        "xla-rendezvous-failed",
        "collective",
        60,
        r"Failed to meet rendezvous '[^']*'",
        "Workers did not all reach an XLA rendezvous: a worker is missing or unreachable on the mesh "
        "port; check every worker runs the same program.",
        "https://github.com/pytorch/xla/issues/3129",
        "Exception in device=TPU:24: tensorflow/compiler/xla/xla_client/mesh_service.cc:364 : Failed to "
        "meet rendezvous 'test_loss': failed to connect to all addresses (14)",
    ),
    _sig(
        "gloo-full-mesh-failed",
        "collective",
        60,
        r"Gloo connectFullMesh failed",
        "gloo could not connect every pair of ranks: check the workers can reach each other on the "
        "interface gloo picked (GLOO_SOCKET_IFNAME) and that all ranks started.",
        "https://github.com/sgl-project/sglang/issues/3226",
        "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
    ),
    _sig(
        "jax-tpu-init-waiting-for-hosts",
        "collective",
        60,
        r"TPU backend initialization is taking more than [\d.]+ seconds\. Did you run your code on all "
        r"TPU hosts\?",
        "TPU initialisation waits for the other hosts of the slice: start the program on every worker "
        "together (one process per worker).",
        "https://github.com/google-research/t5x/issues/997",
        "UserWarning: TPU backend initialization is taking more than 60.0 seconds. Did you run your code "
        "on all TPU hosts? See https://jax.readthedocs.io/en/latest/multi_process.html for more information.",
    ),
    _sig(
        "jax-tasks-unhealthy",
        "collective",
        55,
        r"tasks are unhealthy \(stopped sending heartbeats\)|heartbeat timeout\. This indicates that the "
        r"remote task has failed",
        "A peer process died and the gang shares its fate: the task named on the next lines has the real "
        "error in its own log; tear the gang down and relaunch.",
        _JAX_GH + "docs/fault_tolerance.rst",
        "absl::Status: UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):",
    ),
    _sig(
        "jax-distributed-fatal",
        "collective",
        50,
        r"Terminating process because the JAX distributed service detected fatal errors",
        "The JAX distributed service aborted this process (rc 134) because of another task: read the "
        "status after 'absl::Status:' and the log of the task it names.",
        _JAX_GH + "docs/fault_tolerance.rst",
        "F0926 17:26:32.075587  157988 client.h:77] Terminating process because the JAX distributed "
        "service detected fatal errors. This most likely indicates that another task died; see the other "
        "task logs for more details.",
    ),
    _sig(
        "jax-coordinator-unreachable",
        "collective",
        55,
        r"Failed to send RPC to coordination service",
        "The JAX coordinator (process 0) died or is unreachable: check process 0's log first.",
        _JAX_GH + "docs/fault_tolerance.rst",
        "absl::Status: UNAVAILABLE: Failed to send RPC to coordination service. Either the leader task "
        "was preempted/died/restarted unexpectedly or this task is experiencing network issues.",
    ),
    _sig(
        "gloo-peer-closed",
        "collective",
        55,
        r"gloo/transport/tcp/pair\.cc:\d+\] (Connection closed by peer|Read error .*Connection reset by peer)",
        "A gloo peer went away mid-collective: the rank at that address crashed or was killed first; "
        "read its log, then relaunch the gang.",
        "https://github.com/pytorch/pytorch/issues/75512",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
        "[18.25.6.30]:28048",
    ),
    _sig(
        "torch-dist-store-error",
        "collective",
        50,
        r"torch\.distributed\.DistStoreError",
        "The torch.distributed store failed (a timeout or a lost rank 0): check rank 0 and that all ranks started.",
        "https://github.com/alibaba/Pai-Megatron-Patch/issues/468",
        "torch.distributed.DistStoreError: Socket Timeout",
    ),
    # -------------------------------------------------------------------- other
    _sig(
        "segmentation-fault",
        "other",
        15,
        r"Fatal Python error: Segmentation fault|Segmentation fault( +\(core dumped\))?|\*\*\* SIGSEGV",
        "The process crashed in native code: note the last Python frames above, check the bundle "
        "matches its lock (`orch probe`), and report with the full log.",
        "https://github.com/pytorch/xla/issues/6010",
        "Fatal Python error: Segmentation fault",
    ),
    _sig(
        "native-check-failure",
        "other",
        12,
        r"\*\*\* Check failure stack trace: \*\*\*|\*\*\* SIGABRT received by PID \d+",
        "A native CHECK aborted the process: the 'Check failed' line just above names the component; "
        "search it against the bundle's versions.",
        "https://github.com/jax-ml/jax/issues/15210",
        "*** Check failure stack trace: ***",
    ),
    _sig(
        "python-exception",
        "other",
        5,
        r"^\s*([A-Za-z_][\w.]*\.)?[A-Z]\w*(Error|Exception): ",
        "A Python exception ended the run: read its message and the frames above it.",
        "https://github.com/pytorch/xla/issues/2035",
        "RuntimeError: tensorflow/compiler/xla/xla_client/computation_client.cc:234 : Missing XLA configuration",
    ),
)

_BY_ID = {s.id: s for s in SIGNATURES}


def signature(sig_id: str) -> Signature:
    """The signature with this id (KeyError if unknown)."""
    return _BY_ID[sig_id]


def layer_remedy(layer: str) -> str:
    """The default one-line remedy for a layer (ValueError for an unknown layer)."""
    try:
        return LAYER_INFO[layer][1]
    except KeyError:
        raise ValueError(f"unknown layer {layer!r}; expected one of {', '.join(LAYERS)}") from None


def match_line(line: str) -> Signature | None:
    """The highest-priority signature a single line matches, or None."""
    text = line[:MAX_LINE_SEARCH]
    best: Signature | None = None
    for sig in SIGNATURES:
        if (best is None or sig.priority > best.priority) and sig.pattern.search(text):
            best = sig
    return best


def classify(text: str) -> list[Finding]:
    """Every line of `text` that matches a signature, in log order.

    Each line carries only its best (highest-priority) signature.
    """
    findings = []
    for number, line in enumerate(text.splitlines(), start=1):
        sig = match_line(line)
        if sig is not None:
            findings.append(
                Finding(
                    layer=sig.layer,
                    signature_id=sig.id,
                    line=line,
                    line_number=number,
                    remedy=sig.remedy,
                    source=sig.source,
                    priority=sig.priority,
                )
            )
    return findings


def winner(findings: list[Finding]) -> Finding | None:
    """The finding that owns the failure: highest priority, then earliest line."""
    if not findings:
        return None
    return min(findings, key=lambda f: (-f.priority, f.line_number))


def diagnose(text: str) -> Finding | None:
    """The single most specific finding in `text` (see the module docstring), or None."""
    return winner(classify(text))


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_code(text: str) -> str:
    body = _md_cell(text)
    fence = "``" if "`" in body else "`"
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def render_troubleshooting_markdown() -> str:
    """docs/troubleshooting.md, generated from `SIGNATURES` and `LAYER_INFO`."""
    out = [
        "# Troubleshooting by owning layer",
        "",
        "<!-- Generated from orchestrator/diagnose.py by render_troubleshooting_markdown(); "
        "edit the table there, not this file. -->",
        "",
        "Every failure belongs to one layer. Find the layer first, then stay inside it.",
        "`orch diagnose LOG` (or `-` for stdin) names the layer of a log, the line that proves it and",
        "the remedy; `--all` lists every matching line and `--json` prints it for scripts.",
        "",
        "## Debugging order",
        "",
    ]
    out += [f"{i}. {step}" for i, step in enumerate(DEBUGGING_ORDER, start=1)]
    out += [
        "",
        "## Which line wins",
        "",
        "Each signature has a priority (its specificity). Each log line takes its highest-priority",
        "signature; across lines the highest priority wins wherever it appears, and on a tie the",
        "earliest line wins (later errors are usually consequences of the first). So a JAX",
        '"falling back to cpu" warning after "The TPU is already in use" is device-ownership, not',
        "runtime-proof, and a bare Python exception line never beats a specific message.",
        "",
        "## Layers",
        "",
        "| Layer | Owns | Default remedy |",
        "| --- | --- | --- |",
    ]
    out += [f"| {layer} | {_md_cell(LAYER_INFO[layer][0])} | {_md_cell(LAYER_INFO[layer][1])} |" for layer in LAYERS]
    for layer in LAYERS:
        sigs = sorted((s for s in SIGNATURES if s.layer == layer), key=lambda s: (-s.priority, s.id))
        out += [
            "",
            f"## {layer}",
            "",
            _md_cell(LAYER_INFO[layer][0]),
            "",
            "| Signature | Priority | Example (real message) | Remedy | Source |",
            "| --- | --- | --- | --- | --- |",
        ]
        out += [
            f"| `{s.id}` | {s.priority} | {_md_code(s.example)} | {_md_cell(s.remedy)} | {s.source} |" for s in sigs
        ]
    return "\n".join(out) + "\n"
