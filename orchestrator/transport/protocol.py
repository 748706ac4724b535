"""The Transport protocol and the frozen Result every remote operation returns.

`Transport` is the protocol orch's logic talks to workers through (the real
one is `FabricTransport`; tests of logic use a scripted fake). Every call
returns one frozen `Result` per worker and never stops at the first failure.
Remote commands are argument lists, turned into a command line in exactly one
place (`command_line`).
"""

from __future__ import annotations

import os
import shlex
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, Any, Protocol, Self

from orchestrator.errors import OrchError
from orchestrator.result import TAIL_LINES as TAIL_LINES  # Result's home (see result.py); callers import it here
from orchestrator.result import Result as Result
from orchestrator.workers import WorkerRef

# Where a copy reads from: a local path or an open binary file object.
LocalSource = str | os.PathLike[str] | IO[bytes]
LocalPath = str | os.PathLike[str]
LineCallback = Callable[[str, str, str], None]  # (host, "stdout"|"stderr", line)
ResultCallback = Callable[[Result], None]  # one worker's Result, as it comes


class StdinSource(Protocol):
    """Input streamed to a command as it comes (a whole document is passed as a str instead)."""

    def read(self, n: int, /) -> str:
        """Up to `n` characters, waiting until some are there; "" at the end of the input."""
        ...


Stdin = str | StdinSource | None


def command_line(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """The one place an argument list becomes a remote command line."""
    argv = [str(a) for a in argv]
    if not argv:
        raise OrchError("empty remote command")
    if env:
        argv = ["env", *[f"{k}={v}" for k, v in env.items()], *argv]
    return shlex.join(argv)


def source_name(local: LocalSource) -> str:
    """How a put names its source: the path, or a file object's name."""
    if isinstance(local, (str, os.PathLike)):
        return os.fspath(local)
    return str(getattr(local, "name", "<stream>"))


class Transport(Protocol):
    """How orch's logic talks to workers: run, put, get, close, and fan-out over them.

    Every method returns a `Result` per worker (a fan-out: a dict in the order
    asked, one entry per worker) and never raises for one worker's failure.
    `FabricTransport` is the real one; `tests/fakes.py` holds a scripted fake.
    """

    @property
    def workers(self) -> Mapping[str, WorkerRef]:
        """The workers this transport reaches, by name, in fleet order."""
        ...

    @property
    def memo(self) -> dict[str, Any]:
        """Per-transport caches of callers (e.g. which workers already have hostside)."""
        ...

    def run_one(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: Stdin = None,
        on_line: LineCallback | None = None,
        end_on_timeout: bool = False,
    ) -> Result:
        """Run one command (an argument list) on one worker."""
        ...

    def run(
        self,
        argv: Sequence[str],
        hosts: Iterable[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: Stdin = None,
        on_line: LineCallback | None = None,
        end_on_timeout: bool = False,
    ) -> dict[str, Result]:
        """Run the same command on many workers (default: all) in parallel."""
        ...

    def run_each(self, commands: Mapping[str, Sequence[str]], *, timeout: float, on_result: ResultCallback) -> None:
        """Start each worker's own short command (`commands`: worker -> argv) and return at once:
        `on_result` gets each worker's Result as it comes, on a thread of the transport's. Beside
        the worker pool, which long operations may fill, so it never waits behind them; a hung
        worker delays only its own Result. For the many small commands of a lease's renewals."""
        ...

    def put_one(self, name: str, local: LocalSource, remote: str) -> Result:
        """Copy a local file (or binary file object) to `remote` on one worker."""
        ...

    def put(self, local: LocalSource, remote: str, hosts: Iterable[str] | None = None) -> dict[str, Result]:
        """Copy one local file (or binary file object) to `remote` on many workers."""
        ...

    def get_one(self, name: str, remote: str, local: LocalPath) -> Result:
        """Copy `remote` from one worker to a local path."""
        ...

    def get(
        self, remote: str, local_for: Callable[[WorkerRef], LocalPath], hosts: Iterable[str] | None = None
    ) -> dict[str, Result]:
        """Copy `remote` from many workers, each to the local path `local_for(worker)`."""
        ...

    def map(self, fn: Callable[[WorkerRef], Result], hosts: Iterable[str] | None = None) -> dict[str, Result]:
        """Apply `fn` to each worker in parallel; an exception in `fn` becomes that worker's failed Result."""
        ...

    def close(self) -> None:
        """Close every connection."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


class FanOut:
    """The fan-out half of a `Transport`, written once over its per-worker half.

    A subclass supplies `map` (how workers run side by side), `run_one`,
    `put_one`, `get_one` and `close`; `run`, `put`, `get` and the context
    manager follow from them, so the real transport and the scripted fake
    cannot drift apart in how a fan-out is made.
    """

    def map(self, fn: Callable[[WorkerRef], Result], hosts: Iterable[str] | None = None) -> dict[str, Result]:
        raise NotImplementedError

    def run_one(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: Stdin = None,
        on_line: LineCallback | None = None,
        end_on_timeout: bool = False,
    ) -> Result:
        raise NotImplementedError

    def put_one(self, name: str, local: LocalSource, remote: str) -> Result:
        raise NotImplementedError

    def get_one(self, name: str, remote: str, local: LocalPath) -> Result:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def run(
        self,
        argv: Sequence[str],
        hosts: Iterable[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: Stdin = None,
        on_line: LineCallback | None = None,
        end_on_timeout: bool = False,
    ) -> dict[str, Result]:
        """Run the same command on many workers (default: all) in parallel."""
        return self.map(
            lambda w: self.run_one(
                w.name, argv, env=env, timeout=timeout, stdin=stdin, on_line=on_line, end_on_timeout=end_on_timeout
            ),
            hosts,
        )

    def run_each(self, commands: Mapping[str, Sequence[str]], *, timeout: float, on_result: ResultCallback) -> None:
        """Each worker's own command on a thread of its own (never joined: a daemon thread)."""

        def one(name: str, argv: Sequence[str]) -> None:
            try:
                result = self.run_one(name, argv, timeout=timeout)
            except Exception as exc:  # a transport's own defect: still that worker's Result
                result = Result(host=name, argv=tuple(argv), exit_code=None, error=str(exc), error_kind="local")
            on_result(result)

        for name, argv in commands.items():
            threading.Thread(target=one, args=(name, argv), daemon=True, name=f"orch-each-{name}").start()

    def put(self, local: LocalSource, remote: str, hosts: Iterable[str] | None = None) -> dict[str, Result]:
        """Copy one local file (or binary file object) to `remote` on many workers."""
        return self.map(lambda w: self.put_one(w.name, local, remote), hosts)

    def get(
        self, remote: str, local_for: Callable[[WorkerRef], LocalPath], hosts: Iterable[str] | None = None
    ) -> dict[str, Result]:
        """Copy `remote` from many workers, each to the local path `local_for(worker)`."""
        return self.map(lambda w: self.get_one(w.name, remote, local_for(w)), hosts)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
