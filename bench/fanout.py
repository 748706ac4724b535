"""Fan-out benchmark: `orch exec -- true` on 16 local workers.

Compares, in one run on the same local slice:
  - orch exec on every worker (the CLI, as an operator runs it),
  - a sequential `ssh host true` loop over the same workers (the baseline),
  - orch exec on one worker alone (the floor: process start + one connection).
Prints medians and the ratios.

    .venv/bin/python bench/fanout.py [--workers 16] [--repeat 5] [--sandbox-dir DIR] [--smoke]

--smoke: 2 workers, 1 repeat.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _slice import Slice, add_slice_args, open_slice  # noqa: E402


def timed_orch(sl: Slice, *args: str) -> float:
    start = time.perf_counter()
    sl.orch(*args)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_slice_args(ap, workers=16)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    if args.smoke:
        args.workers, args.repeat = 2, 1

    with open_slice("fanout", args.workers, sandbox_dir=args.sandbox_dir, base_address=args.base_address) as sl:
        timed_orch(sl, "exec", "--", "true")  # warm the page cache and sshd
        fan, seq, one = [], [], []
        for _ in range(args.repeat):
            fan.append(timed_orch(sl, "exec", "--", "true"))
            one.append(timed_orch(sl, "exec", "--workers", "0", "--", "true"))
            start = time.perf_counter()
            for a in sl.addresses:
                subprocess.run([*sl.ssh_argv(a), "true"], check=True, stdin=subprocess.DEVNULL)
            seq.append(time.perf_counter() - start)
        f, s, o = (statistics.median(x) for x in (fan, seq, one))
        n = sl.workers
        print(f"workers: {n}, repeats: {args.repeat} (medians)")
        rows = [
            (f"orch exec, {n} workers", f"{f:6.3f} s"),
            ("sequential ssh loop", f"{s:6.3f} s"),
            ("orch exec, 1 worker", f"{o:6.3f} s"),
            ("ratio sequential / orch exec", f"{s / f:6.2f}x"),
            (f"ratio orch {n} / orch 1", f"{f / o:6.2f}x"),
        ]
        for label, value in rows:
            print(f"  {label:<30}{value}")


if __name__ == "__main__":
    main()
