"""Where a log stops: the layer a run stalled in, for a log that ends without naming any failure.

Pure and standalone (only `re`), so bench/diagnose_variants/stall.py can apply today's rule to the
tables of earlier commits. `orchestrator.diagnose.verdict` uses it last, with confidence "low".
"""

from __future__ import annotations

import re

# The last lines a run prints before it stalls somewhere a layer owns. torch's JIT build of a C++/CUDA
# extension announces its build cache, then waits on the cache's lock file before it builds: a log that
# ends there is waiting on a lock another process holds or a dead build left behind
# (OpenRLHF/OpenRLHF#208, fixed by deleting ~/.cache/torch_extensions; MindSpeed's FAQ, "Torch
# Extensions Stuck", the same cause and fix). A log that ends as torch loads the module the cache holds
# stalled on that cache too (MCG-NJU/SparseOcc#40: the author's fix the same).
STALL_LAYERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^Using\s+\S.* as PyTorch extensions root\.\.\.$|^Loading extension module \w+\.\.\.$"), "cache"),
)


def stall_layer(text: str) -> str | None:
    """The layer whose wait the log's last non-blank line announces (`STALL_LAYERS`), if any."""
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
    return next((layer for pattern, layer in STALL_LAYERS if pattern.search(last)), None)
