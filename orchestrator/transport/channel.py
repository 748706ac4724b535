"""One command on one open SSH session, read on the calling thread.

invoke's runner (what Fabric's `Connection.run` uses) starts a thread per
output stream and polls for the end of the command with 10 ms sleeps: a few
milliseconds of controller CPU and 10-20 ms of latency per command, which a
fan-out pays once per worker. `exec_command` instead waits on paramiko's own
"data arrived or stream ended" notification for both streams and reads them as
they come, in 64 KiB chunks, decoding incrementally as invoke does (the
locale's encoding, undecodable bytes replaced). Commands with a stdin stream
still go through invoke (fabric.py).
"""

from __future__ import annotations

import codecs
import locale
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CHUNK = 1 << 16


@dataclass
class Outcome:
    """What came back: exit status (-1 when the session ended without one), output, whether it timed out."""

    exited: int
    stdout: str
    stderr: str
    timed_out: bool = False


class _Wake:
    """Stands in for a paramiko BufferedPipe's event: arrivals wake the reader, only the reader clears."""

    def __init__(self, shared: threading.Event) -> None:
        self._shared = shared

    def set(self) -> None:
        self._shared.set()

    def clear(self) -> None:
        pass


def supported(channel: Any) -> bool:
    """Whether this paramiko channel has the buffers `exec_command` waits on."""
    pipes = all(hasattr(getattr(channel, b, None), "set_event") for b in ("in_buffer", "in_stderr_buffer"))
    return pipes and isinstance(getattr(channel, "status_event", None), threading.Event)


def exec_command(
    channel: Any,
    command: str,
    timeout: float,
    *,
    on_text: Callable[[str, str], object] | None = None,
    keep_chunks: int | None = None,
) -> Outcome:
    """Run `command` on `channel` (an unused session); give up and close it after `timeout` seconds.

    `on_text(stream, text)` receives decoded output as it arrives; with
    `keep_chunks`, only that many of the last chunks stay in the Outcome.
    """
    wake = threading.Event()
    channel.in_buffer.set_event(_Wake(wake))
    channel.in_stderr_buffer.set_event(_Wake(wake))
    channel.settimeout(0.0)
    encoding = locale.getpreferredencoding(False) or "utf-8"
    readers = {"stdout": channel.recv, "stderr": channel.recv_stderr}
    decoders = {s: codecs.getincrementaldecoder(encoding)("replace") for s in readers}
    captured: dict[str, list[str]] = {s: [] for s in readers}
    deadline = time.monotonic() + timeout
    channel.exec_command(command)
    while readers:
        wake.clear()
        for stream, read in list(readers.items()):
            while True:
                try:
                    data = read(CHUNK)
                except TimeoutError:  # nothing buffered yet (socket.timeout is TimeoutError)
                    break
                text = decoders[stream].decode(data, final=not data)
                if text:
                    chunks = captured[stream]
                    chunks.append(text)
                    if keep_chunks is not None and len(chunks) > 2 * keep_chunks:
                        del chunks[:-keep_chunks]
                    if on_text is not None:
                        on_text(stream, text)
                if not data:
                    del readers[stream]
                    break
        if not readers:
            break
        left = deadline - time.monotonic()
        if left <= 0 or not wake.wait(left) and time.monotonic() >= deadline:
            channel.close()
            return Outcome(-1, "".join(captured["stdout"]), "".join(captured["stderr"]), timed_out=True)
    left = deadline - time.monotonic()
    if not channel.status_event.wait(max(left, 0.0)):
        channel.close()
        return Outcome(-1, "".join(captured["stdout"]), "".join(captured["stderr"]), timed_out=True)
    return Outcome(channel.recv_exit_status(), "".join(captured["stdout"]), "".join(captured["stderr"]))
