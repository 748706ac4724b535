"""`orch deploy`: push a locked bundle to every worker of a lane and install it.

Plan, then execute. `plan_deploy` is pure: the lane's workers, the locked
wheels and the bundle id. `execute` carries it out per worker, in parallel:

1. begin: refuse if another deploy holds the lane; `unchanged` if the bundle
   is already active; otherwise take the lane's lock and list missing wheels.
2. transfer: the controller sends each missing wheel once, to a seed worker;
   the others fetch from the seed over the slice network (falling back to a
   direct push). Every file is checked by sha256 on arrival.
3. install: an offline environment per bundle id (uv, hashes required),
   verified against the lock.
4. activate: only then swap the lane's active pointer and record a receipt.

A worker where any step fails keeps its previous bundle and releases its lock.
While the deploy holds locks, a background thread refreshes their heartbeat
(an SFTP upload runs no hostside code that could), and the workers refuse to
install or activate for a deploy whose lock another one has since taken.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostside.deploy import describe_holder
from orchestrator.bundle import CachedWheel, Lock
from orchestrator.errors import BundleError
from orchestrator.fleet import Fleet, WorkerRef
from orchestrator.remote import job_document, run_hostside
from orchestrator.transport import Result, Transport

STALE_AFTER = 300.0  # seconds without a heartbeat before a deploy lock counts as dead
HEARTBEAT_EVERY = 60.0  # seconds between refreshes of our locks' heartbeat
HEARTBEAT_TIMEOUT = 60.0  # a timed-out call drops the worker's connection (and any upload on it): be patient


@dataclass(frozen=True)
class DeployPlan:
    """What a deploy will do: pure data, printed by --dry-run."""

    lane: str
    bundle: str
    bundle_id: str
    lock_digest: str
    python: str
    workers: tuple[WorkerRef, ...]
    wheels: tuple[CachedWheel, ...]
    uv: CachedWheel
    relay: bool = True

    @property
    def bundle_bytes(self) -> int:
        return sum(w.size for w in self.wheels) + self.uv.size

    def to_dict(self) -> dict[str, Any]:
        return {
            "lane": self.lane,
            "bundle": self.bundle,
            "bundle_id": self.bundle_id,
            "lock_digest": self.lock_digest,
            "python": self.python,
            "relay": self.relay,
            "workers": [
                {
                    "name": w.name,
                    "host": w.host,
                    "env": f"{w.root}/envs/{self.bundle_id}",
                    "active": f"{w.root}/lanes/{self.lane}/active",
                }
                for w in self.workers
            ],
            "wheels": [w.request() for w in self.wheels],
            "installer": self.uv.request(),
            "bundle_bytes": self.bundle_bytes,
        }


@dataclass
class WorkerOutcome:
    """How the deploy ended on one worker."""

    worker: str
    status: str = "pending"  # installed | unchanged | failed
    reason: str | None = None
    bytes_from_controller: int = 0
    bytes_from_peer: int = 0
    recovered_lock: dict[str, Any] | None = None
    previous: str | None = None
    elapsed: float = 0.0
    phases: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class DeployReport:
    plan: DeployPlan
    outcomes: dict[str, WorkerOutcome]
    seed: str | None = None
    relay_used: bool = False
    elapsed: float = 0.0

    @property
    def ok(self) -> bool:
        return all(o.status in ("installed", "unchanged") for o in self.outcomes.values())

    @property
    def controller_bytes(self) -> int:
        return sum(o.bytes_from_controller for o in self.outcomes.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "lane": self.plan.lane,
            "bundle": self.plan.bundle,
            "bundle_id": self.plan.bundle_id,
            "ok": self.ok,
            "seed": self.seed,
            "relay_used": self.relay_used,
            "controller_bytes": self.controller_bytes,
            "bundle_bytes": self.plan.bundle_bytes,
            "elapsed": round(self.elapsed, 3),
            "workers": {n: o.to_dict() for n, o in self.outcomes.items()},
        }


Progress = Callable[[str, str], None]  # (worker, phase)


# ---------------------------------------------------------------------------
# plan


def plan_deploy(
    fleet: Fleet, lane: str, *, relay: bool = True, lock: Lock | None = None, fetch: bool = True
) -> DeployPlan:
    """Read the lane's bundle lock and list what every worker should end up with.

    With `fetch`, wheels missing from the controller's cache are fetched from
    the lock's recorded sources (a fresh checkout with committed locks)."""
    from orchestrator import bundle as bundles

    lane_model = fleet.lane(lane)
    spec = fleet.bundle(lane_model.bundle)
    lock_path = fleet.lock_path(lane_model.bundle)
    if lock is None:
        if not lock_path.exists():
            raise BundleError(
                f"bundle '{lane_model.bundle}' has no lock at {lock_path}", hint=f"orch bundle lock {lane_model.bundle}"
            )
        lock = bundles.read_lock(lock_path)
    if fetch:
        bundles.fetch_wheels(lock, fleet.base_dir)
    wheels = tuple(
        CachedWheel(
            name=w.name,
            version=w.version,
            filename=w.filename,
            sha256=w.sha256,
            size=w.size,
            path=bundles.cached_wheel_path(w),
        )
        for w in lock.wheels
    )
    return DeployPlan(
        lane=lane,
        bundle=lane_model.bundle,
        bundle_id=lock.bundle_id,
        lock_digest=lock.digest,
        python=spec.python,
        workers=tuple(fleet.lane_workers(lane)),
        wheels=wheels,
        uv=installer_wheel(),
        relay=relay,
    )


def installer_wheel() -> CachedWheel:
    """The uv wheel that installs bundles on workers: the controller's own uv
    version, cached once. uv is a wheel with a static binary inside, so it
    travels to workers like any bundle wheel."""
    from orchestrator import bundle as bundles

    return bundles.tool_wheel("uv")


# ---------------------------------------------------------------------------
# execute


def execute(plan: DeployPlan, transport: Transport, *, progress: Progress | None = None) -> DeployReport:
    """Carry out a deploy plan; never raises for a single worker's failure."""
    start = time.monotonic()
    say = progress or (lambda worker, phase: None)
    missing_local = [w for w in (*plan.wheels, plan.uv) if not w.path.exists() or w.path.stat().st_size != w.size]
    if missing_local:
        raise BundleError(
            f"the controller's wheel cache lacks {', '.join(w.filename for w in missing_local)}",
            hint=f"orch bundle fetch {plan.bundle} (or orch bundle lock {plan.bundle})",
        )
    token = secrets.token_hex(8)
    holder = {
        "token": token,
        "controller": socket.gethostname(),
        "pid": os.getpid(),
        "user": getpass.getuser(),
        "bundle_id": plan.bundle_id,
        "started": time.time(),
        "liveness": str(_liveness_path(token)),
    }
    job = _Deploy(plan, transport, holder, say)
    with _liveness(token):
        try:
            with _Heartbeat(job.beat, HEARTBEAT_EVERY):
                job.run()
        finally:
            job.release_all()
    report = DeployReport(
        plan=plan, outcomes=job.outcomes, seed=job.seed, relay_used=job.relay_used, elapsed=time.monotonic() - start
    )
    return report


class _Deploy:
    def __init__(self, plan: DeployPlan, transport: Transport, holder: dict[str, Any], say: Progress):
        self.plan, self.t, self.holder, self.say = plan, transport, holder, say
        self.workers = {w.name: w for w in plan.workers}
        self.outcomes = {w.name: WorkerOutcome(worker=w.name) for w in plan.workers}
        self.locked: set[str] = set()
        self.seed: str | None = None
        self.relay_used = False
        self.all_wheels = {w.sha256: w for w in (*plan.wheels, plan.uv)}
        self.needs: dict[str, list[dict[str, Any]]] = {}
        self.free: dict[str, int | None] = {}  # disk_free_bytes under the root, as begin saw it
        self.lost: dict[str, dict[str, Any] | None] = {}  # worker -> who holds our lock now (from a heartbeat)

    # -- plumbing --------------------------------------------------------

    def _base(self, w: WorkerRef) -> dict[str, Any]:
        return {
            "root": w.root,
            "lane": self.plan.lane,
            "bundle_id": self.plan.bundle_id,
            "bundle": self.plan.bundle,
            "holder": self.holder,
        }

    def call(
        self, w: WorkerRef, action: str, extra: dict[str, Any] | None = None, timeout: float = 600
    ) -> dict[str, Any]:
        """Run one hostside deploy action; returns its document or raises _Failed."""
        req = {**self._base(w), **(extra or {})}
        res = run_hostside(self.t, w, "deploy", [action], stdin=json.dumps(req), timeout=timeout)
        if res.error:
            raise _Failed(f"{action}: {res.error}")
        try:
            doc = job_document(res)
        except Exception:
            raise _Failed(f"{action}: {res.describe()}") from None
        if not doc.get("ok"):
            raise _Failed(doc.get("error") or f"{action} failed")
        return doc

    def fail(self, name: str, reason: str) -> None:
        o = self.outcomes[name]
        if o.status != "failed":
            o.status, o.reason = "failed", reason
            self.say(name, f"failed: {reason}")

    def alive(self) -> list[WorkerRef]:
        return [w for n, w in self.workers.items() if self.outcomes[n].status == "pending"]

    def each(self, phase: str, fn: Callable[[WorkerRef], None], workers: Iterable[WorkerRef]) -> None:
        def guarded(w: WorkerRef) -> Result:
            t0 = time.monotonic()
            try:
                fn(w)
            except _Failed as exc:
                self.fail(w.name, str(exc))
            except Exception as exc:
                self.fail(w.name, f"{exc.__class__.__name__}: {exc}")
            took = time.monotonic() - t0
            o = self.outcomes[w.name]
            o.elapsed += took
            o.phases[phase] = round(o.phases.get(phase, 0.0) + took, 3)
            return Result(host=w.name, argv=(), exit_code=0)

        self.t.map(guarded, [w.name for w in workers])

    # -- steps -------------------------------------------------------------

    def run(self) -> None:
        self.each("begin", self.begin, self.alive())
        need = {n: m for n, m in self.needs.items() if self.outcomes[n].status == "pending"}
        if any(need.values()):
            self.transfer(need)
        self.each("install", self.install_and_activate, self.alive())

    def begin(self, w: WorkerRef) -> None:
        self.say(w.name, "checking")
        wheels = [x.request() for x in (*self.plan.wheels, self.plan.uv)]
        doc = self.call(w, "begin", {"wheels": wheels, "stale_after": STALE_AFTER}, timeout=60)
        if doc["state"] == "locked" and _holder_is_dead(doc["holder"]):
            doc = self.call(
                w,
                "begin",
                {"wheels": wheels, "stale_after": STALE_AFTER, "steal": [doc["holder"].get("token")]},
                timeout=60,
            )
        o = self.outcomes[w.name]
        o.recovered_lock = doc.get("recovered_lock")
        if doc["state"] == "locked":
            h = doc["holder"] or {}
            raise _Failed(
                f"another deploy holds lane {self.plan.lane}: {h.get('user', '?')}@"
                f"{h.get('controller', '?')} pid {h.get('pid', '?')} (bundle {h.get('bundle_id', '?')}, "
                f"heartbeat {doc.get('heartbeat_age', '?')}s ago)"
            )
        if doc["state"] == "unchanged":
            o.status = "unchanged"
            self.say(w.name, "unchanged")
            return
        self.locked.add(w.name)
        o.previous = doc.get("active")
        self.needs[w.name] = doc["missing"]
        self.free[w.name] = doc.get("disk_free_bytes")
        nbytes = sum(x["size"] for x in doc["missing"])
        if not self.fits(w.name, nbytes):
            raise _Failed(self.no_space(w, nbytes))
        self.say(w.name, f"needs {len(doc['missing'])} wheel(s)" if doc["missing"] else "wheels present")

    def fits(self, name: str, nbytes: int) -> bool:
        """Whether `nbytes` more (plus headroom) fit under the worker's root."""
        free = self.free.get(name)
        return free is None or nbytes == 0 or nbytes + disk_headroom(nbytes) <= free

    def no_space(self, w: WorkerRef, nbytes: int) -> str:
        need, headroom = _mib(nbytes + disk_headroom(nbytes)), _mib(disk_headroom(nbytes))
        return (
            f"not enough disk space: needs {need} MiB ({_mib(nbytes)} MiB of wheels + {headroom} MiB "
            f"headroom), {(self.free[w.name] or 0) // 2**20} MiB free under {w.root}"
        )

    def transfer(self, need: dict[str, list[dict[str, Any]]]) -> None:
        candidates = sorted(need, key=lambda n: (-len(need[n]), self.workers[n].index))
        union = {w["sha256"] for m in need.values() for w in m}
        others = [n for n in need if need[n]]
        # The seed gets everything anyone lacks, straight from the controller,
        # so it must have room for all of it.
        seed_missing = [self.all_wheels[s] for s in sorted(union)]
        seeds = [n for n in candidates if self.fits(n, sum(x.size for x in seed_missing))]
        seed = seeds[0] if seeds else None
        if seed is not None:
            self.each("push", lambda w: self.push(w, seed_missing), [self.workers[seed]])
        if seed is None or self.outcomes[seed].status != "pending":
            others = [n for n in others if n != seed]
            self.each(
                "push",
                lambda w: self.push(w, [self.all_wheels[x["sha256"]] for x in need[w.name]]),
                [self.workers[n] for n in others],
            )
            return
        self.seed = seed
        others = [n for n in others if n != seed]
        if not others:
            return
        url = self.serve(self.workers[seed]) if self.plan.relay else None
        try:

            def fetch(w: WorkerRef) -> None:
                wanted = [self.all_wheels[x["sha256"]] for x in need[w.name]]
                failed = wanted
                if url:
                    self.say(w.name, f"fetching {len(wanted)} wheel(s) from {seed}")
                    doc = self.call(w, "fetch", {"url": url, "wheels": [x.request() for x in wanted]}, timeout=1800)
                    self.outcomes[w.name].bytes_from_peer += doc["bytes"]
                    bad = {f["filename"] for f in doc["failed"]}
                    failed = [x for x in wanted if x.filename in bad]
                    if doc["fetched"]:
                        self.relay_used = True
                if failed:
                    self.push(w, failed)  # fallback: straight from the controller

            self.each("fetch", fetch, [self.workers[n] for n in others])
        finally:
            if url:
                try:
                    self.call(self.workers[seed], "stop-serve", {"token": self.holder["token"]}, timeout=30)
                except _Failed:
                    pass

    def serve(self, seed: WorkerRef) -> str | None:
        try:
            doc = self.call(
                seed,
                "serve",
                {"token": self.holder["token"], "lifetime": 1800, "bind": seed.internal_address},
                timeout=30,
            )
        except _Failed as exc:
            self.say(seed.name, f"cannot serve wheels to peers ({exc}); pushing directly")
            return None
        return f"http://{seed.internal_address}:{doc['port']}/{self.holder['token']}"

    def push(self, w: WorkerRef, wheels: list[CachedWheel]) -> None:
        """Send wheels from the controller over SFTP, then have the worker verify them."""
        incoming = f"{w.root}/store/sha256/.incoming"
        mk = self.t.run_one(w.name, ["mkdir", "-p", incoming], timeout=60)
        if not mk.ok:
            raise _Failed(f"cannot create {incoming}: {mk.describe()}")
        files = []
        for i, wheel in enumerate(wheels, 1):
            self.check_lock(w)
            self.say(w.name, f"pushing {i}/{len(wheels)} {wheel.filename}")
            remote = f"{incoming}/{wheel.sha256[:16]}.{self.holder['token']}.part"
            res = self.t.put_one(w.name, wheel.path, remote)
            if not res.ok:
                self.t.run_one(w.name, ["rm", "-f", remote], timeout=30)
                raise _Failed(f"upload of {wheel.filename} failed: {res.describe()}")
            self.outcomes[w.name].bytes_from_controller += wheel.size
            files.append({**wheel.request(), "path": remote})
        doc = self.call(w, "receive", {"files": files}, timeout=600)
        if doc["bad"]:
            raise _Failed("; ".join(f"{b['filename']}: {b['reason']}" for b in doc["bad"]))

    def install_and_activate(self, w: WorkerRef) -> None:
        self.check_lock(w)
        self.say(w.name, "installing")
        doc = self.call(
            w,
            "install",
            {
                "wheels": [x.request() for x in self.plan.wheels],
                "uv": self.plan.uv.request(),
                "python": self.plan.python,
                "lock_digest": self.plan.lock_digest,
            },
            timeout=1800,
        )
        self.outcomes[w.name].phases["env_build"] = doc.get("elapsed")
        self.say(w.name, "activating")
        doc = self.call(w, "activate", {"lock_digest": self.plan.lock_digest}, timeout=60)
        self.locked.discard(w.name)
        o = self.outcomes[w.name]
        o.status, o.previous = "installed", doc.get("previous")
        self.say(w.name, "installed")

    def check_lock(self, w: WorkerRef) -> None:
        """Stop early on a worker whose lock a heartbeat found taken (the worker
        itself refuses to install or activate for us then)."""
        if w.name in self.lost:
            raise _Failed(
                f"this deploy no longer holds lane {self.plan.lane}'s deploy lock "
                f"({describe_holder(self.lost[w.name])}); the previous bundle stays active"
            )

    def beat(self) -> None:
        """Refresh the heartbeat of our lock on every worker still in progress.

        Runs beside the steps on the same connections: each call is its own SSH
        channel, and it never uses the transport's worker pool, which long
        uploads and installs may fill. Daemon threads, so a beat stuck on a
        hung worker never holds up the controller's exit."""
        names = [n for n in sorted(self.locked.copy()) if self.outcomes[n].status == "pending"]
        gate = threading.BoundedSemaphore(8)

        def one(name: str) -> None:
            with gate:
                self.beat_one(name)

        threads = [threading.Thread(target=one, args=(n,), name=f"orch-heartbeat-{n}", daemon=True) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def beat_one(self, name: str) -> None:
        try:
            doc = self.call(self.workers[name], "heartbeat", timeout=HEARTBEAT_TIMEOUT)
        except Exception:
            return  # unreachable now: the step in flight there reports why
        if not doc.get("refreshed") and name in self.locked:
            self.lost[name] = doc.get("holder")

    def release_all(self) -> None:
        """Release our lock on every worker that still holds it (failures included)."""

        def release(w: WorkerRef) -> Result:
            try:
                self.call(w, "unlock", timeout=30)
            except Exception:
                pass
            return Result(host=w.name, argv=(), exit_code=0)

        if self.locked:
            self.t.map(release, list(self.locked))
            self.locked.clear()


class _Failed(Exception):
    pass


def disk_headroom(nbytes: int) -> int:
    """Bytes a worker must have free beyond the `nbytes` of wheels it receives
    (the environment needs room too; running out there is caught as well)."""
    return 16 * 2**20 + nbytes // 10


def _mib(nbytes: int) -> int:
    return -(-nbytes // 2**20)  # rounded up


class _Heartbeat:
    """Calls `beat` every `every` seconds from a daemon thread while the `with`
    block runs, and stops when it ends (on failure and Ctrl-C too)."""

    def __init__(self, beat: Callable[[], None], every: float):
        self.beat, self.every = beat, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="orch-deploy-heartbeat", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.beat()
            except Exception:  # a missed beat is retried on the next one
                pass

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        # A beat in flight is harmless after this: the worker refreshes only a
        # lock that still carries our token, under the lane's mutex.
        self._thread.join(timeout=5)


def _liveness_path(token: str) -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "orch" / "deploys" / f"{token}.lock"


class _liveness:
    """While a deploy runs, it holds an flock on a file named by its lock token on
    the controller; the kernel drops it when the process dies, so a later deploy
    from this host can tell a dead holder from a live one exactly."""

    def __init__(self, token: str):
        self.path = _liveness_path(token)

    def __enter__(self) -> _liveness:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open(self.path, "w")
        fcntl.flock(self.fh, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        self.path.unlink(missing_ok=True)
        self.fh.close()


def _holder_is_dead(holder: dict[str, Any] | None) -> bool:
    """A lock taken from this controller host by a deploy that is no longer running.

    The holder's liveness file is exact proof: flock'd while it runs, removed
    when it ends. The lock names that file (it may live under another user's
    home or XDG_STATE_HOME); a lock from an older controller does not, so ours
    stands in for it. When the file cannot be seen (not there for a lock that
    does not name it, or unreadable), only a vanished pid proves the holder
    dead; a live pid leaves it to the heartbeat."""
    import fcntl

    token = str(holder.get("token") or "") if holder else ""
    if not holder or holder.get("controller") != socket.gethostname() or not re.fullmatch(r"[0-9a-f]+", token):
        return False
    named = _named_liveness(holder, token)
    path = named or _liveness_path(token)
    try:
        fh = open(path)
    except FileNotFoundError:
        return True if named else _pid_is_gone(holder.get("pid"))
    except OSError:
        return _pid_is_gone(holder.get("pid"))
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass
    return True


def _named_liveness(holder: dict[str, Any], token: str) -> Path | None:
    """The liveness file a lock names, if it has the shape `_liveness_path` gives
    (a lock file is worker data: never let it point us at another file)."""
    named = holder.get("liveness")
    if not isinstance(named, str):
        return None
    path = Path(named)
    if (
        path.is_absolute()
        and ".." not in path.parts
        and path.name == f"{token}.lock"
        and path.parent.parts[-2:] == ("orch", "deploys")
    ):
        return path
    return None


def _pid_is_gone(pid: object) -> bool:
    """Whether no process with this pid exists on this host."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # another user's process
    except OverflowError:
        return False  # not a pid; the heartbeat decides
    return False


# ---------------------------------------------------------------------------
# rollback and status


def rollback(fleet: Fleet, lane: str, transport: Transport) -> dict[str, dict[str, Any]]:
    """Re-activate the previous bundle on every worker of the lane."""

    def one(w: WorkerRef) -> Result:
        req = {"root": w.root, "lane": lane}
        return run_hostside(transport, w, "deploy", ["rollback"], stdin=json.dumps(req), timeout=60)

    return {n: _doc_or_error(r) for n, r in transport.map(one, [w.name for w in fleet.lane_workers(lane)]).items()}


def status(fleet: Fleet, transport: Transport, lanes: list[str]) -> dict[str, dict[str, Any]]:
    """Active/previous bundle per worker and lane, as the workers report it."""
    members = {ln: set(fleet.lane_members[ln]) for ln in lanes}
    names = sorted({n for m in members.values() for n in m}, key=lambda n: fleet.worker(n).index)

    def one(w: WorkerRef) -> Result:
        mine = [ln for ln in lanes if w.name in members[ln]]
        req = {"root": w.root, "lanes": mine}
        return run_hostside(transport, w, "deploy", ["status"], stdin=json.dumps(req), timeout=60)

    return {n: _doc_or_error(r) for n, r in transport.map(one, names).items()}


def _doc_or_error(res: Result) -> dict[str, Any]:
    if res.error:
        return {"ok": False, "error": res.error, "error_kind": res.error_kind}
    try:
        return job_document(res)
    except Exception as exc:
        return {"ok": False, "error": str(exc)}


def disagreements(
    fleet: Fleet, statuses: dict[str, dict[str, Any]], lanes: list[str]
) -> dict[str, dict[str, list[str]]]:
    """Per lane, {bundle_id: [workers]} when a lane's workers disagree (a mixed stack inside a lane)."""
    out = {}
    for ln in lanes:
        seen: dict[str, list[str]] = {}
        for name in fleet.lane_members[ln]:
            doc = statuses.get(name, {})
            active = (doc.get("lanes") or {}).get(ln, {}).get("active") if doc.get("ok") else "unreachable"
            seen.setdefault(active or "none", []).append(name)
        if len(seen) > 1:
            out[ln] = seen
    return out
