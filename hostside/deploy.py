"""Worker side of `orch deploy`: store, lock, install, activate, roll back.

    python3 -m hostside.deploy ACTION < request.json

Actions: begin, heartbeat, receive, serve, fetch, stop-serve, install,
activate, unlock, rollback, status. Each reads one JSON request on stdin and
prints one JSON document. Nothing here switches a lane's active bundle until
its environment is complete and verified; a failed install leaves no partial
environment. Install and activate act only while the lane's deploy lock still
carries the requester's token, and the long actions (receive, fetch, install)
end themselves when the controller stops renewing that lock (see
hostside.deploy_lock's controller lease).

This module reads the request and dispatches; the actions live by concept in
hostside.deploy_lock (begin, heartbeat, unlock), deploy_store (receive),
deploy_relay (serve, stop-serve, fetch), deploy_install (install, with
deploy_interpreter unpacking a bundle's own Python) and deploy_activate
(activate, rollback, status).
"""

from __future__ import annotations

import contextlib
import json
import sys

from hostside import SCHEMA_VERSION
from hostside.deploy_activate import activate, rollback, status
from hostside.deploy_install import install
from hostside.deploy_lock import (
    LOCK_FIELDS,
    _heartbeat,
    _holder,
    _lane_mutex,
    _LockLost,
    _read_lock,
    _release,
    _require_lock,
    _watched,
    begin,
    describe_holder,
    heartbeat,
    unlock,
)
from hostside.deploy_relay import fetch, serve, stop_serve
from hostside.deploy_store import COMPLETE, MANIFEST, DeployFailure, receive

__all__ = [
    "ACTIONS",
    "COMPLETE",
    "LOCK_FIELDS",
    "LONG_ACTIONS",
    "MANIFEST",
    "DeployFailure",
    "_LockLost",
    "_heartbeat",
    "_holder",
    "_lane_mutex",
    "_read_lock",
    "_watched",
    "_release",
    "_require_lock",
    "activate",
    "begin",
    "describe_holder",
    "fetch",
    "heartbeat",
    "install",
    "main",
    "receive",
    "rollback",
    "serve",
    "status",
    "stop_serve",
    "unlock",
]

LONG_ACTIONS = ("receive", "fetch", "install")

ACTIONS = {
    "begin": begin,
    "heartbeat": heartbeat,
    "receive": receive,
    "serve": serve,
    "stop-serve": stop_serve,
    "fetch": fetch,
    "install": install,
    "activate": activate,
    "unlock": unlock,
    "rollback": rollback,
    "status": status,
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ACTIONS:
        print(f"usage: python3 -m hostside.deploy {{{','.join(ACTIONS)}}} < request.json", file=sys.stderr)
        return 2
    req = json.load(sys.stdin)
    try:
        if argv[0] not in ("begin", "heartbeat", "status", "unlock", "stop-serve"):
            try:
                _heartbeat(req)
            except OSError as exc:  # e.g. a full disk: the action itself says what is wrong
                print(f"heartbeat failed: {exc}", file=sys.stderr)
        # A long action lives only while its controller keeps renewing the lock.
        watched = argv[0] in LONG_ACTIONS and "holder" in req and "lane" in req
        with _watched(req, argv[0]) if watched else contextlib.nullcontext():
            out = ACTIONS[argv[0]](req)
        ok = True
    except DeployFailure as exc:
        out, ok = {"error": str(exc)}, False
    except OSError as exc:
        reason = "no space left on device" if exc.errno == 28 else f"{exc.strerror}"
        out, ok = {"error": f"{reason}: {exc.filename or ''}".rstrip(": ")}, False
    print(json.dumps({"schema_version": SCHEMA_VERSION, "job": "deploy", "action": argv[0], "ok": ok, **out}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
