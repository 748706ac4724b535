"""Restart benchmark: cold vs warm compile time per process, under each cache policy.

Brings up its own local slice (own directory and loopback addresses),
installs the jax-cpu bundle on every worker (one shared uv cache on the
slice's shared mount), then runs `orch restart-check` (cold launch on a fresh
cache root, then the same launch warm) of examples/jax_compile_heavy.py for:

  solo           one worker, per-host cache
  single-writer  every worker, the cache on the shared mount, process 0 writes
  per-host       every worker, each its own cache

and prints, per process, the compile time JAX recorded in the cold and the
warm run (backend compile events, cache retrieval included), their ratio,
the cache hits and the verdict, plus each run's wall time. The slice is
taken down at the end.

    .venv/bin/python bench/restart.py [--workers 4] [--layers 96] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orchestrator import restart_check, runs, sandbox  # noqa: E402
from orchestrator.fleet import load_fleet  # noqa: E402
from orchestrator.transport import for_fleet  # noqa: E402

ENV = "/var/lib/orch/envs/bench-jax-cpu"
INSTALL = (
    'set -e; test -x "$2/bin/python" || { "$1" venv -q --python /usr/bin/python3 "$2" && '
    'UV_CACHE_DIR=/mnt/orch-shared/uv-cache "$1" pip install -q --python "$2/bin/python" --no-index '
    "--find-links /opt/pypi/files jax==0.10.2 jaxlib==0.10.2; }; mkdir -p /var/lib/orch/lanes/cpu; "
    'ln -sfn "$2" /var/lib/orch/lanes/cpu/active.new && mv -T /var/lib/orch/lanes/cpu/active.new '
    "/var/lib/orch/lanes/cpu/active"
)


def free_base(workers: int) -> str:
    for second in range(150, 200):
        base = f"127.{second}.{1 + os.getpid() % 200}.1"
        if sandbox.addresses_free(sandbox.worker_addresses(base, workers)):
            return base
    raise SystemExit("no free loopback addresses for the benchmark slice")


def variant(fleet_path: str, name: str, workers, cache: str) -> Path:
    doc = yaml.safe_load(Path(fleet_path).read_text())
    doc["lanes"] = {
        "cpu": {"workers": workers, "bundle": "jax-cpu", "runtime": "cpu", "cache": cache, "platform": "cpu"}
    }
    path = Path(fleet_path).with_name(f"fleet-{name}.yaml")
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--layers", type=int, default=96)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=f"/var/tmp/orch-bench-restart-{os.getpid()}")
    ap.add_argument("--base-address")
    args = ap.parse_args()

    base = args.base_address or free_base(args.workers)
    state = sandbox.up(args.dir, args.workers, base_address=base)
    tmp = Path(tempfile.mkdtemp(prefix="orch-bench-restart-"))
    os.environ[runs.RUNS_ENV] = str(tmp / "runs")
    argv = ["jax_compile_heavy.py", "--layers", str(args.layers), "--steps", "2"]
    cases = [("solo", 0, "per-host"), ("single-writer", "all", "shared"), ("per-host", "all", "per-host")]
    try:
        t0 = time.perf_counter()
        fleet = load_fleet(state.fleet_path)
        with for_fleet(fleet, fleet.lane_workers("cpu")) as transport:
            res = transport.run(["sh", "-c", INSTALL, "sh", str(Path(sys.executable).parent / "uv"), ENV], timeout=900)
        bad = {w: r.describe() for w, r in res.items() if not r.ok}
        if bad:
            raise SystemExit(f"installing jax on the workers failed: {bad}")
        print(
            f"slice: {args.workers} workers at {base}; jax-cpu installed in {time.perf_counter() - t0:.1f}s; "
            f"program: {' '.join(argv)}"
        )
        for name, workers, cache in cases:
            fleet = load_fleet(variant(state.fleet_path, name, workers, cache))
            rows: dict[int, list] = {}
            walls = []
            with for_fleet(fleet, fleet.lane_workers("cpu")) as transport:
                for i in range(args.repeat):
                    check = restart_check.run(fleet, "cpu", argv, transport, workdir=str(ROOT / "examples"))
                    if check.problem:
                        raise SystemExit(f"{name} #{i}: {check.problem}")
                    walls.append(tuple(r.elapsed for r in check.runs))
                    for v in check.verdicts:
                        rows.setdefault(v.process_id, []).append(v)
                    print(f"  {name} #{i}: {'passed' if check.ok else 'FAILED'}: {check.message}")
            med = statistics.median
            print(
                f"\n{name} ({len(rows)} process{'es' if len(rows) != 1 else ''}, median of {args.repeat}): "
                f"run wall time cold {med(w[0] for w in walls):.1f}s, warm {med(w[1] for w in walls):.1f}s"
            )
            print(
                "  proc  cold compile  warm compile  warm/cold per check: median (range)  hits  verdict "
                "(expected to reuse)"
            )
            for pid, vs in sorted(rows.items()):
                cold = med(v.cold_compile_sec for v in vs)
                warm = med(v.warm_compile_sec for v in vs)
                ratios = [v.ratio for v in vs]
                verdicts = sorted({v.verdict for v in vs})
                print(
                    f"  {pid:<4}  {cold:9.2f} s  {warm:9.2f} s  {med(ratios):5.2f} ({min(ratios):.2f}-"
                    f"{max(ratios):.2f}){'':18}{vs[0].hits:>4}  {'/'.join(verdicts)} "
                    f"({'yes' if vs[0].expected else 'no'})"
                )
            print()
    finally:
        sandbox.down(args.dir)
        for name, _workers, _cache in cases:
            Path(args.dir, f"fleet-{name}.yaml").unlink(missing_ok=True)
        try:
            os.rmdir(args.dir)
        except OSError:
            pass
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
