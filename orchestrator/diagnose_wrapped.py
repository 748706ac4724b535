"""Two neighbouring log lines as the one line a console wrapped, for lines no signature matches alone.

Pure and standalone (no imports), so bench/diagnose_variants/joined.py can apply today's rule to the
tables of earlier commits. `orchestrator.diagnose.classify` matches the joined line once more.
"""

from __future__ import annotations

# A line at least this long may be one a console wrapped (a terminal's width, a rich console's
# panel, a fixed-width paste); shorter lines are never joined with the next.
MIN_WRAPPED_LINE = 60


def _quoted(line: str) -> str | None:
    """The text of a line quoted in a reply ("> ..." in an issue thread or a mail), or None."""
    text = line.lstrip()
    return text.lstrip("> ") if text.startswith(">") else None


def joined(first: str, second: str, width: int) -> str | None:
    """Two neighbouring lines as the one line a console wrapped, if they look wrapped; else None.

    The first must be at least MIN_WRAPPED_LINE long, and either the second indented under it (a rich
    console's panel, a terminal wrapping at a word: joined with a space), or both quoted in a reply
    (a quoted paste re-wrapped at words: their texts joined with a space), or the first as wide as
    the log's widest line, `width` (a fixed-width paste cut in the middle of a word: joined as they are).
    """
    if len(first) < MIN_WRAPPED_LINE:
        return None
    if second[:1].isspace():
        return f"{first.rstrip()} {second.strip()}"
    quoted = _quoted(first), _quoted(second)
    if quoted[0] is not None and quoted[1] is not None:
        return f"{quoted[0].rstrip()} {quoted[1].strip()}"
    return first + second if len(first) == width else None
