"""A bench/diagnose_history.py variant: the word rule of orchestrator/diagnose_words.py, fitted
only on the corpus files that existed before the blind set being scored (corpus.yaml and the
earlier blind sets), applied to each old table's "unknown" answers with today's rule (diagnose_words.agreeing).

    .venv/bin/python bench/diagnose_history.py --variant bench/diagnose_variants/words.py

corpus.yaml is today's: a few of its entries were added after the earlier sets were scored.
"""

import re
import sys
from pathlib import Path

import yaml

import orchestrator.diagnose as old  # the table this blind set was held back from

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _today  # noqa: E402

words = _today.load("diagnose_words")
DATA = _today.ROOT / "tests" / "data" / "diagnosis"
scored = re.fullmatch(r"blind-(\d+)\.yaml", Path(sys.argv[2]).name)
assert scored is not None, sys.argv[2]
before = [DATA / "corpus.yaml", *(DATA / f"blind-{i}.yaml" for i in range(1, int(scored.group(1))))]
model = words.build((e["layer"], e["excerpt"]) for f in before for e in yaml.safe_load(f.read_text())["entries"])
_today.wrap(old, lambda text, v: words.agreeing(model, text, v.candidates))
