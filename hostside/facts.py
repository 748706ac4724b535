"""Host facts: who and where this worker is. `python3 -m hostside.facts ROOT`."""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import sys
import time
from typing import Any

from hostside import SCHEMA_VERSION


def collect(root: str) -> dict[str, Any]:
    """Hostname, interpreter, free disk at the worker root, wall clock."""
    probe_dir = root if os.path.isdir(root) else os.path.dirname(root.rstrip("/")) or "/"
    usage = shutil.disk_usage(probe_dir)
    return {
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "machine": platform.machine(),
        "root": root,
        "root_exists": os.path.isdir(root),
        "disk_free_bytes": usage.free,
        "disk_total_bytes": usage.total,
        "time": time.time(),
        "pid": os.getpid(),
    }


def main(argv: list[str]) -> int:
    root = argv[0] if argv else "/var/lib/orch"
    print(json.dumps({"schema_version": SCHEMA_VERSION, "job": "facts", **collect(root)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
