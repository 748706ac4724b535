"""Fan-out benchmark: `true` on 1, 16, 64 and 256 local workers, orch against the usual tools.

In one run on one local slice (as many workers as the largest size), for each size N
(the first N workers), medians of `--repeat` runs, each one a fresh process:

  - `orch exec --workers 0-(N-1) -- true`, cold: ORCH_SSH_PERSIST=0, every connection new;
  - `orch exec`, warm: a first call, then the timed calls with persistent connections allowed
    (on a build without them this is the cold path again, and the table says so), once with each
    held connection's commands in sessions of their own (ORCH_SSH_AGENT=0) and once on the workers'
    agents (the default; timed once the holder reports an agent on each of the N workers);
  - Fabric's ThreadingGroup (a Python process connecting to the N workers with strict host keys);
  - parallel-ssh's ParallelSSHClient (libssh2; it checks no host key at all), when installed
    (`pip install parallel-ssh`, or the `bench` extra);
  - N OpenSSH `ssh host true` at once, and one after the other (the sequential loop only up to
    `--sequential-max` workers: at 256 it alone would take minutes).

Every contender is timed from its process start to its exit, and its CPU time (the children's
`getrusage`, every ssh client or Python process it ran) is divided by N: the controller's CPU
seconds per worker. Prints one table and the ratios.

    .venv/bin/python bench/fanout.py [--sizes 1,16,64,256] [--repeat 5] [--sequential-max 64]
                                     [--sandbox-dir DIR] [--smoke]

--smoke: sizes 1 and 2, 1 repeat. With --sandbox-dir, sizes above the sandbox's size are skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _slice import Slice, add_slice_args, open_slice, orch_executable  # noqa: E402

# Fabric's ThreadingGroup as its documentation shows it, with the checks orch makes: the
# sandbox's key, its known_hosts and no unknown key accepted. argv: key known_hosts host...
FABRIC = """
import sys
from fabric import Connection, ThreadingGroup
from paramiko import RejectPolicy
key, known, hosts = sys.argv[1], sys.argv[2], sys.argv[3:]
conns = []
for h in hosts:
    c = Connection(h, user="root", connect_kwargs={"key_filename": key, "look_for_keys": False, "allow_agent": False})
    c.client.load_host_keys(known)
    c.client.set_missing_host_key_policy(RejectPolicy())
    conns.append(c)
results = ThreadingGroup.from_connections(conns).run("true", hide=True)
sys.exit(0 if all(r.ok for r in results.values()) and len(results) == len(hosts) else 1)
"""

# parallel-ssh's native client (libssh2). argv: key host...
PSSH = """
import sys
from pssh.clients import ParallelSSHClient
key, hosts = sys.argv[1], sys.argv[2:]
client = ParallelSSHClient(
    hosts, user="root", pkey=key, allow_agent=False, num_retries=1, pool_size=max(100, len(hosts))
)
output = client.run_command("true")
client.join(output)
sys.exit(0 if all(o.exit_code == 0 for o in output) and len(output) == len(hosts) else 1)
"""


@dataclass
class Row:
    """One contender's figures by size: median seconds, median CPU seconds per worker."""

    label: str
    wall: dict[int, float] = field(default_factory=dict)
    cpu: dict[int, float] = field(default_factory=dict)
    note: str = ""


def timed(run: Callable[[], None]) -> tuple[float, float]:
    """(wall seconds, children's CPU seconds) of `run`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def check(argv: list[str], env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        out = proc.stdout[-2000:] + proc.stderr[-2000:]
        raise SystemExit(f"`{' '.join(argv[:6])} ...` exited {proc.returncode}\n{out}")


def has_module(name: str) -> bool:
    proc = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True)
    return proc.returncode == 0


def has_verb(sl: Slice, verb: str) -> bool:
    return sl.orch(verb, "--help", check=False).returncode == 0


class Contenders:
    """The ways of running `true` on the first n workers of a slice, each one subprocess (or n)."""

    def __init__(self, sl: Slice) -> None:
        self.sl = sl
        self.key = str(sl.dir / "id_ed25519")
        self.known = str(sl.dir / "known_hosts")
        # Bytecode as an installed package has it: the first call writes it, the timed ones read it.
        self.env = {k: v for k, v in sl.env.items() if k != "PYTHONDONTWRITEBYTECODE"}
        self.cold_env = {**self.env, "ORCH_SSH_PERSIST": "0"}
        self.session_env = {**self.env, "ORCH_SSH_AGENT": "0"}

    def agents_up(self, n: int, within: float = 120.0) -> None:
        """Wait until the holder reports an agent on n workers (a build without agents: at once)."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            proc = self.sl.orch("connections", "--json", check=False)
            holders = json.loads(proc.stdout or "{}").get("holders") or [{}]
            if "agents" not in holders[0] or len(holders[0]["agents"]) >= n:
                return
            time.sleep(0.2)
        raise SystemExit(f"the holder did not report {n} agents within {within:g}s")

    def orch(self, n: int, env: dict[str, str]) -> None:
        argv = [orch_executable(), "--fleet", str(self.sl.fleet_path), "exec", "--workers", f"0-{n - 1}", "--", "true"]
        check(argv, env)

    def fabric(self, n: int) -> None:
        check([sys.executable, "-c", FABRIC, self.key, self.known, *self.sl.addresses[:n]], self.env)

    def pssh(self, n: int) -> None:
        check([sys.executable, "-c", PSSH, self.key, *self.sl.addresses[:n]], self.env)

    def ssh_parallel(self, n: int) -> None:
        procs = [
            subprocess.Popen([*self.sl.ssh_argv(a), "true"], stdin=subprocess.DEVNULL) for a in self.sl.addresses[:n]
        ]
        if any(p.wait() != 0 for p in procs):
            raise SystemExit("a parallel ssh exited non-zero")

    def ssh_sequential(self, n: int) -> None:
        for a in self.sl.addresses[:n]:
            subprocess.run([*self.sl.ssh_argv(a), "true"], check=True, stdin=subprocess.DEVNULL)


def measure(row: Row, n: int, repeat: int, run: Callable[[int], None]) -> None:
    samples = [timed(lambda: run(n)) for _ in range(repeat)]
    row.wall[n] = statistics.median(s[0] for s in samples)
    row.cpu[n] = statistics.median(s[1] for s in samples) / n


def table(rows: list[Row], sizes: list[int]) -> list[str]:
    head = f"  {'':<38}" + "".join(f"{f'{n} worker' + ('s' if n > 1 else ''):>22}" for n in sizes)
    lines = [head, f"  {'':<38}" + "".join(f"{'time  (CPU/worker)':>22}" for _ in sizes)]
    for row in rows:
        cells = [f"{row.wall[n]:7.3f} s ({row.cpu[n] * 1000:6.1f} ms)" if n in row.wall else "-" for n in sizes]
        lines.append(f"  {row.label:<38}" + "".join(f"{c:>22}" for c in cells) + (f"  {row.note}" if row.note else ""))
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_slice_args(ap, workers=256)
    ap.add_argument("--sizes", default="1,16,64,256", help="Comma-separated worker counts (default 1,16,64,256).")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--sequential-max", type=int, default=64, help="Largest size the sequential ssh loop runs at (default 64)."
    )
    args = ap.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    if args.smoke:
        sizes, args.repeat = [1, 2], 1
    if not sizes or sizes[0] < 1:
        raise SystemExit("--sizes: positive worker counts, comma-separated")
    if not shutil.which("ssh"):
        raise SystemExit("no OpenSSH client (`ssh`) on PATH: the baselines need it")

    with open_slice("fanout", sizes[-1], sandbox_dir=args.sandbox_dir, base_address=args.base_address) as sl:
        skipped = [n for n in sizes if n > sl.workers]
        sizes = [n for n in sizes if n <= sl.workers]
        c = Contenders(sl)
        persist = has_verb(sl, "connections")
        have_pssh = has_module("pssh.clients")
        rows = {
            "cold": Row("orch exec, cold (ORCH_SSH_PERSIST=0)"),
            "sessions": Row(
                "orch exec, warm, sessions",
                note="" if persist else "(no persistent connections in this build: the cold path)",
            ),
            "warm": Row(
                "orch exec, warm (agents)",
                note="" if persist else "(no persistent connections in this build: the cold path)",
            ),
            "fabric": Row("Fabric ThreadingGroup"),
            "pssh": Row(
                "parallel-ssh (no host-key check)",
                note="" if have_pssh else "(not installed: pip install parallel-ssh)",
            ),
            "par": Row("OpenSSH, N at once"),
            "seq": Row("sequential ssh loop"),
        }
        c.orch(sizes[-1], c.cold_env)  # writes bytecode, warms the page cache and every sshd
        for n in sizes:
            measure(rows["cold"], n, args.repeat, lambda k: c.orch(k, c.cold_env))
            if persist:
                c.orch(n, c.session_env)  # the first call: opens what may persist
                measure(rows["sessions"], n, args.repeat, lambda k: c.orch(k, c.session_env))
                sl.orch("connections", "stop", check=False)
            c.orch(n, c.env)
            c.agents_up(n)
            measure(rows["warm"], n, args.repeat, lambda k: c.orch(k, c.env))
            if persist:
                sl.orch("connections", "stop", check=False)
            measure(rows["fabric"], n, args.repeat, c.fabric)
            if have_pssh:
                measure(rows["pssh"], n, args.repeat, c.pssh)
            measure(rows["par"], n, args.repeat, c.ssh_parallel)
            if n <= args.sequential_max:
                measure(rows["seq"], n, args.repeat, c.ssh_sequential)
        print(f"`true` on N workers of one local slice ({sl.workers} workers), medians of {args.repeat}:")
        if skipped:
            print(f"  (sizes {skipped} skipped: the slice has {sl.workers} workers)")
        for line in table(list(rows.values()), sizes):
            print(line)
        cold, fab, seq, pssh = rows["cold"].wall, rows["fabric"].wall, rows["seq"].wall, rows["pssh"].wall
        print("ratios:")
        for n in sizes:
            parts = [f"orch cold / Fabric {cold[n] / fab[n]:.2f}x"]
            if n in pssh:
                parts.append(f"orch cold / parallel-ssh {cold[n] / pssh[n]:.2f}x")
            if n in seq:
                parts.append(f"ratio sequential / orch exec {seq[n] / cold[n]:.2f}x")
            parts.append(f"orch warm / cold {rows['warm'].wall[n] / cold[n]:.2f}x")
            if n in rows["sessions"].wall:
                parts.append(f"agents / sessions {rows['warm'].wall[n] / rows['sessions'].wall[n]:.2f}x")
            print(f"  {n:>4} workers: " + ", ".join(parts))
        if not have_pssh:
            print("parallel-ssh is not installed: its row is empty (pip install parallel-ssh)")
        load = os.getloadavg()[0]
        print(f"(python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load:.1f} at the end)")


if __name__ == "__main__":
    main()
