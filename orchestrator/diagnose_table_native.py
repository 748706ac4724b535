"""Signatures of native builds and toolchains that do not belong to the device or to each other: a
framework built without CUDA at all, a framework or extension built without the GPU's architecture
(or a compiler too old to know it), an object built by a newer CUDA than the toolkit linking it, a
Triton kernel written for another Triton's language, a library calling flash-attn with another
release's signature (or torchvision calling Pillow's core with a fill it cannot take), an inference
runtime's GPU provider built for another CUDA, an extension build that cannot find the CUDA runtime
it links, a graph extension built from source because no wheel matched the pins, an extension built
without its GPU kernels, an MPI launcher of another implementation than the one the launcher wrapper
drives. All are bundle-skew: the fix is a build or an install that matches, never the user's code.

Data only: see orchestrator/diagnose_table.py for how a signature is written and sourced.
"""

from __future__ import annotations

from orchestrator.diagnose_sig import Signature, sig

NATIVE_SIGNATURES: tuple[Signature, ...] = (
    # -------------------------------------------------------------- bundle-skew
    sig(
        "torch-built-without-cuda",
        "bundle-skew",
        # torch's CPU-only wheel where the environment was built for a CUDA one: an update or a node's
        # requirements let pip resolve the default index's torch over the CUDA build (Comfy-Org/ComfyUI#2427:
        # fixed by reinstalling torch from the cu118 index; facebookresearch/detectron2#460: "a pytorch
        # installation issue"). On a host with no GPU at all the same words mean the program wants CUDA, but
        # the threads that name a fix mostly install the CUDA build. Only as the raised error: a server
        # probing for a GPU logs the same words as a warning and goes on.
        50,
        r"^\s*AssertionError: Torch not compiled with CUDA enabled\s*$",
        "The torch that ran is a CPU-only build where the environment expects a CUDA one: reinstall the "
        "torch wheel the bundle pins from its CUDA index (and pin it, so an update cannot resolve the "
        "default index's build over it); on a TPU lane, the program asked for CUDA.",
        "https://github.com/Comfy-Org/ComfyUI/issues/2427",
        "AssertionError: Torch not compiled with CUDA enabled",
    ),
    sig(
        "gpu-arch-not-in-build",
        "bundle-skew",
        # the installed torch (or a CUDA extension) carries no kernels for this GPU's architecture: a new
        # GPU under an older build (lmoe/wyoming-xtts#1: sm_120 under a cu124 torch, fixed by a cu128
        # image), an old GPU under a newer build, an extension compiled for other arches
        # (HRNet/HigherHRNet-Human-Pose-Estimation#95: fixed by the +cu110 wheels for the GPU)
        50,
        r"with CUDA capability sm_\d+ is not compatible with the current PyTorch installation"
        r"|no kernel image is available for execution on the device"
        # the same in older words (WongKinYiu/ScaledYOLOv4#183: fixed by the torch pair the project pins), and
        # cuBLAS refusing fp32 batched GEMM under a build made without this GPU (muskie82/MonoGS#96: a CUDA 11.8
        # install; zhaofuq/LOD-3DGS#25: torch's cu116 wheels on an A800)
        r"|\b(CUDA|HIP) error: invalid device function\b"
        r"|CUBLAS_STATUS_NOT_SUPPORTED when calling `?cublasSgemmStridedBatched\("
        # the compiler a build or a JIT uses too old to know the GPU's architecture (triton-lang/triton#8539:
        # the ptxas inside Triton's wheel on an sm_121 GPU; nvcc's own words for the same)
        r"|ptxas fatal +: Value '(sm|compute)_\w+' is not defined for option 'gpu-name'"
        r"|nvcc fatal +: Unsupported gpu architecture '(compute|sm)_\w+'"
        # (rosalindfranklininstitute/cuda-slic#2: PyCUDA's JIT asking an older nvcc for sm_86)
        r"|nvcc fatal +: Value '(sm|compute)_\w+' is not defined for option 'gpu-architecture'"
        # NVRTC of the CUDA that torch was built with, JIT-compiling a fused kernel for a newer GPU
        # (YINYIPENG-EN/handpose_and_yolo#1: fixed by torch 2.1 for cu118; stelabou/HyperReenact#7)
        r"|nvrtc: error: invalid value for --gpu-architecture \(-arch\)",
        "The installed build has no kernels for this GPU's architecture, or its compiler does not know it: "
        "install the framework wheels built for it (a CUDA release that supports the GPU, e.g. cu128 for "
        "sm_120), rebuild the extension with the GPU in TORCH_CUDA_ARCH_LIST with a CUDA that knows it (or "
        "point TRITON_PTXAS_PATH at that CUDA's ptxas), and pin that build in the bundle.",
        "https://github.com/HRNet/HigherHRNet-Human-Pose-Estimation/issues/95",
        "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    ),
    sig(
        "cuda-object-newer-than-toolkit",
        "bundle-skew",
        # the CUDA linker of an older toolkit given an object a newer CUDA built (the two numbers are the
        # releases, 118 = 11.8): XLA linking jaxlib's CUDA 11.8 kernels with the host's 11.4 nvlink
        # (danijar/dreamerv3#64: fixed by installing the 11.8 toolkit); a build mixing two toolkits' nvcc
        # and libraries (ihaque/memtestG80#15, openhackathons-org/gpubootcamp#55)
        50,
        r"nvlink fatal +: Input file '[^']*' newer than toolkit \(\d+ vs ?\d+\)",
        "Two CUDA releases are mixed: an object built by the newer one (the first number) is linked by the "
        "older toolkit's nvlink (the second). Put the toolkit matching the wheels first on PATH (for jax, the "
        "nvidia-cuda-nvcc wheel of its CUDA), or install the wheels built for the host's CUDA, and pin them "
        "in the bundle.",
        "https://github.com/danijar/dreamerv3/issues/64",
        "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: nvlink exited with non-zero error code 256,output: nvlink "
        "fatal  : Input file '/tmp/tempfile-llpc-cab04a7-18966-5fd3b5872b691.cubin' newer than toolkit (118 vs114)",
    ),
    sig(
        "onnxruntime-provider-of-another-cuda",
        "bundle-skew",
        # ONNX Runtime's CUDA (or TensorRT) provider library cannot load the CUDA or cuDNN libraries its build
        # links: an onnxruntime-gpu for CUDA 11 beside CUDA 12 (stepfun-ai/Step-Audio-EditX#3: fixed by the
        # release built for CUDA 12), or for cuDNN 9 beside cuDNN 8 (Holasyb918/HeyGem-Linux-Python-Hack#5);
        # the session then runs on the CPU provider unless told not to (microsoft/onnxruntime#17801)
        50,
        r"Failed to load library libonnxruntime_providers_(cuda|tensorrt|rocm)\.so with error: \S+: cannot open "
        r"shared object file"
        r"|Failed to create (CUDA|TensorRT)ExecutionProvider\. Require cuDNN \d+\.\* and CUDA \d+\.\*"
        # the same on Windows, where the provider's DLL names no library (neuralchen/SimSwap#98 and
        # cubiq/ComfyUI_InstantID#27: fixed by the CUDA and cuDNN the release was built for)
        r"|CUDA_PATH is set but CUDA wasn'?t able to be loaded\b",
        "ONNX Runtime's GPU provider cannot load the CUDA or cuDNN libraries its build was made for (the missing "
        "library names them: libcublasLt.so.11 is CUDA 11's, libcudnn.so.9 cuDNN 9's): install the "
        "onnxruntime-gpu release built for the bundle's CUDA and cuDNN, and check the session's providers, "
        "since it falls back to the CPU otherwise.",
        "https://github.com/stepfun-ai/Step-Audio-EditX/issues/3",
        "FAIL : Failed to load library libonnxruntime_providers_cuda.so with error: libcublasLt.so.11: cannot open "
        "shared object file: No such file or directory",
    ),
    sig(
        "cuda-libraries-of-another-release",
        "bundle-skew",
        # a framework's native build loading the CUDA or cuDNN libraries of the release it links, and the
        # environment has another (or none): CTranslate2 built for CUDA 11 on an image moved to CUDA 12
        # (Softcatala/whisper-ctranslate2#74: fixed by installing CUDA 11's cuBLAS), a build for cuDNN 9
        # where it is absent (QuentinFuxa/WhisperLiveKit#271: the maintainer's fix, a cuDNN matching the
        # builds). cuDNN's own loader names the sub-library it could not open.
        50,
        r"\bLibrary (lib(cublas|cublasLt|cudnn\w*|cudart|cufft|curand|cusparse)\.so\.\d+|cu\w+64_\d+\.dll) is not "
        r"found or cannot be loaded\b"
        r"|\bUnable to load any of \{libcudnn\w*\.so\.\d+"
        r"|\bCould not load library libcudnn\w*\.so\.\d+\. Error: |\bCould not locate cudnn_\w+64_\d+\.dll\b",
        "The native build needs the CUDA or cuDNN libraries of the release it was built for (the missing "
        "library's version names it: libcublas.so.11 is CUDA 11's, libcudnn_ops.so.9 cuDNN 9's): install "
        "the framework's build for the bundle's CUDA and cuDNN, or add those libraries (the nvidia-*-cu1X "
        "wheels) to the bundle, then check the job runs on the GPU.",
        "https://github.com/Softcatala/whisper-ctranslate2/issues/74",
        "RuntimeError: Library libcublas.so.11 is not found or cannot be loaded",
    ),
    sig(
        "torchaudio-ffmpeg-of-another-release",
        "bundle-skew",
        # torchaudio's media extension (torio) finding no FFmpeg of the majors its build supports: FFmpeg 7
        # installed where torchaudio 2.6 loads 4 to 6 (livepeer/comfystream#44: fixed by installing ffmpeg<7)
        50,
        r"Failed to ini?tialize FFmpeg extension\. Tried versions: \[",
        "torchaudio found no FFmpeg of the major versions its build loads (the message lists them): install "
        "an FFmpeg release in that range beside it (conda's ffmpeg<7 for torchaudio 2.6), or the torchaudio "
        "that supports the FFmpeg installed, and pin both in the bundle.",
        "https://github.com/livepeer/comfystream/issues/44",
        "ImportError: Failed to intialize FFmpeg extension. Tried versions: ['6', '5', '4', '']. Enable DEBUG "
        "logging to see more details about the error.",
    ),
    sig(
        "extension-source-for-older-torch",
        "bundle-skew",
        # a CUDA extension's source written against a torch API a newer torch removed, failing to compile
        # (IDEA-Research/GroundingDINO#388: tensor.type() passed where torch 2.6 wants a ScalarType, fixed
        # by the project's patch or by the torch it was written for); THC's header (gone in torch 1.11)
        # and AT_CHECK (gone in 1.5) are the same break for older sources
        50,
        r'no suitable conversion function from "const at::DeprecatedTypeProperties" to "c10::ScalarType"'
        r"|\bTHC/THC\.h: No such file or directory|identifier \"AT_CHECK\" is undefined"
        # the compiler quoting the include it failed on (facebookresearch/maskrcnn-benchmark#1340: torch 1.11)
        r"|^\s*\d+ \| #include [<\"]THC/THC\.h[>\"]"
        r"|\W+AT_CHECK\W+ was not declared in this scope",
        "The extension's source uses a torch API the installed torch removed: build it against the torch "
        "release the project pins (and pin that torch in the bundle), or use the project's source patched "
        "for this torch.",
        "https://github.com/IDEA-Research/GroundingDINO/issues/388",
        "GroundingDINO/groundingdino/models/GroundingDINO/csrc/MsDeformAttn/ms_deform_attn_cuda.cu(65): error: no "
        'suitable conversion function from "const at::DeprecatedTypeProperties" to "c10::ScalarType" exists',
    ),
    sig(
        "cusolver-of-another-cuda",
        "bundle-skew",
        # jaxlib's cuSolver kernels failing to create their handle: the CUDA an image's jaxlib was built for
        # does not run on its GPU and libraries (google-deepmind/alphafold#11: a jaxlib for the image's
        # CUDA; #306: the image's CUDA 10.1 raised to 11.1; #329 the same). Device memory that JAX
        # preallocated can starve the same handle, so the remedy names both.
        45,
        r"\b(cu|gpu)solverDnCreate\(&handle\)\)? failed: cuSolver internal error"
        r"|\bRuntimeError: cuSolver internal error\s*$",
        "cuSolver could not start: the jaxlib (or torch) build does not match the CUDA libraries and GPU "
        "beside it; install the build for the bundle's CUDA (one that supports this GPU). If they match, "
        "lower JAX's preallocation (XLA_PYTHON_CLIENT_MEM_FRACTION) so the solver's handle has memory.",
        "https://github.com/google-deepmind/alphafold/issues/306",
        "RuntimeError: jaxlib/cusolver_kernels.cc:44: operation cusolverDnCreate(&handle) failed: cuSolver "
        "internal error",
    ),
    sig(
        "triton-kernel-for-another-triton",
        "bundle-skew",
        # a Triton kernel written against a pre-release Triton whose tl.dot took trans_a/trans_b, run under
        # a Triton that dropped them (mosaicml/llm-foundry#78: "not using the pinned version of triton";
        # the same kernel in flash-attention's flash_attn_triton.py and the models that copied it)
        55,
        r"dot\(\) got an unexpected keyword argument 'trans_[ab]'|^\s*\S[^\n]*\btl\.dot\([^\n]*\btrans_[ab]=True",
        "The Triton kernel was written for another Triton (tl.dot's trans_a/trans_b are gone since Triton "
        "2.0): install the Triton version the project pins beside its torch, or use its non-Triton path.",
        "https://github.com/mosaicml/llm-foundry/issues/78",
        "TypeError: dot() got an unexpected keyword argument 'trans_b'",
    ),
    sig(
        "flash-attn-of-another-release",
        "bundle-skew",
        # a library calling flash-attn's functions with an older flash-attn release's signature
        # (feifeibear/long-context-attention#64: softcap, added in flash-attn 2.6). Not an unexpected
        # keyword: a library passing a newer release's argument is skew in some threads and, in the
        # same library's #158, its own version check sending a supported release down the wrong branch.
        55,
        r"\b_?flash_attn_\w*\(\) missing \d+ required (positional|keyword-only) arguments?"
        # a library importing a newer release's function under try/except, flash-attn 1 installed
        # (imoneoi/openchat#52: the code had moved to flash-attn 2)
        r"|NameError: name '_?flash_attn_\w+' is not defined",
        "A library calls flash-attn with another release's signature: install the flash-attn release the "
        "library pins (or the library release made for the installed flash-attn), as one bundle.",
        "https://github.com/feifeibear/long-context-attention/issues/64",
        "[rank1]: TypeError: _flash_attn_forward() missing 1 required positional argument: 'softcap'",
    ),
    sig(
        "torchvision-fill-of-another-release",
        "bundle-skew",
        # torchvision 0.5.0's rotate and affine passing a three-band fill to Pillow's core for a one-band
        # image (pytorch/vision#1759, fixed in the next release): learnables/learn2learn#100 (the maintainer
        # names that bug), tristandeleu/pytorch-meta#23 (fixed by the library's pins), and
        # LeeJunHyun/Image_Segmentation#53 (by another torch and torchvision). Only with its "3 given".
        40,
        r"^\s*TypeError: function takes exactly 1 argument \(3 given\)\s*$",
        "Pillow's core was handed a three-band fill for a one-band (grayscale) image: torchvision 0.5.0's "
        "rotate and affine do this. Install the torchvision release the project pins (one with the fix) "
        "paired with the bundle's torch, or pass a fill with one value per band.",
        "https://github.com/learnables/learn2learn/issues/100",
        "TypeError: function takes exactly 1 argument (3 given)",
    ),
    sig(
        "extension-build-cudart-not-found",
        "bundle-skew",
        # a CUDA extension's build (torch.utils.cpp_extension, often a JIT build at import) linking a CUDA
        # runtime library that is not where the build looks: a conda CUDA whose libraries are not in the
        # lib64 torch's helper names (nerfstudio-project/nerfstudio#2748), no runtime package installed
        # (ivan-chai/torch-linear-assignment#2: fixed by building against the system CUDA)
        45,
        r"\bld: (cannot find|找不到) -l(cudart|cudadevrt|cublas|cublasLt|cusparse|curand|cufft|cusolver|cudnn|nccl)\b",
        "The extension's build cannot find the CUDA runtime it links: build against a complete CUDA toolkit "
        "of the bundle's CUDA release (CUDA_HOME, or the cuda-cudart package of that release in the "
        "environment), or install the project's prebuilt wheel for the bundle's torch and CUDA.",
        "https://github.com/ivan-chai/torch-linear-assignment/issues/2",
        "../../x86_64-conda-linux-gnu/bin/ld: cannot find -lcudart: No such file or directory",
    ),
    sig(
        "graph-extension-built-from-source",
        "bundle-skew",
        # pip building the graph library's companion extensions (torch-scatter, torch-sparse, ...) from source:
        # their wheels are published per torch and CUDA release, so a source build means the pins missed
        # them, a release left unpinned (rusty1s/pytorch_scatter#283: only 2.0.7 on that page) or a torch
        # with no wheel page (pyg-team/pytorch_geometric#2971: fixed by the torch-1.8.0 page; a nightly,
        # rusty1s/pytorch_scatter#345)
        45,
        r"\bFailed (building wheel for|to build) (torch[-_](scatter|sparse|cluster|spline[-_]conv)|pyg[-_]lib)\b"
        r"|^\s*╰─> (torch[-_](scatter|sparse|cluster|spline[-_]conv)|pyg[-_]lib)\s*$",
        "pip built the graph library's extension from source because no prebuilt wheel matched the pins: "
        "pin the extension's release listed on the wheel page of the bundle's exact torch and CUDA "
        "(data.pyg.org/whl/torch-<version>+<cuda>.html), or pin a torch that has such a page.",
        "https://github.com/pyg-team/pytorch_geometric/issues/2971",
        "ERROR: Failed building wheel for torch-scatter",
    ),
    sig(
        "extension-built-without-cuda",
        "bundle-skew",
        # a CUDA extension (PyTorch3D's, detectron2's ops) built with no CUDA toolchain in reach, so its
        # GPU kernels were left out: the op raises this on the first CUDA tensor (radekd91/emoca#27: fixed
        # by building again with CUDA_HOME set; facebookresearch/pytorch3d#1878, a maintainer's diagnosis)
        45,
        r"^\s*RuntimeError: Not compiled with GPU support\b",
        "The extension was built without its GPU kernels (no CUDA toolkit found when it compiled): install "
        "its prebuilt wheel for the bundle's torch and CUDA, or build it again with CUDA_HOME pointing at that "
        "CUDA release (FORCE_CUDA=1 on a host without a GPU).",
        "https://github.com/radekd91/emoca/issues/27",
        "RuntimeError: Not compiled with GPU support",
    ),
    sig(
        "mpi-launcher-of-another-implementation",
        "bundle-skew",
        # MPICH's mpiexec (Hydra) handed Open MPI's options by a launcher wrapper written for Open MPI
        # (zhijian-liu/torchpack#36: "you have installed MPICH instead of OpenMPI"; horovodrun, the same)
        60,
        r"match_arg \([^)]*\): unrecognized argument (allow-run-as-root|oversubscribe|mca|map-by|bind-to|npernode"
        r"|x)\b",
        "The mpiexec on the path is MPICH's, but the launcher passes Open MPI's options: install Open MPI in "
        "the environment (and mpi4py built against it), or put its mpirun first on PATH on every worker.",
        "https://github.com/mit-han-lab/spvnas/issues/11",
        "[mpiexec@AcerNitro] match_arg (utils/args/args.c:163): unrecognized argument allow-run-as-root",
    ),
)
