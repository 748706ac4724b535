"""The local slice a benchmark runs on, set up with orch's own verbs.

Every benchmark gets its slice here: `orch sandbox up` (or an existing
sandbox, `--sandbox-dir`), `orch bundle lock` and `orch deploy`, all through
the `orch` command line, so a change of the worker layout reaches the
benchmarks the way it reaches an operator. Nothing here knows where a bundle
lives on a worker.

    with open_slice("launch", workers=8) as sl:
        sl.deploy()                       # jax-cpu active on lane cpu
        doc = sl.orch_json("launch", "--lane", "cpu", "--json", "--", "x.py")
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LANE = "cpu"
BUNDLE = "jax-cpu"
SSH_PORT = 22


def orch_executable() -> str:
    """The `orch` console script of the interpreter running the benchmark."""
    beside = Path(sys.executable).parent / "orch"
    if beside.exists():
        return str(beside)
    found = shutil.which("orch")
    if not found:
        raise SystemExit("no `orch` command: install the package first (bash scripts/setup)")
    return found


def add_slice_args(ap: argparse.ArgumentParser, *, workers: int) -> None:
    """The options every benchmark shares: its size and where its slice comes from."""
    ap.add_argument("--workers", type=int, default=workers, help=f"Workers of a new slice (default {workers}).")
    ap.add_argument(
        "--sandbox-dir",
        help="Run on this running sandbox (`orch sandbox up --dir DIR`) instead of a new one; it is left up, "
        "and its size replaces --workers.",
    )
    ap.add_argument("--base-address", help="Loopback address of worker 0 of a new slice (default: a free one).")
    ap.add_argument("--smoke", action="store_true", help="The smallest meaningful run, quickly (for CI).")


class OrchFailed(SystemExit):
    """An `orch` command the benchmark depends on failed: its command line, exit code and output."""

    def __init__(self, argv: list[str], proc: subprocess.CompletedProcess[str]):
        super().__init__(
            f"`{shlex.join(argv)}` exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}"
            f"--- stderr\n{proc.stderr[-4000:]}"
        )


@dataclass
class Slice:
    """A running sandbox, as a benchmark uses it: the `orch` CLI against it, and plain OpenSSH."""

    dir: Path
    fleet_path: Path
    addresses: list[str]
    owned: bool
    env: dict[str, str] = field(default_factory=dict)

    @property
    def workers(self) -> int:
        return len(self.addresses)

    def orch(
        self, *args: str, check: bool = True, timeout: float | None = None, fleet: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run `orch ARGS` against this slice (its fleet, or `fleet`); output captured."""
        argv = [orch_executable(), "--fleet", str(fleet or self.fleet_path), *args]
        proc = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise OrchFailed(argv, proc)
        return proc

    def orch_json(
        self, *args: str, check: bool = True, timeout: float | None = None, fleet: Path | None = None
    ) -> dict[str, Any]:
        """Run `orch ARGS` (which include --json) and return its JSON document, whatever its exit code
        when `check` is false; a missing or broken document always fails."""
        proc = self.orch(*args, check=check, timeout=timeout, fleet=fleet)
        try:
            doc = json.loads(proc.stdout)
        except json.JSONDecodeError:
            raise OrchFailed([orch_executable(), *args], proc) from None
        if not isinstance(doc, dict):
            raise OrchFailed([orch_executable(), *args], proc)
        return doc

    def lock(self, bundle: str = BUNDLE) -> dict[str, Any]:
        """`orch bundle lock BUNDLE`: resolve the bundle's wheels, write its lock next to the fleet file."""
        return self.orch_json("bundle", "lock", bundle, "--json", timeout=900)

    def deploy(self, lane: str = LANE) -> dict[str, Any]:
        """Make the lane's bundle active on its workers with `orch deploy` (locking it first if it has no
        lock yet); the deploy's JSON document. A no-op when it is already active."""
        plan = self.orch("deploy", "--lane", lane, "--dry-run", check=False)
        if plan.returncode != 0:
            if "has no lock" not in plan.stdout + plan.stderr:
                raise OrchFailed(["orch", "deploy", "--lane", lane, "--dry-run"], plan)
            self.lock(self.lane_bundle(lane))
        doc = self.orch_json("deploy", "--lane", lane, "--json", check=False, timeout=1800)
        if not doc.get("ok"):
            failed = {
                name: f"{o.get('status')}: {o.get('reason')}"
                for name, o in doc.get("workers", {}).items()
                if o.get("status") not in ("installed", "unchanged")
            }
            raise SystemExit(f"orch deploy --lane {lane} failed on {len(failed)} worker(s): {failed}")
        return doc

    def lane_bundle(self, lane: str) -> str:
        """The bundle the fleet assigns to `lane` (`orch fleet show --json`)."""
        doc = self.orch_json("fleet", "show", "--json")
        return str(doc["lanes"][lane]["bundle"])

    def ssh_argv(self, address: str) -> list[str]:
        """Plain OpenSSH to one worker with this sandbox's key and strict host keys: the baseline."""
        return [
            "ssh",
            *self.ssh_options(),
            f"root@{address}",
        ]

    def ssh_options(self) -> list[str]:
        """OpenSSH options (for ssh and scp) that reach this sandbox's workers as orch does."""
        return [
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
            "-F",
            "/dev/null",
        ]


def _listening(address: str) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        try:
            s.connect((address, SSH_PORT))
        except OSError:
            return False
        return True


def _candidates(workers: int) -> Iterator[str]:
    """Base addresses of ranges no test (127.2-201.*) or default sandbox (127.0.1.*) uses."""
    third = 1 + os.getpid() % 200
    for second in range(210, 255):
        if third + (workers - 1) // 256 < 255:
            yield f"127.{second}.{third}.1"


def _status(dir: Path) -> dict[str, Any]:
    argv = [orch_executable(), "sandbox", "status", "--dir", str(dir), "--json"]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise OrchFailed(argv, proc)
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def _up(dir: Path, workers: int, base_address: str | None) -> None:
    """`orch sandbox up` on the given base address, or on the first free one of a few ranges."""
    tried = []
    for base in [base_address] if base_address else _candidates(workers):
        if not base_address and _listening(base):
            continue
        argv = [orch_executable(), "sandbox", "up", "--workers", str(workers), "--dir", str(dir)]
        argv += ["--base-address", base, "--timeout", "60"]
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode == 0:
            return
        if base_address or "already in use" not in proc.stderr + proc.stdout:
            raise OrchFailed(argv, proc)
        tried.append(base)  # someone took it between the check and `up`: the next range
    raise SystemExit(f"no free loopback range for a {workers}-worker slice (tried {', '.join(tried) or 'none'})")


@contextmanager
def open_slice(
    name: str, workers: int, *, sandbox_dir: str | None = None, base_address: str | None = None
) -> Iterator[Slice]:
    """A slice for benchmark `name`: the running sandbox at `sandbox_dir` (left up), or a new one of
    `workers` workers (taken down, its directory removed, at the end). Runs are recorded in a
    directory of the benchmark's own, removed at the end."""
    runs_dir = Path(tempfile.mkdtemp(prefix=f"orch-bench-{name}-runs-"))
    owned = sandbox_dir is None
    dir = Path(sandbox_dir or f"/var/tmp/orch-bench-{name}-{os.getpid()}")
    try:
        if owned:
            if dir.exists():
                raise SystemExit(f"{dir} already exists; remove it or pass --sandbox-dir {dir}")
            _up(dir, workers, base_address)
        status = _status(dir)
        if not status.get("up"):
            raise SystemExit(f"the sandbox in {dir} is not up (`orch sandbox status --dir {dir}`)")
        env = {**os.environ, "ORCH_RUNS_DIR": str(runs_dir), "ORCH_SANDBOX_DIR": str(dir)}
        env.pop("ORCH_FLEET", None)
        yield Slice(
            dir=dir,
            fleet_path=Path(status["fleet_path"]),
            addresses=[w["address"] for w in status["workers"]],
            owned=owned,
            env=env,
        )
    finally:
        if owned and dir.exists():
            subprocess.run(
                [orch_executable(), "sandbox", "down", "--dir", str(dir)], capture_output=True, text=True, check=False
            )
            shutil.rmtree(dir, ignore_errors=True)  # the locks and fleet files the benchmark added
        shutil.rmtree(runs_dir, ignore_errors=True)
