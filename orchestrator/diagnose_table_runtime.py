"""Signatures of the runtime coming up on the intended device from one bundle: the runtime-proof layer.

Data only: see orchestrator/diagnose_table.py for how a signature is written and sourced.
"""

from __future__ import annotations

from orchestrator.diagnose_sig import PTXLA_GH, Signature, sig

RUNTIME_SIGNATURES: tuple[Signature, ...] = (
    # ------------------------------------------------------------ runtime-proof
    sig(
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
    sig(
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
    sig(
        "libtpu-not-found",
        "runtime-proof",
        80,
        r"(OSError|EnvironmentError): libtpu not found"
        # the libtpu package itself is absent (a submodule missing from an installed libtpu is another
        # release's layout, bundle-skew)
        r"|No module named '?libtpu(?![.\w])",
        "The runtime found no libtpu (torch_xla with PJRT_DEVICE=TPU, or `import libtpu`): the bundle lacks "
        "libtpu (or TPU_LIBRARY_PATH points nowhere); install the bundle's libtpu wheel.",
        PTXLA_GH + "torch_xla/_internal/tpu.py",
        "OSError: libtpu not found",
    ),
    sig(
        "libtpu-open-failed",
        "runtime-proof",
        75,
        r"Failed to open libtpu\.so",
        "JAX could not load libtpu.so: install the bundle's libtpu wheel, or point TPU_LIBRARY_PATH at it.",
        "https://github.com/google-deepmind/alphafold3/issues/656",
        "xla_bridge.py:841] Unable to initialize backend 'tpu': INTERNAL: Failed to open libtpu.so: "
        "libtpu.so: cannot open shared object file: No such file or directory",
    ),
    sig(
        "no-tpu-platform",
        "runtime-proof",
        75,
        # torch_xla's wording (pytorch/xla#4036: TPU_LIBRARY_PATH set to /dev/null, so libtpu never loaded)
        r"No TPU [Pp]latform (available|found)|TpuPlatform is not available",
        "No TPU platform registered: libtpu is missing, did not initialise, or does not match this "
        "frontend (or TPU_LIBRARY_PATH points elsewhere); check the probe's device and bundle checks.",
        "https://github.com/jax-ml/jax/issues/13260",
        "jaxlib.xla_extension.XlaRuntimeError: UNAVAILABLE: No TPU Platform available.",
    ),
    sig(
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
    sig(
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
    sig(
        "gce-metadata-fetch",
        "runtime-proof",
        65,
        r"Failed to fetch URL on try \d+ out of \d+|Failed to get TPU metadata"
        # the runtime's own query of the TPU VM's attributes refused, missing (an old TPU Node, a
        # container without the metadata server) or unreachable, as requests/urllib3 word it
        r"|(HTTP [45]\d\d for url:?|[45]\d\d \w+ Error: [\w ]+ for url:|Max retries exceeded with url:) "
        r"\S*computeMetadata/v1/instance/attributes/"
        r"(tpu-env|accelerator-type|agent-worker-number|worker-network-endpoints)\b",
        "libtpu is polling the GCE metadata server: set TPU_SKIP_MDS_QUERY=1 with explicit "
        "TPU_ACCELERATOR_TYPE, TPU_WORKER_ID and TPU_WORKER_HOSTNAMES (the fleet's runtime policy does).",
        "https://github.com/jax-ml/jax/issues/14300",
        "I0000 00:00:1671728351.222598      12 common_lib.cc:145] Failed to fetch URL on try 1 out of 6: "
        "Timeout was reached",
    ),
    sig(
        "jax-tpu-node-unsupported",
        "runtime-proof",
        70,
        # JAX >= 0.4 drives only TPU VMs; an old TPU Node (Colab's, tpu_driver) never comes up
        r"JAX only supports TPU VMs, not the older Colab TPUs",
        "This JAX cannot drive the old TPU Node architecture (Colab's TPU): run on a TPU VM, or use a "
        "bundle of a JAX release before 0.4 on that device.",
        "https://github.com/sanchit-gandhi/whisper-jax/issues/34",
        "As of JAX 0.4.0, JAX only supports TPU VMs, not the older Colab TPUs.",
    ),
    sig(
        "xla-flags-unknown",
        "runtime-proof",
        65,
        # XLA aborts at start-up on a flag in XLA_FLAGS it does not define (a typo, a dash pasted as
        # an en dash, a flag of another XLA release)
        r"Unknown flags? in XLA_FLAGS:",
        "XLA_FLAGS in the run's environment holds a flag this XLA does not define (a typo, a flag of "
        "another release): fix the lane's runtime profile, and set flags only there, before launch.",
        "https://github.com/jax-ml/jax/issues/13148",
        "F external/org_tensorflow/tensorflow/compiler/xla/parse_flags_from_env.cc:226] Unknown flags in "
        "XLA_FLAGS: -\u2013xla_force_host_platform_device_count=4",
    ),
    sig(
        "jax-distributed-after-backend",
        "runtime-proof",
        65,
        r"jax\.distributed\.initialize\(\) must be called before any JAX calls",
        "Something touched JAX before jax.distributed.initialize(): initialise distributed first, "
        "before any import-time device query.",
        "https://github.com/mlnomadpy/flaxchat/issues/8",
        "jax.distributed.initialize() must be called before any JAX calls that might initialise the XLA backend",
    ),
    sig(
        "torch-xla-runtime-already-initialized",
        "runtime-proof",
        65,
        r"\b(XLA )?[Rr]untime (is )?(already|ALREADY) initiali[sz]ed"
        # the same mistake seen from the child: the parent had already loaded the TPU PJRT plugin
        # (an XLA device or availability check before spawn, or two frontends loading libtpu in one
        # process), so the child's load is refused (huggingface/accelerate#2467)
        r"|PJRT_Api already exists for device type \w+",
        "The runtime was started twice: an XLA device (or a device query) was used before xmp.spawn, or "
        "two frontends loaded libtpu in one process; set policy and spawn before creating any XLA tensor "
        "(call use_spmd() before any tensor exists) and keep one frontend per process.",
        "https://github.com/pytorch/xla/issues/9303",
        "RuntimeError: Runtime is already initialized. Do not use the XLA device before calling xmp.spawn.",
    ),
    sig(
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
    sig(
        "jax-gpu-maybe-present-fallback",
        "runtime-proof",
        # the same fall back on a GPU host: a jaxlib without the CUDA plugin (JeffSHF/ColabDock#28: a
        # CPU build of jax installed; later releases word it "CUDA-enabled jax installation was not found")
        50,
        r"An NVIDIA GPU may be present on this machine, but a CUDA-enabled jax(lib is not installed| installation "
        r"was not found)",
        "JAX silently fell back to CPU although a GPU is present: the installed jaxlib has no CUDA plugin "
        "(install jax[cuda12] matching the driver, in the bundle); this run did not use the GPU.",
        "https://github.com/JeffSHF/ColabDock/issues/28",
        "An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not installed. Falling back to "
        "cpu.",
    ),
    sig(
        "nccl-topology-file-mismatch",
        "runtime-proof",
        # NCCL reading a topology or graph file (NCCL_TOPO_FILE / NCCL_GRAPH_FILE, or a net plugin's
        # static topology) written for another machine shape: a VM image's files for the largest size
        # loaded on a smaller one (Azure/azhpc-images#327), a plugin's p5 file on a subset of the GPUs
        # (aws/aws-ofi-nccl#785), a graph file for four GPUs on two (NVIDIA/nccl#1008); the gang never
        # forms, but no peer is at fault
        45,
        r"NCCL WARN XML Import Channel : dev \d+ not found"
        r"|graph/xml\.(h|cc):\d+ NCCL WARN Attribute \S+ of node \S+ not found",
        "NCCL's topology or graph file does not describe this machine: unset NCCL_TOPO_FILE and "
        "NCCL_GRAPH_FILE (or point them at files for this VM size), or upgrade the network plugin that "
        "ships a static topology.",
        "https://github.com/Azure/azhpc-images/issues/327",
        "::16674:17023 [0] graph/search.cc:703 NCCL WARN XML Import Channel : dev 1 not found.",
    ),
    sig(
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
    sig(
        "torch-xla-runtime-defaulted",
        "runtime-proof",
        # torch_xla choosing its runtime at import because no runtime env was set: whatever the launcher
        # sets later is ignored (pytorch/xla#4630, xla_dist setting XRT's env after import)
        30,
        r"XRT configuration not detected\. Defaulting to (preview )?PJRT",
        "torch_xla chose its runtime at import from an env that named none: set PJRT_DEVICE (and the "
        "launcher's runtime env) in the lane's runtime profile, before torch_xla is imported.",
        "https://github.com/pytorch/xla/pull/4630",
        "WARNING:torch_xla:XRT configuration not detected. Defaulting to preview PJRT runtime.",
    ),
    sig(
        "jax-no-gpu-tpu-fallback",
        "runtime-proof",
        50,
        r"No GPU/TPU found, falling back to CPU",
        "JAX ran on CPU: the TPU backend did not initialise (the reason is an earlier INFO line, "
        "'Unable to initialize backend'); set JAX_PLATFORMS=tpu to make it fail loudly.",
        "https://github.com/jax-ml/jax/issues/10192",
        "WARNING:absl:No GPU/TPU found, falling back to CPU. (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)",
    ),
    sig(
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
    sig(
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
    sig(
        "tpu-global-topology-unavailable",
        "runtime-proof",
        # a symptom: the runtime could not assemble the slice's topology (no driver bound to the chips
        # under a wrong TPU software version, or the program started on one worker of a multi-host
        # slice); torch_xla's and JAX's wordings, above JAX's generic backend failure around it
        50,
        r"Failed to get global TPU topology",
        "The TPU runtime could not learn the slice's topology: start the program on every worker of the "
        "slice, and check the chips are bound to the driver (`ls /dev/vfio /dev/accel*`; the VM's TPU "
        "software version must match the generation) before relaunching.",
        "https://github.com/pytorch/xla/issues/9753",
        "RuntimeError: Failed to get global TPU topology",
    ),
    sig(
        "tpu-device-count-env-mismatch",
        "runtime-proof",
        60,
        r"The number of devices must be either 1 or \d+, got \d+ instead"
        # XRT's form of the same mismatch: a device index past the count the topology env gave
        r"|num_tpu_devices_per_task\(\) \(\d+ vs\. \d+\)"
        # CUDA's form: a process asking for a device index past those the environment makes visible
        # (jax-ml/jax#23452: a launcher indexing GPUs by rank under a per-task CUDA_VISIBLE_DEVICES)
        r"|\binvalid device ordinal\b",
        "The process count does not match the device count the runtime read from the environment "
        "(TPU_NUM_DEVICES and the topology variables; CUDA_VISIBLE_DEVICES on GPUs): set them in the "
        "lane's runtime profile before import.",
        "https://github.com/pytorch/xla/issues/2483",
        "ValueError: The number of devices must be either 1 or 8, got 2 instead",
    ),
    sig(
        "mesh-sees-one-device",
        "runtime-proof",
        # a symptom: the mesh asked for N devices and the runtime answered with one (a CPU fallback, a
        # host without its accelerators); a mesh misconfigured on a real slice names another count
        50,
        r"Number of devices 1 must equal the product of mesh_shape|Insufficient devices for \w+ mesh: found 1,",
        "The runtime exposed a single device where the mesh expects the slice's chips: it did not come up "
        "on the TPU (CPU fallback, no TPU attached); check the lane's runtime profile and `orch probe`.",
        "https://github.com/xai-org/grok-1/issues/248",
        "ValueError: Number of devices 1 must equal the product of mesh_shape (1, 8)",
    ),
    sig(
        "mesh-tf-shape-not-the-slice",
        "runtime-proof",
        # Mesh TensorFlow (T5's trainer) laying its logical mesh over the TPU it found raises this when
        # the mesh's size is not the count of cores (its simd_mesh_impl.py); the thread behind the
        # layer is castorini/docTTTTTquery#21: tpu_topology left at its default, fixed by naming the
        # slice (v3-8). The example is the message as T5's own thread titles it.
        55,
        r"physical and logical shapes must have the same product",
        "The program's mesh was sized for another TPU than the one it runs on: pass the slice's topology "
        "(T5's tpu_topology, the model-parallel and batch settings) so the mesh matches its cores.",
        "https://github.com/google-research/text-to-text-transfer-transformer/issues/488",
        "`physical and logical shapes must have the same product`",
    ),
    sig(
        "tf-tpu-system-not-found",
        "runtime-proof",
        60,
        r"No matching devices found for '/(job:\w+/replica:\d+/task:\d+/)?device:TPU_SYSTEM:\d+'",
        "TensorFlow found no TPU system device: the TPU runtime did not come up in this process (resolver, "
        "libtpu, or a setting applied before init); prove the device with `orch probe` first.",
        "https://github.com/google-research/multilingual-t5/issues/808",
        "InvalidArgumentError: No matching devices found for '/device:TPU_SYSTEM:0' [Op:__inference__tpu_init_fn_10]",
    ),
    sig(
        "xla-env-deprecated",
        "runtime-proof",
        30,
        r"XLA_USE_BF16 will be deprecated|XLA_USE_SPMD is being deprecated",
        "A deprecated torch_xla variable is set: drop XLA_USE_BF16 (it breaks the current Pallas attention "
        "path; cast the model to bf16 in code) and XLA_USE_SPMD (call torch_xla.runtime.use_spmd() before "
        "any XLA tensor exists) from the runtime profile.",
        PTXLA_GH + "torch_xla/csrc/dtype.cpp",
        "XLA_USE_BF16 will be deprecated after the 2.5 release, please convert your model to bf16 directly",
    ),
    sig(
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
    sig(
        "tpu-host-topology-mismatch",
        "runtime-proof",
        80,
        # the runtime expects the slice's host grid and counts fewer hosts joined: a pod slice run
        # as a single host, or workers launched on only part of it
        r"Invalid system configuration: \S+ host topology with \d+ missing hosts?, but \d+ hosts? in total",
        "The TPU runtime expects the slice's full host grid but only some hosts joined: launch on every "
        "worker of the slice at once (orch launches the gang on all workers).",
        "https://github.com/huggingface/transformers/issues/9533",
        "Internal: Invalid system configuration: 2x2 host topology with 0 missing hosts, but 1 hosts in total.",
    ),
    sig(
        "tpu-init-local-endpoint-unreachable",
        "runtime-proof",
        75,
        # libtpu's runtime talks to a local endpoint; in a container without host networking it is unreachable
        r"TPU initialization failed: Failed to connect to \S+:\d+",
        "The TPU runtime could not reach its local endpoint: in a container, run it with host networking "
        "(--network=host) and privileged device access.",
        "https://github.com/pytorch/xla/issues/8735",
        "RuntimeError: Bad StatusOr access: UNKNOWN: TPU initialization failed: Failed to connect to [::]:8353",
    ),
    sig(
        "tpu-cores-held-by-lingering-process",
        "device-ownership",
        70,
        r"Global core array does not contain host cores",
        "The TPU cores are still bound by an earlier run's processes (children left after Ctrl-C): kill "
        "them (orch's device check lists the holders) before relaunching.",
        "https://github.com/pytorch/xla/issues/1731",
        "Global core array does not contain host cores [0x0x0_TC0,0x0x0_TC1,1x0x0_TC0,1x0x0_TC1]",
    ),
    sig(
        "torch-xla-pjrt-device-unset-or-unknown",
        "runtime-proof",
        75,
        # torch_xla's runtime registry refusing PJRT_DEVICE (torch_xla/csrc/runtime/pjrt_registry.cc), or
        # its computation client started with none set (torch_xla/csrc/runtime/runtime.cc)
        r"Unknown PJRT_DEVICE '[^']*'|\$PJRT_DEVICE is not set",
        "PJRT_DEVICE is unset, or names a device this torch_xla does not know (e.g. CUDA on a TPU "
        "build): set it to TPU or CPU in the lane's runtime policy, before import.",
        "https://github.com/google-ai-edge/litert-torch/issues/326",
        "Unknown PJRT_DEVICE 'CUDA'",
    ),
    sig(
        "tpu-platform-registered-twice",
        "runtime-proof",
        70,
        r"TPU platform already registered for platform",
        "The TPU platform was initialised twice in one process (two frameworks or an import-order race): "
        "initialise the runtime once at start (e.g. jax.device_count() first) before other code touches it.",
        "https://github.com/AI-Hypercomputer/maxtext/issues/20",
        "FAILED_PRECONDITION: TPU platform already registered for platform hardware version",
    ),
    sig(
        "lightning-accelerator-unavailable",
        "runtime-proof",
        70,
        # PyTorch Lightning's check that the requested accelerator's runtime answered; for a GPU, mostly a
        # CPU-only torch (open-edge-platform/anomalib#510: fixed by installing torch's CUDA build)
        r"\b(TPU|XLA|GPU|CUDA)Accelerator`? can not run on your system"
        r"|MisconfigurationException\W+No TPU devices were found"
        # older releases' wording, raised when the TPU probe did not answer in time
        # (Lightning-AI/pytorch-lightning#4829)
        r"|MisconfigurationException\W+PyTorch XLA not installed",
        "The trainer asked for an accelerator and the runtime found none (only the CPU answered): for TPUs, "
        "run on a TPU VM with the lane's runtime policy applied before import; for GPUs, install the CUDA "
        "build of torch the bundle pins (a CPU-only build answers this way); prove it with `orch probe`.",
        "https://github.com/ratsgo/nlpbook/issues/37",
        "MisconfigurationException: TPUAccelerator can not run on your system since the accelerator is not "
        "available. The following accelerator(s) is available and can be passed into `accelerator` argument "
        "of `Trainer`: ['cpu'].",
    ),
    sig(
        "torch-without-nccl",
        "runtime-proof",
        # a gang asking for NCCL from a torch built without it: torch's Windows and macOS builds never carry
        # it (torchgeo/torchgeo#1198: the maintainer's answer, gloo or Linux; modelscope/modelscope#334 and
        # bshall/hubert#1, on Windows too); the backend asked for cannot come up, so no peer is at fault.
        # Also the source line torch's traceback shows, and the warning newer releases print before it.
        55,
        r"Distributed package doesn't have NCCL\W+built in"
        r"|Attempted to get default timeout for nccl backend, but NCCL support is not compiled",
        "This torch has no NCCL (its Windows and macOS builds never do): use the gloo backend there "
        "(backend='gloo', or the trainer's distributed-backend setting), or run the gang on Linux with the "
        "CUDA build the bundle pins; a TPU lane's gang uses XLA's backend, not NCCL.",
        "https://github.com/torchgeo/torchgeo/issues/1198",
        "RuntimeError: Distributed package doesn't have NCCL built in",
    ),
    sig(
        "torch-xla-runtime-initialised-before-spawn",
        "runtime-proof",
        65,
        # torch_xla's replication check: the parent took the device before xmp.spawn, children see one
        r"Cannot replicate if number of devices \(\d+\) is different from \d+",
        "The XLA runtime was initialised in the parent before xmp.spawn (an xla_device() call at import), "
        "so each child sees one device: acquire the device only inside the spawned function.",
        "https://github.com/pytorch/xla/issues/1587",
        "RuntimeError: Cannot replicate if number of devices (1) is different from 8",
    ),
    sig(
        "realesrgan-on-cpu",
        "runtime-proof",
        # Real-ESRGAN's upsampler (GFPGAN, CodeFormer and the tools built on them) skipping itself because
        # torch saw no GPU: the only line left of a run that went to the CPU (TencentARC/GFPGAN#229: a torch
        # without CUDA on an RTX 3080, fixed by installing a CUDA build)
        40,
        r"The unoptimized RealESRGAN is slow on CPU\. We do not use it\.",
        "torch saw no GPU, so the run went to the CPU: the torch installed is a CPU-only build or the GPU is "
        "hidden from the process; install the CUDA build the bundle pins and prove the device (`orch probe`).",
        "https://github.com/TencentARC/GFPGAN/issues/229",
        "UserWarning: The unoptimized RealESRGAN is slow on CPU. We do not use it. If you really want to use it, "
        "please modify the corresponding codes.",
    ),
)
