"""Prove the gang's ports are reachable before release: one short-lived listener, every peer connects.

    python3 -m hostside.launch_reach --listen PORT [--listen PORT]... --expect N --deadline S
    python3 -m hostside.launch_reach --connect HOST:PORT [--connect HOST:PORT]... --deadline S

Process 0 listens on the coordinator's JAX port and the MEGASCALE port (all
addresses, as the real coordinator does) until every one of the `N` other
processes has connected to each, or `S` seconds pass on this host's own
monotonic clock. Every other process connects to each `HOST:PORT`, retrying a
refusal (the listener may not be up yet) until its own deadline. A port that a
firewall or route blocks then fails here, in seconds and naming the port,
instead of hanging `jax.distributed.initialize` or libtpu's slice handshake.

The connecting side closes first, so no TIME_WAIT is left on the listener's
port and the coordinator can bind it right after. One JSON document on stdout.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import sys
import threading
import time
from typing import Any

from hostside import SCHEMA_VERSION

RETRY_EVERY = 0.1


def listen(ports: list[int], expect: int, deadline: float) -> dict[str, Any]:
    """Accept `expect` connections on each port (or stop at the deadline); who came, per port."""
    end = time.monotonic() + deadline
    listeners: dict[socket.socket, int] = {}
    errors = []
    for port in ports:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
            s.listen(max(16, expect))
        except OSError as exc:
            s.close()
            errors.append({"port": port, "error": exc.strerror or str(exc)})
            continue
        s.setblocking(False)
        listeners[s] = port
    peers: dict[int, list[str]] = {port: [] for port in listeners.values()}
    open_conns: list[socket.socket] = []
    try:
        while listeners and any(len(p) < expect for p in peers.values()):
            left = end - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select(list(listeners), [], [], min(left, 0.5))
            for s in ready:
                try:
                    conn, addr = s.accept()
                except BlockingIOError:
                    continue
                peers[listeners[s]].append(addr[0])
                open_conns.append(conn)
        # Wait (briefly) for each peer to close first, so TIME_WAIT stays on its side.
        for conn in open_conns:
            conn.settimeout(max(0.05, min(1.0, end - time.monotonic())))
            try:
                while conn.recv(64):
                    pass
            except OSError:
                pass
    finally:
        for conn in open_conns:
            conn.close()
        for s in listeners:
            s.close()
    return {
        "ok": not errors,
        "role": "listener",
        "listen_errors": errors,
        "accepted": [{"port": port, "peers": sorted(p)} for port, p in peers.items()],
    }


def connect(targets: list[str], deadline: float) -> dict[str, Any]:
    """Connect to every `HOST:PORT` at once (each retrying a refusal until the deadline); each one's outcome."""
    end = time.monotonic() + deadline
    out: list[dict[str, Any]] = [{} for _ in targets]

    def attempt(i: int, target: str) -> None:
        out[i] = reach_one(target, end)

    threads = [threading.Thread(target=attempt, args=(i, t), daemon=True) for i, t in enumerate(targets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"ok": all(r.get("ok") for r in out), "role": "peer", "reached": out}


def reach_one(target: str, end: float) -> dict[str, Any]:
    """One connection to `HOST:PORT` before `end` (this host's monotonic clock), closed at once."""
    host, _, port_text = target.rpartition(":")
    t0 = time.monotonic()
    error: str | None = None
    while True:
        left = end - time.monotonic()
        if left <= 0:
            error = error or "timed out"
            break
        try:
            conn = socket.create_connection((host, int(port_text)), timeout=min(left, 2.0))
        except ConnectionRefusedError as exc:  # the listener may not be up yet
            error = exc.strerror or "connection refused"
            time.sleep(min(RETRY_EVERY, max(0.0, end - time.monotonic())))
            continue
        except TimeoutError:
            error = "timed out"
            continue
        except OSError as exc:  # unreachable network or host: retrying will not help
            error = exc.strerror or str(exc) or type(exc).__name__
            break
        conn.close()
        error = None
        break
    return {"target": target, "ok": error is None, "seconds": round(time.monotonic() - t0, 3), "error": error}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="hostside.launch_reach")
    parser.add_argument("--listen", type=int, action="append", default=[])
    parser.add_argument("--connect", action="append", default=[])
    parser.add_argument("--expect", type=int, default=0)
    parser.add_argument("--deadline", type=float, default=5.0)
    args = parser.parse_args(argv)
    doc = listen(args.listen, args.expect, args.deadline) if args.listen else connect(args.connect, args.deadline)
    print(json.dumps({"schema_version": SCHEMA_VERSION, "job": "launch_reach", **doc}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
