"""The real-log corpora that keep `orch diagnose` honest: loading, the two parts, scoring.

The split is by file, and each file was collected differently:

- tests/data/diagnosis/corpus.yaml, the *tune* part: short excerpts of real
  failure logs copied from public issue threads, collected by the same hand
  that wrote the signature table. Signatures may be written from any entry.
- tests/data/diagnosis/heldback.yaml, the *held-back* part: collected
  afterwards, in the same format, by someone who had not seen the signature
  table. It is never read entry by entry while tuning the table, only its
  totals; its accuracy is the number that says whether the table generalises.
  It may also hold entries of layer `other` (a failure no layer owns).

Each entry has its source, the layer that owned the failure according to the
thread's resolution, and a note. An entry is scored by `verdict()`: *right*
when it names the entry's layer (for an `other` entry: when it answers
"unknown"), *unknown* when it answers "unknown" (with candidates), *wrong*
when it names another layer with confidence. bench/diagnose.py prints the
per-layer tables; `corpus_markdown()` renders the same numbers for
docs/troubleshooting.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from orchestrator.diagnose import LAYERS, UNKNOWN, Verdict, verdict

DATA_DIR = Path(__file__).resolve().parent.parent / "tests" / "data" / "diagnosis"
CORPUS_PATH = DATA_DIR / "corpus.yaml"  # the tune part
HELDBACK_PATH = DATA_DIR / "heldback.yaml"  # the held-back part (collected blind to the table)
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


class CorpusError(ValueError):
    """The corpus file is malformed (a missing field, an unknown layer, a duplicate id)."""


def load_corpus(path: Path = CORPUS_PATH) -> list[Entry]:
    """Every entry of a corpus file (either part), validated, in file order."""
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise CorpusError(f"{path}{where}: not valid YAML") from None
    raw = doc.get("entries") if isinstance(doc, dict) else doc  # a bare list of entries is accepted too
    if not isinstance(raw, list):
        raise CorpusError(f"{path}: expected a mapping with an 'entries' list (or a list of entries)")
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
        if self.entry.layer == "other" and self.verdict.layer == UNKNOWN:
            return "right"  # no layer owns it, and the table did not pretend one does
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
        """The held-back bar: accuracy >= MIN_HELD_ACCURACY and wrong answers <= MAX_WRONG_RATE."""
        return self.total.accuracy >= MIN_HELD_ACCURACY and self.total.wrong_rate <= MAX_WRONG_RATE

    @property
    def few_wrong(self) -> bool:
        """The bar every part meets: confident wrong answers <= MAX_WRONG_RATE."""
        return self.total.wrong_rate <= MAX_WRONG_RATE


def score(entries: Iterable[Entry], split: str) -> Score:
    """Score every entry of one part ('tune' or 'held') against the signature table."""
    result = Score(split=split)
    for entry in entries:
        outcome = Outcome(entry=entry, verdict=verdict(entry.excerpt))
        result.outcomes.append(outcome)
        result.per_layer.setdefault(entry.layer, Tally()).add(outcome.result)
        result.total.add(outcome.result)
    return result


def load_parts(tune: Path = CORPUS_PATH, held: Path = HELDBACK_PATH) -> dict[str, list[Entry] | None]:
    """{'tune': entries, 'held': entries, or None when the held-back file does not exist}.

    An id may not appear in both files: an entry is either tuned on or held back.
    """
    parts: dict[str, list[Entry] | None] = {"tune": load_corpus(tune), "held": None}
    if Path(held).exists():
        held_entries = load_corpus(held)
        tune_ids = {e.id for e in parts["tune"] or []}
        shared = sorted(e.id for e in held_entries if e.id in tune_ids)
        if shared:
            raise CorpusError(f"{held}: {shared[0]}: the id is also in {tune} (an entry is in one part only)")
        parts["held"] = held_entries
    return parts


def score_parts(parts: dict[str, list[Entry] | None]) -> dict[str, Score | None]:
    """Each part of `load_parts` scored (None for a missing held-back part)."""
    return {name: (score(entries, name) if entries is not None else None) for name, entries in parts.items()}


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


def _rel(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(DATA_DIR.parent.parent.parent))
    except ValueError:
        return str(path)


def corpus_markdown(
    tune: list[Entry], held: list[Entry] | None, tune_path: Path = CORPUS_PATH, held_path: Path = HELDBACK_PATH
) -> str:
    """The corpus section of docs/troubleshooting.md, with the current per-layer numbers.

    `held` is None when the held-back file is missing: the section then shows the
    tune figures and says the held-back ones are filled in by the full run.
    """
    scored = {"tune": score(tune, "tune"), "held": score(held, "held") if held is not None else None}
    sources = sorted({re.sub(r"^https://github\.com/([^/]+/[^/]+)/.*", r"\1", e.source) for e in tune})
    tune_file, held_file = _rel(tune_path), _rel(held_path)
    out = [
        "## Real-log corpus and accuracy",
        "",
        "Two files of short excerpts of real failure logs, each copied from a public issue, pull request",
        "or discussion (its `source`), with the layer that owned the failure according to the thread's",
        "resolution (not the layer the message seems to name) and a note saying why.",
        "",
        "**Split (by file).** The two parts were collected differently:",
        "",
        f"- *Tune* (`{tune_file}`, {len(tune)} entries from {len(sources)} repositories: JAX, jaxlib/XLA,",
        "  libtpu users, pytorch/xla, PyTorch distributed (gloo, NCCL, c10d), MaxText, Levanter/Marin, Ray,",
        "  gcloud TPU VMs, paramiko/Fabric and OpenSSH): collected by the same hand that wrote the",
        "  signatures, by searching public issue trackers for the messages operators paste. Signatures may",
        "  be written from any of its entries, so its accuracy says how well the table fits what it has",
        "  seen, not how well it generalises.",
        f"- *Held back* (`{held_file}`): collected afterwards, in the same format, by someone who had",
        "  not seen the signature table. It is never read entry by entry while tuning the table, only its",
        "  totals; its accuracy is the number that says whether the table generalises. It may hold entries",
        "  of layer `other` (a failure no layer owns), which count as right when the verdict is unknown.",
        "",
        "Until this split, the held-back part was a hash-selected 40% of the tune file; as the same hand",
        "had collected it, it was not blind, and it now belongs to the tune part. A signature is written",
        "for the *class* of a failure as real logs phrase it across versions and tools (found in other",
        "public threads with the same message), and tests/test_diagnose.py checks each new one against",
        "other phrasings of its class and against near misses.",
        "",
        '**Scoring.** *right*: the verdict names the entry\'s layer. *unknown*: the verdict is "unknown"',
        "with candidate layers (no confident signature matched). *wrong*: a confident other layer.",
        f"The bar (`bench/diagnose.py` exits non-zero below it): held-back accuracy >= {MIN_HELD_ACCURACY:.0%},",
        f"and wrong answers <= {MAX_WRONG_RATE:.0%} in each part. Without the held-back file the full run",
        "exits non-zero saying so (`--smoke` prints the tune figures and exits 0).",
        "",
    ]
    for name in SPLITS:
        part = scored[name]
        title = "Tune part" if name == "tune" else "Held-back part"
        if part is None:
            out += [
                f"### {title}",
                "",
                f"`{held_file}` is not in this checkout: the held-back figures are filled in by the",
                "full run (`.venv/bin/python bench/diagnose.py --write-doc` with the file present).",
                "",
            ]
            continue
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
        "whose resolution names the owning layer; add `id` (unique across both files,",
        "`<repo>-<number>-<what>`), `source` (the thread's URL), `layer`, `note` (what the resolution said)",
        f"and `excerpt` to `{tune_file}`. Run `.venv/bin/python bench/diagnose.py --misses`:",
        "if it is missed, extend the table (orchestrator/diagnose_table.py) with a signature for its class of",
        "failure, citing its source; then regenerate this page with",
        "`.venv/bin/python bench/diagnose.py --write-doc`. Entries for the held-back file come from",
        "someone who has not read the table, and are added there without looking at how they score.",
    ]
    return "\n".join(out) + "\n"
