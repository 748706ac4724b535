"""Worker side of `orch deploy`: store, lock, install, activate, roll back.

    python3 -m hostside.deploy ACTION < request.json

Actions: begin, heartbeat, receive, serve, fetch, stop-serve, install,
activate, unlock, rollback, status. Each reads one JSON request on stdin and
prints one JSON document. Nothing here switches a lane's active bundle until
its environment is complete and verified; a failed install leaves no partial
environment. Install and activate act only while the lane's deploy lock still
carries the requester's token.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterator
from typing import Any

from hostside import SCHEMA_VERSION, lease
from hostside.files import sha256_file as _sha256
from hostside.files import write_atomic as _write_atomic
from hostside.layout import Layout

COMPLETE = ".orch-complete"
MANIFEST = "orch-bundle.json"
HEARTBEAT_EVERY = 30.0  # seconds between heartbeats while a long action runs
LONG_ACTIONS = ("receive", "fetch", "install")
# The deploy lock is a heartbeat lease (hostside.lease) with these field names on disk.
LOCK_FIELDS = lease.Fields(token="token", heartbeat="heartbeat")


class DeployFailure(Exception):
    """A step failed; `reason` is shown to the operator as is."""


def _env_id(layout: Layout, link: str) -> str | None:
    try:
        return os.path.basename(os.readlink(link).rstrip("/"))
    except OSError:
        return None


def _complete(layout: Layout, bundle_id: str) -> bool:
    return os.path.exists(os.path.join(layout.env(bundle_id), COMPLETE))


def _stored(layout: Layout, wheel: dict[str, Any]) -> bool:
    """In the store with the right size (the hash is checked when installing)."""
    try:
        return bool(os.path.getsize(layout.wheel(wheel["sha256"], wheel["filename"])) == wheel["size"])
    except OSError:
        return False


def _drop_corrupt(layout: Layout, wheels: list[dict[str, Any]]) -> list[str]:
    """Remove store files whose sha256 is wrong (so a re-run pushes them again)."""
    bad = []
    for w in wheels:
        path = layout.wheel(w["sha256"], w["filename"])
        if os.path.exists(path) and _sha256(path) != w["sha256"]:
            os.unlink(path)
            bad.append(w["filename"])
    return bad


def _read_lock(path: str) -> lease.Reading:
    """The lane's lock file, as read (never raises on its content)."""
    return lease.read(path, LOCK_FIELDS)


def _holder(reading: lease.Reading) -> dict[str, Any] | None:
    """The lock's holder as the controller sees it; an unreadable lock shows as such, with its mtime."""
    if reading.state == "absent":
        return None
    if reading.state == "unreadable":
        return {"holder": "unreadable lock file", "reason": reading.reason, "heartbeat": reading.mtime}
    return reading.doc


@contextlib.contextmanager
def _lane_mutex(layout: Layout, lane: str) -> Iterator[None]:
    """Serialise every read-modify-write of a lane's lock file (take, refresh,
    check, release) across processes, so a heartbeat cannot resurrect a lock
    that was just released or overwrite one another deploy just took."""
    os.makedirs(layout.lane_dir(lane), exist_ok=True)
    # Read-only is enough for flock, so another user's deploy can take the mutex too.
    fd = os.open(os.path.join(layout.lane_dir(lane), ".deploy-mutex"), os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # drops the flock


def describe_holder(holder: dict[str, Any] | None) -> str:
    """Who holds a lane's lock, for messages (the controller uses it too)."""
    if not holder:
        return "no deploy holds it now"
    if "token" not in holder:
        return f"held by an {holder.get('holder', 'unknown holder')}"
    return (
        f"held by {holder.get('user', '?')}@{holder.get('controller', '?')} pid {holder.get('pid', '?')} "
        f"(bundle {holder.get('bundle_id', '?')})"
    )


class _LockLost(DeployFailure):
    """The lane's lock no longer carries our token: another deploy took it."""


def _require_lock(layout: Layout, req: dict[str, Any], step: str) -> None:
    """Raise unless the lane's lock still carries this deploy's token (call
    under the lane mutex when acting on the answer)."""
    reading = _read_lock(layout.deploy_lock(req["lane"]))
    if not reading.is_ours(req["holder"]["token"]):
        raise _LockLost(
            f"this deploy no longer holds lane {req['lane']}'s deploy lock ({describe_holder(_holder(reading))}); "
            f"not {step}, the previous bundle stays active"
        )


# -- actions ------------------------------------------------------------------


def begin(req: dict[str, Any]) -> dict[str, Any]:
    """Check the lane: refuse if another deploy holds it, say `unchanged` if
    the bundle is already active, else take the lock and list missing wheels."""
    layout = Layout(req["root"])
    with _lane_mutex(layout, req["lane"]):
        return _begin(layout, req)


def _begin(layout: Layout, req: dict[str, Any]) -> dict[str, Any]:
    lane, bundle_id = req["lane"], req["bundle_id"]
    lock_path = layout.deploy_lock(lane)
    now = time.time()
    recovered = None
    reading = _read_lock(lock_path)
    if reading.state != "absent":
        verdict = lease.judge(reading, now=now, ttl=float(req.get("stale_after", 300)), unreadable="age-by-mtime")
        stolen = reading.token is not None and reading.token in req.get("steal", [])
        if verdict.state == "live" and not stolen:
            return {"state": "locked", "holder": _holder(reading), "heartbeat_age": round(verdict.age or 0.0, 1)}
        recovered = _holder(reading)
        lease.remove_stale(lock_path, LOCK_FIELDS, reading, str(os.getpid()))
    active = _env_id(layout, layout.active(lane))
    if active == bundle_id and _complete(layout, bundle_id):
        return {"state": "unchanged", "active": active, "recovered_lock": recovered}
    if not lease.create(lock_path, dict(req["holder"], heartbeat=now)):  # only an older hostside, without the mutex
        return {"state": "locked", "holder": _holder(_read_lock(lock_path)), "heartbeat_age": 0.0}
    missing = [w for w in req["wheels"] if not _stored(layout, w)]
    return {
        "state": "locked-by-us",
        "active": active,
        "missing": missing,
        "recovered_lock": recovered,
        "env_complete": _complete(layout, bundle_id),
        "disk_free_bytes": shutil.disk_usage(req["root"]).free,
    }


def receive(req: dict[str, Any]) -> dict[str, Any]:
    """Move uploaded files (in the store's incoming dir) into the store after
    checking sha256 and size; a mismatching file is deleted, never kept."""
    layout = Layout(req["root"])
    stored, bad = [], []
    for item in req["files"]:
        src = item["path"]
        try:
            size = os.path.getsize(src)
            digest = _sha256(src)
        except OSError as exc:
            bad.append({"filename": item["filename"], "reason": f"unreadable upload: {exc.strerror}"})
            continue
        if digest != item["sha256"] or size != item["size"]:
            os.unlink(src)
            bad.append(
                {
                    "filename": item["filename"],
                    "reason": f"sha256 mismatch: expected {item['sha256']} ({item['size']} bytes), "
                    f"got {digest} ({size} bytes); file discarded",
                }
            )
            continue
        dest = layout.wheel(item["sha256"], item["filename"])
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        os.replace(src, dest)
        stored.append(item["filename"])
    return {"stored": stored, "bad": bad}


def serve(req: dict[str, Any]) -> dict[str, Any]:
    """Start a short-lived HTTP server over the store for the other workers
    (detached; it exits by itself after `lifetime` seconds or on stop-serve)."""
    layout = Layout(req["root"])
    token = req["token"]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((req.get("bind", "0.0.0.0"), 0))
    port = sock.getsockname()[1]
    pid = os.fork()
    if pid:
        sock.close()
        _write_atomic(os.path.join(layout.root, "serve", f"{token}.pid"), str(pid))
        return {"port": port, "pid": pid}
    # child: detach fully so the SSH session can end
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    signal.alarm(int(req.get("lifetime", 900)))
    _serve_forever(sock, layout.store, token)
    os._exit(0)


def _serve_forever(sock: socket.socket, store: str, token: str) -> None:
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # /<token>/<sha256>/<filename>
            parts = self.path.strip("/").split("/")
            if len(parts) != 3 or parts[0] != token or "/" in parts[2] or parts[2].startswith("."):
                self.send_error(404)
                return
            path = os.path.join(store, parts[1], parts[2])
            if not os.path.isfile(path):
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(os.path.getsize(path)))
            self.end_headers()
            with open(path, "rb") as fh:
                shutil.copyfileobj(fh, self.wfile, 1 << 20)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("", 0), Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    sock.listen(64)
    server.serve_forever()


def stop_serve(req: dict[str, Any]) -> dict[str, Any]:
    path = os.path.join(req["root"], "serve", f"{req['token']}.pid")
    try:
        pid = int(open(path).read())
        os.kill(pid, signal.SIGTERM)
        stopped = True
    except (OSError, ValueError):
        stopped = False
    try:
        os.unlink(path)
    except OSError:
        pass
    return {"stopped": stopped}


def fetch(req: dict[str, Any]) -> dict[str, Any]:
    """Download wheels from the seed worker's server into the store, verified."""
    import urllib.request

    layout = Layout(req["root"])
    incoming = os.path.join(layout.store, ".incoming")
    os.makedirs(incoming, exist_ok=True)
    fetched, failed, nbytes = [], [], 0
    for w in req["wheels"]:
        dest = layout.wheel(w["sha256"], w["filename"])
        if os.path.exists(dest):
            continue
        url = f"{req['url']}/{w['sha256']}/{w['filename']}"
        fd, tmp = tempfile.mkstemp(prefix=w["sha256"][:12] + ".", dir=incoming)
        try:
            h = hashlib.sha256()
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=req.get("timeout", 60)) as resp:
                for chunk in iter(lambda: resp.read(1 << 20), b""):
                    h.update(chunk)
                    out.write(chunk)
                    nbytes += len(chunk)
            if h.hexdigest() != w["sha256"]:
                raise DeployFailure(f"sha256 mismatch from seed: got {h.hexdigest()}")
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            os.replace(tmp, dest)
            fetched.append(w["filename"])
        except Exception as exc:  # report per wheel; the controller falls back to a direct push
            if os.path.exists(tmp):
                os.unlink(tmp)
            failed.append({"filename": w["filename"], "reason": f"{exc.__class__.__name__}: {exc}"})
    return {"fetched": fetched, "failed": failed, "bytes": nbytes}


def _uv(layout: Layout, uv_wheel: dict[str, Any]) -> str:
    """The uv binary, unpacked once from its wheel in the store."""
    tool_dir = os.path.join(layout.root, "tools", "uv-" + uv_wheel["sha256"][:16])
    binary = os.path.join(tool_dir, "uv")
    if os.path.exists(binary):
        return binary
    src = layout.wheel(uv_wheel["sha256"], uv_wheel["filename"])
    tmp = tempfile.mkdtemp(prefix=".uv-", dir=_mkdirs(layout.root, "tools"))
    with zipfile.ZipFile(src) as zf:
        member = next((n for n in zf.namelist() if n.endswith(".data/scripts/uv")), None)
        if member is None:
            raise DeployFailure(f"{uv_wheel['filename']} has no uv binary")
        with zf.open(member) as fh, open(os.path.join(tmp, "uv"), "wb") as out:
            shutil.copyfileobj(fh, out)
    os.chmod(os.path.join(tmp, "uv"), 0o755)
    try:
        os.rename(tmp, tool_dir)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return binary


def _mkdirs(*parts: str) -> str:
    path = os.path.join(*parts)
    os.makedirs(path, exist_ok=True)
    return path


def install(req: dict[str, Any]) -> dict[str, Any]:
    """Create the bundle's environment offline from the store (hashes required),
    verify every distribution's version, then mark it complete. On any failure
    the partial environment is removed."""
    layout = Layout(req["root"])
    bundle_id = req["bundle_id"]
    env = layout.env(bundle_id)
    with _lane_mutex(layout, req["lane"]):
        _require_lock(layout, req, "installing")
    if _complete(layout, bundle_id):
        return {"installed": False, "env": env, "elapsed": 0.0}
    start = time.monotonic()
    # uv may take a wheel from its own cache without reading the store file, so
    # the store is checked here: a corrupt file must not survive to be relayed.
    corrupt = _drop_corrupt(layout, req["wheels"])
    if corrupt:
        raise DeployFailure(
            f"corrupt wheel(s) in the store: {', '.join(corrupt)} (sha256 mismatch; "
            "removed, a re-run pushes them again)"
        )
    links = _mkdirs(layout.root, "envs", f".{bundle_id}.links")
    try:
        if os.path.exists(env):
            shutil.rmtree(env)  # an earlier install died half way
        for w in req["wheels"]:
            link = os.path.join(links, w["filename"])
            if not os.path.lexists(link):
                os.symlink(layout.wheel(w["sha256"], w["filename"]), link)
        reqs = os.path.join(links, "requirements.txt")
        with open(reqs, "w") as fh:
            for w in req["wheels"]:
                fh.write(f"{w['name']}=={w['version']} --hash=sha256:{w['sha256']}\n")
        uv = _uv(layout, req["uv"])
        uv_env = dict(
            os.environ,
            UV_CACHE_DIR=os.path.join(layout.root, "uv-cache"),
            UV_NO_CONFIG="1",
            UV_PYTHON_DOWNLOADS="never",
        )
        _run(
            [uv, "venv", "--quiet", "--python", req["python"], "--python-preference", "only-system", env],
            uv_env,
            "creating the environment",
        )
        _run(
            [
                uv,
                "pip",
                "install",
                "--quiet",
                "--offline",
                "--no-index",
                "--no-deps",
                "--require-hashes",
                "--find-links",
                links,
                "--python",
                os.path.join(env, "bin", "python"),
                "-r",
                reqs,
            ],
            uv_env,
            "installing the bundle's wheels",
        )
        installed = _installed_versions(os.path.join(env, "bin", "python"))
        wrong = {
            w["name"]: (w["version"], installed.get(w["name"]))
            for w in req["wheels"]
            if installed.get(w["name"]) != w["version"]
        }
        if wrong:
            raise DeployFailure(
                "installed versions differ from the lock: "
                + ", ".join(f"{n} {got or 'missing'} (lock {want})" for n, (want, got) in sorted(wrong.items()))
            )
        with _lane_mutex(layout, req["lane"]):
            _require_lock(layout, req, "marking the environment complete")
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "bundle_id": bundle_id,
            "bundle": req["bundle"],
            "python": req["python"],
            "lock_digest": req.get("lock_digest"),
            "distributions": {w["name"]: w["version"] for w in req["wheels"]},
            "installed_at": time.time(),
        }
        _write_atomic(os.path.join(env, MANIFEST), json.dumps(manifest, indent=2, sort_keys=True))
        _write_atomic(os.path.join(env, COMPLETE), "")
    except _LockLost:
        raise  # the deploy that took the lock may be building this environment now: leave it
    except BaseException as exc:
        shutil.rmtree(env, ignore_errors=True)
        if isinstance(exc, OSError) and exc.errno == 28:
            raise DeployFailure(
                f"no space left on device under {layout.root} ({shutil.disk_usage(layout.root).free // 2**20} MiB free)"
            ) from None
        raise
    finally:
        shutil.rmtree(links, ignore_errors=True)
    return {"installed": True, "env": env, "elapsed": round(time.monotonic() - start, 3)}


def _run(argv: list[str], env: dict[str, Any], what: str) -> None:
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-6:]
        text = " | ".join(tail)
        if "No space left on device" in text or "os error 28" in text:
            raise DeployFailure(f"{what}: no space left on device ({text})")
        raise DeployFailure(f"{what} failed (exit {proc.returncode}): {text}")


def _installed_versions(python: str) -> dict[str, Any]:
    code = (
        "import json, importlib.metadata as m, re\n"
        "print(json.dumps({re.sub(r'[-_.]+', '-', d.metadata['Name']).lower(): d.version "
        "for d in m.distributions()}))"
    )
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        raise DeployFailure(f"cannot list installed distributions: {proc.stderr.strip()[-300:]}")
    versions: dict[str, Any] = json.loads(proc.stdout)
    return versions


def activate(req: dict[str, Any]) -> dict[str, Any]:
    """Point the lane at the bundle atomically (symlink swap), record a receipt,
    release the lock; only while the lock is still ours."""
    layout = Layout(req["root"])
    with _lane_mutex(layout, req["lane"]):
        _require_lock(layout, req, "activating")
        return _activate(layout, req)


def _activate(layout: Layout, req: dict[str, Any]) -> dict[str, Any]:
    lane, bundle_id = req["lane"], req["bundle_id"]
    if not _complete(layout, bundle_id):
        raise DeployFailure(f"environment {bundle_id} is not complete; not activating")
    previous = _env_id(layout, layout.active(lane))
    if previous != bundle_id:
        _swap(layout.active(lane), bundle_id)
        if previous:
            _swap(layout.previous(lane), previous)
    receipt = {
        "schema_version": SCHEMA_VERSION,
        "event": "deploy",
        "lane": lane,
        "bundle": req["bundle"],
        "bundle_id": bundle_id,
        "lock_digest": req.get("lock_digest"),
        "previous": previous,
        "time": time.time(),
        "controller": req.get("holder", {}).get("controller"),
    }
    _append(layout.deploy_receipts(lane), receipt)
    _release(layout, req)
    return {"active": bundle_id, "previous": previous, "receipt": receipt}


def _swap(link: str, bundle_id: str) -> None:
    tmp = f"{link}.new-{os.getpid()}"
    os.symlink(os.path.join("..", "..", "envs", bundle_id), tmp)
    os.replace(tmp, link)


def _append(path: str, record: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as fh:
        fh.write(json.dumps(record, sort_keys=True) + "\n")


def unlock(req: dict[str, Any]) -> dict[str, Any]:
    """Release the lane's deploy lock if we (this token) hold it."""
    layout = Layout(req["root"])
    with _lane_mutex(layout, req["lane"]):
        return {"released": _release(layout, req)}


def _release(layout: Layout, req: dict[str, Any]) -> bool:
    return lease.release(layout.deploy_lock(req["lane"]), LOCK_FIELDS, req["holder"]["token"])


def rollback(req: dict[str, Any]) -> dict[str, Any]:
    """Re-activate the previous bundle (and remember the current one as previous)."""
    layout = Layout(req["root"])
    lane = req["lane"]
    current, previous = _env_id(layout, layout.active(lane)), _env_id(layout, layout.previous(lane))
    if not previous:
        raise DeployFailure(f"lane {lane} has no previous bundle to roll back to")
    if not _complete(layout, previous):
        raise DeployFailure(f"previous bundle {previous} is no longer installed")
    _swap(layout.active(lane), previous)
    if current:
        _swap(layout.previous(lane), current)
    _append(
        layout.deploy_receipts(lane),
        {
            "schema_version": SCHEMA_VERSION,
            "event": "rollback",
            "lane": lane,
            "bundle_id": previous,
            "previous": current,
            "time": time.time(),
        },
    )
    return {"active": previous, "previous": current}


def status(req: dict[str, Any]) -> dict[str, Any]:
    """Active and previous bundle of each requested lane, with their manifests."""
    layout = Layout(req["root"])
    lanes = {}
    for lane in req["lanes"]:
        active = _env_id(layout, layout.active(lane))
        manifest = None
        if active:
            try:
                with open(os.path.join(layout.env(active), MANIFEST)) as fh:
                    manifest = json.load(fh)
            except (OSError, ValueError):
                manifest = None
        lanes[lane] = {
            "active": active,
            "previous": _env_id(layout, layout.previous(lane)),
            "complete": active is not None and _complete(layout, active),
            "bundle": (manifest or {}).get("bundle"),
            "lock": _holder(_read_lock(layout.deploy_lock(lane))),
        }
    return {"lanes": lanes}


def heartbeat(req: dict[str, Any]) -> dict[str, Any]:
    """Refresh our lock's heartbeat (the controller calls this while it uploads,
    when no hostside action runs); says who holds the lock if it is not us."""
    return _heartbeat(req)


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


def _heartbeat(req: dict[str, Any]) -> dict[str, Any]:
    """Refresh our deploy lock's heartbeat so a long step is not taken for a dead deploy."""
    if "lane" not in req or "holder" not in req:
        return {"refreshed": False, "holder": None}
    layout = Layout(req["root"])
    path = layout.deploy_lock(req["lane"])
    with _lane_mutex(layout, req["lane"]):
        reading = lease.refresh(path, LOCK_FIELDS, str(req["holder"].get("token")), now=time.time())
    if reading.is_ours(req["holder"].get("token")):
        return {"refreshed": True, "holder": None}
    return {"refreshed": False, "holder": _holder(reading)}


@contextlib.contextmanager
def _heartbeating(req: dict[str, Any], every: float) -> Iterator[None]:
    """Refresh the heartbeat from a daemon thread every `every` seconds while the
    body runs: one install or download can outlast the stale-lock timeout."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every):
            try:
                _heartbeat(req)
            except Exception as exc:  # a missed beat is retried; it must not break the action
                print(f"heartbeat failed: {exc}", file=sys.stderr)

    thread = threading.Thread(target=beat, name="deploy-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


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
        beating = argv[0] in LONG_ACTIONS and "holder" in req
        with (
            _heartbeating(req, float(req.get("heartbeat_every", HEARTBEAT_EVERY)))
            if beating
            else contextlib.nullcontext()
        ):
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
