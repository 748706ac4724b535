"""Where a Python traceback's deepest frame runs: the layer whose code failed, for a log nothing else names.

Pure and standalone (only `re`), so bench/diagnose_variants/frames.py can apply today's rule to the
tables of earlier commits. `orchestrator.diagnose.verdict` uses it last, with confidence "low".
"""

from __future__ import annotations

import re

# The code a Python traceback's deepest frame runs in, for a log nothing else names: an SSH client
# library's (not its SFTP file operations'), or torch.distributed's rendezvous and process-group setup
# (not the launcher's or agent's frames, which carry any worker's failure, except the agent's own
# `_rendezvous`: pytorch/pytorch#67616, a restarted agent finding the rendezvous closed), jax.distributed's cluster
# detection and coordinator setup (jax-ml/jax#30073: SLURM's environment half present), or JAX's
# persistent compilation cache (jax-ml/jax#40650: its eviction failing on a file's owner), or jax's import
# of the jaxlib beside it (jax-ml/jax#17693: a jaxlib whose own dependency moved underneath it). pip's frames
# are left out: on the blind sets they changed no answer (bench/diagnose_variants/frames.py), so nothing
# shows they would be right.
FRAME_LAYERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"[/\\](paramiko[/\\](?!sftp)|fabric[/\\]|asyncssh[/\\]|pssh[/\\])"), "transport"),
    (
        re.compile(r"[/\\]torch[/\\]distributed[/\\](rendezvous\.py|distributed_c10d\.py|elastic[/\\]rendezvous[/\\])"),
        "collective",
    ),
    (re.compile(r"[/\\]torch[/\\]distributed[/\\]elastic[/\\]agent[/\\]server[/\\]api\.py:_rendezvous$"), "collective"),
    # the Cloud TPU VM's own identity (worker number, topology) from its metadata server (jax-ml/jax#24399)
    (re.compile(r"[/\\]jax[/\\]_src[/\\]clusters[/\\]cloud_tpu_cluster\.py"), "runtime-proof"),
    (re.compile(r"[/\\]jax[/\\]_src[/\\](distributed\.py|clusters[/\\])"), "collective"),
    (re.compile(r"[/\\]jax[/\\]_src[/\\](lru_cache|compilation_cache|cache_key)\.py"), "cache"),
    (re.compile(r"[/\\]jax[/\\]_src[/\\]lib[/\\]__init__\.py"), "bundle-skew"),
)
_FRAME = re.compile(r'File "([^"]+)", line \d+(?:, in (\w+))?')
# A traceback that ends in one of these failed in Python itself, not in what the code was reaching: a
# module or name missing from the installed packages (an SSH client under the wrong `cryptography` or
# without its crypto module: paramiko/paramiko#1007; mathiasertl/fabric#14, the fabric3 fork) or a
# program's own bug. Where its deepest frame runs says nothing about the owning layer then.
_PYTHON_ERROR = re.compile(
    r"^\s*(\w+\.)*(ImportError|ModuleNotFoundError|AttributeError|NameError|SyntaxError|TypeError)\b(:|$)"
    # a program asking torch.distributed for its default group without ever creating one: the program's own
    # order of calls, not the gang (lightly-ai/lightly#1590: a library's distributed gather run on one GPU)
    r"|^\s*RuntimeError: Default process group has not been initialized\b",
    re.M,
)


def frame_layer(text: str) -> str | None:
    """The layer of the code the log's deepest traceback frame runs in (`FRAME_LAYERS`), if any.

    None when the exception after that frame is a Python error (`_PYTHON_ERROR`): a missing module
    or name, or a program's own bug, whichever library's code raised it.
    """
    matches = list(_FRAME.finditer(text))
    if not matches:
        return None
    after = text[matches[-1].end() :]
    if _PYTHON_ERROR.search(after):
        return None
    where = f"{matches[-1].group(1)}:{matches[-1].group(2) or ''}"  # the file, then the function
    return next((layer for pattern, layer in FRAME_LAYERS if pattern.search(where)), None)
