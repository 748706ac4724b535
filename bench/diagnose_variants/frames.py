"""A bench/diagnose_history.py variant: today's deepest-frame rule (orchestrator/diagnose_frames.py)
applied to each old table's "unknown" answers, as orchestrator.diagnose.verdict applies it last.

    .venv/bin/python bench/diagnose_history.py --variant bench/diagnose_variants/frames.py
"""

import sys
from pathlib import Path

import orchestrator.diagnose as old  # the table this blind set was held back from

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _today  # noqa: E402

frames = _today.load("diagnose_frames")
if hasattr(old, "frame_layer"):  # a table that shipped an earlier form of the rule runs today's instead
    old.frame_layer = frames.frame_layer
_today.wrap(old, lambda text, v: frames.frame_layer(text))
