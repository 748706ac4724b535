"""The wheel relay between workers: the seed worker serves its store over HTTP
for a while (`serve`, `stop-serve`), the others `fetch` from it, verified.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import tempfile
from typing import Any

from hostside.deploy_lock import CONTROLLER_LEASE_TTL, abandon, watch_lease
from hostside.deploy_store import DeployFailure
from hostside.files import write_atomic as _write_atomic
from hostside.layout import Layout


def serve(req: dict[str, Any]) -> dict[str, Any]:
    """Start a short-lived HTTP server over the store for the other workers
    (detached; it exits on stop-serve, when the deploy's lock here is released
    or stops being renewed by its controller, and after `lifetime` seconds at most)."""
    layout = Layout(req["root"])
    token = req["token"]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((req.get("bind", "0.0.0.0"), 0))
    port = sock.getsockname()[1]
    # The child says when it has left this session: only then is the relay out of reach of what ends
    # this command's process group (the worker agent does so when the controller's connection dies).
    # Its pid file is written after that, so a relay ended while starting leaves none behind.
    detached_r, detached_w = os.pipe()
    pid = os.fork()
    if pid:
        sock.close()
        os.close(detached_w)
        with os.fdopen(detached_r, "rb") as pipe:
            detached = pipe.read(1) == b"1"
        if not detached:
            raise DeployFailure("the wheel relay ended while it started")
        _write_atomic(os.path.join(layout.root, "serve", f"{token}.pid"), str(pid))
        return {"port": port, "pid": pid}
    # child: detach fully so the SSH session can end
    os.close(detached_r)
    os.setsid()
    os.write(detached_w, b"1")
    os.close(detached_w)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    signal.alarm(int(req.get("lifetime", 900)))  # a cap; the controller lease ends it far sooner
    if "holder" in req and "lane" in req:
        # Serve only while the deploy's controller keeps renewing its lock here.
        watch_lease(
            layout,
            req,
            ttl=float(req.get("lease_ttl", CONTROLLER_LEASE_TTL)),
            on_lost=lambda why: _stop_serving(layout, req, why),
        )
    _serve_forever(sock, layout.store, token)
    os._exit(0)


def _stop_serving(layout: Layout, req: dict[str, Any], why: str) -> None:
    """The deploy is over or its controller is gone: record why, drop the pid file and exit."""
    try:
        os.unlink(os.path.join(layout.root, "serve", f"{req['token']}.pid"))
    except OSError:
        pass
    abandon(layout, req, "serve", why)


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
