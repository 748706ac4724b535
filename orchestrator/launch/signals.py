"""Interrupts on the controller: Ctrl-C, SIGTERM and SIGHUP end a watched run, never a teardown.

A watched run is torn down when the controller is interrupted, so an interrupt
is a request to stop the gang. While that stop (or any other teardown) is under
way a further interrupt is dropped: abandoning a teardown half-way would leave
processes running unwatched.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")


class _Shield:
    """How many shielded sections (teardowns) and deferring sections are under way in the main
    thread, how many interrupts the shields dropped, and the interrupt a deferring section holds."""

    depth = 0
    dropped = 0
    deferring = 0
    pending: str | None = None


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    """SIGINT, SIGTERM and SIGHUP as a KeyboardInterrupt naming the signal; dropped while a teardown is
    under way (the teardown is what the interrupt asks for, and must not be abandoned half-way), held
    back while a deferring section runs."""
    what = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    if _Shield.depth:
        _Shield.dropped += 1
        return
    if _Shield.deferring:
        _Shield.pending = _Shield.pending or what
        return
    raise KeyboardInterrupt(what)


def dropped_interrupts() -> int:
    """How many interrupts shielded sections have dropped so far in this process."""
    return _Shield.dropped


def shielded(fn: Callable[[], T]) -> T:
    """Run `fn` with interrupts dropped. A counter, not a swap of handlers: a signal that lands
    while handlers were being swapped could otherwise leave one ignored for good."""
    if threading.current_thread() is not threading.main_thread():
        return fn()
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)
    _Shield.depth += 1
    try:
        return fn()
    finally:
        _Shield.depth -= 1


def deferred(fn: Callable[[], T]) -> T:
    """Run `fn` to its end, then raise the interrupt that arrived meanwhile (if any).

    For work that must not stop half-way yet must not swallow an interrupt either: the gang
    driver carries out its decisions (a release, a teardown) under it, so a Ctrl-C that lands
    in the middle is seen right after, as an event, instead of skipping a decision."""
    if threading.current_thread() is not threading.main_thread():
        return fn()
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)
    _Shield.deferring += 1
    try:
        result = fn()
    except BaseException:
        _Shield.deferring -= 1
        if not _Shield.deferring:
            _Shield.pending = None  # the error ends this work; the interrupt it held must not outlive it
        raise
    _Shield.deferring -= 1
    if not _Shield.deferring and _Shield.pending:
        what, _Shield.pending = _Shield.pending, None
        raise KeyboardInterrupt(what)
    return result


def interruption(exc: KeyboardInterrupt) -> str:
    """'Ctrl-C', or the name of the signal that interrupted the controller."""
    return str(exc.args[0]) if exc.args and str(exc.args[0]).startswith("SIG") else "Ctrl-C"


def interrupt_on_termination() -> None:
    """Make SIGTERM and SIGHUP (a `kill` of the controller, a closed terminal) end a watched run
    the way Ctrl-C does: the gang is torn down, never left running unwatched."""
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _interrupt)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)


def never_raising(fn: Callable[..., Any] | None) -> Callable[..., None] | None:
    """A caller's output callback that cannot break a teardown: after SIGHUP the terminal is gone and
    every write fails (EIO), yet the gang must still be stopped and the outcome recorded."""
    if fn is None:
        return None
    call_through = fn

    def call(*args: Any) -> None:
        try:
            call_through(*args)
        except Exception:
            pass

    return call
