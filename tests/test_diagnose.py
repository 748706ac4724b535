"""Failure signatures: real log excerpts land in their owning layer; the most specific line wins."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator import diagnose as diag
from orchestrator import diagnose_words
from orchestrator.cli import main
from orchestrator.diagnose_blind import (
    BLIND_PATHS,
    CORPUS_PATH,
    HELDBACK_PATH,
    TUNE_PATHS,
    load_scores,
)
from orchestrator.diagnose_corpus import (
    MAX_WRONG_RATE,
    MIN_HELD_ACCURACY,
    CorpusError,
    Entry,
    Score,
    corpus_markdown,
    load_corpus,
    load_parts,
    load_tune,
    score,
)
from orchestrator.diagnose_run import diagnose_run
from orchestrator.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data" / "diagnose"
EXCERPTS = sorted(DATA.glob("*.log"))


def read_excerpt(path: Path) -> tuple[dict[str, str], str]:
    """(header fields, log text) of a test excerpt; the header is its leading `# key: value` lines."""
    header, body = {}, []
    lines = path.read_text().splitlines(keepends=True)
    i = 0
    while i < len(lines) and lines[i].startswith("#"):
        key, _, value = lines[i][1:].partition(":")
        header[key.strip()] = value.strip()
        i += 1
    body = "".join(lines[i:])
    return header, body


@pytest.mark.parametrize("path", EXCERPTS, ids=[p.stem for p in EXCERPTS])
def test_each_real_excerpt_is_diagnosed_as_its_cited_layer(path):
    header, text = read_excerpt(path)
    finding = diag.diagnose(text)
    assert finding is not None, f"{path.name}: no signature matched"
    assert finding.layer == header["layer"], (
        f"{path.name}: {finding.layer} via {finding.signature_id} on line {finding.line_number}: {finding.line}"
    )
    assert finding.line == text.splitlines()[finding.line_number - 1]


@pytest.mark.parametrize("path", EXCERPTS, ids=[p.stem for p in EXCERPTS])
def test_each_excerpt_cites_a_public_source_and_a_known_layer(path):
    header, text = read_excerpt(path)
    assert re.match(r"https://\S+$", header.get("source", "")), f"{path.name}: no '# source: URL' header"
    assert header.get("layer") in diag.LAYERS
    assert text.strip(), f"{path.name}: no log lines after the header"


def test_every_layer_has_at_least_two_real_excerpts_in_the_fixtures_or_the_corpus():
    per_layer = {layer: 0 for layer in diag.LAYERS}
    for path in EXCERPTS:
        per_layer[read_excerpt(path)[0]["layer"]] += 1
    for entry in load_tune():
        per_layer[entry.layer] += 1
    assert all(count >= 2 for count in per_layer.values()), per_layer


def test_a_cpu_fallback_warning_after_the_tpu_is_already_in_use_is_device_ownership():
    _, text = read_excerpt(DATA / "device-ownership-pid-then-cpu-fallback.log")
    all_layers = {f.layer for f in diag.classify(text)}
    assert {"device-ownership", "runtime-proof"} <= all_layers
    finding = diag.diagnose(text)
    assert (finding.layer, finding.signature_id) == ("device-ownership", "tpu-in-use-by-pid")
    assert "pid 176028" in finding.line


def test_an_absl_fallback_warning_after_libtpu_already_in_use_is_device_ownership():
    _, text = read_excerpt(DATA / "device-ownership-libtpu-in-use-then-fallback.log")
    finding = diag.diagnose(text)
    assert (finding.layer, finding.signature_id) == ("device-ownership", "libtpu-already-in-use")
    assert finding.line_number == 1


def test_the_specific_cause_wins_even_when_it_comes_after_the_symptom():
    text = (
        "WARNING:absl:No GPU/TPU found, falling back to CPU. (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for "
        "more info.)\n"
        "INFO:jax._src.xla_bridge:Unable to initialize backend 'tpu': ABORTED: Internal error when "
        'accessing libtpu multi-process lockfile. Run "$ sudo rm /tmp/libtpu_lockfile".\n'
    )
    finding = diag.diagnose(text)
    assert (finding.layer, finding.line_number) == ("device-ownership", 2)


def test_a_generic_runtime_error_never_beats_a_specific_line_before_or_after_it():
    specific = "jaxlib.xla_extension.XlaRuntimeError: UNAVAILABLE: No TPU Platform available."
    generic = "RuntimeError: something went wrong"
    for text in (f"{generic}\n{specific}\n", f"{specific}\n{generic}\n"):
        assert diag.diagnose(text).signature_id == "no-tpu-platform"
    assert diag.diagnose(generic).layer == "other"


def test_a_line_takes_its_most_specific_signature_not_the_generic_backend_failure():
    line = (
        "RuntimeError: Unable to initialize backend 'tpu': ABORTED: The TPU is already in use by process "
        "with pid 4242. Not attempting to load libtpu.so in this process."
    )
    assert diag.match_line(line).id == "tpu-in-use-by-pid"
    findings = diag.classify(line)
    assert len(findings) == 1 and findings[0].layer == "device-ownership"


def test_on_equal_priority_the_earliest_line_wins():
    text = (
        "ssh: connect to host 10.0.0.5 port 22: Connection refused\n"
        "ssh: connect to host 10.0.0.6 port 22: Connection timed out\n"
    )
    finding = diag.diagnose(text)
    assert (finding.signature_id, finding.line_number) == ("ssh-connection-refused", 1)


def test_an_oom_outranks_the_shutdown_barrier_failure_it_causes():
    text = (
        "XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 118175653888 bytes.\n"
        "INTERNAL: Shutdown barrier has failed.\n"
    )
    finding = diag.diagnose(text)
    assert finding is not None and (finding.layer, finding.line_number) == ("memory", 1)
    assert diag.classify(text)[1].consequence


def test_a_peer_crash_outranks_the_heartbeat_failure_it_causes():
    text = (
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: "
        "Attempting to allocate 15.65G. That was not possible. There are 11.08G free.; (0x0x0_HBM0)\n"
        "absl::Status: UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):\n"
    )
    assert diag.diagnose(text).layer == "memory"


def test_the_measured_libtpu_messages_on_a_host_without_a_tpu_are_classified():
    assert (
        diag.match_line(
            "INFO:jax._src.xla_bridge:Unable to initialize backend 'tpu': NOT_FOUND: TPU "
            "initialization failed: No jellyfish device found."
        ).layer
        == "runtime-proof"
    )
    assert diag.match_line("OSError: libtpu not found").layer == "runtime-proof"
    assert (
        diag.match_line(
            "Failed to deserialize executable: UNIMPLEMENTED: Deserializing serialized executable not supported."
        ).layer
        == "cache"
    )


def test_orchs_own_transport_errors_are_transport():
    for line in (
        "worker-3: connection to 127.0.1.3:22 refused (sshd not running?)",
        "worker-3: connect to 127.0.1.3:22 timed out after 5s",
        "worker-3: HOST KEY CHANGED for 127.0.1.3: known_hosts has ssh-ed25519 ...",
    ):
        assert diag.match_line(line).layer == "transport", line


def test_text_without_a_known_signature_gives_no_finding():
    assert diag.diagnose("all good\nstep 10 loss 1.23\n") is None
    assert diag.classify("") == []


# Other public phrasings of each failure class (not the signature's own example): a signature
# holds for the class, across versions and tools, not for one excerpt.
CLASS_VARIANTS = [
    # jax: the older ValueError, and the newer RuntimeError that wraps after "jax" (ROCm/jax#756)
    (
        "jax-jaxlib-version-skew",
        "ValueError: jaxlib is version 0.1.69, but this version of jax requires version 0.1.74.",
    ),
    ("jax-jaxlib-version-skew", "RuntimeError: jaxlib is version 0.9.0, but this version of jax\n"),
    (
        "jax-jaxlib-version-skew",
        "RuntimeError: jaxlib version 0.4.14 is newer than and incompatible with jax version 0.4.6.",
    ),
    # signatures folded into one class: kernel OOM wordings, paramiko's refusals, the XRT mesh master
    ("host-oom-killer", "[35881895.791331] Out of memory: Kill process 21518 (python2) score 752 or sacrifice child"),
    ("host-oom-killer", "[12345.6789] Memory cgroup out of memory: Killed process 4242 (python3) total-vm:123kB"),
    ("ssh-permission-denied", "AuthenticationException: Authentication failed."),
    (
        "ssh-connection-refused",
        "paramiko.ssh_exception.NoValidConnectionsError: [Errno None] Unable to connect to port 22 on 10.0.89.23",
    ),
    ("xla-mesh-connect-check-failed", "Failed to connect to client mesh master: d7c1c93dfe8c:56419"),
    ("process-killed", "Process finished with exit code 137 (interrupted by signal 9: SIGKILL)"),
    # torch_xla: the pybind check, set_device_type after init (pytorch/xla#5948), a notebook's own words
    (
        "torch-xla-runtime-already-initialized",
        "RuntimeError: Runtime is already initialized. Do not use the XLA device before calling xmp.spawn.",
    ),
    ("torch-xla-runtime-already-initialized", "RuntimeError: XLA runtime is already initialized!"),
    ("torch-xla-runtime-already-initialized", "xmp.spawn FAILED: Runtime ALREADY initialized."),
    # gloo: loopback address (pytorch/gloo#223), SO_ERROR (pytorch/gloo#33), bad interface (aws-samples/aws-do-eks#51)
    (
        "gloo-connect-failed",
        "`[<some path>/gloo/gloo/transport/tcp/pair.cc:761] connect [127.0.1.1]:60817: Connection refused`.",
    ),
    (
        "gloo-connect-failed",
        "  what():  [enforce fail at /home/s/gloo/gloo/transport/tcp/pair.cc:498] optval == 0. 111 vs 0. "
        "SO_ERROR: Connection refused",
    ),
    # gloo given an interface name it finds no address for: the host's network setup, as for an
    # unresolvable hostname (msr-fiddle/pipedream#32), not a peer of the gang
    (
        "gloo-hostname-unresolved",
        "RuntimeError: [enforce fail at .../gloo/transport/tcp/device.cc:84] ifa != nullptr. "
        "Unable to find address for: ^lo",
    ),
    # DataLoader workers killed (pytorch/pytorch#8976, NVIDIA/Megatron-LM#1657)
    ("dataloader-worker-killed", "RuntimeError: DataLoader worker (pid 19597) is killed by signal: Killed."),
    ("dataloader-worker-killed", "[rank0]: RuntimeError: DataLoader worker (pid 2637) is killed by signal: Killed. "),
    ("dataloader-worker-killed", "RuntimeError: DataLoader worker (pid(s) 3216) exited unexpectedly"),
    # /dev/shm (THU-DA-6D-Pose-Group/GDR-Net#16)
    (
        "shm-too-small",
        "RuntimeError: DataLoader worker (pid 3216) is killed by signal: Bus error. It is possible that "
        "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
    ),
    # SIGKILL as shells and progress bars show it
    ("process-killed", " 20%|████                | 216/1063 [00:27<02:17,  6.17it/s]Killed"),
    ("process-killed", "zsh: killed     python train.py"),
    ("process-killed", "torch.distributed.elastic.multiprocessing.api: Signal 9 (SIGKILL) received by PID 4242"),
    (
        "process-killed",
        "subprocess.CalledProcessError: Command '['python', 'train.py']' returned non-zero exit status -9.",
    ),
    # device memory in PyTorch's newer wording (pytorch/pytorch#16417)
    (
        "accelerator-framework-oom",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.00 MiB. GPU 0 has a total capacity "
        "of 23.65 GiB of which 11.06 MiB is free.",
    ),
    # compilation-cache directories not writable (goodfire-ai/spd#974's shared XLA cache)
    ("cache-dir-not-writable", "PermissionError: [Errno 13] Permission denied: '/home/alexlm/.cache/sella'"),
    (
        "cache-dir-not-writable",
        "PERMISSION_DENIED: /shared/out/xla_compilation_cache/xla_gpu_per_fusion_autotune_cache_dir/tmp/x.textproto",
    ),
    ("cache-dir-not-writable", "OSError: [Errno 30] Read-only file system: '/opt/jax_cache/jit_f-1234-cache'"),
    # an installed libtpu wheel without the library jax loads (jax-ml/jax#24987)
    (
        "libtpu-wheel-without-library",
        "Unable to initialize backend 'tpu': INTERNAL: Failed to open /usr/local/lib/python3.10/dist-packages/"
        "libtpu/libtpu.so: /usr/local/lib/python3.10/dist-packages/libtpu/libtpu.so: cannot open shared object file: "
        "No such file or directory",
    ),
    # torch_xla XRT mesh client channel checks, whatever the check's tail
    (
        "xla-mesh-connect-check-failed",
        "RuntimeError: tensorflow/compiler/xla/xla_client/mesh_service.cc:316 : Check failed: impl_->channel->",
    ),
    # OpenSSH across versions and paths
    ("ssh-kex-closed", "ssh_exchange_identification: read: Connection reset by peer"),
    ("ssh-connection-dropped", "Connection closed by 10.164.0.3 port 22"),
    (
        "ssh-algorithm-negotiation",
        "Unable to negotiate with 10.0.0.1 port 22: no matching key exchange method found. Their offer: "
        "diffie-hellman-group1-sha1",
    ),
    (
        "paramiko-host-key-unknown",
        "paramiko.ssh_exception.SSHException: Server '192.168.0.27' not found in known_hosts",
    ),
    ("gcloud-ssh-failed", "ERROR: (gcloud.compute.tpus.tpu-vm.scp) [/usr/bin/scp] exited with return code [1]."),
    # compiled wheels that do not belong together (openxla/xla#14433, NumPy's older ABI check)
    (
        "native-extension-mismatch",
        "ImportError: /root/.cache/bazel/_bazel_root/aa54/execroot/xla/bazel-out/k8-opt/bin/xla/python/"
        "xla_extension.so: undefined symbol: descriptor_table_xla_2fxla_5fdata_2eproto",
    ),
    ("numpy-abi-mismatch", "RuntimeError: module compiled against API version 0x10 but this version of numpy is 0xe"),
    ("frontend-module-missing", "ModuleNotFoundError: No module named 'flax.linen.partitioning'"),
    # a platform JAX never initialised, whichever was asked for
    (
        "jax-unknown-backend",
        "RuntimeError: Unknown backend: 'gpu' requested, but no platforms that are instances of gpu are present. "
        "Platforms present are: cpu",
    ),
    (
        "jax-unknown-backend",
        "RuntimeError: Unknown backend tpu requested, but no platforms that are instances of tpu are present.",
    ),
    # Ray's memory monitor, in the raylet's own words (WM-PO/WMPO#3)
    (
        "ray-node-low-memory",
        "(raylet) [2025-12-07 09:57:19,206 E 393463 393463] (raylet) node_manager.cc:3277: 2 Workers (tasks / actors) "
        "killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at",
    ),
    (
        "jax-controller-connect-failed",
        "E0101 client.cc:100] Failed to connect to distributed JAX controller: UNAVAILABLE",
    ),
    # a device memory fault, as CUDA's runtime and driver API and a NCCL watchdog report it
    (
        "accelerator-memory-hardware-fault",
        "RuntimeError: cuda runtime error (39) : uncorrectable ECC error encountered at "
        "/pytorch/aten/src/THC/THCCachingHostAllocator.cpp:265",
    ),
    (
        "accelerator-memory-hardware-fault",
        "[E ProcessGroupNCCL.cpp:916] [Rank 1] NCCL watchdog thread terminated with exception: CUDA error: "
        "uncorrectable ECC error encountered",
    ),
    (
        "accelerator-memory-hardware-fault",
        "failed call to cuDevicePrimaryCtxRetain: CUDA_ERROR_ECC_UNCORRECTABLE: uncorrectable ECC error encountered",
    ),
    # folded: the JAX coordinator deadline in its barrier and registration forms (google/paxml#77)
    (
        "jax-coordination-deadline",
        "2024-04-12 23:39:41.656900: E external/xla/xla/pjrt/distributed/client.cc:96] Coordination "
        "service agent in error status: DEADLINE_EXCEEDED: Deadline Exceeded",
    ),
    (
        "xla-env-deprecated",
        "XLA_USE_SPMD is being deprecated. Use torch_xla.runtime.use_spmd() without setting XLA_USE_SPMD env-var.",
    ),
    # the c10d port taken, in torch's newer wording (om-ai-lab/VLM-R1#289)
    (
        "c10d-server-listen-failed",
        "RuntimeError: The server socket has failed to listen on any local network address. port: 29500, "
        "useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use.",
    ),
    # NCCL connection failures across torch releases (pytorch/pytorch#111187, #149984, NVIDIA/nccl#207)
    (
        "nccl-system-error",
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691, "
        "remote process exited or there was a network error, NCCL version 2.19.3",
    ),
    (
        "nccl-system-error",
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
    ),
    ("nccl-system-error", "NCCL error in: /torch/lib/c10d/ProcessGroupNCCL.cpp:260, unhandled system error"),
    # tracebacks through the SSH client's connect (paramiko/paramiko#529) or fabric's open
    ("ssh-client-frame", '  File "C:\\Python36\\lib\\site-packages\\paramiko\\client.py", line 362, in connect'),
    ("ssh-client-frame", '  File "/usr/lib/python3/dist-packages/paramiko/transport.py", line 1656, in auth_publickey'),
    ("ssh-client-frame", '  File "/opt/venv/lib/python3.11/site-packages/fabric/connection.py", line 634, in open'),
    # a refused or unusable login key, as OpenSSH and paramiko word it
    ("ssh-permission-denied", "Received disconnect from 10.0.0.7 port 22:2: Too many authentication failures"),
    ("ssh-permission-denied", "sign_and_send_pubkey: no mutual signature supported"),
    ("ssh-permission-denied", "@         WARNING: UNPROTECTED PRIVATE KEY FILE!          @"),
    ("ssh-permission-denied", 'Load key "/home/u/.ssh/id_ed25519": bad permissions'),
    ("ssh-permission-denied", "paramiko.ssh_exception.PasswordRequiredException: Private key file is encrypted"),
    ("ssh-permission-denied", "paramiko.ssh_exception.SSHException: No existing session"),
    ("ssh-banner-not-read", "Connection timed out during banner exchange"),
    (
        "resource-exhausted-allocate",
        "ResourceExhaustedError: OOM when allocating tensor with shape[8192,8192] and type float",
    ),
    ("tpu-vfio-busy", "TPU initialization failed: open(/dev/accel0): Device or resource busy"),
    # a peer gone quiet, as gloo's unbound buffer and NCCL's watchdog report it (pytorch/gloo#228)
    (
        "gloo-peer-closed",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms "
        "for recv operation to complete",
    ),
    (
        "nccl-watchdog-timeout",
        "[Rank 0] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, "
        "subsequent GPU operations might run on corrupted/incomplete data.",
    ),
    ("tpu-topology-env-unset", "E0000 tpu_hal.cc:57] Failed to find host bounds for accelerator type v4-16"),
    # libtpu's newer error codes for compile-time OOM, and the scoped-VMEM limit of a Pallas kernel
    ("hbm-oom", "RESOURCE_EXHAUSTED: CompileTimeHbmOom"),
    ("vmem-oom", "CompileTimeScopedVmemOom: Ran out of memory in memory space vmem ... for"),
    ("vmem-oom", "37.22M and limit 32.00M exceeded scoped vmem limit by 5.22M."),
    ("jax-distributed-fatal", "INTERNAL: Shutdown barrier has failed."),
    # full disks as Go (docker) and Node print them
    ("disk-full", "write /var/lib/docker/tmp/GetImageBlob1234: no space left on device"),
    ("disk-full", "Error: ENOSPC: no space left on device, write"),
    # TensorFlow/TSL name the file a full disk refused as "Resource exhausted" (tensorflow#6046, #4350)
    (
        "disk-full",
        "W tensorflow/core/framework/op_kernel.cc:975] Resource exhausted:/home/code/2016_11_28.emb-354830"
        ".data-00000-of-00001",
    ),
    ("disk-full", "ResourceExhaustedError: ./model/model-49.tempstate5787507096018461664"),
    # paramiko's logger as the logging module formats it; an encrypted key in either case; sshd's side
    ("ssh-permission-denied", "paramiko.transport:Authentication (publickey) failed."),
    ("ssh-permission-denied", "paramiko.ssh_exception.PasswordRequiredException: Private key file is encrypted"),
    ("ssh-permission-denied", "Nov 3 10:01:02 worker-1 sshd[2211]: Invalid user ubuntu from 10.0.0.2 port 51234"),
    ("ssh-permission-denied", "sshd[913]: Failed publickey for invalid user admin from 10.0.0.9 port 40112 ssh2"),
    # Fabric 1.x, on any port
    (
        "ssh-connection-refused",
        "Fatal error: Low level socket error connecting to host 10.0.0.7 on port 22: Connection refused",
    ),
    # JAX_PLATFORMS naming a platform no plugin registers, on any platform (ROCm/TheRock#3627)
    (
        "jax-unknown-backend",
        "RuntimeError: Unable to initialize backend 'cuda': Backend 'cuda' is not in the list of known "
        "backends: ['cpu'].",
    ),
    # a module of the frontend/runtime lacking a name, inside the backend-init wrapper
    (
        "frontend-attribute-missing",
        "RuntimeError: Unable to initialize backend 'tpu': module 'jax._src.xla_bridge' has no attribute 'x'",
    ),
    # torch_xla XRT without its configuration, as several versions print it (pytorch/xla#2870, #4211)
    (
        "tpu-topology-env-unset",
        "RuntimeError: tensorflow/compiler/xla/xla_client/computation_client.cc:296 : Missing XLA configuration",
    ),
    (
        "tpu-topology-env-unset",
        "RuntimeError:tensorflow/compiler/xla/xla_client/computation_client.cc:280: Missing XLA Configuration",
    ),
    # NCCL's socket layer across versions, and nccl-tests' summary line (NVIDIA/nccl#795, #1232; nccl-tests#166)
    (
        "nccl-system-error",
        "a100:183006:183181 [1] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer a100-22<47861>",
    ),
    (
        "nccl-system-error",
        "gpu004:2200689:2200706 [3] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote "
        "peer gpu004<55693>",
    ),
    (
        "nccl-system-error",
        "a100:183006:183220 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv from 10.200.84.247<58355> "
        "failed : Broken pipe",
    ),
    (
        "nccl-system-error",
        "gpu1: Test NCCL failure common.cu:958 'remote process exited or there was a network error'",
    ),
    # a Pallas/Mosaic kernel newer than the installed libtpu reads, whatever the versions
    (
        "pjrt-api-version-mismatch",
        "Failed to deserialize the Mosaic module: Unsupported version: expected <= 3 but got 4",
    ),
    # the NVIDIA driver's own wording of Xid 79
    ("accelerator-memory-hardware-fault", "NVRM: fallen off the bus and is not responding to commands."),
    # the SSH banner never came: paramiko's traceback frame, whatever exception follows it
    (
        "ssh-banner-not-read",
        '  File "/usr/lib/python3/dist-packages/paramiko/transport.py", line 2211, in _check_banner',
    ),
    # paramiko's refusal message as the calling tool rewraps it (no exception class)
    ("ssh-connection-refused", "Unable to connect to port 2222 on 10.128.0.5"),
    ("ssh-connection-refused", "error: Unable to connect to port 22 on [fe80::1]"),
    # paramiko's auth failure in its other log formats
    ("ssh-permission-denied", "[paramiko.transport] INFO Authentication (publickey) failed."),
    ("ssh-permission-denied", "DEBUG:paramiko.transport:Authentication (password) failed."),
    # Fabric connects lazily: a traceback through open/opens failed while connecting
    (
        "ssh-client-frame",
        '  File "/usr/local/lib/python3.10/site-packages/fabric/connection.py", line 634, in open',
    ),
    # OpenSSH's other wordings of a session dropped mid-command
    ("ssh-connection-dropped", "ssh_dispatch_run_fatal: Connection to 10.0.0.2 port 22: Broken pipe"),
    ("ssh-connection-dropped", "packet_write_wait: Connection to 10.0.0.2 port 22: Connection reset by peer"),
    # the login refused before any key was tried, or the client's own config refused
    ("ssh-permission-denied", "paramiko.ssh_exception.SSHException: No authentication methods available"),
    ("ssh-permission-denied", "Bad owner or permissions on /home/u/.ssh/config"),
    # a JAX barrier timeout in its other status and id forms
    ("jax-coordination-deadline", "jax.errors.JaxRuntimeError: INTERNAL: Barrier timed out. Id: shutdown_barrier"),
    ("tpu-vfio-busy", "Couldn't open device: /dev/accel0 (Device or resource busy)"),
    # VFIO EBUSY as DPDK's EAL and other VFIO users print it
    ("tpu-vfio-busy", "EAL: Cannot open /dev/vfio/12: Device or resource busy"),
    ("tpu-vfio-busy", "vfio: failed to open /dev/vfio/3: Device or resource busy"),
    # the process count against the TPU device count from the environment, PJRT-era and XRT-era
    ("tpu-device-count-env-mismatch", "ValueError: The number of devices must be either 1 or 4, got 8 instead"),
    (
        "tpu-device-count-env-mismatch",
        "Check failed: parsed_device.id <= topology_proto->num_tpu_devices_per_task() (7 vs. 3)",
    ),
    (
        "tf-tpu-system-not-found",
        "InvalidArgumentError: No matching devices found for '/job:worker/replica:0/task:0/device:TPU_SYSTEM:0'",
    ),
    ("jax-cache-read-error", "Error reading persistent compilation cache entry: Instruction name is not unique"),
    ("jax-cache-key-unstable", "DEBUG:jax._src.cache_key:get_cache_key hash after serializing computation: 9f0c"),
    # host RAM: torch's allocator in its old and new wording, and the same errno from C++, Rust and the JVM
    ("host-alloc-enomem", "DefaultCPUAllocator: not enough memory: you tried to allocate 5077901088 bytes."),
    (
        "host-alloc-enomem",
        "RuntimeError: [enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: can't allocate memory: "
        "you tried to allocate 132426121216 bytes. Error code 12 (Cannot allocate memory)",
    ),
    (
        "host-alloc-enomem",
        "DB::ErrnoException: Allocator: Cannot mmap 1.00 GiB., errno: 12, strerror: Cannot allocate memory",
    ),
    ("host-alloc-enomem", "Error when allocating memory: Cannot allocate memory (os error 12)"),
    ("host-alloc-enomem", "OSError: [Errno 12] Cannot allocate memory"),
    ("dataloader-worker-killed", "RuntimeError: DataLoader worker (pid ...) is killed by signal: Killed"),
    # the JAX coordination service: a key never published, an RPC to it failed
    (
        "jax-coordination-service-error",
        "DEADLINE_EXCEEDED: GetKeyValue() timed out with key: cuda:gpu_executable_clique:1 and duration: 5m",
    ),
    (
        "jax-coordination-service-error",
        "Additional GRPC error information from remote target /job:jax_worker/replica:0/task:0 while calling "
        "/tensorflow.CoordinationService/Heartbeat:",
    ),
    (
        "grpc-coordinator-unreachable",
        "failed to connect to all addresses; last error: UNKNOWN: ipv4:10.0.0.2:8476: Failed to connect to remote "
        "host: Connection refused",
    ),
    (
        "grpc-coordinator-unreachable",
        "RuntimeError: Deadline exceeded: Failed to connect to remote server at address: grpc://10.59.1.9:8470.",
    ),
    # a platform the policy asked for that the host lacks, in JAX's wordings across versions
    (
        "jax-requested-platform-missing",
        "RuntimeError: Unable to initialize backend 'rocm': module 'jaxlib.xla_extension' has no attribute "
        "'GpuAllocatorConfig' (set JAX_PLATFORMS='' to automatically choose an available backend)",
    ),
    ("jax-tasks-unhealthy", "UNAVAILABLE: Task /job:jax_worker/replica:0/task:3 heartbeat timeout."),
    (
        "torch-store-barrier-timeout",
        "RuntimeError: Timed out initializing process group in store based barrier on rank: 0, for key: "
        "store_based_barrier_key:1 (world_size=2, worker_count=1, timeout=0:30:00)",
    ),
    ("nccl-system-error", "ncclInternalError: Internal check failed. Proxy Call to rank 7 failed (Connect)"),
    ("numpy-abi-mismatch", "ValueError: numpy.dtype size changed, may indicate binary incompatibility. Expected 96"),
    ("numpy-abi-mismatch", "ImportError: numpy.core.multiarray failed to import"),
    ("hbm-oom", "Program hbm requirement 17.08G:"),
    (
        "host-alloc-enomem",
        "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 3.73 GiB for an array with shape (500000000,)",
    ),
    # torchrun's rendezvous exceptions, by name, in any wording around them
    ("torch-elastic-rendezvous-error", "torch.distributed.elastic.rendezvous.api.RendezvousClosedError"),
    ("torch-elastic-rendezvous-error", '    "message": "RendezvousTimeoutError: ",'),
    ("torch-dist-network-error", "torch.distributed.DistNetworkError: failed to recv, got 0 bytes"),
    (
        "torch-dist-network-error",
        '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/rendezvous.py", line 189, in '
        "_create_c10d_store",
    ),
    (
        "gloo-full-mesh-failed",
        "frame #3: gloo::rendezvous::Context::connectFullMesh(std::shared_ptr<gloo::rendezvous::Store>&, "
        "std::shared_ptr<gloo::transport::Device>&) + 0x1c5 (0x7f in libtorch_cpu.so)",
    ),
    (
        "torch-rpc-agent-error",
        "[W tensorpipe_agent.cpp:726] RPC agent for worker1 encountered error when reading incoming request from "
        "worker0: EOF: end of file (this error originated at tensorpipe/transport/uv/connection_impl.cc:132)",
    ),
    # the PJRT C API check names the whole table in older releases (pytorch/xla#5625)
    (
        "pjrt-plugin-abi-mismatch",
        "status: INVALID_ARGUMENT: Unexpected PJRT_Api size: expected 496, got 512. Check installed software versions.",
    ),
    # Ray's OOM report, unwrapped and wrapped by a log collector inside "(tasks / actors)" (vllm#1160)
    (
        "ray-node-low-memory",
        "(raylet) node_manager.cc:3040: 1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers "
        "crashed due to other reasons at node",
    ),
    ("ray-node-low-memory", " actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons"),
    # the NCCL watchdog's own frames when only the stack was pasted (jpata/particleflow#390)
    (
        "nccl-watchdog-timeout",
        "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, "
        "std::ratio<1l, 1000l> > >) + 0x1d2 (0x1554e9e0f8f2 in libtorch_cuda.so)",
    ),
    (
        "nccl-watchdog-timeout",
        "Exception raised from ncclCommWatchdog at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1521",
    ),
    # Ansible's SSH failures, each with its reason after the colon (ansible/ansible#22944)
    (
        "ansible-ssh-unreachable",
        '"msg": "Failed to connect to the host via ssh: Shared connection to 10.10.10.3 closed.\\r\\n",',
    ),
    (
        "ansible-ssh-unreachable",
        '"msg": "Failed to connect to the host via ssh: ssh: connect to host 34.240.6.124 port 22: Connection timed '
        'out\\r\\n",',
    ),
    ("sshd-no-more-sessions", "Nov  2 10:01:12 tpu-w-0 sshd[1187]: error: no more sessions"),
    ("sshd-no-more-sessions", "channel 3: open failed: connect failed: no more sessions"),
    # torch.save's writer across releases (F5-TTS#458, LlamaFactory#1223)
    (
        "torch-save-write-failed",
        "[rank0]: RuntimeError: [enforce fail at inline_container.cc:778] . PytorchStreamWriter failed writing file "
        "data.pkl: file write failed",
    ),
    (
        "torch-save-write-failed",
        "RuntimeError: [enforce fail at inline_container.cc:445] . PytorchStreamWriter failed writing file data/176: "
        "file write failed",
    ),
    ("filesystem-op-not-supported", "OSError: [Errno 95] Operation not supported: '/mnt/gcsfuse/ckpt/tmp.lock'"),
    ("df-shows-full-filesystem", "/dev/sda1        194G  194G     0 100% /mnt/disks/persist"),
    (
        "torch-extensions-dir-not-writable",
        "PermissionError: [Errno 13] Permission denied: '/root/.cache/torch_extensions/py310_cu118'",
    ),
    (
        "tpu-host-topology-mismatch",
        "RuntimeError: tensorflow/compiler/xla/xla_client/xrt_local_service.cc:56 : Invalid system configuration: "
        "2x2x2 host topology with 1 missing hosts, but 7 hosts in total.",
    ),
    (
        "tpu-init-local-endpoint-unreachable",
        "jaxlib.xla_extension.XlaRuntimeError: UNKNOWN: TPU initialization failed: Failed to connect to localhost:8471",
    ),
    (
        "jaxlib-tpu-client-object-skew",
        "AttributeError: 'jaxlib.tpu_client_extension.PyTpuExecutable' object has no attribute "
        "'execute_sharded_on_local_devices'",
    ),
    # a checkpoint write refused by quota (keras-team/keras-tuner#390) or a full disk under tensorstore
    (
        "disk-quota-exceeded",
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: disk quota exceeded [Op:SaveV2]",
    ),
    (
        "disk-full",
        'ValueError: NOT_FOUND: Error writing "params/c/0" in OCDBT database at local file "/ckpt/0/": '
        "[OS error 28: ENOSPC No space left on device]",
    ),
    # GCS's per-object rate limit under the compilation cache, and another tool's wording of the same refusal
    (
        "gcs-object-rate-limit",
        "dss.storage.checkout.error.DestinationBucketNotWritableError: 410 PUT https://www.googleapis.com/upload: "
        "The rate of change requests to the object b/touch.txt exceeds the rate limit.",
    ),
    (
        "jax-tpu-backend-module-skew",
        "RuntimeError: Unable to initialize backend 'tpu': module 'libtpu' has no attribute 'get_library_path' "
        "(set JAX_PLATFORMS='' to automatically choose an available backend)",
    ),
    (
        "jax-tpu-backend-module-skew",
        "UserWarning: cloud_tpu_init failed: AttributeError(\"module 'libtpu' has no attribute 'get_library_path'\")",
    ),
    ("tpu-maintenance-or-preempted", "health: UNHEALTHY_MAINTENANCE"),
    ("tpu-maintenance-or-preempted", '  "state": "PREEMPTED",'),
    (
        "pallas-libtpu-too-old",
        "RuntimeError: Pallas TPU requires a libTPU version that's at most a month old. Found version string:",
    ),
    (
        "tpu-lame-workers",
        "I0902 03:34:21.925864 140070334211904 session_support.py:391] ShutdownHook: lame workers found: "
        "HeartbeatManager(/job:worker/replica:0/task:1/device:CPU:0)",
    ),
    # the fourth blind set's classes, each in another thread's or tool's wording:
    # a DSA key's parameters refused, as the q and p checks word it (paramiko/paramiko#909, CrackMapExec#813)
    ("ssh-dsa-key-rejected", "ValueError: q must be exactly 160, 224, or 256 bits long"),
    ("ssh-dsa-key-rejected", 'keller | UNREACHABLE! => {"msg": "p must be exactly 1024, 2048, or 3072 bits long",'),
    (
        "ssh-dsa-key-rejected",
        "ERROR:paramiko.transport:Unknown exception: p must be exactly 1024, 2048, 3072, or 4096 bits long",
    ),
    # no key agent to talk to, as OpenSSH's ssh-add says it
    ("ssh-agent-unreachable", "Could not open a connection to your authentication agent."),
    ("ssh-agent-unreachable", "Error connecting to agent: No such file or directory"),
    # an encrypted key file, as paramiko and Ansible say it
    ("ssh-permission-denied", "> web-c1m1d.sys.dev | FAILED => FAILED: Private key file is encrypted"),
    # gloo finding no address for the name or interface it was given
    (
        "gloo-hostname-unresolved",
        "RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. "
        "Unable to find address for: eth0",
    ),
    # the TPU VM's attributes not served, as torch_xla, requests and urllib3 word it
    (
        "gce-metadata-fetch",
        "HTTP 404 for url http://metadata.google.internal/computeMetadata/v1/instance/attributes/tpu-env",
    ),
    (
        "gce-metadata-fetch",
        "requests.exceptions.HTTPError: 404 Client Error: Not Found for url: "
        "http://metadata.google.internal/computeMetadata/v1/instance/attributes/accelerator-type",
    ),
    (
        "gce-metadata-fetch",
        "requests.exceptions.ConnectionError: HTTPConnectionPool(host='metadata.google.internal', port=80): Max "
        "retries exceeded with url: /computeMetadata/v1/instance/attributes/agent-worker-number (Caused by",
    ),
    (
        "jax-tpu-node-unsupported",
        "RuntimeError: As of JAX 0.4.0, JAX only supports TPU VMs, not the older Colab TPUs. We recommend",
    ),
    # XLA_FLAGS with a flag of another XLA release (google-research/proteinfer#87), and the singular form
    (
        "xla-flags-unknown",
        "tensorflow/compiler/xla/parse_flags_from_env.cc:221] Unknown flags in XLA_FLAGS: "
        "--xla_gpu_enable_triton_gemm=false",
    ),
    ("xla-flags-unknown", "F parse_flags_from_env.cc:233] Unknown flag in XLA_FLAGS: --xla_dump_hlo_as_txt"),
    # libtpu refusing a framework's flag (googlecolab/colabtools#4628, a MaxText flag on an older libtpu)
    ("libtpu-unknown-flag", "ERROR: Unknown command line flag 'xla_tpu_enable_async_collective_fusion_multiple_steps'"),
    ("libtpu-unknown-flag", "ERROR: Unknown command line flag 'megascale_grpc_enable_xor_tracer'"),
    # other XRT ops an older TPU runtime lacks (pytorch/xla#1693, #2567)
    (
        "xrt-op-not-registered",
        "(Not found: Op type not registered 'XRTMetricsCollect' in binary running on n-b54da58f-w-0.",
    ),
    (
        "xrt-op-not-registered",
        "Status: Not found: Op type not registered 'XRTMemoryInfo' in binary running on n-20b44ff6-w-0.",
    ),
    # a frontend API missing, without the exception's name, and jax's config object (flax#3180, diffusers)
    ("frontend-attribute-missing", "module 'jax' has no attribute 'tree_multimap'"),
    ("frontend-attribute-missing", "AttributeError: module 'jax.config' has no attribute 'define_bool_state'"),
    ("frontend-attribute-missing", "'Config' object has no attribute 'define_bool_state'"),
    ("frontend-attribute-missing", "AttributeError: 'Config' object has no attribute 'define_enum_state'"),
    (
        "jax-distributed-not-initialized",
        "RuntimeError: Distributed system is not available; please initialize it via "
        "`jax.distributed.initialize()` at the start of your program.",
    ),
    # the c10d store's address answering nothing, in other releases' words and c10d's final error
    # (ofsoundof/GRL-Image-Restoration#27, hpcaitech/Open-Sora#667)
    (
        "c10d-store-connect-failed",
        "trainer/0 [1]:[W socket.cpp:558] [c10d] The client socket has failed to connect to [::ffff:0.0.0.5]:40323 "
        "(errno: 110 - Connection timed out).",
    ),
    (
        "c10d-store-connect-failed",
        "[E socket.cpp:753] [c10d] The client socket has failed to connect to any network address of (6841231, 47389).",
    ),
    # a spawned child the OOM killer took, as torch.multiprocessing reports it
    (
        "process-killed",
        "torch.multiprocessing.spawn.ProcessExitedException: process 2 terminated with signal SIGKILL",
    ),
    # /dev/shm full under the DataLoader, with only the signal named
    ("shm-too-small", "RuntimeError: DataLoader worker (pid(s) 1234) is killed by signal: Bus error."),
    # the fifth blind set's classes, each in another thread's or tool's wording:
    # a rank the OOM killer took, as torchelastic reports it across releases (lm-sys/FastChat#568,
    # hpcaitech/ColossalAI#3514; the root-cause table of torch 2.x)
    (
        "process-killed",
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 27657) of "
        "binary: /home/work/virtual-venv/fastchat-env/bin/python",
    ),
    ("process-killed", "  exitcode  : -9 (pid: 812917)"),
    ("process-killed", "  traceback : signal 9 (SIGKILL) received by PID 812917"),
    # a caller of a removed jax API, in IPython's traceback form and on Windows (sail-sg/jax_xc#42)
    (
        "jax-removed-api-frame",
        "File ~/anaconda3/envs/pytorch3D/lib/python3.12/site-packages/jax/_src/deprecations.py:57, in "
        "deprecation_getattr.<locals>.getattr(name)",
    ),
    (
        "jax-removed-api-frame",
        '  File "C:\\Users\\me\\envs\\jx\\Lib\\site-packages\\jax\\_src\\deprecations.py", line 53, in getattr',
    ),
    # a library's own gate on the jax/jaxlib release it needs (mpi4jax, SCICO, pysiglib)
    ("library-needs-newer-frontend", "RuntimeError: auto_tokenize requires jax>=0.2.27, but you have 0.2.20."),
    (
        "library-needs-newer-frontend",
        "Exception: SCICO 0.0.3 requires jaxlib>=0.3.0; got 0.1.76; please upgrade jaxlib.",
    ),
    (
        "library-needs-newer-frontend",
        "ImportError: pysiglib.jax_api requires jax>=0.9.1 (XLA FFI API 0.3); found jax==0.4.30.",
    ),
    # TensorFlow's out-of-memory hint in its TF2 wording (tensorflow/tensorflow#52232)
    (
        "tf-oom-allocation-hint",
        "Hint: If you want to see a list of allocated tensors when OOM happens, add report_tensor_allocations_upon_oom "
        "to RunOptions for current allocation info. This isn't available when running in Eager mode.",
    ),
    # pinned host memory refused, as TensorFlow's host allocator says it (minimaxir/gpt-2-simple#232)
    (
        "host-pinned-alloc-failed",
        "2020-09-23 13:19:24.277832: W ./tensorflow/core/common_runtime/gpu/gpu_host_allocator.h:44] could not "
        "allocate pinned host memory of size: 415990272",
    ),
    # sshd's refusals in syslog's wording (fail2ban/fail2ban#1269, Ysurac/openmptcprouter#868)
    (
        "ssh-permission-denied",
        "Dec 12 19:26:57 myhost sshd[21798]: error: maximum authentication attempts exceeded for root from "
        "218.25.1.1 port 14463 ssh2 [preauth]",
    ),
    (
        "ssh-permission-denied",
        "Mar  2 17:26:41 mantis auth.info sshd[5147]: Failed password for root from 192.168.16.1 port 30853 ssh2",
    ),
    # a launcher's ssh failing with ssh's own exit code: a full path, pdsh's rcmd
    (
        "ssh-launcher-exit-255",
        "subprocess.CalledProcessError: Command '/usr/bin/ssh -p 2222 worker-1 true' returned non-zero exit "
        "status 255.",
    ),
    ("ssh-launcher-exit-255", "pdsh@node0: node1: ssh exited with exit code 255"),
    # the TPU worker's gRPC endpoint unreachable from the client, with the address (google-research/t5#38)
    (
        "tf-tpu-master-unreachable",
        "W0108 00:47:24.462080 4582849984 tpu_system_metadata.py:97] Failed to connect to the Tensorflow master. "
        "The TPU worker may not be ready (still scheduling) or the Tensorflow master address is incorrect: got "
        "(grpc://10.240.1.2:8470).",
    ),
    # one device where the mesh wants a slice's: jax's and tpu_inference's wording
    ("mesh-sees-one-device", "ValueError: Number of devices 1 must equal the product of mesh_shape (8,)"),
    (
        "mesh-sees-one-device",
        "ValueError: Insufficient devices for 2D mesh: found 1, expected 4 for mesh shape (1, 4).",
    ),
    # NCCL's bootstrap without a usable interface, in other releases' words (EasonXiao-888/MambaTree#14,
    # NVIDIA/nccl#1267)
    ("nccl-no-socket-interface", "Bootstrap : no socket interface found"),
    ("nccl-no-socket-interface", "node-3:1234:1234 [0] NCCL INFO NET/Socket : no interface found"),
    (
        "nccl-no-socket-interface",
        "ncclSocketInit: connecting to address  with family 0 is neither AF_INET(2) nor AF_INET6(10)",
    ),
    # a fatal chip error interrupt on another worker, behind Ray's prefix
    (
        "tpu-driver-fatal-interrupt",
        "(RayTrainWorker pid=812, ip=10.0.0.7) E0603 10:11:12.123456   4321 error_handler.cc:100] Received Error "
        "Interrupt! fatal: true, running_timer: 0x5f3a",
    ),
    # a device plugin's devices all unhealthy, for another accelerator (trueforge-org/truecharts#19201)
    (
        "device-plugin-no-healthy-devices",
        "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices amd.com/gpu, which "
        "is unexpected",
    ),
    # the sixth blind set's classes, each in another thread's or tool's wording:
    # no shared SSH algorithm, as paramiko (host key, ciphers, MACs; paramiko-ng#69), the worker's
    # sshd (OpenSSH 8.8+ refusing ssh-rsa: mscdex/ssh2#1102, paramiko#2191), Go's x/crypto/ssh,
    # libssh and libssh2 say it
    ("ssh-algorithm-negotiation", "SSHException: Incompatible ssh peer (no acceptable host key)"),
    (
        "ssh-algorithm-negotiation",
        "paramiko.ssh_exception.IncompatiblePeer: Incompatible ssh server (no acceptable ciphers)",
    ),
    ("ssh-algorithm-negotiation", "paramiko.ssh_exception.SSHException: Incompatible ssh server (no acceptable macs)"),
    (
        "ssh-algorithm-negotiation",
        "Dec 08 10:23:05 sshd[1186008]: userauth_pubkey: key type ssh-rsa not in PubkeyAcceptedAlgorithms [preauth]",
    ),
    (
        "ssh-algorithm-negotiation",
        "Feb 21 10:58:02 host sshd[19345]: userauth_pubkey: signature algorithm ssh-rsa not in "
        "PubkeyAcceptedAlgorithms [preauth]",
    ),
    (
        "ssh-algorithm-negotiation",
        "ssh: handshake failed: ssh: no common algorithm for key exchange; client offered: [curve25519-sha256], "
        "server offered: [diffie-hellman-group1-sha1]",
    ),
    (
        "ssh-algorithm-negotiation",
        "kex error : no match for method server host key algo: server [ssh-rsa], client [ssh-ed25519]",
    ),
    ("ssh-algorithm-negotiation", "ssh2.exceptions.KeyExchangeError: Unable to exchange encryption keys"),
    # a private key the client cannot read: paramiko's other key types (paramiko#2431, #2515, #1430)
    # and libssh2's wording
    ("ssh-key-unreadable", "paramiko.ssh_exception.SSHException: not a valid OPENSSH private key file"),
    ("ssh-key-unreadable", "paramiko.ssh_exception.SSHException: encountered RSA key, expected OPENSSH key"),
    ("ssh-key-unreadable", "SSHException: not a valid EC private key file"),
    ("ssh-key-unreadable", "paramiko.ssh_exception.SSHException: Invalid key"),
    (
        "ssh-key-unreadable",
        "ssh2.exceptions.PublicKeyInitError: Unable to extract public key from private key file: Wrong passphrase "
        "or invalid/unrecognized private key file format",
    ),
    # the worker's name unresolved, as Python's resolver says it on Windows, without DNS, on macOS,
    # and as Fabric 1.x words it
    ("host-name-unresolved", "socket.gaierror: [Errno 11001] getaddrinfo failed"),
    ("host-name-unresolved", "socket.gaierror: [Errno -3] Temporary failure in name resolution"),
    ("host-name-unresolved", "gaierror: [Errno 8] nodename nor servname provided, or not known"),
    ("ssh-resolve-hostname", "Fatal error: Name lookup failed for ec2-54-1-2-3.compute-1.amazonaws.com"),
    # libtpu absent, in Python 2's form too (pytorch/xla#7731)
    ("libtpu-not-found", "ModuleNotFoundError: No module named 'libtpu'"),
    ("libtpu-not-found", "ImportError: No module named libtpu"),
    # the slice's topology unavailable, as JAX's backend reports it (marin-community/marin#3737)
    (
        "tpu-global-topology-unavailable",
        "RuntimeError: Unable to initialize backend 'tpu': INTERNAL: Failed to get global TPU topology.",
    ),
    # a wheel built against a newer glibc or libstdc++ than the host's
    (
        "native-extension-mismatch",
        "ImportError: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.28' not found (required by "
        "/usr/local/lib/python3.8/site-packages/jaxlib/xla_extension.so)",
    ),
    (
        "native-extension-mismatch",
        "ImportError: /usr/lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.29' not found (required by "
        "/opt/conda/lib/python3.10/site-packages/torch_xla/lib/libptxla.so)",
    ),
    # jax's own words for other removed APIs and a removed argument
    (
        "jax-removed-api-frame",
        "AttributeError: jax.experimental.enable_x64 was removed in JAX v0.9.0; use jax.enable_x64(True) instead.",
    ),
    (
        "jax-removed-api-frame",
        "AttributeError: jax.lib.xla_bridge.xla_client was removed in JAX v0.4.38; use jax.lib.xla_client directly.",
    ),
    (
        "jax-removed-api-frame",
        "TypeError: The newshape argument to jnp.reshape was removed in JAX v0.4.36. Use shape instead.",
    ),
    # XLA:TPU's compile-time fast exit, as its status line carries it
    (
        "hbm-oom",
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Compilation failure: Aborting compilation early "
        "because it's unlikely to have enough memory. Requires 3.84T, has 90.96G available. If more detailed "
        "logging is desired, set --xla_tpu_impure_oom_fast_exit_threshold=-1",
    ),
    # the shell's job report of a killed command, by job number
    ("process-killed", "[1]+  Killed                  python train.py --config cfg.yaml"),
    # a Ray node declared dead, in older releases' wordings
    (
        "ray-node-marked-dead",
        "2019-04-18 02:11:56,294\tERROR worker.py:1780 -- The node with client ID "
        "37669ef11ddbd4e5fb6ae9e089dedc0475c3f89d has been marked dead because the monitor has missed too many "
        "heartbeats from it.",
    ),
    (
        "ray-node-marked-dead",
        "The node with node id 5f0c has been marked dead because the detector has missed too many heartbeats from "
        "it. This can happen when a raylet crashes unexpectedly or has lagging heartbeats.",
    ),
    # another slice's host seeing only its own devices
    (
        "pmap-sees-only-local-devices",
        "ValueError: Cannot replicate across 16 replicas because only 4 local devices are available. (local devices "
        "= TPU_0(host=0,(0,0,0,0)), TPU_1(host=0,(0,0,0,1)), TPU_2(host=0,(1,0,0,0)), TPU_3(host=0,(1,0,0,1)))",
    ),
    # TensorFlow's cloud writer failing to stage a checkpoint locally (tensorflow/tensorflow#37132)
    (
        "tf-cloud-write-tempfile-failed",
        "tensorflow.python.framework.errors_impl.InternalError: Could not append to the internal temporary file.",
    ),
    # the seventh blind set's classes, each in another thread's or release's words
    (
        "libtpu-already-in-use",
        "I0000 00:00:1656090003.394494 1333717 tpu_initializer_helper.cc:116] libtpu.so is already in use by "
        "process with pid 1332169.",
    ),
    ("ssh-permission-denied", "debug1: send_pubkey_test: no mutual signature algorithm"),
    ("ssh-permission-denied", "sign_and_send_pubkey: no mutual signature supported"),
    ("ssh-connection-timed-out", "> response : port 22: Operation timed out"),
    ("ssh-connection-timed-out", "ssh: connect to host example.com port 22: Operation timed out"),
    (
        "ssh-kex-closed",
        "Mar  6 06:31:31 ip-172-31-35-28 sshd[620]: drop connection #10 from [65.2.161.68]:46482 on "
        "[172.31.35.28]:22 past MaxStartups",
    ),
    ("torch-store-barrier-timeout", "timed out initializing process group in store based barrier on rank"),
    (
        "wheel-inconsistent-version",
        "Discarding https://example.org/libtpu_nightly-0.1.dev20240726%2Bnightly-py3-none-any.whl: Requested "
        "libtpu-nightly==0.1.dev20240726 has inconsistent version: filename has '0.1.dev20240726+nightly', but "
        "metadata has '0.1.dev20240726+default'",
    ),
    ("python-too-old-for-package", "ERROR: Package 'secretzero' requires a different Python: 3.8.0 not in '>=3.9'"),
    ("python-too-old-for-package", "ERROR: JAX requires Python 3.9 or newer, found  (3, 8)"),
    ("python-syntax-newer-than-interpreter", "TypeError: unsupported operand type(s) for |: 'type' and 'NoneType'"),
    ("torch-xla-pjrt-device-unset-or-unknown", "Unknown PJRT_DEVICE 'CUDA'"),
    (
        "host-oom-killer",
        "12:22:38  Container was OOM killed by the kernel   (exit 137, rank-5/6 first, cosched siblings cascade)",
    ),
    ("host-oom-killer", "      Reason:       OOMKilled"),
    (
        "vllm-kv-cache-too-small",
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
        "initializing the engine.",
    ),
    ("gevent-loop-exit", "gevent.hub.LoopExit: This operation would block forever"),
    # the eighth blind set's classes, each in another thread's or release's words
    ("numpy-abi-mismatch", "AttributeError: _ARRAY_API not found"),
    ("jaxlib-tpu-client-object-skew", "AttributeError: 'jaxlib._jax.DeviceList' object has no attribute 'device'"),
    (
        "library-needs-newer-dependency",
        "ImportError: Using the `Trainer` with `PyTorch` requires `accelerate>=0.20.1`: Please run `pip install "
        "transformers[torch]` or `pip install accelerate -U`",
    ),
    ("tpu-platform-registered-twice", "INTERNAL: TPU platform already registered for platform hardware version 4"),
    (
        "lightning-accelerator-unavailable",
        "MisconfigurationException: XLAAccelerator can not run on your system since the accelerator is not available.",
    ),
    (
        "torch-xla-runtime-initialised-before-spawn",
        "    RuntimeError: Cannot replicate if number of devices (1) is different from 8",
    ),
    ("file-write-io-error", "RuntimeError: write(): fd 5 failed with Input/output error"),
    (
        "torch-dist-env-not-set",
        "ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable RANK expected, "
        "but not set",
    ),
    (
        "torch-dist-env-not-set",
        "ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable WORLD_SIZE "
        "expected, but not set",
    ),
    # the ninth blind set's classes, each in another thread's or release's words
    (
        "pip-resolution-impossible",
        "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/user_guide/#fixing-conflicting-dependencies",
    ),
    ("pip-resolution-impossible", "  × No solution found when resolving dependencies:"),
    (
        "pip-resolution-impossible",
        "ERROR: Cannot install flax because these package versions have conflicting dependencies.",
    ),
    (
        "pip-installed-over-environment",
        "ERROR: pip's dependency resolver does not currently take into account all the packages that are installed. "
        "This behaviour is the source of the following dependency conflicts.",
    ),
    (
        "wheel-not-for-this-platform",
        "ERROR: torch_xla-2.2.0-cp310-cp310-manylinux_2_28_x86_64.whl is not a supported wheel on this platform.",
    ),
    (
        "wheel-not-for-this-platform",
        "torch-1.0.0-cp37-cp37m-linux_x86_64.whl is not a supported wheel on this platform.",
    ),
    (
        "jax-removed-api-frame",
        "AttributeError: jax.core.CallPrimitive was deprecated in JAX v0.10.0 and removed in JAX v0.11.0. Use "
        "jax.extend.core.CallPrimitive.",
    ),
    ("shm-too-small", "    RuntimeError: unable to write to file </torch_31_1030151126> "),
    ("shm-too-small", "memory. Please try to raise your shared memory limit."),
    ("disk-full", "Not enough free space to write 262144 bytes"),
    ("file-write-io-error", "cp: cannot create regular file '/mnt/bucket/ckpt/step_100.pt': Input/output error"),
    (
        "tpu-maintenance-or-preempted",
        "TPU VM ray-sky-ce66-head-bbb44751-tpu is in PREEMPTED state. Skipping IP query...",
    ),
    (
        "c10d-server-listen-failed",
        "[W socket.cpp:436] [c10d] The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already "
        "in use).",
    ),
    ("ssh-permission-denied", "localhost: Permission denied, please try again."),
    (
        "ssh-permission-denied",
        "    \"msg\": \"('Bad authentication type', [u'publickey']) (allowed_types=[u'publickey'])\",",
    ),
    ("torch-xla-pjrt-device-unset-or-unknown", "RuntimeError: FAILED_PRECONDITION: $PJRT_DEVICE is not set."),
    (
        "lightning-accelerator-unavailable",
        "pytorch_lightning.utilities.exceptions.MisconfigurationException: No TPU devices were found.",
    ),
    (
        "inductor-cache-dir-unresolvable",
        '  File ".../torch/_inductor/runtime/cache_dir_utils.py", line 23, in default_cache_dir',
    ),
    # the tenth blind set's classes, each in another thread's or release's words
    ("crypto-library-skew", "AttributeError: module 'cryptography.utils' has no attribute 'bit_length'"),
    ("crypto-library-skew", "type object 'EllipticCurvePublicKey' has no attribute 'from_encoded_point'"),
    ("crypto-library-skew", "AttributeError: 'Backend' object has no attribute 'x25519_supported'"),
    ("crypto-library-skew", "AttributeError: module 'lib' has no attribute 'X509_V_FLAG_CB_ISSUER_CHECK'"),
    (
        "torch-xla-deprecated-api",
        "WARNING:root:torch_xla.experimental.tpu.num_available_chips is deprecated. Use "
        "torch_xla._internal.tpu.num_available_chips instead.",
    ),
    (
        "torch-xla-deprecated-api",
        "WARNING:root:torch_xla.core.xla_model.xla_model.get_ordinal() will be removed in release 2.7. is "
        "deprecated. Use torch_xla.runtime.global_ordinal instead.",
    ),
    ("torch-xla-deprecated-api", "function parse_xla_device will be deprecated in release 2.5"),
    (
        "torch-save-write-failed",
        "RuntimeError: [enforce fail at inline_container.cc:664] . unexpected pos 704 vs 598",
    ),
    (
        "torch-save-write-failed",
        "RuntimeError: [enforce fail at inline_container.cc:659] .unexpected pos 2387758464 vs 2387758376",
    ),
    (
        "host-alloc-enomem",
        "E0519 19:21:46.312134  139941 execution_engine.cc:54] LLVM compilation error: Cannot allocate memory",
    ),
    (
        "host-alloc-enomem",
        "E0519 19:21:47.420350  139934 contiguous_section_memory_manager.cc:70] releaseMappedMemory failed with "
        "error: Cannot allocate memory",
    ),
    ("host-alloc-enomem", "LLVM ERROR: out of memory"),
    (
        "gcp-api-scope-denied",
        "Error: API returned: Insufficient Permission: Request had insufficient authentication scopes.",
    ),
    ("gcp-api-scope-denied", "   details: 'Request had insufficient authentication scopes.',"),
    (
        "torch-xla-runtime-already-initialized",
        "E0000 00:00:1708382221.197251   23274 pjrt_registry.cc:117] ALREADY_EXISTS: PJRT_Api already exists for "
        "device type tpu",
    ),
    # the eleventh blind set's classes, each in another thread's, release's or tool's words
    ("ssh-host-key-verification-failed", "The authenticity of host 'github.com (140.82.121.4)' can't be established."),
    ("ssh-host-key-verification-failed", "asyncssh.misc.HostKeyNotVerifiable: Host key is not trusted"),
    ("ssh-connection-dropped", "asyncssh.misc.ConnectionLost: Connection lost"),
    (
        "gcp-api-scope-denied",
        'denied: Permission "artifactregistry.repositories.uploadArtifacts" denied on resource '
        '"projects/p/locations/us/repositories/r" (or it may not exist)',
    ),
    ("no-tpu-platform", "INVALID_ARGUMENT: TpuPlatform is not available."),
    (
        "jax-jaxlib-version-skew",
        "/usr/local/lib/python3.12/dist-packages/jaxlib/plugin_support.py:71: RuntimeWarning: JAX plugin "
        "jax_cuda12_plugin version 0.7.2 is installed, but it is not compatible with the installed jaxlib version "
        "0.7.1, so it will not be used.",
    ),
    ("native-extension-mismatch", "Outdated CUDA installation found."),
    (
        "native-extension-mismatch",
        "RuntimeError: Found cuDNN version 8600, but JAX was built against version 8907, which is newer. The copy "
        "of cuDNN that is installed must be at least as new as the version against which JAX was built.",
    ),
    (
        "jax-task-restarted",
        "ABORTED: /job:jax_worker/replica:0/task:1 unexpectedly tried to connect with a different incarnation. It "
        "has likely restarted.",
    ),
    (
        "cudnn-algorithm-search-failed",
        "XlaRuntimeError: UNKNOWN: Failed to determine best cudnn convolution algorithm for:",
    ),
    (
        "disk-full",
        "UserWarning: Not enough free disk space to download the file. The expected file size is: 9976.58 MB. The "
        "target location /root/.cache/huggingface/hub/models--m/blobs only has 3120.21 MB free disk space.",
    ),
    # the twelfth set's classes in other threads' and releases' words
    (
        "torchvision-ops-missing",
        "RuntimeError: Couldn't load custom C++ ops. This can happen if your PyTorch and torchvision versions are "
        "incompatible, or if you had errors while compiling torchvision from source.",
    ),
    ("torchvision-ops-missing", "RuntimeError: No such operator torchvision::nms"),
    (
        "collective-mismatch",
        "[rank1]: RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=3104, OpType=ALLREDUCE, TensorShape=[195812480], TensorDtypes=BFloat16)",
    ),
    (
        "collective-mismatch",
        "init.cc:1247 NCCL WARN Mismatched collective detected, please check your collective calls at and around "
        "rank 39.",
    ),
    (
        "shm-too-small",
        "ubuntu:9621:9691 [6] misc/shmutils.cc:71 NCCL WARN Error: failed to extend /dev/shm/nccl-fjwOOB to "
        "5967876 bytes",
    ),
    (
        "shm-too-small",
        "(Runner pid=868697) Error while creating shared memory segment /dev/shm/nccl-UmqSM9 (size 7340384)",
    ),
    (
        "native-extension-mismatch",
        "E0000 00:00:1732551384.252582  551662 descriptor_database.cc:633] File already exists in database: "
        "federated.proto",
    ),
    ("resource-exhausted-allocate", "                XLA Label: fusion"),
    ("resource-exhausted-allocate", "\t\tEntry Parameter Subshape: f32[512,2048]"),
    # the thirteenth set's classes in other threads' and releases' words
    (
        "pip-resolver-backtracking",
        "INFO: pip is looking at multiple versions of torch to determine which version is compatible with other "
        "requirements. This could take a while.",
    ),
    ("pip-replaces-framework", "  Attempting uninstall: torch"),
    ("pip-replaces-framework", "Collecting jax>=0.4.27 (from flax==0.8.5)"),
    (
        "torch-extension-build-lock",
        '  File "/root/miniconda3/envs/nsr/lib/python3.8/site-packages/torch/utils/file_baton.py", line 42, in wait',
    ),
    ("ssh2-session-error", "ssh2.exceptions.SocketDisconnectError"),
    ("ssh-permission-denied", "asyncssh.misc.PermissionDenied: Permission denied for user root on host 10.0.0.2"),
    (
        "cublas-handle-no-memory",
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    ),
    # the fourteenth set's classes in other threads' and releases' words
    (
        "pip-resolution-impossible",
        "So, because root depends on both menu >=1.0.0 and intl >=5.0.0, version solving failed.",
    ),
    (
        "torchvision-ops-missing",
        "NotImplementedError: Could not run 'torchvision::nms' with arguments from the 'CUDA' backend.",
    ),
    ("pip-pin-unavailable", "ERROR: Could not find a version that satisfies the requirement torchvision==0.2.2"),
    ("python-syntax-newer-than-interpreter", "TypeError: 'ABCMeta' object is not subscriptable"),
    (
        "torch-xla-spawn-nprocs-refused",
        "ValueError: Unsupported nprocs (4). Please use the environment variable for the hardware you are using "
        "(X_NUM_DEVICES where X is CPU, GPU, TPU, NEURONCORE, etc).",
    ),
    # the fifteenth set's classes in other threads' and releases' words
    (
        "wheel-inconsistent-version",
        "  Caused by: Wheel version does not match filename: 0.4.31+nightly != 0.4.31.dev20240729",
    ),
    ("library-submodule-missing", "ModuleNotFoundError: No module named 'transformers.modeling_bert'"),
    (
        "pip-url-dependency-refused",
        "ERROR: Packages installed from PyPI cannot depend on packages which are not also hosted on PyPI.\n"
        "torch-xla depends on libtpu-nightly@ https://storage.googleapis.com/libtpu.whl",
    ),
    ("c10d-server-listen-failed", "Traceback (most recent call last):\nRuntimeError: Address already in use"),
    (
        "jax-coordinator-unreachable",
        "W0101 00:00:00.100 pjrt_client.cc:1603] WatchTasksAsync failed for task 3: UNAVAILABLE: Socket closed",
    ),
    (
        "ray-node-startup-timeout",
        "Exception: The current node has not been updated within 30 seconds, this could happen because of some "
        "of the Ray processes failed to startup.",
    ),
    ("process-killed", "[1]  + 14875 killed     python main.py"),
    # the sixteenth set's classes in other threads' and releases' words
    ("process-bus-error", "Fatal Python error: Bus error"),
    ("process-bus-error", "Bus error (core dumped)"),
    ("process-bus-error", 'Thread 12 "python3" received signal SIGBUS, Bus error.'),
    ("hbm-oom", "E0101 00:00:00.000000    1234 compiler_base.cc:2121] Program hbm requirement 17.23G:"),
    ("hbm-oom", "Program host requirement 20.50G:"),
    ("sshd-privsep-failed", "Missing privilege separation directory: /run/sshd"),
    ("sshd-privsep-failed", 'fatal: chroot("/var/empty"): Operation not permitted'),
    (
        "jax-cache-key-unstable",
        "-rw-r--r-- 1 root root 20480 Jan  1 00:00 jit_train_step-"
        "0b184a1e3154e7f940fd1d474983357853d33ff0dcd1474f81c7c91eea9d9d7f-cache",
    ),
    # the seventeenth set's classes in other threads' and tools' words
    ("ssh-tool-connect-failed", "Error: Failed to establish SSH tunnel to the instance"),
    ("ssh-tool-connect-failed", "dstack._internal.core.services.ssh.tunnel SSH tunnel failed: b'Connection refused'"),
    ("ssh-port-forward-failed", "Warning: remote port forwarding failed for listen port 52698"),
    ("ssh-port-forward-failed", "channel_setup_fwd_listener_tcpip: cannot listen to port: 8888"),
    # the line as a console wrapped it before the op's name (pytorch/xla#662), read whole
    (
        "xrt-op-not-registered",
        "outputs_handles, &outputs) == ::tensorflow::Status::OK() (Not found: Op type not registered \n"
        "'XRTAllocateFromTensor' in binary running on n-1.",
    ),
    (
        "object-storage-transfer-stalled",
        "W0312 10:01:02.123456    1234 curl_transport.cc:397] Error [7]=Couldn't connect to server in curl operation",
    ),
    # the eighteenth set's classes in other threads' and tools' words
    (
        "process-killed",
        "subprocess.CalledProcessError: Command '['python', 'train.py']' died with <Signals.SIGKILL: 9>.",
    ),
    ("host-oom-killer", 'level=error msg="runc run failed: container init was OOM-killed (memory limit too low?)"'),
    ("host-alloc-enomem", "    MemoryError"),
    (
        "native-extension-mismatch",
        "E tensorflow/stream_executor/cuda/cuda_dnn.cc:363] Loaded runtime CuDNN library: 8.0.4 but source was "
        "compiled with: 8.1.0.",
    ),
    (
        "wheel-not-for-this-platform",
        "hint: You're using CPython 3.13 (`cp313`), but `torch` (v2.1.0) only has wheels with the following Python "
        "ABI tags: `cp38`, `cp39`, `cp310`, `cp311`",
    ),
    (
        "pjrt-plugin-abi-mismatch",
        "F0101 00:00:00.000000 1 pjrt_c_api_helpers.cc:241] Unexpected error status stubs.inc:5: UNIMPLEMENTED: "
        "PJRT_Client_TopologyDescription",
    ),
    ("cluster-version-mismatch", "RuntimeError: Version mismatch: The cluster was started with:"),
    ("cluster-version-mismatch", "UserWarning: Mismatched versions found"),
    ("lightning-accelerator-unavailable", "MisconfigurationException: PyTorch XLA not installed."),
    ("ssh-port-forward-failed", "channel 3: open failed: administratively prohibited: open failed"),
    ("remote-launcher-unreachable", "pdsh@node0: node3: connect: Connection refused"),
    ("remote-launcher-unreachable", "ORTE was unable to reliably start one or more daemons."),
    (
        "remote-launcher-unreachable",
        '[mpiexec@node0] HYDU_sock_connect (utils/sock/sock.c:145): unable to connect from "node0" to "node1" '
        "(No route to host)",
    ),
    (
        "filesystem-lock-unsupported",
        "OSError: Unable to open file (unable to lock file, errno = 37, error message = 'No locks available')",
    ),
    ("cache-dir-not-writable", "PermissionError: [Errno 13] Permission denied: '/tmp/torchinductor_root/triton/0/ab'"),
    # the nineteenth set's classes in other threads' words
    ("frontend-attribute-missing", "AttributeError: module 'numpy' has no attribute 'float'."),
    ("frontend-attribute-missing", "AttributeError: module 'torch.library' has no attribute 'register_fake'"),
    ("frontend-name-missing", "ImportError: cannot import name 'is_torch_xla_available' from 'transformers'"),
    ("crypto-library-skew", "AttributeError: OpenSSH"),
    # the twentieth set's classes in other threads' words
    (
        "collective-mismatch",
        "W horovod/common/stall_inspector.cc:105] One or more tensors were submitted to be reduced, gathered or "
        "broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 seconds. This may "
        "indicate that different ranks are trying to submit different tensors or that only subset of ranks is "
        "submitting tensors, which will cause deadlock.",
    ),
    (
        "cluster-version-mismatch",
        "[node2:01234] [[1234,0],1] ORTE_ERROR_LOG: Data unpack would read past end of buffer in file "
        "util/nidmap.c at line 148",
    ),
    ("native-extension-mismatch", "ERROR: Flag 'xla_gpu_enable_triton_gemm' was defined more than once"),
    ("tpu-device-count-env-mismatch", "RuntimeError: CUDA error: invalid device ordinal"),
    (
        "nccl-ib-completion-error",
        "NCCL WARN NET/IB : Got completion from peer 10.0.0.2<4321> with error 12, opcode 0, len 0, vendor err 129",
    ),
    # the twenty-first set's classes in other threads' words
    (
        "pip-resolution-impossible",
        "  ╰─▶ Because there is no version of torch==2.5.0+cpu and you require torch==2.5.0+cpu, we can conclude "
        "that your requirements are unsatisfiable.",
    ),
    (
        "pip-resolution-impossible",
        "      And because your project requires wbc-model:torchgpu, we can conclude that your project's "
        "requirements are unsatisfiable.",
    ),
    (
        "numpy-abi-mismatch",
        "UserWarning: Failed to initialize NumPy: _ARRAY_API not found; RuntimeError: Numpy is not available",
    ),
    (
        "native-extension-mismatch",
        "W external/xla/xla/service/gpu/nvptx_compiler.cc:930] The NVIDIA driver's CUDA version is 12.2 which is "
        "older than the ptxas CUDA version (12.6.20). Because the driver is older than the ptxas version, XLA is "
        "disabling parallel compilation, which may slow down compilation.",
    ),
    # the thirty-second set's classes in other threads' words (MrTornado24/Next3D#25; hpcaitech/ColossalAI#2908:
    # the linker in Chinese; tudelft-iv/VoteFlow#2: inside an extension build's RuntimeError, its flags trimmed;
    # radiasoft/devops#183: MPICH handed Open MPI's --mca); the rest constructed, no other thread's log seen
    # (jax's form of the PTX error, nvcc's of the unknown architecture, another bus id, another allocator)
    ("extension-build-cudart-not-found", "/usr/bin/ld: cannot find -lcudart: No such file or directory"),
    ("extension-build-cudart-not-found", "/usr/bin/ld: 找不到 -lcudart: 没有那个文件或目录"),
    (
        "extension-build-cudart-not-found",
        "RuntimeError(\"Error building extension 'im2ht': [1/1] c++ ht_cuda.cuda.o im2ht.o -shared -lcudart -o im2ht.so"
        "\\nFAILED: [code=1] im2ht.so \\n/usr/bin/ld: cannot find -lcudart\\ncollect2: error: ld returned 1 exit "
        "status",
    ),
    (
        "mpi-launcher-of-another-implementation",
        "[mpiexec@rs14.local] match_arg (utils/args/args.c:159): unrecognized argument mca",
    ),
    (
        "cuda-runtime-newer-than-driver",
        "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to load PTX text as a module: "
        "CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the provided PTX was compiled with an unsupported toolchain.",
    ),
    ("gpu-arch-not-in-build", "nvcc fatal   : Unsupported gpu architecture 'compute_86'"),
    (
        "accelerator-memory-hardware-fault",
        "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error",
    ),
    (
        "accelerator-framework-oom",
        "terminate called after throwing an instance of 'std::runtime_error' what(): cudaMallocAsync(&ptr, n, "
        "stream) failed with error out of memory",
    ),
    # the thirty-first set's classes in other threads' words (RVC-Project/Retrieval-based-Voice-Conversion-WebUI
    # #2636; erikwijmans/Pointnet2_PyTorch#158: an extension built for other arches; pytorch/pytorch#10094: the
    # older THC form; RangiLyu/nanodet#216, wuhuikai/FastFCN#37: torch's older assertion; NVIDIA/nvidia-docker
    # #1068, its overlay path trimmed; NVIDIA/enroot#111: the hook after another mount error); the rest
    # constructed, no other thread's log seen (the runtime's own words in a C++ check, the kernel's trans_a,
    # the shell's report from sh)
    (
        "gpu-arch-not-in-build",
        "NVIDIA GeForce RTX 5070 Ti with CUDA capability sm_120 is not compatible with the current PyTorch "
        "installation.",
    ),
    ("gpu-arch-not-in-build", "CUDA kernel failed : no kernel image is available for execution on the device"),
    (
        "gpu-arch-not-in-build",
        "THCudaCheck FAIL file=c:\\programdata\\miniconda3\\conda-bld\\pytorch_1532505617613\\work\\aten\\src\\thc"
        "\\generic/THCTensorMathPairwise.cu line=102 error=48 : no kernel image is available for execution on the "
        "device",
    ),
    (
        "cuda-runtime-newer-than-driver",
        "RuntimeError: The NVIDIA driver on your system is too old (found version 10010). Please update you",
    ),
    ("cuda-runtime-newer-than-driver", "The NVIDIA driver on your system is too old (found version 9000)."),
    (
        "cuda-runtime-newer-than-driver",
        'CUDA error at main.cu:42 code=35(cudaErrorInsufficientDriver) "CUDA driver version is insufficient for '
        'CUDA runtime version"',
    ),
    ("triton-kernel-for-another-triton", "TypeError: dot() got an unexpected keyword argument 'trans_a'"),
    (
        "container-gpu-hook-failed",
        "docker: Error response from daemon: OCI runtime create failed: container_linux.go:345: starting container "
        'process caused "process_linux.go:430: container init caused \\"process_linux.go:413: running prestart '
        'hook 1 caused \\\\\\"error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: mount error: '
        "mount operation failed: /proc/driver/nvidia/params/version/registry: no such file or directory",
    ),
    (
        "container-gpu-hook-failed",
        "[ERROR] /apps/enroot/3.4.0/gcc-11.2.0/etc/enroot/hooks.d/98-nvidia.sh exited with return code 1",
    ),
    ("process-bus-error", "/bin/sh: line 1:  4242 Bus error               (core dumped) python train.py"),
    # the thirtieth set's classes in other threads' words: XLA's out-of-memory statistics from another
    # run (a SpeedPPI AlphaFold job); the rest constructed, no other thread's log seen (the same messages in
    # their common forms: torch's no-device error, the loader's, Docker's with the GPU capability, cuDNN 8's
    # version skew, TensorRT's own plan check, git's, DeepSpeed's launcher, the kernel log's prefix)
    (
        "resource-exhausted-allocate",
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
        "34912723376 bytes.\nBufferAssignment OOM Debugging.\nBufferAssignment stats:",
    ),
    ("cuda-no-device", "RuntimeError: CUDA error: no CUDA-capable device is detected"),
    (
        "cuda-driver-library-not-found",
        "OSError: libcuda.so.1: cannot open shared object file: No such file or directory",
    ),
    (
        "nvml-not-in-container",
        'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
    ),
    (
        "native-extension-mismatch",
        "Could not load library libcudnn_cnn_infer.so.8. Error: /usr/local/cuda/lib64/libcudnn_cnn_infer.so.8: "
        "symbol _ZN5cudnn3ops18GetInternalStreamsEP12cudnnContextiPP11CUstream_st, version libcudnn_ops_infer.so.8 "
        "not defined in file libcudnn_ops_infer.so.8 with link time reference",
    ),
    (
        "tensorrt-engine-version-mismatch",
        "[TRT] [E] 6: The engine plan file is not compatible with this version of TensorRT, expecting library "
        "version 8.6.1.6 got 8.5.3.1, please rebuild.",
    ),
    (
        "remote-endpoint-unreachable",
        "fatal: unable to access 'https://github.com/NVIDIA/apex/': Failed to connect to github.com port 443: "
        "Connection timed out",
    ),
    (
        "process-killed",
        "[2024-01-02 10:00:00,000] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', "
        "'--local_rank=0'] exits with return code = -9",
    ),
    ("wsl-gpu-mapping-refused", "[   35.123456] misc dxg: dxgk: dxgkio_make_resident: Ioctl failed: -22"),
    # the twenty-ninth set's class in other threads' words (THUDM/GraphMAE#9, dmlc/dgl#6078: older DGL names
    # the device "gpu")
    (
        "extension-cpu-build-beside-cuda",
        "dgl._ffi.base.DGLError: [21:48:49] /opt/dgl/src/runtime/c_runtime_api.cc:88: Check failed: allow_missing: "
        "Device API gpu is not enabled. Please install the cuda version of dgl.",
    ),
    # the twenty-eighth set's classes in other threads' words
    (
        "fabric-manager-not-ready",
        "RuntimeError: cuda runtime error (802) : system not yet initialized at /opt/conda/conda-bld/"
        "pytorch_1579022034529/work/aten/src/THC/THCGeneral.cpp:50",
    ),
    ("fabric-manager-not-ready", "ggml_cuda_init: failed to initialize CUDA: system not yet initialized"),
    # (constructed, no other thread's log seen: the same messages with other versions, paths and sizes, and
    # an older torch's assertion)
    ("torch-no-nvidia-driver", "AssertionError: Found no NVIDIA driver on your system. Please check that you have"),
    (
        "container-cuda-newer-than-driver",
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=11.6, please update your driver to "
        "a newer version, or use an earlier cuda container: unknown",
    ),
    (
        "native-extension-mismatch",
        "Exception: >- DeepSpeed Op Builder: Installed CUDA version 11.7 does not match the version torch was "
        "compiled with 12.1, unable to compile cuda/cpp extensions without a matching cuda version.",
    ),
    (
        "torch-extension-build-lock",
        "Warning: Lock file exists in build directory: '/root/.cache/torch_extensions/py310_cu121/"
        "nvdiffrast_plugin/lock'",
    ),
    ("nvswitch-fabric-fault", "node7:3310:3342 [0] transport/nvls.cc:156 NCCL WARN Cuda failure 'invalid argument'"),
    (
        "gpu-memory-held-by-other-process",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
        "79.15 GiB of which 3.25 MiB is free. Process 2101 has 40.12 GiB memory in use. Including non-PyTorch "
        "memory, this process has 39.01 GiB memory in use.",
    ),
    # the twenty-seventh set's classes in other threads' words
    ("nccl-topology-file-mismatch", "graph/xml.h:77 NCCL WARN Attribute arch of node cpu not found"),
    (
        "hub-credentials-rejected",
        "requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: https://huggingface.co/facebook/"
        "nllb-200-distilled-1.3B/resolve/main/model.safetensors",
    ),
    ("hub-credentials-rejected", "Invalid credentials in Authorization header"),
    # (constructed, no other thread's log seen: the compiler's kill in torch-neuronx's words, and the
    # cache push refused for another repository)
    ("process-killed", "INFO:Neuron:Compile command returned: -9"),
    (
        "hub-compile-cache-not-writable",
        "Could not push the cached model to the repo my-org/neuron-cache, most likely due to not having the write "
        "permission for this repo.",
    ),
    # the twenty-sixth set's classes in other threads' words
    (
        "ray-object-store-on-tmp",
        "WARNING services.py:1628 -- WARNING: The object store is using /tmp instead of /dev/shm because /dev/shm "
        "has only 46198665216 bytes available. This will harm performance!",
    ),
    (
        "nvml-not-in-container",
        "I0121 20:28:50.871846       1 factory.go:107] Detected non-NVML platform: could not load NVML library: "
        "libnvidia-ml.so.1: cannot open shared object file: No such file or directory",
    ),
    (
        "nvml-not-in-container",
        "E0506 17:45:45.421965       1 factory.go:113] If this is a GPU node, did you configure "
        "the NVIDIA Container Toolkit?",
    ),
    (
        "native-extension-mismatch",
        "2023-03-27 03:15:47.854454: E external/org_tensorflow/tensorflow/compiler/xla/status_macros.cc:54] INTERNAL: "
        "RET_CHECK failure (external/org_tensorflow/tensorflow/compiler/xla/service/gpu/gpu_compiler.cc:618) "
        "dnn != nullptr",
    ),
    # (constructed, no other thread's log seen: the same message with another kernel's cache entry)
    (
        "triton-cache-shared-tmp",
        "FileNotFoundError: [Errno 2] No such file or directory: '/root/.triton/cache/a0b1c2/_fwd_kernel.cubin.tmp."
        "pid_4411_9d7e2b1c-3f7a-4c55-a0b1-2f9c7e1d0a44'",
    ),
    # the twenty-fifth set's classes in other threads' words
    (
        "jax-gpu-maybe-present-fallback",
        "WARNING: An NVIDIA GPU may be present on this machine, but a CUDA-enabled jax installation was not found.",
    ),
    (
        "jax-gpu-maybe-present-fallback",
        "WARNING:2025-05-27 20:22:28,949:jax._src.xla_bridge:791: An NVIDIA GPU may be present on this machine, but "
        "a CUDA-enabled jaxlib is not installed. Falling back to cpu.",
    ),
    (
        "pip-resolution-impossible",
        "  ╰─▶ Cannot solve the request because of: pytorch-gpu * cannot be installed because there are no viable "
        "options:",
    ),
    ("pip-resolution-impossible", "Error: × failed to solve the conda requirements of 'default' 'linux-64'"),
    # (constructed, no other thread's log seen: filelock's message on Inductor's cache instead of Triton's)
    (
        "compile-cache-lock-wait",
        "DEBUG:filelock:Attempting to acquire lock 139855430467344 on /tmp/torchinductor_root/locks/"
        "cy7qjzrhdxq3y5uhtbhx4oqxhkdqimgp7ibszcnklsh6g2jx3qfn.lock",
    ),
    # the twenty-fourth set's classes in other threads' words
    (
        "shm-too-small",
        "ValueError: The configured object store size (11.81114368 GB) exceeds /dev/shm size (11.8111232 GB). This "
        "will harm performance. Consider deleting files in /dev/shm or increasing its size with --shm-size in Docker.",
    ),
    # the twenty-third set's classes in other threads' words
    (
        "hbm-oom",
        "W1110 07:32:01.391885     918 hlo_rematerialization.cc:1363] Can't reduce memory use below 13.58GiB "
        "(14583876403 bytes) by rematerialization; only reduced to 15.22GiB (16339342336 bytes)",
    ),
    (
        "native-extension-mismatch",
        "OSError: The detected CUDA version (11.8) mismatches the version that was used to compile PyTorch (12.1). "
        "Please make sure to use the same CUDA versions.",
    ),
    (
        "native-extension-mismatch",
        "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: jaxlib/gpu/prng_kernels.cc:33: operation "
        "gpuGetLastError() failed: cudaGetLastError symbol not found.",
    ),
    # the twenty-second set's classes in other threads' words
    (
        "native-extension-mismatch",
        "RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (9, 1, 0) but found runtime "
        "version (8, 9, 2).",
    ),
    ("native-extension-mismatch", "RuntimeError: Unable to load cuDNN. Is it installed?"),
    (
        "native-extension-mismatch",
        "WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:",
    ),
    (
        "native-extension-mismatch",
        "CUDA SETUP: Required library version not found: libbitsandbytes_cuda118.so. Maybe you need to compile it "
        "from source?",
    ),
    # the thirty-third set's classes in other threads' words: the same CUDA error as ComfyUI's error report
    # names it (Comfy-Org/ComfyUI#6843, under its cuda-malloc default), torch's CPU-only build raising from
    # its CUDA init with the raise quoted (facebookresearch/detectron2#460: "a pytorch installation issue"),
    # and newer NCCL's segment line, whose errno tells an unwritable /dev/shm from a full one (the
    # Permission denied line is constructed from that format; the other is quoted from a deployment guide)
    ("cuda-operation-not-supported", "- **Exception Message:** CUDA error: operation not supported"),
    (
        "torch-built-without-cuda",
        '    raise AssertionError("Torch not compiled with CUDA enabled")\n'
        "AssertionError: Torch not compiled with CUDA enabled",
    ),
    (
        "shm-not-writable",
        "misc/shmutils.cc:113 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-cjY8K5 (size "
        "10617216), error: Permission denied (13)",
    ),
    (
        "disk-full",
        "Error while creating shared memory segment /dev/shm/nccl-cjY8K5 (size 10617216), error: No space left on "
        "device (28)",
    ),
    # the thirty-fourth set's classes in other threads' words: ONNX Runtime's TensorRT provider against another
    # CUDA, RAPIDS' pool manager out of room, and pyopencl finding no OpenCL platform (each quoted from a
    # repository's notes, the first two trimmed); the ssh2 line is built from that library's own wording
    (
        "onnxruntime-provider-of-another-cuda",
        "onnxruntime::Provider& onnxruntime::ProviderLibrary::Get() [ONNXRuntimeError] : 1 : FAIL : Failed to load "
        "library libonnxruntime_providers_tensorrt.so with error: libcublas.so.11: cannot open shared object file: "
        "No such file or directory",
    ),
    (
        "accelerator-framework-oom",
        "Exception caught: std::bad_alloc: out_of_memory: RMM failure at:.../pool_memory_resource_impl.cpp:73: "
        "Maximum pool size exceeded (failed to allocate 10.371208 GiB): Not enough room to grow",
    ),
    ("opencl-no-platform", "pyopencl._cl.LogicError: clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR"),
    ("ssh-key-unreadable", "Error: Unsupported key format"),
    ("accelerator-framework-oom", "RuntimeError: CUDA error: out of memory"),
    ("disk-quota-exceeded", "Message: Pod ephemeral local storage usage exceeds the total limit of containers 10Gi."),
    (
        "disk-quota-exceeded",
        "Warning  Evicted  3m  kubelet  The node was low on resource: ephemeral-storage. Container trainer was "
        "using 52Gi, which exceeds its request of 0.",
    ),
    (
        "disk-quota-exceeded",
        'Warning  Evicted  kubelet  Container model exceeded its local ephemeral storage limit "1Gi".',
    ),
    # the thirty-fifth set's classes in other threads' words: ptxas older than the PTX of an MLIR pipeline
    # (PRONTOLab/GB-25#7) and of a video decoder's kernels (QwenLM/Qwen2.5-Omni#247), both quoted; the
    # rest are built from each message's own format with another file, operator, device or library
    (
        "cuda-runtime-newer-than-driver",
        "ptxas /tmp/mlir-gpumodname-nvptx64-nvidia-cuda-sm_90-ac1dae.ptx, line 5; fatal   : Unsupported .version "
        "8.6; current version is '8.4'",
    ),
    (
        "cuda-runtime-newer-than-driver",
        r"ptxas C:\Users\ai\AppData\Local\Temp\tmpkoko0xtp.ptx, line 5; fatal   : Unsupported .version 8.8; "
        "current version is '8.7'",
    ),
    ("gpu-arch-not-in-build", "nvcc fatal   : Value 'sm_89' is not defined for option 'gpu-architecture'"),
    (
        "cuda-init-unknown-error",
        "UserWarning: CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up "
        "environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start. Setting the available "
        "devices to be zero. (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:109.)",
    ),
    (
        "cuda-mps-client-cannot-connect",
        "RuntimeError: CUDA error: MPS client failed to connect to the MPS control daemon or the MPS server",
    ),
    ("cuda-libraries-of-another-release", "RuntimeError: Library cublas64_12.dll is not found or cannot be loaded"),
    (
        "cuda-libraries-of-another-release",
        "Could not load library libcudnn_ops_infer.so.8. Error: libcudnn_ops_infer.so.8: cannot open shared object "
        "file: No such file or directory",
    ),
    (
        "cuda-libraries-of-another-release",
        "Could not locate cudnn_ops_infer64_8.dll. Please make sure it is in your library path!",
    ),
    (
        "torchaudio-ffmpeg-of-another-release",
        "RuntimeError: Failed to initialize FFmpeg extension. Tried versions: ['6', '5', '4', ''].",
    ),
    (
        "torchvision-ops-missing",
        "RuntimeError: register_fake(...): the operator torchvision::roi_align already has an DispatchKey::Meta "
        "implementation via a pre-existing torch.library or TORCH_LIBRARY registration.",
    ),
    ("accelerator-framework-oom", "Warp CUDA error 2: out of memory (in function alloc_device, warp.cu:301)"),
    ("accelerator-framework-oom", "RuntimeError: CUDA failed with error out of memory"),
    (
        "tf-function-callback-unreachable",
        "InternalError: {{function_node __inference_predict_function_2381}} failed to connect to all addresses",
    ),
    # the thirty-sixth set's classes, each line built from the message's own format with another extension,
    # file, library or release (jaxlib's newer handle pool names its call gpusolverDnCreate, as projects'
    # troubleshooting notes quote it)
    (
        "torch-extension-stale-build",
        "ImportError: /root/.cache/torch_extensions/py310_cu121/cpu_adam/cpu_adam.so: undefined symbol: "
        "_ZN3c1015SmallVectorBaseIjE8grow_podEPKvmm",
    ),
    (
        "extension-source-for-older-torch",
        "src/cuda/roi_align_kernel.cu:4:10: fatal error: THC/THC.h: No such file or directory",
    ),
    (
        "extension-source-for-older-torch",
        "nms_cuda.cpp:4:23: error: \u2018AT_CHECK\u2019 was not declared in this scope",
    ),
    (
        "cusolver-of-another-cuda",
        "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: jaxlib/gpu/solver_handle_pool.cc:37: operation "
        "gpusolverDnCreate(&handle) failed: cuSolver internal error",
    ),
    ("torch-extension-imported-before-torch", "ImportError: libc10.so: cannot open shared object file: No such file"),
    (
        "native-extension-mismatch",
        "ImportError: libc10_cuda.so: cannot open shared object file: No such file or directory",
    ),
    ("native-extension-mismatch", "    xFormers wasn't build with CUDA support"),
    (
        "accelerator-framework-oom",
        "tiny-cuda-nn/gpu_memory.h:112 cudaMalloc(&rawptr, n_bytes+DEBUG_GUARD_SIZE*2) failed with error out of memory",
    ),
    (
        "native-extension-mismatch",
        "ImportError: /opt/venv/lib/python3.10/site-packages/fused_adam.cpython-310-x86_64-linux-gnu.so: undefined "
        "symbol: _ZN3c104impl8GPUTrace13gpuTraceStateE",
    ),
    # the thirty-seventh set's classes in other threads' words: an older Ray's memory monitor (an RLlib run on a
    # workstation), a newer Ray's report as KubeRay prints it on one line, NCCL's refused connect as a
    # cluster's notes quote it once retries are spent and as a platform's notes quote the retry, the EFA
    # provider's registration failure as aws-ofi-nccl reports it (aws/aws-ofi-nccl#584) and libfabric's own
    # line above it; the checkpoint line is constructed from the shard loader's progress words
    (
        "ray-node-low-memory",
        "ray.memory_monitor.RayOutOfMemoryError: More than 95% of the memory on node suwi is used (30.47 / 31.3 GB). "
        "The top 10 memory consumers are:",
    ),
    ("ray-node-low-memory", "which exceeds the memory usage threshold of 0.95. "),
    ("ray-node-low-memory", "Top 10 memory users: PID  MEM(GB) COMMAND"),
    ("ray-node-low-memory", "PID\tMEM\tCOMMAND"),
    (
        "nccl-peer-connect-refused",
        "r11i6n2:486514:486651 [1] include/socket.h:403 NCCL WARN Connect to 10.148.3.247<56821> failed : "
        "Connection refused",
    ),
    (
        "nccl-peer-connect-refused",
        "h04e04357:542:1085 [0] NCCL INFO Call to connect returned Connection refused, retrying",
    ),
    (
        "efa-libfabric-older-than-nccl",
        "register_mr_buffers:544 NCCL WARN NET/OFI Unable to register memory (type = 2) for device 0. RC: -22, "
        "Error: Invalid argument",
    ),
    (
        "efa-libfabric-older-than-nccl",
        "libfabric:652244:1713524816::core:core:cuda_set_sync_memops():207<warn> Failed to perform "
        "cuPointerSetAttribute: CUDA_ERROR_NOT_SUPPORTED:operation not supported",
    ),
    ("process-killed", "Loading checkpoint shards:  67%|######6   | 2/3 [01:02<00:31, 31.2s/it] killed by the kernel"),
    # the thirty-eighth set's classes: transformers' version gate as other threads quote it (a hub client
    # too old, a peft too old for diffusers), MXNet's memory pool in its own words, and two lines built from
    # the messages' formats (flash-attn's varlen function and Mesh TensorFlow's check, with other values)
    (
        "library-needs-newer-dependency",
        "ImportError: huggingface-hub>=0.23.2,<1.0 is required for a normal functioning of this module, but found "
        "huggingface-hub==0.23.0.",
    ),
    (
        "library-needs-newer-dependency",
        "ImportError: peft>=0.17.0 is required for a normal functioning of this module, but found peft==0.11.1",
    ),
    ("accelerator-framework-oom", "MXNetError: cudaMalloc retry failed: out of memory"),
    (
        "flash-attn-of-another-release",
        "TypeError: flash_attn_varlen_func() missing 2 required positional arguments: 'max_seqlen_q' and "
        "'max_seqlen_k'",
    ),
    (
        "mesh-tf-shape-not-the-slice",
        "ValueError: physical and logical shapes must have the same product physical_shape=[4, 4, 2] "
        "logical_shape=[8, 16]",
    ),
    # the thirty-ninth set's classes: a build mixing two CUDA toolkits (ihaque/memtestG80#15, its leading
    # underscore the thread's own), Lightning's check for a GPU (FoNDUE-HTR/Documentation#12) and for a TPU
    # with its name quoted (Lightning-AI/pytorch-lightning#17936), and a torch without NCCL as its
    # traceback's source line shows it (bshall/hubert#1) and as newer releases warn first
    # (pytorch/pytorch#159742)
    (
        "cuda-object-newer-than-toolkit",
        "_nvlink fatal   : Input file '/usr/local/cuda/lib64/libcudadevrt.a:cuda_device_runtime.o' newer than "
        "toolkit (129 vs 120)",
    ),
    (
        "lightning-accelerator-unavailable",
        "`MisconfigurationException: GPUAccelerator can not run on your system since the accelerator is not "
        "available.`",
    ),
    (
        "lightning-accelerator-unavailable",
        "lightning.fabric.utilities.exceptions.MisconfigurationException: `TPUAccelerator` can not run on your "
        "system since the accelerator is not available. The following accelerator(s) is available and can be "
        "passed into `accelerator` argument of `Trainer`: ['cpu'].",
    ),
    # an older Lightning's words for the same check (its own tests match them); once a near miss, when GPU
    # runs were set aside as another stack
    ("lightning-accelerator-unavailable", "GPUAccelerator can not run on your system since GPUs are not available."),
    ("torch-without-nccl", '    raise RuntimeError("Distributed package doesn\'t have NCCL " "built in")'),
    (
        "torch-without-nccl",
        "D:\\Python39\\lib\\site-packages\\torch\\distributed\\distributed_c10d.py:613: UserWarning: Attempted to "
        "get default timeout for nccl backend, but NCCL support is not compiled",
    ),
    # the fortieth set's classes: a library's pin missing from the index beside the releases it lists
    # (NVIDIAGameWorks/kaolin#698), the CUDA driver's and runtime's own words for device memory in native code
    # (jonstephens85/instantngp-batch#3, mpi4jax/mpi4jax#106) and Caffe's CUDA check (k4yt3x/video2x#28), and a
    # training script's job killed (ZhengPeng7/BiRefNet#33, after a progress bar as there)
    (
        "pip-pin-unavailable",
        "ERROR: Could not find a version that satisfies the requirement kaolin==0.13.0 (from versions: 0.0)",
    ),
    (
        "accelerator-framework-oom",
        "13:46:25 ERROR    Uncaught exception: D:/a/instant-ngp/instant-ngp/dependencies/tiny-cuda-nn/include"
        "\\tiny-cuda-nn/gpu_memory.h:592 cuMemSetAccess(m_base_address + m_size, n_bytes_to_allocate, &access_desc, 1) "
        "failed with error CUDA_ERROR_OUT_OF_MEMORY",
    ),
    ("accelerator-framework-oom", "\tError 2 cudaErrorMemoryAllocation: out of memory"),
    (
        "accelerator-framework-oom",
        "F1216 22:28:02.183454 12168 syncedmem.cpp:78] Check failed: error == cudaSuccess (2 vs. 0)  out of memory",
    ),
    (
        "process-killed",
        " 41%|#####     | 7032/17238 [02:28<05:57, 28.55it/s]./train.sh: line 40: 1324513 Killed                  "
        "CUDA_VISIBLE_DEVICES=${devices} python train.py --ckpt_dir ckpt/${method}",
    ),
    # the forty-first set's classes: a kernel missing from the build in older words (clear-nus/VT_SNN#6's
    # extension), cuBLAS's fp32 batched GEMM refused as MonoGS#96 words it without the backticks, a library
    # calling a flash-attn 2 function that its guarded import never bound (flash_attn_func, a built line),
    # and gcc's quote of the removed THC include (its line number built)
    ("gpu-arch-not-in-build", "RuntimeError: CUDA error: invalid device function"),
    (
        "gpu-arch-not-in-build",
        "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling cublasSgemmStridedBatched( handle, opa, "
        "opb, m, n, k, &alpha, a, lda, stridea, b, ldb, strideb, &beta, c, ldc, stridec, num_batches)",
    ),
    ("flash-attn-of-another-release", "NameError: name 'flash_attn_func' is not defined"),
    ("extension-source-for-older-torch", "   12 | #include <THC/THC.h>"),
    # the forty-second set's class: pip's older summary line (rusty1s/pytorch_scatter#43), and the box pip draws
    # under legacy-install-failure naming another of the graph library's extensions (a built line)
    ("graph-extension-built-from-source", "Failed to build torch-scatter"),
    ("graph-extension-built-from-source", "    ╰─> torch-sparse"),
    # the forty-third set's classes: the toolkit's stub libcuda as NCCL reports it (horovod/horovod#3831's
    # title) and in the driver API's name (numba/numba#9732, a built line); NVRTC not knowing the GPU without
    # torch's prefix (NVlabs/nvdiffmodeling#25); ONNX Runtime's Windows words without the apostrophe
    # (cubiq/ComfyUI_InstantID#27); torch's CUDA check by its first line alone (a built line)
    ("cuda-driver-stub-loaded", "NCCL WARN Cuda failure 'CUDA driver is a stub library'"),
    (
        "cuda-driver-stub-loaded",
        "numba.cuda.cudadrv.driver.CudaAPIError: [34] Call to cuInit results in CUDA_ERROR_STUB_LIBRARY",
    ),
    ("gpu-arch-not-in-build", "nvrtc: error: invalid value for --gpu-architecture (-arch)"),
    (
        "onnxruntime-provider-of-another-cuda",
        "D:\\a\\_work\\1\\s\\onnxruntime\\python\\onnxruntime_pybind_state.cc:857 "
        "onnxruntime::python::CreateExecutionProviderInstance CUDA_PATH is set but CUDA wasnt able to be loaded. "
        "Please install the correct version of CUDA andcuDNN as mentioned in the GPU requirements page",
    ),
    ("native-extension-mismatch", "The detected CUDA version (12.1) mismatches the version that was used to compile"),
    # the forty-fourth set's classes: PyTorch3D's op naming itself (facebookresearch/pytorch3d#257), Open MPI's
    # shared-memory copy refused without the rank prefix (ornladios/ADIOS2-Examples#62) and without the space
    # (open-mpi/ompi#4948), faiss's assertion with the CUDA error after the size and zsh's report of a background
    # job with its marker (built lines), TensorFlow's chunk picture with its request marked (facenet's, in tune)
    (
        "extension-built-without-cuda",
        "RuntimeError: Not compiled with GPU support (RasterizeMeshesCoarse at "
        "/tmp/pip-req-build-2pqcx156/pytorch3d/csrc/rasterize_meshes/rasterize_meshes.h:275)",
    ),
    ("mpi-shared-memory-copy-refused", "[de44f6097ee6:39278] Read -1, expected 5285, errno = 1"),
    ("mpi-shared-memory-copy-refused", "Read -1, expected 4067, errno =1"),
    (
        "accelerator-framework-oom",
        "Faiss assertion 'err == cudaSuccess' failed in void* faiss::gpu::allocMemorySpaceV() at "
        "gpu/utils/MemorySpace.cpp:36; details: Failed to cudaMalloc 1073741824 bytes (error 2 out of memory)",
    ),
    ("process-killed", "[2]  + 41234 killed"),
    (
        "resource-exhausted-allocate",
        "W tensorflow/core/common_runtime/bfc_allocator.cc:274] *****************x*****************************",
    ),
]


@pytest.mark.parametrize(
    ("sig_id", "line"), CLASS_VARIANTS, ids=[f"{i}-{n}" for n, (i, _) in enumerate(CLASS_VARIANTS)]
)
def test_a_signature_holds_for_other_phrasings_of_its_failure_class(sig_id, line):
    finding = diag.diagnose(line)
    assert finding is not None and finding.signature_id == sig_id, finding


# Near misses: lines that look like a class but belong to no layer (or to another one).
NOT_THE_CLASS = [
    # jax's and TensorFlow's warning on every host without a GPU (not an error), Ray's retry before it gives
    # up, and a rank DeepSpeed's launcher saw fail on its own
    (
        "E external/xla/xla/stream_executor/cuda/cuda_driver.cc:268] failed call to cuInit: CUDA_ERROR_NO_DEVICE: "
        "no CUDA-capable device is detected",
        None,
    ),
    ("W1119 08:22:22.445783 1513663 1513663 redis_context.cc:303] Failed to connect to Redis, retrying.", None),
    (
        "[2024-01-02 10:00:00,000] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', "
        "'--local_rank=0'] exits with return code = 1",
        None,
    ),
    # an option no MPI knows (ComputationalRadiationPhysics/picongpu#3334: the user's own script), and the
    # driver's libcuda missing at a Triton launcher's link (JIA-Lab-research/Seg-Zero#63: causes differ)
    ("[mpiexec@T7500] match_arg (utils/args/args.c:163): unrecognized argument am", None),
    ("/usr/bin/ld: cannot find -lcuda", None),
    # a kernel's transpose written the current way, torch listing the arches it supports, and a shell's report
    # of another signal (a segmentation fault is the process's own crash, no layer's with confidence)
    ("        qk += tl.dot(q, tl.trans(k))", None),
    ("The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90 sm_120.", None),
    ("./run.sh: line 14:   153 Segmentation fault      (core dumped) python main.py", None),
    # another process with little of the device (the job's own memory ran out), and the extensions root a
    # healthy build names
    (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.15 GiB of which 1.25 GiB is free. Process 2101 has 512.00 MiB memory in use. Including non-PyTorch "
        "memory, this process has 77.38 GiB memory in use.",
        "accelerator-framework-oom",
    ),
    # in a container whose PID namespace is not the driver's, torch lists its own memory as "Process N"
    (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.15 GiB of which 1.25 GiB is free. Process 3301 has 77.38 GiB memory in use. Of the allocated memory "
        "75.10 GiB is allocated by PyTorch.",
        "accelerator-framework-oom",
    ),
    ("Using /root/.cache/torch_extensions/py310_cu118 as PyTorch extensions root...", None),
    # NVLS's buffers finding the device's memory full: not the fabric
    ("node7:3310:3342 [0] transport/nvls.cc:156 NCCL WARN Cuda failure 2 'out of memory'", None),
    # NCCL told of a topology file (a setting, not a failure); a dataset script a hub could not serve (no
    # credentials in question); a compiler that aborted (not a kill)
    ("NCCL INFO NCCL_TOPO_FILE set by environment to /opt/microsoft/ncv4/topo.xml", None),
    (
        "ConnectionError: Couldn't reach https://raw.githubusercontent.com/huggingface/datasets/2.3.2/datasets/"
        "audiofolder/audiofolder.py",
        None,
    ),
    ("INFO:Neuron:Compile command returned: -6", None),
    # a Triton cache entry that is simply missing (not a writer's temporary file), and NVML's other failure
    ("FileNotFoundError: [Errno 2] No such file or directory: '/root/.triton/cache/a0b1c2/_fwd_kernel.json'", None),
    ("Failed to initialize NVML: Driver/library version mismatch", None),
    # a lock on a model hub's files, not a compile cache's
    ("DEBUG:filelock:Attempting to acquire lock 140401 on /root/.cache/huggingface/hub/.locks/model.lock", None),
    # a symbol a program looks up by name itself, not a CUDA runtime's
    ("dlsym: my_plugin_init symbol not found", None),
    # a pod's storage asked for, not exceeded; CUDA's other errors (a fault, not memory running out)
    ("        ephemeral-storage: 10Gi", None),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", None),
    ("PermissionError: [Errno 13] Permission denied: '/root/.cache/huggingface/hub/models--gpt2'", None),
    ("PermissionError: [Errno 13] Permission denied: '/data/checkpoints/step_100'", None),
    ("step 5: 3 jobs Killed by the scheduler earlier, resubmitted", None),
    # a module of the user's own package, and a socket of the program's own (not the rendezvous store)
    ("ModuleNotFoundError: No module named 'utils.helpers'", None),
    ("OSError: [Errno 98] Address already in use", None),
    # a PCIe link's corrected error (the platform's, not a process's), a cache entry without its key, chroot's own tool
    ("pcieport 0000:00:03.1: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer", None),
    ("Persistent compilation cache hit for 'jit_train_step'", None),
    ("chroot: failed to run command '/bin/bash': No such file or directory", None),
    # a tunnel asked for, not refused; a TensorFlow graph's own custom op; curl outside tensorstore (a download)
    ("ssh -N -L 8888:localhost:8888 worker-0 &  # forwarding for the notebook", None),
    ("Op type not registered 'SentencepieceOp' in binary running on worker-0.", None),
    ("curl: (28) Operation timed out after 30000 milliseconds with 0 bytes received", None),
    # a C++ allocation failure inside a library (in the corpus, a library not matching its runtime); a lock
    # another process holds (not a filesystem without locks); a file named after inductor, not its cache;
    # a forwarded port with nothing listening; a launcher's ordinary output
    ("MemoryError: std::bad_alloc", None),
    (
        "OSError: Unable to open file (unable to lock file, errno = 11, error message = 'Resource temporarily "
        "unavailable')",
        None,
    ),
    ("PermissionError: [Errno 13] Permission denied: '/data/torchinductor_results.csv'", None),
    ("channel 2: open failed: connect failed: Connection refused", None),
    ("pdsh@node0: node3: step 100 loss 2.31", None),
    # an InfiniBand call refused on this host (a setting of its own, not a transfer between hosts)
    ("misc/ibvwrap.cc:280 NCCL WARN Call to ibv_modify_qp failed with error Invalid argument", None),
    # the user's own module, and a file of the user's shadowing an installed library
    ("AttributeError: module 'utils' has no attribute 'load_config'", None),
    (
        "AttributeError: partially initialized module 'torch' has no attribute 'nn' (most likely due to a "
        "circular import)",
        None,
    ),
    (
        "Unable to initialize backend 'tpu': INTERNAL: Failed to open libtpu.so: libtpu.so: cannot open shared "
        "object file: No such file or directory",
        "libtpu-open-failed",
    ),
    ("RuntimeError: DataLoader worker (pid 8102) is killed by signal: Segmentation fault.", None),
    # a read failing with EIO, or pip reporting what is already installed, names no layer
    ("cat: /sys/class/foo: Input/output error", None),
    ("Requirement already satisfied: jax[tpu]>=0.2.16 in /usr/local/lib/python3.7/dist-packages (0.2.19)", None),
    # pip's warning about packages it did not check is a symptom: a later, more specific failure wins
    (
        "ERROR: pip's dependency resolver does not currently take into account all the packages that are "
        "installed.\nRuntimeError: Unable to initialize backend 'tpu': UNAVAILABLE: No TPU Platform available.",
        "no-tpu-platform",
    ),
    # the user lookup alone (outside TorchInductor's cache directory) is not the cache
    ('  File "/usr/lib/python3.10/getpass.py", line 169, in getuser', None),
    # libtpu.so is not a torch/XLA companion library: this bare line names no layer
    ("ImportError: libtpu.so: cannot open shared object file: No such file or directory", None),
    # NCCL's CUDA-side failures have no single owner (a driver, a version or a device): no confident layer
    (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1331, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        None,
    ),
    # the remote command's own exit status, passed through by gcloud: not a transport failure
    ("ERROR: (gcloud.compute.tpus.tpu-vm.ssh) [/usr/bin/ssh] exited with return code [1].", None),
    ("ERROR: (gcloud.compute.tpus.tpu-vm.ssh) [/usr/bin/ssh] exited with return code [255].", "gcloud-ssh-failed"),
    (
        "grpc._channel._InactiveRpcError: status = StatusCode.RESOURCE_EXHAUSTED details = "
        '"Received message larger than max (8388608 vs. 4194304)"',
        None,
    ),
    ("XlaRuntimeError: RESOURCE_EXHAUSTED: Received message larger than max (8388608 vs. 4194304)", None),
    # "Resource exhausted" before a TensorFlow device name is memory, before a file path it is the disk
    ("RuntimeError: Resource exhausted: From /job:tpu_worker/replica:0/task:0:", "resource-exhausted"),
    ("Resource exhausted: /job:worker/replica:0/task:1/device:TPU:0 ran out", "resource-exhausted"),
    ("Resource exhausted: OOM when allocating tensor with shape[8,1024]", "resource-exhausted-allocate"),
    # an attribute missing from a module that is not a frontend or the runtime says nothing about the bundle
    (
        "RuntimeError: Unable to initialize backend 'tpu': module 'numpy' has no attribute 'float'",
        "jax-tpu-backend-init-failed",
    ),
    # JAX probing a GPU plugin it does not have, at INFO level on a TPU host (jax#22070): not the bundle
    (
        "INFO:2024-06-25 00:34:55,109:jax._src.xla_bridge:889: Unable to initialize backend 'rocm': module "
        "'jaxlib.xla_extension' has no attribute 'GpuAllocatorConfig'",
        None,
    ),
    # ssh adding a key it was told to trust is no failure; a second registration of the TPU platform is
    # the runtime started twice, not two copies of a library
    ("Warning: Permanently added '10.0.0.2' (ED25519) to the list of known hosts.", None),
    (
        "FAILED_PRECONDITION: TPU platform already registered for platform hardware version",
        "tpu-platform-registered-twice",
    ),
    # torch_xla's CPU default keeps its own signature, below the confident ones
    ("WARNING:root:Defaulting to PJRT_DEVICE=CPU", None),
    # a peer's connection closed in gloo or ssh is not NCCL's
    ("Connection closed by remote peer", None),
    # "No <chip> device found" stays runtime-proof: the same line follows a libtpu older than the chip
    # (maxdiffusion#471) and a host with no chip at all (jax#13260); its remedy names both
    (
        "RuntimeError: Unable to initialize backend 'tpu': UNKNOWN: TPU initialization failed: No ba16c7433 "
        "device found.",
        "tpu-device-not-found",
    ),
    # a Fabric traceback through the command it ran (not through open) is the command's failure
    ('  File "/usr/local/lib/python3.10/site-packages/fabric/connection.py", line 760, in run', None),
    # the same device busy words far from any TPU device node
    ("umount: /mnt/data: target is busy (Device or resource busy); see /dev/accel-docs", None),
    # a VFIO device that is missing, not held by someone else
    ("EAL: Cannot open /dev/vfio/12: No such file or directory", None),
    # a cache hit is not a failure, and a cache path in a message is not the cache's fault
    ("WARNING:jax._src.compiler:97: Persistent compilation cache hit for 'jit_foo' with key 'jit_foo-e7e5'", None),
    # out of memory on the device, or a GPU allocator, is the device's, not the host allocator's
    ("CUDA error: out of memory", "accelerator-framework-oom"),
    # a URL fetch refused is not the gang's coordinator, nor a blocked path (the host answered)
    ("curl: (7) Failed to connect to example.com port 443: Connection refused", None),
    # an SSH refusal stays transport even though gRPC's wording is close
    ("ssh: connect to host 10.0.0.2 port 22: Connection refused", "ssh-connection-refused"),
    # a bare status error names no layer
    ("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: something failed", None),
    ("E0000 DEADLINE_EXCEEDED: operation timed out", None),
    # a memory report line that is not XLA's, and a bare socket timeout with no store named
    ("Program hbm requirement is documented in the sizing guide", None),
    ("RuntimeError: Socket Timeout", None),
    # a user's own "unknown backend" check is not JAX's platform policy
    ("RuntimeError: Unknown backend GPU", None),
    # the word "rendezvous" in a user's own message is not torchrun's rendezvous exception
    ("ValueError: rendezvous_config must be a dict", None),
    # a healthy TPU, a user's own PREEMPTED constant, another GCS refusal
    ("health: HEALTHY", None),
    ("PREEMPTED_EXIT_CODE = 143", None),
    ("google.api_core.exceptions.TooManyRequests: 429 GET https://storage.googleapis.com/b/o: rate limit", None),
    # a user's module missing an attribute is not jax's backend
    ("AttributeError: module 'mylib' has no attribute 'get_tpu_client'", None),
    # torch.save cannot open the archive (a missing directory): not a full disk
    ("RuntimeError: [enforce fail at inline_container.cc:319] . PytorchStreamWriter failed opening archive.", None),
    # a df line with room left, and a user's own session pool
    ("/dev/root         97G   50G   47G  52% /", None),
    ("RuntimeError: no more sessions available in the pool", None),
    # a jax array's missing attribute is a user's mistake, not the pre-PJRT client's skew
    ("AttributeError: 'jaxlib.xla_extension.ArrayImpl' object has no attribute 'numpy'", None),
    # a permission refusal on another cache directory names no layer
    ("PermissionError: [Errno 13] Permission denied: '/tmp/extensions/fused'", None),
    # a socket operation refused is not a filesystem's missing support
    ("OSError: [Errno 97] Address family not supported by protocol", None),
    ("OSError: [Errno 95] Operation not supported", None),
    # another TPU initialisation failure keeps its own class
    (
        "RuntimeError: Bad StatusOr access: UNKNOWN: TPU initialization failed: Invalid "
        "--2a886c8_slice_builder_worker_addresses specified. Expected 4 worker addresses, got 1.",
        "tpu-topology-worker-addresses",
    ),
    # near misses of the fourth blind set's classes: another program's flag, another model's config,
    # a custom op, another metadata attribute, healthy runs' IPv6 fallback warning, other exits
    ("ERROR: Unknown command line flag 'learning_rate'", None),
    ("AttributeError: 'Config' object has no attribute 'model_type'", None),
    ("AttributeError: 'LlamaConfig' object has no attribute 'define_bool_state'", None),
    ("Op type not registered 'MyCustomOp' in binary running on localhost.", None),
    ("HTTP 404 for url http://metadata.google.internal/computeMetadata/v1/instance/attributes/ssh-keys", None),
    (
        "[W socket.cpp:601] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 97 - "
        "Address family not supported by protocol).",
        None,
    ),
    (
        "[W socket.cpp:697] [c10d] The client socket has failed to connect to [node-1]:29500 (errno: 111 - "
        "Connection refused).",
        None,
    ),
    (
        "[W socket.cpp:558] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - "
        "Cannot assign requested address).",
        None,
    ),
    ("socket.timeout: timed out", None),
    ("process 0 terminated with exit code 1", None),
    ("process 0 terminated with signal SIGSEGV", None),
    ("RuntimeError: DataLoader worker (pid 1234) is killed by signal: Segmentation fault.", None),
    # gloo's refused connect stays the gang's, apart from the unresolvable name
    (
        "RuntimeError: [/opt/conda/conda-bld/pytorch/work/third_party/gloo/gloo/transport/tcp/pair.cc:724] "
        "connect [127.0.1.1]:3210: Connection refused",
        "gloo-connect-failed",
    ),
    # near misses of the fifth blind set's classes: other exit codes and signals, another module's
    # deprecation frame, pip's metadata, TensorFlow's option in code, a healthy pinned pool, the
    # client's first "none" probe, a remote command's own failure, a mesh misconfigured on a real
    # slice, other programs' socket errors, a non-fatal interrupt, the runtime's halt, a full node
    (
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 65043) of "
        "binary: /home/user/bin/python",
        None,
    ),
    ("  exitcode  : -6 (pid: 1168)", None),
    ('  File "/usr/lib/python3/site-packages/jax/_src/deprecations.py", line 120, in warn', None),
    ('  File "/usr/lib/python3/site-packages/matplotlib/_api/deprecation.py", line 300, in __getattr__', None),
    ("Requirement already satisfied: jax>=0.4.1 in /usr/local/lib/python3.10/dist-packages (from flax)", None),
    ("Requires-Dist: jax>=0.4.27", None),
    # pip's refusal to install a package on this Python is a failure (the install stops), not metadata
    ("ERROR: Package 'flax' requires a different Python: 3.8.10 not in '>=3.9'", "python-too-old-for-package"),
    ("run_options = tf.RunOptions(report_tensor_allocations_upon_oom=True)", None),
    ("Pinned memory pool is created at '0x7f2a40000000' with size 268435456", None),
    ("5816 16:06:08 238 Failed none for invalid user Administrator from 10.73.78.42 port 51735 ssh2", None),
    (
        "subprocess.CalledProcessError: Command 'ssh worker-1 python train.py' returned non-zero exit status 1.",
        None,
    ),
    ("subprocess.CalledProcessError: Command 'sshfs worker:/data /mnt' returned non-zero exit status 255.", None),
    ("INFO:tensorflow:Querying Tensorflow master (grpc://10.240.1.2:8470) for TPU system metadata.", None),
    ("ValueError: Number of devices 8 must equal the product of mesh_shape (16, 1)", None),
    ("ValueError: Insufficient devices for 2D mesh: found 4, expected 8 for mesh shape (1, 8).", None),
    ("nginx: [emerg] socket() [::]:80 failed (97: Address family not supported by protocol)", None),
    ("Socket creation failed: Address family not supported by protocol", None),
    ("node-3:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>", None),
    ("E0603 10:11:12.123456   4321 error_handler.cc:100] Received Error Interrupt! fatal: false", None),
    (
        "6x2x0_SC1: *** A program or fatal error occurred, all pending programs will fail, and results may be "
        "corrupted.",
        None,
    ),
    ("0/3 nodes are available: 3 Insufficient google.com/tpu.", None),
    # near misses of the sixth blind set's classes: paramiko's and sshd's healthy negotiation and
    # login, a config line, a key's own header, other resolvers' failures (an HTTP client's, c10d's),
    # libtpu's submodules and other packages, a glibc version banner, jax's deprecation warning, the
    # OOM fast-exit flag set on purpose, other job states, other programs' heartbeats, one local
    # device (a CPU fallback), another write failure
    ("INFO:paramiko.transport:Connected (version 2.0, client OpenSSH_6.7)", None),
    (
        "DEBUG:paramiko.transport:kex algos:['curve25519-sha256@libssh.org'] server key:['ssh-rsa', 'rsa-sha2-512']",
        None,
    ),
    (
        "Dec 08 10:22:37 sshd[1185988]: Accepted publickey for user1 from 91.240.133.197 port 49334 ssh2: RSA "
        "SHA256:L8X/j69aMVbGLsKn3e17FQ3uLcOrQsbeHhjv9S5Dcko",
        None,
    ),
    ("PubkeyAcceptedAlgorithms +ssh-rsa", None),
    ("-----BEGIN OPENSSH PRIVATE KEY-----", None),
    (
        "urllib3.exceptions.NewConnectionError: <urllib3.connection.HTTPSConnection object at 0x7f>: Failed to "
        "establish a new connection: [Errno -2] Name or service not known",
        None,
    ),
    (
        "[W socket.cpp:601] [c10d] The IPv6 network addresses of (user, 53821) cannot be retrieved (gai error: -3 - "
        "Temporary failure in name resolution).",
        None,
    ),
    ("ModuleNotFoundError: No module named 'libtpu.sdk'", "frontend-module-missing"),
    ("ModuleNotFoundError: No module named 'libtpu_nightly'", None),
    ("ldd (Ubuntu GLIBC 2.35-0ubuntu3.1) 2.35", None),
    (
        "DeprecationWarning: jax.tree_map is deprecated: use jax.tree.map (jax v0.4.25 or newer) or "
        "jax.tree_util.tree_map (any JAX version).",
        None,
    ),
    ('export LIBTPU_INIT_ARGS="--xla_tpu_impure_oom_fast_exit_threshold=-1"', None),
    ("[1]+  Terminated              python train.py", None),
    ("[2]-  Done                    python eval.py", None),
    ("Killed 3 stale processes", None),
    ("Missed too many heartbeats. Disconnecting", None),
    ("ValueError: Cannot replicate across 2 replicas because only 1 local devices are available.", None),
    ("Could not append to file /tmp/log.txt", None),
    ("connect to 10.0.0.2 port 8476: Operation timed out", None),  # not SSH's port
    ("Mar  6 06:31:31 host sshd[620]: error: beginning MaxStartups throttling", None),  # throttling, no drop yet
    ("TypeError: unsupported operand type(s) for |: 'int' and 'str'", None),  # a program's own bug
    ("PJRT_DEVICE=TPU python train.py", None),
    ("INFO 07-01 12:00:00 GPU KV cache size: 99,120 tokens", None),
    ("python_requires='>=3.9'", None),
    ("Requirement already satisfied: accelerate>=0.19.0 in ./venv/lib/python3.10/site-packages", None),
    ("Environment variable HF_TOKEN expected, but not set", None),  # not the launcher's rendezvous env
    ("AttributeError: 'jaxlib._jax.ArrayImpl' object has no attribute 'numpy'", None),  # the program's own
    ("write(): fd 3 failed with Broken pipe", None),
    ("AttributeError: 'SSHClient' object has no attribute 'exec'", None),  # the program's own
    ("AttributeError: 'NoneType' object has no attribute 'private_bytes'", None),  # a missing key, not skew
    ("RuntimeError: [enforce fail at inline_container.cc:212] . file not found: archive/constants.pkl", None),
    ("DeprecationWarning: jax.tree_map is deprecated. Use jax.tree.map instead.", None),  # works in this jax
    # a segment another process already removed is not a full /dev/shm (NVIDIA/nccl#1589)
    (
        "misc/shmutils.cc:129 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl-glnlGK (size "
        "14156128), error: No such file or directory (2)",
        None,
    ),
    ("keep = torchvision.ops.nms(boxes, scores, iou_threshold=0.5)", None),
    # NCCL's network transport disagreeing on a message size, blamed on the environment (NVIDIA/nccl#969)
    (
        "transport/net_ib.cc:1038 NCCL WARN NET/IB : req 0/1 tag 0 peer 10.10.23.6<58683> collective mismatch error, "
        "local size 496640 remote size 65536",
        None,
    ),
    # code that handles the failure, quoted in a traceback, is not the failure
    ("    except asyncssh.misc.PermissionDenied:", None),
    ("    except ssh2.exceptions.Timeout:", None),
    ('  File "/app/aiter/jit/utils/file_baton.py", line 51, in try_acquire', None),
    ("Requirement already satisfied: torch>=1.10.0 in /opt/conda/lib/python3.8/site-packages (from accelerate)", None),
    ("Collecting torchvision>=0.15 (from timm)", None),  # not the framework itself
    # the framework's own family fetching its parts, or the requirements file asking: a plain install
    ("Collecting jaxlib==0.4.30 (from jax[tpu]==0.4.30)", None),
    ("Collecting libtpu-nightly==0.1.dev20230213 (from torch_xla[tpu]==2.0)", None),
    ("Collecting torch>=2.0 (from -r requirements.txt (line 1))", None),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmEx(handle)`", None),
    # ONNX Runtime asked for a provider its package does not have: the CPU package where a GPU one was meant, or
    # a host without a GPU where the warning is expected; the table does not guess which
    (
        "UserWarning: Specified provider 'CUDAExecutionProvider' is not in available provider names.Available "
        "providers: 'AzureExecutionProvider, CPUExecutionProvider'",
        None,
    ),
    # a server probing for a GPU logs torch's CPU-only words as a warning and goes on (huggingface/optimum-tpu#148:
    # TGI on a TPU host)
    (
        "2025-03-24T09:41:58.843958Z  WARN text_generation_launcher::gpu: Cannot determine GPU compute capability: "
        "AssertionError: Torch not compiled with CUDA enabled",
        None,
    ),
    ("Looking in indexes: https://pypi.org/simple, https://pypi.ngc.nvidia.com", None),
    ("TypeError: 'NoneType' object is not subscriptable", None),  # a program's own bug
    ("Resolving dependencies... (12.3s)", None),
    ("xmp.spawn(_mp_fn, args=(flags,), nprocs=8, start_method='fork')", None),
    # UCX's own warning on the same memory attribute, which a run goes on past (NVIDIA/nccl#1292), a shard
    # loader that finished, a program printing a header of its own, and NCCL's peer with no route, its prefix
    # built (left open: transport in one thread, collective as the table reads gRPC's words)
    (
        "cuda_copy_md.c:483 UCX WARN cuPointerSetAttribute(0x7f9c8d830000, SYNC_MEMOPS) error: operation not supported",
        None,
    ),
    ("Loading checkpoint shards: 100%|##########| 2/2 [00:05<00:00,  2.50s/it]", None),
    ('    print("Top 10 memory users:")  # Print header', None),
    ("node1:123:456 [0] misc/socket.cc:484 NCCL WARN Connect to 192.168.1.51<51890> failed : No route to host", None),
    # a library passing flash-attn a newer release's argument: skew in one thread, the library's own version
    # check in another (feifeibear/long-context-attention#158), so left to the rest of the log
    ("TypeError: _flash_attn_forward() got an unexpected keyword argument 'window_size_left'", None),
    # Lightning's report of the devices on every run (torchgeo/torchgeo#1198), the CUDA linker's warning for
    # an archive of other targets (NVlabs/NVBit#145), and a C function's arity error with another count
    # (a built line: only Pillow's three-band fill is the class)
    ("GPU available: True (cuda), used: True", None),
    ("TPU available: False, using: 0 TPU cores", None),
    (
        "nvlink warning : Skipping incompatible '../../core/libnvbit.a' when searching for -lnvbit (target: sm_50)",
        None,
    ),
    ("TypeError: function takes exactly 1 argument (2 given)", None),
    # pip finding no release at all, as behind a proxy it cannot reach (pypa/pip#13212) or a captive portal
    # (pypa/pip#5589): the index, not the pin; tiny-cuda-nn's free failing after the real error
    # (jonstephens85/instantngp-batch#3); a script's syntax error (a built line)
    ("ERROR: Could not find a version that satisfies the requirement ollama (from versions: none)", None),
    ("  Could not find a version that satisfies the requirement pandas (from versions: )", None),
    (
        "Could not free memory arena: D:/a/instant-ngp/instant-ngp/dependencies/tiny-cuda-nn/include\\tiny-cuda-nn/"
        "gpu_memory.h:489 cuMemAddressFree(m_base_address, m_max_size) failed with error CUDA_ERROR_INVALID_VALUE",
        None,
    ),
    ("./train.sh: line 40: syntax error near unexpected token `('", None),
    # cuBLAS refusing a bf16 GEMM on a GPU without bf16 (billwuhao/ComfyUI_ACE-Step#10): another cause, left
    # alone; a program's own undefined name; an include the compiler found (built lines)
    (
        "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmStridedBatchedEx(handle, opa, "
        "opb, (int)m, (int)n, (int)k, (void*)&falpha, a, CUDA_R_16BF, (int)lda, stridea, b, CUDA_R_16BF, (int)ldb, "
        "strideb, (void*)&fbeta, c, CUDA_R_16BF, (int)ldc, stridec, (int)num_batches, compute_type, "
        "CUBLAS_GEMM_DEFAULT_TENSOR_OP)`",
        None,
    ),
    ("NameError: name 'attn_output' is not defined", None),
    ("#include <THC/THC.h>  // kept for older torch", None),
    ("Requirement already satisfied: deepspeed>=0.9.3 in /usr/local/lib/python3.10/dist-packages", None),
    # a wheel of another package failing to build, and the graph library's extensions building fine (built lines)
    ("ERROR: Failed building wheel for torchvision", None),
    ("  Building wheel for torch-scatter (setup.py) ... done", None),
    ("Successfully built torch-scatter torch-sparse", None),
    # torch's warning of a minor CUDA mismatch it builds through, and Warp's warning before its errors (built lines)
    (
        "The detected CUDA version (11.8) has a minor version mismatch with the version that was used to compile "
        "PyTorch (11.7). Most likely this shouldn't be a problem.",
        None,
    ),
    ("Warp CUDA warning: Unable to determine CUDA driver version", None),
    # a library refusing one call under the runtime's words (pytorch/pytorch#132928, cuSPARSELt's fp32 on that
    # GPU: no layer of its own), and a read that got what it expected (built lines)
    (
        "RuntimeError: CUDA error: operation not supported when calling `cusparseLtMatmulDescriptorInit(&handle, "
        "&matmul)`",
        None,
    ),
    ("Read 4096 bytes, expected 4096", None),
]


@pytest.mark.parametrize(("line", "sig_id"), NOT_THE_CLASS)
def test_a_near_miss_is_not_taken_for_the_class(line, sig_id):
    finding = diag.diagnose(line)
    got = finding.signature_id if finding is not None and finding.priority >= diag.CONFIDENT_PRIORITY else None
    assert got == sig_id, finding


@pytest.mark.parametrize(
    ("line", "sig_id"),
    [
        ("2020-07-11 06:43:09 10.164.0.3 [2] Killed", "process-killed"),
        ("(pid=3030, ip=10.202.15.237) Killed", "process-killed"),
        ("[rank0]: Killed", "process-killed"),
        ("(BaseWorkerMixin pid=7893) Write failed: Broken pipe", "ssh-connection-dropped"),
        ("[rank1]: RuntimeError: something failed", "python-exception"),
    ],
)
def test_a_signature_anchored_at_the_start_holds_behind_a_launchers_prefix(line, sig_id):
    finding = diag.diagnose(line)
    assert finding is not None and finding.signature_id == sig_id, finding
    assert finding.line == line  # the finding keeps the line as logged


def test_a_line_without_a_launcher_prefix_is_matched_as_is():
    assert diag.match_line("(1) the step was slow, nothing Killed") is None
    assert diag.match_line("Killed") is not None


HEALTHY_RUN = """\
Warning: Permanently added '10.0.0.5' (ED25519) to the list of known hosts.
WARNING:root:libtpu.so and TPU device found. Setting PJRT_DEVICE=TPU.
I0101 00:00:01.000000 1234 client.cc:101] Connected to distributed JAX controller
[rank0]: NCCL INFO Bootstrap : Using eth0:10.0.0.5<0>
DEBUG:jax._src.compiler:Persistent compilation cache hit for 'jit_train_step'
step 100 loss 2.31 tokens/s 12000 hbm 14.2G/16.0G
 100%|##########| 1063/1063 [02:17<00:00,  7.73it/s]
Saving checkpoint to /data/ckpt/step_100 (120G free)
2020-07-11 06:43:09 10.164.0.3 [2] Epoch 3 train done, killed 0 stragglers
"""


def test_a_healthy_run_names_no_layer():
    assert [f.signature_id for f in diag.classify(HEALTHY_RUN) if f.priority >= diag.CONFIDENT_PRIORITY] == []
    assert not diag.verdict(HEALTHY_RUN).known


def test_every_signature_has_a_source_a_remedy_a_known_layer_and_a_unique_id():
    ids = [s.id for s in diag.SIGNATURES]
    assert len(ids) == len(set(ids))
    assert 30 <= len(ids) <= 250  # a bound, not a target: each signature is a class of failure
    for s in diag.SIGNATURES:
        assert s.layer in diag.LAYERS, s.id
        assert re.match(r"https://\S+$", s.source), s.id
        assert s.remedy.strip() and "\n" not in s.remedy, s.id
        assert 0 < s.priority < 100, s.id
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", s.id), s.id


def test_every_signature_is_the_best_match_for_its_own_real_example():
    for s in diag.SIGNATURES:
        assert diag.match_line(s.example) is s, (s.id, diag.match_line(s.example))


def test_every_layer_has_signatures_and_a_default_remedy():
    for layer in diag.LAYERS:
        assert any(s.layer == layer for s in diag.SIGNATURES), layer
        assert diag.layer_remedy(layer)
    with pytest.raises(ValueError):
        diag.layer_remedy("nope")


def test_the_committed_troubleshooting_doc_is_generated_from_the_table():
    committed = (REPO / "docs" / "troubleshooting.md").read_text()
    parts = load_parts()
    assert committed == diag.render_troubleshooting_markdown(corpus_markdown(parts["tune"] or [], parts["held"])), (
        "docs/troubleshooting.md is stale (table or corpus numbers): regenerate it with "
        ".venv/bin/python bench/diagnose.py --write-doc"
    )


def test_the_troubleshooting_doc_starts_with_the_debugging_order_and_lists_every_signature():
    doc = diag.render_troubleshooting_markdown()
    assert doc.startswith("# Troubleshooting by owning layer\n")
    assert doc.index("## Debugging order") < doc.index("## transport")
    for s in diag.SIGNATURES:
        assert f"`{s.id}`" in doc


# ---------------------------------------------------------------------- CLI


def run_cli(*args, input=None):
    return CliRunner().invoke(main, ["diagnose", *args], input=input)


def test_cli_prints_layer_line_remedy_and_source_for_a_log_file():
    path = DATA / "device-ownership-pid-then-cpu-fallback.log"
    result = run_cli(str(path))
    assert result.exit_code == 0, result.output
    assert "layer:     device-ownership" in result.output
    assert "line 12:" in result.output  # the file's header lines count as lines
    assert "pid 176028" in result.output
    assert "remedy:" in result.output and "source:    https://github.com/jax-ml/jax/issues/22070" in result.output


def test_cli_json_has_layer_signature_line_and_remedy():
    path = DATA / "cache-torch-xla-never-reads.log"
    result = run_cli(str(path), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["layer"] == "cache"
    assert doc["signature"].startswith("W torch_xla/csrc/runtime/pjrt_computation_client.cc:680]")
    assert doc["remedy"] and doc["id"] == "xla-deserialize-unimplemented"
    assert doc["line"] == 3 and doc["source"].startswith("https://")
    assert "matches" not in doc


def test_cli_reads_stdin_with_a_dash_and_lists_every_match_with_all():
    _, text = read_excerpt(DATA / "device-ownership-pid-then-cpu-fallback.log")
    result = run_cli("-", "--json", "--all", input=text)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["layer"] == "device-ownership" and doc["line"] == 9
    assert [(m["line"], m["layer"]) for m in doc["matches"]] == [(9, "device-ownership"), (10, "runtime-proof")]
    plain = run_cli("--all", input=text)
    assert plain.exit_code == 0
    assert "*      9  device-ownership" in plain.output and "      10  runtime-proof" in plain.output


def test_cli_reports_no_known_signature_and_still_exits_zero():
    result = run_cli("-", input="step 1 ok\nstep 2 ok\n")
    assert result.exit_code == 0
    assert "no known signature" in result.output
    doc = json.loads(run_cli("--json", input="fine\n").output)
    assert doc["layer"] == "unknown" and doc["signature"] is None and doc["candidates"] == []


def test_cli_names_an_unreadable_file_and_exits_2(tmp_path):
    missing = tmp_path / "nope.log"
    result = run_cli(str(missing))
    assert result.exit_code == 2
    assert f"cannot read log {missing}" in result.output
    empty = run_cli(str(tmp_path))  # a directory is read as a run: this one has no worker logs
    assert empty.exit_code == 2 and "no gathered worker logs" in empty.output


def test_cli_tolerates_undecodable_bytes(tmp_path):
    log = tmp_path / "binary.log"
    log.write_bytes(b"\xff\xfe garbage\nOut of memory: Killed process 4242 (python3)\n")
    result = run_cli(str(log), "--json")
    assert result.exit_code == 0
    assert json.loads(result.output)["layer"] == "memory"


# ------------------------------------------------------------- real-log corpus


def test_the_hand_collected_corpus_has_at_least_150_sourced_entries_of_real_layers():
    entries = load_corpus()
    assert len(entries) >= 150
    for e in entries:
        assert re.match(r"https://\S+$", e.source), e.id
        assert e.layer in diag.LAYERS and e.layer not in ("other",), e.id


HELD_ENTRY = """\
entries:
- id: {id}
  source: https://github.com/example/repo/issues/1
  layer: {layer}
  note: a note
  excerpt: |
    {line}
"""


def write_held(path: Path, *entries: tuple[str, str, str]) -> Path:
    path.write_text("entries:\n" + "".join(HELD_ENTRY.format(id=i, layer=la, line=li)[9:] for i, la, li in entries))
    return path


def test_the_split_is_by_file_and_a_missing_held_back_file_is_none(tmp_path):
    parts = load_parts(held=tmp_path / "heldback.yaml")
    assert parts["held"] is None and parts["tune"] == load_tune()
    held = write_held(tmp_path / "h.yaml", ("h-1", "disk", "OSError: [Errno 28] No space left on device"))
    parts = load_parts(held=held)
    assert [e.id for e in parts["held"] or []] == ["h-1"] and parts["tune"] == load_tune()


def test_a_held_back_file_may_be_a_bare_list_of_entries(tmp_path):
    held = write_held(tmp_path / "h.yaml", ("h-1", "other", "RuntimeError: loss is nan"))
    held.write_text(held.read_text().removeprefix("entries:\n"))
    assert [(e.id, e.layer) for e in load_parts(held=held)["held"] or []] == [("h-1", "other")]


# How many entries each blind set folded into tune holds, in the order of TUNE_PATHS.
BLIND_SIZES = {
    f"blind-{n}.yaml": size
    for n, size in enumerate(
        (77, 75, 71, 66, 61, 57, 40, 75, 54, 36, 38, 45, 39, 37, 37)  # sets 1-15
        + (22, 15, 31, 26, 20, 14, 24, 12, 9, 20, 15, 14, 21, 12, 35)  # sets 16-30
        + (19, 27, 23, 25, 28, 41, 25, 32, 22, 42, 24, 9, 26, 34),  # sets 31-
        start=1,
    )
}


def test_the_once_held_scores_file_is_checked_naming_file_line_and_field(tmp_path):
    good = "sets:\n- file: blind-1.yaml\n  held:\n    disk: [3, 2, 1, 0]\n"
    (tmp_path / "s.yaml").write_text(good)
    scores, asides = load_scores(tmp_path / "s.yaml")
    assert [(p.name, h) for p, h in scores] == [("blind-1.yaml", {"disk": (3, 2, 1, 0)})] and asides == {}
    aside = "  set_aside:\n  - file: x.yaml\n    why: w\n    score: [1, true, 0, 0]\n"
    for text, where in [
        (good.replace("[3, 2, 1, 0]", "[3, 2, 2, 0]"), r"s\.yaml:4 sets\[0\]\.held\.disk: expected"),
        (good.replace("blind-1", "blind-2"), r"s\.yaml:2 sets\[0\]: expected file blind-1\.yaml"),
        (good + aside, r"s\.yaml:8 sets\[0\]\.set_aside\[0\]\.score: expected"),
        ("- just a list\n", r"s\.yaml:1 \(top level\): expected a mapping with a list `sets`"),
        ("sets: [unclosed\n", r"s\.yaml:\d+"),
    ]:
        (tmp_path / "s.yaml").write_text(text)
        with pytest.raises(ConfigError, match=where):
            load_scores(tmp_path / "s.yaml")


def test_the_tune_part_is_the_hand_collected_file_then_the_blind_sets_in_order():
    tune = load_tune()
    files = [e.file for e in tune]
    order = [p.name for p in TUNE_PATHS]
    assert order == [CORPUS_PATH.name, *BLIND_SIZES]
    assert files == sorted(files, key=order.index)
    assert {name: files.count(name) for name in BLIND_SIZES} == BLIND_SIZES
    assert tune[: files.count(CORPUS_PATH.name)] == load_corpus()
    assert len({e.id for e in tune}) == len(tune)


def test_an_id_in_two_tune_files_is_refused_naming_both(tmp_path):
    same = load_corpus(BLIND_PATHS[0])[0].id
    extra = write_held(tmp_path / "extra.yaml", (same, "disk", "OSError: [Errno 28] No space left on device"))
    with pytest.raises(CorpusError, match=rf"extra\.yaml: {same}: the id is also in .*blind-1\.yaml"):
        load_tune([CORPUS_PATH, BLIND_PATHS[0], extra])


def test_an_id_in_both_files_is_refused_naming_the_file(tmp_path):
    same = load_corpus()[0].id
    held = write_held(tmp_path / "h.yaml", (same, "disk", "OSError: [Errno 28] No space left on device"))
    with pytest.raises(CorpusError, match=rf"h\.yaml: {same}: the id is also in"):
        load_parts(held=held)


def test_a_malformed_held_back_file_names_file_and_line(tmp_path):
    bad = tmp_path / "h.yaml"
    bad.write_text("entries:\n- id: [unclosed\n")
    with pytest.raises(CorpusError, match=r"h\.yaml:\d+: not valid YAML"):
        load_parts(held=bad)


def test_an_other_entry_is_right_when_the_verdict_is_unknown_and_wrong_when_a_layer_is_named():
    def entry(layer: str, text: str) -> Entry:
        return Entry(id="x", source="https://example.org/1", layer=layer, note="n", excerpt=text)

    part = score(
        [
            entry("other", "RuntimeError: something unrelated broke\n"),
            entry("other", "OSError: [Errno 28] No space left on device\n"),
            entry("disk", "RuntimeError: something unrelated broke\n"),
        ],
        "held",
    )
    assert [o.result for o in part.outcomes] == ["right", "wrong", "unknown"]
    assert (part.per_layer["other"].right, part.per_layer["other"].wrong) == (1, 1)


def held_back_score() -> Score:
    if not HELDBACK_PATH.exists():
        pytest.skip(
            f"{HELDBACK_PATH.name} is not in this checkout (the next blind set is added once collected);"
            " the full bench run reports it missing"
        )
    held = load_parts()["held"]
    assert held is not None
    return score(held, "held")


@pytest.mark.xfail(
    strict=False,
    reason="the forty-fourth blind set, held back once, drew 2 wrong answers of 34 (5.9%; the forty-third 2 of 26,"
    " 7.7%, the forty-second none of 9, the forty-first 1 of 24, 4.2%, the fortieth 1 of 42, 2.4%); see"
    " docs/troubleshooting.md",
)
def test_held_back_corpus_names_a_wrong_layer_rarely():
    part = held_back_score()
    assert part.total.wrong_rate <= MAX_WRONG_RATE, part.total


@pytest.mark.xfail(
    strict=False,
    reason="no blind set has reached the 90% bar the one time it was held back (the best, the twenty-ninth:"
    " 83.3% of 12 entries; the thirtieth 60.0% of 35, the thirty-first 57.9% of 19, the thirty-second 70.4% of"
    " 27, the thirty-third 56.5% of 23, the thirty-fourth 64.0% of 25, the thirty-fifth 39.3% of 28, the"
    " thirty-sixth 75.6% of 41, the thirty-seventh 68.0% of 25, the thirty-eighth 81.2% of 32, the thirty-ninth"
    " 81.8% of 22, the fortieth 69.0% of 42, the forty-first"
    " 70.8% of 24, the forty-second 66.7% of 9, the forty-third 61.5% of 26,"
    " the forty-fourth 64.7% of 34); see docs/troubleshooting.md",
)
def test_held_back_corpus_reaches_the_accuracy_bar():
    part = held_back_score()
    assert part.total.accuracy >= MIN_HELD_ACCURACY, part.total


# Each blind set's floor in tune (least accuracy, most wrong answers), measured when the table was
# last extended; its once-held figures are in tests/data/diagnosis/held-scores.yaml.
BLIND_FLOORS = {
    "blind-1.yaml": (0.97, 1),
    "blind-2.yaml": (0.86, 4),
    "blind-3.yaml": (0.94, 1),
    "blind-4.yaml": (0.84, 0),
    "blind-5.yaml": (0.91, 1),
    "blind-6.yaml": (0.85, 0),
    "blind-7.yaml": (0.85, 4),
    "blind-8.yaml": (0.85, 1),
    "blind-9.yaml": (0.90, 2),
    "blind-10.yaml": (0.80, 2),
    "blind-11.yaml": (0.81, 2),
    "blind-12.yaml": (0.68, 3),
    "blind-13.yaml": (0.84, 0),
    "blind-14.yaml": (0.81, 2),
    "blind-15.yaml": (0.86, 1),
    "blind-16.yaml": (0.95, 0),
    "blind-17.yaml": (0.73, 2),
    "blind-18.yaml": (0.77, 2),
    "blind-19.yaml": (0.84, 1),
    "blind-20.yaml": (0.55, 1),
    "blind-21.yaml": (0.92, 0),
    "blind-22.yaml": (0.87, 0),
    "blind-23.yaml": (0.75, 1),
    "blind-24.yaml": (0.88, 1),
    "blind-25.yaml": (0.90, 2),
    "blind-26.yaml": (0.80, 0),
    "blind-27.yaml": (0.78, 0),
    "blind-28.yaml": (0.90, 0),
    "blind-29.yaml": (0.90, 1),
    "blind-30.yaml": (0.90, 1),
    "blind-31.yaml": (0.89, 0),
    "blind-32.yaml": (0.92, 0),
    "blind-33.yaml": (0.73, 0),
    "blind-34.yaml": (0.88, 1),
    "blind-35.yaml": (0.89, 0),
    "blind-36.yaml": (0.95, 1),
    "blind-37.yaml": (0.84, 3),
    "blind-38.yaml": (0.90, 0),
    "blind-39.yaml": (1.00, 0),
    "blind-40.yaml": (0.83, 1),
    "blind-41.yaml": (0.87, 1),
    "blind-42.yaml": (1.00, 0),
    "blind-43.yaml": (0.76, 1),
    "blind-44.yaml": (0.91, 0),
}


def test_tune_accuracy_does_not_regress():
    tune = score(load_tune(), "tune")
    # The figures measured when the table was last extended (docs/troubleshooting.md).
    assert tune.total.accuracy >= 0.880 and tune.total.wrong <= 44, tune.total
    assert list(BLIND_FLOORS) == [path.name for path in BLIND_PATHS]  # every blind set has its floor
    for path in BLIND_PATHS:
        accuracy, wrong = BLIND_FLOORS[path.name]
        blind = score(load_corpus(path), "tune")
        assert blind.total.accuracy >= accuracy and blind.total.wrong <= wrong, (path.name, blind.total)
    assert tune.total.wrong_rate <= MAX_WRONG_RATE, tune.total


def run_bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "bench" / "diagnose.py"), *args], capture_output=True, text=True, timeout=120
    )


def test_the_bench_without_the_held_back_file_says_so_and_fails_the_full_run(tmp_path):
    missing = tmp_path / "heldback.yaml"
    res = run_bench("--heldback", str(missing))
    assert res.returncode == 1, res.stderr
    assert "tune (" in res.stdout and "held back (" not in res.stdout
    assert "is missing: tune figures only" in res.stdout
    assert "FAIL: the held-back set is missing" in res.stderr
    smoke = run_bench("--smoke", "--heldback", str(missing))
    assert smoke.returncode == 0, smoke.stderr
    assert smoke.stdout.startswith("tune: ") and "held: held-back set" in smoke.stdout
    doc = json.loads(run_bench("--json", "--heldback", str(missing)).stdout)
    assert doc["ok"] is False and doc["held"] is None and doc["tune"]["entries"] >= 150
    per_file = doc["tune"]["per_file"]
    assert set(per_file) == {CORPUS_PATH.name, *BLIND_SIZES}
    assert {name: per_file[name]["entries"] for name in BLIND_SIZES} == BLIND_SIZES
    assert any("held-back set is missing" in f for f in doc["failures"])


def test_the_bench_with_a_held_back_file_prints_both_tables_and_applies_the_bar(tmp_path):
    good = write_held(tmp_path / "good.yaml", ("h-1", "disk", "OSError: [Errno 28] No space left on device"))
    res = run_bench("--heldback", str(good))
    assert "tune (" in res.stdout and "held back (1 entries)" in res.stdout
    assert res.returncode == 0, res.stderr
    bad = write_held(tmp_path / "bad.yaml", ("h-2", "memory", "OSError: [Errno 28] No space left on device"))
    res = run_bench("--heldback", str(bad), "--json")
    doc = json.loads(res.stdout)
    assert res.returncode == 1 and doc["ok"] is False and doc["held"]["wrong"] == 1
    assert any(f.startswith("held-back accuracy 0.0%") for f in doc["failures"])


def test_the_doc_without_the_held_back_file_shows_tune_figures_and_defers_the_held_ones():
    text = corpus_markdown(load_tune(), None)
    assert "### Tune part (" in text and "### Held-back part (" not in text
    flat = " ".join(text.split())
    assert "the held-back figures are filled in by the full run" in flat
    assert "collected by the same hand that wrote the signatures" in flat
    assert "by someone who had not seen the signature table" in flat
    assert "never read entry by entry while tuning the table, only its totals" in flat
    assert "scored once as the held-back part, at 79.2% right and 3.9% wrong" in flat
    assert "scored once as the held-back part, at 64.0% right and 5.3% wrong" in flat
    assert "when it was the held-back part (77 entries" in text and "when it was the held-back part (75 entries" in text
    assert all(f"- `{f}`: " in text for f in ("corpus.yaml", "blind-1.yaml", "blind-2.yaml"))  # tune figures per file
    # each blind set's entries from other stacks, set aside before scoring, are named beside it
    assert "into `tests/data/diagnosis/blind-3-offstack.yaml`: scored once beside it (3/9 right," in text
    assert "into `tests/data/diagnosis/blind-6-offstack.yaml`: scored once beside it (0/2 right," in text
    assert "into `tests/data/diagnosis/blind-8-cited.yaml`: scored once beside it (2/2 right," in text
    assert "Its 1 entry from another stack (a GPU-only memory failure) was set aside" in flat


# ------------------------------------------------------ unknown with candidates


def test_a_generic_crash_answers_unknown_with_candidates_not_a_layer():
    text = (
        '  File "/home/ops/paramiko_helpers.py", line 39, in run\n'  # the user code, not paramiko
        "RuntimeError: something went wrong\n"
    )
    v = diag.verdict(text)
    assert v.layer == "unknown" and not v.known
    assert v.finding is not None and v.finding.signature_id == "python-exception"
    assert v.candidates[0] == "transport"
    assert diag.diagnose(text).layer == "other"  # the raw winner is unchanged for existing callers


def test_an_unrecognised_log_answers_unknown_with_hint_candidates(monkeypatch):
    # the hints alone (whether the corpus's words would also name it is test_diagnose_words.py's)
    monkeypatch.setattr(diagnose_words, "model", lambda: None)
    v = diag.verdict("step 9 loss nan\nthe barrier between hosts was slow\nrendezvous took 900s\n")
    assert (v.layer, v.finding) == ("unknown", None)
    assert v.candidates == ("collective",)
    assert diag.verdict("all good\n").candidates == ()


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("Traceback (most recent call last):\nMemoryError: std::bad_alloc\n", "memory"),
        ("RuntimeError: world_size mismatch while joining c10d\n", "collective"),
        ("ImportError: DLL load failed: the library is incompatible\n", "bundle-skew"),
        ("OSError: cannot map /dev/shm/torch_123\n", "disk"),
        ("RuntimeError: lost the worker after a preemption notice\n", "hardware"),
    ],
)
def test_a_log_without_a_known_message_ranks_the_layer_its_words_point_to_first(text, first):
    v = diag.verdict(text)
    assert v.confidence != "high" and v.candidates[:1] == (first,), v
    assert v.layer in ("unknown", first)  # named only when the corpus's words agree (test_diagnose_words.py)


def test_several_weak_signals_for_one_layer_answer_it_with_low_confidence():
    text = (
        "E1120 12:00:01 client.cc:12] DEADLINE_EXCEEDED: the operation timed out\n"
        "the coordinator saw no heartbeat from task 3\n"
        "waiting at the barrier for 8 tasks\n"
    )
    v = diag.verdict(text)
    assert (v.layer, v.confidence, v.known) == ("collective", "low", True), v
    assert v.finding is not None and v.finding.signature_id == "status-error"
    assert v.remedy == diag.layer_remedy("collective")  # the layer's default: no known message says more
    assert (
        v.to_dict()["confidence"] == "low"
        and diag.verdict("OSError: [Errno 28] No space left on device\n").confidence == "high"
    )


@pytest.mark.parametrize(
    "text",
    [
        # the same words in a healthy log: nothing failed, so nothing is named
        "INFO connected to the coordinator\nINFO heartbeat ok\nINFO barrier passed\n",
        # one word repeated counts once
        "RuntimeError: barrier failed\nbarrier failed\nbarrier failed\n",
        # a user's own bug in a distributed program
        "Traceback (most recent call last):\nIndexError: list index out of range (rank 3 of world_size 8)\n",
    ],
)
def test_weak_signals_that_do_not_agree_enough_stay_unknown(text):
    v = diag.verdict(text)
    assert (v.layer, v.confidence) == ("unknown", "none"), v


@pytest.mark.parametrize(
    "text",
    [
        # two weak signals are not enough
        "RuntimeError: world_size mismatch while joining c10d\n",
        # a rival layer with more than one signal of its own
        "RuntimeError: lost the coordinator, barrier and heartbeat stopped\n"
        "ssh to the worker: connection reset by peer\n",
    ],
)
def test_weak_signals_that_do_not_agree_enough_name_no_layer_on_their_own(text):
    v = diag.verdict(text)
    assert v.basis != "signals" and v.confidence != "high", v  # only the corpus's words may still name one


def test_cli_says_when_the_layer_rests_on_weak_signals_only():
    result = run_cli(
        "-", input="XlaRuntimeError: DEADLINE_EXCEEDED: timed out\ncoordinator heartbeat lost\nbarrier not reached\n"
    )
    assert result.exit_code == 0, result.output
    assert "layer:     collective (low confidence" in result.output


def test_a_confident_line_answers_its_layer():
    v = diag.verdict("OSError: [Errno 28] No space left on device\n")
    assert (v.layer, v.candidates) == ("disk", ())
    assert v.to_dict()["layer"] == "disk" and v.to_dict()["id"] == "disk-full"


def test_cli_prints_unknown_and_the_closest_layers():
    result = run_cli(
        "-", input="Traceback (most recent call last):\nRuntimeError: lost the worker after a preemption\n"
    )
    assert result.exit_code == 0
    assert "layer:     unknown" in result.output and "closest:   hardware" in result.output


# ------------------------------------------------------------ orch diagnose RUN

OOM = (
    "step 3 loss 2.1\n"
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to "
    "allocate 15.65G. That was not possible. There are 11.08G free.; (0x0x0_HBM0)\n"
)
HEARTBEATS = (
    "step 3 loss 2.1\n"
    "absl::Status: UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):\n"
    "F0926 17:26:32.075587  157988 client.h:77] Terminating process because the JAX distributed service detected "
    "fatal errors. This most likely indicates that another task died; see the other task logs for more details.\n"
)


def make_run(root: Path, workers: dict[str, dict]) -> Path:
    """A gathered run directory as `orch gather` leaves it: run.json and <worker>/{output.log,exit.json}."""
    run = root / "r-20260101-000000-abcd"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"run_id": run.name, "workers": list(workers), "state": "failed"}))
    for name, w in workers.items():
        d = run / name
        d.mkdir()
        if "log" in w:
            (d / "output.log").write_text(w["log"])
        if "exit" in w:
            (d / "exit.json").write_text(json.dumps({"schema_version": 1, **w["exit"]}))
    return run


def gang_failure(tmp_path: Path) -> Path:
    return make_run(
        tmp_path,
        {
            "worker-0": {
                "log": HEARTBEATS,
                "exit": {"exit_code": None, "signal": 6, "reason": "killed by signal 6 (SIGABRT)", "ended_at": 105.0},
            },
            "worker-1": {
                "log": OOM,
                "exit": {"exit_code": 1, "signal": None, "reason": "exit code 1", "ended_at": 100.0},
            },
            "worker-2": {
                "log": "step 3 loss 2.1\n",
                "exit": {
                    "exit_code": None,
                    "signal": 15,
                    "reason": "stopped by orch (gang)",
                    "stopped": True,
                    "ended_at": 106.0,
                },
            },
            "worker-3": {"log": "step 3 loss 2.1\ndone\n", "exit": {"exit_code": 0, "signal": None, "ended_at": 99.0}},
            "worker-4": {},
        },
    )


def test_a_run_names_the_first_failure_and_the_workers_that_only_followed(tmp_path):
    run = diagnose_run(gang_failure(tmp_path))
    assert (run.first_failure, run.layer) == ("worker-1", "memory")
    assert run.finding is not None and run.finding.signature_id == "device-allocation-failed"
    assert run.followers == ["worker-0", "worker-2"]
    roles = {w.worker: (w.role, w.because_of) for w in run.workers}
    assert roles == {
        "worker-0": ("follower", "worker-1"),
        "worker-1": ("first-failure", None),
        "worker-2": ("follower", "worker-1"),
        "worker-3": ("ok", None),
        "worker-4": ("missing", None),
    }
    assert run.to_dict()["failed"] == ["worker-0", "worker-1", "worker-2"]


def test_when_every_failed_worker_only_followed_the_earliest_is_named(tmp_path):
    run_dir = make_run(
        tmp_path,
        {
            "a": {"log": HEARTBEATS, "exit": {"exit_code": 134, "signal": None, "ended_at": 7.0}},
            "b": {"log": HEARTBEATS, "exit": {"exit_code": 134, "signal": None, "ended_at": 5.0}},
        },
    )
    run = diagnose_run(run_dir)
    assert (run.first_failure, run.layer, run.followers) == ("b", "collective", ["a"])


def test_a_run_where_nothing_failed_has_no_first_failure(tmp_path):
    run = diagnose_run(make_run(tmp_path, {"w": {"log": "ok\n", "exit": {"exit_code": 0, "ended_at": 1.0}}}))
    assert (run.first_failure, run.layer, run.failed) == (None, None, [])


def test_cli_diagnoses_a_gathered_run_directory(tmp_path):
    run_dir = gang_failure(tmp_path)
    result = run_cli(str(run_dir))
    assert result.exit_code == 0, result.output
    assert "failed:    worker-1 first; layer memory" in result.output
    assert "followed:  worker-0, worker-2 (failed because worker-1 did)" in result.output
    assert "worker-4       missing" in result.output
    doc = json.loads(run_cli(str(run_dir), "--json").output)
    assert (doc["first_failure"], doc["layer"], doc["followers"]) == ("worker-1", "memory", ["worker-0", "worker-2"])


def test_cli_finds_a_run_by_id_in_the_runs_root(tmp_path, monkeypatch):
    run_dir = gang_failure(tmp_path)
    (run_dir / "plan.json").write_text("{}")
    monkeypatch.setenv("ORCH_RUNS_DIR", str(tmp_path))
    doc = json.loads(run_cli(run_dir.name, "--json").output)
    assert doc["run_id"] == run_dir.name and doc["first_failure"] == "worker-1"
