"""The variables orch sets for every process of a gang: one home for the SSH launch and the GKE pods.

`orch launch` (the controller's plan) and `hostside.jobset_entry` (inside a
pod, where the process's position is known only there) call the same
`process_env`, so the two paths cannot drift apart. The names follow
`torchrun --nnodes=N --nproc_per_node=1` (torch.distributed.elastic's
LocalElasticAgent._start_workers): one role ("default"), one worker per node,
so the group (node) rank is the global rank. TORCHELASTIC_USE_AGENT_STORE is
False: no agent holds a TCPStore, rank 0's env:// rendezvous creates it at
MASTER_ADDR:MASTER_PORT. A gang that orch restarts (`--max-restarts`) counts
its restarts in TORCHELASTIC_RESTART_COUNT, as torchrun's agent would.
"""

from __future__ import annotations

TORCHRUN_ROLE = "default"
TORCHRUN_VARS = (
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "ROLE_NAME",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_USE_AGENT_STORE",
)
# Variables orch sets per process; a profile or --env may not set them.
ORCH_VARS = (
    "ORCH_RUN_ID",
    "ORCH_LANE",
    "ORCH_WORKER",
    "ORCH_PROCESS_ID",
    "ORCH_NUM_PROCESSES",
    "ORCH_COORDINATOR",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    *TORCHRUN_VARS,
)


def process_env(
    run_id: str,
    lane: str,
    worker: str,
    pid: int,
    n: int,
    coordinator: str,
    port: int,
    *,
    restart_count: int = 0,
    max_restarts: int = 0,
) -> dict[str, str]:
    """ORCH_VARS for process `pid` of `n`; `coordinator` is process 0's address, `port` JAX's (torch's is +1)."""
    return {
        "ORCH_RUN_ID": run_id,
        "ORCH_LANE": lane,
        "ORCH_WORKER": worker,
        "ORCH_PROCESS_ID": str(pid),
        "ORCH_NUM_PROCESSES": str(n),
        "ORCH_COORDINATOR": f"{coordinator}:{port}",
        "MASTER_ADDR": coordinator,
        "MASTER_PORT": str(port + 1),
        "WORLD_SIZE": str(n),
        "RANK": str(pid),
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": str(pid),
        "GROUP_WORLD_SIZE": str(n),
        "ROLE_RANK": str(pid),
        "ROLE_WORLD_SIZE": str(n),
        "ROLE_NAME": TORCHRUN_ROLE,
        "TORCHELASTIC_RUN_ID": run_id,
        "TORCHELASTIC_RESTART_COUNT": str(restart_count),
        "TORCHELASTIC_MAX_RESTARTS": str(max_restarts),
        "TORCHELASTIC_USE_AGENT_STORE": "False",
    }
