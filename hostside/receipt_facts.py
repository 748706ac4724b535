"""Facts for a process's receipt, observed from inside the process (the launcher calls these).

Nothing here imports a frontend that the process has not imported already,
and nothing here initialises a runtime: devices are read only from a backend
the run itself brought up, so a receipt never changes what ran. Every check
is recorded, never raised: a fact that cannot be observed says why.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import sys
from collections.abc import Iterable
from typing import Any

# Distributions every receipt names, installed or not (None), with the keys the receipt uses.
STACK = {
    "torch": "torch",
    "torch_xla": "torch_xla",
    "jax": "jax",
    "jaxlib": "jaxlib",
    "libtpu": "libtpu",
    "torch_tpu": "torch-tpu",
}
# Other distribution names the same component ships under.
ALIASES = {"libtpu": ("libtpu-nightly",), "torch_tpu": ("torch_tpu",)}
# Modules whose own idea of their version is recorded (when the process imported them).
REPORTING_MODULES = ("torch", "torch_xla", "jax", "jaxlib", "libtpu", "torch_tpu")

# Version-gated capabilities: (name, owning top-level module, how to check).
CAPABILITIES = (
    ("torch_xla.experimental.scan_layers", "torch_xla", "module"),
    ("torch_xla.experimental.custom_kernel", "torch_xla", "module"),
    ("torch_xla.runtime.initialize_cache", "torch_xla", "attribute"),
    ("torch_xla._XLAC._xla_runtime_memory_info", "torch_xla", "attribute"),
    ("jax.experimental.pallas", "jax", "module"),
    ("jax.shard_map", "jax", "attribute"),
)


def key(dist: str) -> str:
    """The receipt's key for a distribution name (`torch-xla` -> `torch_xla`)."""
    return dist.lower().replace("-", "_").replace(".", "_")


def installed_versions(distributions: Iterable[str] = ()) -> dict[str, Any]:
    """Installed versions of the stack (None: not installed) and of the bundle's own distributions."""
    from importlib import metadata

    def version(*names: str) -> str | None:
        for name in names:
            try:
                return metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
        return None

    seen: dict[str, str | None] = {"python": platform.python_version()}
    for k, dist in STACK.items():
        seen[k] = version(dist, *ALIASES.get(k, ()))
    for dist in distributions:
        seen.setdefault(key(dist), version(dist))
    return seen


def reported_versions() -> dict[str, Any]:
    """What the imported modules and the runtimes that came up say about themselves."""
    out = {"python": sys.version.split()[0], "python_implementation": platform.python_implementation()}
    for name in REPORTING_MODULES:
        mod = sys.modules.get(name)
        if mod is None:
            continue
        ver = getattr(mod, "__version__", None)
        if ver is None and name == "jaxlib":
            ver = getattr(sys.modules.get("jaxlib.version"), "__version__", None)
        if ver is not None:
            out[name] = str(ver)
    if "jax" in sys.modules:
        try:
            from jax._src import xla_bridge as xb

            if xb.backends_are_initialized():
                backend = xb.get_backend()
                version = " | ".join(
                    line.strip() for line in str(backend.platform_version).splitlines() if line.strip()
                )
                out["jax_backend"] = (
                    backend.platform if version in ("", backend.platform) else f"{backend.platform} ({version})"
                )
        except Exception as exc:  # a jax without these internals: say so, do not fail
            out["jax_backend"] = f"unknown ({exc.__class__.__name__}: {exc})"
    if "torch_xla" in sys.modules:
        # The builds' own commits: custom torch_xla lines differ by these, not by their version labels.
        try:
            import torch_xla.version as txv

            for attr, name in (("__xla_gitrev__", "openxla_gitrev"), ("__torch_gitrev__", "torch_gitrev")):
                if getattr(txv, attr, None):
                    out[name] = str(getattr(txv, attr))
        except Exception as exc:
            out["openxla_gitrev"] = f"unknown ({exc.__class__.__name__}: {exc})"
    return out


def devices(frontends: Iterable[str] = ()) -> dict[str, Any]:
    """The devices that answered, per frontend, plus a `summary` of the primary one.

    Only backends the run brought up are read (no runtime is started here).
    """
    out: dict[str, Any] = {}
    if "jax" in sys.modules:
        out["jax"] = _jax_devices()
    if "torch_xla" in sys.modules:
        out["torch_xla"] = _torch_xla_devices()
    if "torch" in sys.modules:
        out["torch"] = _torch_devices()
    order = [f for f in frontends if f in out] + [f for f in ("torch_xla", "jax", "torch") if f in out]
    summary = None
    for frontend in order:
        d = out[frontend]
        if d.get("initialized"):
            summary = {
                "frontend": frontend,
                "kind": d.get("platform"),
                "device_kind": d.get("device_kind"),
                "count": d.get("count"),
                "local_count": d.get("local_count"),
            }
            break
    out["summary"] = summary
    return out


def _jax_devices() -> dict[str, Any]:
    try:
        import jax
        from jax._src import xla_bridge as xb

        if not xb.backends_are_initialized():
            return {"initialized": False, "detail": "the run never brought up a jax backend"}
        devs = jax.devices()
        return {
            "initialized": True,
            "platform": devs[0].platform if devs else None,
            "device_kind": devs[0].device_kind if devs else None,
            "count": len(devs),
            "local_count": jax.local_device_count(),
            "process_index": jax.process_index(),
            "process_count": jax.process_count(),
        }
    except Exception as exc:
        return {"initialized": None, "error": f"{exc.__class__.__name__}: {exc}"}


def _torch_xla_runtime_up() -> bool | None:
    """Whether the torch_xla runtime is up; None when this build cannot say without starting it."""
    import torch_xla

    for name in ("_xla_runtime_is_initialized", "is_runtime_initialized"):
        check = getattr(torch_xla._XLAC, name, None)
        if check is not None:
            return bool(check())
    return None


def _torch_xla_devices() -> dict[str, Any]:
    try:
        import torch_xla.runtime as xr

        up = _torch_xla_runtime_up()
        if not up:
            return {
                "initialized": up,
                "pjrt_device": os.environ.get("PJRT_DEVICE"),
                "detail": "the run never brought up the torch_xla runtime"
                if up is False
                else "this torch_xla cannot say whether its runtime is up (not started here to find out)",
            }
        info = {
            "initialized": True,
            "platform": str(xr.device_type()).lower(),
            "count": xr.global_runtime_device_count(),
            "pjrt_device": os.environ.get("PJRT_DEVICE"),
        }
        info["local_count"] = (
            xr.addressable_runtime_device_count() if hasattr(xr, "addressable_runtime_device_count") else None
        )
        try:
            import torch_xla.core.xla_model as xm

            info["device_kind"] = xm.xla_device_hw(xm.xla_device())
        except Exception as exc:
            info["device_kind"] = None
            info["device_kind_error"] = f"{exc.__class__.__name__}: {exc}"
        return info
    except Exception as exc:
        return {"initialized": None, "error": f"{exc.__class__.__name__}: {exc}"}


def _torch_devices() -> dict[str, Any]:
    try:
        import torch

        info: dict[str, Any] = {"initialized": True}
        if torch.cuda.is_available():
            info.update(
                platform="cuda",
                count=torch.cuda.device_count(),
                local_count=torch.cuda.device_count(),
                device_kind=torch.cuda.get_device_name(0),
            )
        else:
            info.update(platform="cpu", count=1, local_count=1, device_kind=platform.machine() or "cpu")
        try:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                info["process_group"] = {
                    "backend": str(dist.get_backend()),
                    "world_size": dist.get_world_size(),
                    "rank": dist.get_rank(),
                }
                info["count"] = info["local_count"] * dist.get_world_size()
        except Exception:
            pass
        return info
    except Exception as exc:
        return {"initialized": None, "error": f"{exc.__class__.__name__}: {exc}"}


def capabilities() -> dict[str, Any]:
    """Version-gated features of the imported frontends: present or not (never raises, never imports a frontend)."""
    out: dict[str, dict[str, Any]] = {}
    for name, owner, how in CAPABILITIES:
        if owner not in sys.modules:
            continue
        entry: dict[str, Any] = {"present": None, "how": how}
        try:
            if how == "module":
                entry["present"] = importlib.util.find_spec(name) is not None
            else:
                module_name, _, attr = name.rpartition(".")
                module = sys.modules.get(module_name)
                if module is None:
                    module = importlib.import_module(module_name)
                entry["present"] = hasattr(module, attr)
        except Exception as exc:
            entry["present"] = False
            entry["error"] = f"{exc.__class__.__name__}: {exc}"
        out[name] = entry
    return out


def bundle_id(prefix: str | None = None) -> str | None:
    """The bundle id of the environment this Python runs in (`<root>/envs/<bundle-id>`), if it is one."""
    env = os.path.realpath(prefix or sys.prefix)
    parent = os.path.basename(os.path.dirname(env))
    return os.path.basename(env) if parent == "envs" else None


def interpreter(prefix: str | None = None) -> dict[str, Any]:
    """The Python this process runs on: the bundle's own interpreter archive (its sha256, version, build)
    as the environment's manifest names it, or the worker's system Python."""
    import json

    here = {
        "version": platform.python_version(),
        "build": " ".join(sys.version.split()),
        "path": os.path.realpath(sys.base_prefix),
    }
    try:
        with open(os.path.join(prefix or sys.prefix, "orch-bundle.json")) as fh:
            recorded = json.load(fh).get("interpreter")
    except (OSError, ValueError, AttributeError):
        recorded = None
    if not isinstance(recorded, dict) or recorded.get("source") != "artifact":
        return {"source": "system", "sha256": None, **here}
    out = {
        "source": "artifact",
        "sha256": str(recorded.get("sha256")),
        "filename": str(recorded.get("filename")),
        "abi": str(recorded.get("abi")),
        **here,
    }
    if recorded.get("version") != here["version"] or os.path.realpath(str(recorded.get("path"))) != here["path"]:
        out["mismatch"] = (
            f"the environment's manifest names CPython {recorded.get('version')} at {recorded.get('path')}, "
            f"this process runs {here['version']} at {here['path']}"
        )
    return out
