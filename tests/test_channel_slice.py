"""A command without stdin is read on the session directly (transport/channel.py), against real sshd
workers of the local slice: both streams whole past paramiko's window, characters split between
reads kept, streamed lines in order, the exit status as the worker gave it."""

from __future__ import annotations

import pytest

from orchestrator.fleet import load_fleet
from orchestrator.transport import for_fleet
from orchestrator.transport.channel import supported

pytestmark = pytest.mark.ssh

BIG = 3_000_000  # each stream more than paramiko's 2 MiB window: neither may wait for the other


def test_both_streams_arrive_whole_with_the_exit_status(slice4):
    fleet = load_fleet(slice4.fleet_path)
    script = f"head -c {BIG} /dev/zero | tr '\\0' a; head -c {BIG} /dev/zero | tr '\\0' b >&2; exit 3"
    with for_fleet(fleet, fleet.workers[:2]) as t:
        session = t._connection(fleet.workers[0].name).create_session()
        assert supported(session)  # the real paramiko session takes the direct path
        session.close()
        for r in t.run(["sh", "-c", script]).values():
            assert r.exit_code == 3 and r.error is None, r.describe()
            assert (len(r.stdout), len(r.stderr)) == (BIG, BIG)
            assert set(r.stdout) == {"a"} and set(r.stderr) == {"b"}


def test_characters_split_between_reads_are_kept_and_lines_stream_in_order(slice4):
    fleet = load_fleet(slice4.fleet_path)
    lines: list[tuple[str, str, str]] = []
    euros = "\u20ac" * 50_000  # 3 bytes each: reads of 32 or 64 KiB split some of them
    script = "yes \u20ac | head -n 50000 | tr -d '\\n'; echo; seq 1 200"
    with for_fleet(fleet, fleet.workers[:1]) as t:
        [r] = t.run(["sh", "-c", script], on_line=lambda h, s, line: lines.append((h, s, line))).values()
    assert r.ok, r.describe()
    assert [line for _, s, line in lines if s == "stdout"] == [euros, *map(str, range(1, 201))]
    assert {h for h, _, _ in lines} == {fleet.workers[0].name}
