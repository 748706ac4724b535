"""Check the environment a torchrun-launched program expects, as torchrun's elastic agent sets it.

Written for `torchrun --nnodes=N --nproc_per_node=1` and run unmodified by
`orch launch` (one process per worker): torch must say it was launched by
torchelastic, every rank variable must agree with the process group that
env:// builds from them, and the group (node) rank must be the global rank
(one process per node).

    orch launch --lane torch --workdir examples -- torchrun_env.py

Prints one line `torchrun-env ok rank R/W` per process, or exits 1 naming the
variable that disagrees.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

RUN_ID_BYTES = 128

EXPECTED_NAMES = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "ROLE_NAME",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_USE_AGENT_STORE",
)


def main() -> int:
    missing = [name for name in EXPECTED_NAMES if name not in os.environ]
    if missing:
        print(f"torchrun-env: not set: {', '.join(missing)}", file=sys.stderr)
        return 1
    if not dist.is_torchelastic_launched():
        print("torchrun-env: torch does not see a torchelastic launch", file=sys.stderr)
        return 1
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    env = os.environ
    expected = {
        "GROUP_RANK": rank,  # one process per node: the node's rank is the process's
        "GROUP_WORLD_SIZE": world,
        "ROLE_RANK": rank,  # one role
        "ROLE_WORLD_SIZE": world,
        "LOCAL_RANK": 0,
        "LOCAL_WORLD_SIZE": 1,
        "TORCHELASTIC_RESTART_COUNT": 0,
    }
    wrong = [f"{name}={env[name]} (expected {value})" for name, value in expected.items() if int(env[name]) != value]
    if env["ROLE_NAME"] != "default":
        wrong.append(f"ROLE_NAME={env['ROLE_NAME']} (torchrun's role is 'default')")
    if env["TORCHELASTIC_USE_AGENT_STORE"] != "False":
        wrong.append(f"TORCHELASTIC_USE_AGENT_STORE={env['TORCHELASTIC_USE_AGENT_STORE']} (no agent store here)")
    # Every process sees the same run id: gather its bytes through the group (no numpy needed).
    mine = torch.zeros(RUN_ID_BYTES, dtype=torch.int32)
    raw = env["TORCHELASTIC_RUN_ID"].encode()[:RUN_ID_BYTES]
    mine[: len(raw)] = torch.tensor(list(raw), dtype=torch.int32)
    ids = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(ids, mine)
    if any(not torch.equal(other, mine) for other in ids):
        wrong.append("TORCHELASTIC_RUN_ID differs between ranks")
    dist.destroy_process_group()
    if wrong:
        print(f"torchrun-env: rank {rank}: " + "; ".join(wrong), file=sys.stderr)
        return 1
    print(f"torchrun-env ok rank {rank}/{world} group {env['GROUP_RANK']} role {env['ROLE_NAME']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
