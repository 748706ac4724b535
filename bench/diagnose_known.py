"""The threads and pages the diagnosis corpus already quotes or the signature table cites.

A blind set is collected from threads nobody has used: its collectors get this list and skip
every address on it, and the set's header gives its count at the commit it was collected
against. It holds every `source` of every file in tests/data/diagnosis (the tune part, the
held-back part and the entries set aside from both), every signature's source, every URL in
orchestrator/ and every `owner/repo#N` citation in orchestrator/'s comments, normalised so that
one thread has one spelling: lower case, no scheme, no `www.`, a pull request written as an
issue, no #fragment.

    .venv/bin/python bench/diagnose_known.py [--count]

Prints the addresses sorted, one per line (`--count`: only how many).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orchestrator.diagnose import SIGNATURES  # noqa: E402
from orchestrator.diagnose_blind import DATA_DIR  # noqa: E402

_URL = re.compile(r"https?://[^\s'\"<>)\]\\`]+")
_ADDRESS = re.compile(r"[a-z0-9-]+(\.[a-z0-9-]+)+/\S+")  # a host with a path: a page, not a bare site
_CITATION = re.compile(r"(?<![\w./-])([A-Za-z0-9][\w.-]*/[\w.-]+)#(\d+)\b")


def normalise(address: str) -> str:
    """One spelling per thread: github.com/owner/repo/issues/N for issues and pull requests alike."""
    text = address.strip().lower()
    text = re.sub(r"^https?://", "", text)
    text = re.sub(r"^www\.", "", text)
    text = text.split("#", 1)[0].rstrip(".,;:/")
    return re.sub(r"^(github\.com/[^/]+/[^/]+)/pull/", r"\1/issues/", text)


def corpus_sources(data_dir: Path = DATA_DIR) -> set[str]:
    """The `source` of every entry in every corpus file (a file without entries adds nothing)."""
    found: set[str] = set()
    for path in sorted(data_dir.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        entries = doc.get("entries") if isinstance(doc, dict) else doc
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and isinstance(entry.get("source"), str):
                found.add(normalise(entry["source"]))
    return found


def table_citations(code_dir: Path = ROOT / "orchestrator") -> set[str]:
    """Every signature's source, every URL in the package's code and every `owner/repo#N` its comments cite."""
    found = {normalise(s.source) for s in SIGNATURES}
    for path in sorted(code_dir.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        found.update(normalise(url) for url in _URL.findall(text))
        found.update(f"github.com/{repo.lower()}/issues/{n}" for repo, n in _CITATION.findall(text))
    return {a for a in found if _ADDRESS.fullmatch(a)}


def known() -> list[str]:
    """The sorted, normalised addresses a new blind set must not reuse."""
    return sorted(corpus_sources() | table_citations())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", action="store_true", help="print only how many addresses are known")
    args = parser.parse_args(argv)
    addresses = known()
    print(len(addresses) if args.count else "\n".join(addresses))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
