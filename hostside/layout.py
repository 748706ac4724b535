"""Where orch keeps things on a worker. One place, used by both sides.

<root>/hostside/<digest>/hostside/   this package, as pushed
<root>/store/sha256/<hex>/<wheel>    content-addressed wheel store
<root>/envs/<bundle-id>/             one environment per bundle
<root>/interpreters/<sha256[:16]>/   a bundle's own Python, unpacked once (python/bin/python3)
<root>/lanes/<lane>/active           symlink -> ../../envs/<bundle-id>
<root>/lanes/<lane>/previous         symlink to the bundle active before
<root>/lanes/<lane>/deploy.lock      held while a deploy runs
<root>/receipts/deploy/<lane>.jsonl  deploy receipts, one line per deploy
<root>/runs/<run-id>/                launch files, logs, receipts of a run
<root>/cache/<lane>/<bundle-id>/{jax,torch_xla}   per-host caches
"""

from __future__ import annotations

import os

LIBTPU_LOCKFILE = "/tmp/libtpu_lockfile"
# The controller lease of a deploy: `{"token": T, "renewed": N}`, rewritten by a shell command
# (hostside.deploy_lock.renew_argv) every few seconds while the deploy holds the lane's lock.
RENEWED_FILE = "deploy.renewed"


class Layout:
    """Paths under one worker root."""

    def __init__(self, root: str):
        self.root = root

    def _p(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    @property
    def store(self) -> str:
        return self._p("store", "sha256")

    def wheel(self, sha256: str, filename: str) -> str:
        return self._p("store", "sha256", sha256, filename)

    def interpreter(self, sha256: str) -> str:
        return self._p("interpreters", sha256[:16])

    def env(self, bundle_id: str) -> str:
        return self._p("envs", bundle_id)

    def env_python(self, bundle_id: str) -> str:
        return os.path.join(self.env(bundle_id), "bin", "python")

    def lane_dir(self, lane: str) -> str:
        return self._p("lanes", lane)

    def active(self, lane: str) -> str:
        return self._p("lanes", lane, "active")

    def active_python(self, lane: str) -> str:
        return os.path.join(self.active(lane), "bin", "python")

    def previous(self, lane: str) -> str:
        return self._p("lanes", lane, "previous")

    def deploy_lock(self, lane: str) -> str:
        return self._p("lanes", lane, "deploy.lock")

    def deploy_renewed(self, lane: str) -> str:
        """The controller lease's renewals beside the lock (hostside.deploy_lock.renew_argv)."""
        return self._p("lanes", lane, RENEWED_FILE)

    def deploy_receipts(self, lane: str) -> str:
        return self._p("receipts", "deploy", f"{lane}.jsonl")

    def run_dir(self, run_id: str) -> str:
        return self._p("runs", run_id)

    def host_cache(self, lane: str, bundle_id: str, frontend: str) -> str:
        return self._p("cache", lane, bundle_id, frontend)
