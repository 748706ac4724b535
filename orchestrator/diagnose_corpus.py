"""The real-log corpus that keeps `orch diagnose` honest: loading, the split, scoring.

tests/data/diagnosis/corpus.yaml holds short excerpts of real failure logs
copied from public issue threads, each with its source, the layer that owned
the failure according to the thread's resolution, and a note. The corpus is
split once, by a hash of each entry's id (`split_of`), into a tune part
(signatures may be written from it) and a held-back part (only its totals are
looked at): the held-back accuracy is the number that says whether the table
generalises.

An entry is scored by `verdict()`: *right* when it names the entry's layer,
*unknown* when it answers "unknown" (with candidates), *wrong* when it names
another layer with confidence. bench/diagnose.py prints the per-layer table;
`corpus_markdown()` renders the same numbers for docs/troubleshooting.md.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from orchestrator.diagnose import LAYERS, UNKNOWN, Verdict, verdict

CORPUS_PATH = Path(__file__).resolve().parent.parent / "tests" / "data" / "diagnosis" / "corpus.yaml"
TUNE_SHARE = 0.6  # the share of entries signatures may be tuned on; the rest is held back
SPLITS = ("tune", "held")
MIN_HELD_ACCURACY = 0.90
MAX_WRONG_RATE = 0.03
_FIELDS = ("id", "source", "layer", "note", "excerpt")


@dataclass(frozen=True)
class Entry:
    """One real failure excerpt and the layer its thread's resolution names."""

    id: str
    source: str
    layer: str
    note: str
    excerpt: str

    @property
    def split(self) -> str:
        """'tune' or 'held', fixed by the id (see `split_of`)."""
        return split_of(self.id)


def split_of(entry_id: str) -> str:
    """The part an entry belongs to: the first 32 bits of sha256(id) against TUNE_SHARE.

    Deterministic and independent of the other entries, so adding an entry never
    moves an existing one between the parts.
    """
    fraction = int(hashlib.sha256(entry_id.encode()).hexdigest()[:8], 16) / 2**32
    return "tune" if fraction < TUNE_SHARE else "held"


class CorpusError(ValueError):
    """The corpus file is malformed (a missing field, an unknown layer, a duplicate id)."""


def load_corpus(path: Path = CORPUS_PATH) -> list[Entry]:
    """Every entry of the corpus file, validated, in file order."""
    doc = yaml.safe_load(Path(path).read_text())
    raw = doc.get("entries") if isinstance(doc, dict) else None
    if not isinstance(raw, list):
        raise CorpusError(f"{path}: expected a mapping with an 'entries' list")
    entries: list[Entry] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or sorted(item) != sorted(_FIELDS):
            raise CorpusError(f"{path}: entry {i} must have exactly the fields {', '.join(_FIELDS)}")
        values = {k: item[k] for k in _FIELDS}
        if not all(isinstance(v, str) and v.strip() for v in values.values()):
            raise CorpusError(f"{path}: entry {i} has an empty or non-text field")
        entry = Entry(**values)
        if entry.id in seen:
            raise CorpusError(f"{path}: duplicate id {entry.id!r}")
        if entry.layer not in LAYERS:
            raise CorpusError(f"{path}: {entry.id}: unknown layer {entry.layer!r}")
        if not re.fullmatch(r"https://\S+", entry.source):
            raise CorpusError(f"{path}: {entry.id}: source must be one https URL")
        seen.add(entry.id)
        entries.append(entry)
    return entries


@dataclass(frozen=True)
class Outcome:
    """How the table answered one entry."""

    entry: Entry
    verdict: Verdict

    @property
    def result(self) -> str:
        """'right', 'unknown' or 'wrong' (a confident other layer)."""
        if self.verdict.layer == self.entry.layer:
            return "right"
        return "unknown" if self.verdict.layer == UNKNOWN else "wrong"


@dataclass
class Tally:
    """Counts for one layer (or all of them)."""

    entries: int = 0
    right: int = 0
    unknown: int = 0
    wrong: int = 0

    def add(self, result: str) -> None:
        self.entries += 1
        setattr(self, result, getattr(self, result) + 1)

    @property
    def accuracy(self) -> float:
        """Right answers over entries (1.0 for no entries)."""
        return self.right / self.entries if self.entries else 1.0

    @property
    def wrong_rate(self) -> float:
        """Confident wrong answers over entries."""
        return self.wrong / self.entries if self.entries else 0.0


@dataclass
class Score:
    """One part of the corpus scored: per-layer tallies, the total and every outcome."""

    split: str
    per_layer: dict[str, Tally] = field(default_factory=dict)
    total: Tally = field(default_factory=Tally)
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def passes(self) -> bool:
        """The acceptance bar: accuracy >= MIN_HELD_ACCURACY and wrong answers <= MAX_WRONG_RATE."""
        return self.total.accuracy >= MIN_HELD_ACCURACY and self.total.wrong_rate <= MAX_WRONG_RATE


def score(entries: Iterable[Entry], split: str) -> Score:
    """Score the entries of one part ('tune', 'held' or 'all') against the signature table."""
    result = Score(split=split)
    for entry in entries:
        if split != "all" and entry.split != split:
            continue
        outcome = Outcome(entry=entry, verdict=verdict(entry.excerpt))
        result.outcomes.append(outcome)
        result.per_layer.setdefault(entry.layer, Tally()).add(outcome.result)
        result.total.add(outcome.result)
    return result


def table_rows(part: Score) -> list[tuple[str, int, int, int, int, str]]:
    """(layer, entries, right, unknown, wrong, accuracy) per layer in LAYERS order, then 'all'."""
    rows = []
    for layer in LAYERS:
        t = part.per_layer.get(layer)
        if t is not None:
            rows.append((layer, t.entries, t.right, t.unknown, t.wrong, f"{t.accuracy:.0%}"))
    t = part.total
    rows.append(("all", t.entries, t.right, t.unknown, t.wrong, f"{t.accuracy:.1%}"))
    return rows


def corpus_markdown(entries: list[Entry]) -> str:
    """The corpus section of docs/troubleshooting.md, with the current per-layer numbers."""
    parts = {name: score(entries, name) for name in SPLITS}
    sources = sorted({re.sub(r"^https://github\.com/([^/]+/[^/]+)/.*", r"\1", e.source) for e in entries})
    out = [
        "## Real-log corpus and accuracy",
        "",
        f"`tests/data/diagnosis/corpus.yaml` holds {len(entries)} short excerpts of real failure logs, each",
        "copied from a public issue, pull request or discussion (its `source`), with the layer that owned",
        "the failure according to the thread's resolution (not the layer the message seems to name) and a",
        f"note saying why. They come from {len(sources)} repositories: JAX, jaxlib/XLA, libtpu users, pytorch/xla,",
        "PyTorch distributed (gloo, NCCL, c10d), MaxText, Levanter/Marin, Ray, gcloud TPU VMs,",
        "paramiko/Fabric and OpenSSH, found by searching the public issue trackers for the messages",
        "operators paste.",
        "",
        "**Split.** Decided before any signature was tuned: an entry is *tune* when the first 32 bits of",
        f"sha256 of its id fall below {TUNE_SHARE:.0%} of the range, else *held back*",
        "(`orchestrator/diagnose_corpus.py:split_of`). Signatures were written from the tune part's",
        "misses and from the public messages themselves (each cites a tune entry or another public",
        "thread, never a held-back entry); the held-back part is only ever read as totals. One caveat:",
        "the corpus was collected by the same hand that wrote the signatures, so every held-back excerpt",
        "was read once, while collecting it, before the split was applied.",
        "",
        '**Scoring.** *right*: the verdict names the entry\'s layer. *unknown*: the verdict is "unknown"',
        "with candidate layers (no confident signature matched). *wrong*: a confident other layer.",
        f"The bar (`bench/diagnose.py` exits non-zero below it): held-back accuracy >= {MIN_HELD_ACCURACY:.0%}",
        f"and wrong answers <= {MAX_WRONG_RATE:.0%}.",
        "",
    ]
    for name in SPLITS:
        part = parts[name]
        title = "Tune part" if name == "tune" else "Held-back part"
        out += [
            f"### {title} ({part.total.entries} entries)",
            "",
            "| Layer | Entries | Right | Unknown | Wrong | Accuracy |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        out += [f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} |" for r in table_rows(part)]
        out.append("")
    out += [
        "**Adding an entry.** Copy a few log lines (never a whole thread) from a public failure report",
        "whose resolution names the owning layer; add `id` (unique, `<repo>-<number>-<what>`), `source`",
        "(the thread's URL), `layer`, `note` (what the resolution said) and `excerpt` to the corpus file.",
        "Its split follows from its id. Run `.venv/bin/python bench/diagnose.py`: if the entry is in the",
        "tune part and missed, extend the table (orchestrator/diagnose_table.py) with a signature citing",
        "its source; then regenerate this page with `.venv/bin/python bench/diagnose.py --write-doc`.",
    ]
    return "\n".join(out) + "\n"
