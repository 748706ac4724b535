"""A JAX training step whose compilation takes seconds on CPU: for proving compilation-cache reuse.

The model is a deep stack of distinct layers, unrolled by Python, so XLA
compiles one large program (about 3 s on one CPU core for the default 96
layers; more when several processes compile at once on few cores). The step
runs data-parallel over the global mesh of every process, like a pod-slice
training script, and a psum proves the cross-process collective ran.

    orch restart-check --lane cpu --workdir examples -- jax_compile_heavy.py
    orch launch --lane cpu --workdir examples -- jax_compile_heavy.py --layers 48

The script does nothing about caches itself: the launcher applies the lane's
cache policy before it runs. It prints its own first-step time (compile plus
one step) so a warm restart is visible in its output too.
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

WIDTH = 32


def model(params, x):
    for i, w in enumerate(params):
        x = x + 0.1 * jnp.tanh(x @ w + jnp.sin(x * (i + 1)))
        x = x / (1.0 + jnp.abs(x).mean())
    return x


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--layers", type=int, default=96, help="depth of the unrolled model (compile time grows with it)"
    )
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rows-per-device", type=int, default=8)
    args = parser.parse_args(argv)

    jax.distributed.initialize()  # as on a TPU pod; a no-op when orch's launcher already did it
    devices = jax.devices()
    mesh = Mesh(np.array(devices), ("data",))
    me, nproc, local = jax.process_index(), jax.process_count(), jax.local_device_count()
    data = NamedSharding(mesh, P("data"))
    replicated = NamedSharding(mesh, P())

    params = [jax.device_put(jnp.eye(WIDTH, dtype=jnp.float32) * (1 + i / 100), replicated) for i in range(args.layers)]

    @jax.jit
    def train_step(params, x, y):
        def loss_fn(params):
            return jnp.mean((model(params, x).mean(axis=1) - y) ** 2)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        return [w - 1e-3 * g for w, g in zip(params, grads, strict=True)], loss

    rows = args.rows_per_device * local
    rng = np.random.default_rng(me)
    t0 = time.perf_counter()
    loss = None
    for step in range(args.steps):
        x = jax.make_array_from_process_local_data(data, rng.normal(size=(rows, WIDTH)).astype(np.float32))
        y = jax.make_array_from_process_local_data(data, rng.normal(size=(rows,)).astype(np.float32))
        params, loss = train_step(params, x, y)
        loss = float(loss)
        if step == 0:
            first = time.perf_counter() - t0
            print(f"process {me}: first step (compile + run) {first:.2f}s", flush=True)

    marks = jax.make_array_from_process_local_data(data, np.full((local,), me + 1, dtype=np.int32))
    total = int(jax.jit(jnp.sum, out_shardings=replicated)(marks))
    expected = sum(d.process_index + 1 for d in devices)
    if total != expected:
        print(f"collective check FAILED: psum {total} != {expected}", flush=True)
        return 1
    print(
        f"RESULT process={me} processes={nproc} layers={args.layers} first_step_sec={first:.3f} loss={loss:.6f}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
