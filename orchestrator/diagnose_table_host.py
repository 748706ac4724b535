"""Signatures of the worker host's storage and hardware, and of generic crashes: the disk, hardware and other layers.

Data only: see orchestrator/diagnose_table.py for how a signature is written and sourced.
"""

from __future__ import annotations

from orchestrator.diagnose_sig import Signature, sig

HOST_SIGNATURES: tuple[Signature, ...] = (
    # --------------------------------------------------------------------- disk
    sig(
        "disk-full",
        "disk",
        85,
        r"[Nn]o space left on device|\bENOSPC\b|Not enough free space to write \d+ bytes"
        # TensorFlow/TSL file writes map ENOSPC to RESOURCE_EXHAUSTED naming the file being written
        r"|Resource exha\w*: ?(?!/job:)\.{0,2}/[\w.-]+/\S+|ResourceExhaustedError: \S+\.tempstate\d+"
        # huggingface_hub's check before a model download (AI-Hypercomputer/tpu-recipes#148)
        r"|Not enough free disk space to download the file",
        "A filesystem is full: the message names the path; free space there (old checkpoints, caches, "
        "docker images, /dev/shm) or move it to a larger disk.",
        "https://github.com/hpcaitech/Open-Sora/issues/663",
        "OSError: [Errno 28] No space left on device",
    ),
    sig(
        "disk-quota-exceeded",
        "disk",
        85,
        r"[Dd]isk quota exceeded|\bEDQUOT\b"
        # the kubelet evicting a pod over its ephemeral-storage limit, or a node short of it
        # (substratusai/runbooks#92: a fine-tuned model saved to the container's own disk)
        r"|Pod ephemeral local storage usage exceeds the total limit of containers"
        r"|Container \S+ exceeded its local ephemeral storage limit|The node was low on resource: ephemeral-storage",
        "The user's or project's quota on that filesystem is used up (even with free space on the disk): "
        "clean up or write to a filesystem with quota left.",
        "https://github.com/KennthShang/HostG/issues/7",
        "OSError: [Errno 122] Disk quota exceeded: 'out/intermediate.ntw'",
    ),
    sig(
        "filesystem-lock-unsupported",
        "disk",
        70,
        # a mounted filesystem (NFS without its lock daemon, some parallel filesystems) that does not
        # implement the lock call a checkpoint writer takes: TensorStore's (google/tensorstore#183) and
        # HDF5's wording (errno 37 ENOLCK, 38 ENOSYS)
        r"Failed to acquire lock on file: .*\[OS error: (Function not implemented|No locks available)\]"
        r"|unable to lock file, errno = 3[78]\b|\[Errno 37\] No locks available",
        "The filesystem the checkpoint or file goes to does not support file locks: write to a local "
        "disk or a bucket, enable locking on the mount (NFS's lockd), or turn the writer's locking off.",
        "https://github.com/google/tensorstore/issues/183",
        'ValueError: FAILED_PRECONDITION: Error writing local file "/home/<account>/laurel/dat/runs/test/working_'
        'directories/1/actor_params.orbax-checkpoint-tmp-1695894959581296/_sharding": Failed to acquire lock on '
        "file: /home/<account>/laurel/dat/runs/test/working_directories/1/actor_params.orbax-checkpoint-tmp-"
        "1695894959581296/_sharding.__lock [OS error: Function not implemented]",
    ),
    sig(
        "shm-too-small",
        "disk",
        70,
        r"This might be caused by insufficient shared memory \(shm\)"
        r"|It is possible that dataloader's workers are out of shared memory"
        # older torch names only the signal: a worker's write to a full /dev/shm faults (pytorch/pytorch#5040)
        r"|DataLoader worker \(pid(\(s\))? [^)]*\) is killed by signal: Bus error"
        # the end of that hint when a console wraps it, and torch's own shared-memory file (/dev/shm/torch_*)
        r"|Please try to raise your shared memory limit|unable to write to file </torch_[\d_]+>"
        # NCCL's own segments for processes on one host (hiyouga/EasyR1#228, NVIDIA/nccl#1683: a container's
        # /dev/shm too small); attaching to a segment another process removed is not this class
        r"|Error while creating shared memory segment /dev/shm/nccl-|failed to extend /dev/shm/nccl-\S+ to \d+ bytes"
        # Ray's object store refusing a /dev/shm smaller than itself at start-up (ray-project/ray#16308
        # quotes the check; alumae/kiirkirjutaja#5: a container's /dev/shm)
        r"|The configured object store size \([\d.]+ ?GB\) exceeds /dev/shm size",
        "/dev/shm is too small for the data-loading workers or for NCCL's segments between processes on one "
        "host: enlarge it (a container's --shm-size) or lower num_workers.",
        "https://github.com/microsoft/RepPoints/issues/18",
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
    ),
    sig(
        "shm-not-writable",
        "disk",
        # /dev/shm there but not writable by the job's user: NCCL cannot create its segments between the
        # processes on one host and reports only an "unhandled system error" unless NCCL_DEBUG shows why
        # (pytorch/pytorch#37004: fixed by making /dev/shm writable again)
        75,
        r"\bCall to shm_open failed : Permission denied|\bshm_open\b[^\n]*: Permission denied"
        # newer NCCL names the errno on the segment's own line (misc/shmutils.cc); weighted above shm-too-small,
        # whose pattern that line also matches
        r"|Error while creating shared memory segment \S+ \(size \d+\), error: Permission denied\b",
        "/dev/shm is not writable by the job's user, so NCCL (or a data loader) cannot create its shared "
        "segments: restore its mode (chmod 1777 /dev/shm) or mount a fresh tmpfs there in the container, "
        "then relaunch.",
        "https://github.com/pytorch/pytorch/issues/37004",
        "node08:27106:27302 [0] include/shm.h:27 NCCL WARN Call to shm_open failed : Permission denied",
    ),
    sig(
        "ray-object-store-on-tmp",
        "disk",
        # Ray's warning that its object store went to /tmp because /dev/shm is too small: the run goes on,
        # slowly; low, so a line that names a failure comes first, but alone it names the owner
        # (allenai/open-instruct#1067: a container's /dev/shm, enlarged)
        22,
        r"The object store is using \S+ instead of /dev/shm because /dev/shm has only \d+ bytes available",
        "Ray's object store does not fit in /dev/shm and spills to disk: enlarge the container's /dev/shm "
        "(--shm-size, a memory-backed volume) to more than the object store, or set a smaller one.",
        "https://github.com/allenai/open-instruct/issues/1067",
        "WARNING services.py:2159 -- WARNING: The object store is using /tmp instead of /dev/shm because "
        "/dev/shm has only 5368709120 bytes available. This will harm performance!",
    ),
    sig(
        "process-bus-error",
        "disk",
        # a symptom: a process died of SIGBUS, which on a training host is almost always a shared-memory
        # (or other mmapped) file that could not grow under the pages written to it: /dev/shm too small for
        # NCCL's or the data loader's segments (msr-fiddle/pipedream#76: UCX's handler in NCCL's threads;
        # NVIDIA/JAX-Toolbox#183: gdb in ncclShmOpen)
        30,
        r"Caught signal 7 \(Bus error|received signal SIGBUS\b|Fatal Python error: Bus error"
        r"|^Bus error( +\(core dumped\))?$"
        # the shell's report of a child it started (MLCommons inference run_local.sh: python in a container)
        r"|^\S+: line \d+: +\d+ Bus error\b",
        "A process died of a bus error: almost always a shared-memory file that could not grow, a container's "
        "small /dev/shm (64 MB by default) under NCCL or the data loaders: enlarge it (--shm-size) and check "
        "`df -h /dev/shm` on the worker.",
        "https://github.com/msr-fiddle/pipedream/issues/76",
        "[8d6bf97c3bf4:3039 :0:3095] Caught signal 7 (Bus error: nonexistent physical address)",
    ),
    sig(
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
    sig(
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
    sig(
        "accelerator-memory-hardware-fault",
        "hardware",
        85,
        r"uncorrectable ECC error encountered|CUDA_ERROR_ECC_UNCORRECTABLE|\bfallen off the bus\b"
        # nvidia-smi's words for a GPU the driver lost (opendatalab/MinerU#2085: a card failing under load)
        r"|Unable to determine the device handle for GPU ?[0-9A-Fa-f:.]+: Unknown Error",
        "The accelerator reports a hardware fault (uncorrectable memory error, device lost): take that "
        "worker out of the fleet and relaunch elsewhere; no software change fixes it.",
        "https://github.com/vllm-project/vllm/issues/5222",
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
    ),
    sig(
        "tpu-node-unhealthy",
        "hardware",
        70,
        r"TPU \S+ is not HEALTHY",
        "The platform reports the TPU as unhealthy: wait for it to recover or recreate it; no software "
        "change on the workers fixes this.",
        "https://github.com/pytorch/xla/issues/2142",
        "RuntimeError: TPU node-v3-32 is not HEALTHY yet. Re-run when all TPUs are HEALTHY",
    ),
    sig(
        "tpu-driver-fatal-interrupt",
        "hardware",
        75,
        # the TPU driver's own report of a fatal chip error interrupt (not the runtime's halt, which a
        # compiler bug can cause too)
        r"Received Error Interrupt! fatal: true|!!!! FATAL ERROR !!!! for \[/dev/accel\d+",
        "A TPU chip raised a fatal error interrupt: note the worker and chip, take it out of the fleet (or "
        "recreate the slice) and relaunch from the last checkpoint.",
        "https://github.com/marin-community/marin/issues/1534",
        "E0827 23:43:41.200136   39689 error_handler.cc:100] Received Error Interrupt! fatal: true, "
        "running_timer: 0xeacdaccd3b4ec",
    ),
    sig(
        "device-plugin-no-healthy-devices",
        "hardware",
        60,
        # the kubelet's device manager: the accelerator's device plugin marks every device unhealthy
        # (a node under repair, a chip or driver fault), for TPUs as for GPUs
        r"\bno healthy devices present\b",
        "The node's accelerators are marked unhealthy by the platform (node repair, chip or driver fault): "
        "wait for the repair or move the workload to another node; software in the pod is not the cause.",
        "https://github.com/vllm-project/ci-infra/pull/582",
        "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices google.com/tpu, "
        "which is unexpected",
    ),
    # -------------------------------------------------------------------- other
    sig(
        "segmentation-fault",
        "other",
        15,
        r"Fatal Python error: Segmentation fault|Segmentation fault( +\(core dumped\))?|\*\*\* SIGSEGV",
        "The process crashed in native code: note the last Python frames above, check the bundle "
        "matches its lock (`orch probe`), and report with the full log.",
        "https://github.com/pytorch/xla/issues/6010",
        "Fatal Python error: Segmentation fault",
    ),
    sig(
        "native-check-failure",
        "other",
        12,
        r"\*\*\* Check failure stack trace: \*\*\*|\*\*\* SIGABRT received by PID \d+",
        "A native CHECK aborted the process: the 'Check failed' line just above names the component; "
        "search it against the bundle's versions.",
        "https://github.com/jax-ml/jax/issues/15210",
        "*** Check failure stack trace: ***",
    ),
    sig(
        "python-exception",
        "other",
        5,
        r"^\s*([A-Za-z_][\w.]*\.)?[A-Z]\w*(Error|Exception): ",
        "A Python exception ended the run: read its message and the frames above it.",
        "https://github.com/boathit/t2vec/issues/17",
        "RuntimeError: index 18864 is out of bounds for dimension 1 with size 18864",
    ),
    sig(
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
    sig(
        "torch-save-write-failed",
        "disk",
        75,
        # torch.save's zip writer failing mid-file: the filesystem filled (or errored) under it
        r"PytorchStreamWriter failed writing file \S+: file write failed"
        # the writer's end-of-file check after a short write (pytorch/pytorch#156955, #121833)
        r"|inline_container\.cc:\d+\] \. ?unexpected pos \d+ vs \d+",
        "A checkpoint write failed mid-file, almost always a full disk or quota: free space on the "
        "checkpoint filesystem or point it at a larger one.",
        "https://github.com/zai-org/ChatGLM-6B/issues/1166",
        "RuntimeError: [enforce fail at inline_container.cc:471] . PytorchStreamWriter failed writing file "
        "data/3: file write failed",
    ),
    sig(
        "file-write-io-error",
        "disk",
        70,
        # the storage under a write failing (EIO): a saturated disk, a failing or detached volume
        r"\bwrite\(\): fd \d+ failed with Input/output error"
        # coreutils creating or writing a file on that storage (a FUSE-mounted bucket's refused write)
        r"|^\w+: cannot (touch|create [\w ]+|write to) .*: Input/output error$",
        "A write to the filesystem failed with an I/O error: check the filesystem (`df -h`, dmesg for the "
        "device), free or replace it, and keep checkpoints on a healthy volume.",
        "https://github.com/pytorch/pytorch/issues/10577",
        "RuntimeError: write(): fd 29 failed with Input/output error",
    ),
    sig(
        "filesystem-op-not-supported",
        "disk",
        60,
        # EOPNOTSUPP from a FUSE/network mount that lacks an operation the writer needs
        # (Python's form only with the path it names: a bare EOPNOTSUPP may be a socket option)
        r"Operation not supported \(os error 95\)|\[Errno 95\] Operation not supported: '",
        "The target filesystem (often a FUSE or network mount) does not support an operation the writer "
        "needs: write to a local disk and copy, or mount with the needed support.",
        "https://github.com/huggingface/safetensors/issues/842",
        "Error while serializing: I/O error: Operation not supported (os error 95)",
    ),
    sig(
        "tf-cloud-write-tempfile-failed",
        "disk",
        60,
        # TensorFlow's GCS/S3 writers stage each object in a local temporary file (under /tmp, or the
        # working directory): the append fails when that disk is full or read-only
        r"Could not append to the internal temporary file",
        "TensorFlow could not stage a cloud-storage write in its local temporary file: the local disk "
        "under it (/tmp, often the boot disk) is full or read-only; free it or point TMPDIR at a larger "
        "writable disk.",
        "https://github.com/tensorflow/tensorflow/issues/51935",
        "Could not append to the internal temporary file",
    ),
    sig(
        "object-storage-transfer-stalled",
        "disk",
        # a symptom: tensorstore (checkpoints and arrays written to or read from a bucket) reports its HTTP
        # transfer failing; the storage the run writes to stalled, not the gang waiting behind it
        # (marin-community/levanter#578: a checkpoint save hung until stalled uploads were retried)
        40,
        r"curl_transport\.cc:\d+\] Error \[\d+\]=",
        "Transfers to the bucket behind the checkpoints (or arrays) failed or stalled: check the bucket's "
        "region and quota and the host's egress; let tensorstore retry stalled transfers "
        "(TENSORSTORE_CURL_LOW_SPEED_TIME_SECONDS, TENSORSTORE_CURL_LOW_SPEED_LIMIT_BYTES).",
        "https://github.com/marin-community/levanter/issues/578",
        "W0000 00:00:1715498963.019816  583764 curl_transport.cc:444] Error [28]=Timeout was reached in curl operation",
    ),
    sig(
        "df-shows-full-filesystem",
        "disk",
        70,
        # a pasted `df -h` line with no space available
        r"^\S+\s+\S+\s+\S+\s+0B?\s+100% /\S*$",
        "`df` shows a filesystem at 100%: free space there or give the worker a larger disk.",
        "https://github.com/skypilot-org/skypilot/issues/4964",
        "/dev/root         97G   97G     0 100% /",
    ),
    sig(
        "tpu-lame-workers",
        "hardware",
        60,
        # the TPU worker stopped heartbeating under the session: preempted or in maintenance
        r"ShutdownHook: lame workers found",
        "A TPU worker stopped answering heartbeats (preemption, maintenance or a host fault): check the "
        "TPU's state (`gcloud compute tpus tpu-vm describe`), recreate it if PREEMPTED, then relaunch.",
        "https://github.com/megagonlabs/t5-japanese/issues/1",
        "INFO:tensorflow:ShutdownHook: lame workers found: HeartbeatManager(/job:worker/replica:0/task:0/device:CPU:0)",
    ),
    sig(
        "tpu-maintenance-or-preempted",
        "hardware",
        70,
        # the Cloud TPU API's node health and state, as `gcloud compute tpus tpu-vm describe` prints them
        # (Node.Health: https://cloud.google.com/python/docs/reference/tpu/latest/google.cloud.tpu_v2.types.Node.Health)
        r"\bUNHEALTHY_MAINTENANCE\b|\bstate\W{1,4}PREEMPTED\b|\bis in PREEMPTED state\b",
        "The TPU is in a maintenance event or was preempted: wait for it to return (maintenance) or "
        "recreate it (PREEMPTED), then relaunch from the last checkpoint.",
        "https://github.com/skypilot-org/skypilot/issues/1468",
        "state: PREEMPTED",
    ),
    sig(
        "gevent-loop-exit",
        "other",
        75,
        # gevent's hub with nothing left to wait for: modules imported before monkey-patching, or
        # threads mixed with greenlets (ParallelSSH/parallel-ssh#87); it wins over the SSH error around it
        r"This operation would block forever",
        "gevent's hub had nothing left to wait for: the program imported modules before gevent's "
        "monkey-patching or mixed threads with greenlets (parallel-ssh); import gevent-based tools first.",
        "https://github.com/ParallelSSH/parallel-ssh/issues/87",
        "pssh.exceptions.SSHException: (\"General SSH error - Error reading SSH protocol banner('This operation "
        "would block forever', <Hub at 0x10ab517d0 select pending=0 ref=0>)\", 'nononanananoka.com', 22)",
    ),
    sig(
        "torch-dist-env-not-set",
        "other",
        # above the rendezvous handler's frame: no peer was ever asked, the process lacked the launcher's env
        60,
        r"environment variable (MASTER_ADDR|MASTER_PORT|RANK|WORLD_SIZE|LOCAL_RANK) expected, but not set"
        r"|raise _env_error\(\"\w+\"\)",
        "The process was started without the launcher's environment (MASTER_ADDR, RANK, WORLD_SIZE): start "
        "it through the launcher (orch launch, torchrun) rather than running the script directly.",
        "https://github.com/hzwer/ECCV2022-RIFE/issues/52",
        '    raise _env_error("MASTER_ADDR")',
    ),
    sig(
        "torch-extension-imported-before-torch",
        "other",
        # libc10.so is in every torch build, so a torch extension that cannot find it was imported in a
        # process that had not loaded torch: the program imports the extension first
        # (AlwaysFHao/Mamba-Install#1: fixed by importing torch before causal_conv1d_cuda)
        50,
        r"\blibc10\.so: cannot open shared object file",
        "A torch extension was imported before torch, whose libraries it loads: import torch first in the "
        "program (or the module that imports the extension); if torch is not installed in this "
        "environment, the bundle is missing it.",
        "https://github.com/AlwaysFHao/Mamba-Install/issues/1",
        "ImportError: libc10.so: cannot open shared object file: No such file or directory",
    ),
    sig(
        "tf-function-callback-unreachable",
        "other",
        # a TensorFlow function running on a remote TPU worker that must call back into the client's Python
        # (a dataset from a Python generator, a py_function) and cannot: the gRPC failure names the function
        # node, not a coordinator (tensorflow/tensorflow#63832: fixed by building the dataset from tensors)
        50,
        r"\{\{function_node __inference_\w+\}\} failed to connect to all addresses",
        "An op inside a compiled TensorFlow function could not reach its peer: on a remote TPU worker that "
        "is the client's Python (Dataset.from_generator, tf.py_function), which the worker cannot call; "
        "build the input pipeline from tensors or files (from_tensor_slices, TFRecord) instead.",
        "https://github.com/tensorflow/tensorflow/issues/63832",
        "(0) INTERNAL: {{function_node __inference_train_function_11526}} failed to connect to all addresses; "
        "last error: UNKNOWN: ipv4:127.0.0.1:50188: Failed to connect to remote host: Connection refused",
    ),
)
