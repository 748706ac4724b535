"""Probe sweep benchmark: a shallow `orch probe` over 16 local workers.

Brings up its own local slice (or uses one given with --sandbox-dir), makes the
jax-cpu bundle active on every worker with `orch deploy`, then compares, on the
same workers:

  - the parallel sweep of all workers (`probe.sweep`, fresh connections),
  - the same sweep of one worker (the floor: one connection + one probe),
  - a sequential loop: the same sweep code with one worker at a time,

both in-process (the core) and through the CLI (`orch probe --shallow`, which
adds interpreter start and imports). Prints medians and the ratios, and one
deep sweep of all workers for scale. A slice it brought up is taken down at the end.

    .venv/bin/python bench/probe.py [--workers 16] [--repeat 5] [--no-deep] [--sandbox-dir DIR] [--smoke]

--smoke: 2 workers, 1 repeat, no deep sweep.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _slice import Slice, add_slice_args, open_slice  # noqa: E402

from orchestrator import probe  # noqa: E402
from orchestrator.fleet import load_fleet  # noqa: E402
from orchestrator.transport import for_fleet  # noqa: E402


def timed_sweep(fleet, workers, *, deep: bool = False, max_parallel: int | None = None) -> tuple[float, object]:
    start = time.perf_counter()
    plan = probe.plan(fleet, workers, deep=deep)
    with for_fleet(fleet, workers, max_parallel=max_parallel) as transport:
        report = probe.sweep(plan, transport)
    return time.perf_counter() - start, report


def timed_cli(sl: Slice, *args: str) -> float:
    start = time.perf_counter()
    sl.orch(*args, check=False)  # a worker the probe judges failing is a figure, not an error
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_slice_args(ap, workers=16)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-deep", action="store_true", help="Skip the one deep sweep.")
    args = ap.parse_args()
    if args.smoke:
        args.workers, args.repeat, args.no_deep = 2, 1, True

    with open_slice("probe", args.workers, sandbox_dir=args.sandbox_dir, base_address=args.base_address) as sl:
        sl.deploy()
        fleet = load_fleet(sl.fleet_path)
        workers = list(fleet.workers)
        _, warm = timed_sweep(fleet, workers)  # ships hostside, warms sshd and the page cache
        verdicts = {r.verdict for r in warm.rows}
        fan, one, seq, cli_fan, cli_one, cli_seq = [], [], [], [], [], []
        for _ in range(args.repeat):
            fan.append(timed_sweep(fleet, workers)[0])
            one.append(timed_sweep(fleet, workers[:1])[0])
            seq.append(sum(timed_sweep(fleet, [w])[0] for w in workers))
            cli_fan.append(timed_cli(sl, "probe", "--shallow"))
            cli_one.append(timed_cli(sl, "probe", "--shallow", "--workers", "0"))
            cli_seq.append(sum(timed_cli(sl, "probe", "--shallow", "--workers", str(w.index)) for w in workers))
        f, o, s, cf, co, cs = (statistics.median(x) for x in (fan, one, seq, cli_fan, cli_one, cli_seq))
        n = len(workers)
        print(f"shallow probe, {n} workers, {args.repeat} repeats (medians); verdicts: {', '.join(sorted(verdicts))}")
        rows = [
            (f"core  sweep {n} workers (parallel)", f"{f:6.3f} s"),
            ("core  sweep 1 worker", f"{o:6.3f} s"),
            (f"core  sequential loop, {n} x 1", f"{s:6.3f} s"),
            (f"cli   orch probe {n} workers", f"{cf:6.3f} s"),
            ("cli   orch probe 1 worker", f"{co:6.3f} s"),
            (f"cli   sequential loop, {n} x 1", f"{cs:6.3f} s"),
            (f"ratio core {n} / core 1", f"{f / o:6.2f}x"),
            (f"ratio core sequential / core {n}", f"{s / f:6.2f}x"),
            (f"ratio cli {n} / cli 1", f"{cf / co:6.2f}x"),
            (f"ratio cli sequential / cli {n}", f"{cs / cf:6.2f}x"),
        ]
        for label, value in rows:
            print(f"  {label:<38}{value}")
        if not args.no_deep:
            t, report = timed_sweep(fleet, workers, deep=True)
            kinds = sorted({r.answered or "-" for r in report.rows})
            print(
                f"  {f'deep  sweep {n} workers (once)':<38}{t:6.3f} s  (answered: {', '.join(kinds)}; "
                f"{report.summary()['fail']} fail)"
            )


if __name__ == "__main__":
    main()
