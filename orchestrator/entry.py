"""The `orch` executable: `orch exec` straight to a running connection holder, or replayed, else the click CLI.

When the fleet's connection holder is up (see `connections` and
`transport.persist`), `orch exec -- CMD` only has to hand the request over and
print what comes back. Importing click, pydantic, YAML and paramiko would cost
several times more than that, so this module recognises the plain forms of
`orch [--fleet P] [--host-key-policy X] [--connect-timeout S] exec [--lane L]
[--workers SEL] [--timeout S] [--json] -- CMD ARGS...` with stdlib alone and
asks the holder whose key matches; it prints exactly what `cli/exec_cmd.py`
prints (tests/test_warm_slice.py compares the two). Anything else, no holder,
or a holder that refuses (e.g. an unknown lane, which the CLI then reports)
goes to the click CLI, which starts a holder when warm connections are on.
Once the holder accepted the command, its outcome is the command's.

With warm connections off (`ORCH_SSH_PERSIST=0`, `ssh.persist: 0`), the same
plain forms run on a replayed fleet record (`exec_replayed`, see
transport/replay.py): the workers, their settings and what Fabric resolved for
each, left by an earlier command on the unchanged fleet; the command connects
with paramiko alone through the same FabricTransport and prints the same.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from orchestrator import connections as wire

# The options `orch` and `orch exec` take with a value, and the flags, as this path knows them.
_MAIN_VALUES = {"--fleet", "--host-key-policy", "--connect-timeout"}
_EXEC_VALUES = {"--lane", "--workers", "--timeout"}
_EXEC_FLAGS = {"--json"}
SUMMARY_THRESHOLD = 16  # cli/render.py's: above it, failures are summarised there


def parse(args: list[str]) -> dict[str, Any] | None:
    """The fast path's request from `orch`'s arguments, or None when they are not a plain `exec`."""
    opts: dict[str, str] = {}
    i = 0
    while i < len(args) and args[i] in _MAIN_VALUES and i + 1 < len(args):
        opts[args[i]] = args[i + 1]
        i += 2
    if i >= len(args) or args[i] != "exec":
        return None
    i += 1
    flags = set()
    while i < len(args) and args[i] != "--":
        if args[i] in _EXEC_VALUES and i + 1 < len(args):
            opts[args[i]] = args[i + 1]
            i += 2
        elif args[i] in _EXEC_FLAGS:
            flags.add(args[i])
            i += 1
        else:
            return None
    argv = args[i + 1 :]
    if not argv:
        return None
    try:
        connect = float(opts["--connect-timeout"]) if "--connect-timeout" in opts else None
        timeout = float(opts["--timeout"]) if "--timeout" in opts else None
    except ValueError:
        return None
    policy = opts.get("--host-key-policy")
    if policy not in (None, "strict", "accept-new"):
        return None
    return {
        "fleet": opts.get("--fleet"),
        "keyed": {k: v for k, v in (("host_key_policy", policy), ("connect_timeout", connect)) if v},
        "select": {"lane": opts.get("--lane"), "workers": opts.get("--workers")},
        "timeout": timeout,
        "json": "--json" in flags,
        "argv": argv,
    }


def exec_warm(args: list[str]) -> int | None:
    """Run a plain `orch exec` through a live holder: its exit code, or None to take the click CLI."""
    if wire.persist_disabled():
        return None
    req = parse(args)
    if req is None:
        return None
    fleet = wire.fleet_file(req["fleet"])
    if fleet is None:
        return None
    try:
        directory = wire.holder_dir(create=False)
        key = wire.holder_key(fleet, fleet.read_bytes(), req["keyed"])
        sock = wire.connect(wire.socket_path(directory, key))
    except (OSError, wire.WireError):
        return None
    request = {
        "op": "run",
        "select": req["select"],
        "argv": req["argv"],
        "env": None,
        "timeout": req["timeout"],
        "stream": not req["json"],
        "end_on_timeout": True,
    }
    with sock:
        try:
            wire.send(sock, request)
            return _receive(sock, req)
        except KeyboardInterrupt:  # as click does; the holder ends the commands when we go
            sys.stderr.write("Aborted!\n")
            return 1
        except (OSError, wire.WireError) as exc:
            _lost(f"lost the holder before it accepted the command: {exc}")
            return None


def _lost(why: str) -> None:
    """Say quietly (in the holder directory's warm.log) why the full CLI takes over."""
    try:
        import os
        import time

        with open(wire.holder_dir(create=False) / "warm.log", "a") as f:
            f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} pid {os.getpid()}: {why}\n")
    except (OSError, wire.WireError):
        pass


def _receive(sock: Any, req: dict[str, Any]) -> int | None:
    results: dict[str, dict[str, Any]] = {}
    hosts: list[str] = []
    width = 0
    problem = "the holder ended the connection"
    done: dict[str, Any] = {}
    out, err = sys.stdout, sys.stderr
    try:
        for doc in wire.frames(sock):
            kind = doc.get("t")
            if kind == "line":
                stream = err if doc["s"] == "stderr" else out
                stream.write(f"{doc['h']:<{width}} | {doc['l']}\n")
                stream.flush()
            elif kind == "result":
                results[doc["r"]["host"]] = doc["r"]
            elif kind == "accepted":
                hosts = [str(h) for h in doc["hosts"]]
                width = max((len(h) for h in hosts), default=0)
            elif kind == "done":
                done = doc
                break
            elif kind == "error":
                problem = str(doc.get("message"))
                break
    except (OSError, wire.WireError) as exc:
        problem = f"lost the holder mid-operation: {exc}"
    if not hosts:
        _lost(f"the holder did not take the command: {problem}")
        return None
    argv = list(req["argv"])
    for h in hosts:
        if h not in results:
            results[h] = {"host": h, "argv": argv, "exit_code": None, "error": problem, "error_kind": "connect"}
    ordered = [results[h] for h in hosts]
    # Result (a dataclass: dataclasses imports inspect and ast) only when a failure or --json needs it.
    all_ok = all(r.get("error") is None and r.get("exit_code") == 0 for r in ordered)
    if req["json"] or not all_ok:
        from orchestrator.result import Result

        full = {
            r["host"]: Result(
                host=r["host"],
                argv=tuple(r["argv"]),
                exit_code=r["exit_code"],
                stdout=r.get("stdout") or "",
                stderr=r.get("stderr") or "",
                elapsed=float(r.get("elapsed") or 0.0),
                error=r.get("error"),
                error_kind=r.get("error_kind"),
            )
            for r in ordered
        }
        if req["json"]:
            doc = {"schema_version": 1, "argv": argv, "results": [r.to_dict() for r in full.values()]}
            out.write(json.dumps(doc, indent=2) + "\n")
        else:
            _summary(full)
    elif ordered:
        slowest = max(ordered, key=lambda r: float(r.get("elapsed") or 0.0))
        err.write(f"{len(ordered)}/{len(ordered)} hosts ok (slowest {slowest['host']} {slowest['elapsed']:.2f}s)\n")
    for worker, host, fingerprint in done.get("accepted_keys") or ():
        err.write(f"orch: recorded new host key for {worker} ({host}) {fingerprint} in {done.get('known_hosts')}\n")
    return 0 if all_ok else 1


def _summary(results: dict[str, Any]) -> None:
    """cli/render.py's print_summary, without click for the common case (few failures)."""
    failed = {h: r for h, r in results.items() if r.failed}
    if len(failed) > SUMMARY_THRESHOLD:
        from orchestrator.cli.render import print_summary

        print_summary(results)
        return
    slowest = max(results.values(), key=lambda r: r.elapsed, default=None)
    line = f"{len(results) - len(failed)}/{len(results)} hosts ok"
    if slowest is not None:
        line += f" (slowest {slowest.host} {slowest.elapsed:.2f}s)"
    sys.stderr.write(line + "\n")
    for host, r in failed.items():
        sys.stderr.write(f"  FAILED {host}: {r.describe()}\n")


def exec_replayed(args: list[str]) -> int | None:
    """Run a plain `orch exec` with warm connections off on a replayed fleet record (transport/replay.py):
    its exit code, or None to take the click CLI (no whole, current record, or it names no such workers)."""
    req = parse(args)
    fleet = wire.fleet_file(req["fleet"]) if req is not None else None
    if req is None or fleet is None:
        return None
    from orchestrator.transport import replay

    try:
        record = replay.load(wire.holder_key(fleet, fleet.read_bytes(), req["keyed"]))
    except OSError:
        return None
    if record is None or not (wire.persist_disabled() or not record.ssh.persist):
        return None  # warm connections on: the CLI starts (or finds) the holder, so the next command is warm
    workers = record.select(req["select"]["lane"], req["select"]["workers"])
    if not workers or any(w.name not in record.connections for w in workers):
        return None
    from orchestrator.transport.fabric import FabricTransport

    transport = FabricTransport(
        workers,
        record.ssh,
        base_dir=record.base_dir,
        replay={w.name: record.connections[w.name] for w in workers},
        **req["keyed"],
    )
    width = max(len(w.name) for w in workers)

    def stream(host: str, kind: str, line: str) -> None:
        out = sys.stderr if kind == "stderr" else sys.stdout
        out.write(f"{host:<{width}} | {line}\n")
        out.flush()

    try:
        results = transport.run(
            req["argv"], timeout=req["timeout"], on_line=None if req["json"] else stream, end_on_timeout=True
        )
    except KeyboardInterrupt:  # as click does
        sys.stderr.write("Aborted!\n")
        return 1
    finally:
        transport.close()
    if req["json"]:
        doc = {"schema_version": 1, "argv": req["argv"], "results": [r.to_dict() for r in results.values()]}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        _summary(results)
    for worker, host, fingerprint in transport.accepted_keys:
        sys.stderr.write(
            f"orch: recorded new host key for {worker} ({host}) {fingerprint} in {transport.known_hosts_display}\n"
        )
    return 1 if any(r.failed for r in results.values()) else 0


def _leave(code: int) -> None:
    """Exit with `code` once the output is flushed, skipping the interpreter's teardown.

    A fast path has nothing left to do at exit (its connections are closed and
    it registers no exit handler), but the teardown would still collect every
    object paramiko and cryptography made: about 70 ms at 16 workers, a tenth
    of a cold command. When the output cannot be flushed (a closed pipe), the
    ordinary exit reports it.
    """
    import os

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        sys.exit(code)
    os._exit(code)


def main() -> None:
    """`orch`: the warm `exec` fast path, then a replayed one (warm connections off), else the click CLI."""
    code = exec_warm(sys.argv[1:])
    if code is None:
        code = exec_replayed(sys.argv[1:])
    if code is not None:
        _leave(code)
    from orchestrator.cli import main as cli

    cli(prog_name="orch")
