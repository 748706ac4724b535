"""Running `hostside` jobs on workers.

The controller ships the `hostside` package to each worker once, as a
content-addressed tarball under `<root>/hostside/<digest>/`, then runs jobs
as `python -I -B -c BOOT <digest dir> -m hostside.<job> ARGS`. A job prints
exactly one JSON document on stdout; `job_document` turns that into a dict or
a clear error.

Isolated (`-I`): the SSH user's working directory (their home), user
site-packages and PYTHON* variables are not on the job's path, so a
`~/json.py` or a `~/hostside/` on a worker cannot replace the pushed,
content-addressed code. `-I` ignores PYTHONPATH too, so BOOT puts exactly
the digest directory first on `sys.path` and runs the job's module as
`python -m` would. (`-P` would do less and needs Python 3.11; TPU VM images
still ship 3.10.)
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from orchestrator.errors import OrchError
from orchestrator.fleet import WorkerRef
from orchestrator.transport import LineCallback, Result, Stdin, Transport

HOSTSIDE_DIR = Path(__file__).resolve().parent.parent / "hostside"
# The transport memo entry naming the workers known to hold this controller's hostside.
HOSTSIDE_READY = "hostside-ready"

# Runs `-m MODULE ARGS` with exactly the given directory first on sys.path: argv is
# ['-c', DIR, '-m', MODULE, ARGS...]; the module sees [its path, ARGS...] as python -m gives.
_BOOT = (
    "import runpy, sys; sys.path.insert(0, sys.argv[1]); sys.argv = sys.argv[3:]; "
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)"
)

# Unpacks an uploaded tarball into its final directory atomically; data
# arrives as arguments, never spliced into code.
_INSTALL = r"""
import os, sys, tarfile, tempfile
tgz, final = sys.argv[1], sys.argv[2]
parent = os.path.dirname(final)
os.makedirs(parent, exist_ok=True)
import shutil
tmp = tempfile.mkdtemp(prefix=".incoming-", dir=parent)
try:
    with tarfile.open(tgz) as tar:
        tar.extractall(tmp, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(tmp)
    open(os.path.join(tmp, ".complete"), "w").close()
    try:
        os.rename(tmp, final)
    except OSError:
        if not os.path.exists(os.path.join(final, ".complete")):
            raise
finally:
    shutil.rmtree(tmp, ignore_errors=True)
    if os.path.exists(tgz):
        os.unlink(tgz)
"""

# Prints the bytes free for an unprivileged writer under a directory.
_FREE = "import os, sys; s = os.statvfs(sys.argv[1]); print(s.f_bavail * s.f_frsize)"
# What a full disk looks like in a failed upload or unpacking.
_DISK_FULL = ("no space left", "full disk", "disk full", "quota exceeded", "errno 28")


@lru_cache(maxsize=1)
def hostside_archive() -> tuple[str, bytes]:
    """(digest, tar.gz bytes) of the hostside package, reproducible."""
    buf = io.BytesIO()
    files = sorted(p for p in HOSTSIDE_DIR.rglob("*.py") if "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for path in files:
            rel = "hostside/" + path.relative_to(HOSTSIDE_DIR).as_posix()
            data = path.read_bytes()
            digest.update(rel.encode() + b"\0" + data + b"\0")
            info = tarfile.TarInfo(rel)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return digest.hexdigest()[:16], buf.getvalue()


@lru_cache(maxsize=1)
def hostside_bytes_needed() -> int:
    """Bytes a worker needs free to receive hostside: the tarball and its unpacked files side by side."""
    _, data = hostside_archive()
    unpacked = sum(p.stat().st_size for p in HOSTSIDE_DIR.rglob("*.py") if "__pycache__" not in p.parts)
    return len(data) + unpacked


def hostside_path(worker: WorkerRef) -> str:
    """The PYTHONPATH entry that holds this controller's hostside on `worker`."""
    digest, _ = hostside_archive()
    return f"{worker.root}/hostside/{digest}"


def ensure_hostside(transport: Transport, worker: WorkerRef, timeout: float | None = None) -> Result:
    """Make sure this controller's hostside is on `worker` (one round trip when it is).

    `timeout` caps each step, so a caller with a deadline of its own (a probe) is not outlived.
    """
    ready: set[str] = transport.memo.setdefault(HOSTSIDE_READY, set())
    if worker.name in ready:
        return Result(host=worker.name, argv=("ensure-hostside",), exit_code=0)

    def limit(seconds: float) -> float:
        return min(seconds, timeout) if timeout else seconds

    final = hostside_path(worker)
    check = transport.run_one(worker.name, ["test", "-f", f"{final}/.complete"], timeout=limit(30))
    if check.error:
        return check
    if check.exit_code != 0:
        _, data = hostside_archive()
        mk = transport.run_one(worker.name, ["mkdir", "-p", f"{worker.root}/hostside"], timeout=limit(30))
        if not mk.ok:
            return mk
        tgz = f"{worker.root}/hostside/.upload-{hostside_archive()[0]}-{id(transport):x}.tgz"
        put = transport.put_one(worker.name, io.BytesIO(data), tgz)
        if not put.ok:
            transport.run_one(worker.name, ["rm", "-f", tgz], timeout=limit(30))  # what part of it arrived
            return _shipping_failure(transport, worker, put, limit(30))
        inst = transport.run_one(worker.name, [worker.python, "-I", "-c", _INSTALL, tgz, final], timeout=limit(60))
        if not inst.ok:
            return _shipping_failure(transport, worker, inst, limit(30))
    ready.add(worker.name)
    return Result(host=worker.name, argv=("ensure-hostside",), exit_code=0)


def _shipping_failure(transport: Transport, worker: WorkerRef, failed: Result, timeout: float) -> Result:
    directory = f"{worker.root}/hostside"
    what = f"ship orch's helper code to {directory}"
    return disk_failure(transport, worker, failed, directory, hostside_bytes_needed(), what, timeout)


def disk_failure(
    transport: Transport, worker: WorkerRef, failed: Result, directory: str, needed: int, what: str, timeout: float
) -> Result:
    """`failed` (a copy or unpacking into `directory`) as the disk failure it is, error kind `disk` with the
    free and needed figures, when the worker has less than `needed` bytes free there or the failure says its
    disk is full; else `failed` as it is.

    The SFTP server reports a full disk as a bare "Failure", which would otherwise read as a transport
    problem; the figures say what to free."""
    if failed.error_kind not in (None, "remote"):
        return failed  # the connection itself failed: there is nothing to ask the worker
    probe = transport.run_one(worker.name, [worker.python, "-I", "-c", _FREE, directory], timeout=timeout)
    try:
        free = int(probe.stdout.strip())
    except ValueError:
        return failed
    text = failed.describe()
    if free >= needed and not any(mark in text.lower() for mark in _DISK_FULL):
        return failed
    return Result(
        host=worker.name,
        argv=failed.argv,
        exit_code=None,
        elapsed=failed.elapsed,
        error=f"disk: no room to {what}: {_kib(free)} free, {_kib(needed)} needed ({text})",
        error_kind="disk",
    )


def _kib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{-(-n // 1024)} KiB"


def run_hostside(
    transport: Transport,
    worker: WorkerRef,
    job: str,
    args: Sequence[str] = (),
    *,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    stdin: Stdin = None,
    on_line: LineCallback | None = None,
) -> Result:
    """Run hostside.<job> with ARGS on one worker, isolated (shipping hostside first if needed)."""
    ready = ensure_hostside(transport, worker)
    if not ready.ok:
        return ready
    path = hostside_path(worker)
    # PYTHONPATH is for the processes a job starts (the launch supervisor); -I ignores it here.
    full_env = {"PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    return transport.run_one(
        worker.name,
        [python or worker.python, "-I", "-B", "-c", _BOOT, path, "-m", f"hostside.{job}", *args],
        env=full_env,
        timeout=timeout,
        stdin=stdin,
        on_line=on_line,
    )


def step_failure(transport: Transport, worker: WorkerRef, step: str, result: Result) -> str:
    """Why a hostside job that ran as `step` came back without its answer, in words that say whether the
    step was cut short: the connection lost during it, or the job killed on the worker (no exit status came
    back: paramiko's -1), told apart by asking the worker once more."""
    cut = result.exit_code == -1 or (result.exit_code is None and result.error_kind == "connect")
    if not cut:
        return f"{step}: {result.describe()}"
    back = transport.run_one(worker.name, ["true"], timeout=15)
    if result.exit_code == -1 and back.ok:
        return (
            f"{step}: the {step} process on {worker.name} was killed before it finished "
            "(no exit status came back; the connection is still up)"
        )
    now = "the worker answers again" if back.ok else f"it does not answer now: {back.describe()}"
    why = f" ({result.error})" if result.error else ""
    return f"{step}: the connection to {worker.name} was lost during {step}{why}; {now}"


def job_document(result: Result) -> dict[str, Any]:
    """The JSON document a hostside job printed, or an OrchError saying what came back instead."""
    text = result.stdout.strip()
    if not text:
        raise OrchError(f"hostside job printed nothing ({result.describe()})", host=result.host)
    try:
        doc = json.loads(text.splitlines()[-1] if not text.startswith("{") else text)
    except json.JSONDecodeError:
        raise OrchError(
            f"hostside job printed no JSON document: {text[-200:]!r} ({result.describe()})", host=result.host
        ) from None
    if not isinstance(doc, dict) or "schema_version" not in doc:
        raise OrchError("hostside job printed JSON without schema_version", host=result.host)
    return doc
