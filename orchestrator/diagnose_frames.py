"""Where a Python traceback's deepest frame runs: the layer whose code failed, for a log nothing else names.

Pure and standalone (only `re`), so bench/diagnose_variants/frames.py can apply today's rule to the
tables of earlier commits. `orchestrator.diagnose.verdict` uses it last, with confidence "low".
"""

from __future__ import annotations

import re

# The code a Python traceback's deepest frame runs in, for a log nothing else names: an SSH client
# library's (not its SFTP file operations'), or torch.distributed's rendezvous and process-group setup
# (not the launcher's or agent's frames, which carry any worker's failure). jax.distributed's and pip's
# frames are left out: on the blind sets they changed no answer (bench/diagnose_variants/frames.py),
# so nothing shows they would be right.
FRAME_LAYERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"[/\\](paramiko[/\\](?!sftp)|fabric[/\\]|asyncssh[/\\]|pssh[/\\])"), "transport"),
    (
        re.compile(r"[/\\]torch[/\\]distributed[/\\](rendezvous\.py|distributed_c10d\.py|elastic[/\\]rendezvous[/\\])"),
        "collective",
    ),
)
_FRAME = re.compile(r'File "([^"]+)", line \d+')


def frame_layer(text: str) -> str | None:
    """The layer of the code the log's deepest traceback frame runs in (`FRAME_LAYERS`), if any."""
    frames = _FRAME.findall(text)
    if not frames:
        return None
    return next((layer for pattern, layer in FRAME_LAYERS if pattern.search(frames[-1])), None)
