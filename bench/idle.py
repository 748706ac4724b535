"""What a gang waiting for its release costs the workers: launchers and watches, each way, side by side.

A launcher that is ready waits for the controller's release (hostside/launcher.py wait_for_release),
and the controller's watch of each worker (hostside/launch_watch.py) looks at the run's files until
something moves. On a real slice each worker has one of each; on the local slice (and on any machine
running many workers' processes) they share the cores. This runs N of each on this machine, in real
processes with their own run directories, while the lease is renewed as the controller does, and
prints the CPU they used per second of waiting, in one run:

  - launchers sleeping on the release bell (now) against looking every 5 ms (RELEASE_POLL, before);
  - watches backing off to 0.25 s while nothing moves (now) against looking every 50 ms (before).

    .venv/bin/python bench/idle.py [--processes 64] [--seconds 10] [--smoke]

--smoke: 2 processes, 2 seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# argv: run_dir mode ("bell" or "poll"). Waits for its release as a ready launcher does.
LAUNCHER = """
import sys
from hostside import files, launcher
run_dir, mode = sys.argv[1], sys.argv[2]
if mode == "poll":
    files.open_bell = lambda path: None  # the launcher then looks every RELEASE_POLL seconds
doc = {"run_id": "r", "lane": "l", "worker": "w", "index": 0, "process_id": 0, "num_processes": 1,
       "target": {}, "run_dir": run_dir, "ready_timeout": 600}
launcher.wait_for_release(doc, launcher.Record(run_dir + "/record.json", doc))
"""

# argv: run_dir mode ("backoff" or "fixed"). Watches a run that does nothing, as the controller's watch does.
WATCH = """
import sys
from hostside import launch_watch
run_dir, mode = sys.argv[1], sys.argv[2]
if mode == "fixed":
    launch_watch.IDLE_POLL = launch_watch.POLL
sys.stderr = open("/dev/null", "w")  # its heartbeats
launch_watch.watch(run_dir, "events", "exit")
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(code: str, mode: str, n: int, seconds: float, base: Path, prepare) -> float:
    """CPU seconds per second of waiting, all n processes together."""
    dirs = []
    for i in range(n):
        d = base / f"{mode}-{i}"
        d.mkdir()
        prepare(d)
        dirs.append(d)
    procs = [
        subprocess.Popen(
            [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r})\n" + code, str(d), mode],
        )
        for d in dirs
    ]
    stop = threading.Event()

    def renew() -> None:  # the controller's lease renewals, every second
        count = 0
        while not stop.is_set():
            count += 1
            for d in dirs:
                tmp = d / ".controller.lease.tmp"
                tmp.write_text(json.dumps({"renewed": count}))
                os.replace(tmp, d / "controller.lease")
            stop.wait(1.0)

    threading.Thread(target=renew, daemon=True).start()
    time.sleep(1.5)  # interpreters started, waiting
    before = sum(cpu_seconds(p.pid) for p in procs)
    time.sleep(seconds)
    used = sum(cpu_seconds(p.pid) for p in procs) - before
    stop.set()
    for p in procs:
        p.kill()
        p.wait()
    return used / seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--processes", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    n, seconds = (2, 2.0) if args.smoke else (args.processes, args.seconds)

    def no_run(d: Path) -> None:
        pass

    def quiet_run(d: Path) -> None:  # a started run whose supervisor (this process) lives and says nothing
        (d / "pid").write_text(json.dumps({"pid": os.getpid(), "supervisor_pid": os.getpid()}))
        (d / "output.log").write_text("")

    with tempfile.TemporaryDirectory(prefix="orch-idle-") as tmp:
        base = Path(tmp)
        rows = [
            ("launchers, release bell", measure(LAUNCHER, "bell", n, seconds, base, no_run)),
            ("launchers, a look every 5 ms", measure(LAUNCHER, "poll", n, seconds, base, no_run)),
            ("watches, backing off to 0.25 s", measure(WATCH, "backoff", n, seconds, base, quiet_run)),
            ("watches, a look every 50 ms", measure(WATCH, "fixed", n, seconds, base, quiet_run)),
        ]
    print(f"{n} processes of each kind waiting {seconds:g} s on this machine, CPU seconds per second (all of them):")
    for label, value in rows:
        print(f"  {label:<34} {value:7.3f}  ({value / n * 1000:6.2f} ms per process per second)")
    bell, poll, back, fixed = (r[1] for r in rows)
    print(f"ratio poll / bell {poll / max(bell, 1e-6):.1f}x, ratio fixed / backoff {fixed / max(back, 1e-6):.1f}x")
    print(f"(python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
