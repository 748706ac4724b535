"""hostside runs on a worker's plain Python before any bundle exists."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

HOSTSIDE = Path(__file__).resolve().parent.parent / "hostside"
# Frontends are imported lazily inside functions that run under a bundle's Python.
LAZY = {"jax", "jaxlib", "torch", "torch_xla", "torch_tpu", "numpy", "libtpu"}


def module_level_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    out = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
    return out


def all_imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
    return out


def test_hostside_imports_only_the_standard_library_at_module_level():
    allowed = set(sys.stdlib_module_names) | {"hostside", "__future__"}
    bad = [
        f"{p.name}:{line} imports {name}"
        for p in sorted(HOSTSIDE.rglob("*.py"))
        for line, name in module_level_imports(p)
        if name.split(".")[0] not in allowed
    ]
    assert bad == []


def test_hostside_imports_nothing_but_stdlib_and_lazy_frontends_anywhere():
    allowed = set(sys.stdlib_module_names) | {"hostside", "__future__"} | LAZY
    bad = [
        f"{p.name}:{line} imports {name}"
        for p in sorted(HOSTSIDE.rglob("*.py"))
        for line, name in all_imports(p)
        if name.split(".")[0] not in allowed
    ]
    assert bad == []


def test_recorded_environments_keep_policy_values_and_drop_credentials():
    from hostside import redact

    assert redact.env(
        {
            "XLA_FLAGS": "--xla_foo=1",
            "HF_TOKEN": "hf_x",
            "WANDB_API_KEY": "k",
            "DB_PASSWORD": "p",
            "AWS_SECRET_ACCESS_KEY": "s",
            "PIP_INDEX_URL": "https://u:p@host/simple",
            "PJRT_DEVICE": "TPU",
        }
    ) == {
        "XLA_FLAGS": "--xla_foo=1",
        "HF_TOKEN": "<redacted>",
        "WANDB_API_KEY": "<redacted>",
        "DB_PASSWORD": "<redacted>",
        "AWS_SECRET_ACCESS_KEY": "<redacted>",
        "PIP_INDEX_URL": "https://<redacted>@host/simple",
        "PJRT_DEVICE": "TPU",
    }


def test_credentials_inside_values_are_cut_out_but_ordinary_flags_are_kept():
    from hostside import redact

    assert redact.value("INDEX", "https://u:p@ss@host/simple") == "https://<redacted>@host/simple"
    assert (
        redact.value("DATA", "https://b.s3.amazonaws.com/x?X-Amz-Signature=abc&X-Amz-Date=1")
        == "https://b.s3.amazonaws.com/x?X-Amz-Signature=<redacted>&X-Amz-Date=1"
    )
    assert redact.value("HUB", "https://hub/f?token=t0k&rev=main") == "https://hub/f?token=<redacted>&rev=main"
    assert all(redact.is_secret(n) for n in ("SSH_KEY", "KEY", "SMTP_PASS", "GPG_PASSPHRASE", "SESSION_COOKIE"))
    assert not any(
        redact.is_secret(n)
        for n in (
            "XLA_FLAGS",
            "PJRT_DEVICE",
            "TPU_WORKER_HOSTNAMES",
            "KEYBOARD",
            "LIBTPU_INIT_ARGS",
            "JAX_COMPILATION_CACHE_DIR",
        )
    )
    assert redact.value("XLA_FLAGS", "--xla_dump_to=/tmp/a@b --xla_foo=1") == "--xla_dump_to=/tmp/a@b --xla_foo=1"
