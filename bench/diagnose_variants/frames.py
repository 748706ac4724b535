"""A bench/diagnose_history.py variant: today's deepest-frame rule (orchestrator/diagnose_frames.py)
applied to each old table's "unknown" answers, as orchestrator.diagnose.verdict applies it last.

    .venv/bin/python bench/diagnose_history.py --variant bench/diagnose_variants/frames.py
"""

import dataclasses
import importlib.util
import sys
from pathlib import Path

import orchestrator.diagnose as old  # the table this blind set was held back from

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("frames_now", ROOT / "orchestrator" / "diagnose_frames.py")
assert spec is not None and spec.loader is not None
frames = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = frames
spec.loader.exec_module(frames)
if hasattr(old, "frame_layer"):  # a table that shipped an earlier form of the rule runs today's instead
    old.frame_layer = frames.frame_layer
as_it_was = old.verdict


def verdict(text):
    v = as_it_was(text)
    layer = frames.frame_layer(text) if v.layer == old.UNKNOWN else None
    if layer is None:
        return v
    named = {"layer": layer}
    if "confidence" in {f.name for f in dataclasses.fields(v)}:  # the oldest tables' verdicts have none
        named["confidence"] = "low"
    return dataclasses.replace(v, **named)


old.verdict = verdict
