"""Signatures of what a run uses up or reuses: the cache and memory layers.

Data only: see orchestrator/diagnose_table.py for how a signature is written and sourced.
"""

from __future__ import annotations

from orchestrator.diagnose_sig import JAX_GH, Signature, sig

RESOURCE_SIGNATURES: tuple[Signature, ...] = (
    # -------------------------------------------------------------------- cache
    sig(
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
    sig(
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
    sig(
        "jax-cache-key-unstable",
        "cache",
        # JAX logs how it built the persistent-cache key only when someone is chasing cache misses
        # (jax_persistent_cache / compiler debug logging): the log is about reuse of the cache.
        30,
        r"get_cache_key hash (of|after) |cache key for computation is different"
        # nor lists the cache directory's entries (one per function and key; jax-ml/jax#21236: one function's
        # key changing on every run) unless the cache's reuse is the question
        r"|^(\S+\s+)*jit_\w+-[0-9a-f]{64}(-cache|-atime)?\s*$",
        "The persistent-cache key differs between runs that should share it: compare the key inputs "
        "(bundle, flags, device assignment) of the two runs; the lane's pre-import policy must be identical.",
        "https://github.com/jax-ml/jax/issues/16649",
        "[DEBUG] [jax._src.com]: get_cache_key hash of serialized computation: 4116f2411714e16983",
    ),
    sig(
        "jax-cache-write-error",
        "cache",
        75,
        r"Error writing persistent compilation cache entry for",
        "JAX could not write a cache entry: a read-only reader is configured as a writer, or the cache "
        "directory is missing or full; match the lane's cache policy (one writer, read-only readers).",
        JAX_GH + "jax/_src/compiler.py",
        "UserWarning: Error writing persistent compilation cache entry for 'jit_iota': OSError: [Errno 30] "
        "Read-only file system: '/tmp/rocache/jit_iota-0b184a1e3154e7f940fd1d474983357853d33ff0dcd1474f81c7c9"
        "1eea9d9d7f-cache'",
    ),
    sig(
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
    sig(
        "cache-dir-not-writable",
        "cache",
        # A symptom-level owner: the path names a cache directory (a compilation cache or one under
        # ~/.cache that a library creates at import), and it is not writable by this user.
        45,
        r"((Permission denied|Read-only file system|PERMISSION_DENIED)\b|PermissionError: \[WinError 5\]).*?[/\\]"
        r"(\.cache[/\\](?!huggingface|pip\b|torch[/\\]hub|matplotlib|fontconfig|uv\b)"
        r"|[\w.-]*(compil|xla|jax|jit|autotune)[\w.-]*cach"
        # torch.compile's own caches: inductor's per-user directory and Triton's kernel cache (Windows
        # says "access denied" in the system's language: comfy-wavespeed#123)
        r"|torchinductor_[^/\\\s]*[/\\]|\.triton[/\\]cache\b)",
        "A cache directory is not writable by this user: point the cache at a writable path owned by "
        "the run (JAX_COMPILATION_CACHE_DIR, XLA_PERSISTENT_CACHE_PATH, the lane's cache path) instead "
        "of a home or shared directory another user created.",
        "https://github.com/zadorlab/sella/pull/74",
        "PermissionError: [Errno 13] Permission denied: '/home/alexlm/.cache/sella'",
    ),
    sig(
        "torch-extension-stale-build",
        "cache",
        # a JIT-built torch extension loaded from its build cache (~/.cache/torch_extensions/pyXY_cuZZ, or
        # TORCH_EXTENSIONS_DIR) that an older torch built: the directory is named only by the Python and
        # CUDA versions, so a torch upgrade finds the old build and misses its symbols
        # (huggingface/transformers#18868: DeepSpeed's fused_adam kept on a CI host, fixed by clearing it)
        60,
        r"/torch_extensions/(py\d+_cu\d+|py\d+_cpu)?/?\S*\.so: undefined symbol: \w+",
        "A torch extension was loaded from its build cache, built by another torch than the one running: "
        "delete that extension's directory under TORCH_EXTENSIONS_DIR (~/.cache/torch_extensions) so it "
        "is rebuilt, and give each bundle its own extensions directory so an upgrade cannot meet old builds.",
        "https://github.com/huggingface/transformers/pull/18868",
        "E   ImportError: /github/home/.cache/torch_extensions/py38_cu113/fused_adam/fused_adam.so: undefined symbol: "
        "_ZN3c104impl8GPUTrace13gpuTraceStateE`",
    ),
    sig(
        "torch-extension-build-lock",
        "cache",
        # torch's JIT build of a C++/CUDA extension waiting on the lock file in its build cache
        # (~/.cache/torch_extensions or TORCH_EXTENSIONS_DIR): another process builds it, or a build that
        # died left the lock behind, and every later load waits forever
        60,
        r"file_baton\.py\"?, line \d+,? in wait\b"
        # a project checking for that lock itself before it loads its extension (NVlabs/nvdiffrec#39)
        r"|Lock file exists in build directory: '[^']*torch_extensions",
        "A torch extension build is waiting on its build cache's lock: if no other process is building "
        "it, delete the stale lock (or the extension's directory under TORCH_EXTENSIONS_DIR); give each "
        "host its own extensions directory, or build once before the gang starts.",
        "https://github.com/PASSIONLab/OpenEquivariance/issues/156",
        'File "/opt/venv/lib/python3.12/site-packages/torch/utils/file_baton.py", line 50 in wait',
    ),
    sig(
        "compile-cache-lock-wait",
        "cache",
        # a kernel cache's lock taken through filelock, logged at DEBUG while every rank waits on it: Triton's
        # autotune cache on a shared filesystem whose locks do not come (deepspeedai/DeepSpeed#5205, fixed by
        # a local TRITON_CACHE_DIR); low, so any line that names a failure comes first
        25,
        r"Attempting to acquire lock \d+ on \S*([/\\]\.triton[/\\]|torchinductor_|torch_extensions)\S*\.lock\b",
        "Processes wait on a compile cache's lock: put the Triton/Inductor cache on a local disk per host "
        "(TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR), not a shared filesystem, and remove a lock no process holds.",
        "https://github.com/deepspeedai/DeepSpeed/issues/5205",
        "DEBUG: Attempting to acquire lock 140192009925296 on /data2/<account>/.triton/autotune/"
        "Fp16Matmul_2d_kernel.pickle.lock",
    ),
    sig(
        "triton-cache-shared-tmp",
        "cache",
        # Triton writes a cache entry to "<name>.tmp.pid_<pid>_<uuid>" and renames it: the file vanishing under
        # the writer means another process shares the cache directory and raced it (tensor-parallel workers
        # of one engine, fixed by a cache directory per process)
        45,
        r"(No such file or directory|FileNotFoundError)\S*:? .*[/\\]\.triton[/\\]cache[/\\]\S+\.tmp\.pid_\d+",
        "Several processes share one Triton cache directory and raced on an entry: give each process (or "
        "host) its own TRITON_CACHE_DIR on a local disk, or warm the cache from one process first.",
        "https://github.com/IBM/vllm/pull/35",
        "FileNotFoundError: [Errno 2] No such file or directory: '/home/vllm/.triton/cache/1feb415f3280ca46eea8c"
        "4407a58c23e/fused_moe_kernel.json.tmp.pid_72_c0a0033e-6147-4520-ae3a-3847d02598f8'",
    ),
    sig(
        "jax-cache-nonzero-process-skip",
        "cache",
        25,
        r"Not writing persistent cache entry since process_(id|index) != 0",
        "Expected on processes 1..N (only process 0 writes the JAX cache); judge the cache per process "
        "by its hits on a warm restart, not by files on disk.",
        JAX_GH + "jax/_src/compiler.py",
        "DEBUG:jax._src.compiler:Not writing persistent cache entry since process_id != 0",
    ),
    # ------------------------------------------------------------------- memory
    sig(
        "hbm-oom",
        "memory",
        90,
        r"Ran out of memory in memory space hbm|\bCompileTimeHbmOom\b"
        # XLA:TPU's memory report, printed with the OOM whatever the status line above it says
        # (behind glog's prefix too), and its host-memory form for a program's host-offloaded buffers
        # (AI-Hypercomputer/torchprime#28: "Program host requirement 145.69G")
        r"|(^\s*|\] )Program (hbm|host) requirement [\d.]+[KMGT]?:"
        # XLA:TPU's fast exit when the estimate alone far exceeds the chip's memory
        r"|Aborting compilation early because it's unlikely to have enough memory"
        # XLA's rematerialization pass unable to bring the program under the device's memory, the warning
        # the out-of-memory error follows (google-deepmind/mujoco#1431: a replay buffer sized for the whole run)
        r"|Can't reduce memory use below -?[\d.]+[KMGT]i?B \(-?\d+ bytes\) by rematerialization",
        "The program needs more HBM than the chip has: reduce batch/sequence, shard more (or rematerialise) "
        "the largest allocations listed after this line.",
        "https://github.com/tensorflow/tpu/issues/385",
        "Compilation failure: Ran out of memory in memory space hbm. Used 8.38G of 8.00G hbm. Exceeded "
        "hbm capacity by 385.25M.",
    ),
    sig(
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
    sig(
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
    sig(
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
    sig(
        "host-oom-killer",
        "memory",
        85,
        r"[Oo]ut of memory: Killed process \d+|^\S.*Killed process \d+ \(.*\) total-vm:|oom-kill:constraint="
        r"|Memory cgroup out of memory|Out of memory: Kill process \d+ \(.*\) score \d+|invoked oom-killer: gfp_mask="
        # the same kill as a container runtime reports it (Kubernetes' OOMKilled; marin-community/marin#6774)
        r"|\bOOMKilled\b|[Cc]ontainer was OOM killed"
        # runc's, when the container's own init is killed under its memory limit (kubeflow/trainer#1661)
        r"|container init was OOM-killed",
        "The kernel's OOM killer ended the process (host RAM, not HBM): lower host-side memory (data "
        "loading, checkpoint staging, number of processes per host).",
        "https://github.com/pcyin/tranX/issues/41",
        "[2059991.491542] Out of memory: Killed process 25315 (python3) total-vm:53312244",
    ),
    sig(
        "cublas-handle-no-memory",
        "memory",
        # cuBLAS could not create its handle because the framework had already taken the GPU's memory
        # (JAX and TensorFlow preallocate most of it), or it could not allocate at all
        60,
        r"failed to create cublas handle: CUBLAS_STATUS_NOT_INITIALIZED|\bCUBLAS_STATUS_ALLOC_FAILED\b",
        "The GPU had no memory left for cuBLAS: lower the preallocated share "
        "(XLA_PYTHON_CLIENT_MEM_FRACTION, XLA_PYTHON_CLIENT_PREALLOCATE=false) and check no other process "
        "holds the device's memory.",
        "https://github.com/jax-ml/jax/issues/7118",
        "2021-06-26 17:01:46.891583: E external/org_tensorflow/tensorflow/stream_executor/cuda/cuda_blas.cc:226] "
        "failed to create cublas handle: CUBLAS_STATUS_NOT_INITIALIZED",
    ),
    sig(
        "host-alloc-enomem",
        "memory",
        70,
        r"DefaultCPUAllocator: (can't allocate memory|not enough memory)|Error code 12 \(Cannot allocate memory\)"
        # the same errno as C, Rust and the JVM print it
        r"|\[Errno 12\] Cannot allocate memory|Cannot allocate memory \(os error 12\)"
        # NumPy's own refusal for a host array
        r"|Unable to allocate [\d.]+ [KMGTP]i?B for an array with shape"
        # Python's own, bare (Nerogar/OneTrainer#835); not "MemoryError: std::bad_alloc", a C++ library's
        # failed allocation, which in the corpus was a library not matching its runtime (t5x#1004)
        r"|^\s*MemoryError\s*$"
        r"|errno[:=] ?12\b.{0,40}Cannot allocate memory|'Cannot allocate memory' \(errno=12\)"
        # XLA:CPU's LLVM JIT refused memory for compiled code (jax-ml/jax#11923, pasteurlabs/mosaic#15)
        r"|\b(JIT session|LLVM compilation) error: Cannot allocate memory"
        r"|releaseMappedMemory failed with error: Cannot allocate memory|\bLLVM ERROR: out of memory",
        "Host RAM ran out (the allocator got ENOMEM): lower the batch, the data-loading workers or the "
        "processes per host, and check for leftover processes holding memory.",
        "https://github.com/Esri/arcgis-python-api/issues/743",
        "RuntimeError: [enforce fail at CPUAllocator.cpp:64] . DefaultCPUAllocator: can't allocate memory: "
        "you tried to allocate 402653184 bytes. Error code 12 (Cannot allocate memory).",
    ),
    sig(
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
    sig(
        "cudnn-algorithm-search-failed",
        "memory",
        # XLA's autotuner found no cuDNN algorithm that runs: most often the GPU heap JAX preallocated
        # left cuDNN no room for its workspace (jax-ml/jax#8506, a maintainer's diagnosis; the same in
        # EXLA: elixir-nx/nx#1000), so a lower memory fraction fixes it. Below the confident
        # signatures: a cuDNN the jaxlib was not built for fails the same way.
        25,
        r"Failed to determine best cudnn convolution algorithm|All algorithms tried for .*cudnn.* failed",
        "cuDNN could not run any convolution algorithm, most often for lack of free GPU memory beside the "
        "preallocated heap: lower XLA_PYTHON_CLIENT_MEM_FRACTION (or disable preallocation) and retry.",
        "https://github.com/jax-ml/jax/issues/8506",
        "RuntimeError: UNKNOWN: Failed to determine best cudnn convolution algorithm",
    ),
    sig(
        "accelerator-framework-oom",
        "memory",
        80,
        r"CUDA out of memory\. Tried to allocate|torch\.(cuda\.)?OutOfMemoryError: "
        # the CUDA driver's own word, from an allocator of a serving engine (TideDra/lmm-r1#43, on OpenRLHF: vLLM waking
        # up its weights beside training's) or a kernel launch
        r"|\bCUDA [Ee]rror( \d+)?: out of memory\b|\bRuntimeError: CUDA out of memory\."
        # CTranslate2's words for the same (Purfview/whisper-standalone-win#50: a model too large for the GPU)
        r"|\bCUDA failed with error out of memory\b"
        # CUDA's allocator call failing in a native library (NVlabs/instant-ngp#182: tiny-cuda-nn's GPU memory)
        r"|\bcudaMalloc\w*\([^\n]*\) failed with error out of mem"
        # the driver API's word for it from such a library's call (jonstephens85/instantngp-batch#3: a scene's
        # bounds too large for the GPU), and the runtime API's (mpi4jax/mpi4jax#106: JAX's preallocation left
        # CUDA-aware MPI none)
        r"|\bcu\w+\([^\n]*\) failed with error CUDA_ERROR_OUT_OF_MEMORY\b|\bcudaErrorMemoryAllocation: out of memory\b"
        # RAPIDS' memory manager (rapidsai/dask-cuda#443: a pool asked larger than the GPU) and DALI's decoder
        # buffers (NVIDIA/DALI#1137: a batch of larger images), in their own words
        r"|\bout_of_memory: RMM failure at:|\bRMM failure at:[^\n]*Maximum pool size exceeded"
        r"|\bCan't allocate \d+ bytes on device \d+\b"
        # MXNet's CUDA check in a kernel launch (awslabs/sockeye#839: a batch too large for the GPU; Caffe's the
        # same, k4yt3x/video2x#28) and MXNet's memory pool's failed allocation
        r"|\bcudaSuccess \(2 vs\. 0\)[^\n]*\bout of memory\b|\bcudaMalloc (retry )?failed: out of memory\b"
        # faiss's GPU allocator, in its assertion's details (facebookresearch/faiss#648: an index larger than the
        # GPU) and in its later releases' error (facebookresearch/faiss#1031: torch holding most of the GPU)
        r"|\b[Ff]ailed to cudaMalloc \d+ bytes\b",
        "Device memory ran out: reduce the batch, sequence, memory pool or per-device footprint, and check no "
        "other process holds memory on the device.",
        "https://github.com/pytorch/pytorch/issues/16417",
        "RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; 8.57 MiB "
        "already allocated; 9.28 GiB free; 4.68 MiB cached)",
    ),
    sig(
        "ray-node-low-memory",
        "memory",
        85,
        r"Task was killed due to the node running low on memory"
        # raylet lines are often wrapped by the log collector inside "(tasks / actors)"
        r"|Workers? \(tasks / actors\) killed due to memory pressure|^\s*actors\) killed due to memory pressure"
        # its words above the memory usage threshold, older releases' RayOutOfMemoryError, and the table of
        # the node's top memory users it prints only then (ray-project/ray#15226; verl-project/verl#224)
        r"|which exceeds the memory usage threshold of [\d.]+|RayOutOfMemoryError: More than \d+% of the memory on"
        r"|\bThe top 10 memory consumers are:|\bTop 10 memory users:\s*(PID\b|$)"
        r"|^\s*(\(pid=\d+\)\s*)?PID\s+MEM(\(GB\))?\s+COMMAND\s*$",
        "Ray's memory monitor killed a worker (host RAM): lower per-task memory or parallelism on that node.",
        "https://github.com/real-stanford/flingbot/issues/11",
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
    ),
    sig(
        "resource-exhausted-allocate",
        "memory",
        70,
        r"RESOURCE_EXHAUSTED: Out of memory while trying to allocate \d+ bytes|OOM when allocating tensor with shape"
        # the buffer list XLA prints only with an allocation that failed, when the error line itself was cut
        # from the log (google-research/scenic#1005, google-research/t5x#870; google-deepmind/tapnet#48)
        r"|^\s*(XLA [Ll]abel|Entry Parameter Subshape): \S"
        # and the buffer statistics it prints with the same error (alpa-projects/alpa#759)
        r"|BufferAssignment OOM Debugging|BufferAssignment stats:"
        # TensorFlow's allocator drawing its chunks, which it does only when an allocation failed, when the
        # error line itself was cut from the log (DeepLabCut/DeepLabCut#791: a batch too large for the GPU)
        r"|\bbfc_allocator\.cc:\d+\] [*_x]{20,}\s*$",
        "An allocation failed for lack of device memory: reduce the footprint or shard more.",
        "https://github.com/google-deepmind/alphafold/issues/1023",
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
        "7406166528 bytes.",
    ),
    sig(
        "tf-oom-allocation-hint",
        "memory",
        70,
        # TensorFlow (and XRT on a TPU) prints this hint only under an out-of-memory error, on GPU and
        # TPU alike, even when the error line itself was cut from the log
        r"If you want to see a list of allocated tensors when OOM happens, add report_tensor_allocations_upon_oom",
        "An allocation failed for lack of device memory (the program's buffers did not fit): reduce the "
        "batch or sequence, or shard more.",
        "https://github.com/huggingface/transformers/pull/3702",
        "Hint: If you want to see a list of allocated tensors when OOM happens, add "
        "report_tensor_allocations_upon_oom to RunOptions for current allocation info.",
    ),
    sig(
        "host-pinned-alloc-failed",
        "memory",
        70,
        # pinned (page-locked) host buffers for device transfers: XLA's and TensorFlow's allocators
        r"could not allocate pinned host( memory)? of size:? ?\d+",
        "Host RAM for pinned transfer buffers ran out (host memory grew, or the locked-memory limit is "
        "low): look for host memory growing per step or checkpoint, and check `ulimit -l`.",
        "https://github.com/google/orbax/issues/2090",
        "W external/xla/xla/stream_executor/integrations/stream_executor_allocator.cc:66] could not allocate "
        "pinned host of size: 4294967296",
    ),
    sig(
        "resource-exhausted",
        "memory",
        40,
        # gRPC's message-size limit says RESOURCE_EXHAUSTED too, about a message, not memory.
        r"\bRESOURCE_EXHAUSTED\b(?!.*message larger than max)|Resource exhausted:(?! ?\.{0,2}/(?!job:))",
        "A runtime resource ran out, most often device memory: read the rest of the message for which.",
        "https://github.com/pytorch/xla/issues/1735",
        "RuntimeError: Resource exhausted: From /job:tpu_worker/replica:0/task:0:",
    ),
    sig(
        "process-killed",
        "memory",
        20,
        r"^\s*`?Killed`?\s*$|(it/s|s/it|\d%)\]?\s*Killed\s*$|^zsh: killed +\S"
        # bash's report of a command it ran, its own or a script's (ZhengPeng7/BiRefNet#33: a training script)
        r"|(/bin/\w+|\.sh): line \d+: +\d+ Killed\b"
        # the shell's job report of a command it ran (job number or PID, then the command line)
        r"|^\s*(\[\d+\][+-]?|\d+) +Killed(: 9)? {2,}\S"
        # a model's shards loading when the process was killed (tloen/alpaca-lora#546: host RAM)
        r"|Loading checkpoint shards\b[^\n]*\b[Kk]illed\b"
        # zsh's: the job number, the PID, then "killed" in lower case (after a progress bar at times)
        r"|\[\d+\]( +[+-])? +\d+ killed( {2,}\S|\s*$)"
        r"|exit code 137 \(interrupted by signal 9: SIGKILL\)|Signal 9 \(SIGKILL\) received by PID \d+"
        r"|returned non-zero exit status -9\b"
        # torchelastic's report of a rank the OOM killer took (failed line, root-cause table; the
        # signal line lower-cased in some releases' tables)
        r"|failed \(exitcode: -9\) local_rank:|\bexitcode *: -9 \(pid:|\bsignal 9 \(SIGKILL\) received by PID \d+"
        # torch.multiprocessing (xmp.spawn) reporting a child the OOM killer took
        r"|process \d+ terminated with signal SIGKILL\b"
        # Python's subprocess reporting a child the OOM killer took (accelerate's launcher,
        # huggingface/autotrain-advanced#456)
        r"|died with <Signals\.SIGKILL: 9>"
        # a framework reporting the return code of a compiler it ran (torch-neuron's neuron-cc,
        # aws-neuron/aws-neuron-sdk#439)
        r"|\b[Cc]ommand returned:? -9\s*$"
        # DeepSpeed's launcher reporting a rank the OOM killer took (CASIA-LMC-Lab/AnomalyGPT#43)
        r"|\] exits with return code = -9\s*$",
        "The process was killed with SIGKILL, most often by the OOM killer: check `dmesg` for "
        "'Out of memory' on that worker.",
        "https://github.com/tmux/tmux/issues/2364",
        "Killed",
    ),
    sig(
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
    sig(
        "hub-compile-cache-not-writable",
        "cache",
        # optimum-neuron pushing the compiled graphs it built to a shared cache repository on the Hub that
        # the job may only read (huggingface/optimum-neuron#59): the cache's writer, not the network
        60,
        r"Could not push the cached model to the repo \S+, most likely due to not having the write permission",
        "The job tried to write a compilation cache it may only read: give the shared cache one writer "
        "(a token with write access), or point this job at a cache repository of its own, or turn pushing off.",
        "https://github.com/huggingface/optimum-neuron/issues/59",
        "Could not push the cached model to the repo aws-neuron/optimum-neuron-cache, most likely due to not "
        "having the write permission for this repo. Exact error: 401 Client Error.",
    ),
    sig(
        "torch-extensions-dir-not-writable",
        "cache",
        75,
        # the shared build cache of torch.utils.cpp_extension, created by another user or an older run
        r"Permission denied: '[^']*torch_extensions\b",
        "The shared build cache (/tmp/torch_extensions) belongs to another user: give each user its own "
        "TORCH_EXTENSIONS_DIR or fix the directory's owner.",
        "https://github.com/pytorch/pytorch/issues/34238",
        "PermissionError: [Errno 13] Permission denied: '/tmp/torch_extensions/fused'",
    ),
    sig(
        "inductor-cache-dir-unresolvable",
        "cache",
        60,
        # TorchInductor names its default cache directory after the user: with no TORCHINDUCTOR_CACHE_DIR,
        # a uid without a passwd entry (a container's --user) fails here, before any compile
        r"torch[/\\]_inductor[/\\]runtime[/\\](cache_dir_utils|runtime_utils)\.py"
        r"\W+line \d+\W+in (default_)?cache_dir\b",
        "TorchInductor could not resolve its cache directory (the user has no name on this host): set "
        "TORCHINDUCTOR_CACHE_DIR (and USER) in the lane's runtime policy, on a directory the worker owns.",
        "https://github.com/pytorch/pytorch/issues/140765",
        '  File "/usr/local/lib/python3.12/dist-packages/torch/_inductor/runtime/runtime_utils.py", line 137, in '
        "cache_dir",
    ),
    sig(
        "jax-cache-key-cast-warning",
        "cache",
        60,
        # the persistent cache's key computation warning seen when multi-host keys stopped matching
        r"jax/_src/cache_key\.py:\d+: RuntimeWarning",
        "The compilation cache key was computed from an invalid device assignment: warm restarts will "
        "recompile; upgrade jax past the cache-key fix and keep the cache directory per bundle.",
        "https://github.com/jax-ml/jax/issues/20681",
        "/usr/local/lib/python3.10/dist-packages/jax/_src/cache_key.py:221: RuntimeWarning: invalid value "
        "encountered in cast",
    ),
    sig(
        "gcs-object-rate-limit",
        "cache",
        60,
        # GCS refuses more than about one write a second to one object; on a pod slice the object
        # rewritten by every worker at once is the shared compilation cache's
        r"The rate of change requests to the object \S.* exceeds the rate limit",
        "Many workers rewrite the same GCS object (the shared compilation cache): let one worker write "
        "the cache (orch's cache ownership), raise the cache's minimum entry size, or use a local cache.",
        "https://github.com/jax-ml/jax/issues/12583",
        '"message": "The rate of change requests to the object [...] exceeds the rate limit. Please reduce the '
        'rate of create, update, and delete requests.",',
    ),
    sig(
        "vllm-kv-cache-too-small",
        "memory",
        70,
        # vLLM (GPU and TPU) sizing its KV cache from the device memory left after the weights
        r"KV cache is needed, which is larger than the available KV cache memory"
        r"|No available memory for the cache blocks",
        "The device memory left after the model's weights cannot hold the KV cache for the maximum "
        "sequence length: lower max_model_len, raise the memory fraction, or shard over more chips.",
        "https://github.com/vllm-project/tpu-inference/pull/223",
        "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV "
        "cache is needed, which is larger than the available KV cache memory (0.71 GiB).",
    ),
)
