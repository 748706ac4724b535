"""Heartbeat leases (hostside.lease) on real files: whole creation, untrusted content, refresh and release
only by the holder, staleness; and both users of it (the deploy lock, the cache writer lease) facing a
lease file that says nonsense."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from hostside import deploy as hd
from hostside import launch_cache as lc
from hostside import lease
from hostside.layout import Layout

F = lease.Fields(token="token", heartbeat="heartbeat")
UNTRUSTED = {
    "null": "null",
    "a list": "[]",
    "a string": '"lock"',
    "not JSON": "{torn",
    "empty": "",
    "a non-numeric heartbeat": '{"token": "t", "heartbeat": "abc"}',
    "a boolean heartbeat": '{"token": "t", "heartbeat": true}',
    "a NaN heartbeat": '{"token": "t", "heartbeat": NaN}',
    "no heartbeat": '{"token": "t"}',
    "a numeric token": '{"token": 5, "heartbeat": 1.0}',
}


def test_a_lease_is_created_whole_and_only_once(tmp_path):
    path = str(tmp_path / "x.lease")
    assert lease.create(path, {"token": "a", "heartbeat": 1.0})
    assert not lease.create(path, {"token": "b", "heartbeat": 2.0})
    assert json.loads(Path(path).read_text()) == {"token": "a", "heartbeat": 1.0}
    assert os.stat(path).st_mode & 0o777 == lease.MODE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.lease"]  # no temp file left


@pytest.mark.parametrize("what", sorted(UNTRUSTED))
def test_untrusted_content_reads_as_unreadable_with_a_reason_never_a_crash(tmp_path, what):
    path = tmp_path / "x.lease"
    path.write_text(UNTRUSTED[what])
    reading = lease.read(str(path), F)
    assert reading.state == "unreadable" and reading.reason and reading.mtime is not None
    assert not reading.is_ours("t")
    assert lease.judge(reading, now=time.time(), ttl=300, unreadable="stale").state == "stale"
    assert lease.judge(reading, now=time.time(), ttl=300, unreadable="age-by-mtime").state == "live"


def test_an_unreadable_lease_aged_by_its_mtime_goes_stale_after_the_ttl(tmp_path):
    path = tmp_path / "x.lease"
    path.write_text("[]")
    old = time.time() - 600
    os.utime(path, (old, old))
    verdict = lease.judge(lease.read(str(path), F), now=time.time(), ttl=300, unreadable="age-by-mtime")
    assert verdict.state == "stale" and "unreadable" in verdict.reason


def test_a_lease_is_live_until_its_heartbeat_is_older_than_the_ttl():
    reading = lease.parse('{"token": "t", "heartbeat": 1000}', F)
    assert lease.judge(reading, now=1010, ttl=20, unreadable="stale") == lease.Verdict(
        "live", "heartbeat 10.0s ago", 10
    )
    assert lease.judge(reading, now=1100, ttl=20, unreadable="stale") == lease.Verdict(
        "stale", "its heartbeat expired 100s ago (ttl 20s)", 100
    )
    assert lease.judge(lease.Reading("absent"), now=0, ttl=20, unreadable="stale").state == "absent"


def test_a_lease_without_a_token_only_ages():
    reading = lease.parse('{"heartbeat": 5}', F)
    assert reading.state == "held" and reading.token is None and not reading.is_ours(None)


def test_only_the_holder_refreshes_or_releases(tmp_path):
    path = str(tmp_path / "x.lease")
    lease.create(path, {"token": "mine", "heartbeat": 1.0, "user": "u"})
    assert not lease.refresh(path, F, "theirs", now=50.0).is_ours("theirs")
    assert lease.read(path, F).heartbeat == 1.0
    assert lease.refresh(path, F, "mine", now=60.0, extra={"beats": 1}).is_ours("mine")
    after = lease.read(path, F)
    assert after.heartbeat == 60.0 and after.doc["user"] == "u" and after.doc["beats"] == 1
    assert not lease.release(path, F, "theirs") and os.path.exists(path)
    assert lease.release(path, F, "mine") and not os.path.exists(path)
    assert not lease.release(path, F, "mine")  # gone already
    assert lease.refresh(path, F, "mine", now=70.0).state == "absent" and not os.path.exists(path)


def test_removing_a_stale_lease_leaves_a_fresh_replacement_alone(tmp_path):
    path = str(tmp_path / "x.lease")
    lease.create(path, {"token": "old", "heartbeat": 1.0})
    seen = lease.read(path, F)
    os.unlink(path)
    lease.create(path, {"token": "new", "heartbeat": time.time()})
    assert not lease.remove_stale(path, F, seen, "me")
    assert lease.read(path, F).token == "new"
    assert lease.remove_stale(path, F, lease.read(path, F), "me") and not os.path.exists(path)
    assert not lease.remove_stale(path, F, seen, "me")  # already gone
    assert list(tmp_path.iterdir()) == []


# -- the two users of a lease, facing nonsense ---------------------------------------


def deploy_request(root: Path) -> dict:
    return {
        "root": str(root),
        "lane": "cpu",
        "bundle_id": "new",
        "holder": {"token": "ours", "user": "u", "controller": "c", "pid": 1, "bundle_id": "new"},
        "wheels": [],
        "stale_after": 300,
    }


@pytest.mark.parametrize("what", sorted(UNTRUSTED))
def test_the_deploy_lock_treats_a_nonsense_lock_file_as_an_unreadable_holder(tmp_path, what):
    path = Path(Layout(str(tmp_path)).deploy_lock("cpu"))
    path.parent.mkdir(parents=True)
    path.write_text(UNTRUSTED[what])
    fresh = hd.begin(deploy_request(tmp_path))
    assert fresh["state"] == "locked" and fresh["holder"]["holder"] == "unreadable lock file"
    assert "unreadable lock file" in hd.describe_holder(fresh["holder"])
    old = time.time() - 600
    os.utime(path, (old, old))
    taken = hd.begin(deploy_request(tmp_path))
    assert taken["state"] == "locked-by-us" and taken["recovered_lock"]["holder"] == "unreadable lock file"


@pytest.mark.parametrize("what", sorted(UNTRUSTED))
def test_the_cache_writer_lease_reclaims_a_nonsense_lease_file(tmp_path, what):
    path = tmp_path / "writer.lease"
    path.write_text(UNTRUSTED[what])
    assert lc._lease_view(str(path), 20)["state"] == "stale"
    writer = lc.Lease(str(path), {"worker": "w0", "run_id": "r"}, ttl=20, interval=1)
    writer.acquire()
    assert writer.acquired == "reclaimed" and "unreadable" in (writer.reclaimed_from or {})["reason"]
    writer.release()
    assert not path.exists()
