"""`orch bundle interpreter pack PREFIX`: a Python installed on the controller as a relocatable artifact.

The installation is copied under `python/` (python-build-standalone's install_only
layout) without what a bundle environment never needs: byte code caches, the
test suites, site-packages (a bundle's packages live in its environment), the
static library, scripts whose `#!` names the old prefix. It is then made
relocatable:

- every ELF file whose RUNPATH (or RPATH) names a directory of the prefix gets
  that entry rewritten relative to itself (`$ORIGIN/../lib` for bin/python3.X).
  The rewrite is done in place in the dynamic string table, so the new entry
  must be no longer than the old one (it always is for a `$ORIGIN` path
  replacing an absolute prefix); anything else is refused, never half done;
- `_sysconfigdata_*.py` resolves the old prefix against `sys.base_prefix` when
  it is imported, so sysconfig's paths follow the interpreter where it lands;
- pkg-config files say `prefix=${pcfiledir}/../..`.

CPython finds its own prefix from its executable's location, so nothing else
names the old place. The tar is deterministic (sorted members, mtime 0, owner
root, normalised modes, gzip without name or time): packing the same
installation twice gives the same sha256.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import stat
import struct
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.bundle.interpreter import INFO, ROOT, InterpreterInfo, inspect_archive
from orchestrator.errors import BundleError

_PROBE = (
    "import json, sys, sysconfig; print(json.dumps({'version': '%d.%d.%d' % sys.version_info[:3], "
    "'release': sys.version.split()[0], 'build': sys.version, 'implementation': sys.implementation.name, "
    "'gil_disabled': bool(sysconfig.get_config_var('Py_GIL_DISABLED')), 'prefix': sys.prefix, "
    "'machine': sysconfig.get_platform()}))"
)
_DROP_BIN = re.compile(r"^(idle|pydoc|pip|2to3|easy_install).*|.*-gdb\.py$")
_DROP_DIRS = {"__pycache__", "test", "tests", "idle_test"}


@dataclass(frozen=True)
class PackResult:
    """What `pack` wrote."""

    path: Path
    sha256: str
    size: int
    info: InterpreterInfo
    prefix: str
    relocated: tuple[str, ...]  # ELF files whose RUNPATH was rewritten, relative to python/
    files: int

    def to_json(self) -> dict[str, object]:
        """The `orch bundle interpreter pack --json` document."""
        return {
            "schema_version": 1,
            "path": str(self.path),
            "filename": self.path.name,
            "sha256": self.sha256,
            "size": self.size,
            "version": self.info.version,
            "abi": self.info.abi,
            "build": self.info.build,
            "prefix": self.prefix,
            "files": self.files,
            "relocated": list(self.relocated),
            "fleet": {"interpreter": {"path": str(self.path), "sha256": self.sha256}},
        }


def pack(prefix: Path, out: Path | None = None) -> PackResult:
    """Pack the CPython installed at `prefix` into a relocatable, reproducible tar.gz."""
    prefix = prefix.expanduser().resolve()
    python = _executable(prefix)
    facts = _facts(python)
    minor = ".".join(facts["version"].split(".")[:2])
    if facts["implementation"] != "cpython":
        raise BundleError(f"{python}: {facts['implementation']}, not CPython; only CPython can be packed")
    if facts["machine"] != "linux-x86_64":
        raise BundleError(f"{python}: built for {facts['machine']}; workers run linux-x86_64")
    suffix = "t" if facts["gil_disabled"] else ""
    info = {
        "schema_version": 1,
        "implementation": "cpython",
        "version": facts["release"],
        "abi": f"cp{minor.replace('.', '')}{suffix}",
        "build": " ".join(facts["build"].split()),
        "packed_from": str(prefix),
    }
    out = (out or Path.cwd() / f"cpython-{facts['release']}{suffix}-linux-x86_64-orch.tar.gz").expanduser().resolve()
    members, relocated = _members(prefix, minor + suffix)
    info_bytes = (json.dumps(info, indent=1, sort_keys=True) + "\n").encode()
    members.append((INFO, _file_info(INFO, 0o644, len(info_bytes)), info_bytes))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.part")
    try:
        with open(tmp, "wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz:
                with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tf:
                    for _, tinfo, data in sorted(members, key=lambda m: m[0]):
                        tf.addfile(tinfo, io.BytesIO(data) if data is not None else None)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    digest = hashlib.sha256()
    with open(out, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return PackResult(
        path=out,
        sha256=digest.hexdigest(),
        size=out.stat().st_size,
        info=inspect_archive(out),
        prefix=str(prefix),
        relocated=tuple(relocated),
        files=len(members),
    )


def _executable(prefix: Path) -> Path:
    for name in ("python3", "python"):
        candidate = prefix / "bin" / name
        if candidate.exists():
            return candidate
    raise BundleError(
        f"{prefix}: no bin/python3 here; give the prefix of an installed CPython (e.g. ~/.pyenv/versions/3.13.0)"
    )


def _facts(python: Path) -> dict[str, Any]:
    try:
        proc = subprocess.run([str(python), "-I", "-c", _PROBE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BundleError(f"{python}: cannot run it ({exc})") from None
    if proc.returncode != 0:
        raise BundleError(f"{python}: exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
    facts: dict[str, Any] = json.loads(proc.stdout)
    return facts


def _file_info(name: str, mode: int, size: int = 0) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.mode, ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname, ti.size = mode, 0, 0, 0, "root", "root", size
    return ti


def _skip(rel: Path, is_dir: bool, pylib: str) -> bool:
    parts = rel.parts
    if not parts:
        return False
    if parts[0] == "bin" and len(parts) == 2 and _DROP_BIN.match(parts[1]):
        return True
    if parts[0] == "share":
        return True  # man pages
    if parts[0] != "lib" or len(parts) < 2:
        return False
    if is_dir and parts[-1] in _DROP_DIRS:
        return True
    if rel.suffix == ".pyc":
        return True
    if len(parts) >= 3 and parts[1] == f"python{pylib}":
        if parts[2] == "site-packages" and len(parts) >= 4 and parts[3] != "README.txt":
            return True
        if parts[2] == "lib-dynload" and len(parts) == 4 and re.match(r"(_test|_xxtest|xx)", parts[3]):
            return True  # CPython's own test extension modules
        if parts[2].startswith("config-") and len(parts) == 4 and (rel.suffix in (".a", ".o")):
            return True
    return False


Member = tuple[str, tarfile.TarInfo, bytes | None]


def _members(prefix: Path, pylib: str) -> tuple[list[Member], list[str]]:
    """Every member of the archive, with content already made relocatable; and the ELF files rewritten."""
    members: list[Member] = []
    relocated: list[str] = []
    for dirpath, dirnames, filenames in os.walk(prefix):
        here = Path(dirpath)
        rel_dir = here.relative_to(prefix)
        dirnames[:] = sorted(
            d for d in dirnames if not _skip(rel_dir / d, (here / d).is_dir() and not (here / d).is_symlink(), pylib)
        )
        for name in [*dirnames, *sorted(filenames)]:
            path = here / name
            rel = rel_dir / name
            if name in filenames and _skip(rel, False, pylib):
                continue
            arc = f"{ROOT}/{rel.as_posix()}"
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                ti = _file_info(arc, 0o777)
                ti.type, ti.linkname = tarfile.SYMTYPE, _link_target(prefix, path)
                members.append((arc, ti, None))
            elif stat.S_ISDIR(st.st_mode):
                ti = _file_info(arc, 0o755)
                ti.type = tarfile.DIRTYPE
                members.append((arc, ti, None))
            elif stat.S_ISREG(st.st_mode):
                data = path.read_bytes()
                data, changed = _relocate(rel, data, prefix)
                if changed:
                    relocated.append(rel.as_posix())
                mode = 0o755 if st.st_mode & 0o111 else 0o644
                members.append((arc, _file_info(arc, mode, len(data)), data))
    root = _file_info(ROOT, 0o755)
    root.type = tarfile.DIRTYPE
    members.append((ROOT, root, None))
    return members, relocated


def _link_target(prefix: Path, link: Path) -> str:
    """A symlink's target, relative; one that leaves the prefix is refused."""
    target = os.readlink(link)
    absolute = Path(os.path.normpath(link.parent / target))
    try:
        absolute.relative_to(prefix)
    except ValueError:
        raise BundleError(f"{link}: a symlink to {target}, outside {prefix}; cannot pack it") from None
    return os.path.relpath(absolute, link.parent) if os.path.isabs(target) else target


def _relocate(rel: Path, data: bytes, prefix: Path) -> tuple[bytes, bool]:
    """`data` with the old prefix made relative where the file's kind allows."""
    if data[:4] == b"\x7fELF":
        return rewrite_runpath(data, str(prefix), rel, name=str(prefix / rel))
    if re.fullmatch(r"_sysconfigdata_.*\.py", rel.name):
        tail = (
            "\n\n# Made relocatable by orch: build paths follow the interpreter's own location.\n"
            f"def _orch_relocate(value, _old={str(prefix)!r}):\n"
            "    import sys\n"
            "    return value.replace(_old, sys.base_prefix) if isinstance(value, str) else value\n\n\n"
            "build_time_vars = {k: _orch_relocate(v) for k, v in build_time_vars.items()}\n"
        )
        return data + tail.encode(), True
    if rel.suffix == ".pc" and rel.parent.name == "pkgconfig":
        text = re.sub(rb"(?m)^prefix=.*$", b"prefix=${pcfiledir}/../..", data)
        return text, text != data
    return data, False


# ---------------------------------------------------------------------------
# RUNPATH rewriting (ELF64 little-endian, in place)

_DT_NEEDED, _DT_STRTAB, _DT_SONAME, _DT_RPATH, _DT_RUNPATH = 1, 5, 14, 15, 29


def rewrite_runpath(data: bytes, prefix: str, rel: Path, *, name: str) -> tuple[bytes, bool]:
    """`data` (an ELF file at `rel` under `prefix`) with RUNPATH/RPATH entries under `prefix`
    made `$ORIGIN`-relative; (data, False) when it names no such entry."""
    if data[4:6] != b"\x02\x01":
        return data, False  # not ELF64 little-endian: not a linux x86_64 build (refused earlier)
    dynamic = _dynamic_entries(data)
    if dynamic is None:
        return data, False
    entries, strtab = dynamic
    buf = bytearray(data)
    changed = False
    string_refs = [v for t, v, _ in entries if t in (_DT_NEEDED, _DT_SONAME)]
    for tag, value, _ in entries:
        if tag not in (_DT_RPATH, _DT_RUNPATH):
            continue
        start = strtab + value
        end = data.index(b"\x00", start)
        old = data[start:end].decode("utf-8", "surrogateescape")
        new = ":".join(_relative_entry(e, prefix, rel) for e in old.split(":"))
        if new == old:
            continue
        if len(new.encode()) > end - start:
            raise BundleError(
                f"{name}: its runpath {old!r} would become {new!r}, which is longer; cannot rewrite it in place"
            )
        if any(start < strtab + ref < end for ref in string_refs):
            raise BundleError(f"{name}: its runpath string is shared with another name; cannot rewrite it in place")
        buf[start:end] = new.encode().ljust(end - start, b"\x00")
        changed = True
    return bytes(buf), changed


def _relative_entry(entry: str, prefix: str, rel: Path) -> str:
    norm = os.path.normpath(entry) if entry.startswith("/") else None
    if norm is None or not (norm == prefix or norm.startswith(prefix + "/")):
        return entry
    here = os.path.dirname(os.path.join(prefix, rel))
    relative = os.path.relpath(norm, here)
    return "$ORIGIN" if relative == "." else f"$ORIGIN/{relative}"


def _dynamic_entries(data: bytes) -> tuple[list[tuple[int, int, int]], int] | None:
    """The dynamic section's (tag, value, file offset) entries and the string table's file offset."""
    try:
        (phoff,) = struct.unpack_from("<Q", data, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
        loads, dyn = [], None
        for i in range(phnum):
            p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = struct.unpack_from(
                "<IIQQQQQQ", data, phoff + i * phentsize
            )
            if p_type == 1:
                loads.append((p_vaddr, p_offset, p_filesz))
            elif p_type == 2:
                dyn = (p_offset, p_filesz)
        if dyn is None:
            return None
        entries = []
        for off in range(dyn[0], dyn[0] + dyn[1], 16):
            tag, value = struct.unpack_from("<qQ", data, off)
            if tag == 0:
                break
            entries.append((tag, value, off))
        strtab_vaddr = next((v for t, v, _ in entries if t == _DT_STRTAB), None)
        if strtab_vaddr is None:
            return None
        for vaddr, offset, filesz in loads:
            if vaddr <= strtab_vaddr < vaddr + filesz:
                return entries, strtab_vaddr - vaddr + offset
    except struct.error:
        return None
    return None
