"""A bench/diagnose_history.py variant, measured and not adopted: today's word rule
(bench/diagnose_variants/words.py) only where some line of the log shows a failure (the old table's
`classify` found at least one line, a generic crash included), as the rule of several weak signals
requires. Over the 30 blind sets (1098 entries) it answered 19 fewer right and no fewer wrong than
the word rule without it (693 and 712 right, 50 wrong each), so the word rule stays as it is.

    .venv/bin/python bench/diagnose_history.py --variant bench/diagnose_variants/words_failing.py
"""

import sys
from pathlib import Path

import orchestrator.diagnose as old  # the table this blind set was held back from

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _today  # noqa: E402

words = _today.load("diagnose_words")
model = _today.words_before(words, sys.argv[2])


def failing_words(text, v):
    if hasattr(old, "classify") and not old.classify(text):
        return None  # no line says anything failed
    return words.agreeing(model, text, v.candidates)


_today.wrap(old, failing_words)
