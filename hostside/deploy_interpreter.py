"""The Python a bundle's environment is built from on a worker.

With an interpreter archive (a relocatable CPython in python-build-standalone's
install_only layout) the archive, already in the store and checked by sha256,
is unpacked once per worker into `<root>/interpreters/<sha256[:16]>/python`:
into a directory of its own first, checked member by member (nothing outside
`python/`, no links leaving it, no devices), its interpreter run from there
(version, its prefix is where it was unpacked, libpython loaded from beside
it), then marked complete and renamed into place. Without one, the worker's own
`python3.X` must exist; `system_problem` says so before anything is sent.
"""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import subprocess
import tarfile
import tempfile
import time
from typing import Any

from hostside.deploy_store import COMPLETE, DeployFailure
from hostside.files import write_atomic
from hostside.layout import Layout

_VERIFY = (
    "import json, os, platform, sys\n"
    "libs = sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libpython' in l.split()[-1]})\n"
    "print(json.dumps({'version': platform.python_version(), 'prefix': os.path.realpath(sys.prefix), "
    "'build': sys.version, 'libpython': [os.path.realpath(p) for p in libs]}))"
)


def executable(layout: Layout, interpreter: dict[str, Any]) -> str:
    """Where the unpacked interpreter's python3 is (whether or not it is there yet)."""
    return os.path.join(layout.interpreter(interpreter["sha256"]), "python", "bin", "python3")


def system_problem(python: str) -> str | None:
    """Why this worker cannot build a Python `python` environment from its own interpreters (None: it can)."""
    if shutil.which(f"python{python}"):
        return None
    found = _version_of(shutil.which("python3"))
    if found is not None and ".".join(found.split(".")[:2]) == python:
        return None
    here = f"python3 here is {found}" if found else "no python3 on PATH"
    return (
        f"no Python {python} on this worker ({here}); give the bundle an interpreter archive "
        f"(`orch bundle interpreter pack PREFIX`, then `interpreter:` in fleet.yaml) or install Python {python}"
    )


def _version_of(python: str | None) -> str | None:
    if not python:
        return None
    try:
        proc = subprocess.run(
            [python, "-c", "import platform; print(platform.python_version())"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def unpack(layout: Layout, interpreter: dict[str, Any], token: str) -> str:
    """The interpreter's python3, unpacked and verified once (content-addressed, atomic rename)."""
    final = layout.interpreter(interpreter["sha256"])
    if os.path.exists(os.path.join(final, COMPLETE)):
        return executable(layout, interpreter)
    archive = layout.wheel(interpreter["sha256"], interpreter["filename"])
    parent = os.path.dirname(final)
    os.makedirs(parent, exist_ok=True)
    _sweep(parent, os.path.basename(final))
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(final)}.unpack-{token}-", dir=parent)
    try:
        _extract(archive, tmp, interpreter["filename"])
        facts = _verify(tmp, interpreter)
        write_atomic(os.path.join(tmp, "orch-interpreter.json"), json.dumps({**interpreter, "verified": facts}))
        write_atomic(os.path.join(tmp, COMPLETE), "")
        if os.path.lexists(final) and not os.path.exists(os.path.join(final, COMPLETE)):
            shutil.rmtree(final, ignore_errors=True)  # left half done by an older orch
        try:
            os.rename(tmp, final)
        except OSError:
            if not os.path.exists(os.path.join(final, COMPLETE)):  # not a racing deploy that finished first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return executable(layout, interpreter)


def _sweep(parent: str, name: str, idle: float = 3600.0) -> None:
    """Remove unpack directories of `name` left by a deploy that was killed (none runs that long)."""
    now = time.time()
    for entry in os.listdir(parent):
        path = os.path.join(parent, entry)
        try:
            stale = entry.startswith(f".{name}.unpack-") and now - os.path.getmtime(path) > idle
        except OSError:
            continue
        if stale:
            shutil.rmtree(path, ignore_errors=True)


def _extract(archive: str, dest: str, name: str) -> None:
    """Extract the archive's members after checking every one stays under python/."""
    try:
        with tarfile.open(archive, "r:gz") as tf:
            members = tf.getmembers()
            for m in members:
                problem = _unsafe(m)
                if problem:
                    raise DeployFailure(f"interpreter {name}: refused member {m.name!r}: {problem}")
            if hasattr(tarfile, "data_filter"):
                tf.extractall(dest, members=members, filter="data")
            else:  # checked above member by member
                tf.extractall(dest, members=members)
    except (tarfile.TarError, EOFError) as exc:
        raise DeployFailure(f"interpreter {name}: not a readable archive ({exc})") from None
    if not os.path.isfile(os.path.join(dest, "python", "bin", "python3")):
        raise DeployFailure(f"interpreter {name}: no python/bin/python3 in the archive")


def _unsafe(m: tarfile.TarInfo) -> str | None:
    name = posixpath.normpath(m.name)
    if name.startswith("/") or name.split("/")[0] != "python" or ".." in name.split("/"):
        return "outside python/"
    if not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
        return "not a file, directory or link"
    if m.issym():
        target = posixpath.normpath(posixpath.join(posixpath.dirname(name), m.linkname))
        if m.linkname.startswith("/") or target.split("/")[0] != "python":
            return f"a link to {m.linkname}, outside python/"
    if m.islnk() and posixpath.normpath(m.linkname).split("/")[0] != "python":
        return f"a hard link to {m.linkname}, outside python/"
    return None


def _verify(unpacked: str, interpreter: dict[str, Any]) -> dict[str, Any]:
    """Run the unpacked interpreter: its version, and that it found itself where it was unpacked."""
    python = os.path.join(unpacked, "python", "bin", "python3")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    try:
        proc = subprocess.run([python, "-I", "-c", _VERIFY], capture_output=True, text=True, timeout=120, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DeployFailure(f"interpreter {interpreter['filename']}: cannot run {python}: {exc}") from None
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-4:])
        raise DeployFailure(f"interpreter {interpreter['filename']}: {python} exited {proc.returncode}: {tail}")
    facts: dict[str, Any] = json.loads(proc.stdout)
    home = os.path.realpath(os.path.join(unpacked, "python"))
    if facts["version"] != interpreter["version"]:
        raise DeployFailure(
            f"interpreter {interpreter['filename']}: runs as Python {facts['version']}, "
            f"the lock says {interpreter['version']}"
        )
    if facts["prefix"] != home:
        raise DeployFailure(
            f"interpreter {interpreter['filename']}: not relocatable: its prefix is {facts['prefix']}, not {home}"
        )
    outside = [p for p in facts["libpython"] if not p.startswith(home + os.sep)]
    if outside:
        raise DeployFailure(
            f"interpreter {interpreter['filename']}: not relocatable: it loaded {outside[0]} "
            f"(its RUNPATH names the place it was built in)"
        )
    return facts
