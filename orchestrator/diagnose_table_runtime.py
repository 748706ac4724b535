"""Signatures of the runtime coming up on the intended device from one bundle: the runtime-proof and bundle-skew layers.

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
        r"No TPU [Pp]latform (available|found)",
        "No TPU platform registered: libtpu is missing, did not initialise, or does not match this "
        "frontend; check the probe's device and bundle checks.",
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
        r"\b(XLA )?[Rr]untime (is )?(already|ALREADY) initiali[sz]ed",
        "An XLA device was used before xmp.spawn: set policy and spawn before creating any XLA tensor "
        "(and call use_spmd() before any tensor exists).",
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
        r"|num_tpu_devices_per_task\(\) \(\d+ vs\. \d+\)",
        "The process count does not match the TPU device count the runtime read from the environment "
        "(TPU_NUM_DEVICES and the topology variables): set them in the lane's runtime profile before import.",
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
    # -------------------------------------------------------------- bundle-skew
    sig(
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
    sig(
        "jax-jaxlib-version-skew",
        "bundle-skew",
        95,
        # Both directions of the check jax runs at import; newer releases wrap the first after "jax".
        r"jaxlib is version \S+, but this version of jax\b|jaxlib version \S+ is newer than and incompatible with jax",
        "jax and jaxlib come from different releases: install the pair the bundle pins.",
        "https://github.com/jax-ml/jax/issues/15876",
        "Windows RuntimeError: jaxlib is version 0.3.25, but this version of jax requires version >= 0.4.7.",
    ),
    sig(
        "pjrt-plugin-abi-mismatch",
        "bundle-skew",
        95,
        # older releases name the whole API table (PJRT_Api), newer ones the argument struct
        r"Unexpected (?:PJRT_Api|\w+_Args) size: expected \d+, got \d+"
        r"|The plugin is likely built with a (later|earlier) version than the framework",
        "Frontend and libtpu disagree on the PJRT C API (struct sizes): use the libtpu validated with "
        "this torch_xla/jax; they move together as one bundle.",
        "https://github.com/vllm-project/tpu-inference/pull/1109",
        "F1114 22:32:47.676167 1232387 pjrt_c_api_helpers.cc:258] Unexpected error status Unexpected "
        "PJRT_Plugin_Attributes_Args size: expected 32, got 24. The plugin is likely built with a later "
        "version than the framework. This plugin is built with PJRT API version 0.75.",
    ),
    sig(
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
    sig(
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
    sig(
        "pip-dependency-conflict",
        "bundle-skew",
        70,
        r"\S+ \S+ requires \S+, but you have \S+ \S+ which is incompatible",
        "The installed set violates a wheel's own requirements: lock and install the bundle as one set "
        "instead of adding packages to an existing environment.",
        "https://github.com/tenstorrent/tt-forge/issues/806",
        "pjrt-plugin-tt 0.8.0.dev20260112 requires torch==2.7.1, but you have torch 2.7.0 which is incompatible.",
    ),
    sig(
        "frontend-module-missing",
        "bundle-skew",
        70,
        r"No module named '(torch_xla|torch_tpu|torch|jax|jaxlib|libtpu|flax|optax|orbax)\b[\w.]*'",
        "A frontend (or a version-gated part of one) is not in this environment: check the lane's "
        "bundle includes it at a version that has the module.",
        "https://github.com/AI-Hypercomputer/torchprime/issues/259",
        "Error importing relative module: No module named 'torch_xla.experimental.splash_attention'",
    ),
    sig(
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
    sig(
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
    sig(
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
    sig(
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
    sig(
        "native-extension-mismatch",
        "bundle-skew",
        # Below the torch_xla-specific one: any compiled extension that misses a symbol of the
        # library it was built against (jaxlib against absl, torchvision against torch), or a
        # torch/XLA extension whose companion library is not installed beside it.
        55,
        r"\.so(\.[\w.]+)?: undefined symbol: \w+"
        r"|(libc10|libtorch\w*|_XLAC\S*|xla_extension\S*|libjax\w*)\.so[\w.]*: cannot open shared object file"
        # a wheel built against a newer C or C++ runtime than the host's (glibc, libstdc++)
        r"|version [`'\u2018]?(GLIBC|GLIBCXX|CXXABI)_[\d.]+['\u2019]? not found \(required by",
        "A compiled extension was built against another version of a library it loads: install the "
        "builds the bundle pins together instead of mixing channels (pip, conda) or releases.",
        "https://github.com/conda-forge/jaxlib-feedstock/issues/139",
        "E   ImportError: /home/runner/micromamba-root/envs/jaxbug-test/lib/python3.10/site-packages/jaxlib/"
        "xla_extension.so: undefined symbol: _ZN4absl12lts_202206235MutexD1Ev",
    ),
    sig(
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
    sig(
        "frontend-attribute-missing",
        "bundle-skew",
        65,
        r"(AttributeError(: |\(\"?)|^\W*)module '(jax|jaxlib|flax|optax|orbax|torch_xla|libtpu)\b[\w.]*' has no "
        r"attribute"
        # jax's config object lost its define_*_state API (jax 0.4.25) under an older flax/orbax/chex
        r"|'Config' object has no attribute 'define_\w+_state'"
        # the TPU backend failing on it (JAX also probes the GPU plugins at INFO level, harmlessly)
        r"|Unable to initialize backend 'tpu': module '(jax|jaxlib|libtpu)\b[\w.]*' has no attribute",
        "A jax/torch_xla module lacks a name another installed package (or jax itself) expects: the "
        "versions do not belong together; install the set the bundle pins.",
        "https://github.com/blackjax-devs/blackjax/issues/787",
        "AttributeError: module 'jax.core' has no attribute 'Shape'",
    ),
    sig(
        "jax-removed-api-frame",
        "bundle-skew",
        60,
        # jax raises AttributeError for a removed (or accelerated-deprecation) name from its module
        # __getattr__ in deprecations.py: the frame alone shows a caller written for another jax, even
        # when the exception line is cut off; plain and IPython traceback forms
        r"jax[/\\]_src[/\\]deprecations\.py(\", line |:)\d+, in (\w+\.<locals>\.)?(getattr|__getattr__)\b"
        # the message jax raises there (or for a removed argument), naming the release that removed it
        r"|\bjax[\w.]* (was|were|has been) removed in JAX v?\d+\.\d+|\bargument to jnp\.\w+ was removed in JAX v?\d",
        "A library calls a jax API the installed jax removed: install the library release made for this "
        "jax, or the jax it was made for, as one bundle.",
        "https://github.com/jax-ml/jax/issues/22990",
        '  File "/usr/local/lib/python3.10/dist-packages/jax/_src/deprecations.py", line 54, in getattr',
    ),
    sig(
        "library-needs-newer-frontend",
        "bundle-skew",
        60,
        # a library's own version gate naming the jax/torch_xla release it needs (Lightning, mpi4jax,
        # SCICO word it so); pip's "Requires-Dist:" and "Requirement already satisfied" are not failures
        r"\b(requires?|only supported with|needs) `?(torch[-_]xla|jax|jaxlib|libtpu(-nightly)?|flax|optax"
        r"|orbax(-checkpoint)?) ?>= ?v?\d",
        "A library needs a newer jax/torch_xla than the one installed: install the library release made "
        "for the bundle's frontend, or move the whole bundle forward; never upgrade the frontend alone.",
        "https://github.com/Lightning-AI/pytorch-lightning/issues/12417",
        "MisconfigurationException: `XLAProfiler` is only supported with `torch-xla >= 1.8`",
    ),
    sig(
        "libtpu-unknown-flag",
        "bundle-skew",
        60,
        # libtpu parses the flags the framework passes it (LIBTPU_INIT_ARGS, torch_xla's defaults) and
        # stops at one its release does not define: the framework is of another release than libtpu
        r"Unknown command line flag '(xla|tpu|megascale|libtpu)_\w+'",
        "libtpu does not know a flag the framework passes it: torch_xla/jax and libtpu are of different "
        "releases; install the matching set (the bundle's lock), or drop the flag from LIBTPU_INIT_ARGS.",
        "https://github.com/pytorch/xla/issues/6990",
        "ERROR: Unknown command line flag 'xla_latency_hiding_scheduler_rerun'",
    ),
    sig(
        "xrt-op-not-registered",
        "bundle-skew",
        65,
        # torch_xla's XRT client asks the TPU runtime for an op its (older) release lacks
        r"Op type not registered 'XRT\w+' in binary running on",
        "The TPU runtime is of an older release than the torch_xla client (an XRT op is missing): "
        "recreate the TPU with the runtime version matching torch_xla, or install the matching torch_xla.",
        "https://github.com/pytorch/xla/issues/659",
        "(Not found: Op type not registered 'XRTAllocateFromTensor' in binary running on n-a66176ae-w-0. "
        "Make sure the Op and Kernel are registered in the binary running in this process.",
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
        "jaxlib-tpu-client-object-skew",
        "bundle-skew",
        75,
        # the pre-PJRT TPU client's buffer lacking an attribute a newer library reads
        r"'jaxlib\.tpu_client_extension\.\w+' object has no attribute",
        "A library (flax, optax...) expects a newer jax/jaxlib than installed: install the versions the "
        "bundle pins together.",
        "https://github.com/google/flax/issues/1583",
        "AttributeError: 'jaxlib.tpu_client_extension.PyTpuBuffer' object has no attribute 'dtype'",
    ),
    sig(
        "library-needs-jax-array",
        "bundle-skew",
        75,
        r"Please enable `jax\.Array` to use this feature",
        "A library was built for a newer jax (jax.Array on by default) than installed: install the jax "
        "the bundle pins with it.",
        "https://github.com/jax-ml/jax/issues/14544",
        "ValueError: in_shardings and out_shardings should not be the unspecified singleton value. Please "
        "enable `jax.Array` to use this feature.",
    ),
    sig(
        "pallas-libtpu-too-old",
        "bundle-skew",
        85,
        r"Pallas TPU requires a libTPU version that's at most",
        "jax is newer than the installed libtpu (Pallas checks the libtpu build date): install the libtpu "
        "released with this jax.",
        "https://github.com/AI-Hypercomputer/maxtext/issues/1330",
        "RuntimeError: Pallas TPU requires a libTPU version that's at most a month old",
    ),
    sig(
        "jax-tpu-backend-module-skew",
        "bundle-skew",
        80,
        # jax calling into a jaxlib or libtpu module of another release (jax-ml/jax#15273, #29989)
        r"Unable to initialize backend 'tpu': module '(?:jaxlib\.\w+|libtpu)' has no attribute"
        r"|cloud_tpu_init failed: AttributeError\(\"module 'libtpu' has no attribute",
        "jax, jaxlib and libtpu come from different releases: install the set the bundle pins together.",
        "https://github.com/jax-ml/jax/issues/15273",
        "RuntimeError: Unable to initialize backend 'tpu': module 'jaxlib.xla_extension' has no attribute "
        "'get_tpu_client' (set JAX_PLATFORMS='' to automatically choose an available backend)",
    ),
)
