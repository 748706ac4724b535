"""Shared fixtures: the local slice that `ssh` tests run against.

`slice4` is one 4-worker sandbox for the whole session; `make_sandbox` makes
small ones for tests that break a worker (kill it, change its host key) or
tear a sandbox down. Every sandbox gets its own directory
(/var/tmp/orch-test-<pid>[-n]) and its own loopback addresses
(127.<2 + pid % 200>.<n>.*), so test sessions running side by side on one
machine never meet. Sandboxes left behind by a session that was killed are
removed at the start of the next one.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from orchestrator import sandbox
from orchestrator.fleet import Fleet, load_fleet

# Warm connections (a background holder of SSH connections per fleet) are off for the suite: a
# test sees exactly the connections it makes, and no holder outlives the session. The tests of
# warm connections themselves (test_warm_slice.py) turn them on, each with its own holder directory.
# ORCH_TEST_WARM=1 runs the whole suite through holders instead (in a directory of the session's
# own, every holder stopped when the session ends).
WARM_SESSION = os.environ.get("ORCH_TEST_WARM") == "1"
if WARM_SESSION:
    import tempfile

    os.environ["ORCH_SSH_PERSIST"] = ""
    os.environ["ORCH_PERSIST_DIR"] = str(Path(tempfile.mkdtemp(prefix="orch-tw-")) / "h")
else:
    import tempfile

    os.environ["ORCH_SSH_PERSIST"] = "0"
    # What commands record for a replayed `orch exec` (transport/replay.py) stays in the session's own
    # directory, never the user's.
    os.environ["ORCH_PERSIST_DIR"] = str(Path(tempfile.mkdtemp(prefix="orch-tr-")) / "h")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the session's holders (ORCH_TEST_WARM=1), so none outlives the tests, and remove their directory."""
    directory = Path(os.environ["ORCH_PERSIST_DIR"])
    if WARM_SESSION and directory.exists():
        from orchestrator import connections

        connections.stop_holders(directory)
    shutil.rmtree(directory.parent, ignore_errors=True)


# Fixture modules kept next to this file.
pytest_plugins = [name for name in ("bundle_fixtures",) if (Path(__file__).parent / f"{name}.py").exists()]


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C reaches the tests as it reaches an operator at a terminal.

    A shell without job control starts background commands (`bash scripts/test &` in a script)
    with SIGINT ignored; Python then installs no KeyboardInterrupt handler, orch rightly leaves an
    ignored SIGINT ignored, and every `orch` the tests start inherits it. The interrupt tests
    would then test the caller's choice, not orch: give the session the terminal's default.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # A session ended by SIGTERM (a CI time limit, `timeout`) stops as it does on Ctrl-C: pytest then
    # runs the session's teardown, so its sandboxes' sshd workers do not outlive it.
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminated)


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


TEST_DIR_PREFIX = "/var/tmp/orch-test-"
_slots = itertools.count()


def orch_executable() -> str:
    """The `orch` console script of the interpreter running the tests."""
    beside = Path(sys.executable).parent / "orch"
    if beside.exists():
        return str(beside)
    found = shutil.which("orch")
    if not found:
        raise RuntimeError("no `orch` console script; install the package: pip install -e '.[test]'")
    return found


@dataclass
class SliceHandle:
    """A running sandbox, as tests use it."""

    dir: Path
    state: sandbox.SandboxState
    fleet_path: Path
    workers: list[str]
    fleet: Fleet
    env: dict = field(default_factory=dict)

    def address(self, worker: str | int) -> str:
        return self.state.worker(worker).address

    def orch(
        self, *args: str, check: bool = True, timeout: float = 120, input: str | None = None, env: dict | None = None
    ) -> subprocess.CompletedProcess:
        """Run the `orch` CLI against this sandbox (ORCH_FLEET and ORCH_SANDBOX_DIR point here)."""
        full_env = {**os.environ, "ORCH_FLEET": str(self.fleet_path), sandbox.DIR_ENV: str(self.dir), **(env or {})}
        proc = subprocess.run(
            [orch_executable(), *map(str, args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
            env=full_env,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"orch {shlex.join(map(str, args))} exited {proc.returncode}\n"
                f"--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}"
            )
        return proc

    def ssh_argv(self, worker: str | int, connect_timeout: float = 5) -> list[str]:
        """Plain OpenSSH to one worker with this sandbox's key and strict host keys."""
        return [
            "ssh",
            "-i",
            str(self.dir / "id_ed25519"),
            "-o",
            f"UserKnownHostsFile={self.dir / 'known_hosts'}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "LogLevel=ERROR",
            "-o",
            f"ConnectTimeout={connect_timeout:g}",
            "-o",
            "ControlMaster=no",
            "-o",
            "ControlPath=none",
            f"root@{self.address(worker)}",
        ]

    def ssh(
        self, worker: str | int, *argv: str, connect_timeout: float = 5, timeout: float = 60, check: bool = False
    ) -> subprocess.CompletedProcess:
        """Run `argv` on one worker over plain ssh (quoted once, for the remote shell)."""
        proc = subprocess.run(
            [*self.ssh_argv(worker, connect_timeout), shlex.join(argv)],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"ssh {worker} {shlex.join(argv)} exited {proc.returncode}: {proc.stderr}")
        return proc

    def alias_fleet(self, config: Path, index: int, alias: str, path: Path) -> Path:
        """This slice's fleet with one worker, reached as `alias` of the ssh config `config`
        (which then says how: HostName, User, IdentityFile, ProxyJump)."""
        doc = yaml.safe_load(self.fleet_path.read_text())
        doc["ssh"]["config_file"] = str(config)
        sl = doc["slices"]["slice"]
        sl.pop("identity_file")
        sl.pop("user")
        sl["workers"] = [{"index": index, "ssh_alias": alias}]
        doc["lanes"] = {}
        path.write_text(yaml.safe_dump(doc))
        return path

    def down(self) -> sandbox.DownResult:
        """Stop the sandbox and remove its directory with everything tests added to it."""
        result = sandbox.down(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)
        return result


def sandbox_slot(workers: int) -> tuple[Path, str]:
    """A directory and a free base address no other sandbox on this machine uses."""
    pid = os.getpid()
    n = next(_slots)
    directory = Path(f"{TEST_DIR_PREFIX}{pid}" + (f"-{n}" if n else ""))
    second = 2 + pid % 200
    for third in itertools.chain(range(1 + n, 256), range(1, 1 + n)):
        base = f"127.{second}.{third}.1"
        if sandbox.addresses_free(sandbox.worker_addresses(base, workers)):
            return directory, base
    raise RuntimeError(f"no free loopback addresses under 127.{second}.*.*")


def start_sandbox(workers: int, lanes=None, slices: int = 1) -> SliceHandle:
    """Bring up a sandbox in a fresh slot (the caller takes it down); `workers` per slice."""
    directory, base = sandbox_slot(workers * slices)
    try:
        state = sandbox.up(directory, workers, lanes, base, slices=slices)
    except BaseException:
        sandbox.down(directory)
        raise
    return SliceHandle(
        dir=directory,
        state=state,
        fleet_path=Path(state.fleet_path),
        workers=[w.name for w in state.workers],
        fleet=load_fleet(state.fleet_path),
    )


def _remove_abandoned_sandboxes() -> None:
    """Take down test sandboxes whose session process is gone (killed mid-run)."""
    for path in Path(TEST_DIR_PREFIX).parent.glob(Path(TEST_DIR_PREFIX).name + "*"):
        match = re.fullmatch(r"orch-test-(\d+)(-\d+)?", path.name)
        if match and not Path(f"/proc/{match.group(1)}").exists():
            sandbox.down(path)
            shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def slice4():
    """A 4-worker local slice shared by the session (lane `cpu` over all workers)."""
    _remove_abandoned_sandboxes()
    handle = start_sandbox(4)
    try:
        yield handle
    finally:
        handle.down()


class SandboxFactory:
    """Makes small private sandboxes (or just reserves a slot) and takes them all down."""

    def __init__(self):
        self.dirs: list[Path] = []

    def __call__(self, workers: int = 2, lanes=None, slices: int = 1) -> SliceHandle:
        handle = start_sandbox(workers, lanes, slices)
        self.dirs.append(handle.dir)
        return handle

    def slot(self, workers: int) -> tuple[Path, str]:
        """A fresh (dir, base address) for a test that runs `orch sandbox up` itself."""
        directory, base = sandbox_slot(workers)
        self.dirs.append(directory)
        return directory, base

    def cleanup(self) -> None:
        for directory in self.dirs:
            sandbox.down(directory)
            shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def make_sandbox():
    """`make_sandbox(workers=2, lanes=None, slices=1)` -> SliceHandle; `.slot(n)` -> (dir, base address).

    Everything it made is taken down when the test ends.
    """
    factory = SandboxFactory()
    try:
        yield factory
    finally:
        factory.cleanup()


# Test tiers (plain `pytest` runs the unit tier only) and the scripted transport's fixture.
pytest_plugins = [*pytest_plugins, "_tiers", "fakes"]
