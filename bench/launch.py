"""Launch benchmark: start skew across 8 workers, and teardown latency after one worker dies.

Brings up its own 8-worker local slice (own directory and loopback
addresses), installs the jax-cpu bundle on every worker (one shared uv cache
on the slice's shared mount), then, with real JAX processes:

  start    launch a short data-parallel job; report how far apart the 8
           launchers left the start barrier (release skew), how far apart
           user code began after jax.distributed.initialize (user-code skew),
           and the time from "all ready" to release.
  teardown launch a job in which one worker SIGKILLs itself after a few
           steps; report the time from its death (its exit as recorded on
           the worker) to orch noticing it, and to every process of the run
           on every worker being gone (checked by listing processes).

The slice is taken down at the end.

    .venv/bin/python bench/launch.py [--workers 8] [--repeat 3]
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orchestrator import launch, runs, sandbox  # noqa: E402
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

DIE = """\
import os, signal, sys, time
import jax, jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

victim, after = int(sys.argv[1]), int(sys.argv[2])
mesh = Mesh(np.array(jax.devices()), ("d",))
sharding = NamedSharding(mesh, P("d"))
total = jax.jit(jnp.sum, out_shardings=NamedSharding(mesh, P()))
for step in range(100000):
    x = jax.make_array_from_process_local_data(sharding, np.ones((1,), np.float32))
    print("step", step, float(total(x)), flush=True)
    if jax.process_index() == victim and step + 1 >= after:
        print("dying", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.1)
"""

LIST_RUN = (
    "import os,sys\nrid=sys.argv[1].encode()\nn=0\nfor p in os.listdir('/proc'):\n"
    " try:\n  e=open('/proc/'+p+'/environ','rb').read(); s=open('/proc/'+p+'/stat').read()\n"
    " except OSError: continue\n"
    " if b'ORCH_RUN_ID='+rid in e and s.rsplit(')',1)[1].split()[0]!='Z': n+=1\nprint(n)\n"
)


def free_base(workers: int) -> str:
    for second in range(150, 200):
        base = f"127.{second}.{1 + os.getpid() % 200}.1"
        if sandbox.addresses_free(sandbox.worker_addresses(base, workers)):
            return base
    raise SystemExit("no free loopback addresses for the benchmark slice")


def left_on_workers(transport, run_id: str) -> int:
    res = transport.run(["python3", "-c", LIST_RUN, run_id], timeout=30)
    return sum(int(r.stdout.strip() or 0) for r in res.values())


def ms(x: float) -> str:
    return f"{x * 1000:7.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=f"/var/tmp/orch-bench-launch-{os.getpid()}")
    ap.add_argument("--base-address")
    args = ap.parse_args()

    base = args.base_address or free_base(args.workers)
    state = sandbox.up(args.dir, args.workers, base_address=base)
    tmp = Path(tempfile.mkdtemp(prefix="orch-bench-launch-"))
    os.environ[runs.RUNS_ENV] = str(tmp / "runs")
    try:
        fleet = load_fleet(state.fleet_path)
        workers = fleet.lane_workers("cpu")
        t0 = time.perf_counter()
        with for_fleet(fleet, workers) as transport:
            res = transport.run(["sh", "-c", INSTALL, "sh", str(Path(sys.executable).parent / "uv"), ENV], timeout=900)
            bad = {w: r.describe() for w, r in res.items() if not r.ok}
            if bad:
                raise SystemExit(f"installing jax on the workers failed: {bad}")
            print(f"slice: {args.workers} workers at {base}; jax-cpu installed in {time.perf_counter() - t0:.1f}s")
            code = tmp / "code"
            code.mkdir()
            shutil.copy(ROOT / "examples" / "jax_spmd.py", code / "jax_spmd.py")
            (code / "die.py").write_text(DIE)

            start_rows = []
            for i in range(args.repeat):
                plan = launch.plan_launch(fleet, "cpu", ["jax_spmd.py", "--steps", "3"], workdir=str(code))
                t = time.perf_counter()
                out = launch.execute(plan, transport)
                wall = time.perf_counter() - t
                if not out.ok:
                    raise SystemExit(f"start run {i} failed: {out.message}")
                start_rows.append((out.start_skew, out.user_start_skew, out.ready_elapsed, wall))
                print(
                    f"  start {i}: release skew {ms(out.start_skew)}, user-code skew {ms(out.user_start_skew)}, "
                    f"ready after {out.ready_elapsed:.2f}s, whole launch {wall:.2f}s"
                )

            tear_rows = []
            for i in range(args.repeat):
                victim = (i * 3 + 1) % args.workers
                plan = launch.plan_launch(fleet, "cpu", ["die.py", str(victim), "5"], workdir=str(code))
                out = launch.execute(plan, transport)
                f = out.first_failure
                if f is None or f.process_id != victim or f.signal != 9:
                    raise SystemExit(
                        f"teardown run {i}: expected process {victim} killed by SIGKILL, got {out.message}"
                    )
                left = left_on_workers(transport, plan.run_id)
                noticed = out.failure_seen_at - f.ended_at
                tear_rows.append((noticed, out.teardown_latency, out.teardown["elapsed"], left))
                print(
                    f"  teardown {i}: process {victim} SIGKILLed; noticed after {ms(noticed)}, every process "
                    f"gone after {ms(out.teardown_latency)} (stop fan-out {ms(out.teardown['elapsed'])}), "
                    f"processes left: {left}"
                )

        med = statistics.median
        print(f"\nworkers: {args.workers}, repeats: {args.repeat} (medians, max)")
        print(
            f"  start skew (release)          {ms(med(r[0] for r in start_rows))}  "
            f"max {ms(max(r[0] for r in start_rows))}"
        )
        print(
            f"  start skew (user code)        {ms(med(r[1] for r in start_rows))}  "
            f"max {ms(max(r[1] for r in start_rows))}"
        )
        print(f"  ready (imports done) after    {med(r[2] for r in start_rows):7.2f} s")
        print(f"  whole launch (3 steps)        {med(r[3] for r in start_rows):7.2f} s")
        print(
            f"  failure noticed after         {ms(med(r[0] for r in tear_rows))}  "
            f"max {ms(max(r[0] for r in tear_rows))}"
        )
        print(
            f"  teardown latency (all gone)   {ms(med(r[1] for r in tear_rows))}  "
            f"max {ms(max(r[1] for r in tear_rows))}"
        )
        print(f"  processes left after teardown {max(r[3] for r in tear_rows)}")
    finally:
        sandbox.down(args.dir)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
