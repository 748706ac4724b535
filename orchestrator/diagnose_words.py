"""Word evidence for a log no signature recognises: which layer its words point to.

A naive Bayes over the words of the real-log corpus's tune part (tests/data/diagnosis/, see
orchestrator/diagnose_corpus.py): for each layer, in how many of its entries each word
appears. `posterior()` weighs only the words a log has (a Bernoulli model over present words,
smoothed by ALPHA), so a short log is judged by what it says, not by what it lacks.

It decides nothing alone. `orchestrator.diagnose.verdict` answers a layer from words only when
they agree with the keyword hints' first candidate and the posterior is at least SURE, with
confidence "low". Fitted only on the files that existed before each blind set and applied to the
table that set was held back from (`bench/diagnose_history.py --variant
bench/diagnose_variants/words.py`), that rule turned 26 of those tables' 206 unknown answers into
right ones and added no wrong one (the eleven blind sets, 650 entries: 64.6 % right became 68.6 %,
3.7 % wrong stayed). The words alone, without a hint agreeing, answer more and wrongly more often
(bench/diagnose_variants/words_alone.py): at a posterior of 0.999, 71.7 % right and 5.8 % wrong; at
0.99999, 71.1 % and 4.2 %.

The model is data: orchestrator/data/diagnose_words.json, built from the tune part by
`bench/diagnose.py --write-doc` (which regenerates the doc from the same table and corpus);
tests/test_diagnose_words.py checks the committed file is what the corpus builds. Words that appear in
fewer than MIN_ENTRIES entries are left out (a word seen once is noise, and it keeps the file
small).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

MODEL_PATH = Path(__file__).resolve().parent / "data" / "diagnose_words.json"
WORD = re.compile(r"[a-z][a-z0-9_]{2,}")
ALPHA = 0.1  # smoothing: a word never seen with a layer still leaves it a chance
MIN_ENTRIES = 2  # a word in fewer tune entries than this is not in the model
SURE = 0.99  # the posterior at or above which words may name the hints' first candidate


def words(text: str) -> set[str]:
    """The distinct lower-case words of `text` (a letter, then letters, digits or `_`; three or more)."""
    return set(WORD.findall(text.lower()))


@dataclass(frozen=True)
class WordModel:
    """Per layer, how many tune entries it has and in how many of them each word appears."""

    entries: dict[str, int]  # layer -> entries
    seen: dict[str, dict[str, int]]  # word -> {layer: entries of that layer with the word}

    def posterior(self, text: str) -> dict[str, float]:
        """P(layer | the words of `text` the model knows), over every layer of the model."""
        total = sum(self.entries.values())
        known = [self.seen[w] for w in words(text) if w in self.seen]
        logp: dict[str, float] = {}
        for layer, n in self.entries.items():
            score = math.log(n / total)
            for counts in known:
                score += math.log((counts.get(layer, 0) + ALPHA) / (n + 2 * ALPHA))
            logp[layer] = score
        top = max(logp.values())
        weights = {layer: math.exp(s - top) for layer, s in logp.items()}
        norm = sum(weights.values())
        return {layer: w / norm for layer, w in weights.items()}

    def to_json(self) -> str:
        doc = {"alpha": ALPHA, "min_entries": MIN_ENTRIES, "entries": self.entries, "seen": self.seen}
        return json.dumps(doc, indent=0, sort_keys=True) + "\n"


def build(labelled: Iterable[tuple[str, str]]) -> WordModel:
    """The model of `labelled` (layer, excerpt) pairs."""
    entries: dict[str, int] = {}
    seen: dict[str, dict[str, int]] = {}
    for layer, excerpt in labelled:
        entries[layer] = entries.get(layer, 0) + 1
        for w in words(excerpt):
            counts = seen.setdefault(w, {})
            counts[layer] = counts.get(layer, 0) + 1
    kept = {w: dict(sorted(c.items())) for w, c in sorted(seen.items()) if sum(c.values()) >= MIN_ENTRIES}
    return WordModel(entries=dict(sorted(entries.items())), seen=kept)


def agreeing(model: WordModel | None, text: str, ranked: Sequence[str]) -> str | None:
    """The keyword hints' first candidate (`ranked[0]`) when `model` gives it a posterior of at least
    SURE for `text`; else None (also without a model, a candidate, or for `other`)."""
    if model is None or not ranked or ranked[0] == "other":
        return None
    return ranked[0] if model.posterior(text).get(ranked[0], 0.0) >= SURE else None


@functools.cache
def model() -> WordModel | None:
    """The committed model, or None when its file is missing or malformed (then words say nothing)."""
    try:
        doc = json.loads(MODEL_PATH.read_text())
        entries = {str(k): int(v) for k, v in doc["entries"].items()}
        seen = {str(w): {str(k): int(v) for k, v in c.items()} for w, c in doc["seen"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not entries or min(entries.values()) <= 0:
        return None
    return WordModel(entries=entries, seen=seen)
