"""Waiting on a condition in tests, never on the clock.

`wait_for` polls a predicate until it holds or a generous deadline passes,
and on failure says what it was waiting for and what the predicate saw last.
Deadlines are generous on purpose: the suite runs on loaded 2-core machines,
and a deadline only costs time when something is really wrong.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 30.0, what: str = "a condition", every: float = 0.05) -> T:
    """Poll `predicate` until it returns something truthy; return that value.

    Raises AssertionError after `timeout` seconds, naming `what` and the last
    value seen (or the last exception the predicate raised).
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = predicate()
        except Exception as exc:  # a condition not checkable yet (file not written, ...)
            last = exc
        else:
            if value:
                return value
            last = value
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout:g}s for {what}; last saw: {last!r}")
        time.sleep(every)
