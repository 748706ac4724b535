"""The probe's bundle check: the lane's active bundle, its installed versions vs its manifest and pins."""

from __future__ import annotations

import glob
import json
import os
import re
from typing import Any

from hostside import frontends
from hostside.deploy_store import COMPLETE, files_problem
from hostside.layout import Layout
from hostside.pins import normalize
from hostside.probe_check import Check

# Distributions whose versions make up a bundle's identity (normalized names).
TRACKED = ("torch", "torch-xla", "jax", "jaxlib", "libtpu", "libtpu-nightly", "torch-tpu")


def same_version(a: str, b: str) -> bool:
    """Exact versions, tolerant of trailing '.0' release parts and case ('2.9' == '2.9.0')."""

    def key(v: str) -> tuple[Any, ...]:
        v = v.strip().lower().lstrip("v")
        local = ""
        if "+" in v:
            v, local = v.split("+", 1)
        m = re.match(r"^(\d+(?:\.\d+)*)(.*)$", v)
        if not m:
            return (v, local)
        release = [int(p) for p in m.group(1).split(".")]
        while len(release) > 1 and release[-1] == 0:
            release.pop()
        return (tuple(release), m.group(2), local)

    return key(a) == key(b)


def compare_distributions(
    installed: dict[str, str], manifest: dict[str, str] | None, pins: dict[str, str] | None
) -> list[str]:
    """Differences between what is installed and what the manifest and the fleet's pins say."""
    problems = []
    for source, wanted in (("the bundle manifest", manifest), ("the fleet pins", pins)):
        for name, version in sorted((wanted or {}).items()):
            have = installed.get(normalize(name))
            if have is None:
                problems.append(f"{normalize(name)} {version} is in {source} but not installed")
            elif not same_version(have, version):
                problems.append(f"{normalize(name)} installed {have}, {source} says {version}")
    return problems


def installed_distributions(env_dir: str) -> dict[str, str]:
    """{normalized name: version} from the dist-info directories of an environment."""
    found: dict[str, str] = {}
    for meta in sorted(glob.glob(os.path.join(env_dir, "lib", "python*", "site-packages", "*.dist-info", "METADATA"))):
        name = version = None
        try:
            with open(meta, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if line.startswith("Name:") and name is None:
                        name = line.split(":", 1)[1].strip()
                    elif line.startswith("Version:") and version is None:
                        version = line.split(":", 1)[1].strip()
                    elif not line.strip():
                        break
        except OSError:
            continue
        if name and version:
            found[normalize(name)] = version
    return found


def active_env(root: str, lane: str) -> tuple[str | None, str | None]:
    """(bundle id, environment directory) of a lane's active link, or (None, None)."""
    link = Layout(root).active(lane)
    if os.path.islink(link):
        target = os.path.join(os.path.dirname(link), os.readlink(link))
    elif os.path.isdir(link):
        target = link
    else:
        return None, None
    target = os.path.normpath(target)
    return os.path.basename(target.rstrip("/")), target


def check_bundle(req: dict[str, Any], state: dict[str, Any]) -> Check:
    """The lane's active bundle, its Python, and its installed versions against its manifest and the pins."""
    c = Check("bundle")
    lane = req.get("lane")
    if not lane:
        c.status, c.summary = "skip", "worker is in no lane"
        return c
    root = req["root"]
    bundle_id, env = active_env(root, lane)
    link = Layout(root).active(lane)
    if bundle_id is None and not os.path.islink(link) and not req.get("deep", True):
        # Before the first deploy a shallow probe only asks "is the host ready for one?".
        c.mark("warn", f"lane {lane} has no bundle deployed here yet ({link} does not exist)")
        return c
    if bundle_id is None or env is None or not os.path.isdir(env):
        c.mark(
            "fail",
            f"lane {lane} has no active bundle here ({link} "
            f"{'is dangling' if os.path.islink(link) else 'does not exist'}); deploy the lane first",
            layer="bundle-skew",
        )
        return c
    state["bundle_id"], state["env"] = bundle_id, env
    python = os.path.join(env, "bin", "python")
    c.data = {"bundle_id": bundle_id, "env": env, "python": python}
    interp = _manifest_interpreter(env)
    if interp:
        c.data["interpreter"] = {k: interp.get(k) for k in ("source", "version", "abi", "sha256", "build", "path")}
    if not os.access(python, os.X_OK):
        why = ""
        if interp.get("source") == "artifact":
            why = (
                f": its interpreter, CPython {interp.get('version')} from archive "
                f"{str(interp.get('sha256'))[:12]}, is not at {interp.get('path')}; redeploy the lane"
            )
        c.mark("fail", f"bundle {bundle_id} has no Python at {python}{why}", layer="bundle-skew")
        return c
    state["python"] = python
    installed = installed_distributions(env)
    state["installed"] = installed
    versions = {name: installed[name] for name in TRACKED if name in installed}
    c.data["versions"] = versions
    manifest = None
    manifest_path = os.path.join(env, "orch-bundle.json")
    try:
        with open(manifest_path) as fh:
            manifest = json.load(fh)
        c.data["manifest"] = {k: manifest.get(k) for k in ("schema_version", "bundle_id", "bundle", "python")}
    except FileNotFoundError:
        c.mark("warn", f"no manifest ({manifest_path}): installed versions not checked against a deploy record")
    except (OSError, ValueError) as exc:
        c.mark("warn", f"unreadable manifest {manifest_path}: {exc}")
    wanted_bundle = (req.get("bundle") or {}).get("name")
    if manifest:
        if wanted_bundle and manifest.get("bundle") and manifest["bundle"] != wanted_bundle:
            c.mark(
                "fail",
                f"lane {lane} runs bundle '{manifest['bundle']}' ({bundle_id}), the fleet says "
                f"'{wanted_bundle}'; redeploy the lane",
                layer="bundle-skew",
            )
        if manifest.get("bundle_id") and manifest["bundle_id"] != bundle_id:
            c.mark("warn", f"manifest names bundle id {manifest['bundle_id']}, the active link {bundle_id}")
    dists = manifest.get("distributions") if isinstance(manifest, dict) else None
    if manifest is not None:  # a deployed environment: its install finished, nothing lost since
        if not os.path.exists(os.path.join(env, COMPLETE)):
            c.mark(
                "fail",
                f"bundle {bundle_id}'s install did not finish (no {COMPLETE}); redeploy the lane",
                layer="bundle-skew",
            )
        for name in sorted(dists) if isinstance(dists, dict) else ():
            problem = files_problem(env, name)
            if problem:
                c.mark("fail", f"bundle {bundle_id} is incomplete: {problem}; redeploy the lane", layer="bundle-skew")
    for problem in compare_distributions(
        installed, dists if isinstance(dists, dict) else None, (req.get("bundle") or {}).get("pins")
    ):
        c.mark("fail", problem, layer="bundle-skew")
    have = [f for f, dist in frontends.DISTRIBUTION.items() if dist in installed]
    for frontend in req.get("frontends") or []:
        if frontend not in have:
            c.mark(
                "fail",
                f"bundle {bundle_id} lacks frontend {frontend} "
                f"({frontends.DISTRIBUTION.get(frontend, frontend)} not installed)",
                layer="bundle-skew",
            )
    state["frontends"] = runtime_frontends(installed, req.get("platform"))
    shown = ", ".join(f"{k} {v}" for k, v in versions.items()) or "no tracked distributions"
    origin = f" from archive {str(interp.get('sha256'))[:12]}" if interp.get("source") == "artifact" else ""
    c.summary = f"{bundle_id}: {shown}" + (f"; python {interp.get('version')}{origin}" if interp else "")
    return c


def _manifest_interpreter(env: str) -> dict[str, Any]:
    """The interpreter an environment's manifest names ({} when it names none)."""
    try:
        with open(os.path.join(env, "orch-bundle.json")) as fh:
            interp = json.load(fh).get("interpreter")
    except (OSError, ValueError, AttributeError):
        return {}
    return interp if isinstance(interp, dict) else {}


def runtime_frontends(installed: dict[str, str], platform: str | None) -> list[str]:
    """Frontends the runtime check imports: the bundle's frontends (hostside.frontends, the launcher's
    answer too) that can prove anything on `platform` (plain torch only on a cpu lane)."""
    return list(frontends.provable(frontends.frontends(installed), platform))
