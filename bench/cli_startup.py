"""CLI start-up benchmark: how long `orch --help` takes as a whole process.

Runs, alternately and N times each, `python -c pass` (the interpreter's own
floor), `orch --help`, `orch launch --help` and `orch exec --help`, each a
fresh process, and prints the medians and their ratio to the floor. `orch
--help` imports no core module (the verb map lists the verbs), so it should
stay a small constant above the floor; the target is 150 ms on the project's
2-core machine. The load average is printed next to the figures: on a shared
machine, compare ratios rather than absolute times.

    .venv/bin/python bench/cli_startup.py [--repeat 21] [--smoke]
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
BIN = Path(sys.executable).parent

CASES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "orch --help": [str(BIN / "orch"), "--help"],
    "orch launch --help": [str(BIN / "orch"), "launch", "--help"],
    "orch exec --help": [str(BIN / "orch"), "exec", "--help"],
}


def once(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, cwd=ROOT)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21, help="runs of each case (interleaved)")
    parser.add_argument("--before", metavar="ORCH", help="another orch executable to time beside (e.g. main's)")
    parser.add_argument("--smoke", action="store_true", help="3 runs of each case: proves the benchmark runs")
    args = parser.parse_args()
    if args.smoke:
        args.repeat = 3
    if args.before:
        CASES["before: orch --help"] = [args.before, "--help"]
    for argv in CASES.values():
        once(argv)  # warm the page cache and .pyc files
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.repeat):
        for name, argv in CASES.items():  # interleaved: load changes hit every case alike
            times[name].append(once(argv))
    floor = statistics.median(times["python -c pass"])
    print(f"{args.repeat} runs each, load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'case':<22} {'median':>9} {'min':>9} {'x floor':>8}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:<22} {med * 1000:7.1f}ms {min(values) * 1000:7.1f}ms {med / floor:8.2f}")


if __name__ == "__main__":
    main()
