"""The launcher: one per worker, under the lane's bundle Python, before any user code.

`<bundle python> -m hostside.launcher RUN_DIR/launch.json` (started by the
supervisor) does, in this order, recording each step with timestamps in
`record.json`:

1. policy        apply the launch file's environment (the lane's runtime
                 profile, topology, orch's run variables); refuse folklore and
                 profile-forbidden variables. No frontend is imported yet.
2. import        import the lane's frontends (torch_xla, torch, jax), so the
                 slow part of start-up happens before the start barrier.
3. cache-init    the lane's compilation-cache policy: cache roots, reader or
                 writer role, the single writer's lease, evidence listeners
                 (hostside/launch_cache.py; the evidence is recorded at exit).
4. ready         tell the controller, then wait for the release (all workers
                 are released together; the release carries a wall-clock
                 instant so the start skew is measurable).
5. distributed   the lane's start-up contract: torch_xla.runtime.use_spmd()
                 before any tensor; jax.distributed.initialize(...) from the
                 plan on CPU lanes (a later call by the script is a no-op and
                 is recorded); torch.distributed reads MASTER_ADDR & co.
6. user-code     the script (runpy.run_path) or module (runpy.run_module) in
                 this process, with sys.argv as the user gave it; `import
                 orch_receipt` works there (hostside.orch_receipt, bound to
                 this record) while the rest of hostside stays off sys.path.

`record.json` is the process's receipt (orchestrator/schema/receipt.schema.json):
besides the steps it holds the versions installed and as reported by the
runtime, the version-gated capabilities present, the devices that answered
and whatever the training code recorded (backend, metrics with their
reduction). Every write is atomic (temp file + rename).

This module imports only the standard library at module level; frontends
are imported inside the functions that perform their step.
"""

from __future__ import annotations

import os
import platform
import runpy
import shutil
import socket
import sys
import time
import traceback
from typing import Any

from hostside import SCHEMA_VERSION, files, lease, receipt_facts, redact
from hostside import launch_proc as lp
from hostside.folklore import FOLKLORE_VARS as FOLKLORE
from hostside.frontends import MODULES as FRONTEND_MODULES
from hostside.rundir import CONTROLLER_LEASE_FILE

RELEASE_POLL = 0.005  # seconds between looks for the release where no bell could be made
LEASE_CHECK = 0.5  # seconds between looks at the controller lease while waiting
RELEASE_CAP = 10.0  # seconds: never wait longer than this for a release instant


class Refusal(Exception):
    """The launcher will not start the user code (a clear message, exit code 2)."""


class Record:
    """The per-process record: what the launcher did, in order, with timestamps."""

    def __init__(self, path: str, doc: dict[str, Any]):
        self.path = path
        self.data = {
            "schema_version": SCHEMA_VERSION,
            "kind": "launch-record",
            "run_id": doc["run_id"],
            "name": doc.get("name"),
            "lane": doc["lane"],
            "bundle": doc.get("bundle"),
            "platform": doc.get("platform"),
            "worker": doc["worker"],
            "worker_index": doc["index"],
            "slice": doc.get("slice"),
            "slice_id": doc.get("slice_id", 0),
            "num_slices": doc.get("num_slices", 1),
            "process_id": doc["process_id"],
            "num_processes": doc["num_processes"],
            "coordinator": doc.get("coordinator"),
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "python": platform.python_version(),
            "python_executable": sys.executable,
            "bundle_env": os.path.realpath(sys.prefix),
            "bundle_id": receipt_facts.bundle_id(),
            "interpreter": receipt_facts.interpreter(),
            "target": _recorded_target(doc["target"]),
            "phase": "starting",
            "launched_at": time.time(),
            "steps": [],
            "policy": {},
            "versions": {},
            "versions_reported": {},
            "devices": {},
            "capabilities": {},
            "training": None,
            "notes": [],
            "ready_at": None,
            "release_at": None,
            "released_at": None,
            "started_at": None,
            "exit": None,
            "finished_at": None,
        }

    def step(self, name: str, status: str, started: float, detail: str = "", **extra: Any) -> None:
        self.data["steps"].append(
            {"name": name, "status": status, "started": started, "ended": time.time(), "detail": detail, **extra}
        )
        self.save()

    def note(self, text: str) -> None:
        self.data["notes"].append({"time": time.time(), "text": text})
        self.save()

    def save(self) -> None:
        lp.write_json_atomic(self.path, self.data)


def _recorded_target(target: dict[str, Any]) -> dict[str, Any]:
    """The target as the receipt records it: the controller's redacted arguments (`shown_args`),
    or redacted here when a launch file has none."""
    shown = target.get("shown_args")
    args = shown if isinstance(shown, list) else redact.argv(target.get("args") or [], extra=())
    return {k: v for k, v in target.items() if k != "shown_args"} | {"args": args}


def _say(text: str) -> None:
    print(f"orch launcher: {text}", file=sys.stderr, flush=True)


# -- steps -------------------------------------------------------------------


def apply_policy(doc: dict[str, Any], rec: Record) -> None:
    """Set the plan's environment and refuse forbidden variables, before any frontend import."""
    t0 = time.time()
    early = sorted(m for mods in FRONTEND_MODULES.values() for m in mods if m in sys.modules)
    if early:
        raise Refusal(f"frontend(s) {', '.join(early)} imported before the runtime policy was applied")
    env = dict(doc["env"])
    # Topology a worker's login environment holds (a stale MEGASCALE_NUM_SLICES from an earlier
    # job) is removed: the plan sets every such variable it means, and no other.
    inherited = sorted(v for v in doc.get("unset", []) if v in os.environ and v not in env)
    for var in inherited:
        del os.environ[var]
    # PYTHONPATH carried hostside for this process only; the user's value comes back.
    hostside_root = os.environ.pop("ORCH_HOSTSIDE", None)
    if "PYTHONPATH" in env:
        os.environ["PYTHONPATH"] = env["PYTHONPATH"]
    else:
        os.environ.pop("PYTHONPATH", None)
    for key, value in env.items():
        os.environ[key] = value
    forbidden = {
        var: FOLKLORE.get(var, "is forbidden by the lane's runtime profile")
        for var in [*doc.get("forbid", []), *FOLKLORE]
        if var in os.environ
    }
    if forbidden:
        lines = [f"{var}={redact.value(var, os.environ[var])!r} is set: {why}" for var, why in forbidden.items()]
        origin = (
            "the lane's runtime profile"
            if any(v in env for v in forbidden)
            else "the worker's environment (its shell startup files or sshd's environment)"
        )
        raise Refusal("refusing to start: " + "; ".join(lines) + f". It comes from {origin}; unset it there.")
    rec.data["policy"] = {
        "profile": doc.get("profile"),
        "env": redact.env(env),
        "forbid": list(doc.get("forbid", [])),
        "checked_absent": sorted(set(doc.get("forbid", [])) | set(FOLKLORE)),
        "unset_inherited": inherited,
    }
    rec.step("policy", "done", t0, f"{len(env)} variables set before any frontend import")
    if hostside_root and hostside_root in sys.path:
        sys.path.remove(hostside_root)


def check_target(doc: dict[str, Any], rec: Record) -> None:
    """Refuse before the start barrier when the script is not on this worker."""
    target = doc["target"]
    if target["kind"] == "script" and not os.path.isfile(target["path"]):
        raise Refusal(
            f"script {target['path']} not found on this worker (cwd {os.getcwd()}); "
            "copy it there or launch with --workdir"
        )


def import_frontends(doc: dict[str, Any], rec: Record) -> None:
    import importlib

    for frontend in doc.get("frontends", []):
        t0 = time.time()
        for module in FRONTEND_MODULES.get(frontend, (frontend,)):
            try:
                importlib.import_module(module)
            except Exception as exc:
                rec.step(f"import {module}", "failed", t0, f"{exc.__class__.__name__}: {exc}")
                raise Refusal(
                    f"cannot import {module} under {sys.executable} "
                    f"(bundle {doc.get('bundle')}): {exc.__class__.__name__}: {exc}"
                ) from exc
        rec.step(f"import {frontend}", "done", t0)
    rec.data["versions"] = receipt_facts.installed_versions(doc.get("distributions", []))
    rec.data["versions_reported"] = receipt_facts.reported_versions()
    rec.save()


def init_caches(doc: dict[str, Any], rec: Record) -> None:
    # CACHE-INIT HOOK: the lane's compilation-cache policy, after the frontends
    # are imported and before the first computation (hostside/launch_cache.py:
    # torch_xla.runtime.initialize_cache(path, readonly=...), jax's
    # jax_compilation_cache_dir, the single writer's lease, evidence listeners).
    from hostside import launch_cache

    try:
        launch_cache.init(doc, rec)
    except launch_cache.CacheRefusal as exc:
        raise Refusal(str(exc)) from exc


def wait_for_release(doc: dict[str, Any], rec: Record) -> None:
    run_dir = doc["run_dir"]
    t0 = time.time()
    rec.data["phase"] = "ready"
    rec.data["ready_at"] = t0
    rec.save()
    lp.write_json_atomic(os.path.join(run_dir, lp.READY_FILE), {"pid": os.getpid(), "ready_at": t0})
    deadline = time.monotonic() + float(doc.get("ready_timeout", 600))
    release_path = os.path.join(run_dir, lp.RELEASE_FILE)
    stop_path = os.path.join(run_dir, lp.STOP_FILE)
    # The controller renews its lease here until the release; judged by seeing it change.
    controller = lease.Observer(lease.CONTROLLER_LEASE_TTL)
    lease_path, lease_checked = os.path.join(run_dir, CONTROLLER_LEASE_FILE), 0.0
    # Sleep on the bell that release and stop ring, made before the first look at their files (a
    # release written before it is seen by that look): 256 launchers polling every 5 ms were most
    # of two cores' load on a 256-worker local slice.
    bell_path = os.path.join(run_dir, lp.RELEASE_BELL)
    bell = files.open_bell(bell_path)
    try:
        while True:
            release = lp.read_json(release_path)
            if release:
                break
            stopped = lp.read_json(stop_path)
            if stopped:
                raise Refusal(f"stopped by orch before the release ({stopped.get('reason', 'stop')})")
            if time.monotonic() > deadline:
                raise Refusal(
                    f"never released: no start signal within {doc.get('ready_timeout', 600)}s (the controller is gone?)"
                )
            if time.monotonic() - lease_checked >= LEASE_CHECK:
                lease_checked = time.monotonic()
                if not controller.see(lp.read_json(lease_path)):
                    raise Refusal(
                        f"the controller stopped renewing its lease {controller.silent_for():.0f}s before the release "
                        f"(bound {lease.CONTROLLER_LEASE_TTL:g}s): it was killed or cannot reach this worker"
                    )
            if bell is None:
                time.sleep(RELEASE_POLL)
            else:
                files.wait_bell(bell, lease_checked + LEASE_CHECK - time.monotonic())
    finally:
        if bell is not None:
            files.close_bell(bell, bell_path)
    release_at = float(release.get("release_at") or time.time())
    delay = release_at - time.time()  # release_at is this worker's own clock (launch_ctl release)
    if delay > 0:
        time.sleep(min(delay, RELEASE_CAP))
    rec.data["release_at"] = release_at
    rec.data["released_at"] = time.time()
    rec.step("wait-release", "done", t0, "released together with every worker of the run")


def run_contract(doc: dict[str, Any], rec: Record) -> None:
    """The lane's start-up contract, before user code (and before any tensor exists)."""
    for item in doc.get("contract", []):
        action = item["action"]
        t0 = time.time()
        if action == "torch_xla.use_spmd":
            import torch_xla.runtime as xr

            xr.use_spmd()
            rec.step("spmd-init", "done", t0, "torch_xla.runtime.use_spmd() before any tensor")
        elif action == "jax.distributed.initialize":
            _jax_initialize(doc, rec, t0)
        elif action == "jax.runtime-discovery":
            rec.step(
                "distributed-init",
                "delegated",
                t0,
                "jax on TPU: the runtime discovers the slice; the script calls jax.distributed.initialize() itself",
            )
        elif action == "torch.distributed.env":
            keys = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK")
            rec.step(
                "distributed-init",
                "env",
                t0,
                "torch.distributed rendezvous via env:// (" + ", ".join(f"{k}={os.environ.get(k)}" for k in keys) + ")",
            )
        else:
            rec.step(action, "unknown", t0, "this launcher does not know the step; skipped")


def _jax_initialize(doc: dict[str, Any], rec: Record, t0: float) -> None:
    import jax
    import jax.distributed as jd

    kwargs = {
        "coordinator_address": doc["coordinator"],
        "num_processes": doc["num_processes"],
        "process_id": doc["process_id"],
    }
    jd.initialize(**kwargs)
    _bind_gloo(doc.get("address"), rec)
    original = jd.initialize

    def initialize(*args: Any, **given: Any) -> None:
        """orch's launcher already initialised jax.distributed for this process."""
        passed = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in given.items()])
        rec.note(
            f"the script called jax.distributed.initialize({passed}); the launcher already did "
            f"({kwargs['coordinator_address']}, process {kwargs['process_id']} of "
            f"{kwargs['num_processes']}), so the call was a no-op"
        )
        return None

    setattr(initialize, "__wrapped__", original)  # noqa: B010 (a function attribute mypy does not know)
    jd.initialize = initialize
    if getattr(jax, "distributed", None) is not jd:
        jax.distributed = jd
    rec.data["jax_distributed_owner"] = "launcher"
    rec.step(
        "distributed-init",
        "done",
        t0,
        f"jax.distributed.initialize(coordinator_address={kwargs['coordinator_address']!r}, "
        f"num_processes={kwargs['num_processes']}, process_id={kwargs['process_id']}); "
        "later calls by the script are no-ops",
    )


def _bind_gloo(address: str | None, rec: Record) -> None:
    """Make JAX's CPU collectives (gloo) listen on this worker's internal address.

    Left alone, gloo resolves the machine's hostname to pick its address; that
    fails where the hostname does not resolve (`enforce fail at
    .../tcp/device.cc`) and picks the wrong network on multi-homed hosts.
    """
    if not address:
        return
    try:
        from jax._src.lib import _jax

        original = _jax.make_gloo_tcp_collectives
        if getattr(original, "__orch_bound__", False):
            return

        def make_gloo_tcp_collectives(distributed_client: Any, hostname: Any = None, interface: Any = None) -> Any:
            return original(distributed_client=distributed_client, hostname=hostname or address, interface=interface)

        setattr(make_gloo_tcp_collectives, "__orch_bound__", True)  # noqa: B010
        _jax.make_gloo_tcp_collectives = make_gloo_tcp_collectives
        rec.note(f"jax CPU collectives (gloo) bound to this worker's internal address {address}")
    except Exception as exc:  # a jaxlib without this hook: gloo picks its address itself
        rec.note(f"could not bind gloo to {address}: {exc.__class__.__name__}: {exc}")


API_DIR = "api"  # in the run directory: orch_receipt.py alone, on the user processes' PYTHONPATH


def expose_receipt_api(rec: Record) -> None:
    """Make `import orch_receipt` work for the user code (bound to this receipt); hostside stays off sys.path.

    Processes the user code starts (multiprocessing's spawn, `xmp.spawn`) get a
    directory holding only orch_receipt.py on their PYTHONPATH: they can import
    it too, unbound (a receipt has one writer), and no hostside module can
    shadow one of the user's.
    """
    from hostside import orch_receipt

    orch_receipt._bind(rec)
    sys.modules.setdefault("orch_receipt", orch_receipt)
    api = os.path.join(os.path.dirname(os.path.abspath(rec.path)), API_DIR)
    os.makedirs(api, exist_ok=True)
    shutil.copyfile(orch_receipt.__file__, os.path.join(api, "orch_receipt.py"))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), api) if p)
    sys.path.append(api)  # multiprocessing's spawn hands its children the parent's sys.path
    rec.data["capabilities"] = receipt_facts.capabilities()
    rec.save()


def finish_receipt(doc: dict[str, Any], rec: Record) -> None:
    """What answered while the user code ran: devices, runtime-reported versions, the API's last records."""
    try:
        rec.data["devices"] = receipt_facts.devices(doc.get("frontends", []))
        rec.data["versions_reported"] = receipt_facts.reported_versions()
        sys.modules["hostside.orch_receipt"]._flush()
    except BaseException as exc:  # the receipt must not change the run's exit status
        rec.note(f"could not complete the receipt: {exc.__class__.__name__}: {exc}")
    rec.data["finished_at"] = time.time()


def run_user_code(doc: dict[str, Any], rec: Record) -> int:
    target = doc["target"]
    expose_receipt_api(rec)
    t0 = time.time()
    rec.data["phase"] = "running"
    rec.data["started_at"] = t0
    rec.save()
    code = 0
    try:
        if target["kind"] == "module":
            sys.argv = [target["module"], *target["args"]]
            sys.path[0] = os.getcwd()
            runpy.run_module(target["module"], run_name="__main__", alter_sys=True)
        else:
            path = target["path"]
            sys.argv = [path, *target["args"]]
            sys.path[0] = os.path.dirname(os.path.abspath(path))
            runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    finish_receipt(doc, rec)
    rec.data["phase"] = "exited"
    rec.data["exit"] = {"code": code, "signal": None, "ended_at": time.time(), "source": "launcher"}
    rec.step("user-code", "done" if code == 0 else "failed", t0, f"exit code {code}")
    return code


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    doc = lp.read_json(argv[0])
    if doc is None:
        _say(f"cannot read the launch file {argv[0]}")
        return 2
    rec = Record(os.path.join(doc["run_dir"], lp.RECORD_FILE), doc)
    rec.save()
    try:
        apply_policy(doc, rec)
        check_target(doc, rec)
        import_frontends(doc, rec)
        init_caches(doc, rec)
        wait_for_release(doc, rec)
        run_contract(doc, rec)
    except Refusal as exc:
        _say(str(exc))
        rec.data["phase"] = "exited"
        rec.data["exit"] = {
            "code": 2,
            "signal": None,
            "ended_at": time.time(),
            "source": "launcher",
            "reason": str(exc),
        }
        rec.save()
        return 2
    except BaseException as exc:
        traceback.print_exc()
        rec.data["phase"] = "exited"
        rec.data["exit"] = {
            "code": 1,
            "signal": None,
            "ended_at": time.time(),
            "source": "launcher",
            "reason": f"start-up failed before user code: {exc.__class__.__name__}: {exc}",
        }
        rec.save()
        return 1
    return run_user_code(doc, rec)


def _finish(code: int) -> None:
    """Leave with `code`; a failed process does not wait on its peers at exit."""
    from hostside import launch_cache

    launch_cache.close()  # the cache evidence into the record; the writer lease released
    sys.stdout.flush()
    sys.stderr.flush()
    if code != 0:
        # JAX's atexit shutdown waits in a barrier for every peer; a failing
        # process must not block there (orch tears the gang down instead).
        if "logging" in sys.modules:
            sys.modules["logging"].shutdown()
        os._exit(code if 0 < code < 256 else 1)
    sys.exit(0)


if __name__ == "__main__":
    _finish(main(sys.argv[1:]))
