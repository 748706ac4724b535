"""The transport seam: run, put, get, close and fan-out, over SSH (Fabric/paramiko).

One concept per module: `protocol` (the Transport protocol, the frozen Result,
command lines), `fabric` (FabricTransport, the real one), `hostkeys` (strict
or accept-new known_hosts checks, every ProxyJump hop included), `failures`
(exceptions as error kinds), `ending` (ending a timed-out command on the
worker), `channel` (one command on one open session). Callers import from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.transport.ending import ENDING_TIMEOUT, KILL_AFTER, TASK_TAG
    from orchestrator.transport.fabric import (
        CLIENT_GRACE,
        KEEPALIVE_INTERVAL,
        TIMEOUT_SLACK,
        TRANSFER_IDLE_TIMEOUT,
        FabricTransport,
    )
    from orchestrator.transport.failures import classify_exception
    from orchestrator.transport.hostkeys import _HostKeyPolicy
    from orchestrator.transport.protocol import (
        TAIL_LINES,
        FanOut,
        LineCallback,
        LocalPath,
        LocalSource,
        Result,
        Stdin,
        StdinSource,
        Transport,
        command_line,
        source_name,
    )
    from orchestrator.transport.warm import for_fleet

# Where each name lives. Imported on first use, not with the package: a replayed `orch exec`
# (replay.py) imports transport.fabric without the fleet model and warm connections (warm.py).
_HOMES = {
    "ENDING_TIMEOUT": "ending",
    "KILL_AFTER": "ending",
    "TASK_TAG": "ending",
    "CLIENT_GRACE": "fabric",
    "KEEPALIVE_INTERVAL": "fabric",
    "TIMEOUT_SLACK": "fabric",
    "TRANSFER_IDLE_TIMEOUT": "fabric",
    "FabricTransport": "fabric",
    "classify_exception": "failures",
    "_HostKeyPolicy": "hostkeys",
    "TAIL_LINES": "protocol",
    "FanOut": "protocol",
    "LineCallback": "protocol",
    "LocalPath": "protocol",
    "LocalSource": "protocol",
    "Result": "protocol",
    "Stdin": "protocol",
    "StdinSource": "protocol",
    "Transport": "protocol",
    "command_line": "protocol",
    "source_name": "protocol",
    "for_fleet": "warm",
}


def __getattr__(name: str) -> Any:
    import importlib

    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "CLIENT_GRACE",
    "ENDING_TIMEOUT",
    "KEEPALIVE_INTERVAL",
    "KILL_AFTER",
    "TAIL_LINES",
    "TASK_TAG",
    "TIMEOUT_SLACK",
    "TRANSFER_IDLE_TIMEOUT",
    "FabricTransport",
    "FanOut",
    "LineCallback",
    "Stdin",
    "StdinSource",
    "LocalPath",
    "LocalSource",
    "Result",
    "Transport",
    "_HostKeyPolicy",
    "classify_exception",
    "command_line",
    "for_fleet",
    "source_name",
]
