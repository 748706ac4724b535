"""Forwarding the controller's stdin to the run's processes (`orch launch --stdin` / `--stdin-all`).

One thread reads the controller's stdin as it comes and hands every chunk to
each target worker's queue; one SSH channel per target worker carries its
queue to `hostside.launch_stdin`, which writes it into the process's stdin.
At the end of the controller's input every channel's input ends, and so the
process's stdin (it reads EOF). Nothing here decides anything about the gang.
"""

from __future__ import annotations

import codecs
import os
import queue
import threading
from collections.abc import Callable, Sequence

from orchestrator.launch.plan import LaunchPlan
from orchestrator.remote import job_document, run_hostside
from orchestrator.transport import Transport

CHUNK = 1 << 16
FOREVER = 10**7  # seconds; the remote `timeout` wrapper needs a number


class ChunkQueue:
    """A StdinSource fed by the reader thread: read(n) waits for the next chunk; "" at the end."""

    def __init__(self) -> None:
        self.chunks: queue.Queue[str] = queue.Queue()
        self.rest = ""
        self.ended = False

    def put(self, text: str) -> None:
        self.chunks.put(text)

    def read(self, n: int, /) -> str:
        if not self.rest and not self.ended:
            self.rest = self.chunks.get()
            self.ended = self.rest == ""
        out, self.rest = self.rest[:n], self.rest[n:]
        return out


def targets(plan: LaunchPlan, to: str | None) -> list[str]:
    """The workers whose process gets the controller's stdin: process 0's ("0"), every one ("all"), none."""
    if to == "all":
        return list(plan.workers)
    if to == "0":
        return [plan.processes[0].worker]
    return []


def forward(
    plan: LaunchPlan,
    transport: Transport,
    workers: Sequence[str],
    *,
    source: int = 0,
    report: Callable[[str], None],
) -> Forwarding:
    """Start forwarding file descriptor `source` to `workers`' processes (in daemon threads)."""
    queues = {name: ChunkQueue() for name in workers}

    def read() -> None:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        while True:
            try:
                data = os.read(source, CHUNK)
            except OSError:
                data = b""
            text = decoder.decode(data, final=not data)
            for q in queues.values():
                if text:
                    q.put(text)
                if not data:
                    q.put("")
            if not data:
                return

    def feed(name: str) -> None:
        run_dir = plan.process(name).run_dir
        res = run_hostside(
            transport, transport.workers[name], "launch_stdin", [run_dir], stdin=queues[name], timeout=FOREVER
        )
        try:
            doc = job_document(res)
        except Exception:
            report(f"{name}: stdin forwarding ended: {res.describe()}")
            return
        if not doc.get("ok"):
            report(f"{name}: stdin not forwarded: {doc.get('error')}")
        elif doc.get("note"):
            report(f"{name}: {doc['note']} ({doc.get('bytes')} bytes forwarded)")

    threads = [threading.Thread(target=read, daemon=True, name="orch-stdin")]
    threads += [threading.Thread(target=feed, args=(w,), daemon=True, name=f"orch-stdin-{w}") for w in workers]
    for t in threads:
        t.start()
    return Forwarding(queues)


class Forwarding:
    """The forwarding under way; `close()` ends every worker's input (once the run is over)."""

    def __init__(self, queues: dict[str, ChunkQueue]):
        self.queues = queues

    def close(self) -> None:
        for q in self.queues.values():
            q.put("")
