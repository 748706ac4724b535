"""`orch deploy`: push a locked bundle to every worker of a lane and install it.

Plan, then execute. `plan_deploy` is pure: the lane's workers, the locked
wheels and the bundle id. `execute` carries it out per worker, in parallel:

1. begin: refuse if another deploy holds the lane; `unchanged` if the bundle
   is already active; otherwise take the lane's lock and list missing wheels.
2. transfer: the controller sends each missing wheel (and the bundle's
   interpreter archive, if it has one) once, to a seed worker;
   the others fetch from the seed over the slice network (falling back to a
   direct push). Every file is checked by sha256 on arrival.
3. install: an offline environment per bundle id (uv, hashes required),
   verified against the lock, made from the bundle's own interpreter
   (unpacked once per worker) or else the worker's system Python.
4. activate: only when every worker has its environment, swap each one's active
   pointer and record a receipt; the locks are kept until every worker has
   switched, and a worker that fails to switch has the others switched back.

A lane switches on every worker or on none: when any worker fails a step, no
worker switches (environments already built are kept for the next deploy).
While the deploy holds locks, a background thread refreshes their heartbeat
(an SFTP upload runs no hostside code that could), and the workers refuse to
install or activate for a deploy whose lock another one has since taken.
"""

from orchestrator.deploy.job import _Deploy, _Failed, disk_headroom, execute
from orchestrator.deploy.lane_lock import (
    HEARTBEAT_EVERY,
    HEARTBEAT_TIMEOUT,
    STALE_AFTER,
    _Heartbeat,
    _holder_is_dead,
    _liveness,
    _liveness_path,
)
from orchestrator.deploy.plan import DeployPlan, DeployReport, Progress, WorkerOutcome, installer_wheel, plan_deploy
from orchestrator.deploy.status import disagreements, rollback, status

__all__ = [
    "HEARTBEAT_EVERY",
    "HEARTBEAT_TIMEOUT",
    "STALE_AFTER",
    "DeployPlan",
    "DeployReport",
    "Progress",
    "WorkerOutcome",
    "_Deploy",
    "_Failed",
    "_Heartbeat",
    "_holder_is_dead",
    "_liveness",
    "_liveness_path",
    "disagreements",
    "disk_headroom",
    "execute",
    "installer_wheel",
    "plan_deploy",
    "rollback",
    "status",
]
