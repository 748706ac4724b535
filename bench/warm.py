"""Warm connections benchmark: `orch exec -- true` with the fleet's connection holder up, against
the same command connecting itself (`ORCH_SSH_PERSIST=0`), on 1 worker and on every worker.

Each case runs N times, cold and warm interleaved (load changes hit both alike); the first warm
command, which starts the holder, is not counted. Prints the median and minimum wall time, the
median CPU time of the `orch` process (user + sys: what the controller spends, load aside), and
the ratio cold / warm. Targets on the project's 2-core machine: warm 16 workers <= 0.15 s,
256 workers <= 1.0 s. The holder is stopped at the end.

    .venv/bin/python bench/warm.py [--workers 16] [--repeat 11] [--sandbox-dir DIR] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _slice import add_slice_args, open_slice, orch_executable  # noqa: E402


def once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one `orch` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_slice_args(ap, workers=16)
    ap.add_argument("--repeat", type=int, default=11, help="runs of each case, cold and warm interleaved")
    args = ap.parse_args()
    if args.smoke:
        args.repeat, args.workers = 3, 2
    holders = Path(tempfile.mkdtemp(prefix="orch-bw-")) / "h"
    with open_slice("warm", args.workers, sandbox_dir=args.sandbox_dir, base_address=args.base_address) as s:
        cold_env = {**s.env, "ORCH_SSH_PERSIST": "0"}
        warm_env = {**s.env, "ORCH_SSH_PERSIST": "", "ORCH_PERSIST_DIR": str(holders)}
        base = [orch_executable(), "--fleet", str(s.fleet_path), "exec"]
        cases = {"1 worker": [*base, "--workers", "0", "--", "true"], f"{s.workers} workers": [*base, "--", "true"]}
        try:
            once(cases[f"{s.workers} workers"], warm_env)  # starts the holder and connects every worker
            print(f"{args.repeat} runs each, load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
            print(f"{'orch exec -- true':<28} {'median':>9} {'min':>9} {'cpu':>9}")
            for name, argv in cases.items():
                got: dict[str, list[tuple[float, float]]] = {"cold": [], "warm": []}
                for _ in range(args.repeat):
                    got["cold"].append(once(argv, cold_env))
                    got["warm"].append(once(argv, warm_env))
                medians = {}
                for mode, runs in got.items():
                    walls = [w for w, _ in runs]
                    medians[mode] = statistics.median(walls)
                    cpu = statistics.median(c for _, c in runs)
                    print(
                        f"{mode + ', ' + name:<28} {medians[mode] * 1000:7.0f}ms {min(walls) * 1000:7.0f}ms "
                        f"{cpu * 1000:7.0f}ms"
                    )
                print(f"ratio cold / warm, {name}: {medians['cold'] / medians['warm']:.1f}")
        finally:
            subprocess.run([orch_executable(), "connections", "stop"], env=warm_env, capture_output=True, check=False)
            shutil.rmtree(holders.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
