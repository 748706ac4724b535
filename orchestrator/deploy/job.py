"""Carrying out a deploy plan: `execute` and the per-worker steps (begin,
transfer of missing wheels through a seed worker, install, activate), with the
lane's lock held and kept fresh throughout."""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from hostside.deploy import describe_holder
from hostside.deploy_lock import renew_argv
from orchestrator.bundle import CachedWheel
from orchestrator.deploy.lane_lock import (
    HEARTBEAT_EVERY,
    HEARTBEAT_TIMEOUT,
    LOCK_REFRESH_EVERY,
    STALE_AFTER,
    _Heartbeat,
    _holder_is_dead,
    _liveness,
    controller_identity,
)
from orchestrator.deploy.plan import DeployPlan, DeployReport, Progress, WorkerOutcome
from orchestrator.errors import BundleError
from orchestrator.fleet import WorkerRef
from orchestrator.remote import disk_failure, job_document, run_hostside, step_failure
from orchestrator.transport import Result, Transport


def execute(plan: DeployPlan, transport: Transport, *, progress: Progress | None = None) -> DeployReport:
    """Carry out a deploy plan; never raises for a single worker's failure."""
    start = time.monotonic()
    say = progress or (lambda worker, phase: None)
    missing_local = [w for w in plan.files if not w.path.exists() or w.path.stat().st_size != w.size]
    if missing_local:
        raise BundleError(
            f"the controller's wheel cache lacks {', '.join(w.filename for w in missing_local)}",
            hint=f"orch bundle lock {plan.bundle} (resolves again and fetches every wheel into the cache)",
        )
    token = secrets.token_hex(8)
    holder = controller_identity(token, plan.bundle_id)
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


# The steps that work on a worker it was reached for (after the lock): one cut short is named as such.
STEPS = frozenset({"fetch", "receive", "install", "activate"})


class _Deploy:
    def __init__(self, plan: DeployPlan, transport: Transport, holder: dict[str, Any], say: Progress):
        self.plan, self.t, self.holder, self.say = plan, transport, holder, say
        self.workers = {w.name: w for w in plan.workers}
        self.outcomes = {w.name: WorkerOutcome(worker=w.name) for w in plan.workers}
        self.locked: set[str] = set()
        self.seed: str | None = None
        self.relay_used = False
        self.all_wheels = {w.sha256: w for w in plan.files}
        self.needs: dict[str, list[dict[str, Any]]] = {}
        self.free: dict[str, int | None] = {}  # disk_free_bytes under the root, as begin saw it
        self.lost: dict[str, dict[str, Any] | None] = {}  # worker -> who holds our lock now (from a heartbeat)
        self.beating: set[str] = set()  # workers with a heartbeat call in flight
        self.beating_guard = threading.Lock()
        self.beats = 0  # beat() calls so far: the controller lease's renewal count

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

        def failed() -> _Failed:
            if w.name in self.locked and action in STEPS:  # a step cut short says so (connection lost, or killed)
                return _Failed(step_failure(self.t, w, action, res))
            return _Failed(f"{action}: {res.describe()}")

        if res.error:
            raise failed()
        try:
            doc = job_document(res)
        except Exception:
            raise failed() from None
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
        # All or nothing: the lane's first worker is locked before any other, so
        # of two racing deploys the loser is refused there before it touches
        # anything; a refusal anywhere stops the deploy on every worker.
        gate, *rest = sorted(self.workers.values(), key=lambda w: w.index)
        self.each("begin", self.begin, [gate])
        if self.outcomes[gate.name].status != "failed":
            self.each("begin", self.begin, rest)
        refused = [n for n, o in self.outcomes.items() if o.status == "failed"]
        if refused:
            first = refused[0]
            for name, o in self.outcomes.items():
                if o.status != "failed":
                    o.status = "failed"
                    o.reason = (
                        f"not deployed: lane {self.plan.lane} could not be locked on every worker "
                        f"({first}: {self.outcomes[first].reason})"
                    )
                    self.say(name, f"failed: {o.reason}")
            return
        need = {n: m for n, m in self.needs.items() if self.outcomes[n].status == "pending"}
        if any(need.values()):
            self.transfer(need)
        # Two phases, so the lane switches on every worker or on none: every worker builds its
        # environment first; only when all of them have one does any worker switch to it.
        self.each("install", self.install, self.alive())
        ready = self.alive()
        failed = [n for n, o in self.outcomes.items() if o.status == "failed"]
        if failed:
            self.hold_back(ready, failed[0])
            return
        self.each("activate", self.activate, ready)
        switched = [w for w in ready if self.outcomes[w.name].status == "installed"]
        failed = [n for n, o in self.outcomes.items() if o.status == "failed"]
        if failed and switched:
            self.each("activate", self.undo, switched)

    def begin(self, w: WorkerRef) -> None:
        self.say(w.name, "checking")
        wheels = [x.request() for x in self.plan.files]
        ask = {"wheels": wheels, "stale_after": STALE_AFTER, "python": self.plan.python}
        if self.plan.interpreter is not None:
            ask["interpreter"] = self.plan.interpreter.request()
        doc = self.call(w, "begin", ask, timeout=60)
        if doc["state"] == "locked" and _holder_is_dead(doc["holder"]):
            doc = self.call(w, "begin", {**ask, "steal": [doc["holder"].get("token")]}, timeout=60)
        o = self.outcomes[w.name]
        o.recovered_lock = doc.get("recovered_lock")
        if doc["state"] == "locked":
            h = doc["holder"] or {}
            if "token" not in h:  # null, [], a non-numeric heartbeat...: nobody can renew or release it
                age = float(doc.get("heartbeat_age") or 0.0)
                raise _Failed(
                    f"lane {self.plan.lane}'s deploy lock file is damaged ({h.get('reason', 'unreadable')}); "
                    f"it counts as stale {max(STALE_AFTER - age, 0):.0f}s from now, or remove "
                    f"{w.root}/lanes/{self.plan.lane}/deploy.lock if no deploy runs"
                )
            raise _Failed(
                f"another deploy holds lane {self.plan.lane}: {h.get('user', '?')}@"
                f"{h.get('controller', '?')} pid {h.get('pid', '?')} (bundle {h.get('bundle_id', '?')}, "
                f"heartbeat {doc.get('heartbeat_age', '?')}s ago)"
            )
        self.locked.add(w.name)  # held until the deploy ends, also where nothing changes
        if doc["state"] == "unchanged":
            o.status = "unchanged"
            self.say(w.name, "unchanged")
            return
        o.previous = doc.get("active")
        missing = doc.get("missing")
        # The worker's reply names wheels by sha256: only wheels of this bundle, never a KeyError later.
        if not isinstance(missing, list) or not all(
            isinstance(x, dict) and isinstance(x.get("sha256"), str) and x["sha256"] in self.all_wheels for x in missing
        ):
            raise _Failed(f"begin: the worker's list of missing wheels names wheels not in bundle {self.plan.bundle}")
        self.needs[w.name] = missing
        self.free[w.name] = doc.get("disk_free_bytes")
        nbytes = sum(self.all_wheels[x["sha256"]].size for x in missing)
        if not self.fits(w.name, nbytes):
            raise _Failed(self.no_space(w, nbytes))
        self.say(w.name, f"needs {len(missing)} wheel(s)" if missing else "wheels present")

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
                left = sum(x.size for x in wheels[i - 1 :])
                res = disk_failure(self.t, w, res, incoming, left, f"upload {wheel.filename} to {incoming}", 30)
                raise _Failed(
                    res.error if res.error_kind == "disk" else f"upload of {wheel.filename} failed: {res.describe()}"
                )
            self.outcomes[w.name].bytes_from_controller += wheel.size
            files.append({**wheel.request(), "path": remote})
        doc = self.call(w, "receive", {"files": files}, timeout=600)
        if doc["bad"]:
            raise _Failed("; ".join(f"{b['filename']}: {b['reason']}" for b in doc["bad"]))

    def install(self, w: WorkerRef) -> None:
        """Build the bundle's environment on the worker; the lane's active bundle stays as it is."""
        self.check_lock(w)
        self.say(w.name, "installing")
        doc = self.call(
            w,
            "install",
            {
                "wheels": [x.request() for x in self.plan.wheels],
                "uv": self.plan.uv.request(),
                "python": self.plan.python,
                "interpreter": self.plan.interpreter.request() if self.plan.interpreter else None,
                "lock_digest": self.plan.lock_digest,
            },
            timeout=1800,
        )
        self.outcomes[w.name].phases["env_build"] = doc.get("elapsed")
        if doc.get("rebuilt"):
            self.outcomes[w.name].rebuilt = str(doc["rebuilt"])
            self.say(w.name, f"rebuilt an incomplete environment ({doc['rebuilt']})")
        self.say(w.name, "built, waiting for every worker")

    def hold_back(self, ready: list[WorkerRef], first: str) -> None:
        """Some worker could not build the environment: no worker switches."""
        for w in ready:
            self.fail(
                w.name,
                f"not switched: {first} failed ({self.outcomes[first].reason}), so the lane keeps its "
                "previous bundle on every worker (this worker's environment is built and kept: the next "
                "deploy reuses it)",
            )

    def activate(self, w: WorkerRef) -> None:
        """Switch the worker's lane to the bundle, keeping the lock until every worker has switched."""
        self.check_lock(w)
        self.say(w.name, "activating")
        doc = self.call(w, "activate", {"lock_digest": self.plan.lock_digest, "keep_lock": True}, timeout=60)
        o = self.outcomes[w.name]
        o.status, o.previous = "installed", doc.get("previous")
        self.say(w.name, "installed")

    def undo(self, w: WorkerRef) -> None:
        """Another worker failed to switch: switch this one back to its previous bundle."""
        first = next(n for n, o in self.outcomes.items() if o.status == "failed")
        o = self.outcomes[w.name]
        try:
            self.call(w, "rollback", timeout=60)
        except _Failed as exc:
            o.status = "failed"
            o.reason = f"switched, and could not be switched back after {first} failed to switch: {exc}"
        else:
            o.status = "failed"
            o.reason = f"switched back to {o.previous or 'its previous bundle'}: {first} failed to switch"
        self.locked.discard(w.name)  # rollback released it
        self.say(w.name, f"failed: {o.reason}")

    def check_lock(self, w: WorkerRef) -> None:
        """Stop early on a worker whose lock a heartbeat found taken (the worker
        itself refuses to install or activate for us then)."""
        if w.name in self.lost:
            raise _Failed(
                f"this deploy no longer holds lane {self.plan.lane}'s deploy lock "
                f"({describe_holder(self.lost[w.name])}); the previous bundle stays active"
            )

    def beat(self) -> None:
        """Renew the controller lease on every worker that holds our lock.

        The workers' long actions and the relay end themselves when it stops.
        A beat is a shell command rewriting the lane's renewal file (a few ms
        of the worker's CPU, `hostside.deploy_lock.renew_argv`), sent to all
        of them at once with `Transport.run_each` (through a connection
        holder: one request per slice root); every LOCK_REFRESH_EVERY-th beat,
        from the first, is the `heartbeat` action instead, which refreshes the
        lock's own heartbeat (what another deploy judges staleness by) and
        finds a lock taken from us. Either runs beside the steps and never
        uses the transport's worker pool, which long uploads and installs may
        fill, and is never waited for: a hung worker never delays the others'
        beats, a stuck beat never holds up the exit, and a worker whose
        previous beat is still in flight is skipped."""
        self.beats += 1
        refresh = (self.beats - 1) % LOCK_REFRESH_EVERY == 0
        with self.beating_guard:
            due = [n for n in sorted(self.locked.copy()) if n not in self.beating]
            self.beating.update(due)
        if refresh:
            for name in due:
                thread = threading.Thread(target=self.refresh_one, args=(name,), name=f"orch-heartbeat-{name}")
                thread.daemon = True
                thread.start()
            return
        token = str(self.holder["token"])
        commands = {n: renew_argv(self.workers[n].root, self.plan.lane, token, self.beats) for n in due}
        try:
            self.t.run_each(commands, timeout=HEARTBEAT_TIMEOUT, on_result=lambda r: self.beat_done(r.host))
        except Exception:
            for name in due:
                self.beat_done(name)  # retried on the next beat

    def beat_done(self, name: str) -> None:
        with self.beating_guard:
            self.beating.discard(name)

    def refresh_one(self, name: str) -> None:
        try:
            doc = self.call(self.workers[name], "heartbeat", timeout=HEARTBEAT_TIMEOUT)
        except Exception:
            return  # unreachable now: the step in flight there reports why
        finally:
            self.beat_done(name)
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
