"""Room on the controller for a wide fan-out: open files.

Every worker connection holds a socket (and a ProxyJump hop another, a ProxyCommand
process two pipes), and a launch holds several channels and log files per worker. A
shell's soft limit is often 1024 open files, which a 256-worker launch through a
jump host can pass; the hard limit is usually far higher. `ensure_open_files` raises
the soft limit, never past the hard one, before the connections open, so the fan-out
fails (if at all) with a clear error up front instead of `Too many open files` on the
last workers.
"""

from __future__ import annotations

# Open files per worker a fan-out may hold at once (sockets, pipes, channels, log files), and
# the controller's own (its Python, its terminal, its run records).
FILES_PER_WORKER = 4
FILES_BASE = 64


def ensure_open_files(workers: int) -> int:
    """Raise the soft limit on open files to what `workers` connections need (up to the hard limit);
    the soft limit now in force. A platform without `resource` is left alone."""
    try:
        import resource
    except ImportError:  # not POSIX
        return -1
    needed = FILES_BASE + FILES_PER_WORKER * workers
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return soft
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return soft
        return target
    return soft
