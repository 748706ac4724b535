"""A bundle environment on disk as a finished install leaves it, for unit tests
of the worker side (no uv, no wheels): completion marker, manifest, bin/python,
and each distribution's dist-info with METADATA and a RECORD listing its files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hostside.deploy_store import COMPLETE, MANIFEST


def complete_env(root: Path, bundle_id: str, dists: dict[str, str] | None = None) -> Path:
    dists = {"six": "1.17.0"} if dists is None else dists
    env = root / "envs" / bundle_id
    site = env / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    for name, version in dists.items():
        module = name.replace("-", "_")
        info = site / f"{module}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nbody\n")
        (site / f"{module}.py").write_text("")
        (info / "RECORD").write_text(
            f"{module}.py,sha256=x,0\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n"
            f"__pycache__/{module}.cpython-311.pyc,,\n"
        )
    (env / "bin").mkdir(exist_ok=True)
    (env / "bin" / "python").symlink_to(sys.executable)
    manifest = {"schema_version": 1, "bundle_id": bundle_id, "bundle": "b", "distributions": dists}
    (env / MANIFEST).write_text(json.dumps(manifest))
    (env / COMPLETE).write_text("")
    return env
