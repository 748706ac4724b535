"""The local pod slice: real sshd workers on one Linux machine, for tests and trying orch out.

A local harness, not part of the core: no core module imports it (only the
`orch sandbox` verb, the tests and the benchmarks do).

Each worker is one OpenSSH `sshd` started inside its own mount and UTS
namespace (`unshare`), so it has its own hostname (`slice-w3`), listens on its
own loopback address (127.0.1.4:22) and sees private directories at the paths
a real worker uses:

    /var/lib/orch       <dir>/workers/<name>/root    the worker root
    /tmp                <dir>/workers/<name>/tmp
    /root               <dir>/workers/<name>/home    empty shell startup files
    /mnt/orch-shared    <dir>/shared                 one directory for all workers
    /etc/hosts          <dir>/hosts                  every worker's hostname -> its address

Because /tmp, /root, /var/lib/orch and /mnt/orch-shared are rebound inside the
workers, the sandbox directory itself must live elsewhere (sshd inside a worker
reads its config and keys from it); the default is /var/tmp/orch-sandbox.

`up` writes keys, known_hosts and a ready `<dir>/fleet.yaml`, starts the
workers and waits until every sshd answers; `state.json` records what runs.
A worker is everything in its namespaces: the sshd, each session it forked and
anything those left behind, so `pause`/`resume`/`kill`/`down` act on the
sshd's process tree plus every process in its namespaces.

Modules:

- `spec`        what is asked for: directory rules, addresses, lanes, bundles (pure);
- `fleetfile`   the fleet.yaml the sandbox writes (pure);
- `state`       what runs (`state.json`) and the results of the commands;
- `files`       the sandbox directory's files: keys, known_hosts, configs, fleet.yaml;
- `sshd`        one worker's sshd: config, start in fresh namespaces, wait until it answers;
- `namespaces`  which processes run on a worker, and stopping them (/proc);
- `machine`     can this machine run a sandbox; are the addresses free;
- `lifecycle`   `up`, `down`, `status`;
- `faults`      `pause`, `resume`, `kill`, `kill_sshd`, `regenerate_host_key`, `replace`.
"""

from orchestrator.sandbox.faults import host_key, kill, kill_sshd, pause, regenerate_host_key, replace, resume
from orchestrator.sandbox.fleetfile import known_hosts_name, render_fleet
from orchestrator.sandbox.lifecycle import down, load_state, status, up
from orchestrator.sandbox.machine import addresses_free, preflight
from orchestrator.sandbox.namespaces import worker_processes
from orchestrator.sandbox.spec import (
    BUNDLES,
    DEFAULT_BASE_ADDRESS,
    DEFAULT_DIR,
    DIR_ENV,
    MAX_SLICES,
    MAX_WORKERS,
    PLATFORMS,
    PORT,
    READY_TIMEOUT,
    SHARED_MOUNT,
    SLICE,
    WORKER_HOME,
    WORKER_ROOT,
    LaneSpec,
    check_dir,
    parse_lane_spec,
    plan_lanes,
    sandbox_dir,
    slice_names,
    worker_addresses,
    worker_name,
    worker_names,
)
from orchestrator.sandbox.state import (
    DownResult,
    SandboxState,
    SandboxStatus,
    WorkerAction,
    WorkerState,
    WorkerStatus,
)

__all__ = [
    "BUNDLES",
    "DEFAULT_BASE_ADDRESS",
    "DEFAULT_DIR",
    "DIR_ENV",
    "MAX_SLICES",
    "MAX_WORKERS",
    "PLATFORMS",
    "PORT",
    "READY_TIMEOUT",
    "SHARED_MOUNT",
    "SLICE",
    "WORKER_HOME",
    "WORKER_ROOT",
    "DownResult",
    "LaneSpec",
    "SandboxState",
    "SandboxStatus",
    "WorkerAction",
    "WorkerState",
    "WorkerStatus",
    "addresses_free",
    "check_dir",
    "down",
    "host_key",
    "kill",
    "kill_sshd",
    "known_hosts_name",
    "load_state",
    "parse_lane_spec",
    "pause",
    "plan_lanes",
    "preflight",
    "regenerate_host_key",
    "replace",
    "render_fleet",
    "resume",
    "sandbox_dir",
    "status",
    "up",
    "worker_addresses",
    "worker_name",
    "worker_names",
    "slice_names",
    "worker_processes",
]
