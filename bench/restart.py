"""Restart benchmark: cold vs warm compile time per process, under each cache policy.

Brings up its own local slice (or uses one given with --sandbox-dir), makes
the jax-cpu bundle active on every worker with `orch deploy`, then runs
`orch restart-check --json` (cold launch on a fresh cache root, then the same
launch warm) of examples/jax_compile_heavy.py for:

  solo           one worker, per-host cache
  single-writer  every worker, the cache on the shared mount, process 0 writes
  per-host       every worker, each its own cache

and prints, per process, the compile time JAX recorded in the cold and the
warm run (backend compile events, cache retrieval included), their ratio,
the cache hits and the verdict, plus each run's wall time. A slice it
brought up is taken down at the end.

    .venv/bin/python bench/restart.py [--workers 4] [--layers 96] [--repeat 3] [--cases solo,...]
                                 [--sandbox-dir DIR] [--smoke]

--smoke: 2 workers, 8 layers, 1 check each of solo and single-writer.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _slice import BUNDLE, LANE, ROOT, Slice, add_slice_args, open_slice  # noqa: E402

CASES = [("solo", 0, "per-host"), ("single-writer", "all", "shared"), ("per-host", "all", "per-host")]


def variant(sl: Slice, name: str, workers: int | str, cache: str) -> Path:
    """A fleet file beside the slice's (same workers, keys and bundle locks) whose lane `cpu` takes
    `workers` under cache policy `cache`: the bundle deployed to the slice's lane stays the active one."""
    doc = yaml.safe_load(sl.fleet_path.read_text())
    doc["lanes"] = {LANE: {"workers": workers, "bundle": BUNDLE, "runtime": "cpu", "cache": cache, "platform": "cpu"}}
    path = sl.fleet_path.with_name(f"fleet-bench-restart-{name}.yaml")
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_slice_args(ap, workers=4)
    ap.add_argument("--layers", type=int, default=96)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--cases",
        default=",".join(name for name, _, _ in CASES),
        help="Comma-separated cases to run, of: %(default)s.",
    )
    args = ap.parse_args()
    if args.smoke:
        args.workers, args.layers, args.repeat, args.cases = 2, 8, 1, "solo,single-writer"
    names = args.cases.split(",")
    unknown = set(names) - {name for name, _, _ in CASES}
    if unknown:
        ap.error(f"unknown case(s) {', '.join(sorted(unknown))}; known: {', '.join(n for n, _, _ in CASES)}")

    argv = ["jax_compile_heavy.py", "--layers", str(args.layers), "--steps", "2"]
    with open_slice("restart", args.workers, sandbox_dir=args.sandbox_dir, base_address=args.base_address) as sl:
        t0 = time.perf_counter()
        deployed = sl.deploy()
        print(
            f"slice: {sl.workers} workers in {sl.dir}; jax-cpu {deployed['bundle_id']} active after "
            f"{time.perf_counter() - t0:.1f}s (orch deploy); program: {' '.join(argv)}"
        )
        fleets = {name: variant(sl, name, workers, cache) for name, workers, cache in CASES if name in names}
        try:
            for name, fleet in fleets.items():
                report(sl, name, fleet, argv, args.repeat)
        finally:
            for path in fleets.values():
                path.unlink(missing_ok=True)


def report(sl: Slice, name: str, fleet: Path, argv: list[str], repeat: int) -> None:
    """Run `repeat` restart checks on lane `cpu` of `fleet` and print the per-process table."""
    rows: dict[int, list[dict]] = {}
    walls = []
    for i in range(repeat):
        check = sl.orch_json(
            "restart-check", "--lane", LANE, "--workdir", str(ROOT / "examples"), "--json", "--", *argv,
            check=False, timeout=1800, fleet=fleet,
        )  # fmt: skip
        if check["problem"]:
            raise SystemExit(f"{name} #{i}: {check['problem']}")
        walls.append(tuple(r["elapsed"] for r in check["runs"]))
        for v in check["verdicts"]:
            rows.setdefault(v["process_id"], []).append(v)
        print(f"  {name} #{i}: {'passed' if check['ok'] else 'FAILED'}: {check['message']}")
    med = statistics.median
    print(
        f"\n{name} ({len(rows)} process{'es' if len(rows) != 1 else ''}, median of {repeat}): "
        f"run wall time cold {med(w[0] for w in walls):.1f}s, warm {med(w[1] for w in walls):.1f}s"
    )
    print("  proc  cold compile  warm compile  warm/cold per check: median (range)  hits  verdict (expected to reuse)")
    for pid, vs in sorted(rows.items()):
        cold = med(v["cold_compile_sec"] for v in vs)
        warm = med(v["warm_compile_sec"] for v in vs)
        ratios = [v["ratio"] for v in vs]
        verdicts = sorted({v["verdict"] for v in vs})
        print(
            f"  {pid:<4}  {cold:9.2f} s  {warm:9.2f} s  {med(ratios):5.2f} ({min(ratios):.2f}-"
            f"{max(ratios):.2f}){'':18}{vs[0]['hits']:>4}  {'/'.join(verdicts)} "
            f"({'yes' if vs[0]['expected'] else 'no'})"
        )
    print()


if __name__ == "__main__":
    main()
