"""Launch benchmark: start skew across 8 workers, and teardown latency after one worker dies.

Brings up its own local slice (or uses one given with --sandbox-dir), makes
the jax-cpu bundle active on every worker with `orch deploy`, then, with real
JAX processes started by `orch launch --json`:

  start    launch a short data-parallel job; report how far apart the
           launchers left the start barrier (release skew), how far apart
           user code began after jax.distributed.initialize (user-code skew),
           and the time from "all ready" to release.
  teardown launch a job in which one worker SIGKILLs itself after a few
           steps; report the time from its death (its exit as recorded on
           the worker) to orch noticing it, and to every process of the run
           on every worker being gone (checked by listing processes).

A slice it brought up is taken down at the end.

    .venv/bin/python bench/launch.py [--workers 8] [--repeat 3] [--sandbox-dir DIR] [--smoke]

--smoke: 2 workers, 1 repeat.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _slice import LANE, ROOT, Slice, add_slice_args, open_slice  # noqa: E402

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

# Counts the live processes whose environment carries the run's id (the launcher exports
# ORCH_RUN_ID to everything it starts); zombies are already gone.
LIST_RUN = (
    "import os,sys\nrid=sys.argv[1].encode()\nn=0\nfor p in os.listdir('/proc'):\n"
    " try:\n  e=open('/proc/'+p+'/environ','rb').read(); s=open('/proc/'+p+'/stat').read()\n"
    " except OSError: continue\n"
    " if b'ORCH_RUN_ID='+rid in e and s.rsplit(')',1)[1].split()[0]!='Z': n+=1\nprint(n)\n"
)


def left_on_workers(sl: Slice, run_id: str) -> int:
    """Processes of the run still alive on any worker (`orch exec`)."""
    doc = sl.orch_json("exec", "--json", "--lane", LANE, "--", "python3", "-c", LIST_RUN, run_id, timeout=60)
    return sum(int(r["stdout_tail"].strip() or 0) for r in doc["results"])


def launch(sl: Slice, code: Path, *argv: str) -> tuple[dict, float]:
    """`orch launch --json` of `argv` from `code`: its outcome document and wall time (CLI start included)."""
    start = time.perf_counter()
    proc = sl.orch(
        "launch", "--lane", LANE, "--workdir", str(code), "--json", "--no-gather", "--", *argv, check=False, timeout=600
    )
    wall = time.perf_counter() - start
    try:
        return json.loads(proc.stdout), wall
    except json.JSONDecodeError:
        raise SystemExit(f"orch launch exited {proc.returncode} without an outcome:\n{proc.stderr[-4000:]}") from None


def ms(x: float) -> str:
    return f"{x * 1000:7.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_slice_args(ap, workers=8)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.smoke:
        args.workers, args.repeat = 2, 1

    with open_slice("launch", args.workers, sandbox_dir=args.sandbox_dir, base_address=args.base_address) as sl:
        t0 = time.perf_counter()
        deployed = sl.deploy()
        print(
            f"slice: {sl.workers} workers in {sl.dir}; jax-cpu {deployed['bundle_id']} active after "
            f"{time.perf_counter() - t0:.1f}s (orch deploy)"
        )
        code = Path(tempfile.mkdtemp(prefix="orch-bench-launch-code-"))
        try:
            shutil.copy(ROOT / "examples" / "jax_spmd.py", code / "jax_spmd.py")
            (code / "die.py").write_text(DIE)

            start_rows = []
            for i in range(args.repeat):
                out, wall = launch(sl, code, "jax_spmd.py", "--steps", "3")
                if not out["ok"]:
                    raise SystemExit(f"start run {i} failed: {out['message']}")
                start_rows.append((out["start_skew"], out["user_start_skew"], out["ready_elapsed"], wall))
                print(
                    f"  start {i}: release skew {ms(out['start_skew'])}, user-code skew "
                    f"{ms(out['user_start_skew'])}, ready after {out['ready_elapsed']:.2f}s, "
                    f"whole orch launch {wall:.2f}s"
                )

            tear_rows = []
            for i in range(args.repeat):
                victim = (i * 3 + 1) % sl.workers
                out, _ = launch(sl, code, "die.py", str(victim), "5")
                f = out["first_failure"]
                if f is None or f["process_id"] != victim or f["signal"] != 9:
                    raise SystemExit(
                        f"teardown run {i}: expected process {victim} killed by SIGKILL, got {out['message']}"
                    )
                left = left_on_workers(sl, out["run_id"])
                noticed = out["failure_seen_at"] - f["ended_at"]
                tear_rows.append((noticed, out["teardown_latency"], out["teardown"]["elapsed"], left))
                print(
                    f"  teardown {i}: process {victim} SIGKILLed; noticed after {ms(noticed)}, every process "
                    f"gone after {ms(out['teardown_latency'])} (stop fan-out {ms(out['teardown']['elapsed'])}), "
                    f"processes left: {left}"
                )
        finally:
            shutil.rmtree(code, ignore_errors=True)

        med = statistics.median
        print(f"\nworkers: {sl.workers}, repeats: {args.repeat} (medians, max)")
        print(
            f"  start skew (release)          {ms(med(r[0] for r in start_rows))}  "
            f"max {ms(max(r[0] for r in start_rows))}"
        )
        print(
            f"  start skew (user code)        {ms(med(r[1] for r in start_rows))}  "
            f"max {ms(max(r[1] for r in start_rows))}"
        )
        print(f"  ready (imports done) after    {med(r[2] for r in start_rows):7.2f} s")
        print(f"  whole orch launch (3 steps)   {med(r[3] for r in start_rows):7.2f} s")
        print(
            f"  failure noticed after         {ms(med(r[0] for r in tear_rows))}  "
            f"max {ms(max(r[0] for r in tear_rows))}"
        )
        print(
            f"  teardown latency (all gone)   {ms(med(r[1] for r in tear_rows))}  "
            f"max {ms(max(r[1] for r in tear_rows))}"
        )
        print(f"  processes left after teardown {max(r[3] for r in tear_rows)}")


if __name__ == "__main__":
    main()
