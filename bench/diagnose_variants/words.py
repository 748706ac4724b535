"""A bench/diagnose_history.py variant: the word rule of orchestrator/diagnose_words.py, fitted
only on the corpus files that existed before the blind set being scored (corpus.yaml and the
earlier blind sets), applied to each old table's "unknown" answers with today's rule (diagnose_words.agreeing).

    .venv/bin/python bench/diagnose_history.py --variant bench/diagnose_variants/words.py

corpus.yaml is today's: a few of its entries were added after the earlier sets were scored.
"""

import dataclasses
import importlib.util
import re
import sys
from pathlib import Path

import yaml

import orchestrator.diagnose as old  # the table this blind set was held back from

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "diagnosis"
spec = importlib.util.spec_from_file_location("words_now", ROOT / "orchestrator" / "diagnose_words.py")
assert spec is not None and spec.loader is not None
words = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = words  # dataclasses look their module up there
spec.loader.exec_module(words)

scored = re.fullmatch(r"blind-(\d+)\.yaml", Path(sys.argv[2]).name)
assert scored is not None, sys.argv[2]
before = [DATA / "corpus.yaml", *(DATA / f"blind-{i}.yaml" for i in range(1, int(scored.group(1))))]
model = words.build((e["layer"], e["excerpt"]) for f in before for e in yaml.safe_load(f.read_text())["entries"])
as_it_was = old.verdict


def verdict(text):
    v = as_it_was(text)
    layer = words.agreeing(model, text, v.candidates) if v.layer == old.UNKNOWN else None
    if layer is None:
        return v
    named = {"layer": layer}
    if "confidence" in {f.name for f in dataclasses.fields(v)}:  # the oldest tables' verdicts have none
        named["confidence"] = "low"
    return dataclasses.replace(v, **named)


old.verdict = verdict
