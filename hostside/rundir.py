"""The layout of one run's directory on a worker (`<root>/runs/<run-id>/`), shared by both sides.

launch.json    the per-worker launch file (written by launch_start)
pid            {pid, pgid, sid, starttime, supervisor_pid, ...} of the user process
output.log     the user process's stdout and stderr, whole lines in arrival order
streams/       stdout and stderr apart (streamed live; left out of gathering)
record.json    what the launcher did, in order, with timestamps (the process's receipt)
ready / release / stop / exit.json   the start barrier and the end of the run
release.bell   a FIFO a launcher waiting for its release sleeps on (rung with release and stop)
supervisor.log the supervisor's own messages
"""

from __future__ import annotations

LAUNCH_FILE = "launch.json"
PID_FILE = "pid"
LOG_FILE = "output.log"
STREAMS_DIR = "streams"
RECORD_FILE = "record.json"
READY_FILE = "ready"
RELEASE_FILE = "release"
RELEASE_BELL = "release.bell"
CONTROLLER_LEASE_FILE = "controller.lease"  # renewed by a watching controller (launch_supervise.py)
STOP_FILE = "stop"
EXIT_FILE = "exit.json"
SUPERVISOR_LOG = "supervisor.log"
