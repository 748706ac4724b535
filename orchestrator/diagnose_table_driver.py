"""Signatures of the accelerator driver stack under the frameworks: the NVIDIA driver as a process
and a container see it, the container runtime's GPU hook, and the NVSwitch fabric's Fabric Manager.

Their layers differ by what owns the failure: a driver or Fabric Manager that does not match what runs
on it is bundle-skew, a process that cannot see the driver is runtime-proof, a fabric that is not
usable is hardware. Data only: see orchestrator/diagnose_table.py for how a signature is written and
sourced.
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
        r"|If this is a GPU node, did you configure the NVIDIA Container Toolkit\?",
        "The container does not see the NVIDIA driver: install the driver on the node and configure the "
        "NVIDIA Container Toolkit as the runtime, then restart the device plugin; no pod gets a GPU until then.",
        "https://github.com/awslabs/amazon-eks-ami/issues/1744",
        "I0402 12:47:47.247350       1 factory.go:104] Detected non-NVML platform: could not load NVML library: "
        "libnvidia-ml.so.1: cannot open shared object file: No such file or directory",
    ),
    # ------------------------------------------------------------ bundle-skew
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
