"""Deploy benchmark: the jax bundle (jax + jaxlib 0.10.2 and dependencies) to 8 workers.

In one run on one fresh 8-worker local slice:
  - `orch deploy --lane cpu` (cold workers): wall time, controller bytes sent
    vs bundle bytes;
  - `orch deploy` again with nothing changed (the no-op redeploy);
  - the baseline operators use today, sequentially per worker: scp every wheel,
    then `python3 -m venv` + `pip install --no-index --find-links` there.
Prints the figures and the ratios.

    .venv/bin/python bench/deploy.py [--workers 8]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orchestrator import sandbox  # noqa: E402
from orchestrator.bundle import cached_wheel_path, read_lock  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--dir", default=f"/var/tmp/orch-bench-deploy-{os.getpid()}")
    ap.add_argument("--base-address", default=f"127.{203 + os.getpid() % 50}.2.1")
    args = ap.parse_args()

    orch = str(Path(sys.executable).parent / "orch")
    state = sandbox.up(args.dir, args.workers, base_address=args.base_address)
    d = Path(args.dir)
    env = dict(os.environ, ORCH_FLEET=str(d / "fleet.yaml"))
    try:
        subprocess.run([orch, "bundle", "lock", "jax-cpu"], env=env, check=True, stdout=subprocess.DEVNULL)
        lock = read_lock(d / "locks" / "jax-cpu.lock.json")
        wheels = [cached_wheel_path(w) for w in lock.wheels]

        start = time.perf_counter()
        out = subprocess.run(
            [orch, "deploy", "--lane", "cpu", "--json"], env=env, check=True, capture_output=True, text=True
        ).stdout
        cold = time.perf_counter() - start
        doc = json.loads(out)

        start = time.perf_counter()
        again = json.loads(
            subprocess.run(
                [orch, "deploy", "--lane", "cpu", "--json"], env=env, check=True, capture_output=True, text=True
            ).stdout
        )
        noop = time.perf_counter() - start

        ssh = [
            "-i",
            str(d / "id_ed25519"),
            "-o",
            f"UserKnownHostsFile={d / 'known_hosts'}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            "-F",
            "/dev/null",
        ]
        start = time.perf_counter()
        for w in state.workers:
            target = f"root@{w.address}"
            subprocess.run(["ssh", *ssh, target, "mkdir -p /var/lib/orch/baseline/wheels"], check=True)
            subprocess.run(
                ["scp", "-q", *ssh, *map(str, wheels), f"{target}:/var/lib/orch/baseline/wheels/"], check=True
            )
            subprocess.run(
                [
                    "ssh",
                    *ssh,
                    target,
                    "python3 -m venv /var/lib/orch/baseline/env && /var/lib/orch/baseline/env/bin/pip "
                    "install -q --no-index --find-links /var/lib/orch/baseline/wheels jax==0.10.2 "
                    "jaxlib==0.10.2",
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        baseline = time.perf_counter() - start
        baseline_bytes = sum(p.stat().st_size for p in wheels) * len(state.workers)

        mib = 2**20
        print(
            f"jax-cpu bundle {doc['bundle_id']}: {doc['bundle_bytes'] / mib:.1f} MiB incl. the uv installer "
            f"({lock.total_size / mib:.1f} MiB of bundle wheels), {len(state.workers)} workers"
        )
        print(
            f"  orch deploy (cold workers)        {cold:7.1f} s   controller sent "
            f"{doc['controller_bytes'] / mib:7.1f} MiB = {doc['controller_bytes'] / doc['bundle_bytes']:.2f}x "
            f"bundle (seed {doc['seed']}, relay {'used' if doc['relay_used'] else 'not used'})"
        )
        print(
            f"  orch deploy again (no-op)         {noop:7.1f} s   controller sent "
            f"{again['controller_bytes'] / mib:7.1f} MiB, all unchanged: "
            f"{all(o['status'] == 'unchanged' for o in again['workers'].values())}"
        )
        print(
            f"  sequential scp + pip install      {baseline:7.1f} s   controller sent "
            f"{baseline_bytes / mib:7.1f} MiB = {len(state.workers):.2f}x bundle"
        )
        print(f"  ratio baseline / orch deploy      {baseline / cold:7.2f}x")
        print(f"  ratio baseline / no-op redeploy   {baseline / noop:7.1f}x")
    finally:
        sandbox.down(args.dir)
        shutil.rmtree(Path(args.dir) / "locks", ignore_errors=True)  # the lock this benchmark wrote
        try:
            Path(args.dir).rmdir()
        except OSError:
            pass


if __name__ == "__main__":
    main()
