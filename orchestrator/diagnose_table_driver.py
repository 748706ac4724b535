"""Signatures of the accelerator driver stack under the frameworks: the NVIDIA driver as a process and
a container see it, an OpenCL platform, the container runtime's GPU hook, the NVSwitch fabric's
Fabric Manager, NVIDIA's runtime libraries that serialise for one version of themselves (TensorRT's
engines), and the EFA fabric library NCCL sends through.

Their layers differ by what owns the failure: a driver or Fabric Manager that does not match what
runs on it is bundle-skew, a process that cannot see the driver (or loads the toolkit's stub of it)
is runtime-proof, a fabric that is not usable is hardware. Data only: see
orchestrator/diagnose_table.py for how a signature is written and sourced.
"""

from __future__ import annotations

from orchestrator.diagnose_sig import Signature, sig

DRIVER_SIGNATURES: tuple[Signature, ...] = (
    # ---------------------------------------------------------- runtime-proof
    sig(
        "torch-no-nvidia-driver",
        "runtime-proof",
        # torch finding no NVIDIA driver where the job expected GPUs: on a GPU host, the container was
        # started without the devices and driver passed in (NVIDIA/enroot#205: NVIDIA_VISIBLE_DEVICES unset)
        40,
        r"Found no NVIDIA driver on your system\.",
        "The process sees no NVIDIA driver: on a GPU host the container runtime did not pass the GPUs in "
        "(set NVIDIA_VISIBLE_DEVICES / --gpus, or the runtime's GPU hook); elsewhere the job ran on a host "
        "without GPUs. Prove the device before the run (`orch probe`).",
        "https://github.com/NVIDIA/enroot/issues/205",
        "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
        "installed a driver from http://www.nvidia.com/Download/index.aspx",
    ),
    sig(
        "nvml-not-in-container",
        "runtime-proof",
        # the NVIDIA device plugin (or any NVML user in a container) not finding the driver's NVML library:
        # the node has no driver, or the container runtime does not mount it (awslabs/amazon-eks-ami#1744: a
        # GPU node image shipped without the libraries; NVIDIA/k8s-device-plugin#479: the runtime not
        # configured for containerd)
        45,
        r"could not load NVML library: libnvidia-ml\.so(\.1)?: cannot open shared object file"
        r"|If this is a GPU node, did you configure the NVIDIA Container Toolkit\?"
        # Docker asked for GPUs with no NVIDIA runtime installed to provide them (dstackai/dstack#1947), and the
        # runtime's hook finding no driver loaded on the host (dstackai/dstack#1942: a GPU image on a CPU instance)
        r'|could not select device driver "" with capabilities: \['
        r"|nvidia-container-cli: initialization error: nvml error: driver not loaded",
        "The container does not see the NVIDIA driver: install the driver on the node and configure the "
        "NVIDIA Container Toolkit as the runtime, then restart the device plugin; no pod gets a GPU until then.",
        "https://github.com/awslabs/amazon-eks-ami/issues/1744",
        "I0402 12:47:47.247350       1 factory.go:104] Detected non-NVML platform: could not load NVML library: "
        "libnvidia-ml.so.1: cannot open shared object file: No such file or directory",
    ),
    sig(
        "cuda-no-device",
        "runtime-proof",
        # a CUDA program raising that it found no device: the host has none the process may see (a CPU
        # node, CUDA_VISIBLE_DEVICES empty, a container without GPUs; YoshitakaMo/localcolabfold#63: a
        # step forced onto CUDA on a CPU-only host). Only as an error: jax and TensorFlow log the same
        # words as a warning on every host without a GPU ("failed call to cuInit"), then go on.
        40,
        r"(Error|Exception)\b[^\n]*(no CUDA-capable device is detected|\bCUDA_ERROR_NO_DEVICE\b)",
        "The process found no CUDA device: it ran on a host without GPUs, or they were hidden from it "
        "(CUDA_VISIBLE_DEVICES, a container started without them); prove the device before the run "
        "(`orch probe`).",
        "https://github.com/YoshitakaMo/localcolabfold/issues/63",
        "simtk.openmm.OpenMMException: Error initializing CUDA: CUDA_ERROR_NO_DEVICE (100) at "
        "/home/conda/feedstock_root/build_artifacts/openmm_1622798721771/work/platforms/cuda/src/CudaContext.cpp:138",
    ),
    sig(
        "cuda-operation-not-supported",
        "runtime-proof",
        # the CUDA runtime started under a policy this GPU and driver cannot run: most often the
        # cudaMallocAsync allocator a launcher set by default (lllyasviel/Fooocus#96: fixed by dropping it, so
        # torch starts on its native allocator; Comfy-Org/ComfyUI#940: the GPUs its cuda-malloc default fails on)
        45,
        # Not a library refusing one call (pytorch/pytorch#132928: cuSPARSELt without fp32 on that GPU).
        r"\bCUDA (driver )?error: operation not supported\b(?! when calling\b)|\bcudaErrorNotSupported\b",
        "The CUDA runtime was asked for something this GPU and driver cannot do: most often the "
        "cudaMallocAsync allocator (PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, a launcher's "
        "cuda-malloc default) on a GPU or driver without it; drop that setting from the lane's runtime "
        "profile (or update the driver), then prove the device again (`orch probe`).",
        "https://github.com/lllyasviel/Fooocus/issues/96",
        "RuntimeError: CUDA error: operation not supported",
    ),
    sig(
        "opencl-no-platform",
        "runtime-proof",
        # an OpenCL runtime that finds no platform: the GPU's compute driver (its OpenCL ICD) is not installed,
        # so a GPU plugin cannot start (intel/inference-engine-node#36: OpenVINO's GPU plugin, fixed by
        # installing Intel's OpenCL driver)
        45,
        r"\bclGetPlatformIDs (error -1001|failed: PLATFORM_NOT_FOUND_KHR)\b|\bCL_PLATFORM_NOT_FOUND_KHR\b",
        "The OpenCL runtime found no platform: the GPU's compute driver (its OpenCL ICD under "
        "/etc/OpenCL/vendors) is not installed or not visible in the container; install it, then prove the "
        "device before the run (`orch probe`).",
        "https://github.com/intel/inference-engine-node/issues/36",
        "[CLDNN ERROR]. clGetPlatformIDs error -1001",
    ),
    sig(
        "cuda-driver-library-not-found",
        "runtime-proof",
        # the CUDA driver's library not on the loader's path: WSL2 keeps it in /usr/lib/wsl/lib
        # (NVIDIA/cuda-python#17), a container gets it only from the runtime's GPU hook
        45,
        r"Failed to dlopen libcuda\.so|\blibcuda\.so(\.1)?: cannot open shared object file"
        # Warp's words, before it comes up with the CPU device only (NVIDIA/warp#672: no driver on the host)
        r"|\bCould not open libcuda\.so\b",
        "The process cannot load the NVIDIA driver's libcuda: on WSL2 add /usr/lib/wsl/lib to the "
        "loader's path, in a container start it with the GPUs (the runtime's hook mounts the driver), "
        "elsewhere install the driver; prove the device before the run (`orch probe`).",
        "https://github.com/NVIDIA/cuda-python/issues/17",
        "RuntimeError: Failed to dlopen libcuda.so",
    ),
    sig(
        "cuda-driver-stub-loaded",
        "runtime-proof",
        # the CUDA toolkit's stub libcuda (lib64/stubs, made for linking on a host without a driver) found
        # before the driver's: every driver call returns error 34 (NVIDIA/warp#219, a maintainer's
        # diagnosis; numba/numba#8985 and NVIDIA/FasterTransformer#275, fixed by dropping the stubs from
        # the loader's path)
        50,
        r"\bCUDA driver is a stub library\b|\bCUDA_ERROR_STUB_LIBRARY\b|\bcudaErrorStubLibrary\b"
        r"|Failed to get driver entry point '\w+' \(CUDA error 34\)|\bCudaAPIError: \[34\]",
        "The process loaded the CUDA toolkit's stub libcuda (its lib64/stubs directory, for linking only) "
        "instead of the driver's: take the stubs directory off LD_LIBRARY_PATH (and the loader's config) so "
        "the driver's libcuda.so.1 is found first, then prove the device before the run (`orch probe`).",
        "https://github.com/NVIDIA/warp/issues/219",
        "Warp CUDA error: Failed to get driver entry point 'cuInit' (CUDA error 34)",
    ),
    sig(
        "cuda-init-unknown-error",
        "runtime-proof",
        # CUDA's initialisation failing with its catch-all 999: the host's driver state, not the program
        # (mkiol/dsnote#111: the /dev/nvidia-uvm device node missing; the unified-memory module left broken
        # after a suspend is the other common case). torch logs it as a warning and goes on with no GPU.
        45,
        r"CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up environment"
        r"|\bcuInit\b[^\n]*\bCUDA_ERROR_UNKNOWN \(999\)|\bcudaInitDevice error: 999\b",
        "CUDA could not initialise on this host (error 999): the driver's device nodes or modules are not "
        "in a usable state (a missing /dev/nvidia-uvm, nvidia_uvm broken after a suspend): reload the "
        "module or create the node (nvidia-modprobe -u -c=0), or reboot, then prove the device "
        "(`orch probe`); the job otherwise runs on the CPU.",
        "https://github.com/mkiol/dsnote/issues/111",
        "[W] 18:45:34.438195691.438 0x72ab2e18cd00 operator():417 - cuInit error: CUDA_ERROR_UNKNOWN (999)",
    ),
    sig(
        "cuda-mps-client-cannot-connect",
        "runtime-proof",
        # a process on a GPU shared through MPS (Multi-Process Service) that cannot reach the MPS server:
        # the control daemon runs outside the container's view (NVIDIA/nvidia-container-toolkit#714: started
        # on the host, fixed by running it where the clients see its pipes), or the server, started for
        # a non-root user, cannot open its pipe directory (bottlerocket-os/bottlerocket#4673: /run/nvidia
        # mode 0700, fixed by 0755; the excerpt is strace's)
        55,
        r"MPS client failed to connect to the MPS control daemon or the MPS server"
        r"|\bmps/\S*pipe/(log|control)\b[^\n]*= -1 EACCES \(Permission denied\)",
        "The CUDA runtime cannot reach the GPU's MPS server: start the MPS control daemon where the "
        "job's processes see its pipe and log directories (inside the container, or share them into it), "
        "with permissions the job's user can open; or turn MPS off for the lane. Prove the device "
        "(`orch probe`) before the run.",
        "https://github.com/NVIDIA/nvidia-container-toolkit/issues/714",
        "RuntimeError: Unexpected error from cudaGetDeviceCount().  Did you run some cuda functions before "
        "calling NumCudaDevices() that might have already set an error?  Error 805: MPS client failed to "
        "connect to the MPS control daemon or the MPS server.",
    ),
    sig(
        "wsl-gpu-mapping-refused",
        "runtime-proof",
        # WSL2's GPU paravirtualisation refusing to make an allocation resident: CUDA's virtual memory calls
        # (PyTorch's expandable_segments, an engine's allocator) are not fully supported there; the driver
        # error that follows reads like memory but is not (syv-ai/qwen38-27b-rtx3090#2: the fix turned
        # expandable segments off on WSL)
        55,
        r"dxgkio_make_resident: Ioctl failed: -?\d+",
        "WSL2's GPU driver refused a mapping the allocator asked for (CUDA virtual memory, e.g. PyTorch's "
        "expandable_segments): turn that allocator mode off on WSL hosts or update the Windows GPU driver; "
        "device memory did not run out.",
        "https://github.com/syv-ai/qwen38-27b-rtx3090/issues/2",
        "dxgkio_make_resident: Ioctl failed: -12",
    ),
    sig(
        "container-gpu-hook-failed",
        "runtime-proof",
        # the container runtime's GPU hook failing to mount the driver's files and devices into the container
        # (NVIDIA/nvidia-docker#957: fixed by updating libnvidia-container; enroot's 98-nvidia.sh hook runs
        # the same nvidia-container-cli): the process starts without its GPUs, or not at all
        50,
        r"nvidia-container-cli: mount error: |hooks\.d/98-nvidia\.sh exited with return code \d+",
        "The container runtime could not hand the GPUs to the container (its NVIDIA hook failed to mount the "
        "driver): update the NVIDIA Container Toolkit / libnvidia-container to match the host's driver, check "
        "the devices it names exist on the host, and prove the device before the run (`orch probe`).",
        "https://github.com/NVIDIA/nvidia-docker/issues/957",
        "nvidia-container-cli: mount error: stat failed: /GeForce: no such file or directory",
    ),
    # ------------------------------------------------------------ bundle-skew
    sig(
        "cuda-runtime-newer-than-driver",
        "bundle-skew",
        # the framework's CUDA runtime is newer than the host's driver supports (IEIT-Yuan/Yuan-2.0#65: the
        # image's CUDA 12.1 on an 11.0 driver; the maintainer's fix, a 535 driver, worked): the process may
        # go on without GPUs after torch's warning
        55,
        r"CUDA driver version is insufficient for CUDA runtime version"
        r"|The NVIDIA driver on your system is too old \(found version \d+\)"
        # the same skew met by compiled code: PTX from a newer CUDA than the driver can load
        # (yerfor/GeneFacePlusPlus#192: fixed by a newer driver)
        r"|the provided PTX was compiled with an unsupported toolchain|\bCUDA_ERROR_UNSUPPORTED_PTX_VERSION\b"
        # the assembler's own words for it: a JIT's toolkit (numba's cudatoolkit) emitting a newer PTX ISA than
        # the driver's ptxas reads (numba/numba#3794: fixed by the cudatoolkit matching the driver)
        r"|\bptxas\b[^\n]*fatal +: Unsupported \.version \d+\.\d+; current version is '\d+\.\d+'",
        "The wheels' CUDA runtime is newer than this host's NVIDIA driver supports: upgrade the driver, or "
        "pin framework wheels built for the driver's CUDA in the bundle; prove the device before the run "
        "(`orch probe`).",
        "https://github.com/IEIT-Yuan/Yuan-2.0/issues/65",
        "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py:124: UserWarning: CUDA initialization: "
        "The NVIDIA driver on your system is too old (found version 11000). Please update your GPU driver by "
        "downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx "
        "Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with "
        "your version of the CUDA driver. (Triggered internally at "
        "/opt/pytorch/pytorch/c10/cuda/CUDAFunctions.cpp:108.)",
    ),
    sig(
        "container-cuda-newer-than-driver",
        "bundle-skew",
        # the NVIDIA container runtime refusing an image built for a newer CUDA than the host's driver
        # supports (NVIDIA/JAX-Toolbox#165: CI runners whose driver was older than the image's CUDA)
        60,
        r"nvidia-container-cli: requirement error: unsatisfied condition: cuda>=[\d.]+",
        "The image needs a newer CUDA than this host's NVIDIA driver provides: upgrade the driver on the "
        "host, or use an image built for the driver's CUDA; nothing inside the container can fix it.",
        "https://github.com/NVIDIA/JAX-Toolbox/issues/165",
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.1, please update your driver to "
        "a newer version, or use an earlier cuda container: unknown.",
    ),
    sig(
        "fabric-manager-not-ready",
        "bundle-skew",
        # CUDA's "system not yet initialized" (802) on an NVSwitch host: NVIDIA's Fabric Manager is not
        # installed, not running, or not of the driver's exact version (dstackai/dstack#2348: versions
        # matched; nanoporetech/dorado#1214, ollama/ollama#12136: a mismatched Fabric Manager;
        # aws-samples/aws-deep-learning-ami-ubuntu-dcv-desktop#33: none installed)
        55,
        r"Error 802: system not yet initialized|cuda runtime error \(802\) : system not yet initialized"
        r"|failed to initialize CUDA: system not yet initialized|\bcudaErrorSystemNotReady\b",
        "CUDA cannot start on this NVSwitch host until NVIDIA's Fabric Manager runs: install the "
        "nvidia-fabricmanager package of exactly the driver's version, start it (systemctl start "
        "nvidia-fabricmanager), then check `nvidia-smi -q | grep -i fabric` before relaunching.",
        "https://github.com/dstackai/dstack/issues/2348",
        "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
        "functions before calling NumCudaDevices() that might have already set an error? Error 802: system not "
        "yet initialized (Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:109.)",
    ),
    sig(
        "tensorrt-engine-version-mismatch",
        "bundle-skew",
        # a TensorRT engine (plan) built by another TensorRT release than the one loading it: engines are
        # not portable across releases (triton-inference-server/server#3710: built outside the container)
        60,
        r"Version tag does not match\. Note: Current Version: \d+, Serialized Engine Version: \d+"
        r"|The engine plan file is not compatible with this version of TensorRT",
        "The TensorRT engine was built by another TensorRT release than the one loading it: rebuild the "
        "engine with the TensorRT the serving bundle pins (inside the same image), not elsewhere.",
        "https://github.com/triton-inference-server/server/issues/3710",
        "E1217 06:50:10.976331 1 logging.cc:43] 1: [stdArchiveReader.cpp::StdArchiveReader::34] Error Code 1: "
        "Serialization (Serialization assertion safeVersionRead == safeSerializationVersion failed.Version tag "
        "does not match. Note: Current Version: 43, Serialized Engine Version: 0)",
    ),
    sig(
        "efa-libfabric-older-than-nccl",
        "bundle-skew",
        # NCCL 2.19 and later through the AWS EFA libfabric of installers before 1.29: the provider asks
        # CUDA for synchronous memory operations on NCCL's buffers and cannot register them
        # (awslabs/awsome-distributed-ai#278, aws/aws-ofi-nccl#584: a newer torch brought a newer NCCL)
        55,
        r"cuda_set_sync_memops\(\)[^\n]*Failed to perform cuPointerSetAttribute"
        r"|\b[Uu]nable to set memops for cuda ptr\b"
        r"|NET/OFI Unable to register memory \(type = 2\) for device \d+\. RC: -22\b",
        "NCCL is newer than the EFA libfabric under it (NCCL 2.19+ with an EFA installer before 1.29): "
        "upgrade the EFA installer on the hosts, or pin the NCCL the bundle's torch brings; "
        "FI_EFA_SET_CUDA_SYNC_MEMOPS=0 works around it.",
        "https://github.com/awslabs/awsome-distributed-ai/issues/278",
        "libfabric:652244:1713524816::efa:mr:efa_mr_hmem_setup():254<warn> unable to set memops for cuda ptr",
    ),
    # --------------------------------------------------------------- hardware
    sig(
        "nvswitch-fabric-fault",
        "hardware",
        # NCCL's NVLink SHARP (NVLS) buffers failing to bind: the NVSwitch fabric is not in a usable state
        # (pytorch/pytorch#177472: a Fabric Manager failure, the hosts to be repaired or power-cycled;
        # NVIDIA/nccl#1488: Fabric Manager restarted without resetting the GPUs)
        60,
        r"Failed to bind NVLink SHARP \(NVLS\) Multicast memory"
        r"|caused by a system or configuration error in the Fabric Manager or NVSwitches"
        # (not when NVLS's buffers found the device's memory full: that is memory)
        r"|transport/nvls\.cc:\d+ NCCL WARN Cuda failure(?!.*out of memory)",
        "The host's NVSwitch fabric is not usable (Fabric Manager failed, or restarted without a GPU "
        "reset): reset the GPUs or reboot the host and check Fabric Manager's state; NCCL_NVLS_ENABLE=0 "
        "only works around it.",
        "https://github.com/pytorch/pytorch/pull/177472",
        "Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 'the operation "
        "cannot be performed in the present state'.",
    ),
)
