"""How a command's output is read: lines for a streaming callback, and invoke's runner made for big output.

`LineWriter` hands complete lines to a callback (the worker-prefixed
streaming of `orch exec`, launch and logs); `remote_runner_class` is Fabric's
runner for the commands that go through invoke (those with a stdin stream,
see fabric.py's run_one), made fit for large and long-lived output.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator

from orchestrator.transport.protocol import StdinSource


class LineWriter(io.TextIOBase):
    """A stream that hands complete lines to a callback (for prefixed streaming)."""

    def __init__(self, callback: Callable[[str], None]) -> None:
        self._callback = callback
        self._buf = ""

    def write(self, text: str) -> int:
        self._buf += text
        while "\n" in self._buf:
            line, self._buf = self._buf.split("\n", 1)
            self._callback(line)
        return len(text)

    def flush_rest(self) -> None:
        if self._buf:
            self._callback(self._buf)
            self._buf = ""


# A streamed command keeps only this much of its latest output in its Result (the tail, for
# error messages): a watch that streams for days must not hold everything it streamed.
STREAMED_KEEP_CHUNKS = 64


def line_writers(host: str, on_line: Callable[[str, str, str], object]) -> dict[str, LineWriter]:
    """A LineWriter per stream ("stdout", "stderr") handing `on_line(host, stream, line)` whole lines."""

    def writer(stream: str) -> LineWriter:
        def line(text: str) -> None:
            on_line(host, stream, text)

        return LineWriter(line)

    return {s: writer(s) for s in ("stdout", "stderr")}


def remote_runner_class() -> type:
    """Fabric's remote runner, made for large and long-lived output.

    - stdin is read in whole chunks: invoke reads a non-tty stdin one byte per
      loop iteration with a 10 ms sleep in between (made for interactive
      terminals), so a 1.6 KB JSON request took 16 s. We only ever pass
      complete documents, so read them at once.
    - output is read in 64 KiB chunks (invoke's 1000 bytes cost a Python loop
      per kilobyte) and decoded incrementally, so a character split between
      two reads is not replaced;
    - invoke's autoresponder joins the whole captured output on every chunk
      (quadratic in the output's size); orch sets no responders, so it is
      skipped;
    - a streamed command (output passed to a callback) keeps only the tail of
      its output in the Result.
    """
    import codecs

    from fabric.runners import Remote

    class ChunkedStdinRemote(Remote):  # type: ignore[misc]  # fabric has no type hints
        read_chunk_size = 1 << 16

        def read_our_stdin(self, input_: StdinSource) -> str:
            return input_.read(1 << 16)

        def read_proc_output(self, reader: Callable[[int], bytes]) -> Iterator[str]:
            decoder = codecs.getincrementaldecoder(self.encoding or "utf-8")("replace")
            while True:
                data = reader(self.read_chunk_size)
                text = decoder.decode(data or b"", final=not data)
                if text:
                    yield text
                if not data:
                    return

        def respond(self, buffer_: list[str]) -> None:
            if self.watchers:
                super().respond(buffer_)
            elif not self.opts.get("hide") and len(buffer_) > 2 * STREAMED_KEEP_CHUNKS:
                del buffer_[:-STREAMED_KEEP_CHUNKS]

    return ChunkedStdinRemote
