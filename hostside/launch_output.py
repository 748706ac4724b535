"""The user process's output, as the supervisor keeps it: complete on disk, one stream apart from the other.

The supervisor reads the user process's stdout and stderr pipes and writes
each chunk at once (so the process never waits on anyone reading the run):

- `output.log`       both streams, in arrival order, whole lines (what `orch logs` and gather read);
- `streams/stdout`   the stdout bytes alone, and `streams/stderr` the stderr bytes alone, which the
                     watcher streams to the controller's stdout and stderr.

The counts of lines written to each stream go into `exit.json`, so the
controller can tell whether its live view received every line. The stream
files sit in a subdirectory so that gathering the run (files directly in the
run directory) does not copy the output twice.
"""

from __future__ import annotations

import os
import select
from typing import IO

from hostside.rundir import LOG_FILE, STREAMS_DIR

STREAMS = ("stdout", "stderr")
CHUNK = 1 << 16
PARTIAL_LIMIT = 1 << 16  # a line longer than this goes to output.log in pieces


def stream_path(run_dir: str, stream: str) -> str:
    """Where one stream of the user process's output is kept on the worker."""
    return os.path.join(run_dir, STREAMS_DIR, stream)


class OutputPump:
    """Copies the user process's stdout and stderr pipes into the run's output files."""

    def __init__(self, run_dir: str, fds: dict[str, int]):
        os.makedirs(os.path.join(run_dir, STREAMS_DIR), exist_ok=True)
        self.fds = dict(fds)  # stream -> the read end of its pipe; removed at EOF
        self.combined = open(os.path.join(run_dir, LOG_FILE), "ab", buffering=0)
        self.files: dict[str, IO[bytes]] = {s: open(stream_path(run_dir, s), "ab", buffering=0) for s in fds}
        self.partial = {s: b"" for s in fds}
        self.lines = {s: 0 for s in fds}
        self.ends_open = {s: False for s in fds}  # the last byte written to the stream was not a newline
        for fd in self.fds.values():
            os.set_blocking(fd, False)

    @property
    def open(self) -> bool:
        return bool(self.fds)

    def watched(self) -> list[int]:
        """The pipe ends to select on."""
        return list(self.fds.values())

    def pump(self, ready: list[int] | None = None) -> int:
        """Copy what the pipes hold now (those in `ready`, or all), never waiting; returns the bytes copied.

        Once the process has ended, everything it wrote is in its pipes: one pump takes it all."""
        moved = 0
        for stream, fd in list(self.fds.items()):
            if ready is not None and fd not in ready:
                continue
            while True:
                try:
                    data = os.read(fd, CHUNK)
                except BlockingIOError:
                    break
                except OSError:
                    data = b""
                if not data:
                    self._close(stream)
                    break
                moved += len(data)
                self._write(stream, data)
        return moved

    def drain(self, idle: float, limit: float) -> None:
        """Copy until every pipe is at EOF, or nothing came for `idle` seconds, or `limit` passed.

        The process has ended; a process it left behind may still hold a pipe open, so EOF alone
        cannot be waited for."""
        import time

        end = time.monotonic() + limit
        while self.fds and time.monotonic() < end:
            ready, _, _ = select.select(self.watched(), [], [], idle)
            if not ready:
                return
            self.pump(ready)

    def counts(self) -> dict[str, int]:
        """Lines written to each stream so far (a last line without a newline counts)."""
        return {s: self.lines[s] + (1 if self.ends_open[s] else 0) for s in self.lines}

    def close(self) -> None:
        """Stop copying: flush partial lines to output.log and close everything."""
        for stream in list(self.fds):
            self._close(stream)
        for fh in self.files.values():
            fh.close()
        self.combined.close()

    def _write(self, stream: str, data: bytes) -> None:
        self.files[stream].write(data)
        self.lines[stream] += data.count(b"\n")
        self.ends_open[stream] = not data.endswith(b"\n")
        # output.log gets whole lines, so the two streams never interleave within a line.
        pending = self.partial[stream] + data
        cut = pending.rfind(b"\n") + 1
        if cut == 0 and len(pending) > PARTIAL_LIMIT:
            cut = len(pending)
        if cut:
            self.combined.write(pending[:cut])
        self.partial[stream] = pending[cut:]

    def _close(self, stream: str) -> None:
        fd = self.fds.pop(stream, None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
        if self.partial.get(stream):
            self.combined.write(self.partial[stream] + b"\n")
            self.partial[stream] = b""
