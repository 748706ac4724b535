"""A bench/diagnose_history.py variant, measured and not adopted: the word model naming a layer on
its own, without a keyword hint agreeing (orchestrator/diagnose_words.py needs one).

Fitted, like bench/diagnose_variants/words.py, only on the corpus files that existed before the blind set
being scored. Where the old table answered unknown it takes today's word rule first, then the
model's most probable layer when its posterior is at least ORCH_WORDS_ALONE (default 0.99999)
and the layer is not `other`.

    ORCH_WORDS_ALONE=0.9999 .venv/bin/python bench/diagnose_history.py --variant bench/diagnose_variants/words_alone.py
"""

import os
import sys
from pathlib import Path

import orchestrator.diagnose as old  # the table this blind set was held back from

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _today  # noqa: E402

words = _today.load("diagnose_words")
model = _today.words_before(words, sys.argv[2])
ALONE = float(os.environ.get("ORCH_WORDS_ALONE", "0.99999"))


def alone(text, v):
    agreed = words.agreeing(model, text, v.candidates)
    if agreed is not None:
        return agreed
    layer, p = max(model.posterior(text).items(), key=lambda kv: kv[1])
    return layer if p >= ALONE and layer != "other" else None


_today.wrap(old, alone)
