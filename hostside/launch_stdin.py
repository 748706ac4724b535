"""Forward this job's stdin to a run's user process: `python3 -m hostside.launch_stdin RUN_DIR`.

The supervisor of a run launched with `--stdin` gives the user process the
read end of a FIFO in the run directory (`stdin`, owner-only) and holds a
write end itself, so the process does not see an end of input before the
controller connects. This job copies its own stdin (the controller's, over
SSH) into the FIFO as it comes; at its end of input it closes the FIFO and
leaves `stdin.eof`, on which the supervisor closes its own write end: the
process then reads EOF. Prints one JSON document: the bytes forwarded.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import time
from typing import Any

from hostside import SCHEMA_VERSION
from hostside import launch_proc as lp

FIFO = "stdin"
EOF_MARK = "stdin.eof"
OPEN_WAIT = 30.0
CHUNK = 1 << 16


def forward(run_dir: str, source: int) -> dict[str, Any]:
    """Copy `source` into the run's stdin FIFO until its end, then mark the end of input."""
    path = os.path.join(run_dir, FIFO)
    deadline = time.monotonic() + OPEN_WAIT
    fd = None
    while fd is None:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # fails with ENXIO while nobody reads it
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENXIO) or time.monotonic() > deadline:
                return {"ok": False, "error": f"cannot open the run's stdin {path}: {exc.strerror}"}
            if lp.read_json(os.path.join(run_dir, lp.EXIT_FILE)):
                return {"ok": False, "error": "the process ended before its stdin was connected"}
            time.sleep(0.05)
    os.set_blocking(fd, True)
    sent = 0
    try:
        while True:
            data = os.read(source, CHUNK)
            if not data:
                break
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
                sent += n
    except BrokenPipeError:
        return {"ok": True, "bytes": sent, "note": "the process closed its stdin before the end of the input"}
    finally:
        os.close(fd)
        with open(os.path.join(run_dir, EOF_MARK), "w"):
            pass
    return {"ok": True, "bytes": sent}


def main(argv: list[str]) -> int:
    result = forward(argv[0], sys.stdin.fileno())
    print(json.dumps({"schema_version": SCHEMA_VERSION, "job": "launch_stdin", **result}))
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
