"""A torch_xla training loop whose graphs take a while to compile: for proving (or disproving) cache reuse.

Runs under `orch launch` on a torch_xla lane: the launcher has applied the
runtime policy (PJRT_DEVICE), the lane's compilation cache
(torch_xla.runtime.initialize_cache) and torch_xla.runtime.use_spmd() before
this script starts, so the script itself only builds a model and trains it.

    orch restart-check --lane xla --workdir examples -- torch_xla_compile.py

On the CPU PJRT backend torch_xla 2.9.0 writes persistent cache entries but
cannot load them back (`Failed to deserialize executable: UNIMPLEMENTED`), so
a restart check there reports `written-not-reused`.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args(argv)

    device = xm.xla_device()
    torch.manual_seed(0)
    layers = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.LayerNorm(args.width), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(args.width, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(16, args.width).to(device)
    y = torch.randn(16, 1).to(device)
    t0 = time.perf_counter()
    loss = None
    for step in range(args.steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        torch_xla.sync()
        if step == 0:
            print(f"first step (compile + run) {time.perf_counter() - t0:.2f}s", flush=True)
    compile_time = met.metric_data("CompileTime")
    print(
        f"RESULT loss={loss.item():.6f} compiles={compile_time[0] if compile_time else 0} "
        f"compile_sec={(compile_time[1] / 1e9) if compile_time else 0:.3f} "
        f"persistent_hits={met.counter_value('PersistentCacheHit') or 0} "
        f"deserialize_failures={met.counter_value('PersistentCacheDeserializeFailure') or 0}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
