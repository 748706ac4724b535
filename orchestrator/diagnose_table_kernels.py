"""Signatures of compiled GPU kernels that do not belong to the device or compiler they meet: a
framework or extension built without the GPU's architecture, a Triton kernel written for another
Triton's language. Both are bundle-skew: the fix is a build that matches, never the user's code.

Data only: see orchestrator/diagnose_table.py for how a signature is written and sourced.
"""

from __future__ import annotations

from orchestrator.diagnose_sig import Signature, sig

KERNEL_SIGNATURES: tuple[Signature, ...] = (
    # -------------------------------------------------------------- bundle-skew
    sig(
        "gpu-arch-not-in-build",
        "bundle-skew",
        # the installed torch (or a CUDA extension) carries no kernels for this GPU's architecture: a new
        # GPU under an older build (lmoe/wyoming-xtts#1: sm_120 under a cu124 torch, fixed by a cu128
        # image), an old GPU under a newer build, an extension compiled for other arches
        # (HRNet/HigherHRNet-Human-Pose-Estimation#95: fixed by the +cu110 wheels for the GPU)
        50,
        r"with CUDA capability sm_\d+ is not compatible with the current PyTorch installation"
        r"|no kernel image is available for execution on the device",
        "The installed build has no kernels for this GPU's architecture: install the framework wheels built "
        "for it (a CUDA release that supports the GPU, e.g. cu128 for sm_120), or rebuild the extension with "
        "the GPU in TORCH_CUDA_ARCH_LIST, and pin that build in the bundle.",
        "https://github.com/HRNet/HigherHRNet-Human-Pose-Estimation/issues/95",
        "RuntimeError: CUDA error: no kernel image is available for execution on the device",
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
)
