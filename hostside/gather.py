"""List a run's files on one worker for `orch gather`: `python3 -m hostside.gather RUN_DIR`.

Prints one JSON document: every regular file directly in the run directory
(the receipt `record.json`, `output.log`, `supervisor.log`, `exit.json`, ...)
with its size, mtime and sha256, the receipt's phase, and whether the run is
still live on this worker (no `exit.json` yet). Temporary files of atomic
writes are left out. The controller copies what it does not already hold.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from hostside import SCHEMA_VERSION
from hostside import launch_proc as lp
from hostside.files import sha256_file as sha256

MAX_BYTES = 256 << 20  # larger files are listed but not hashed (the controller does not copy them)


def listing(run_dir: str) -> dict[str, Any]:
    if not os.path.isdir(run_dir):
        return {"ok": True, "run_dir": run_dir, "exists": False, "files": {}, "phase": None, "live": False}
    files: dict[str, dict[str, Any]] = {}
    for name in sorted(os.listdir(run_dir)):
        path = os.path.join(run_dir, name)
        if (
            name.startswith(".")
            or ".tmp-" in name
            or name == lp.LAUNCH_FILE
            or not os.path.isfile(path)
            or os.path.islink(path)
        ):
            continue  # the launch file holds the environment unredacted: it stays on the worker
        try:
            st = os.stat(path)
            entry: dict[str, Any] = {"size": st.st_size, "mtime": st.st_mtime, "sha256": None}
            if st.st_size <= MAX_BYTES:
                entry["sha256"] = sha256(path)
            else:
                entry["too_large"] = True
        except OSError as exc:  # vanished or unreadable between listdir and here
            entry = {"size": None, "mtime": None, "sha256": None, "error": str(exc)}
        files[name] = entry
    record = lp.read_json(os.path.join(run_dir, lp.RECORD_FILE)) or {}
    return {
        "ok": True,
        "run_dir": run_dir,
        "exists": True,
        "files": files,
        "phase": record.get("phase"),
        "live": not os.path.exists(os.path.join(run_dir, lp.EXIT_FILE)),
    }


def main(argv: list[str]) -> int:
    doc = listing(argv[0])
    print(json.dumps({"schema_version": SCHEMA_VERSION, "job": "gather", **doc}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
