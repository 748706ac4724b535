"""Ending a timed-out command on the worker when the client gave up first.

A command run with `end_on_timeout` carries `ORCH_TASK=<token>` in its
`timeout` wrapper's arguments; when the client's own limit fires before the
remote `timeout` acts, the controller finds the command again by that tag and
ends its process group and ssh session (TERM, KILL, confirm).
"""

from __future__ import annotations

import threading
from typing import Any

from orchestrator.transport.channel import exec_command, supported
from orchestrator.transport.protocol import command_line

# The remote `timeout` sends KILL this long after TERM to a command that ignores TERM.
KILL_AFTER = 3
# A command run with `end_on_timeout` carries `ORCH_TASK=<token>` in its
# `timeout` wrapper's arguments, so the controller can find it again on the
# worker and end its process group and session when the client gave up first.
TASK_TAG = "ORCH_TASK"
# Seconds the controller spends ending such a command (TERM, KILL, confirm)
# before it reports the command as still being ended.
ENDING_TIMEOUT = 5.0


def end_task(conn: Any, tag: str) -> str:
    """End the command tagged `tag` on the connection's worker; the report's suffix.

    Runs on the worker's existing connection (a healthy worker answers in
    milliseconds), in a thread given `ENDING_TIMEOUT`: a hung worker is
    reported as still ending the command, and its connection is dropped
    (which ends the attempt) by the caller.
    """
    outcome: dict[str, Any] = {}
    # The tag travels as two arguments, so this command's own line never carries it whole.
    line = command_line(["sh", "-c", _END_TASK, "orch-end", TASK_TAG, tag, "10", "10"])

    def attempt() -> None:
        try:
            opener = getattr(conn, "create_session", None)  # a replayed connection (replay.py) has no `run`
            session = opener() if opener is not None else None
            if session is not None and supported(session):  # read on the session itself, as run_one does
                try:
                    done = exec_command(session, line, ENDING_TIMEOUT)
                    if not done.timed_out:  # else: no answer in time, as below
                        outcome["result"] = done
                finally:
                    session.close()
                return
            if session is not None:
                session.close()
            outcome["result"] = conn.run(line, hide=True, warn=True, pty=False, in_stream=False, timeout=ENDING_TIMEOUT)
        except Exception as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=attempt, name="orch-end-task", daemon=True)
    worker.start()
    worker.join(ENDING_TIMEOUT)
    res = outcome.get("result")
    if res is not None and res.exited == 0:
        return "; ended on the worker"
    if res is not None:
        why = (res.stdout.strip() or res.stderr.strip() or f"exit {res.exited}").splitlines()[-1]
    elif "error" in outcome:
        why = f"{outcome['error'].__class__.__name__}: {outcome['error']}"
    else:
        why = f"no answer within {ENDING_TIMEOUT:g}s"
    return f"; still being ended on the worker (its timeout wrapper kills it within {KILL_AFTER}s; {why})"


# Ends the process group, and the ssh session, of the command whose `timeout`
# wrapper carries the tag "$1=$2": TERM, KILL after $3 polls, gone within $4
# more (a poll is at least 0.1 s). Zombies are gone already. Prints "ended"
# (exit 0) or what is left (exit 1). The session counts when the wrapper, or
# the shell sshd started for it, leads it (sshd gives every command its own).
_END_TASK = r"""
set -u
tag="$1=$2" term_polls=$3 kill_polls=$4
table() { ps -ww -eo pid=,ppid=,pgid=,sid=,stat=,args=; }
ids=$(table | TAG="$tag" awk '
    $5 !~ /^Z/ && index($0, ENVIRON["TAG"]) {
        print "g" $3
        if ($4 == $1 || $4 == $2) print "s" $4
    }')
members() {
    table | IDS="$ids" awk '
        BEGIN { n = split(ENVIRON["IDS"], a); for (i = 1; i <= n; i++) want[a[i]] = 1 }
        $5 !~ /^Z/ && (("g" $3) in want || ("s" $4) in want) { print $1 }'
}
[ -n "$ids" ] || { echo ended; exit 0; }
pids=$(members)
[ -z "$pids" ] || kill -TERM $pids 2>/dev/null
i=0
while pids=$(members); [ -n "$pids" ]; do
    i=$((i + 1))
    [ "$i" -ne "$term_polls" ] || kill -KILL $pids 2>/dev/null
    [ "$i" -lt $((term_polls + kill_polls)) ] || { echo "left:" $pids; exit 1; }
    sleep 0.1
done
echo ended
"""
