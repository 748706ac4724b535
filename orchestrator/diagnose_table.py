"""The signature table of `orch diagnose`: layers, their default remedies, and every known message.

Data only: each `Signature` is a real message taken from a public issue, source
file or documentation page (`source`), the layer that owned the failure there,
a priority (its specificity, see orchestrator/diagnose.py) and a remedy. A
signature marked `consequence` names a failure a worker shows only because
another one failed first (a peer's heartbeat stopped, the gang was torn down);
`orch diagnose RUN` uses that to find the worker that failed first.

To add a signature: copy the message from its public source into `example`,
write the narrowest pattern that matches it, pick the layer the source's
resolution names, and add a corpus entry (tests/data/diagnosis/corpus.yaml)
if the source is a real failure log.
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


@dataclass(frozen=True)
class Signature:
    """One known failure message: where it comes from and which layer owns it."""

    id: str
    pattern: re.Pattern[str]
    layer: str
    priority: int
    remedy: str
    source: str
    example: str  # a real line carrying the message, as published at `source`
    # True when the message shows a failure caused by another worker's (a lost peer,
    # a torn-down gang): `orch diagnose RUN` looks past it for the first failure.
    consequence: bool = False


def _sig(
    id: str,
    layer: str,
    priority: int,
    pattern: str,
    remedy: str,
    source: str,
    example: str,
    flags: int = 0,
    *,
    consequence: bool = False,
) -> Signature:
    return Signature(
        id=id,
        pattern=re.compile(pattern, flags),
        layer=layer,
        priority=priority,
        remedy=remedy,
        source=source,
        example=example,
        consequence=consequence,
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
        r"Permission denied \((publickey|password|keyboard-interactive|gssapi)[^)]*\)"
        r"|AuthenticationException: Authentication failed"
        r"|paramiko\.transport\W{0,3}(?:[A-Z]+ )?Authentication \([\w-]+\) failed"
        # the same refusal seen from the key's side, or after too many keys were offered
        r"|Too many authentication failures|sign_and_send_pubkey: no mutual signature supported"
        r"|UNPROTECTED PRIVATE KEY FILE|Load key \"[^\"]*\": (bad permissions|invalid format)"
        r"|PasswordRequiredException: [Pp]rivate key file is encrypted|SSHException: No existing session"
        r"|SSHException: No authentication methods available|Bad owner or permissions on \S*\.ssh/"
        # the worker's sshd log names the refused user
        r"|sshd\[\d+\]: (Invalid user \S+ +from|Failed publickey for (invalid user )?\S+ from)",
        "The worker refused the login, or the key could not be offered: check the fleet's ssh user and key "
        "for this worker (authorized_keys on the worker; key path, permissions, format and agent on this side).",
        "https://github.com/openai/tart/issues/1135",
        "admin@192.168.64.15: Permission denied (publickey,password,keyboard-interactive).",
    ),
    _sig(
        "ssh-algorithm-negotiation",
        "transport",
        75,
        r"Unable to negotiate with \S+( port \d+)?: no matching (host key type|key exchange method|cipher|MAC) found",
        "Client and worker share no SSH algorithm (a newer OpenSSH dropped ssh-rsa or an old KEX): give "
        "the worker an ed25519 host key, or allow the algorithm for that host only.",
        "https://github.com/gokrazy/breakglass/issues/9",
        "Unable to negotiate with 100.77.11.58 port 22: no matching host key type found. Their offer: ssh-rsa",
    ),
    _sig(
        "paramiko-host-key-unknown",
        "transport",
        80,
        r"SSHException: Server '[^']+' not found in known_hosts|BadHostKeyException: Host key for server",
        "paramiko does not know (or distrusts) the worker's host key: add its verified key to the "
        "fleet's known_hosts, in the [host]:port form when the port is not 22.",
        "https://github.com/paramiko/paramiko/issues/2464",
        "paramiko.ssh_exception.SSHException: Server '[192.168.77.1]:22121' not found in known_hosts",
    ),
    _sig(
        "ssh-connection-refused",
        "transport",
        60,
        r"connect to host \S+ port \d+: Connection refused"
        r"|connection to \S+ refused \(sshd not running\?\)|dial tcp \S*:22: connect: connection refused"
        r"|NoValidConnectionsError: \[Errno None\] Unable to connect to port \d+ on \S+"
        # paramiko's message alone (wrapped or translated by the calling tool)
        r"|Unable to connect to port \d+ on \[?[\w.:-]+\]?"
        # Fabric 1.x
        r"|Low level socket error connecting to host \S+ on port \d+: Connection refused",
        "Nothing listens on the worker's SSH port: start sshd on the worker or fix the port in fleet.yaml.",
        "https://github.com/rastasheep/ubuntu-sshd/issues/26",
        "ssh: connect to host localhost port 22: Connection refused",
    ),
    _sig(
        "ssh-connection-timed-out",
        "transport",
        60,
        r"connect to host \S+ port \d+: (Connection|Operation) timed out"
        r"|connect to \S+ timed out after [\d.]+s|no SSH banner from \S+ within"
        r"|dial tcp \S*:22: (i/o timeout|connect: no route to host)",
        "The worker did not answer within the timeout: it is down, paused, overloaded or firewalled; "
        "check it from its console or cloud status and re-test with `orch exec -- true`.",
        "https://github.com/googledatalab/datalab/issues/2116",
        "ssh: connect to host 35.237.76.73 port 22: Connection timed out",
    ),
    _sig(
        "ssh-no-route",
        "transport",
        60,
        r"connect to host \S+ port \d+: (No route to host|Network is unreachable)",
        "The controller has no network path to the worker: the worker is down or on another network, "
        "or a firewall rejects the route; check its address and that it answers from this host.",
        "https://github.com/BAAI-WuDao/EVA/issues/3",
        "ssh: connect to host 175.24.121.148 port 22: No route to host",
    ),
    _sig(
        "ssh-connection-dropped",
        "transport",
        50,
        r"Connection to \S+ closed by remote host|packet_write_wait: Connection to \S+ port \d+: Broken pipe"
        r"|client_loop: send disconnect: Broken pipe|^Write failed: Broken pipe"
        r"|(packet_write_wait|ssh_dispatch_run_fatal): Connection to \S+ port \d+: "
        r"(Broken pipe|Connection reset by peer|Operation timed out)"
        r"|^Connection (closed|reset) by \S+ port \d+",
        "The SSH session to the worker dropped mid-command: check the worker is still up (preemption, "
        "reboot, OOM of sshd) and the network path; the remote command may still be running.",
        "https://github.com/pytorch/xla/issues/3129",
        "packet_write_wait: Connection to 120.192.110.58 port 22: Broken pipe",
    ),
    _sig(
        "ssh-banner-not-read",
        "transport",
        70,
        r"Error reading SSH protocol banner|Connection timed out during banner exchange"
        # the same failure as a traceback: paramiko waited for the banner and got EOF or a timeout
        r"|paramiko/transport\.py\", line \d+, in _check_banner",
        "The SSH handshake got no (or no SSH) banner: the worker's sshd is overloaded, still starting, "
        "or something else answers on the port; check sshd on the worker and raise the banner timeout.",
        "https://github.com/fabric/fabric/issues/2157",
        "Exception: Error reading SSH protocol banner",
    ),
    _sig(
        "ssh-kex-closed",
        "transport",
        60,
        r"(kex|ssh)_exchange_identification: (Connection closed by remote host|read: Connection reset by peer)",
        "The worker closed the connection before the key exchange: sshd refused it (MaxStartups, "
        "firewall, IAP/bastion rules, a tunnel that cannot reach port 22); check the path and sshd's log.",
        "https://github.com/pytorch/xla/issues/2665",
        "kex_exchange_identification: Connection closed by remote host",
    ),
    _sig(
        "ssh-client-frame",
        "transport",
        45,
        # A traceback through the SSH client's connect or login: whatever the last line says (a socket
        # error, a refused key, an unknown host key), the worker was not reached.
        r"paramiko[/\\](client|transport)\.py\", line \d+, in (_auth|connect|auth_\w+|start_client)\b"
        # Fabric opens lazily: Connection.open, or its `opens` decorator before run/put/get
        r"|fabric[/\\]connection\.py\", line \d+, in (open|opens|open_gateway)$",
        "The traceback ends in the SSH client's connection or login to the worker: the last lines say why "
        "(refused credentials, unreachable port, unknown host key); check the fleet's ssh settings for it.",
        "https://github.com/paramiko/paramiko/issues/2316",
        'File "D:\\23.10.17\\smartIDC\\python39\\lib\\site-packages\\paramiko\\client.py", line 766, in _auth',
    ),
    _sig(
        "ssh-resolve-hostname",
        "transport",
        65,
        r"ssh: Could not resolve hostname",
        "The worker's address does not resolve: fix the host in fleet.yaml (a typo, a nickname, an empty "
        "value) or the controller's DNS.",
        "https://github.com/mfat/sshpilot/issues/483",
        "ssh: Could not resolve hostname router: Name or service not known",
    ),
    _sig(
        "gcloud-ssh-failed",
        "transport",
        55,
        # ssh itself fails with 255; any other code is the remote command's own exit status.
        r"ERROR: \(gcloud\.compute\.[\w.-]*ssh\)(?! \[\S+\] exited with return code \[(?!255\])\d+\])"
        r"|ERROR: \(gcloud\.compute\.[\w.-]*scp\)|ERROR: \(gcloud\.compute\.start-iap-tunnel\)",
        "gcloud could not open the SSH session to the worker (the reason is on the lines before: "
        "firewall, IAP, project or key): check `gcloud compute tpus tpu-vm ssh` by hand.",
        "https://github.com/tensorflow/tpu/issues/233",
        "It gives: ERROR: (gcloud.compute.ssh) [/usr/bin/ssh] exited with return code [255].",
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
        r"open\(/dev/(vfio/\w+|accel\d+)\): Device or resource busy|Couldn't open iommu group /dev/vfio/\d+"
        # the same EBUSY as other VFIO users print it (DPDK EAL "Cannot open /dev/vfio/151: ...")
        r"|/dev/(vfio/\w+|accel\d+)\b.{0,20}Device or resource busy",
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
        r"|PERMISSION_DENIED: open\(/dev/accel\d+\)|open\(/dev/accel\d+\): Operation not permitted",
        "The TPU device node could not be opened: a dangling process may still hold it, or this user "
        "lacks permission; check `lsof -w /dev/accel0` and the device node's owner.",
        "https://github.com/pytorch/xla/issues/3165",
        "Invalid argument: Invalid fd: -1; Couldn't open device: /dev/accel0 (Operation not permitted); "
        "Unable to create Node RegisterInterface for node 0",
    ),
    # ------------------------------------------------------------ runtime-proof
    _sig(
        "jax-unknown-backend",
        "runtime-proof",
        70,
        r"Unknown backend:? '?\w+'? requested, but no platforms( that are)?"
        # JAX_PLATFORMS names a platform no installed plugin registers
        r"|Backend '\w+' is not in the list of known backends",
        "JAX was asked for a platform it did not initialise (JAX_PLATFORMS or jax.devices('tpu') with no "
        "TPU backend): the earlier 'Unable to initialize backend' line says why; fix the runtime first.",
        "https://github.com/danijar/dreamerv3/issues/18",
        "Unknown backend: 'gpu' requested, but no platforms that are instances of gpu are present. "
        "Platforms present are: interpreter,cpu",
    ),
    _sig(
        "tpu-device-not-found",
        "runtime-proof",
        80,
        r"(TPU initialization failed: |NOT_FOUND: )No \w+ device found",
        "libtpu found no TPU chip on this host: the lane intends tpu but the worker has none (check "
        "/dev/accel*, /dev/vfio/*); fix the worker or move it to a cpu lane. If the chips are there, the "
        "installed libtpu may predate this TPU generation: deploy a bundle validated for it.",
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
        r"could not determine TPU (accelerator type|worker hostnames)|Failed to find host bounds for accelerator type"
        # torch_xla's legacy XRT runtime started with no device configuration in its environment
        r"|Missing XLA [Cc]onfiguration",
        "The runtime could not learn the device/slice configuration from its environment: set "
        "TPU_SKIP_MDS_QUERY=1, TPU_ACCELERATOR_TYPE, TPU_WORKER_ID and TPU_WORKER_HOSTNAMES explicitly (the "
        "fleet's runtime policy does); legacy torch_xla XRT needs XRT_TPU_CONFIG (or PJRT_DEVICE on PJRT).",
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
        r"\b(XLA )?[Rr]untime (is )?(already|ALREADY) initiali[sz]ed",
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
        # Below CONFIDENT_PRIORITY: the CPU default says torch_xla found no TPU, not why; the
        # cause is as often a torch/torch_xla skew (pytorch/xla#8626) as an unset PJRT_DEVICE.
        18,
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
        "jax-requested-platform-missing",
        "runtime-proof",
        # JAX raises (rather than logs and skips) a backend it cannot start only when the platform
        # policy (JAX_PLATFORMS, jax_platforms) asked for it: the policy names a platform the host lacks.
        40,
        r"RuntimeError: Unable to initialize backend '(cuda|rocm|gpu|METAL|tpu_driver)'",
        "The platform policy asks for a backend this host does not have (or set it after JAX was "
        "imported): set JAX_PLATFORMS in the lane's runtime profile, before import, to the lane's device.",
        "https://github.com/jax-ml/jax/issues/23208",
        "RuntimeError: Unable to initialize backend 'cuda': FAILED_PRECONDITION: No visible GPU devices. (you may "
        "need to uninstall the failing plugin package, or set JAX_PLATFORMS=cpu to skip this backend.)",
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
        "tpu-device-count-env-mismatch",
        "runtime-proof",
        60,
        r"The number of devices must be either 1 or \d+, got \d+ instead"
        # XRT's form of the same mismatch: a device index past the count the topology env gave
        r"|num_tpu_devices_per_task\(\) \(\d+ vs\. \d+\)",
        "The process count does not match the TPU device count the runtime read from the environment "
        "(TPU_NUM_DEVICES and the topology variables): set them in the lane's runtime profile before import.",
        "https://github.com/pytorch/xla/issues/2483",
        "ValueError: The number of devices must be either 1 or 8, got 2 instead",
    ),
    _sig(
        "tf-tpu-system-not-found",
        "runtime-proof",
        60,
        r"No matching devices found for '/(job:\w+/replica:\d+/task:\d+/)?device:TPU_SYSTEM:\d+'",
        "TensorFlow found no TPU system device: the TPU runtime did not come up in this process (resolver, "
        "libtpu, or a setting applied before init); prove the device with `orch probe` first.",
        "https://github.com/google-research/multilingual-t5/issues/808",
        "InvalidArgumentError: No matching devices found for '/device:TPU_SYSTEM:0' [Op:__inference__tpu_init_fn_10]",
    ),
    _sig(
        "xla-env-deprecated",
        "runtime-proof",
        30,
        r"XLA_USE_BF16 will be deprecated|XLA_USE_SPMD is being deprecated",
        "A deprecated torch_xla variable is set: drop XLA_USE_BF16 (it breaks the current Pallas attention "
        "path; cast the model to bf16 in code) and XLA_USE_SPMD (call torch_xla.runtime.use_spmd() before "
        "any XLA tensor exists) from the runtime profile.",
        _PTXLA_GH + "torch_xla/csrc/dtype.cpp",
        "XLA_USE_BF16 will be deprecated after the 2.5 release, please convert your model to bf16 directly",
    ),
    _sig(
        "jax-tpu-driver-backend-failed",
        "runtime-proof",
        60,
        r"Requested backend tpu_driver, but it failed to initialize",
        "The legacy tpu_driver backend (Colab/TPU Node) is not available here: use a TPU VM runtime "
        "with libtpu and the default 'tpu' backend.",
        "https://github.com/google-research/vision_transformer/issues/146",
        "RuntimeError: Requested backend tpu_driver, but it failed to initialize: NOT_FOUND: Unable to "
        "find driver in registry given worker:",
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
        "jax-jaxlib-version-skew",
        "bundle-skew",
        95,
        # Both directions of the check jax runs at import; newer releases wrap the first after "jax".
        r"jaxlib is version \S+, but this version of jax\b|jaxlib version \S+ is newer than and incompatible with jax",
        "jax and jaxlib come from different releases: install the pair the bundle pins.",
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
        "libtpu-wheel-without-library",
        "bundle-skew",
        # Above libtpu-open-failed: the path is inside an installed libtpu package, so libtpu is
        # not missing; the installed wheel lacks the library this jax looks for (another release).
        80,
        r"Failed to open \S*[/\\](site|dist)-packages[/\\]libtpu\w*[/\\]\S*libtpu\.so: .*"
        r"(cannot open shared object file|No such file)",
        "An installed libtpu package lacks the libtpu.so this jax loads (the jax[tpu] pin resolved a "
        "libtpu release of another layout): install the libtpu release the bundle validates with this jax.",
        "https://github.com/jax-ml/jax/issues/24987",
        "RuntimeError: Unable to initialize backend 'tpu': INTERNAL: Failed to open /home/XXXXX/.local/lib/"
        "python3.10/site-packages/libtpu/libtpu.so: /home/XXXXX/.local/lib/python3.10/site-packages/libtpu/"
        "libtpu.so: cannot open shared object file: No such file or directory",
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
        r"No module named '(torch_xla|torch_tpu|torch|jax|jaxlib|libtpu|flax|optax|orbax)\b[\w.]*'",
        "A frontend (or a version-gated part of one) is not in this environment: check the lane's "
        "bundle includes it at a version that has the module.",
        "https://github.com/AI-Hypercomputer/torchprime/issues/259",
        "Error importing relative module: No module named 'torch_xla.experimental.splash_attention'",
    ),
    _sig(
        "pjrt-api-version-mismatch",
        "bundle-skew",
        95,
        r"Mismatched PJRT plugin PJRT API version"
        # a Pallas/Mosaic kernel serialised by jax at an IR version the installed libtpu cannot read
        r"|Failed to deserialize the Mosaic module: .*Unsupported version",
        "The PJRT plugin (libtpu or another backend) speaks another API or IR version than the framework "
        "(PJRT API, Mosaic kernels): install the plugin validated with this jax/torch_xla; they move "
        "together as one bundle.",
        "https://github.com/pytorch/xla/issues/6949",
        "F0000 00:00:1713630999.125092  494916 pjrt_computation_client.cc:158] Non-OK-status: tpu_status "
        "status: INVALID_ARGUMENT: Mismatched PJRT plugin PJRT API version (0.47) and framework PJRT API "
        "version 0.40).",
    ),
    _sig(
        "pip-pin-unavailable",
        "bundle-skew",
        70,
        r"(Could not find a version that satisfies the requirement|No matching distribution found for) "
        r"(jax|jaxlib|libtpu|torch|torch[_-]xla|flax)\b",
        "A pinned frontend or runtime wheel is not on the index any more: the bundle must be rebuilt "
        "from versions that exist (and are validated together), not patched one wheel at a time.",
        "https://github.com/huggingface/diffusers/issues/8315",
        "ERROR: No matching distribution found for jaxlib==0.3.25",
    ),
    _sig(
        "wheel-inconsistent-version",
        "bundle-skew",
        70,
        r"has inconsistent version: expected '[^']+', but metadata has",
        "pip refused a wheel of the bundle whose metadata disagrees with its name: pin a libtpu/jax "
        "release whose wheels are consistent, for the whole bundle.",
        "https://github.com/jax-ml/jax/issues/22793",
        "Discarding https://storage.googleapis.com/libtpu-nightly-releases/wheels/libtpu-nightly/"
        "libtpu_nightly-0.1.dev20240729%2Bnightly-py3-none-any.whl (from https://storage.googleapis.com/"
        "jax-releases/libtpu_releases.html): Requested libtpu-nightly==0.1.dev20240729 from "
        "https://storage.googleapis.com/libtpu-nightly-releases/wheels/libtpu-nightly/libtpu_nightly-0.1."
        "dev20240729%2Bnightly-py3-none-any.whl (from jax==0.4.31) has inconsistent version: expected "
        "'0.1.dev20240729+nightly', but metadata has '0.1.dev20240729+default'",
    ),
    _sig(
        "numpy-abi-mismatch",
        "bundle-skew",
        60,
        r"A module that was compiled using NumPy 1\.x cannot be run in"
        r"|module compiled against (API|ABI) version \S+ but this version of numpy is"
        # the same ABI break as older wheels report it
        r"|numpy\.dtype size changed, may indicate binary incompatibility|numpy\.core\.multiarray failed to import",
        "A compiled wheel (jaxlib, torch, ...) was built for another NumPy major: pin numpy with the "
        "bundle instead of letting an unrelated install upgrade it.",
        "https://github.com/jupyter/notebook/issues/7522",
        "A module that was compiled using NumPy 1.x cannot be run in",
    ),
    _sig(
        "native-extension-mismatch",
        "bundle-skew",
        # Below the torch_xla-specific one: any compiled extension that misses a symbol of the
        # library it was built against (jaxlib against absl, torchvision against torch), or a
        # torch/XLA extension whose companion library is not installed beside it.
        55,
        r"\.so(\.[\w.]+)?: undefined symbol: \w+"
        r"|(libc10|libtorch\w*|_XLAC\S*|xla_extension\S*|libjax\w*)\.so[\w.]*: cannot open shared object file",
        "A compiled extension was built against another version of a library it loads: install the "
        "builds the bundle pins together instead of mixing channels (pip, conda) or releases.",
        "https://github.com/conda-forge/jaxlib-feedstock/issues/139",
        "E   ImportError: /home/runner/micromamba-root/envs/jaxbug-test/lib/python3.10/site-packages/jaxlib/"
        "xla_extension.so: undefined symbol: _ZN4absl12lts_202206235MutexD1Ev",
    ),
    _sig(
        "frontend-name-missing",
        "bundle-skew",
        65,
        r"cannot import name '\w+' from '(jax|jaxlib|flax|optax|orbax|torch_xla|libtpu)\b",
        "A library was installed for another jax/torch_xla release than the one present (flax, optax "
        "and friends move with jax): install the versions the bundle pins together.",
        "https://github.com/jax-ml/jax/issues/17508",
        "ImportError: cannot import name 'ShapedArray' from 'jax' (/usr/local/lib/python3.10/dist-packages/"
        "jax/__init__.py)",
    ),
    _sig(
        "frontend-attribute-missing",
        "bundle-skew",
        65,
        r"AttributeError(: |\(\"?)module '(jax|jaxlib|flax|optax|orbax|torch_xla|libtpu)\b[\w.]*' has no attribute"
        # the TPU backend failing on it (JAX also probes the GPU plugins at INFO level, harmlessly)
        r"|Unable to initialize backend 'tpu': module '(jax|jaxlib|libtpu)\b[\w.]*' has no attribute",
        "A jax/torch_xla module lacks a name another installed package (or jax itself) expects: the "
        "versions do not belong together; install the set the bundle pins.",
        "https://github.com/blackjax-devs/blackjax/issues/787",
        "AttributeError: module 'jax.core' has no attribute 'Shape'",
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
        r"Error reading persistent compilation cache entry( for|:)",
        "JAX could not read a cache entry (permissions, a concurrent writer, or an entry from another "
        "bundle): give each host its own writable cache or one writer with read-only readers.",
        "https://github.com/jax-ml/jax/issues/22718",
        "UserWarning: Error reading persistent compilation cache entry for 'jit_run_evaluation_rollout': "
        "PermissionError: [Errno 13] Permission denied: ",
    ),
    _sig(
        "jax-cache-key-unstable",
        "cache",
        # JAX logs how it built the persistent-cache key only when someone is chasing cache misses
        # (jax_persistent_cache / compiler debug logging): the log is about reuse of the cache.
        30,
        r"get_cache_key hash (of|after) |cache key for computation is different",
        "The persistent-cache key differs between runs that should share it: compare the key inputs "
        "(bundle, flags, device assignment) of the two runs; the lane's pre-import policy must be identical.",
        "https://github.com/jax-ml/jax/issues/16649",
        "[DEBUG] [jax._src.com]: get_cache_key hash of serialized computation: 4116f2411714e16983",
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
        "cache-dir-not-writable",
        "cache",
        # A symptom-level owner: the path names a cache directory (a compilation cache or one under
        # ~/.cache that a library creates at import), and it is not writable by this user.
        45,
        r"(Permission denied|Read-only file system|PERMISSION_DENIED)\b.*?[/\\]"
        r"(\.cache[/\\](?!huggingface|pip\b|torch[/\\]hub|matplotlib|fontconfig|uv\b)"
        r"|[\w.-]*(compil|xla|jax|jit|autotune)[\w.-]*cach)",
        "A cache directory is not writable by this user: point the cache at a writable path owned by "
        "the run (JAX_COMPILATION_CACHE_DIR, XLA_PERSISTENT_CACHE_PATH, the lane's cache path) instead "
        "of a home or shared directory another user created.",
        "https://github.com/zadorlab/sella/pull/74",
        "PermissionError: [Errno 13] Permission denied: '/home/alexlm/.cache/sella'",
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
        r"Ran out of memory in memory space hbm|\bCompileTimeHbmOom\b"
        # XLA:TPU's memory report, printed with the OOM whatever the status line above it says
        r"|^\s*Program hbm requirement [\d.]+[KMGT]?:",
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
        r"Ran out of memory in memory space vmem|\bCompileTimeScopedVmemOom\b|exceeded scoped vmem limit",
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
        "device-allocation-request-failed",
        "memory",
        80,
        r"Failed to allocate request for [\d.]+\w*B? \(\d+B\) on device ordinal \d+",
        "A device allocation did not fit in free HBM: reduce the footprint (batch, shards per device) and "
        "check no earlier array or process still holds memory on this chip.",
        "https://github.com/kingoflolz/mesh-transformer-jax/issues/209",
        "2022-03-07 18:41:42.980600: E external/org_tensorflow/tensorflow/compiler/xla/pjrt/"
        "pjrt_stream_executor_client.cc:2124] Execution of replica 0 failed: RESOURCE_EXHAUSTED: Failed to "
        "allocate request for 256.00MiB (268435456B) on device ordinal 0",
    ),
    _sig(
        "host-oom-killer",
        "memory",
        85,
        r"[Oo]ut of memory: Killed process \d+|^\S.*Killed process \d+ \(.*\) total-vm:|oom-kill:constraint="
        r"|Memory cgroup out of memory|Out of memory: Kill process \d+ \(.*\) score \d+|invoked oom-killer: gfp_mask=",
        "The kernel's OOM killer ended the process (host RAM, not HBM): lower host-side memory (data "
        "loading, checkpoint staging, number of processes per host).",
        "https://github.com/pcyin/tranX/issues/41",
        "[2059991.491542] Out of memory: Killed process 25315 (python3) total-vm:53312244",
    ),
    _sig(
        "host-alloc-enomem",
        "memory",
        70,
        r"DefaultCPUAllocator: (can't allocate memory|not enough memory)|Error code 12 \(Cannot allocate memory\)"
        # the same errno as C, Rust and the JVM print it
        r"|\[Errno 12\] Cannot allocate memory|Cannot allocate memory \(os error 12\)"
        # NumPy's own refusal for a host array
        r"|Unable to allocate [\d.]+ [KMGTP]i?B for an array with shape"
        r"|errno[:=] ?12\b.{0,40}Cannot allocate memory|'Cannot allocate memory' \(errno=12\)",
        "Host RAM ran out (the allocator got ENOMEM): lower the batch, the data-loading workers or the "
        "processes per host, and check for leftover processes holding memory.",
        "https://github.com/Esri/arcgis-python-api/issues/743",
        "RuntimeError: [enforce fail at CPUAllocator.cpp:64] . DefaultCPUAllocator: can't allocate memory: "
        "you tried to allocate 402653184 bytes. Error code 12 (Cannot allocate memory).",
    ),
    _sig(
        "dataloader-worker-killed",
        "memory",
        # A DataLoader worker that dies without a Python error was almost always SIGKILLed by the
        # OOM killer (host RAM): pytorch/pytorch#8976 and the threads linked from it.
        45,
        r"DataLoader worker \(pid(\(s\))? [^)]*\) (exited unexpectedly|is killed by signal: Killed)",
        "A data-loading worker was killed, almost always by the OOM killer (host RAM): check `dmesg` on "
        "that worker and lower num_workers, prefetching or the processes per host.",
        "https://github.com/pytorch/xla/issues/2359",
        "Exception in device=TPU:6: DataLoader worker (pid(s) 1235) exited unexpectedly",
    ),
    _sig(
        "accelerator-framework-oom",
        "memory",
        80,
        r"CUDA out of memory\. Tried to allocate|torch\.(cuda\.)?OutOfMemoryError: ",
        "Device memory ran out: reduce the batch, sequence or per-device footprint, and check no other "
        "process holds memory on the device.",
        "https://github.com/pytorch/pytorch/issues/16417",
        "RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; 8.57 MiB "
        "already allocated; 9.28 GiB free; 4.68 MiB cached)",
    ),
    _sig(
        "ray-node-low-memory",
        "memory",
        85,
        r"Task was killed due to the node running low on memory"
        r"|Workers? \(tasks / actors\) killed due to memory pressure",
        "Ray's memory monitor killed a worker (host RAM): lower per-task memory or parallelism on that node.",
        "https://github.com/real-stanford/flingbot/issues/11",
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
    ),
    _sig(
        "resource-exhausted-allocate",
        "memory",
        70,
        r"RESOURCE_EXHAUSTED: Out of memory while trying to allocate \d+ bytes|OOM when allocating tensor with shape",
        "An allocation failed for lack of device memory: reduce the footprint or shard more.",
        "https://github.com/google-deepmind/alphafold/issues/1023",
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
        "7406166528 bytes.",
    ),
    _sig(
        "resource-exhausted",
        "memory",
        40,
        # gRPC's message-size limit says RESOURCE_EXHAUSTED too, about a message, not memory.
        r"\bRESOURCE_EXHAUSTED\b(?!.*message larger than max)|Resource exhausted:(?! ?\.{0,2}/(?!job:))",
        "A runtime resource ran out, most often device memory: read the rest of the message for which.",
        "https://github.com/pytorch/xla/issues/1735",
        "RuntimeError: Resource exhausted: From /job:tpu_worker/replica:0/task:0:",
    ),
    _sig(
        "process-killed",
        "memory",
        20,
        r"^\s*Killed\s*$|(it/s|s/it|\d%)\]?\s*Killed\s*$|/bin/\w+: line \d+: +\d+ Killed\b|^zsh: killed +\S"
        r"|exit code 137 \(interrupted by signal 9: SIGKILL\)|Signal 9 \(SIGKILL\) received by PID \d+"
        r"|returned non-zero exit status -9\b",
        "The process was killed with SIGKILL, most often by the OOM killer: check `dmesg` for "
        "'Out of memory' on that worker.",
        "https://github.com/tmux/tmux/issues/2364",
        "Killed",
    ),
    _sig(
        "ray-worker-died-system-error",
        "memory",
        30,
        r"Worker unexpectedly exits with a connection error code 2\. End of file\. There are some potential "
        r"root causes\. \(1\) The process is killed by SIGKILL by OOM killer",
        "A Ray worker died without an exception; the usual cause is the OOM killer: check the node's "
        "`dmesg` and Ray's memory monitor, and lower the per-worker memory.",
        "https://github.com/PeterGriffinJin/Search-R1/issues/45",
        "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
        "detail: Worker unexpectedly exits with a connection error code 2. End of file. There are some "
        "potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage.",
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
        consequence=True,
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
        "jax-coordination-deadline",
        "collective",
        65,
        r"DEADLINE_EXCEEDED: Barrier timed out|CoordinationService/RegisterTask|Barrier timed out\. (Barrier_id|Id): \w"
        r"|Coordination service agent in error status: DEADLINE_EXCEEDED",
        "Not every process reached the JAX coordinator (process 0) in time: find the missing tasks named "
        "on the following lines (they did not start, crashed first or cannot reach the coordinator "
        "address/port) and relaunch the gang.",
        "https://github.com/ayaka14732/llama-2-jax/issues/20",
        "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: "
        "PjRT_Client_Connect. Timed out task names:",
        consequence=True,
    ),
    _sig(
        "jax-coordination-service-error",
        "collective",
        # The JAX/XLA coordination service (process 0's key-value store, barriers, heartbeats): a
        # key another task should have published never came, or an RPC to the service failed.
        60,
        r"GetKeyValue\(\) timed out with key|CoordinationService/(GetKeyValue|Heartbeat|Barrier|PollForError"
        r"|WaitForAllTasks|ReportErrorToService)|\[type\.googleapis\.com/tensorflow\.CoordinationServiceError"
        r"|error information from remote target /job:jax_worker",
        "A task did not publish or answer through the JAX coordination service in time: find the task "
        "that failed or never started (its own log has the cause) and relaunch the gang.",
        "https://github.com/EnzymeAD/Enzyme-JAX/issues/623",
        "Execution of replica 0 failed: DEADLINE_EXCEEDED: GetKeyValue() timed out with key: devices=[0,1]; "
        "... and duration: 10m [type.googleapis.com/tensorflow.CoordinationServiceError='']",
        consequence=True,
    ),
    _sig(
        "grpc-coordinator-unreachable",
        "collective",
        # gRPC's wording when a client cannot open its channel: in a TPU gang that is the JAX
        # coordinator or the XLA mesh master (SSH never speaks gRPC).
        40,
        r"Failed to connect to remote host: (Connection refused|Connection reset by peer|No route to host)"
        r"|failed to connect to all addresses|Failed to connect to remote server at address: grpc://",
        "A worker could not reach the gang's coordinator (JAX coordinator or XLA mesh master): check the "
        "coordinator process is up on its host and the address/port is reachable from every worker.",
        "https://github.com/marin-community/marin/issues/8244",
        "all four ranks fail: `Failed to connect to remote host: Connection refused` at `<node-ip>:32623`",
    ),
    _sig(
        "torch-elastic-rendezvous-error",
        "collective",
        55,
        r"\bRendezvous(Connection|Timeout|Closed|State)Error\b",
        "torchrun's rendezvous failed (store unreachable, timed out or closed): check --rdzv_endpoint is "
        "reachable from every node and all nodes were started; the first node to fail has the cause.",
        "https://github.com/ymcui/Chinese-LLaMA-Alpaca-2/issues/274",
        "has failed to shutdown the rendezvous '3045048' due to an error of type RendezvousConnectionError.",
    ),
    _sig(
        "torch-dist-network-error",
        "collective",
        # torch.distributed raises DistNetworkError only from its store/rendezvous sockets.
        50,
        r"\bDistNetworkError\b: \S|in _(env|tcp)_rendezvous_handler$|in _create_c10d_store$",
        "A rank lost or could not open its connection to the c10d store on MASTER_ADDR:MASTER_PORT: check "
        "rank 0 is up and the address is reachable from every worker, then relaunch the gang.",
        "https://github.com/pytorch/pytorch/issues/118666",
        "torch.distributed.DistNetworkError: Connection reset by peer",
    ),
    _sig(
        "torch-store-barrier-timeout",
        "collective",
        60,
        r"Timed out initializing process group in store based barrier on rank"
        # TCPStore's connect timeout before it was a DistNetworkError
        r"|connect\(\) timed out\. Original timeout was \d+ ms",
        "Not every rank joined the process group in time: a worker did not start, failed first or "
        "cannot reach MASTER_ADDR:MASTER_PORT; check the first worker's log, then relaunch the gang.",
        "https://github.com/pytorch/pytorch/issues/67581",
        "RuntimeError: connect() timed out. Original timeout was 60000 ms.",
    ),
    _sig(
        "torch-rpc-agent-error",
        "collective",
        45,
        r"RPC agent for \S+ encountered error",
        "torch.distributed.rpc lost a connection between workers: check every worker is up and reachable, "
        "and the shared-memory/socket limits on hosts with many workers.",
        "https://github.com/pytorch/pytorch/issues/85607",
        "[W tensorpipe_agent.cpp:916] RPC agent for 3 encountered error when sending outgoing request #0 to 0: "
        "async error on socket: Connection reset by peer",
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
        consequence=True,
    ),
    _sig(
        "gloo-full-mesh-failed",
        "collective",
        60,
        r"Gloo connectFullMesh failed"
        # the same failure as a native stack: gloo connecting every pair of ranks
        r"|gloo::(rendezvous::Context::connectFullMesh|transport::tcp::Context::createAndConnectAllPairs)\(",
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
        "jax-controller-connect-failed",
        "collective",
        60,
        r"Failed to connect to distributed JAX controller",
        "Not every process reached the JAX coordinator: a task crashed before connecting, was never "
        "started, or cannot reach process 0's address; check every worker's log and the coordinator address.",
        _XLA_GH + "xla/pjrt/distributed/client.cc",
        "Failed to connect to distributed JAX controller: waited too long for some tasks to show up. This may "
        "be due to 1) some tasks crashed earlier before connecting, 2) some tasks were never scheduled, or 3) "
        "scheduling delays.",
        consequence=True,
    ),
    _sig(
        "jax-tasks-unhealthy",
        "collective",
        55,
        r"tasks are unhealthy \(stopped sending heartbeats\)|heartbeat timeout\. This indicates that the "
        r"remote task has failed"
        # the same timeout with the task named, in any version's wording after it
        r"|Task /job:\w+/replica:\d+/task:\d+ heartbeat timeout",
        "A peer process died and the gang shares its fate: the task named on the next lines has the real "
        "error in its own log; tear the gang down and relaunch.",
        _JAX_GH + "docs/fault_tolerance.rst",
        "absl::Status: UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):",
        consequence=True,
    ),
    _sig(
        "jax-distributed-fatal",
        "collective",
        50,
        r"Terminating process because the JAX distributed service detected fatal errors"
        # the coordination service's own word for the same: a task never reached the shutdown barrier
        r"|Shutdown barrier has failed",
        "The JAX distributed service aborted this process (rc 134) because of another task: read the "
        "status after 'absl::Status:' and the log of the task it names.",
        _JAX_GH + "docs/fault_tolerance.rst",
        "F0926 17:26:32.075587  157988 client.h:77] Terminating process because the JAX distributed "
        "service detected fatal errors. This most likely indicates that another task died; see the other "
        "task logs for more details.",
        consequence=True,
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
        consequence=True,
    ),
    _sig(
        "gloo-connect-failed",
        "collective",
        # gloo resolved this host to an address the peers cannot use (127.0.1.1, the wrong
        # interface) or the peer is not listening: GLOO_SOCKET_IFNAME fixes the first.
        60,
        r"gloo/transport/tcp/pair\.cc:\d+\] (connect \S+: |.*SO_ERROR: )"
        r"(Connection refused|No route to host|Connection timed out|Network is unreachable)"
        r"|gloo/transport/tcp/device\.cc:\d+\].*Unable to find address for",
        "gloo could not connect to a peer: the host resolves to a loopback or wrong interface (set "
        "GLOO_SOCKET_IFNAME to the interface the workers share) or the peer rank is not up.",
        "https://github.com/pytorch/pytorch/issues/15592",
        "  what():  [/opt/conda/conda-bld/pytorch_1544084119927/work/third_party/gloo/gloo/transport/tcp/"
        "pair.cc:724] connect [127.0.1.1]:3210: Connection refused",
    ),
    _sig(
        "gloo-peer-closed",
        "collective",
        55,
        r"gloo/transport/tcp/pair\.cc:\d+\] (Connection closed by peer|Read error .*Connection reset by peer)"
        # a peer that never answers: gloo's wait on an unbound buffer times out
        r"|gloo/transport/tcp/unbound_buffer\.cc:\d+\] Timed out waiting \d+ms for (recv|send) operation",
        "A gloo peer went away mid-collective: the rank at that address crashed or was killed first; "
        "read its log, then relaunch the gang.",
        "https://github.com/pytorch/pytorch/issues/75512",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
        "[18.25.6.30]:28048",
        consequence=True,
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
    _sig(
        "nccl-watchdog-timeout",
        "collective",
        60,
        r"Watchdog caught collective operation timeout|Some NCCL operations have failed or timed out"
        r"|ProcessGroupNCCL's watchdog got stuck",
        "A collective waited past its timeout on this rank: another rank did not reach it (crashed, "
        "stuck or diverged); find the first rank that failed, then relaunch the gang.",
        "https://github.com/XPixelGroup/BasicSR/issues/737",
        "[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, "
        "Timeout(ms)=600000) ran for 600020 milliseconds before timing out.",
        consequence=True,
    ),
    _sig(
        "xla-rendezvous-stuck",
        "collective",
        55,
        r"This thread has been waiting for .* and may be stuck"
        r"|Expected \d+ threads to join the rendezvous, but not all of them arrived on time",
        "Not every participant reached an XLA rendezvous: a peer process or device is missing or "
        "stuck; check every process started and runs the same program.",
        "https://github.com/jax-ml/jax/issues/22740",
        "2024-07-29 17:14:59.920189: E external/xla/xla/service/rendezvous.cc:38] This thread has been "
        "waiting for `initialize clique for rank 6; clique=devices=[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]; "
        "stream=0; run_id=724296073` for 10 seconds and may be stuck. Expected 8 threads to join the "
        "rendezvous, but not all of them arrived on time.",
        consequence=True,
    ),
    _sig(
        "torch-rendezvous-store-frame",
        "collective",
        45,
        r"\bstore = TCPStore\(",
        "Creating the torch.distributed rendezvous store failed: check MASTER_ADDR/MASTER_PORT are "
        "reachable from every worker, rank 0 is up and WORLD_SIZE/RANK are right.",
        "https://github.com/yangkky/distributed_tutorial/issues/3",
        "    store = TCPStore(master_addr, master_port, world_size, start_daemon)",
    ),
    _sig(
        "c10d-server-listen-failed",
        "collective",
        65,
        r"The server socket has failed to listen on any local network address",
        "The rendezvous port on the first worker is taken (a leftover process of an earlier run, or two "
        "jobs sharing MASTER_PORT): stop the leftover process or give each job its own port.",
        "https://github.com/showlab/Tune-A-Video/issues/90",
        "RuntimeError: The server socket has failed to listen on any local network address. The server socket "
        "has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
    ),
    _sig(
        "nccl-system-error",
        "collective",
        55,
        r"NCCL error in: \S+, (unhandled system error|remote process exited or there was a network error)"
        r"|\bnccl(System|Remote)Error\b|Proxy Call to rank \d+ failed \((Connect|Setup)\)"
        # the same loss as NCCL's own socket layer and nccl-tests print it, across NCCL versions
        r"|NCCL WARN (Net|socketProgress) ?: (Connection closed by remote peer|Call to recv from \S+ failed)"
        r"|NCCL failure \S+ '(unhandled system error|remote process exited)",
        "NCCL lost or could not open a connection between ranks: set NCCL_SOCKET_IFNAME to the interface "
        "the workers share, check the other ranks are up (the first to fail has the cause), and relaunch.",
        "https://github.com/vllm-project/vllm/issues/10523",
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
        "1333, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1",
    ),
    _sig(
        "c10d-store-connect-timeout",
        "collective",
        60,
        r"\[c10d\] The client socket has timed out after \d+m?s while trying to connect to"
        r"|RendezvousConnectionError: The connection to the C10d store has failed",
        "A node could not reach the c10d rendezvous endpoint: check --rdzv_endpoint/MASTER_ADDR is "
        "reachable from every node (firewall, interface) and that the node hosting it is up.",
        "https://github.com/pytorch/pytorch/issues/76367",
        "[E socket.cpp:793] [c10d] The client socket has timed out after 60s while trying to connect to (IP1, 2222).",
    ),
    _sig(
        "xla-mesh-connect-check-failed",
        "collective",
        60,
        r"mesh_service\.cc:\d+ : Check failed: impl_->channel|Failed to connect to client mesh master",
        "A torch_xla (XRT) replica could not connect to the mesh service in time: the master replica "
        "died or is unreachable; check the first replica's log and the network between workers.",
        "https://github.com/pytorch/xla/issues/4115",
        "RuntimeError: tensorflow/compiler/xla/xla_client/mesh_service.cc:329 : Check failed: "
        "impl_->channel->WaitForConnected( std::chrono::system_clock::now() + std::chrono::seconds(connect_w",
    ),
    _sig(
        "jax-wait-at-barrier",
        "collective",
        40,
        r"\bwait_at_barrier\(",
        "A JAX barrier between processes failed: a peer crashed or was not launched, or is slower than "
        "the barrier timeout; check every worker's log and the timeout.",
        "https://github.com/marin-community/marin/issues/1902",
        '    client.wait_at_barrier(f"multihost_broadcast_sync{_sync_counter}", timeout_in_ms=int(timeout * 1000.0))',
        consequence=True,
    ),
    # --------------------------------------------------------------------- disk
    _sig(
        "disk-full",
        "disk",
        85,
        r"[Nn]o space left on device|\bENOSPC\b"
        # TensorFlow/TSL file writes map ENOSPC to RESOURCE_EXHAUSTED naming the file being written
        r"|Resource exha\w*: ?(?!/job:)\.{0,2}/[\w.-]+/\S+|ResourceExhaustedError: \S+\.tempstate\d+",
        "A filesystem is full: the message names the path; free space there (old checkpoints, caches, "
        "docker images, /dev/shm) or move it to a larger disk.",
        "https://github.com/hpcaitech/Open-Sora/issues/663",
        "OSError: [Errno 28] No space left on device",
    ),
    _sig(
        "disk-quota-exceeded",
        "disk",
        85,
        r"[Dd]isk quota exceeded|\bEDQUOT\b",
        "The user's or project's quota on that filesystem is used up (even with free space on the disk): "
        "clean up or write to a filesystem with quota left.",
        "https://github.com/KennthShang/HostG/issues/7",
        "OSError: [Errno 122] Disk quota exceeded: 'out/intermediate.ntw'",
    ),
    _sig(
        "shm-too-small",
        "disk",
        70,
        r"This might be caused by insufficient shared memory \(shm\)"
        r"|It is possible that dataloader's workers are out of shared memory",
        "/dev/shm is too small for the data-loading workers: enlarge it (a container's --shm-size) or "
        "lower num_workers.",
        "https://github.com/microsoft/RepPoints/issues/18",
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
    ),
    _sig(
        "ray-disk-over-full",
        "disk",
        60,
        r"file_system_monitor\.cc:\d+: \S+ is over \d+% full",
        "Ray's object spilling directory is (nearly) full: point spilling at a larger disk or free it.",
        "https://github.com/alpa-projects/alpa/issues/763",
        "(raylet) [2022-10-31 12:59:55,577 E 62901 62931] (raylet) file_system_monitor.cc:105: "
        "/tmp/ray/session_2022-10-31_12-54-25_011441_62842 is over 95% full, available space: 0; capacity: "
        "270475862016. Object creation will fail if spilling is required.",
    ),
    # ----------------------------------------------------------------- hardware
    _sig(
        "tpu-slice-failure",
        "hardware",
        85,
        r"Detected failure SLICE_FAILURE_\w+|Session master detected TPU session error from worker",
        "The TPU runtime detected a chip or slice fault on the named worker: take that worker (or the "
        "slice) out of service and relaunch; the other workers' errors follow from it.",
        "https://github.com/AI-Hypercomputer/maxtext/pull/2041",
        "E0511 18:18:50.796852     915 tpunetd_client.cc:311] Detected failure SLICE_FAILURE_CHIP_DRIVER_ERROR "
        "in session e6c885828b538167; Start failure handling",
    ),
    _sig(
        "accelerator-memory-hardware-fault",
        "hardware",
        85,
        r"uncorrectable ECC error encountered|CUDA_ERROR_ECC_UNCORRECTABLE|\bfallen off the bus\b",
        "The accelerator reports a hardware fault (uncorrectable memory error, device lost): take that "
        "worker out of the fleet and relaunch elsewhere; no software change fixes it.",
        "https://github.com/vllm-project/vllm/issues/5222",
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
    ),
    _sig(
        "tpu-node-unhealthy",
        "hardware",
        70,
        r"TPU \S+ is not HEALTHY",
        "The platform reports the TPU as unhealthy: wait for it to recover or recreate it; no software "
        "change on the workers fixes this.",
        "https://github.com/pytorch/xla/issues/2142",
        "RuntimeError: TPU node-v3-32 is not HEALTHY yet. Re-run when all TPUs are HEALTHY",
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
        "https://github.com/boathit/t2vec/issues/17",
        "RuntimeError: index 18864 is out of bounds for dimension 1 with size 18864",
    ),
    _sig(
        "status-error",
        "other",
        # An absl/gRPC status error (XLA, PJRT, the coordination service) says an operation failed,
        # not which layer owns it: a generic failure line, like a bare Python exception.
        8,
        r"\b(DEADLINE_EXCEEDED|UNAVAILABLE|ABORTED|INTERNAL|FAILED_PRECONDITION|CANCELLED|UNKNOWN): \S",
        "An operation failed with a status error: the rest of the line and the lines around it say which.",
        "https://github.com/vllm-project/tpu-inference/pull/412",
        "jaxlib._jax.XlaRuntimeError: INTERNAL: Core halted unexpectedly: INTERNAL: Accelerator device halted",
    ),
)
