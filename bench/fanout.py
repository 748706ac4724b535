"""Fan-out benchmark: `orch exec -- true` on 16 local workers.

Compares, in one run on the same 16-worker local slice:
  - orch exec on all 16 workers (the CLI, as an operator runs it),
  - a sequential `ssh host true` loop over the same workers (the baseline),
  - orch exec on one worker alone (the floor: process start + one connection).
Prints medians and the ratios.

    .venv/bin/python bench/fanout.py [--workers 16] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orchestrator import sandbox  # noqa: E402


def timed(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default=f"/var/tmp/orch-bench-fanout-{os.getpid()}")
    ap.add_argument("--base-address", default=f"127.{203 + os.getpid() % 50}.1.1")
    args = ap.parse_args()

    orch = str(Path(sys.executable).parent / "orch")
    state = sandbox.up(args.dir, args.workers, base_address=args.base_address)
    try:
        d = Path(args.dir)
        env = dict(os.environ, ORCH_FLEET=str(d / "fleet.yaml"))
        ssh = [
            "ssh",
            "-i",
            str(d / "id_ed25519"),
            "-o",
            f"UserKnownHostsFile={d / 'known_hosts'}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            "-F",
            "/dev/null",
        ]
        addresses = [w.address for w in state.workers]
        timed([orch, "exec", "--", "true"], env)  # warm the page cache and sshd
        fan, seq, one = [], [], []
        for _ in range(args.repeat):
            fan.append(timed([orch, "exec", "--", "true"], env))
            one.append(timed([orch, "exec", "--workers", "0", "--", "true"], env))
            start = time.perf_counter()
            for a in addresses:
                subprocess.run([*ssh, f"root@{a}", "true"], check=True)
            seq.append(time.perf_counter() - start)
        f, s, o = (statistics.median(x) for x in (fan, seq, one))
        print(f"workers: {args.workers}, repeats: {args.repeat} (medians)")
        print(f"  orch exec, {args.workers} workers      {f:6.3f} s")
        print(f"  sequential ssh loop           {s:6.3f} s")
        print(f"  orch exec, 1 worker           {o:6.3f} s")
        print(f"  ratio sequential / orch exec  {s / f:6.2f}x")
        print(f"  ratio orch {args.workers} / orch 1       {f / o:6.2f}x")
    finally:
        sandbox.down(args.dir)


if __name__ == "__main__":
    main()
