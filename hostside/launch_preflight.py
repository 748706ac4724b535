"""Launch preflight on one worker.

    python3 -m hostside.launch_preflight --root R --lane L --run-id ID [--port P]... [--reclaim]
        [--grace S] [--lockfile PATH]

Reports, without changing anything unless `--reclaim` is given (it only
makes sure `<root>/runs/` exists, where the launch file is uploaded next):

- the lane's active bundle (where `<root>/lanes/<lane>/active` points, and
  whether its Python exists), so the controller can refuse a mixed stack;
- who holds the libtpu lockfile (from /proc/locks) or a TPU chip device
  (/dev/accel*, /dev/vfio/N), with pid, command and, when the holder is a
  process of an earlier orch run, that run's id;
- whether the coordinator ports are free to listen on (and a free pair if not);
- processes of earlier orch runs still alive on this worker (from the pid
  files under `<root>/runs/*/`). With `reclaim`, exactly those are ended
  (TERM, grace, KILL) before the other checks; nobody else's processes are.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from typing import Any

from hostside import SCHEMA_VERSION
from hostside import launch_proc as lp


def active_bundle(root: str, lane: str) -> dict[str, Any]:
    link = os.path.join(root, "lanes", lane, "active")
    target = os.path.realpath(link) if os.path.lexists(link) else None
    python = os.path.join(link, "bin", "python")
    return {
        "path": link,
        "exists": bool(target and os.path.isdir(target)),
        "target": target,
        "bundle_id": os.path.basename(target) if target else None,
        "python": python,
        "python_ok": os.access(python, os.X_OK),
    }


def port_free(port: int) -> tuple[bool, str | None]:
    """Can a coordinator listen on `port` (all addresses)?"""
    for family, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((addr, port))
            s.listen(1)
        except OSError as exc:
            return False, f"{exc.strerror or exc}"
        finally:
            s.close()
    return True, None


def free_port_pair() -> list[int] | None:
    for _ in range(20):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("0.0.0.0", 0))
            port = s.getsockname()[1]
        finally:
            s.close()
        if port < 65535 and port_free(port)[0] and port_free(port + 1)[0]:
            return [port, port + 1]
    return None


def earlier_runs(root: str, current: str) -> list[dict[str, Any]]:
    """Runs recorded under <root>/runs/ (other than `current`) with live processes here."""
    runs_dir = os.path.join(root, "runs")
    out: list[dict[str, Any]] = []
    try:
        names = sorted(os.listdir(runs_dir))
    except OSError:
        return out
    for name in names:
        if name == current:
            continue
        run_dir = os.path.join(runs_dir, name)
        pidinfo = lp.read_json(os.path.join(run_dir, lp.PID_FILE))
        launch = lp.read_json(os.path.join(run_dir, lp.LAUNCH_FILE))
        if not pidinfo or not launch:
            continue
        members = lp.run_members(launch["run_id"], launch["worker"], pidinfo)
        supervisor = pidinfo.get("supervisor_pid")
        sup_alive = lp.alive(supervisor, pidinfo.get("supervisor_starttime"))
        if members or sup_alive:
            out.append(
                {
                    "run_id": launch["run_id"],
                    "run_dir": run_dir,
                    "pidinfo": pidinfo,
                    "worker": launch["worker"],
                    "supervisor_alive": sup_alive,
                    "processes": [lp.describe(p) for p in members],
                }
            )
    return out


def reclaim(runs: list[dict[str, Any]], grace: float) -> list[dict[str, Any]]:
    """End every process of the given earlier runs (supervisor first, so it cannot restart anything)."""
    done = []
    for run in runs:
        pidinfo = run["pidinfo"]
        stop_path = os.path.join(run["run_dir"], lp.STOP_FILE)
        if not os.path.exists(stop_path):
            lp.write_json_atomic(stop_path, {"reason": "reclaimed by a later launch", "time": time.time()})
        sup = pidinfo.get("supervisor_pid")

        def find(run: dict[str, Any] = run, sup: int | None = sup) -> list[int]:
            found = lp.run_members(run["run_id"], run["worker"], run["pidinfo"])
            if sup is not None and lp.alive(sup, run["pidinfo"].get("supervisor_starttime")):
                found.append(sup)
            return found

        report = lp.terminate(find, grace=grace, pgid=lp.verified_pgid(pidinfo))
        done.append({"run_id": run["run_id"], "processes": run["processes"], **report})
    return done


def preflight(req: dict[str, Any]) -> dict[str, Any]:
    root, lane, run_id = req["root"], req["lane"], req["run_id"]
    result: dict[str, Any] = {"ok": True, "hostname": socket.gethostname()}
    os.makedirs(os.path.join(root, "runs"), exist_ok=True)
    earlier = earlier_runs(root, run_id)
    if req.get("reclaim") and earlier:
        result["reclaimed"] = reclaim(earlier, float(req.get("grace", 5.0)))
        earlier = earlier_runs(root, run_id)
    else:
        result["reclaimed"] = []
    result["earlier_runs"] = [{k: v for k, v in r.items() if k != "pidinfo"} for r in earlier]
    result["active"] = active_bundle(root, lane)
    lockfile = req.get("lockfile", "/tmp/libtpu_lockfile")
    result["lockfile"] = lockfile
    result["lock_holders"] = lp.lock_holders(lockfile)
    result["device_holders"] = lp.device_holders()
    ports = []
    for port in req.get("ports", []):
        free, error = port_free(int(port))
        ports.append({"port": int(port), "free": free, "error": error})
    result["ports"] = ports
    if any(not p["free"] for p in ports):
        result["suggested_ports"] = free_port_pair()
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="hostside.launch_preflight")
    parser.add_argument("--root", required=True)
    parser.add_argument("--lane", required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--port", type=int, action="append", default=[])
    parser.add_argument("--reclaim", action="store_true")
    parser.add_argument("--grace", type=float, default=5.0)
    parser.add_argument("--lockfile", default="/tmp/libtpu_lockfile")
    args = parser.parse_args(argv)
    req = {
        "root": args.root,
        "lane": args.lane,
        "run_id": args.run_id,
        "ports": args.port,
        "reclaim": args.reclaim,
        "grace": args.grace,
        "lockfile": args.lockfile,
    }
    print(json.dumps({"schema_version": SCHEMA_VERSION, "job": "launch_preflight", **preflight(req)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
