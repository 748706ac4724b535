"""A metric that lies: every process records its own local loss as a "global" metric.

Nothing reduces the value across processes, so each process reports a
different number under the same "global" name: exactly the mistake of
calling `.item()` before `xm.mesh_reduce` / `psum`. The receipt keeps the
claim and the missing reduction side by side, and `orch report` flags it
(and, because the values differ, shows that they are not global at all).

    orch launch --lane cpu --workdir examples -- unreduced_metric.py
    orch report last
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
import orch_receipt


def main() -> int:
    jax.distributed.initialize()  # a no-op under orch's launcher on a CPU lane
    me, nproc = jax.process_index(), jax.process_count()
    devices = jax.devices()
    orch_receipt.record_backend(
        f"jax_{devices[0].platform}_xla",
        frontend="jax",
        detail=f"jax.jit on this process's {jax.local_device_count()} devices only",
    )
    rng = np.random.default_rng(me)
    x = jnp.asarray(rng.normal(size=256).astype(np.float32))
    local_loss = float(jax.jit(lambda v: jnp.mean(v**2))(x))  # this process's shard only
    orch_receipt.record_metric("loss", local_loss, scope="global")  # wrong on purpose: nothing reduced it
    print(f"process {me}/{nproc}: loss {local_loss:.6f} recorded as global without a reduction", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
