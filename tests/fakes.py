"""A strict, scripted `Transport` for unit tests of orch's decisions (deploy, probe, launch).

The fake knows nothing about SSH. A test scripts, per worker and in order, the
calls it expects and what each answers; the fake checks every call against the
next expectation of its worker, records it, and fails loudly on anything
else: an unexpected call raises `UnexpectedCall` where it happens (product code
may catch that, so it is also remembered) and `verify()` (run by the
`scripted_transport` fixture at teardown) reports it with every expectation
left unused. Capabilities (does SSH, SFTP, a timeout really work) are proven
against real sshd on the local slice, never here.

    fake = ScriptedTransport(workers)
    fake.expect_job("w0", "deploy", ["begin"], answer={"ok": True, ...})
    fake.expect_run("w1", ["mkdir", "-p"], reply=timed_out(60))
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

import pytest

from orchestrator.fleet import WorkerRef
from orchestrator.launch.plan import LaunchPlan, ProcessPlan, Target
from orchestrator.remote import HOSTSIDE_READY
from orchestrator.transport import (
    FanOut,
    LineCallback,
    LocalPath,
    LocalSource,
    Result,
    StdinSource,
    Transport,
    source_name,
)


@dataclass(frozen=True)
class Call:
    """One call the code under test made on one worker."""

    host: str
    kind: str  # "run" | "put" | "get"
    argv: tuple[str, ...]  # for put/get: (kind, local, remote), as the real transport records it
    env: Mapping[str, str] | None = None
    timeout: float | None = None
    stdin: str | None = None
    end_on_timeout: bool = False

    @property
    def request(self) -> Any:
        """The JSON document sent on stdin (hostside jobs read their request there)."""
        return json.loads(self.stdin or "null")

    def describe(self) -> str:
        text = f"{self.host}: {self.kind} {' '.join(self.argv)}"
        return text if len(text) < 200 else text[:197] + "..."


Reply = Callable[[Call], Result]


@dataclass
class Expectation:
    """The next call expected on a worker: what it must look like, and its answer."""

    kind: str
    what: str  # for messages: what was expected
    matches: Callable[[Call], bool]
    reply: Reply
    check: Callable[[Call], None] | None = None  # further assertions on the call (e.g. its request)


class UnexpectedCall(AssertionError):
    """The code under test made a call no script expected."""


# -- replies ------------------------------------------------------------------


def exits(code: int = 0, stdout: str = "", stderr: str = "", elapsed: float = 0.01) -> Reply:
    """The command ran and exited with `code`."""
    return lambda call: Result(call.host, call.argv, code, stdout, stderr, elapsed)


def answers(document: Mapping[str, Any]) -> Reply:
    """A hostside job that printed `document` (schema_version added when missing) and exited 0."""
    doc = {"schema_version": 1, **document}
    return exits(0, json.dumps(doc) + "\n")


def unreachable(text: str = "cannot reach 10.0.0.9:22: ConnectionResetError", kind: str = "connect") -> Reply:
    """The worker could not be talked to (no exit code)."""
    return lambda call: Result(call.host, call.argv, None, elapsed=0.01, error=text, error_kind=kind)


def timed_out(seconds: float | None = None) -> Reply:
    """The worker did not answer within the call's timeout."""

    def reply(call: Call) -> Result:
        limit = seconds if seconds is not None else call.timeout
        return Result(
            call.host, call.argv, None, elapsed=limit or 0.0, error=f"timed out after {limit:g}s", error_kind="timeout"
        )

    return reply


# -- the fake -------------------------------------------------------------------


@dataclass
class ScriptedTransport(FanOut):
    """A `Transport` whose every call is scripted per worker, in order, and recorded."""

    worker_refs: Sequence[WorkerRef]
    hostside_ready: bool = True  # hostside already shipped to every worker (no check round trip)
    calls: list[Call] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._workers = {w.name: w for w in self.worker_refs}
        self._memo: dict[str, Any] = {}
        if self.hostside_ready:
            self._memo[HOSTSIDE_READY] = set(self._workers)
        self._script: dict[str, deque[Expectation]] = {name: deque() for name in self._workers}
        self._lock = threading.Lock()
        self.closed = False

    # -- scripting ---------------------------------------------------------

    def expect(self, host: str, expectation: Expectation) -> Self:
        """Expect `expectation` as the next not yet expected call on `host`."""
        if host not in self._script:
            raise KeyError(f"no worker {host!r} in this fake (has {sorted(self._script)})")
        self._script[host].append(expectation)
        return self

    def expect_run(
        self,
        host: str,
        argv_prefix: Sequence[str],
        reply: Reply | None = None,
        check: Callable[[Call], None] | None = None,
    ) -> Self:
        """Expect a command whose argument list starts with `argv_prefix`."""
        prefix = tuple(argv_prefix)
        return self.expect(
            host,
            Expectation(
                "run",
                f"run {' '.join(prefix)} ...",
                lambda c: c.argv[: len(prefix)] == prefix,
                reply or exits(0),
                check,
            ),
        )

    def expect_job(
        self,
        host: str,
        job: str,
        args: Sequence[str] = (),
        *,
        answer: Mapping[str, Any] | None = None,
        reply: Reply | None = None,
        check: Callable[[Call], None] | None = None,
    ) -> Self:
        """Expect `python -m hostside.<job> ARGS...` (any interpreter; ARGS as a prefix)."""
        wanted = (f"hostside.{job}", *args)

        def matches(c: Call) -> bool:
            if "-m" not in c.argv:
                return False
            i = c.argv.index("-m") + 1
            return c.argv[i : i + len(wanted)] == wanted

        if reply is None:
            reply = answers(answer if answer is not None else {"ok": True})
        return self.expect(host, Expectation("run", f"hostside.{job} {' '.join(args)}", matches, reply, check))

    def expect_put(self, host: str, remote_prefix: str = "", reply: Reply | None = None) -> Self:
        """Expect an upload to a remote path starting with `remote_prefix`."""
        return self.expect(
            host,
            Expectation(
                "put", f"put to {remote_prefix}...", lambda c: c.argv[2].startswith(remote_prefix), reply or exits(0)
            ),
        )

    def expect_get(self, host: str, remote: str, reply: Reply | None = None) -> Self:
        """Expect a download of `remote`."""
        return self.expect(host, Expectation("get", f"get {remote}", lambda c: c.argv[1] == remote, reply or exits(0)))

    # -- checking ----------------------------------------------------------

    def _answer(self, call: Call) -> Result:
        with self._lock:
            self.calls.append(call)
            queue = self._script.get(call.host)
            nxt = queue[0] if queue else None
            if nxt is None or nxt.kind != call.kind or not nxt.matches(call):
                wanted = f"expected {nxt.what}" if nxt else "expected nothing more"
                message = f"unexpected call {call.describe()} ({wanted})"
                self.unexpected.append(message)
                raise UnexpectedCall(message)
            assert queue is not None
            queue.popleft()
        if nxt.check is not None:
            nxt.check(call)
        return nxt.reply(call)

    def calls_to(self, host: str, kind: str | None = None) -> list[Call]:
        """The calls made on `host` (of one kind), in order."""
        return [c for c in self.calls if c.host == host and (kind is None or c.kind == kind)]

    def verify(self) -> None:
        """Fail if any call was unexpected or any scripted call was never made."""
        left = {h: [e.what for e in q] for h, q in self._script.items() if q}
        problems = list(self.unexpected)
        problems += [f"{h}: never called: {', '.join(whats)}" for h, whats in left.items()]
        if problems:
            raise AssertionError("scripted transport:\n  " + "\n  ".join(problems))

    # -- the Transport protocol --------------------------------------------

    @property
    def workers(self) -> Mapping[str, WorkerRef]:
        return self._workers

    @property
    def memo(self) -> dict[str, Any]:
        return self._memo

    def run_one(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: str | StdinSource | None = None,
        on_line: LineCallback | None = None,
        end_on_timeout: bool = False,
    ) -> Result:
        if stdin is not None and not isinstance(stdin, str):  # streamed input: recorded whole
            source = stdin
            stdin = "".join(iter(lambda: source.read(65536), ""))
        call = Call(name, "run", tuple(str(a) for a in argv), env, timeout, stdin, end_on_timeout)
        result = self._answer(call)
        if on_line is not None:
            for stream in ("stdout", "stderr"):
                for line in getattr(result, stream).splitlines():
                    on_line(name, stream, line)
        return result

    def put_one(self, name: str, local: LocalSource, remote: str) -> Result:
        return self._answer(Call(name, "put", ("put", source_name(local), remote)))

    def get_one(self, name: str, remote: str, local: LocalPath) -> Result:
        return self._answer(Call(name, "get", ("get", remote, str(local))))

    def map(self, fn: Callable[[WorkerRef], Result], hosts: Iterable[str] | None = None) -> dict[str, Result]:
        """One worker after the other, in the order asked (decisions must not depend on timing)."""
        out = {}
        for name in list(hosts) if hosts is not None else list(self._workers):
            try:
                out[name] = fn(self._workers[name])
            except Exception as exc:  # as the real transport: one worker's failure never stops the others
                out[name] = Result(name, (), None, error=f"{exc.__class__.__name__}: {exc}", error_kind="local")
        return out

    def close(self) -> None:
        self.closed = True

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_a_transport(fake: ScriptedTransport) -> Transport:
    return fake  # `mypy tests/fakes.py` fails here when the fake drifts from the protocol


def launch_plan(workers: Sequence[str]) -> LaunchPlan:
    """A plain CPU `LaunchPlan` of run `r` over `workers` (process i on `workers[i]` at 10.0.0.<i>)."""
    procs = tuple(
        ProcessPlan(process_id=i, worker=w, index=i, address=f"10.0.0.{i}", python="py", run_dir=f"/r/{w}", env={})
        for i, w in enumerate(workers)
    )
    return LaunchPlan(
        run_id="r",
        name=None,
        lane="cpu",
        slice="s",
        bundle="b",
        platform="cpu",
        profile=None,
        distributions=(),
        frontends=(),
        contract=(),
        target=Target("script", "t.py", None, ()),
        workdir=None,
        coordinator_address="10.0.0.0",
        coordinator_port=20000,
        master_port=20001,
        port_given=False,
        timeout=None,
        forbid=(),
        cache={},
        processes=procs,
    )


def worker(index: int, *, lane: str | None = "cpu", root: str = "/var/lib/orch") -> WorkerRef:
    """A worker of slice `s` for fakes: `w<index>` at 10.0.0.<index>."""
    return WorkerRef(
        name=f"w{index}",
        slice="s",
        index=index,
        host=f"10.0.0.{index}",
        port=None,
        user=None,
        identity_file=None,
        internal_address=f"10.0.0.{index}",
        root=root,
        shared_dir=None,
        python="python3",
        lane=lane,
    )


@pytest.fixture
def scripted_transport() -> Iterator[Callable[..., ScriptedTransport]]:
    """`scripted_transport(workers, hostside_ready=True)` -> a ScriptedTransport, verified when the test ends."""
    made: list[ScriptedTransport] = []

    def make(workers: Sequence[WorkerRef], **kwargs: Any) -> ScriptedTransport:
        fake = ScriptedTransport(workers, **kwargs)
        made.append(fake)
        return fake

    yield make
    for fake in made:
        fake.verify()
