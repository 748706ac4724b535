"""Data-parallel training over the global mesh of every process (JAX SPMD).

Written the way a TPU-pod script is written: it calls
`jax.distributed.initialize()` with no arguments and never mentions hosts.
Under `orch launch` on a CPU lane the launcher has already initialised
jax.distributed from the plan, so that call is a no-op (the run record says
so); on a TPU slice the runtime discovers the slice itself.

Each process feeds its own shard of every global batch; the loss and the
gradients are means over the whole global batch, so XLA reduces them across
all processes and every process prints the same loss. A separate psum over
the mesh proves the collective really ran (a local number would differ per
process).

The receipt (`import orch_receipt`, provided by `orch launch`) records the
backend that answered (e.g. `jax_cpu_xla`), the compile time and every step
time, and the loss as a global metric together with the reduction that made
it global: the all-reduce XLA inserted for the mean over the sharded batch,
checked in the compiled program rather than assumed.

    orch launch --lane cpu --env JAX_NUM_CPU_DEVICES=2 --workdir examples -- jax_spmd.py --steps 20

Fault injection for tests: `--fail-process 2 --fail-after 3 --fail-code 3`
makes process 2 exit with status 3 after 3 steps.
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import orch_receipt
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

FEATURES = 8


def batch(step: int, process: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """This process's shard of global batch `step` (deterministic, different per process)."""
    rng = np.random.default_rng(1000 * step + process)
    x = rng.normal(size=(rows, FEATURES)).astype(np.float32)
    true_w = np.arange(1, FEATURES + 1, dtype=np.float32) / FEATURES
    y = x @ true_w + 0.01 * rng.normal(size=rows).astype(np.float32)
    return x, y


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rows-per-device", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--step-sleep", type=float, default=0.0, help="seconds to sleep after each step")
    parser.add_argument("--fail-process", type=int, default=-1)
    parser.add_argument("--fail-after", type=int, default=3)
    parser.add_argument("--fail-code", type=int, default=3)
    args = parser.parse_args(argv)

    jax.distributed.initialize()  # as on a TPU pod; a no-op when orch's launcher already did it

    devices = jax.devices()
    mesh = Mesh(np.array(devices), ("data",))
    me, nproc = jax.process_index(), jax.process_count()
    local = jax.local_device_count()
    data_sharding = NamedSharding(mesh, P("data"))
    replicated = NamedSharding(mesh, P())
    print(
        f"process {me}/{nproc}: {local} local devices, {len(devices)} global devices ({devices[0].platform})",
        flush=True,
    )
    # The backend that answered: XLA through jit, on whatever platform the runtime gave us.
    orch_receipt.record_backend(
        f"jax_{devices[0].platform}_xla",
        frontend="jax",
        detail=f"jax.jit over a {len(devices)}-device global mesh of {nproc} processes ({devices[0].device_kind})",
    )

    # Prove the cross-process collective: every device contributes (process index + 1).
    marks = jax.make_array_from_process_local_data(data_sharding, np.full((local,), me + 1, dtype=np.int32))
    total = int(jax.jit(jnp.sum, out_shardings=replicated)(marks))
    expected = sum((jax.devices()[i].process_index + 1) for i in range(len(devices)))
    if total != expected:
        print(f"collective check FAILED: psum {total} != {expected}", flush=True)
        return 1
    print(f"process {me}: collective check ok (global sum {total})", flush=True)

    def train_step(w, x, y):
        def loss_fn(w):
            return jnp.mean((x @ w - y) ** 2)

        loss, grad = jax.value_and_grad(loss_fn)(w)
        return w - args.lr * grad, loss

    w = jax.device_put(jnp.zeros((FEATURES,), jnp.float32), replicated)
    rows = args.rows_per_device * local

    def global_batch(step):
        x_local, y_local = batch(step, me, rows)
        return (
            jax.make_array_from_process_local_data(data_sharding, x_local),
            jax.make_array_from_process_local_data(data_sharding, y_local),
        )

    t0 = time.perf_counter()
    step_fn = jax.jit(train_step, out_shardings=(replicated, replicated)).lower(w, *global_batch(0)).compile()
    orch_receipt.record_time("compile", time.perf_counter() - t0)
    # The mean over the data-sharded batch is global only if the compiled program reduces it.
    reduced = "all-reduce" in step_fn.as_text() if len(devices) > 1 else False
    loss = None
    for step in range(args.steps):
        x, y = global_batch(step)
        t0 = time.perf_counter()
        w, loss = step_fn(w, x, y)
        loss = float(loss)  # the loss is replicated: every process holds the global value
        orch_receipt.record_time("step", time.perf_counter() - t0)
        orch_receipt.record_metric(
            "loss",
            loss,
            scope="global",
            reduced_by="psum" if reduced else None,
            over=nproc,
            step=step,
            detail="jnp.mean over the data-sharded global batch; XLA's all-reduce is in the compiled program"
            if reduced
            else None,
        )
        print(f"process {me} step {step} loss {loss:.6f}", flush=True)
        if me == args.fail_process and step + 1 >= args.fail_after:
            print(f"process {me}: failing on purpose with exit code {args.fail_code}", flush=True)
            sys.exit(args.fail_code)
        if args.step_sleep:
            time.sleep(args.step_sleep)
    print(
        f"RESULT process={me} processes={nproc} global_devices={len(devices)} local_devices={local} loss={loss:.8f}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
