"""Keep a worker's copy of the user's training code in step: `python3 -m hostside.launch_sync VERB DIR`.

    manifest DIR                 {"files": {relpath: [sha256, mode]}} of what is there now
    apply DIR --manifest JSON [--archive TGZ]
                                 unpack the changed files from TGZ (both uploaded),
                                 remove files the manifest does not list, then verify every
                                 file against the manifest

The controller computes the same manifest locally (with `manifest()` from this
module, so both sides skip the same files), ships only files whose hash
differs, and refuses to launch when verification fails. Caches such as
`__pycache__` are neither shipped nor removed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tarfile
from typing import Any

from hostside import SCHEMA_VERSION
from hostside.files import copy_atomic
from hostside.files import sha256_file as file_hash

SKIP_DIRS = {
    "__pycache__",
    ".git",
    ".hg",
    ".svn",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".venv",
    "venv",
    ".ipynb_checkpoints",
}
SKIP_SUFFIXES = (".pyc", ".pyo")


def manifest(directory: str) -> dict[str, list[Any]]:
    """relpath -> [sha256, mode] of the regular files under `directory` (symlinks and caches skipped)."""
    files: dict[str, list[Any]] = {}
    if not os.path.isdir(directory):
        return files
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not os.path.islink(os.path.join(dirpath, d)))
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if name.endswith(SKIP_SUFFIXES) or os.path.islink(path) or not os.path.isfile(path):
                continue
            rel = os.path.relpath(path, directory).replace(os.sep, "/")
            files[rel] = [file_hash(path), os.stat(path).st_mode & 0o777]
    return files


def apply(directory: str, wanted: dict[str, list[Any]], archive: str | None) -> dict[str, Any]:
    os.makedirs(directory, exist_ok=True)
    changed = []
    if archive:
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                rel = member.name
                if not member.isfile() or rel not in wanted or rel.startswith("/") or ".." in rel.split("/"):
                    continue
                src = tar.extractfile(member)
                if src is None:  # not a regular file after all
                    continue
                with src:
                    copy_atomic(os.path.join(directory, rel), src, mode=wanted[rel][1])
                changed.append(rel)
        os.unlink(archive)
    deleted = []
    for rel in sorted(set(manifest(directory)) - set(wanted)):
        os.unlink(os.path.join(directory, rel))
        deleted.append(rel)
    for dirpath, _dirnames, _filenames in os.walk(directory, topdown=False):
        if dirpath != directory and not os.listdir(dirpath) and os.path.basename(dirpath) not in SKIP_DIRS:
            os.rmdir(dirpath)
    have = manifest(directory)
    mismatches = sorted(rel for rel, (digest, _) in wanted.items() if have.get(rel, [None])[0] != digest)
    return {
        "ok": not mismatches,
        "changed": changed,
        "deleted": deleted,
        "verified": len(wanted) - len(mismatches),
        "mismatches": mismatches,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="hostside.launch_sync")
    parser.add_argument("verb", choices=("manifest", "apply"))
    parser.add_argument("directory")
    parser.add_argument("--archive")
    parser.add_argument("--manifest")
    args = parser.parse_args(argv)
    if args.verb == "manifest":
        os.makedirs(os.path.dirname(os.path.abspath(args.directory)), exist_ok=True)
        result = {"ok": True, "files": manifest(args.directory)}
    else:
        with open(args.manifest) as fh:
            wanted = json.load(fh)["files"]
        os.unlink(args.manifest)
        result = apply(args.directory, wanted, args.archive)
    print(json.dumps({"schema_version": SCHEMA_VERSION, "job": f"launch_sync.{args.verb}", **result}))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
