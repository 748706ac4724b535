"""A bench/diagnose_history.py variant: the word rule of orchestrator/diagnose_words.py, fitted
only on the corpus files that existed before the blind set being scored (corpus.yaml and the
earlier blind sets), applied to each old table's "unknown" answers with today's rule (diagnose_words.agreeing).

    .venv/bin/python bench/diagnose_history.py --variant bench/diagnose_variants/words.py

corpus.yaml is today's: a few of its entries were added after the earlier sets were scored.
"""

import sys
from pathlib import Path

import orchestrator.diagnose as old  # the table this blind set was held back from

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _today  # noqa: E402

words = _today.load("diagnose_words")
model = _today.words_before(words, sys.argv[2])
_today.wrap(old, lambda text, v: words.agreeing(model, text, v.candidates))
