"""Installing a bundle's environment on a worker: offline from the store with uv,
hashes required, versions verified, then marked complete and renamed into
place; a failed install leaves no partial environment. An environment found
incomplete (hostside.deploy_store.env_problem) is rebuilt, and the reply says why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import zipfile
from typing import Any

from hostside import SCHEMA_VERSION
from hostside.deploy_interpreter import unpack as unpack_interpreter
from hostside.deploy_lock import _cleanups, _lane_mutex, _require_lock, committing, run_child
from hostside.deploy_store import COMPLETE, MANIFEST, DeployFailure, _complete, _drop_corrupt, env_problem
from hostside.files import write_atomic as _write_atomic
from hostside.layout import Layout


def _uv(layout: Layout, uv_wheel: dict[str, Any]) -> str:
    """The uv binary, unpacked once from its wheel in the store."""
    tool_dir = os.path.join(layout.root, "tools", "uv-" + uv_wheel["sha256"][:16])
    binary = os.path.join(tool_dir, "uv")
    if os.path.exists(binary):
        return binary
    src = layout.wheel(uv_wheel["sha256"], uv_wheel["filename"])
    tmp = tempfile.mkdtemp(prefix=".uv-", dir=_mkdirs(layout.root, "tools"))
    with zipfile.ZipFile(src) as zf:
        member = next((n for n in zf.namelist() if n.endswith(".data/scripts/uv")), None)
        if member is None:
            raise DeployFailure(f"{uv_wheel['filename']} has no uv binary")
        with zf.open(member) as fh, open(os.path.join(tmp, "uv"), "wb") as out:
            shutil.copyfileobj(fh, out)
    os.chmod(os.path.join(tmp, "uv"), 0o755)
    try:
        os.rename(tmp, tool_dir)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return binary


def _mkdirs(*parts: str) -> str:
    path = os.path.join(*parts)
    os.makedirs(path, exist_ok=True)
    return path


def install(req: dict[str, Any]) -> dict[str, Any]:
    """Build the bundle's environment offline from the store (hashes required)
    in a directory of this deploy's own, verify every distribution's version,
    mark it complete, then rename it into place under the lane's lock. On any
    failure only this deploy's build directory is removed: `envs/<id>` is
    replaced only while the lock is ours, never deleted by a failure path."""
    layout = Layout(req["root"])
    bundle_id = req["bundle_id"]
    env = layout.env(bundle_id)
    with _lane_mutex(layout, req["lane"]):
        _require_lock(layout, req, "installing")
    problem = env_problem(env, bundle_id)
    if problem is None:
        return {"installed": False, "env": env, "elapsed": 0.0}
    # An environment there but incomplete (an install cut short, files lost since) is rebuilt, and said so.
    rebuilt = None if problem == "not installed" else problem
    start = time.monotonic()
    # uv may take a wheel from its own cache without reading the store file, so
    # the store is checked here: a corrupt file must not survive to be relayed.
    stored = req["wheels"] + ([req["interpreter"]] if req.get("interpreter") else [])
    corrupt = _drop_corrupt(layout, stored)
    if corrupt:
        raise DeployFailure(
            f"corrupt wheel(s) in the store: {', '.join(corrupt)} (sha256 mismatch; "
            "removed, a re-run pushes them again)"
        )
    token = str(req["holder"]["token"])
    envs = _mkdirs(layout.root, "envs")
    build = os.path.join(envs, f".{bundle_id}.build-{token}")
    links = os.path.join(envs, f".{bundle_id}.links-{token}")

    def clean() -> None:
        shutil.rmtree(build, ignore_errors=True)
        shutil.rmtree(links, ignore_errors=True)

    _cleanups.append(clean)  # also when the controller lease ends mid-build
    try:
        clean()
        os.makedirs(links)
        _build(layout, req, build, links)
        with _lane_mutex(layout, req["lane"]):
            _require_lock(layout, req, "putting the environment in place")
            with committing():
                if _complete(layout, bundle_id):
                    pass  # built meanwhile under an earlier lock of ours: keep it
                else:
                    if os.path.lexists(env):
                        _remove(env, envs, token)  # incomplete (see `rebuilt`); the lock is ours
                    os.rename(build, env)
    except BaseException as exc:
        if isinstance(exc, OSError) and exc.errno == 28:
            clean()
            raise DeployFailure(
                f"no space left on device under {layout.root} ({shutil.disk_usage(layout.root).free // 2**20} MiB free)"
            ) from None
        raise
    finally:
        clean()
        _cleanups.remove(clean)
    return {"installed": True, "env": env, "rebuilt": rebuilt, "elapsed": round(time.monotonic() - start, 3)}


def _remove(env: str, envs: str, token: str) -> None:
    """Take an incomplete environment out of `envs/<id>` at once (a rename), then delete it."""
    doomed = os.path.join(envs, f".{os.path.basename(env)}.incomplete-{token}")
    os.rename(env, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


def _build(layout: Layout, req: dict[str, Any], build: str, links: str) -> None:
    """A complete, verified environment at `build` (relocatable, so it can be renamed)."""
    for w in req["wheels"]:
        os.symlink(layout.wheel(w["sha256"], w["filename"]), os.path.join(links, w["filename"]))
    reqs = os.path.join(links, "requirements.txt")
    with open(reqs, "w") as fh:
        for w in req["wheels"]:
            fh.write(f"{w['name']}=={w['version']} --hash=sha256:{w['sha256']}\n")
    uv = _uv(layout, req["uv"])
    uv_env = dict(
        os.environ,
        UV_CACHE_DIR=os.path.join(layout.root, "uv-cache"),
        UV_NO_CONFIG="1",
        UV_PYTHON_DOWNLOADS="never",
    )
    interp = req.get("interpreter")
    if interp:
        # The bundle's own Python: unpacked once per worker, the environment made from it.
        python_args = ["--python", unpack_interpreter(layout, interp, str(req["holder"]["token"]))]
    else:
        python_args = ["--python", req["python"], "--python-preference", "only-system"]
    _run([uv, "venv", "--quiet", "--relocatable", *python_args, build], uv_env, "creating the environment")
    _run(
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "--offline",
            "--no-index",
            "--no-deps",
            "--require-hashes",
            "--find-links",
            links,
            "--python",
            os.path.join(build, "bin", "python"),
            "-r",
            reqs,
        ],
        uv_env,
        "installing the bundle's wheels",
    )
    installed, python = _installed_versions(os.path.join(build, "bin", "python"))
    wrong = {
        w["name"]: (w["version"], installed.get(w["name"]))
        for w in req["wheels"]
        if installed.get(w["name"]) != w["version"]
    }
    if wrong:
        raise DeployFailure(
            "installed versions differ from the lock: "
            + ", ".join(f"{n} {got or 'missing'} (lock {want})" for n, (want, got) in sorted(wrong.items()))
        )
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "bundle_id": req["bundle_id"],
        "bundle": req["bundle"],
        "python": req["python"],
        "interpreter": _interpreter_record(layout, interp, python),
        "lock_digest": req.get("lock_digest"),
        "distributions": {w["name"]: w["version"] for w in req["wheels"]},
        "installed_at": time.time(),
    }
    _write_atomic(os.path.join(build, MANIFEST), json.dumps(manifest, indent=2, sort_keys=True))
    _write_atomic(os.path.join(build, COMPLETE), "")


def _run(argv: list[str], env: dict[str, Any], what: str) -> None:
    proc = run_child(argv, env)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-6:]
        text = " | ".join(tail)
        if "No space left on device" in text or "os error 28" in text:
            raise DeployFailure(f"{what}: no space left on device ({text})")
        raise DeployFailure(f"{what} failed (exit {proc.returncode}): {text}")


def _installed_versions(python: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The environment's distributions {name: version}, and its interpreter (version, build, base prefix)."""
    code = (
        "import json, importlib.metadata as m, os, platform, re, sys\n"
        "print(json.dumps({'dists': {re.sub(r'[-_.]+', '-', d.metadata['Name']).lower(): d.version "
        "for d in m.distributions()}, 'python': {'version': platform.python_version(), "
        "'build': ' '.join(sys.version.split()), 'base': os.path.realpath(sys.base_prefix)}}))"
    )
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        raise DeployFailure(f"cannot list installed distributions: {proc.stderr.strip()[-300:]}")
    doc = json.loads(proc.stdout)
    return dict(doc["dists"]), dict(doc["python"])


def _interpreter_record(layout: Layout, interp: dict[str, Any] | None, python: dict[str, Any]) -> dict[str, Any]:
    """What the manifest (and every receipt of a run in this environment) says about its Python."""
    if not interp:
        return {"source": "system", "version": python["version"], "build": python["build"], "path": python["base"]}
    if python["version"] != interp["version"]:
        raise DeployFailure(
            f"the environment runs Python {python['version']}, the bundle's interpreter is {interp['version']}"
        )
    return {
        "source": "artifact",
        "version": interp["version"],
        "abi": interp.get("abi"),
        "build": interp.get("build"),
        "sha256": interp["sha256"],
        "filename": interp["filename"],
        "path": os.path.join(layout.interpreter(interp["sha256"]), "python"),
    }
