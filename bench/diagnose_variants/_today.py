"""What the bench/diagnose_history.py variants share: today's module loaded beside an old table,
today's word model fitted only on what came before the set being scored, and an old verdict turned
into a low-confidence answer of today's rule."""

import dataclasses
import importlib.util
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def load(name: str):
    """orchestrator/<name>.py of this checkout, as module `<name>_now` (the old table keeps its own)."""
    spec = importlib.util.spec_from_file_location(f"{name}_now", ROOT / "orchestrator" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def wrap(old, rule):
    """Replace old.verdict: where the old table answered unknown, `rule(text, verdict)` may name a
    layer, answered with confidence "low" (the oldest tables' verdicts have no confidence)."""
    as_it_was = old.verdict

    def verdict(text):
        v = as_it_was(text)
        layer = rule(text, v) if v.layer == old.UNKNOWN else None
        if layer is None:
            return v
        named = {"layer": layer}
        if "confidence" in {f.name for f in dataclasses.fields(v)}:
            named["confidence"] = "low"
        return dataclasses.replace(v, **named)

    old.verdict = verdict


def words_before(words, scored: str):
    """Today's word model (`words`, orchestrator/diagnose_words.py) built from the corpus files that
    existed before blind set `scored` (a blind-N.yaml path): corpus.yaml and blind-1 to blind-(N-1)."""
    n = re.fullmatch(r"blind-(\d+)\.yaml", Path(scored).name)
    assert n is not None, scored
    data = ROOT / "tests" / "data" / "diagnosis"
    before = [data / "corpus.yaml", *(data / f"blind-{i}.yaml" for i in range(1, int(n.group(1))))]
    return words.build((e["layer"], e["excerpt"]) for f in before for e in yaml.safe_load(f.read_text())["entries"])
