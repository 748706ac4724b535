"""The real-log corpora that keep `orch diagnose` honest: loading, the two parts, scoring.

The split is by file, and each file was collected differently. The *tune*
part is every file of `TUNE_PATHS` (orchestrator/diagnose_blind.py lists them: the
corpus collected by the hand that wrote the signature table, and each blind set
folded in after it was scored once); signatures may be written from any of
their entries.

The *held-back* part, tests/data/diagnosis/heldback.yaml, is the next set
collected blind to the table. It is never read entry by entry while tuning the
table, only its totals; its accuracy is the number that says whether the table
generalises. Blind sets may hold entries of layer `other` (a failure no layer owns).

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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from orchestrator import diagnose_words
from orchestrator.diagnose import LAYERS, UNKNOWN, Verdict, verdict
from orchestrator.diagnose_blind import (
    BLIND_SCORES,
    CORPUS_PATH,
    DATA_DIR,
    HELDBACK_PATH,
    ORDINALS,
    SET_ASIDE,
    TUNE_PATHS,
)

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
    file: str = field(default="", compare=False)  # the corpus file's name (set by load_corpus)


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
        entry = Entry(**values, file=Path(path).name)
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


def words_model(tune: Iterable[Entry]) -> diagnose_words.WordModel:
    """The word model (orchestrator/diagnose_words.py) of the tune part's entries."""
    return diagnose_words.build((e.layer, e.excerpt) for e in tune)


def score(entries: Iterable[Entry], split: str) -> Score:
    """Score every entry of one part ('tune' or 'held') against the signature table."""
    result = Score(split=split)
    for entry in entries:
        outcome = Outcome(entry=entry, verdict=verdict(entry.excerpt))
        result.outcomes.append(outcome)
        result.per_layer.setdefault(entry.layer, Tally()).add(outcome.result)
        result.total.add(outcome.result)
    return result


def _check_new_ids(path: Path, entries: list[Entry], seen: dict[str, Path]) -> None:
    """Refuse an id of `entries` (read from `path`) that an earlier file already has."""
    for e in entries:
        if e.id in seen:
            raise CorpusError(f"{path}: {e.id}: the id is also in {seen[e.id]} (ids are unique across files)")
    seen.update((e.id, Path(path)) for e in entries)


def _load_files(paths: Sequence[Path], seen: dict[str, Path]) -> list[Entry]:
    entries: list[Entry] = []
    for path in paths:
        part = load_corpus(path)
        _check_new_ids(path, part, seen)
        entries += part
    return entries


def load_tune(paths: Sequence[Path] = TUNE_PATHS) -> list[Entry]:
    """The tune part: every entry of every file of `paths`, in order; ids unique across the files."""
    return _load_files(paths, {})


def load_parts(tune: Sequence[Path] = TUNE_PATHS, held: Path = HELDBACK_PATH) -> dict[str, list[Entry] | None]:
    """{'tune': entries, 'held': entries, or None when the held-back file does not exist}.

    An id may appear in one file only: an entry is either tuned on or held back.
    """
    seen: dict[str, Path] = {}
    parts: dict[str, list[Entry] | None] = {"tune": _load_files(tune, seen), "held": None}
    if Path(held).exists():
        held_entries = load_corpus(held)
        _check_new_ids(held, held_entries, seen)
        parts["held"] = held_entries
    return parts


def by_file(entries: Iterable[Entry]) -> dict[str, list[Entry]]:
    """Entries grouped by the file they were read from, in first-seen order."""
    out: dict[str, list[Entry]] = {}
    for e in entries:
        out.setdefault(e.file, []).append(e)
    return out


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


def _table(rows: Iterable[tuple[str, int, int, int, int, str]]) -> list[str]:
    out = ["| Layer | Entries | Right | Unknown | Wrong | Accuracy |", "| --- | --- | --- | --- | --- | --- |"]
    return out + [f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} |" for r in rows]


def held_rows(held_score: dict[str, tuple[int, int, int, int]]) -> list[tuple[str, int, int, int, int, str]]:
    """The rows of `table_rows` for a blind set's recorded held-back score (layer -> counts)."""
    rows = [(la, n, r, u, w, f"{r / n:.0%}") for la, (n, r, u, w) in held_score.items()]
    n, r, u, w = (sum(v[i] for v in held_score.values()) for i in range(4))
    return [*rows, ("all", n, r, u, w, f"{r / n:.1%}")]


def corpus_markdown(
    tune: list[Entry],
    held: list[Entry] | None,
    tune_paths: Sequence[Path] = TUNE_PATHS,
    held_path: Path = HELDBACK_PATH,
) -> str:
    """The corpus section of docs/troubleshooting.md, with the current per-layer numbers.

    `held` is None when the held-back file is missing: the section then shows the
    tune figures and says the held-back ones are filled in by the full run.
    """
    scored = {"tune": score(tune, "tune"), "held": score(held, "held") if held is not None else None}
    files = by_file(tune)
    corpus_entries = files.get(CORPUS_PATH.name, [])
    sources = sorted({re.sub(r"^https://github\.com/([^/]+/[^/]+)/.*", r"\1", e.source) for e in corpus_entries})
    corpus_file, held_file = _rel(CORPUS_PATH), _rel(held_path)
    tune_files = ", ".join(f"`{_rel(p)}`" for p in tune_paths)
    blind_lines: list[str] = []
    blind_tables: list[str] = []
    first = [0, 0, 0]  # every set as first scored: entries, right, wrong
    for i, (path, held_score) in enumerate(BLIND_SCORES):
        total = held_rows(held_score)[-1]
        right, wrong = total[2] / total[1], total[4] / total[1]
        nth = ORDINALS[min(i, len(ORDINALS) - 1)]
        # a set its readers checked only after scoring: the figure as first scored counts the entries
        # they then set aside, and the table below counts the entries they kept
        late = [a.held_score for a in SET_ASIDE.get(path, ()) if a.after_scoring]
        n, r, w = (sum(c[k] for c in (*held_score.values(), *late)) for k in (0, 1, 3))
        first = [f + x for f, x in zip(first, (n, r, w), strict=True)]
        as_held = f"at {r / n:.1%} right and {w / n:.1%} wrong"
        if late:
            as_held += f" of {n} entries ({right:.1%} and {wrong:.1%} of the {total[1]} its readers kept, table below)"
        else:
            as_held += " (table below)"
        blind_lines += [
            f"  - `{_rel(path)}` ({len(files.get(path.name, []))} entries): the {nth} set collected",
            "    blind, by someone who had not seen the signature table. It was scored once as the held-back",
            f"    part, {as_held}, then folded into tune: its",
            "    misses were studied as classes of failure and the table extended for those classes.",
        ]
        for aside in SET_ASIDE.get(path, ()):
            n, r, u, w = aside.held_score
            blind_lines += [
                f"    Its {n} {'entry' if n == 1 else 'entries'} {aside.why} {'was' if n == 1 else 'were'} set aside",
                f"    {aside.when}, into `{_rel(aside.path)}`: scored once beside it ({r}/{n} right,",
                f"    {u} unknown, {w} wrong), never counted and never tuned on.",
            ]
        blind_tables += [
            f"### `{_rel(path)}` when it was the held-back part ({total[1]} entries, before tuning on it)",
            "",
            *_table(held_rows(held_score)),
            "",
        ]
    counts = [c for _, held_score in BLIND_SCORES for c in held_score.values()]
    held_n, held_right, held_wrong = (sum(c[i] for c in counts) for i in (0, 1, 3))
    out = [
        "## Real-log corpus and accuracy",
        "",
        "Files of short excerpts of real failure logs, each copied from a public issue, pull request",
        "or discussion (its `source`), with the layer that owned the failure according to the thread's",
        "resolution (not the layer the message seems to name) and a note saying why.",
        "",
        "**Split (by file).** Each file was collected differently; ids are unique across all of them.",
        "",
        f"- *Tune* ({tune_files}): signatures may be written from any of its entries, so its accuracy",
        "  says how well the table fits what it has seen, not how well it generalises.",
        f"  - `{corpus_file}` ({len(corpus_entries)} entries from {len(sources)} repositories: JAX, jaxlib/XLA,",
        "    libtpu users, pytorch/xla, PyTorch distributed (gloo, NCCL, c10d), MaxText, Levanter/Marin, Ray,",
        "    gcloud TPU VMs, paramiko/Fabric and OpenSSH): collected by the same hand that wrote the",
        "    signatures, by searching public issue trackers for the messages operators paste.",
        *blind_lines,
        f"- *Held back* (`{held_file}`): the next set collected blind to the table, in the same format. It",
        "  is never read entry by entry while tuning the table, only its totals; its accuracy is the number",
        "  that says whether the table generalises. It holds failures of the stack orch serves (JAX/XLA/",
        "  libtpu, torch_xla, PyTorch distributed, Ray, TPU VMs, SSH, the hosts' storage); entries collected",
        "  from other stacks, or whose label the reader who checks the set against its threads does not find",
        "  supported, are set aside before scoring and never count against the bar. Each set's file header",
        "  records how it was collected, how far it was checked against its threads, and its one score.",
        "",
        "Blind sets may hold entries of layer `other` (a failure no layer owns), which count as right when",
        "the verdict is unknown. A signature is written for the *class* of a failure as real logs phrase it",
        "across versions and tools (found in other public threads with the same message), and",
        "tests/test_diagnose.py checks each new one against other phrasings of its class and against near",
        "misses.",
        "",
        '**Scoring.** *right*: the verdict names the entry\'s layer. *unknown*: the verdict is "unknown"',
        "with candidate layers (no confident signature matched). *wrong*: a confident other layer.",
        f"The bar (`bench/diagnose.py` exits non-zero below it): held-back accuracy >= {MIN_HELD_ACCURACY:.0%},",
        f"and wrong answers <= {MAX_WRONG_RATE:.0%} in each part. Without the held-back file the full run",
        "exits non-zero saying so (`--smoke` prints the tune figures and exits 0).",
        "",
        f"**Every blind set, held back once.** Over the {len(BLIND_SCORES)} blind sets ({held_n} entries), each scored",
        f"by the table it was held back from: {held_right / held_n:.1%} right, {held_wrong / held_n:.1%} wrong"
        f" ({first[1] / first[0]:.1%} and {first[2] / first[0]:.1%} of {first[0]}"
        f" with the {first[0] - held_n} entries set aside only after their set was scored).",
        "`bench/diagnose_history.py` re-runs those scorings from the repository's history (each set with",
        "its table's commit) and reproduces every one of their tables below; `--variant FILE` scores a general change",
        "to the classifier (a rule, not a signature for an entry) with every one of those old tables, on",
        "data none of them had seen.",
        "",
        *blind_tables,
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
        out += [f"### {title} ({part.total.entries} entries)", "", *_table(table_rows(part)), ""]
        if name == "tune":
            for file, entries in files.items():
                t = score(entries, "tune").total
                out.append(
                    f"- `{file}`: {t.right}/{t.entries} right ({t.accuracy:.1%}), {t.unknown} unknown, {t.wrong} wrong"
                )
            out.append("")
    out += [
        "**Adding an entry.** Copy a few log lines (never a whole thread) from a public failure report",
        "whose resolution names the owning layer; add `id` (unique across all the files,",
        "`<repo>-<number>-<what>`), `source` (the thread's URL), `layer`, `note` (what the resolution said)",
        f"and `excerpt` to `{corpus_file}`. Run `.venv/bin/python bench/diagnose.py --misses`:",
        "if it is missed, extend the table (the layer's orchestrator/diagnose_table_*.py) with a signature",
        "for its class of failure, citing its source; then regenerate this page with",
        "`.venv/bin/python bench/diagnose.py --write-doc`. Entries for the held-back file come from",
        "someone who has not read the table, and are added there without looking at how they score;",
        "they skip every thread the corpus already quotes or the table cites",
        "(`.venv/bin/python bench/diagnose_known.py` lists them).",
    ]
    return "\n".join(out) + "\n"
