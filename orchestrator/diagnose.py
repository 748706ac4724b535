"""Known failure signatures, each mapped to the layer that owns the failure.

A log from a probe, a launch or a user's run is classified line by line
against `SIGNATURES`: real messages taken from public torch_xla, JAX, libtpu,
XLA, torch.distributed and SSH reports (each signature names its source).
The answer is the *owning layer*, one of `LAYERS`, with a one-line remedy, so
troubleshooting stays inside that layer:

    transport          the worker could not be reached (SSH, host keys, auth)
    device-ownership   another process holds the chip (libtpu lockfile, /dev/accel*, /dev/vfio)
    runtime-proof      the runtime did not come up on the intended device
                       (no TPU, libtpu missing, CPU fallback, policy set in the wrong order)
    bundle-skew        installed frontends/runtime do not belong together
    cache              the compilation cache is written but not reused, or refuses I/O
    memory             device (HBM/VMEM) or host memory ran out
    collective         a peer did not join or died (coordinator, barriers, gloo, heartbeats)
    disk               a filesystem is full or over quota
    hardware           the platform reports a chip or worker fault
    other              a crash with no more specific owner

Tie-break (which line wins)
---------------------------
Every signature has a `priority`, its specificity: 80 and above names a root
cause outright ("The TPU is already in use by process with pid 176028"),
50-79 a specific failure that can still be the consequence of another one (a
heartbeat timeout after a peer crashed), 20-49 a symptom or a warning (a CPU
fallback, a deprecated variable), below 20 a generic crash (a segfault, a bare
Python exception line).

1. Each line gets at most one signature: the highest-priority one it matches
   (a line saying "Unable to initialize backend 'tpu': ABORTED: The TPU is
   already in use ..." is device-ownership, not the generic backend failure).
2. Across lines, the highest priority wins, wherever it appears: a JAX "falling
   back to cpu" warning (runtime-proof, 50s) that follows "already in use"
   (device-ownership, 90s) is device-ownership; a generic "RuntimeError: ..."
   line never beats a specific one, before or after it.
3. On equal priority the earliest line wins: later errors in a log are usually
   consequences of the first.

Wrapped lines
-------------
A console wraps long lines: a rich panel indents the rest under the message, a fixed-width paste
cuts mid-word. Two neighbouring lines that match nothing alone and look wrapped
(orchestrator/diagnose_wrapped.py) are matched once more as one line (the last MAX_UNWRAPPED such
pairs of a log). Applied to each blind set
with the table it was held back from (`bench/diagnose_history.py --variant
bench/diagnose_variants/joined.py`), it turned 2 of their 270 unknown answers into right ones and
added no wrong one (845 entries: 64.0 % right became 64.3 %).

Confident or unknown
--------------------
`verdict()` is what operators see: a layer only when the winning line is at
least a symptom (priority >= CONFIDENT_PRIORITY); a log whose best match is a
generic crash, or that matches nothing, answers "unknown" with the closest
candidate layers (from weak keyword hints, `LAYER_HINTS`), never a guessed
layer. `diagnose()` keeps returning the raw winning finding.

Weak signals that agree
-----------------------
Without a confident line, several *independent* weak signals for one layer
still say something: a generic DEADLINE_EXCEEDED next to "coordination
service" and "heartbeat" is the gang's failure even when no signature knows
that exact line. `verdict()` then answers that layer with `confidence` "low"
when at least LEAN_MIN_SIGNALS distinct signals (sub-confident signatures and
distinct `LAYER_HINTS` keywords) point to it and no other layer has more than
one, and at least one line shows a failure (a generic crash or status error at
least); the same word repeated counts once, and a generic crash line counts for
no layer, so a user's own bug stays "unknown" and a healthy log names nothing.

Words that agree
----------------
Failing that, the log's words (orchestrator/diagnose_words.py, a naive Bayes over the words of
the real-log corpus) may name the first candidate of the keyword hints, again with confidence
"low": only when they point to that same layer with a posterior of at least
diagnose_words.SURE. Neither alone decides; a log with no hint keyword stays "unknown".

The deepest frame
-----------------
Failing both, a Python traceback whose deepest frame runs in an SSH client library, or in
torch.distributed's rendezvous and process-group setup, names that layer with confidence "low"
(`FRAME_LAYERS`): whatever its last line says, the code that failed was reaching a worker or
forming the gang, unless that line is a Python error (a missing module or name, a program's own
bug, or a program asking for the default process group it never created), which says nothing about
the layer. Applied to each blind set with the table it was held back from
(`bench/diagnose_history.py --variant bench/diagnose_variants/frames.py`), it turned 7 of their
179 unknown answers into right ones and added no wrong one (576 entries: 65.8 % right became 67.0 %);
after the word rule, as `verdict` applies it, 4 more right than the word rule alone (70.3 % became
71.0 %, 3.1 % wrong both times). On the tenth blind set, the first held back with it, it changed
no answer after the word rule; without the word rule it would have named 2 wrong layers and no
right one (tests/data/diagnosis/blind-10.yaml's header gives both figures). One of the two was an
SSH client missing its crypto module (a packaging failure raised in paramiko's frame): the
exception for Python errors came from it, and removes that wrong answer without losing a right one
over the ten sets (without the word rule: 404 right and 20 wrong became 404 and 19).

Where the log stops
-------------------
Failing all of them, a log whose last line announces a wait that a layer owns names that layer with
confidence "low" (orchestrator/diagnose_stall.py): torch announcing its extensions' build cache, or
the module it is about to load from it, and nothing after it, is a run stalled on that cache, most
often waiting on its lock (cache).
Applied to each blind set with the table it was held back from
(`bench/diagnose_history.py --variant bench/diagnose_variants/stall.py`), it turned 3 of their 472
unknown answers into right ones and added no wrong one (1475 entries: 63.6 % right became 63.8 %), one
of them only because the rule allows more than one space after "Using", as that set's paste has it.

This module is pure: it classifies text that callers pass in and does no I/O.
The table itself is data in orchestrator/diagnose_table.py. The probe and
launch code reuse `SIGNATURES`, `classify`, `diagnose` and `layer_remedy`;
`render_troubleshooting_markdown()` generates docs/troubleshooting.md from the
same table (plus the corpus section from orchestrator/diagnose_corpus.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

from orchestrator import diagnose_words
from orchestrator.diagnose_frames import FRAME_LAYERS, frame_layer
from orchestrator.diagnose_literals import LiteralIndex, required_literals
from orchestrator.diagnose_stall import stall_layer
from orchestrator.diagnose_table import (
    DEBUGGING_ORDER,
    LAYER_INFO,
    LAYERS,
    MAX_LINE_SEARCH,
    SIGNATURES,
    Signature,
)
from orchestrator.diagnose_wrapped import joined

__all__ = [
    "CONFIDENT_PRIORITY",
    "LEAN_MIN_SIGNALS",
    "DEBUGGING_ORDER",
    "FRAME_LAYERS",
    "LAYERS",
    "LAYER_HINTS",
    "LAYER_INFO",
    "MAX_LINE_SEARCH",
    "SIGNATURES",
    "UNKNOWN",
    "Finding",
    "Signature",
    "Verdict",
    "classify",
    "diagnose",
    "frame_layer",
    "layer_remedy",
    "match_line",
    "render_troubleshooting_markdown",
    "signature",
    "stall_layer",
    "verdict",
    "winner",
]

UNKNOWN = "unknown"
# Below this a finding is a generic crash (a segfault, a bare exception line): it says
# something failed, not which layer owns it, so the verdict stays "unknown".
CONFIDENT_PRIORITY = 20

# The most pairs of lines one log has matched again as one wrapped line (see `classify`).
MAX_UNWRAPPED = 2000
# Distinct weak signals (see the module docstring) that name a layer with low confidence.
LEAN_MIN_SIGNALS = 3
# Weak per-layer keywords: never enough for a verdict, only to rank the candidates
# of an "unknown" answer (which layer to look at first).
LAYER_HINTS: dict[str, re.Pattern[str]] = {
    layer: re.compile(pattern, re.IGNORECASE)
    for layer, pattern in {
        "transport": r"\bssh\b|paramiko|sshd|known_hosts|host key|port 22\b|connection (refused|reset|closed)"
        r"|broken pipe|\bscp\b",
        "device-ownership": r"/dev/(accel|vfio)|lockfile|already in use|resource busy",
        "runtime-proof": r"PJRT_DEVICE|JAX_PLATFORMS|falling back to cpu|CpuDevice|TPU_[A-Z_]+|TPU initialization"
        r"|libtpu|backend 'tpu'",
        "bundle-skew": r"undefined symbol|cannot import name|has no attribute|ModuleNotFoundError|version mismatch"
        r"|incompatible|ImportError",
        "cache": r"compilation cache|persistent cache|cache entry",
        "memory": r"out of memory|\bOOM\b|RESOURCE_EXHAUSTED|bad_alloc|\bKilled\b|MemoryError|SIGKILL",
        "collective": r"rendezvous|barrier|coordinat|heartbeat|\bgloo\b|\bnccl\b|collective|\bpeer\b|c10d"
        r"|DistNetworkError|world_size|Failed to connect to remote server",
        "disk": r"no space|quota|\bdisk\b|/dev/shm|ENOSPC",
        "hardware": r"hardware|unhealthy|\bICI\b|chip (error|failure)|\bECC\b|preempt",
    }.items()
}


@dataclass(frozen=True)
class Finding:
    """One log line matched by a signature."""

    layer: str
    signature_id: str
    line: str  # the matched line, exactly as in the log (without its newline)
    line_number: int  # 1-based
    remedy: str
    source: str
    priority: int

    @property
    def consequence(self) -> bool:
        """True when this line shows a failure caused by another worker (see `Signature.consequence`)."""
        return _BY_ID[self.signature_id].consequence

    def to_dict(self) -> dict[str, object]:
        """The finding as JSON-ready fields (`signature` is the matched line, `id` the signature)."""
        return {
            "layer": self.layer,
            "signature": self.line,
            "id": self.signature_id,
            "line": self.line_number,
            "remedy": self.remedy,
            "source": self.source,
            "priority": self.priority,
        }


@dataclass(frozen=True)
class Verdict:
    """The answer for one log: an owning layer, or "unknown" with the closest candidate layers."""

    layer: str  # one of LAYERS, or UNKNOWN
    finding: Finding | None  # the line that proves `layer` (for "unknown": the best weak match, if any)
    candidates: tuple[str, ...] = field(default=())  # closest layers first, only when unknown
    # "high": a confident signature; "low": several weak signals agree, or the log's words agree with
    # the first candidate (see the module docstring); "none": unknown.
    confidence: str = "high"
    # for a "low" verdict, what it rests on: "signals" (weak signals agree), "words", "frame" (the
    # traceback's deepest frame), or "stall" (where the log stops)
    basis: str = ""

    @property
    def known(self) -> bool:
        """True when the verdict names a layer."""
        return self.layer != UNKNOWN

    @property
    def remedy(self) -> str:
        """The finding's remedy, else the layer's (or first candidate's) default, else the generic one."""
        if self.known and self.confidence == "high" and self.finding is not None:
            return self.finding.remedy
        if self.known:
            return layer_remedy(self.layer)
        return layer_remedy(self.candidates[0] if self.candidates else "other")

    def to_dict(self) -> dict[str, object]:
        """JSON-ready fields: the finding's fields, `layer` replaced by the verdict, and the candidates."""
        doc: dict[str, object] = (
            self.finding.to_dict()
            if self.finding is not None
            else {"signature": None, "id": None, "line": None, "source": None, "priority": None}
        )
        doc["layer"] = self.layer
        doc["remedy"] = self.remedy
        doc["candidates"] = list(self.candidates)
        doc["confidence"] = self.confidence
        if self.basis:
            doc["basis"] = self.basis
        return doc


_BY_ID = {s.id: s for s in SIGNATURES}


@cache
def _literal_index() -> LiteralIndex:
    """Which signatures may match a line, from the literal text each pattern cannot match without
    (orchestrator/diagnose_literals.py): most lines of a log rule out every signature this way.
    Built on the first match (about 35 ms), not at import."""
    return LiteralIndex([required_literals(s.pattern) for s in SIGNATURES])


def signature(sig_id: str) -> Signature:
    """The signature with this id (KeyError if unknown)."""
    return _BY_ID[sig_id]


def layer_remedy(layer: str) -> str:
    """The default one-line remedy for a layer (ValueError for an unknown layer)."""
    try:
        return LAYER_INFO[layer][1]
    except KeyError:
        raise ValueError(f"unknown layer {layer!r}; expected one of {', '.join(LAYERS)}") from None


# What launchers put before a process's own line: torchrun's "[rank0]:", Ray's
# "(pid=3030, ip=10.0.0.1)", "(BackendExecutor pid=7850)" or "(raylet)", xla_dist's
# "2020-07-11 06:43:09 10.164.0.3 [2]". A line is matched with and without it, so a
# signature anchored at the start of the process's line still holds behind a launcher.
_LAUNCHER_PREFIX = re.compile(
    r"^(?:\s*(?:\[rank\d+\]:|\([\w:.-]*(?: ?pid=\d+)?(?:, ip=[\d.]+)?\)"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ \[\d+\]))+ ?"
)


def match_line(line: str) -> Signature | None:
    """The highest-priority signature a single line matches (behind a launcher's prefix too), or None."""
    text = line[:MAX_LINE_SEARCH]
    bare = _LAUNCHER_PREFIX.sub("", text, count=1)
    texts = (text,) if bare == text else (text, bare)
    best: Signature | None = None
    # `bare` is a part of `text`: a literal missing from one is missing from both
    for index in _literal_index().candidates(text):
        sig = SIGNATURES[index]
        if (best is None or sig.priority > best.priority) and any(sig.pattern.search(t) for t in texts):
            best = sig
    return best


def _finding(sig: Signature, line: str, number: int) -> Finding:
    return Finding(
        layer=sig.layer,
        signature_id=sig.id,
        line=line,
        line_number=number,
        remedy=sig.remedy,
        source=sig.source,
        priority=sig.priority,
    )


def classify(text: str) -> list[Finding]:
    """Every line of `text` that matches a signature, in log order.

    Each line carries only its best (highest-priority) signature. Two neighbouring lines that match
    nothing alone and look wrapped (orchestrator/diagnose_wrapped.py) are matched once more as one
    line, the last MAX_UNWRAPPED such pairs of the log at most (a failure's lines come last; the bound keeps a huge
    log's cost near one pass); the finding then carries the joined line and the first line's number.
    """
    lines = text.splitlines()
    matched: list[tuple[Signature, str] | None] = [
        None if (sig := match_line(line)) is None else (sig, line) for line in lines
    ]
    width = max(map(len, lines), default=0)
    tried = 0
    for index in range(len(lines) - 2, -1, -1):
        if tried >= MAX_UNWRAPPED:
            break
        if matched[index] is not None or matched[index + 1] is not None:
            continue
        line = joined(lines[index], lines[index + 1], width)
        if line is not None:
            tried += 1
            sig = match_line(line)
            matched[index] = None if sig is None else (sig, line)
    return [_finding(m[0], m[1], number) for number, m in enumerate(matched, start=1) if m is not None]


def winner(findings: list[Finding]) -> Finding | None:
    """The finding that owns the failure: highest priority, then earliest line."""
    if not findings:
        return None
    return min(findings, key=lambda f: (-f.priority, f.line_number))


def diagnose(text: str) -> Finding | None:
    """The single most specific finding in `text` (see the module docstring), or None."""
    return winner(classify(text))


def candidates(text: str, findings: list[Finding] | None = None, limit: int = 3) -> tuple[str, ...]:
    """The layers closest to an unrecognised log, best first: weak matches, then keyword hints."""
    findings = classify(text) if findings is None else findings
    score: dict[str, float] = {}
    for f in findings:
        if f.layer != "other":
            score[f.layer] = score.get(f.layer, 0.0) + 10.0 + f.priority / 100
    for line in text.splitlines():
        head = line[:MAX_LINE_SEARCH]
        for layer, pattern in LAYER_HINTS.items():
            if pattern.search(head):
                score[layer] = score.get(layer, 0.0) + 1.0
    ranked = sorted(score, key=lambda layer: (-score[layer], LAYERS.index(layer)))
    return tuple(ranked[:limit])


def weak_signals(text: str, findings: list[Finding]) -> dict[str, set[str]]:
    """Per layer, the distinct weak signals in `text`: sub-confident signatures and hint keywords."""
    signals: dict[str, set[str]] = {}
    weak_lines: set[tuple[str, int]] = set()
    for f in findings:
        if f.layer != "other" and f.priority < CONFIDENT_PRIORITY:
            signals.setdefault(f.layer, set()).add(f"sig:{f.signature_id}")
            weak_lines.add((f.layer, f.line_number))
    for number, line in enumerate(text.splitlines(), start=1):
        head = line[:MAX_LINE_SEARCH]
        for layer, pattern in LAYER_HINTS.items():
            if (layer, number) in weak_lines:
                continue  # the line already counts once, as its signature: its words are not more evidence
            for m in pattern.finditer(head):
                signals.setdefault(layer, set()).add(m.group(0).lower())
    return signals


def _lean(text: str, findings: list[Finding]) -> str | None:
    """The layer that LEAN_MIN_SIGNALS distinct weak signals agree on, with no rival; else None."""
    if not findings:
        return None  # no line says anything failed: words alone never name a layer
    signals = weak_signals(text, findings)
    ranked = sorted(signals, key=lambda layer: (-len(signals[layer]), LAYERS.index(layer)))
    if not ranked or len(signals[ranked[0]]) < LEAN_MIN_SIGNALS:
        return None
    if any(len(signals[layer]) > 1 for layer in ranked[1:]):
        return None
    return ranked[0]


def verdict(text: str) -> Verdict:
    """The owning layer of `text`, or "unknown" with candidates when no confident signature matched.

    Without a confident signature, a layer that several distinct weak signals agree on is
    answered with confidence "low" (see the module docstring).
    """
    findings = classify(text)
    best = winner(findings)
    if best is not None and best.priority >= CONFIDENT_PRIORITY:
        return Verdict(layer=best.layer, finding=best)
    ranked = candidates(text, findings)
    lean = _lean(text, findings)
    if lean is not None:
        return Verdict(layer=lean, finding=best, candidates=ranked, confidence="low", basis="signals")
    worded = diagnose_words.agreeing(diagnose_words.model(), text, ranked)
    if worded is not None:
        return Verdict(layer=worded, finding=best, candidates=ranked, confidence="low", basis="words")
    framed = frame_layer(text)
    if framed is not None:
        return Verdict(layer=framed, finding=best, candidates=ranked, confidence="low", basis="frame")
    stalled = stall_layer(text)
    if stalled is not None:
        return Verdict(layer=stalled, finding=best, candidates=ranked, confidence="low", basis="stall")
    return Verdict(layer=UNKNOWN, finding=best, candidates=ranked, confidence="none")


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_code(text: str) -> str:
    body = _md_cell(text)
    fence = "``" if "`" in body else "`"
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def render_troubleshooting_markdown(corpus_section: str = "") -> str:
    """docs/troubleshooting.md, generated from `SIGNATURES` and `LAYER_INFO`.

    `corpus_section` (from `diagnose_corpus.corpus_markdown`) is appended: the
    corpus numbers come from scoring the corpus file, which this pure module does not read.
    """
    out = [
        "# Troubleshooting by owning layer",
        "",
        "<!-- Generated from orchestrator/diagnose.py by render_troubleshooting_markdown(); "
        "edit the table there, not this file. -->",
        "",
        "Every failure belongs to one layer. Find the layer first, then stay inside it.",
        "`orch diagnose LOG` (or `-` for stdin) names the layer of a log, the line that proves it and",
        "the remedy; `--all` lists every matching line and `--json` prints it for scripts.",
        "",
        "## Debugging order",
        "",
    ]
    out += [f"{i}. {step}" for i, step in enumerate(DEBUGGING_ORDER, start=1)]
    out += [
        "",
        "## Which line wins",
        "",
        "Each signature has a priority (its specificity). Each log line takes its highest-priority",
        "signature; across lines the highest priority wins wherever it appears, and on a tie the",
        "earliest line wins (later errors are usually consequences of the first). So a JAX",
        '"falling back to cpu" warning after "The TPU is already in use" is device-ownership, not',
        "runtime-proof, and a bare Python exception line never beats a specific message.",
        "",
        "A log whose best line is a generic crash (a bare exception, a status error) answers",
        '"unknown" with the closest layers, unless several distinct weak signals agree on one layer',
        f"(at least {LEAN_MIN_SIGNALS}: sub-confident messages and that layer's keywords, such as a coordinator,",
        "a barrier and a heartbeat, with no other layer having more than one): then it names that layer",
        "with \"low confidence\" and the layer's default remedy. Failing that, the log's words may name",
        "the closest layer, again with low confidence, when a naive Bayes over the words of the real-log",
        f"corpus below gives that same layer a posterior of at least {diagnose_words.SURE:g}",
        "(orchestrator/diagnose_words.py; `bench/diagnose_history.py --variant",
        "bench/diagnose_variants/words.py` measures that rule on the blind sets, fitted only on what",
        "came before each). Neither alone names a layer, and a worker's log with no failure line is",
        "never counted as failed for it (`orch diagnose RUN`). Last, a Python traceback whose deepest",
        "frame runs in an SSH client library (paramiko, Fabric), in torch.distributed's rendezvous and",
        "process-group setup or jax.distributed's (collective), in JAX's persistent compilation cache",
        "(cache), or in jax's import of jaxlib (bundle-skew) names that layer with low confidence",
        "(orchestrator/diagnose_frames.py;",
        "`--variant bench/diagnose_variants/frames.py` measures it the same way). Failing all of them, a log",
        "whose last line is torch announcing its extensions' build cache, or the extension it is about to",
        "load, is a run stalled on that cache, most often on its lock (cache, low confidence;",
        "orchestrator/diagnose_stall.py, measured by `--variant bench/diagnose_variants/stall.py`).",
        "",
        "## Layers",
        "",
        "| Layer | Owns | Default remedy |",
        "| --- | --- | --- |",
    ]
    out += [f"| {layer} | {_md_cell(LAYER_INFO[layer][0])} | {_md_cell(LAYER_INFO[layer][1])} |" for layer in LAYERS]
    for layer in LAYERS:
        sigs = sorted((s for s in SIGNATURES if s.layer == layer), key=lambda s: (-s.priority, s.id))
        out += [
            "",
            f"## {layer}",
            "",
            _md_cell(LAYER_INFO[layer][0]),
            "",
            "| Signature | Priority | Example (real message) | Remedy | Source |",
            "| --- | --- | --- | --- | --- |",
        ]
        out += [
            f"| `{s.id}` | {s.priority} | {_md_code(s.example)} | {_md_cell(s.remedy)} | {s.source} |" for s in sigs
        ]
    text = "\n".join(out) + "\n"
    return text + ("\n" + corpus_section if corpus_section else "")
