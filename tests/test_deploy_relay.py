"""The seed worker's wheel relay (hostside.deploy_relay): it starts detached, or not at all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from waiting import wait_for

from hostside import procfs

REPO = Path(__file__).resolve().parent.parent

# Runs `serve` in a process of its own (it forks): argv = [root, how, extra request fields as JSON];
# how is "detach" or "die before detaching".
SERVE = """
import json, os, sys
from hostside import deploy_relay
from hostside.deploy_store import DeployFailure
if sys.argv[2] == "die before detaching":
    os.setsid = lambda: os._exit(1)  # the child ends where the worker agent's group kill would end it
req = {"root": sys.argv[1], "token": "t1", "bind": "127.0.0.1", "lifetime": 120, **json.loads(sys.argv[3])}
try:
    out = deploy_relay.serve(req)
except DeployFailure as exc:
    out = {"error": str(exc)}
print(json.dumps(out))
"""


def serve(root: Path, how: str, **extra: object) -> dict[str, object]:
    res = subprocess.run(
        [sys.executable, "-c", SERVE, str(root), how, json.dumps(extra)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    out: dict[str, object] = json.loads(res.stdout)
    return out


def test_the_relay_is_detached_before_its_pid_file_is_written_and_stop_serve_ends_it(tmp_path):
    out = serve(tmp_path, "detach")
    pid = int(str(out["pid"]))
    info = procfs.stat(pid)
    # a session of its own: ending the starting command's group leaves it
    assert info is not None and info["sid"] == pid, info
    assert (tmp_path / "serve" / "t1.pid").read_text() == str(pid)
    from hostside.deploy_relay import stop_serve

    assert stop_serve({"root": str(tmp_path), "token": "t1"}) == {"stopped": True}
    wait_for(lambda: not procfs.alive(pid), 30, "the relay to end after stop-serve")
    assert not (tmp_path / "serve" / "t1.pid").exists()


def test_a_relay_ended_before_it_detached_is_reported_and_leaves_no_pid_file(tmp_path):
    out = serve(tmp_path, "die before detaching")
    assert out == {"error": "the wheel relay ended while it started"}
    assert not (tmp_path / "serve").exists() or list((tmp_path / "serve").iterdir()) == []


def test_a_relay_whose_controller_stops_renewing_ends_itself_and_records_why(tmp_path):
    from hostside import deploy_lock
    from hostside.layout import Layout

    holder = {"token": "0a0a", "user": "me", "controller": "here", "pid": 1, "bundle_id": "new"}
    lane = {"lane": "cpu", "holder": holder, "bundle_id": "new"}
    taken = deploy_lock.begin({"root": str(tmp_path), "bundle": "b", "wheels": [], "stale_after": 300, **lane})
    assert taken["state"] == "locked-by-us", taken
    out = serve(tmp_path, "detach", lease_ttl=1.0, **lane)  # renewed by no one from here on
    pid = int(str(out["pid"]))
    wait_for(lambda: not procfs.alive(pid), 60, "the relay to end once its lease lapsed")
    receipts = Path(Layout(str(tmp_path)).deploy_receipts("cpu")).read_text().splitlines()
    [record] = [json.loads(line) for line in receipts if json.loads(line).get("event") == "abandoned"]
    assert (record["action"], record["token"]) == ("serve", "0a0a") and "not renewed" in record["why"], record
    assert not (tmp_path / "serve" / "t1.pid").exists()
