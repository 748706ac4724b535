"""The timing policy of a launch: one frozen object instead of a dozen loose parameters."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_GRACE = 5.0
# After a worker failed, the gang is broken: collectives (and so a collective
# checkpoint) cannot complete, and JAX treats SIGTERM as a preemption notice
# and keeps running. The survivors get this much time after TERM, not `grace`.
DEFAULT_FAILURE_GRACE = 1.0
DEFAULT_START_TIMEOUT = 300.0
DEFAULT_LOST_AFTER = 30.0
RELEASE_MARGIN = 0.5
# After the teardown went out, how long the gang waits for the workers' exit reports.
TEARDOWN_WAIT = 10.0


@dataclass(frozen=True)
class LaunchTiming:
    """How long a launch waits for what.

    grace:          seconds between TERM and KILL when orch ends a run (Ctrl-C, timeout, stop)
    failure_grace:  the same after a worker failed (the gang is broken; see DEFAULT_FAILURE_GRACE)
    start_timeout:  seconds for every worker to report ready before the gang is torn down
    lost_after:     seconds of silence after which a worker is declared lost
    release_margin: the release instant lies this far after the release is sent
    teardown_wait:  seconds to wait for exit reports after the teardown
    """

    grace: float = DEFAULT_GRACE
    failure_grace: float = DEFAULT_FAILURE_GRACE
    start_timeout: float = DEFAULT_START_TIMEOUT
    lost_after: float = DEFAULT_LOST_AFTER
    release_margin: float = RELEASE_MARGIN
    teardown_wait: float = TEARDOWN_WAIT

    def teardown_grace(self, failed: bool) -> float:
        """TERM-to-KILL grace for a teardown: short when a worker failed, `grace` otherwise."""
        return min(self.grace, self.failure_grace) if failed else self.grace
