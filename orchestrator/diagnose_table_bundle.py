"""Signatures of installed frontends and runtime that do not belong together: the bundle-skew layer.

Data only: see orchestrator/diagnose_table.py for how a signature is written and sourced.
"""

from __future__ import annotations

from orchestrator.diagnose_sig import Signature, sig

# Installed libraries of the stack and around it whose modules lacking a name (or an importable name)
# means two installed versions that do not belong together, not a user's own module: in the corpus,
# every such line in an installed library's module was a version skew.
_INSTALLED_LIBS = (
    r"(jax|jaxlib|flax|optax|orbax|torch_xla|libtpu|torch|torchvision|torchaudio|torchtune|tensorflow|chex|haiku"
    r"|equinox|numpyro|numpy|scipy|transformers|peft|diffusers|accelerate|deepspeed|lightning|pytorch_lightning"
    r"|keras|ray)\b"
)

BUNDLE_SIGNATURES: tuple[Signature, ...] = (
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
        r"jaxlib is version \S+, but this version of jax\b|jaxlib version \S+ is newer than and incompatible with jax"
        # jax's check of a backend plugin wheel (jax-cuda12-plugin, ...) against jaxlib (ma-gilles/recovar#64)
        r"|JAX plugin \S+ version \S+ is installed,?\s*($|but it is not compatible with the installed jaxlib)",
        "jax, jaxlib and its plugin wheels come from different releases: install the set the bundle pins.",
        "https://github.com/jax-ml/jax/issues/15876",
        "Windows RuntimeError: jaxlib is version 0.3.25, but this version of jax requires version >= 0.4.7.",
    ),
    sig(
        "pjrt-plugin-abi-mismatch",
        "bundle-skew",
        95,
        # older releases name the whole API table (PJRT_Api), newer ones the argument struct
        r"Unexpected (?:PJRT_Api|\w+_Args) size: expected \d+, got \d+"
        r"|The plugin is likely built with a (later|earlier) version than the framework"
        # a plugin older than the framework: a C API function the framework calls is only a stub
        # there (iree-org/iree#19223)
        r"|Unexpected error status .*\bUNIMPLEMENTED[;:] PJRT_\w+",
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
        "pip-resolution-impossible",
        "bundle-skew",
        65,
        # the resolver found no set of versions meeting every pin (pip's and uv's wordings)
        r"because these package versions have conflicting dependencies|\bResolutionImpossible\b"
        r"|No solution found when resolving dependencies"
        # PubGrub's conclusion (poetry, uv; pytorch/vision#7421: a torchvision pin that needs another torch)
        r"|\bversion solving failed\b"
        # uv's report under that line, of a pinned version no index holds (astral-sh/uv#1497: a torch
        # "+cpu" pin); a log cut below the first line still shows it
        r"|\bBecause there is no version of \S+==\S+(,| and)"
        r"|we can conclude that (the|your|\S+'s|your \S+'s) requirements are unsatisfiable"
        # the conda solvers of pixi and rattler (prefix-dev/pixi#3949: a CUDA jaxlib needing a __cuda
        # virtual package the host does not declare)
        r"|\bCannot solve the request because of: |\bcannot be installed because there are no viable options\b"
        r"|\bfailed to solve the conda requirements of\b",
        "The requested versions cannot be installed together: resolve the bundle as one locked set for "
        "this Python and platform, and install it into a fresh environment.",
        "https://github.com/kinalmehta/marl-jax/issues/3",
        "ERROR: Cannot install -r requirements.txt (line 43) and jax==0.4.1 because these package versions "
        "have conflicting dependencies.",
    ),
    sig(
        "pip-installed-over-environment",
        "bundle-skew",
        30,
        # a symptom: pip installed over packages it did not take into account (often harmless, so any
        # more specific failure later in the log wins; alone, it is the environment's set of packages)
        r"pip's dependency resolver does not currently take into account all the packages that are installed",
        "pip changed packages under others it did not check (it may have replaced a pinned one): install "
        "the bundle as one locked set into a fresh environment instead of adding to an existing one.",
        "https://github.com/google/flax/issues/2950",
        "ERROR: pip's dependency resolver does not currently take into account all the packages that are "
        "installed. This behaviour is the source of the following dependency conflicts.",
    ),
    sig(
        "pip-resolver-backtracking",
        "bundle-skew",
        30,
        # pip's resolver trying release after release of a package because none fits the other pins (or
        # this platform): a symptom, so any more specific failure later in the log wins
        r"pip is (still )?looking at multiple versions of \S+ to determine which version is compatible"
        r"|You might need to provide the dependency resolver with stricter constraints",
        "pip could not find versions that fit together and is backtracking: resolve the bundle as one "
        "locked set for this Python and platform (the TPU stack installs on Linux only) instead of "
        "letting pip search.",
        "https://github.com/google/tunix/issues/452",
        "INFO: pip is still looking at multiple versions of jax[tpu] to determine which version is "
        "compatible with other requirements. This could take a while.",
    ),
    sig(
        "pip-replaces-framework",
        "bundle-skew",
        25,
        # pip fetching (or uninstalling) torch, jax or their runtime because a package outside the framework's
        # own family pins it (not jax fetching its jaxlib, nor a requirements file): the environment's framework
        # is then the one that package chose, not the bundle's
        r"^\s*Collecting (torch|torch[_-]xla|jax|jaxlib|libtpu[\w-]*)\s*(\[[\w,]+\])?\s*[<>=~!]=?[^\s(]* "
        r"\(from (?!-[rc]\b|(torch|torch[_-]xla|jax|jaxlib|libtpu[\w-]*)\b)\S+"
        r"|^\s*Attempting uninstall: (torch|torch[_-]xla|jax|jaxlib|libtpu[\w-]*)\s*$",
        "pip replaced the framework to satisfy another package's pin: install the bundle's torch/jax "
        "wheels as one locked set, and pin (or constrain) them when adding packages.",
        "https://github.com/huggingface/accelerate/issues/2720",
        "Collecting torch>=1.10.0 (from accelerate)",
    ),
    sig(
        "cluster-version-mismatch",
        "bundle-skew",
        80,
        # a cluster framework comparing the versions a node runs with the head's (Ray's check at
        # connect; Dask's between client, scheduler and workers)
        r"Version mismatch: The cluster was started with|\bMismatched versions found\b"
        # Open MPI's daemons of different releases on two hosts failing to read each other's messages
        # (horovod/horovod#637)
        r"|Data unpack would read past end of buffer",
        "Two hosts of one cluster run different package versions: deploy the same locked bundle to every "
        "worker (and the head) and restart them together.",
        "https://github.com/ray-project/ray/issues/1263",
        "Exception: Version mismatch: The cluster was started with:",
    ),
    sig(
        "wheel-not-for-this-platform",
        "bundle-skew",
        75,
        # pip refusing a wheel whose tags (Python version, ABI, platform) do not match this interpreter
        r"\S+\.whl is not a supported wheel on this platform"
        # uv's wording of the same (airsenal#741: a locked jaxlib without a wheel for CPython 3.13)
        r"|can't be installed because it doesn't have a source distribution or wheel for the current platform"
        r"|only has wheels with the following Python (ABI|implementation) tags",
        "The wheel was built for another Python version or platform than this interpreter's: pin the "
        "wheel whose tags match the bundle's Python (cpXY) and platform, or the Python the wheel was made for.",
        "https://github.com/pytorch/xla/issues/4974",
        "ERROR: torch_xla-2.0-cp39-cp39-linux_x86_64.whl is not a supported wheel on this platform.",
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
        "library-submodule-missing",
        "bundle-skew",
        # a module inside a library around the frontends that the installed release moved or
        # removed (pytorch_lightning.metrics became torchmetrics); a top-level name missing is
        # left alone: that is more often a package never installed than one of the wrong release
        60,
        r"No module named '(pytorch_lightning|lightning|transformers|accelerate|diffusers|peft|equinox"
        r"|haiku|chex|trax|torchvision|torchaudio|torchtext|torchmetrics|deepspeed|timm|keras)\.[\w.]+'",
        "A module of an installed library is not where the code expects it: that release moved or removed "
        "it. Pin the library release the code was written for (with the frontend it supports) in the bundle.",
        "https://github.com/OATML/non-parametric-transformers/issues/3",
        "ModuleNotFoundError: No module named 'pytorch_lightning.metrics'",
    ),
    sig(
        "pip-url-dependency-refused",
        "bundle-skew",
        # an old jax release pinned its jaxlib by a direct storage URL, which pip will not follow for
        # a package from PyPI: the resolver had backtracked to that release (jax-ml/jax#7153)
        70,
        r"Packages installed from PyPI cannot depend on packages which are not also hosted on PyPI",
        "pip backtracked to a release whose metadata pins a dependency by URL, which PyPI packages may not "
        "do: pin the frontend and its runtime wheels (jax with jaxlib) to a validated pair explicitly.",
        "https://github.com/jax-ml/jax/issues/7153",
        "ERROR: Packages installed from PyPI cannot depend on packages which are not also hosted on PyPI.",
    ),
    sig(
        "torchvision-ops-missing",
        "bundle-skew",
        # torchvision's compiled operators did not register with the torch beside it: a torchvision
        # wheel built for another torch release or build (+cpu against CUDA)
        70,
        r"operator torchvision::\w+ does not exist|No such operator torchvision::\w+"
        r"|Couldn't load custom C\+\+ ops\. This can happen if your PyTorch and torchvision versions are incompatible"
        # its operators built without the device's kernels: a CPU-only torchvision beside a CUDA torch, or a
        # torch_xla build older than the fallback for them (pytorch/xla#2587)
        r"|Could not run 'torchvision::\w+' with arguments from the '\w+' backend"
        # a prebuilt torchvision registering over a source-built torch's (intel/torch-xpu-ops#1545)
        r"|the operator torchvision::\w+ already has an DispatchKey::Meta implementation",
        "torchvision was built for another torch than the one installed, or its operators have no kernel "
        "for this device: install the torchvision release (and build: cpu, CUDA) paired with the bundle's "
        "torch, and a torch_xla new enough to run them.",
        "https://github.com/pytorch/pytorch/issues/122494",
        "RuntimeError: operator torchvision::nms does not exist",
    ),
    sig(
        "extension-cpu-build-beside-cuda",
        "bundle-skew",
        # a graph library installed as its CPU-only build beside a CUDA torch: its runtime has no device
        # API to move a graph onto (dmlc/dgl#979, #5427: the maintainer's fix is the +cuXY build matching torch)
        70,
        r"Device API (cuda|gpu) is not enabled\. Please install the cuda version of dgl",
        "DGL is its CPU-only build beside a CUDA torch: install the DGL build for the bundle's torch and "
        "CUDA (dgl==X+cuXY from DGL's wheel index), pinned in the bundle with torch.",
        "https://github.com/dmlc/dgl/issues/979",
        "dgl._ffi.base.DGLError: [17:19:38] /opt/dgl/src/runtime/c_runtime_api.cc:88: Check failed: "
        "allow_missing: Device API gpu is not enabled. Please install the cuda version of dgl.",
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
        r"(jax|jaxlib|libtpu|torch|torch[_-]xla|torchvision|torchaudio|torchtext|flax)\b"
        # any package pinned to a release the index does not list, beside those it does (tensorflow/tensorflow#60428)
        r"|Could not find a version that satisfies the requirement \S+?[=<>~]=?[^\s(]+ \(from versions: (?!none)\w",
        "A pinned wheel (a frontend, its runtime or a library beside them) is not on the index (any more, or "
        "for this Python and platform): rebuild the bundle from versions that exist (and are validated "
        "together), not patched one wheel at a time.",
        "https://github.com/huggingface/diffusers/issues/8315",
        "ERROR: No matching distribution found for jaxlib==0.3.25",
    ),
    sig(
        "wheel-inconsistent-version",
        "bundle-skew",
        70,
        # pip >= 22 words it as the filename against the metadata (pytorch/xla#7785); uv words it
        # as the metadata's version against the filename's (vllm-project/vllm#13860)
        r"has inconsistent version: (expected|filename has) '[^']+', but metadata has"
        r"|Wheel version does not match filename: \S+ != \S+",
        "pip or uv refused a wheel of the bundle whose metadata disagrees with its name: pin a "
        "libtpu/jax/torch_xla release whose wheels are consistent, for the whole bundle.",
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
        r"|numpy\.dtype size changed, may indicate binary incompatibility|numpy\.core\.multiarray failed to import"
        # what NumPy 2 leaves for the next import of a module compiled against NumPy 1 (jax-ml/jax#21937)
        r"|AttributeError: _ARRAY_API not found"
        # torch's NumPy bridge when the NumPy beside it is not the major it was built for
        # (securefederatedai/openfl#999: torch 2.2 with NumPy 2)
        r"|RuntimeError: Numpy is not available",
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
        r"|(libc10_cuda|libtorch\w*|_XLAC\S*|xla_extension\S*|libjax\w*)\.so[\w.]*: cannot open shared object file"
        # a wheel built against a newer C or C++ runtime than the host's (glibc, libstdc++)
        r"|version [`'\u2018]?(GLIBC|GLIBCXX|CXXABI)_[\d.]+['\u2019]? not found \(required by"
        # the dynamic linker finding a library of another release than the one linked against (SkyPilot's
        # torch 1.13 wheel beside the image's cuBLAS, skypilot-org/skypilot#1327)
        r"|symbol \S+?,? version \S+ not defined in file \S+ with link time reference"
        # jax finding CUDA libraries older than those it was built against, before it drops to CPU
        # (conda-forge/jaxlib-feedstock#277)
        r"|Outdated (cuDNN|CUDA|cuBLAS|cuFFT|cuSOLVER|cuSPARSE|cuPTI|NCCL|NVRTC|nvJitLink) installation found"
        # the same check's wording in older releases (jax/_src/xla_bridge.py, _check_cuda_versions)
        r"|Found (cuDNN|CUDA|cuBLAS|cuFFT|cuSOLVER|cuSPARSE|cuPTI|NCCL) version \d+, but JAX was built against version"
        # the same check in the XLA runtime of older jaxlib releases (jax-ml/jax#6517)
        r"|Loaded runtime [Cc]u[Dd][Nn][Nn] library: \S+ but source was compiled with:? \S+"
        # torch's own check of the cuDNN it loaded (FurkanGozukara/Stable-Diffusion#9: a container's system
        # cuDNN found before the one the wheel bundles)
        r"|cuDNN version incompatibility: PyTorch was compiled\s+against \([\d, ]+\) but found runtime version"
        # the jax CUDA plugin's check of each CUDA library wheel beside it (google-deepmind/mujoco_playground#137,
        # fixed by reinstalling jax with its plugin)
        r"|Unable to load (cuDNN|cuBLAS|cuSPARSE|cuFFT|cuSOLVER|cuPTI|CUPTI|NCCL|NVRTC|nvJitLink|CUDA)\. "
        r"Is it installed\?"
        # an extension wheel built for another torch build (xFormers for +cu121 under a +cpu torch, open-mmlab/PIA#30;
        # bitsandbytes without a binary for the CUDA it found, bitsandbytes-foundation/bitsandbytes#551)
        r"|xFormers can't load C\+\+/CUDA extensions\. xFormers was built for"
        # every attention operator of such a wheel refusing the inputs (yufu-wang/PromptHMR#4)
        r"|^\s*xFormers wasn't build with CUDA support\s*$"
        r"|CUDA SETUP: Required library version not found: libbitsandbytes_cuda\d+\.so"
        # torch's check before building an extension against the CUDA toolkit it finds, by its first line
        # (NVIDIA/TransformerEngine#553; microsoft/GLIP#89, the message broken before "PyTorch")
        r"|The detected CUDA version \([\d.]+\) mismatches the version that was used to compile\b"
        # DeepSpeed's op builder making the same check before a JIT build (deepspeedai/DeepSpeedExamples#370)
        r"|DeepSpeed Op Builder: Installed CUDA version [\d.]+ does not match the version torch was compiled with"
        # jaxlib's GPU kernels calling a CUDA runtime older than theirs (sokrypton/ColabFold#532: an old jax
        # pinned after the platform moved to CUDA 12)
        r"|\bcuda\w+ symbol not found\b"
        # XLA's GPU compiler finding no cuDNN handle: the cuDNN it loaded is not the one jaxlib was built for
        # (jax-ml/jax#15230, a runtime cuDNN older than the build; ColabFold after a jax upgrade)
        r"|\) dnn != nullptr\b"
        # XLA finding the CUDA toolkit's ptxas (a pip wheel) newer than the host's driver (jax-ml/jax#18027,
        # CUDA wheels upgraded one by one past the driver)
        r"|The NVIDIA driver's CUDA version is \S+ which is older than the ptxas CUDA version"
        # two copies of TensorFlow's op registry in one process: an older torch_xla carries its own
        # TensorFlow and the pip tensorflow package registers the same ops again (pytorch/xla#2524)
        r"|Check failed: existing == nullptr .*already registered"
        # the same for protobuf: two extensions each linking their own copy of one .proto
        # (tensorflow/tensorflow#61593, a TensorFlow built against the system protobuf)
        r"|File already exists in database: \S+\.proto"
        # and for absl flags: jaxlib and a plugin built apart each defining XLA's flags
        # (conda-forge/jaxlib-feedstock#320)
        r"|Flag '\w+' was defined more than once",
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
        r"cannot import name '\w+' from '" + _INSTALLED_LIBS,
        "A library was installed for another release of the library it imports from (flax, optax and "
        "friends move with jax; peft with transformers): install the versions the bundle pins together.",
        "https://github.com/jax-ml/jax/issues/17508",
        "ImportError: cannot import name 'ShapedArray' from 'jax' (/usr/local/lib/python3.10/dist-packages/"
        "jax/__init__.py)",
    ),
    sig(
        "frontend-attribute-missing",
        "bundle-skew",
        65,
        r"(AttributeError(: |\(\"?)|^\W*)module '" + _INSTALLED_LIBS + r"[\w.]*' has no attribute"
        # jax's config object lost its define_*_state API (jax 0.4.25) under an older flax/orbax/chex
        r"|'Config' object has no attribute 'define_\w+_state'"
        # the TPU backend failing on it (JAX also probes the GPU plugins at INFO level, harmlessly)
        r"|Unable to initialize backend 'tpu': module '(jax|jaxlib|libtpu)\b[\w.]*' has no attribute",
        "An installed library's module lacks a name another installed package (or the library itself) "
        "expects: the versions do not belong together; install the set the bundle pins.",
        "https://github.com/blackjax-devs/blackjax/issues/787",
        "AttributeError: module 'jax.core' has no attribute 'Shape'",
    ),
    sig(
        "crypto-library-skew",
        "bundle-skew",
        # paramiko, pyOpenSSL and friends call into `cryptography`; an older or newer cryptography than
        # the one they were released against lacks a name they use, so the failure surfaces inside an
        # SSH connect or an HTTPS import although nothing on the network failed (paramiko/paramiko#1007,
        # #1498, #1492; pyca/pyopenssl#1142). Above ssh-client-frame, which such a traceback also matches.
        66,
        r"module '(cryptography|OpenSSL|nacl|bcrypt)\b[\w.]*' has no attribute|module 'lib' has no attribute 'X509_"
        r"|'_?\w*(PublicNumbers|PrivateNumbers|PublicKey|PrivateKey|Backend|CipherContext)' object has no attribute"
        r"|type object '_?\w*(PublicKey|PrivateKey)' has no attribute"
        # a member of cryptography's serialization enums (Encoding.Raw, PrivateFormat.OpenSSH) that the
        # installed release lacks, reported bare by older Pythons' Enum (paramiko/paramiko#1472)
        r"|^\s*AttributeError: (Raw|OpenSSH)\s*$",
        "The installed `cryptography` does not match what paramiko or pyOpenSSL were released against: "
        "install the versions that belong together (`pip install -U cryptography pyopenssl` in that "
        "environment, or orch's own locked environment for the controller).",
        "https://github.com/paramiko/paramiko/issues/1007",
        "AttributeError: 'EllipticCurvePublicNumbers' object has no attribute 'encode_point'",
    ),
    sig(
        "torch-xla-deprecated-api",
        "bundle-skew",
        # a symptom: torch_xla warns once per call of an API it has deprecated (2.5/2.6 for xrt_world_size
        # and get_ordinal, gone in 2.7), so the calling library was written for an older torch_xla; any
        # more specific failure in the same log wins (huggingface/transformers#37301)
        30,
        r"\btorch_xla\.[\w.]+(\(\))? (will be removed in release [\d.]+\. )?is deprecated\. Use torch_xla\."
        r"|\bfunction \w+ will be deprecated in release \d+\.\d+",
        "A library calls torch_xla APIs this torch_xla deprecated (the next release removes them): "
        "install the library release made for this torch_xla, or pin the torch_xla it was made for, as one bundle.",
        "https://github.com/huggingface/transformers/issues/37301",
        "WARNING:root:torch_xla.core.xla_model.xrt_world_size() will be removed in release 2.7. is deprecated. "
        "Use torch_xla.runtime.world_size instead.",
    ),
    sig(
        "torch-xla-spawn-nprocs-refused",
        "bundle-skew",
        # torch_xla (2.1 on) takes the device count from the environment and refuses any other nprocs: the
        # caller (a library such as accelerate, or a script) was made for an older torch_xla
        70,
        r"Unsupported nprocs \(\d+\)\. Please use the environment variable for the hardware you are using",
        "The caller passes xmp.spawn an nprocs this torch_xla refuses (it takes the device count from the "
        "environment): install the library release made for this torch_xla, or drop nprocs in the script.",
        "https://github.com/huggingface/accelerate/issues/3304",
        "ValueError: Unsupported nprocs (8). Please use the environment variable for the hardware you are using "
        "(X_NUM_DEVICES where X is CPU, GPU, TPU, NEURONCORE, etc)",
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
        r"|\bjax[\w.]* (was|were|has been) (deprecated in JAX v?[\d.]+ and )?removed in JAX v?\d+\.\d+"
        r"|\bargument to jnp\.\w+ was removed in JAX v?\d",
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
        "jaxlib-tpu-client-object-skew",
        "bundle-skew",
        75,
        # a jaxlib object (the pre-PJRT TPU client's buffer, the XLA extension's device list...) lacking
        # an attribute the library reading it expects from another release (huggingface/datasets#6884);
        # not the user-facing array (ArrayImpl), whose missing attributes are usually the program's own
        r"'jaxlib\.(?:tpu_client_extension\.\w+|(?:xla_extension|_jax)\.(?!ArrayImpl')\w+)' object has no attribute",
        "A library (flax, optax, datasets...) was written for another jax/jaxlib release than installed "
        "(older or newer): install the versions the bundle pins together.",
        "https://github.com/google/flax/issues/1583",
        "AttributeError: 'jaxlib.tpu_client_extension.PyTpuBuffer' object has no attribute 'dtype'",
    ),
    sig(
        "library-needs-newer-dependency",
        "bundle-skew",
        70,
        # transformers/accelerate style: a library's own check of a dependency's minimum version
        r"requires `[A-Za-z][\w.-]*>=\d[\w.]*`"
        # and transformers' require_version, naming the release found (databrickslabs/dolly#209)
        r"|is required for a normal functioning of this module, but found ",
        "A library in the bundle needs another release of one of its dependencies (mostly newer) than "
        "installed: lock the pair that works together in the bundle instead of upgrading one alone.",
        "https://github.com/GoogleCloudPlatform/ml-testing-accelerators/pull/917",
        "Exception in device=TPU:0: Using the `Trainer` with `PyTorch` requires `accelerate>=0.19.0`: Please "
        "run `pip install transformers[torch]` or `pip install accelerate -U`",
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
    sig(
        "python-too-old-for-package",
        "bundle-skew",
        75,
        # the package's own check, then pip's refusal of a wheel whose Requires-Python excludes this interpreter
        r"\b\w+ requires Python \d+\.\d+ or (newer|later)|requires a different Python: [\d.]+ not in '",
        "The bundle's Python is older than a package in it supports: pin the package release that still "
        "supports this Python, or build the bundle on the Python the package requires.",
        "https://github.com/jax-ml/jax/issues/16616",
        "ERROR: JAX requires Python 3.9 or newer, found  (3, 8)",
    ),
    sig(
        "python-syntax-newer-than-interpreter",
        "bundle-skew",
        45,
        # PEP 604 annotations (`str | None`, Python 3.10) evaluated by an older interpreter at import
        # (conda-forge/jax-feedstock#155)
        r"TypeError: unsupported operand type\(s\) for \|: '(type|ABCMeta|_GenericAlias|typing\.\w+)' and "
        r"'(NoneType|type|ABCMeta|_GenericAlias)'"
        # PEP 585 generics (`type[M]`, `list[int]`, Python 3.9) the same way (google/flax#3329)
        r"|TypeError: '(type|ABCMeta)' object is not subscriptable",
        "An installed package uses syntax newer than the bundle's Python (`X | None` needs 3.10, `list[int]` "
        "3.9): pin a release of it that supports this Python, or build the bundle on a newer one.",
        "https://github.com/conda-forge/jax-feedstock/issues/155",
        "TypeError: unsupported operand type(s) for |: 'type' and 'NoneType'",
    ),
)
