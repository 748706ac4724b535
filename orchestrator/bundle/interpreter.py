"""A bundle's own Python: a relocatable CPython distribution that travels to workers like a wheel.

The artifact is a tar.gz in python-build-standalone's "install_only" layout
(`python/bin/python3`, `python/lib/python3.X/...`), named in fleet.yaml by path
or URL with its sha256, or made by `orch bundle interpreter pack` from a Python
installed on the controller (see `interpreter_pack`). The lock records it by
hash beside the wheels and it is part of the bundle id; deploy sends it through
the same store and relay, and each worker unpacks it once
(`<root>/interpreters/<sha256[:16]>/python`) and builds the environment from it.

What a lock knows about an artifact is read from the archive itself, never
from its name: the version from `include/python3.X/patchlevel.h`, the ABI
(a free-threaded build has `python3.Xt` directories), and the build line that
`pack` writes to `python/ORCH-INTERPRETER.json` (for other archives: the file name).
"""

from __future__ import annotations

import json
import re
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.tags import Tag, parse_tag

from orchestrator.bundle.lockfile import INTERPRETER_FILENAME, LockedInterpreter, WheelMeta
from orchestrator.bundle.target import WheelTarget
from orchestrator.errors import BundleError

ROOT = "python"  # every member of an install_only archive is under it
EXECUTABLE = f"{ROOT}/bin/python3"
INFO = f"{ROOT}/ORCH-INTERPRETER.json"  # written by `orch bundle interpreter pack`


@dataclass(frozen=True)
class InterpreterInfo:
    """What an interpreter archive holds: its CPython version, ABI tag and build."""

    version: str  # full, e.g. 3.13.0
    abi: str  # cp313, or cp313t for a free-threaded build
    build: str

    @property
    def minor(self) -> str:
        """X.Y of `version`."""
        return ".".join(self.version.split(".")[:2])


def artifact_filename(source: str) -> str:
    """The plain file name a path or URL of an interpreter archive ends in (refused unless .tar.gz)."""
    name = source.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0].split("#", 1)[0]
    from urllib.parse import unquote

    name = unquote(name)
    if not INTERPRETER_FILENAME.fullmatch(name):
        raise BundleError(
            f"interpreter {source}: not a .tar.gz archive name",
            hint="an interpreter is a python-build-standalone install_only .tar.gz, "
            "or what `orch bundle interpreter pack` writes",
        )
    return name


def inspect_archive(path: Path, origin: str | None = None) -> InterpreterInfo:
    """Version, ABI and build of the interpreter archive at `path`; refuses what is not one."""
    where = origin or str(path)
    try:
        with tarfile.open(path, "r:gz") as tf:
            members = {m.name.removeprefix("./"): m for m in tf.getmembers()}
            info_doc = _read_json(tf, members.get(INFO))
            patchlevel = next(
                (
                    _read_text(tf, m)
                    for name, m in members.items()
                    if re.fullmatch(rf"{ROOT}/include/python3\.\d+t?/patchlevel\.h", name)
                ),
                None,
            )
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise BundleError(f"interpreter {where}: not a readable .tar.gz archive ({exc})") from None
    if EXECUTABLE not in members:
        raise BundleError(
            f"interpreter {where}: no {EXECUTABLE} in the archive",
            hint="expected python-build-standalone's install_only layout (python/bin/python3, python/lib/...)",
        )
    libs = sorted(
        m.group(1) for name in members if (m := re.fullmatch(rf"{ROOT}/lib/python(3\.\d+t?)(/.*)?", name)) is not None
    )
    if not libs:
        raise BundleError(f"interpreter {where}: no {ROOT}/lib/python3.X directory in the archive")
    lib = libs[0]
    version = _patchlevel_version(patchlevel) if patchlevel else None
    if version is None:
        raise BundleError(f"interpreter {where}: no {ROOT}/include/python{lib}/patchlevel.h saying its version")
    if not version.startswith(lib.rstrip("t") + "."):
        raise BundleError(f"interpreter {where}: patchlevel.h says {version}, but its library is python{lib}")
    abi = "cp" + lib.replace(".", "")
    build = str(info_doc.get("build")) if isinstance(info_doc, dict) and info_doc.get("build") else Path(where).name
    return InterpreterInfo(version=version, abi=abi, build=build)


def _read_text(tf: tarfile.TarFile, member: tarfile.TarInfo | None) -> str | None:
    if member is None or not member.isfile() or member.size > 1 << 20:
        return None
    fh = tf.extractfile(member)
    return fh.read().decode("utf-8", "replace") if fh else None


def _read_json(tf: tarfile.TarFile, member: tarfile.TarInfo | None) -> object:
    text = _read_text(tf, member)
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def _patchlevel_version(text: str) -> str | None:
    m = re.search(r'#define\s+PY_VERSION\s+"([^"]+)"', text)
    return m.group(1) if m else None


# ---------------------------------------------------------------------------
# The checks (pure): an interpreter against the bundle's Python and its wheels


def interpreter_problems(
    interpreter: LockedInterpreter | InterpreterInfo, python: str, wheels: Iterable[WheelMeta]
) -> list[tuple[str, str | None]]:
    """(message, wheel label or None) for each way `interpreter` cannot run a bundle of `python` with `wheels`."""
    out: list[tuple[str, str | None]] = []
    label = f"CPython {interpreter.version} ({interpreter.abi})"
    if interpreter.minor != python:
        out.append((f"the bundle's interpreter is {label}, but the bundle's Python is {python}", None))
    accepted = set(interpreter_tags(interpreter))
    for wheel in wheels:
        tags = {t for text in wheel.tags for t in parse_tag(text)}
        if tags and not tags & accepted:
            built_for = ", ".join(
                sorted({t.interpreter if t.abi == "none" else f"{t.interpreter}-{t.abi}" for t in tags})
            )
            out.append(
                (f"{wheel.label} ({wheel.filename}) is built for {built_for}; the interpreter is {label}", wheel.label)
            )
    return out


def interpreter_tags(interpreter: LockedInterpreter | InterpreterInfo) -> list[Tag]:
    """Every wheel tag the interpreter's installer accepts on the target platform."""
    from packaging.tags import compatible_tags, cpython_tags

    target = WheelTarget(interpreter.minor)
    platforms = target.platforms()
    return [
        *cpython_tags(target.version_info, abis=[interpreter.abi], platforms=platforms),
        *compatible_tags(target.version_info, "cp", platforms),
    ]


def require_fit(
    bundle: str, interpreter: LockedInterpreter | InterpreterInfo, python: str, wheels: Iterable[WheelMeta]
) -> None:
    """Refuse (BundleError) an interpreter that cannot run the bundle, naming the first mismatch."""
    problems = interpreter_problems(interpreter, python, wheels)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise BundleError(
            f"bundle '{bundle}': {problems[0][0]}{more}",
            hint="give the bundle an interpreter of its Python version (orch bundle interpreter pack PREFIX), "
            "or set its `python` to the interpreter's",
        )
