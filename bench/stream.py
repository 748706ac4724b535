"""Live-stream benchmark: how fast `orch launch` brings many workers' output to the controller.

Brings up its own local slice (or uses one given with --sandbox-dir), makes
the jax-cpu bundle active with `orch deploy`, then has every worker print the
same numbered lines (stdout, with a stderr line every 100) twice, in one run:

  orch      `orch launch --workdir` of the program: the lines arrive through
            orch's output streams, worker-prefixed, stdout and stderr apart;
  baseline  the same program through plain parallel OpenSSH, `ssh host python3
            -c PROGRAM` to every worker at once, as a shell loop with `&` would.

Each side is measured from its first line to its last (the live stream alone,
without orch's start-up), in lines/s and MB/s of the workers' own output, and
every line is counted, so a lost line fails the benchmark. The receiving end
reads as fast as it can (a pipe into this process).

    .venv/bin/python bench/stream.py [--workers 16] [--lines 100000] [--sandbox-dir DIR] [--smoke]

--smoke: 2 workers, 5000 lines each.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _slice import LANE, Slice, add_slice_args, open_slice, orch_executable  # noqa: E402

# argv: LINES RANK (RANK defaults to $RANK). 60-byte lines on stdout, one stderr line every 100.
PROGRAM = r"""
import os, sys
n = int(sys.argv[1])
me = sys.argv[2] if len(sys.argv) > 2 else os.environ["RANK"]
out, err = sys.stdout, sys.stderr
pad = "x" * 40
for i in range(n):
    out.write(f"out {me} {i:>9} {pad}\n")
    if i % 100 == 0:
        err.write(f"err {me} {i}\n")
"""


@dataclass
class Received:
    """What one receiving side counted: lines and bytes of the workers' own output, first to last line."""

    lines: int = 0
    bytes: int = 0
    first: float | None = None
    last: float | None = None

    def take(self, line: bytes, prefix_end: int) -> None:
        now = time.perf_counter()
        self.first = self.first or now
        self.last = now
        self.lines += 1
        self.bytes += len(line) - prefix_end

    def add(self, other: Received) -> None:
        self.lines += other.lines
        self.bytes += other.bytes
        firsts = [t for t in (self.first, other.first) if t is not None]
        lasts = [t for t in (self.last, other.last) if t is not None]
        self.first = min(firsts) if firsts else None
        self.last = max(lasts) if lasts else None

    @property
    def seconds(self) -> float:
        return (self.last or 0.0) - (self.first or 0.0)


def read_all(stream, got: Received, prefixed: bool, reports: list[bytes] | None = None) -> None:
    for line in iter(stream.readline, b""):
        if prefixed and line.startswith(b"orch: "):
            if reports is not None:
                reports.append(line)
            continue  # orch's own progress shares stderr with the workers' stderr
        got.take(line, line.index(b" | ") + 3 if prefixed and b" | " in line else 0)


def through_orch(sl: Slice, workdir: Path, lines: int) -> Received:
    argv = [orch_executable(), "--fleet", str(sl.fleet_path), "launch", "--lane", LANE, "--no-gather"]
    argv += ["--workdir", str(workdir), "--", "program.py", str(lines)]
    proc = subprocess.Popen(argv, env=sl.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    out, err = Received(), Received()
    reports: list[bytes] = []
    readers = [
        threading.Thread(target=read_all, args=(proc.stdout, out, True)),
        threading.Thread(target=read_all, args=(proc.stderr, err, True, reports)),
    ]
    for t in readers:
        t.start()
    for t in readers:
        t.join()
    if proc.wait() != 0:
        raise SystemExit(f"orch launch exited {proc.returncode}:\n" + b"".join(reports[-20:]).decode())
    out.add(err)
    return out


def through_ssh(sl: Slice, lines: int) -> Received:
    procs = []
    for rank, address in enumerate(sl.addresses):
        argv = [*sl.ssh_argv(address), "python3", "-c", shlex.quote(PROGRAM), str(lines), str(rank)]
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL))
    parts = [Received() for _ in range(2 * len(procs))]
    readers = [
        threading.Thread(target=read_all, args=(stream, parts[2 * i + k], False))
        for i, p in enumerate(procs)
        for k, stream in enumerate((p.stdout, p.stderr))
    ]
    for t in readers:
        t.start()
    for t in readers:
        t.join()
    if any(p.wait() != 0 for p in procs):
        raise SystemExit("ssh baseline failed on a worker")
    total = Received()
    for part in parts:
        total.add(part)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_slice_args(ap, workers=16)
    ap.add_argument("--lines", type=int, default=100_000, help="stdout lines per worker (default 100000)")
    args = ap.parse_args()
    if args.smoke:
        args.workers, args.lines = 2, 5000

    with open_slice("stream", args.workers, sandbox_dir=args.sandbox_dir, base_address=args.base_address) as sl:
        sl.deploy()
        n = sl.workers
        expected = n * (args.lines + (args.lines + 99) // 100)
        with tempfile.TemporaryDirectory(prefix="orch-bench-stream-") as tmp:
            workdir = Path(tmp)
            (workdir / "program.py").write_text(PROGRAM)
            orch = through_orch(sl, workdir, args.lines)
        base = through_ssh(sl, args.lines)
        for label, got in (("orch launch", orch), ("plain parallel ssh", base)):
            if got.lines < expected:
                raise SystemExit(f"{label}: {got.lines} of {expected} lines arrived")
        print(f"workers: {n}, lines per worker: {args.lines} stdout + {(args.lines + 99) // 100} stderr")
        rows = []
        for label, got in ((f"orch launch, {n} workers", orch), (f"plain parallel ssh, {n} workers", base)):
            secs = max(got.seconds, 1e-9)
            rows.append(
                (
                    label,
                    f"{expected / secs:>11,.0f} lines/s {got.bytes / secs / 1e6:7.1f} MB/s "
                    f"({expected} lines, {got.bytes / 1e6:.1f} MB in {secs:.2f} s)",
                )
            )
        rows.append(("ratio orch / ssh (lines/s)", f"{max(base.seconds, 1e-9) / max(orch.seconds, 1e-9):6.2f}x"))
        for label, value in rows:
            print(f"  {label:<34}{value}")


if __name__ == "__main__":
    main()
