"""What renewing a lease on every worker costs the controller: one holder request per round
(`Transport.run_each`, now) against one request per worker (before), side by side in one run.

A launch renews the controller lease in every worker's run directory every 5 s for the whole run,
and a deploy renews its lock's lease the same way; at 256 workers that is 51 small commands a
second. Through the fleet's connection holder each round is now one request for the whole gang;
before, each worker's renewal was its own request (its own socket, thread and JSON exchange on the
controller and on the holder). Both ways run the same `hostside.launch_ctl.renew_argv` command
over the same held connections, rounds interleaved. Prints, per way, the median seconds until the
last worker of a round answered, and the CPU seconds per round of the controller (this process)
and of the holder.

    .venv/bin/python bench/renewals.py [--workers 16] [--rounds 9] [--sandbox-dir DIR] [--smoke]
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
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _slice import add_slice_args, open_slice, orch_executable  # noqa: E402

from hostside.launch_ctl import renew_argv  # noqa: E402
from orchestrator.launch.control import run_all  # noqa: E402

RUN_DIR = "/tmp/orch-bench-renewals"


def cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def per_worker(t, names: list[str], count: int) -> None:
    """Before: each worker's renewal its own request, on a thread of its own."""
    threads = [
        threading.Thread(target=t.run_one, args=(n, renew_argv(RUN_DIR, count)), kwargs={"timeout": 30}) for n in names
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


def one_request(t, names: list[str], count: int) -> None:
    """Now: the round as one `run_each`, waited for as the release waits for its own."""
    run_all(t, {n: renew_argv(RUN_DIR, count) for n in names}, timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_slice_args(ap, workers=16)
    ap.add_argument("--rounds", type=int, default=9, help="rounds of each way, interleaved")
    args = ap.parse_args()
    if args.smoke:
        args.rounds, args.workers = 2, 2
    holders = Path(tempfile.mkdtemp(prefix="orch-br-")) / "h"
    with open_slice("renewals", args.workers, sandbox_dir=args.sandbox_dir, base_address=args.base_address) as s:
        os.environ.update({**s.env, "ORCH_SSH_PERSIST": "", "ORCH_PERSIST_DIR": str(holders)})
        from orchestrator import connections as wire
        from orchestrator.fleet import load_fleet
        from orchestrator.transport import for_fleet

        fleet = load_fleet(s.fleet_path)
        try:
            with for_fleet(fleet, fleet.workers) as t:
                names = list(t.workers)
                assert all(r.ok for r in t.run(["mkdir", "-p", RUN_DIR]).values())
                for _ in range(100):  # every held connection's agent up, as in a long-running launch
                    (holder,) = wire.holders(holders)
                    if len(holder.get("agents") or {}) == len(names):
                        break
                    time.sleep(0.2)
                pid = int(holder["pid"])
                ways = {"one request per worker (before)": per_worker, "one request per round (now)": one_request}
                got: dict[str, list[tuple[float, float, float]]] = {w: [] for w in ways}
                count = 0
                for _ in range(args.rounds):
                    for way, fn in ways.items():
                        count += 1
                        c0, h0, start = own_cpu(), cpu_of(pid), time.perf_counter()
                        fn(t, names, count)
                        got[way].append((time.perf_counter() - start, own_cpu() - c0, cpu_of(pid) - h0))
                print(f"{len(names)} workers, {args.rounds} rounds each way, load average {os.getloadavg()[0]:.2f}")
                print(f"{'renewal round':<34} {'wall':>9} {'controller cpu':>15} {'holder cpu':>11}")
                medians = {}
                for way, rows in got.items():
                    wall, mine, held = (statistics.median(r[i] for r in rows) for i in range(3))
                    medians[way] = (wall, mine + held)
                    print(f"{way:<34} {wall * 1000:7.0f}ms {mine * 1000:13.0f}ms {held * 1000:9.0f}ms")
                (before, now) = medians.values()
                print(f"ratio before / now: wall {before[0] / now[0]:.1f}, cpu {before[1] / max(now[1], 1e-3):.1f}")
                t.run(["rm", "-rf", RUN_DIR])
        finally:
            subprocess.run([orch_executable(), "connections", "stop"], capture_output=True, check=False)
            shutil.rmtree(holders.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
