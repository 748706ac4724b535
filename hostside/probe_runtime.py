"""The probe's runtime child: import one frontend under the lane's policy and compute on its device.

    BUNDLE_PYTHON -c "$(cat probe_runtime.py)" FRONTEND MARK

Runs under the bundle's Python, started by `hostside.probe_runtime_check`
with the policy's environment already applied. The source is handed over
with `-c` (not `-m`, not by path) so that neither hostside's directory nor a
PYTHONPATH sits on the child's `sys.path`: the frontend is imported exactly
as a user's program would import it. So this module imports nothing from
hostside, and frontends only inside `measure`.

Prints one line `MARK {json}` on stdout (frontend, version, platform,
device_kind, device counts, the test computation's value, or an error);
everything the runtime logs goes to stderr. Exits 0 on success, 1 on error.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import traceback
from typing import Any

EXPECTED = 3920.0  # sum of (x @ x) for x = arange(16).reshape(4, 4)


def measure(frontend: str, out: dict[str, Any]) -> float:
    """Import `frontend`, fill `out` with what answered, and return the test computation's value."""
    if frontend == "jax":
        import jax
        import jax.numpy as jnp

        out["version"] = jax.__version__
        devices = jax.devices()
        out["device_count"] = len(devices)
        out["local_device_count"] = jax.local_device_count()
        out["process_count"] = jax.process_count()
        out["platform"] = devices[0].platform
        out["device_kind"] = devices[0].device_kind
        out["devices"] = [str(d) for d in devices[:8]]
        x = jnp.arange(16.0, dtype=jnp.float32).reshape(4, 4)
        return float(jax.block_until_ready((x @ x).sum()))
    if frontend == "torch_xla":
        import torch
        import torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.runtime as xr

        out["version"] = getattr(torch_xla, "__version__", "?")
        device = torch_xla.device() if hasattr(torch_xla, "device") else xm.xla_device()
        out["platform"] = str(xr.device_type()).lower()
        out["device_kind"] = str(xm.xla_device_hw(device))
        out["device_count"] = xr.global_runtime_device_count()
        out["local_device_count"] = xr.addressable_runtime_device_count()
        t = torch.arange(16.0, dtype=torch.float32, device=device).reshape(4, 4)
        return float((t @ t).sum().cpu())
    if frontend == "torch_tpu":
        import torch
        import torch_tpu

        out["version"] = getattr(torch_tpu, "__version__", "?")
        backend = getattr(torch.backends, "tpu", None)
        if backend is not None and hasattr(backend, "is_available") and not backend.is_available():
            raise RuntimeError("torch.backends.tpu.is_available() is False")
        device = torch.device("tpu")
        t = torch.arange(16.0, dtype=torch.float32).reshape(4, 4).to(device)
        value = float((t @ t).sum().cpu())
        out["platform"] = "tpu"
        out["device_kind"] = "tpu"
        mod = getattr(torch, "tpu", None)
        out["device_count"] = mod.device_count() if mod is not None and hasattr(mod, "device_count") else None
        return value
    import torch

    out["version"] = torch.__version__
    t = torch.arange(16.0, dtype=torch.float32).reshape(4, 4)
    out["platform"] = "cpu"
    out["device_kind"] = "cpu"
    out["device_count"] = 1
    return float((t @ t).sum())


def main(argv: list[str]) -> int:
    """Probe `argv[0]` (a frontend), print the result after the mark `argv[1]`; the exit code."""
    frontend, mark = argv[0], argv[1]
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    # JAX reports why a backend failed to initialize only at INFO level.
    for name in ("jax._src.xla_bridge", "jax._src.xla_bridge.backends"):
        logging.getLogger(name).setLevel(logging.INFO)
    out: dict[str, Any] = {"frontend": frontend}
    start = time.monotonic()
    try:
        value = measure(frontend, out)
        out["value"] = value
        out["expected"] = EXPECTED
        out["computed"] = abs(value - EXPECTED) < 1e-3
        code = 0
    except BaseException as exc:  # everything, SystemExit included, is reported as the answer
        traceback.print_exc()
        out["error"] = f"{type(exc).__name__}: {exc}".strip()
        code = 1
    out["elapsed"] = round(time.monotonic() - start, 3)
    sys.stdout.write(mark + json.dumps(out, default=str) + "\n")
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
