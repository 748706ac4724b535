"""Deploy benchmark: the jax bundle (jax + jaxlib 0.10.2 and dependencies) to 8 workers.

In one run on one fresh local slice:
  - `orch deploy --lane cpu` (cold workers): wall time, controller bytes sent
    vs bundle bytes;
  - `orch deploy` again with nothing changed (the no-op redeploy);
  - the baseline operators use today, sequentially per worker: scp every wheel,
    then `python3 -m venv` + `pip install --no-index --find-links` there.
Prints the figures and the ratios. On a slice given with --sandbox-dir whose
lane already has the bundle, the "cold" deploy changes nothing, and says so.

    .venv/bin/python bench/deploy.py [--workers 8] [--sandbox-dir DIR] [--smoke]

--smoke: 2 workers (a seed and one relay peer).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _slice import BUNDLE, LANE, Slice, add_slice_args, open_slice  # noqa: E402

BASELINE = "/var/lib/orch/baseline"  # the baseline's own directory on a worker, not orch's layout


def locked_wheels(lock: dict) -> list[str]:
    """The lock's wheel files on the controller: the verified copies `orch bundle lock` keeps in its
    wheel cache (found by file name, wherever the cache files them), else the local file pip found."""
    doc = json.loads(Path(lock["lock"]).read_text())
    cache = Path(lock["cache"])
    paths = []
    for w in doc["wheels"]:
        found = next(cache.rglob(w["filename"]), None) if cache.is_dir() else None
        if found is None and Path(w.get("source") or "").is_file():
            found = Path(w["source"])
        if found is None:
            raise SystemExit(f"wheel {w['filename']} of the lock is neither in {cache} nor at {w.get('source')}")
        paths.append(str(found))
    return paths


def baseline_install(sl: Slice, wheels: list[str], pins: list[str]) -> float:
    """Seconds for the sequential scp + venv + pip install on every worker."""
    ssh = sl.ssh_options()
    start = time.perf_counter()
    for a in sl.addresses:
        target = f"root@{a}"
        subprocess.run(["ssh", *ssh, target, f"rm -rf {BASELINE} && mkdir -p {BASELINE}/wheels"], check=True)
        subprocess.run(["scp", "-q", *ssh, *wheels, f"{target}:{BASELINE}/wheels/"], check=True)
        install = (
            f"python3 -m venv {BASELINE}/env && {BASELINE}/env/bin/pip install -q --no-index "
            f"--find-links {BASELINE}/wheels {shlex.join(pins)}"
        )
        subprocess.run(["ssh", *ssh, target, install], check=True, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    for a in sl.addresses:  # leave a shared slice as it was
        subprocess.run(["ssh", *ssh, f"root@{a}", f"rm -rf {BASELINE}"], check=True)
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_slice_args(ap, workers=8)
    args = ap.parse_args()
    if args.smoke:
        args.workers = 2

    with open_slice("deploy", args.workers, sandbox_dir=args.sandbox_dir, base_address=args.base_address) as sl:
        lock = sl.lock(BUNDLE)
        wheels = locked_wheels(lock)
        pins = json.loads(Path(lock["lock"]).read_text())["spec"]["pins"]

        start = time.perf_counter()
        doc = sl.deploy(LANE)
        cold = time.perf_counter() - start
        start = time.perf_counter()
        again = sl.deploy(LANE)
        noop = time.perf_counter() - start

        baseline = baseline_install(sl, wheels, pins)
        baseline_bytes = sum(Path(w).stat().st_size for w in wheels) * sl.workers

        mib = 2**20
        n = sl.workers
        statuses = Counter(o["status"] for o in doc["workers"].values())
        print(
            f"jax-cpu bundle {doc['bundle_id']}: {doc['bundle_bytes'] / mib:.1f} MiB incl. the uv installer "
            f"({lock['total_bytes'] / mib:.1f} MiB of bundle wheels), {n} workers"
        )
        print(
            f"  orch deploy (cold workers)        {cold:7.1f} s   controller sent "
            f"{doc['controller_bytes'] / mib:7.1f} MiB = {doc['controller_bytes'] / doc['bundle_bytes']:.2f}x "
            f"bundle (seed {doc['seed']}, relay {'used' if doc['relay_used'] else 'not used'}; "
            f"{', '.join(f'{c} {s}' for s, c in sorted(statuses.items()))})"
        )
        print(
            f"  orch deploy again (no-op)         {noop:7.1f} s   controller sent "
            f"{again['controller_bytes'] / mib:7.1f} MiB, all unchanged: "
            f"{all(o['status'] == 'unchanged' for o in again['workers'].values())}"
        )
        print(
            f"  sequential scp + pip install      {baseline:7.1f} s   controller sent "
            f"{baseline_bytes / mib:7.1f} MiB = {n:.2f}x bundle"
        )
        print(f"  ratio baseline / orch deploy      {baseline / cold:7.2f}x")
        print(f"  ratio baseline / no-op redeploy   {baseline / noop:7.1f}x")


if __name__ == "__main__":
    main()
