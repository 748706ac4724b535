"""Data-parallel training with torch.distributed (gloo) and DistributedDataParallel.

Reads the standard rendezvous variables (MASTER_ADDR, MASTER_PORT,
WORLD_SIZE, RANK), which `orch launch` sets for every process from its plan;
nothing in the script names a host. Each rank trains on its own shard of
every global batch; DDP averages the gradients, and the reported loss is
all-reduced across ranks, so every rank prints the same global loss (a
number that differed per rank would be a local one, not a global one).

The receipt (`import orch_receipt`, provided by `orch launch`) records the
backend that answered (`torch_gloo_cpu`: torch.distributed over gloo with
CPU tensors), every step time, and the loss as a global metric reduced by
all_reduce over every rank.

    orch launch --lane torch --workdir examples -- torch_ddp.py --steps 20

Fault injection for tests: `--fail-rank 2 --fail-after 3 --fail-code 3`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import orch_receipt
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

FEATURES = 8


def batch(step: int, rank: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(rows, FEATURES, generator=g)
    true_w = torch.arange(1, FEATURES + 1, dtype=torch.float32) / FEATURES
    y = x @ true_w + 0.01 * torch.randn(rows, generator=g)
    return x, y.unsqueeze(1)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--step-sleep", type=float, default=0.0)
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--fail-after", type=int, default=3)
    parser.add_argument("--fail-code", type=int, default=3)
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    print(
        f"rank {rank}/{world}: backend {dist.get_backend()}, master "
        f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}",
        flush=True,
    )

    # Prove the collective: the sum of (rank + 1) over all ranks.
    mark = torch.tensor([rank + 1.0])
    dist.all_reduce(mark)
    expected = world * (world + 1) / 2
    if mark.item() != expected:
        print(f"collective check FAILED: {mark.item()} != {expected}", flush=True)
        return 1
    print(f"rank {rank}: collective check ok (global sum {mark.item():g})", flush=True)
    device = mark.device.type
    orch_receipt.record_backend(
        f"torch_{dist.get_backend()}_{device}",
        frontend="torch",
        detail=f"DistributedDataParallel over torch.distributed ({dist.get_backend()}), "
        f"{world} ranks, {device} tensors",
    )

    model = DistributedDataParallel(torch.nn.Linear(FEATURES, 1, bias=False))
    with torch.no_grad():
        model.module.weight.zero_()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_value = None
    for step in range(args.steps):
        x, y = batch(step, rank, args.rows)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()  # DDP all-reduces (averages) the gradients here
        opt.step()
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss)  # the reported number is the global mean, proven by the collective
        loss_value = global_loss.item() / world
        orch_receipt.record_time("step", time.perf_counter() - t0)
        orch_receipt.record_metric(
            "loss",
            loss_value,
            scope="global",
            reduced_by="all_reduce",
            over=world,
            step=step,
            detail="dist.all_reduce (sum) of every rank's loss, divided by the world size",
        )
        print(f"rank {rank} step {step} loss {loss_value:.6f}", flush=True)
        if rank == args.fail_rank and step + 1 >= args.fail_after:
            print(f"rank {rank}: failing on purpose with exit code {args.fail_code}", flush=True)
            sys.exit(args.fail_code)
        if args.step_sleep:
            time.sleep(args.step_sleep)
    print(f"RESULT process={rank} processes={world} global_devices={world} loss={loss_value:.8f}", flush=True)
    # Rank 0 hosts the rendezvous store: no rank leaves while another still needs it.
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
