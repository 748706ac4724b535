"""The files of the real-log diagnosis corpus, and how each blind set scored the one time it was held back.

The *tune* part (`TUNE_PATHS`) is every file below; signatures may be written from any of
their entries:

- tests/data/diagnosis/corpus.yaml: short excerpts of real failure logs copied
  from public issue threads, collected by the same hand that wrote the
  signature table.
- tests/data/diagnosis/blind-N.yaml, N = 1, 2, ... in the order of `BLIND_SCORES`:
  each collected blind to the table, in the same format, by someone who had not
  seen it; scored once as the held-back part (its score is in
  tests/data/diagnosis/held-scores.yaml, read into `BLIND_SCORES`), then folded
  into tune. Each file's header says how it was collected, checked and scored.

Entries set aside before a blind set was scored (from other stacks, from threads the
table already cited, or labelled two ways) stay in the files `SET_ASIDE` names, each
with its one score beside the set; they are never counted and never tuned on.

The *held-back* part (`HELDBACK_PATH`) is the next set collected blind to the table;
orchestrator/diagnose_corpus.py loads and scores them.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from orchestrator import yamlsrc
from orchestrator.errors import ConfigError

DATA_DIR = Path(__file__).resolve().parent.parent / "tests" / "data" / "diagnosis"
CORPUS_PATH = DATA_DIR / "corpus.yaml"  # tune: collected by the hand that wrote the table
HELDBACK_PATH = DATA_DIR / "heldback.yaml"  # the held-back part (the next set collected blind to the table)
SCORES_PATH = DATA_DIR / "held-scores.yaml"  # each blind set's once-held score and its set-aside files


BEFORE_SCORING = "before scoring"


class SetAside(NamedTuple):
    """A blind set's entries set aside when its readers checked it; never counted, never tuned on."""

    path: Path
    why: str  # completes "Its N entries ..." (from other stacks, or whose threads the table cited)
    held_score: tuple[int, int, int, int]  # their one score beside the blind set: (entries, right, unknown, wrong)
    # when the readers' check came: before the set was scored, but for one set checked only afterwards
    when: str = BEFORE_SCORING

    @property
    def after_scoring(self) -> bool:
        """Set aside only after its set was scored: the set's figure as first scored counts these."""
        return self.when != BEFORE_SCORING


HeldScore = dict[str, tuple[int, int, int, int]]  # layer -> (entries, right, unknown, wrong)


def _counts(doc: yamlsrc.Located, path: tuple[object, ...], value: object) -> tuple[int, int, int, int]:
    """[entries, right, unknown, wrong] checked: four counts >= 0 whose last three add up to the first."""
    if isinstance(value, list) and len(value) == 4 and all(type(n) is int and n >= 0 for n in value):
        entries, right, unknown, wrong = value
        if entries == right + unknown + wrong:
            return (entries, right, unknown, wrong)
    raise ConfigError(f"{doc.where(path)}: expected [entries, right, unknown, wrong] adding up, got {value!r}")


def load_scores(
    path: Path = SCORES_PATH,
) -> tuple[tuple[tuple[Path, HeldScore], ...], dict[Path, tuple[SetAside, ...]]]:
    """The blind sets in the order they were collected with their once-held scores, and their set-aside files.

    Errors name the file, the line and the YAML path (ConfigError).
    """
    doc = yamlsrc.load(path, what="scores file")
    sets = doc.data.get("sets") if isinstance(doc.data, dict) else None
    if not isinstance(sets, list):
        raise ConfigError(f"{doc.where(())}: expected a mapping with a list `sets`")
    scores: list[tuple[Path, HeldScore]] = []
    asides: dict[Path, tuple[SetAside, ...]] = {}
    for i, item in enumerate(sets):
        name = item.get("file") if isinstance(item, dict) else None
        if name != f"blind-{i + 1}.yaml":
            raise ConfigError(f"{doc.where(('sets', i))}: expected file blind-{i + 1}.yaml, got {name!r}")
        held = item.get("held")
        if not isinstance(held, dict) or not held:
            raise ConfigError(f"{doc.where(('sets', i))}: expected `held`, a mapping of layer to counts")
        counts = {str(k): _counts(doc, ("sets", i, "held", k), v) for k, v in held.items()}
        scores.append((DATA_DIR / name, counts))
        found = []
        for j, a in enumerate(item.get("set_aside") or []):
            where = ("sets", i, "set_aside", j)
            if not (isinstance(a, dict) and isinstance(a.get("file"), str) and isinstance(a.get("why"), str)):
                raise ConfigError(f"{doc.where(where)}: expected `file` and `why`")
            score = _counts(doc, (*where, "score"), a.get("score"))
            found.append(SetAside(DATA_DIR / a["file"], a["why"], score, str(a.get("when", BEFORE_SCORING))))
        if found:
            asides[DATA_DIR / name] = tuple(found)
    return tuple(scores), asides


# The blind sets in the order they were collected, each with its once-scored held-back figures,
# and the blind sets that had entries set aside, each with its set-aside files.
BLIND_SCORES, SET_ASIDE = load_scores()
BLIND_PATHS = tuple(path for path, _ in BLIND_SCORES)
TUNE_PATHS = (CORPUS_PATH, *BLIND_PATHS)

# How docs/troubleshooting.md names each blind set, in the order of BLIND_SCORES.
ORDINALS = (
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "thirteenth",
    "fourteenth",
    "fifteenth",
    "sixteenth",
    "seventeenth",
    "eighteenth",
    "nineteenth",
    "twentieth",
    "twenty-first",
    "twenty-second",
    "twenty-third",
    "twenty-fourth",
    "twenty-fifth",
    "twenty-sixth",
    "twenty-seventh",
    "twenty-eighth",
    "twenty-ninth",
    "thirtieth",
    "thirty-first",
    "thirty-second",
    "thirty-third",
    "thirty-fourth",
    "thirty-fifth",
    "thirty-sixth",
    "thirty-seventh",
    "thirty-eighth",
    "thirty-ninth",
    "fortieth",
    "forty-first",
    "forty-second",
    "forty-third",
    "forty-fourth",
)
