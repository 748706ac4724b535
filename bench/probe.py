"""Probe sweep benchmark: a shallow `orch probe` over 16 local workers.

Brings up its own 16-worker local slice (a directory under /var/tmp and a
loopback range no other sandbox uses), makes the jax-cpu bundle active on
every worker, then compares, on the same workers:

  - the parallel sweep of all 16 workers (`probe.sweep`, fresh connections),
  - the same sweep of one worker (the floor: one connection + one probe),
  - a sequential loop: the same sweep code with one worker at a time,

both in-process (the core) and through the CLI (`orch probe --shallow`, which
adds interpreter start and imports). Prints medians and the ratios, and one
deep sweep of all 16 for scale. The slice is taken down at the end.

    .venv/bin/python bench/probe.py [--workers 16] [--repeat 5] [--no-deep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orchestrator import probe, sandbox  # noqa: E402
from orchestrator.fleet import load_fleet  # noqa: E402
from orchestrator.transport import for_fleet  # noqa: E402

ENV = "/var/lib/orch/envs/bench-jax-cpu"


def free_base(workers: int) -> str:
    for second in range(150 + os.getpid() % 50, 250):
        base = f"127.{second}.9.1"
        if sandbox.addresses_free(sandbox.worker_addresses(base, workers)):
            return base
    raise SystemExit("no free loopback range for the benchmark slice")


def activate_bundle(orch: str, env: dict, cache: Path) -> None:
    """jax-cpu active on the `cpu` lane of every worker (uv with a cache all workers share)."""
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    script = (
        'set -e; export UV_CACHE_DIR="$3" UV_LINK_MODE=hardlink; test -x "$2/bin/python" || '
        '{ "$1" venv -q --python /usr/bin/python3 "$2" && "$1" pip install -q --python "$2/bin/python" '
        "--no-index --find-links /opt/pypi/files jax==0.10.2 jaxlib==0.10.2; }; mkdir -p /var/lib/orch/lanes/cpu; "
        'ln -sfn "$2" /var/lib/orch/lanes/cpu/active.new && mv -T /var/lib/orch/lanes/cpu/active.new '
        "/var/lib/orch/lanes/cpu/active"
    )
    # One worker first fills the shared cache; the rest then only link files.
    for selection in ("0", None):
        argv = [
            orch,
            "exec",
            "--timeout",
            "600",
            *(["--workers", selection] if selection else []),
            "--",
            "sh",
            "-c",
            script,
            "sh",
            uv,
            ENV,
            str(cache),
        ]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"cannot make jax-cpu active on the workers:\n{proc.stdout}{proc.stderr}")


def timed_sweep(fleet, workers, *, deep: bool = False, max_parallel: int | None = None) -> tuple[float, object]:
    start = time.perf_counter()
    plan = probe.plan(fleet, workers, deep=deep)
    with for_fleet(fleet, workers, max_parallel=max_parallel) as transport:
        report = probe.sweep(plan, transport)
    return time.perf_counter() - start, report


def timed_cli(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default=f"/var/tmp/orch-bench-probe-{os.getpid()}")
    ap.add_argument("--base-address")
    ap.add_argument("--no-deep", action="store_true", help="Skip the one deep sweep.")
    args = ap.parse_args()

    orch = str(Path(sys.executable).parent / "orch")
    base = args.base_address or free_base(args.workers)
    state = sandbox.up(args.dir, args.workers, base_address=base)
    try:
        d = Path(args.dir)
        env = dict(os.environ, ORCH_FLEET=str(d / "fleet.yaml"))
        activate_bundle(orch, env, d / "uv-cache")
        fleet = load_fleet(state.fleet_path)
        workers = list(fleet.workers)
        _, warm = timed_sweep(fleet, workers)  # ships hostside, warms sshd and the page cache
        verdicts = {r.verdict for r in warm.rows}
        fan, one, seq, cli_fan, cli_one, cli_seq = [], [], [], [], [], []
        for _ in range(args.repeat):
            fan.append(timed_sweep(fleet, workers)[0])
            one.append(timed_sweep(fleet, workers[:1])[0])
            seq.append(sum(timed_sweep(fleet, [w])[0] for w in workers))
            cli_fan.append(timed_cli([orch, "probe", "--shallow"], env))
            cli_one.append(timed_cli([orch, "probe", "--shallow", "--workers", "0"], env))
            cli_seq.append(
                sum(timed_cli([orch, "probe", "--shallow", "--workers", str(w.index)], env) for w in workers)
            )
        f, o, s, cf, co, cs = (statistics.median(x) for x in (fan, one, seq, cli_fan, cli_one, cli_seq))
        n = args.workers
        print(f"shallow probe, {n} workers, {args.repeat} repeats (medians); verdicts: {', '.join(sorted(verdicts))}")
        print(f"  core  sweep {n:2d} workers (parallel)   {f:6.3f} s")
        print(f"  core  sweep  1 worker                {o:6.3f} s")
        print(f"  core  sequential loop, {n} x 1        {s:6.3f} s")
        print(f"  cli   orch probe {n:2d} workers          {cf:6.3f} s")
        print(f"  cli   orch probe  1 worker           {co:6.3f} s")
        print(f"  cli   sequential loop, {n} x 1        {cs:6.3f} s")
        print(f"  ratio core {n} / core 1                {f / o:6.2f}x")
        print(f"  ratio core sequential / core {n}       {s / f:6.2f}x")
        print(f"  ratio cli {n} / cli 1                  {cf / co:6.2f}x")
        print(f"  ratio cli sequential / cli {n}         {cs / cf:6.2f}x")
        if not args.no_deep:
            t, report = timed_sweep(fleet, workers, deep=True)
            kinds = sorted({r.answered or "-" for r in report.rows})
            print(
                f"  deep  sweep {n:2d} workers (once)       {t:6.3f} s  (answered: {', '.join(kinds)}; "
                f"{report.summary()['fail']} fail)"
            )
    finally:
        sandbox.down(args.dir)
        shutil.rmtree(Path(args.dir) / "uv-cache", ignore_errors=True)
        try:
            Path(args.dir).rmdir()
        except OSError:
            pass


if __name__ == "__main__":
    main()
