"""A bundle's own Python: the archive's facts, the lock's record of it, its fit with the wheels,
the pack (relocatable, reproducible), the worker's member checks, and what receipts say of it."""

from __future__ import annotations

import io
import json
import struct
import tarfile
from pathlib import Path

import pytest

from hostside import deploy_interpreter, receipt_facts
from orchestrator import receipts
from orchestrator.bundle import Lock, LockedInterpreter, LockedWheel, compute_bundle_id, read_lock, write_lock
from orchestrator.bundle.check import check_interpreter
from orchestrator.bundle.interpreter import InterpreterInfo, inspect_archive, interpreter_problems, require_fit
from orchestrator.bundle.interpreter_pack import pack, rewrite_runpath
from orchestrator.bundle.store import fetch_artifact
from orchestrator.errors import BundleError, ConfigError
from tests.test_receipts import a_receipt, a_run, four

SHA = "ab" * 32


def archive(path: Path, files: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
        for name, target in (links or {}).items():
            ti = tarfile.TarInfo(name)
            ti.type, ti.linkname = tarfile.SYMTYPE, target
            tf.addfile(ti)
    return path


def cpython(
    lib: str = "3.13", version: str = "3.13.0", build: str | None = "3.13.0 (main) [GCC 12]"
) -> dict[str, bytes]:
    files = {
        "python/bin/python3.13": b"\x7fELF",
        f"python/include/python{lib}/patchlevel.h": f'#define PY_VERSION "{version}"\n'.encode(),
        f"python/lib/python{lib}/os.py": b"",
    }
    if build:
        files["python/ORCH-INTERPRETER.json"] = json.dumps({"build": build}).encode()
    return files


def wheel(filename: str) -> LockedWheel:
    from orchestrator.bundle import wheel_tags

    name, version = filename.split("-")[:2]
    return LockedWheel(
        name=name.replace("_", "-"),
        version=version,
        filename=filename,
        requires_python=None,
        requires_dist=(),
        tags=wheel_tags(filename),
        sha256=SHA,
        size=1,
        source="x",
    )


def interp(version: str = "3.13.0", abi: str = "cp313", filename: str = "cpython-3.13.0.tar.gz") -> LockedInterpreter:
    return LockedInterpreter(
        filename=filename, sha256="cd" * 32, size=10, source="interp.tar.gz", version=version, abi=abi, build="b"
    )


# ---------------------------------------------------------------------------
# The archive's facts


def test_an_install_only_archive_says_its_version_abi_and_build_from_its_own_files(tmp_path):
    path = archive(tmp_path / "a.tar.gz", cpython(), links={"python/bin/python3": "python3.13"})
    assert inspect_archive(path) == InterpreterInfo(version="3.13.0", abi="cp313", build="3.13.0 (main) [GCC 12]")
    plain = archive(
        tmp_path / "cpython-3.13.1+2024-install_only.tar.gz",
        cpython(version="3.13.1", build=None),
        links={"python/bin/python3": "python3.13"},
    )
    assert inspect_archive(plain).build == "cpython-3.13.1+2024-install_only.tar.gz"
    free = archive(tmp_path / "t.tar.gz", cpython(lib="3.13t"), links={"python/bin/python3": "python3.13t"})
    assert inspect_archive(free).abi == "cp313t"


def test_an_archive_without_python3_or_a_version_is_refused_with_the_layout_expected(tmp_path):
    with pytest.raises(BundleError, match=r"no python/bin/python3 in the archive") as exc:
        inspect_archive(archive(tmp_path / "a.tar.gz", cpython()))
    assert "install_only layout" in (exc.value.hint or "")
    files = cpython()
    del files["python/include/python3.13/patchlevel.h"]
    with pytest.raises(BundleError, match="patchlevel.h"):
        inspect_archive(archive(tmp_path / "b.tar.gz", files, links={"python/bin/python3": "python3.13"}))
    (tmp_path / "c.tar.gz").write_bytes(b"not gzip")
    with pytest.raises(BundleError, match="not a readable .tar.gz"):
        inspect_archive(tmp_path / "c.tar.gz")


# ---------------------------------------------------------------------------
# The interpreter against the bundle's Python and its wheels' tags


@pytest.mark.parametrize(
    ("interpreter", "python", "wheels", "expected"),
    [
        (interp(), "3.13", ["jaxlib-0.10.2-cp313-cp313-manylinux_2_27_x86_64.whl", "jax-0.10.2-py3-none-any.whl"], []),
        (interp(), "3.13", ["numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.whl"], ["numpy 2.4.6 (numpy-2.4.6-cp311"]),
        (
            interp("3.12.7", "cp312"),
            "3.13",
            [],
            ["the bundle's interpreter is CPython 3.12.7 (cp312), but the bundle's Python is 3.13"],
        ),
        (
            interp("3.13.0", "cp313t"),
            "3.13",
            ["jaxlib-0.10.2-cp313-cp313-manylinux_2_27_x86_64.whl"],
            ["built for cp313-cp313"],
        ),
        (interp(), "3.13", ["ml_dtypes-0.6.0-cp313-abi3-manylinux_2_27_x86_64.whl"], []),
    ],
)
def test_an_interpreter_fits_only_a_bundle_of_its_version_whose_wheels_carry_its_abi(
    interpreter, python, wheels, expected
):
    problems = [message for message, _ in interpreter_problems(interpreter, python, [wheel(w) for w in wheels])]
    assert len(problems) == len(expected)
    for message, want in zip(problems, expected, strict=True):
        assert want in message


def test_a_cp311_wheel_under_a_313_interpreter_is_a_check_error_and_lock_refuses_it_clearly():
    wheels = [wheel("numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.whl")]
    findings = check_interpreter(interp(), "3.13", wheels)
    assert [(f.severity, f.kind, f.wheel) for f in findings] == [("error", "interpreter", "numpy 2.4.6")]
    assert "is built for cp311-cp311; the interpreter is CPython 3.13.0 (cp313)" in findings[0].message
    with pytest.raises(BundleError, match=r"bundle 'b': numpy 2.4.6 .* is built for cp311-cp311") as exc:
        require_fit("b", interp(), "3.13", wheels)
    assert "orch bundle interpreter pack" in (exc.value.hint or "")


# ---------------------------------------------------------------------------
# The lock's record


def a_lock(interpreter: LockedInterpreter | None) -> Lock:
    return Lock(
        bundle="b",
        python="3.13",
        pins=("jax==0.10.2",),
        source={},
        provenance={},
        target={},
        resolver={},
        wheels=(wheel("jax-0.10.2-py3-none-any.whl"),),
        interpreter=interpreter,
    )


def test_the_interpreter_is_part_of_the_bundle_id_and_a_bundle_without_one_keeps_its_id(tmp_path):
    plain, own = a_lock(None), a_lock(interp())
    assert plain.bundle_id == compute_bundle_id("3.13", plain.wheels)
    assert own.bundle_id != plain.bundle_id
    assert a_lock(interp(filename="other.tar.gz")).bundle_id != own.bundle_id
    assert "interpreter" not in plain.to_json()
    assert own.total_size == plain.total_size + 10
    write_lock(tmp_path / "b.lock.json", own)
    assert read_lock(tmp_path / "b.lock.json") == own


def test_a_lock_whose_interpreter_is_not_its_python_or_not_a_plain_archive_name_is_refused(tmp_path):
    path = tmp_path / "b.lock.json"
    write_lock(path, a_lock(interp("3.12.1", "cp312")))
    with pytest.raises(ConfigError, match=r"interpreter: CPython 3.12.1 \(cp312\) cannot run a bundle of Python 3.13"):
        read_lock(path)
    doc = a_lock(interp()).to_json()
    doc["interpreter"]["filename"] = "../../etc/x.tar.gz"  # type: ignore[index]
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=r"interpreter.filename: .* is not a .tar.gz file name"):
        read_lock(path)


def test_an_archive_with_other_bytes_than_its_sha256_is_refused_and_not_kept(tmp_path):
    src = tmp_path / "cpython.tar.gz"
    src.write_bytes(b"tampered")
    with pytest.raises(BundleError, match=r"sha256 [0-9a-f]{64} does not match the expected " + SHA):
        fetch_artifact("cpython.tar.gz", str(src), SHA, tmp_path, root=tmp_path / "cache")
    assert not list((tmp_path / "cache").glob("sha256/*/*"))


# ---------------------------------------------------------------------------
# Packing


def elf(runpath: str, needed: str = "libc.so.6") -> bytes:
    """A minimal ELF64 file: one PT_LOAD over the whole file, a PT_DYNAMIC, a string table."""
    strtab = b"\x00" + needed.encode() + b"\x00" + runpath.encode() + b"\x00"
    phoff, dyn_off = 64, 64 + 2 * 56
    dyn = [(1, 1), (29, 2 + len(needed)), (5, 0), (0, 0)]  # NEEDED, RUNPATH, STRTAB (patched below), NULL
    str_off = dyn_off + 16 * len(dyn)
    dyn[2] = (5, str_off)  # vaddr == file offset under the one PT_LOAD at 0
    size = str_off + len(strtab)
    header = (
        b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, phoff, 0, 0, 64, 56, 2, 64, 0, 0)
    )
    load = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, size, size, 4096)
    dynamic = struct.pack("<IIQQQQQQ", 2, 6, dyn_off, dyn_off, dyn_off, 16 * len(dyn), 16 * len(dyn), 8)
    return header + load + dynamic + b"".join(struct.pack("<qQ", t, v) for t, v in dyn) + strtab


def runpath_of(data: bytes) -> str:
    start = data.index(b"libc.so.6\x00") + len("libc.so.6\x00")
    return data[start : data.index(b"\x00", start)].decode()


def test_runpaths_under_the_prefix_become_origin_relative_in_place_and_others_stay():
    prefix = "/root/.pyenv/versions/3.13.0"
    data = elf(f"{prefix}/lib:/opt/other")
    out, changed = rewrite_runpath(data, prefix, Path("bin/python3.13"), name="x")
    assert changed and len(out) == len(data)
    assert runpath_of(out) == "$ORIGIN/../lib:/opt/other"
    dynload, _ = rewrite_runpath(elf(f"{prefix}/lib"), prefix, Path("lib/python3.13/lib-dynload/_ssl.so"), name="x")
    assert runpath_of(dynload) == "$ORIGIN/../.."
    assert rewrite_runpath(elf("/opt/other"), prefix, Path("bin/x"), name="x") == (elf("/opt/other"), False)
    with pytest.raises(BundleError, match="longer; cannot rewrite it in place"):
        rewrite_runpath(elf("/p"), "/p", Path("a/b/c/d/e/f/x"), name="x")


def fake_prefix(tmp_path: Path) -> Path:
    prefix = tmp_path / "py"
    facts = {
        "version": "3.13.0",
        "release": "3.13.0",
        "build": "3.13.0 (main, May 9 2026) [GCC 12.2.0]",
        "implementation": "cpython",
        "gil_disabled": False,
        "prefix": str(prefix),
        "machine": "linux-x86_64",
    }
    sysconfigdata = f"build_time_vars = {{'LIBDIR': '{prefix}/lib'}}\n".encode()
    files = {
        "bin/python3.13": elf(f"{prefix}/lib"),
        "bin/pip3": b"#!/old/python\n",
        "include/python3.13/patchlevel.h": b'#define PY_VERSION "3.13.0"\n',
        "lib/python3.13/os.py": b"",
        "lib/python3.13/__pycache__/os.cpython-313.pyc": b"x",
        "lib/python3.13/test/test_os.py": b"",
        "lib/python3.13/site-packages/README.txt": b"",
        "lib/python3.13/site-packages/pip/__init__.py": b"",
        "lib/python3.13/_sysconfigdata__linux_x86_64-linux-gnu.py": sysconfigdata,
        "lib/python3.13/config-3.13-x86_64-linux-gnu/libpython3.13.a": b"x" * 100,
    }
    for rel, data in files.items():
        (prefix / rel).parent.mkdir(parents=True, exist_ok=True)
        (prefix / rel).write_bytes(data)
    (prefix / "bin/python3.13").chmod(0o755)
    script = prefix / "bin/python3"
    script.write_text(f"#!/bin/sh\necho '{json.dumps(facts)}'\n")
    script.chmod(0o755)
    return prefix


def test_pack_is_relocatable_small_and_gives_the_same_sha256_twice(tmp_path):
    prefix = fake_prefix(tmp_path)
    first = pack(prefix, tmp_path / "one.tar.gz")
    (prefix / "lib/python3.13/os.py").touch()  # a newer mtime changes nothing packed
    second = pack(prefix, tmp_path / "two.tar.gz")
    assert first.sha256 == second.sha256
    assert first.info == InterpreterInfo("3.13.0", "cp313", "3.13.0 (main, May 9 2026) [GCC 12.2.0]")
    with tarfile.open(first.path) as tf:
        names = tf.getnames()
        assert names == sorted(names)
        assert {m.mtime for m in tf.getmembers()} == {0} and {m.uname for m in tf.getmembers()} == {"root"}
        sysconfig = tf.extractfile("python/lib/python3.13/_sysconfigdata__linux_x86_64-linux-gnu.py").read().decode()
        binary = tf.extractfile("python/bin/python3.13").read()
    assert "python/bin/python3" in names and "python/lib/python3.13/site-packages/README.txt" in names
    dropped = ("__pycache__", "/test/", "pip", "libpython3.13.a")
    assert not [n for n in names if any(d in n for d in dropped)]
    assert runpath_of(binary) == "$ORIGIN/../lib"
    assert "sys.base_prefix" in sysconfig
    assert set(first.relocated) == {"bin/python3.13", "lib/python3.13/_sysconfigdata__linux_x86_64-linux-gnu.py"}


def test_pack_refuses_a_prefix_without_python_and_a_symlink_leaving_it(tmp_path):
    with pytest.raises(BundleError, match="no bin/python3 here"):
        pack(tmp_path)
    prefix = fake_prefix(tmp_path)
    (prefix / "lib/outside").symlink_to("/etc")
    with pytest.raises(BundleError, match="outside"):
        pack(prefix, tmp_path / "x.tar.gz")


# ---------------------------------------------------------------------------
# The worker's side


@pytest.mark.parametrize(
    ("name", "link", "problem"),
    [
        ("python/../../etc/passwd", None, "outside python/"),
        ("/python/bin/x", None, "outside python/"),
        ("other/x", None, "outside python/"),
        ("python/lib/evil", "/etc/passwd", "a link to /etc/passwd, outside python/"),
        ("python/lib/evil", "../../x", "a link to ../../x, outside python/"),
        ("python/bin/python3", "python3.13", None),
    ],
)
def test_the_worker_refuses_archive_members_that_leave_python(name, link, problem):
    ti = tarfile.TarInfo(name)
    if link is not None:
        ti.type, ti.linkname = tarfile.SYMTYPE, link
    assert deploy_interpreter._unsafe(ti) == problem


def test_a_worker_without_the_bundles_python_says_which_python_it_has(monkeypatch):
    monkeypatch.setattr(
        deploy_interpreter.shutil, "which", lambda name: "/usr/bin/python3" if name == "python3" else None
    )
    monkeypatch.setattr(deploy_interpreter, "_version_of", lambda python: "3.11.2")
    problem = deploy_interpreter.system_problem("3.13")
    assert problem is not None and problem.startswith("no Python 3.13 on this worker (python3 here is 3.11.2)")
    assert deploy_interpreter.system_problem("3.11") is None


def test_the_receipt_names_the_archive_the_environment_was_built_from(tmp_path):
    assert receipt_facts.interpreter(str(tmp_path))["source"] == "system"
    import os
    import platform
    import sys

    recorded = {
        "source": "artifact",
        "sha256": SHA,
        "filename": "c.tar.gz",
        "abi": "cp311",
        "version": platform.python_version(),
        "path": os.path.realpath(sys.base_prefix),
    }
    (tmp_path / "orch-bundle.json").write_text(json.dumps({"interpreter": recorded}))
    got = receipt_facts.interpreter(str(tmp_path))
    assert (got["source"], got["sha256"], "mismatch" in got) == ("artifact", SHA, False)
    (tmp_path / "orch-bundle.json").write_text(json.dumps({"interpreter": {**recorded, "version": "3.0.0"}}))
    assert "this process runs" in receipt_facts.interpreter(str(tmp_path))["mismatch"]


# ---------------------------------------------------------------------------
# Report and compare


ARCHIVE = {"source": "artifact", "version": "3.13.0", "sha256": "6070b8bd" + "0" * 56, "build": "3.13.0 (main)"}
SYSTEM = {"source": "system", "version": "3.11.2", "sha256": None}


def test_the_report_names_the_interpreter_and_flags_workers_that_ran_different_ones():
    same = receipts.build_report(a_run(four(**{f"w{i}": {"interpreter": ARCHIVE} for i in range(4)})))
    assert [r.interpreter_text() for r in same.rows] == ["CPython 3.13.0 (archive 6070b8bd0000)"] * 4
    assert "interpreter-differs" not in [f.kind for f in same.flags]
    assert same.to_dict()["workers"][0]["interpreter"]["sha256"] == ARCHIVE["sha256"]
    mixed = receipts.build_report(a_run(four(w0={"interpreter": ARCHIVE}, w1={"interpreter": SYSTEM})))
    flag = next(f for f in mixed.flags if f.kind == "interpreter-differs")
    assert "CPython 3.11.2 (system) on w1" in flag.message


def test_compare_shows_an_interpreter_difference_between_two_runs():
    a = receipts.build_report(a_run({"w0": a_receipt("w0", 0, 1, interpreter=SYSTEM)}, run_id="a"))
    b = receipts.build_report(a_run({"w0": a_receipt("w0", 0, 1, interpreter=ARCHIVE)}, run_id="b"))
    c = receipts.compare(a, b, allow_cross_lane=True)
    diff = next(d for d in c.differences if d.item == "interpreter")
    assert (diff.a, diff.b) == ("CPython 3.11.2 (system)", "CPython 3.13.0 (archive 6070b8bd0000)")


def script_python(prefix: str | None = None, version: str = "3.13.0") -> bytes:
    """A python3 stand-in that answers the worker's verification as an interpreter at `prefix` would
    (default: wherever it was unpacked)."""
    where = f'"{prefix}"' if prefix else '"$(cd "$(dirname "$0")/.." && pwd -P)"'
    return (
        f"#!/bin/sh\nd={where}\n"
        f'echo "{{\\"version\\": \\"{version}\\", \\"prefix\\": \\"$d\\", '
        f'\\"build\\": \\"b\\", \\"libpython\\": []}}"\n'
    ).encode()


def stored_archive(root: Path, python: bytes) -> dict:
    from hostside.files import sha256_file
    from hostside.layout import Layout

    staging = root / "a.tar.gz"
    with tarfile.open(staging, "w:gz") as tf:
        ti = tarfile.TarInfo("python/bin/python3")
        ti.size, ti.mode = len(python), 0o755
        tf.addfile(ti, io.BytesIO(python))
    sha = sha256_file(staging)
    dest = Path(Layout(str(root)).wheel(sha, "c.tar.gz"))
    dest.parent.mkdir(parents=True)
    staging.rename(dest)
    return {"filename": "c.tar.gz", "sha256": sha, "size": dest.stat().st_size, "version": "3.13.0"}


def test_the_worker_unpacks_an_interpreter_once_into_its_content_addressed_directory(tmp_path):
    from hostside.layout import Layout

    layout = Layout(str(tmp_path))
    item = stored_archive(tmp_path, script_python())
    python = deploy_interpreter.unpack(layout, item, "t1")
    assert python == f"{tmp_path}/interpreters/{item['sha256'][:16]}/python/bin/python3"
    assert (Path(python).parents[2] / ".orch-complete").exists()
    assert deploy_interpreter.unpack(layout, item, "t2") == python  # once: the second call finds it
    assert [p.name for p in (tmp_path / "interpreters").iterdir()] == [item["sha256"][:16]]


@pytest.mark.parametrize(
    ("python", "reason"),
    [
        (script_python(version="3.12.0"), "runs as Python 3.12.0, the lock says 3.13.0"),
        (script_python(prefix="/root/.pyenv/versions/3.13.0"), "not relocatable: its prefix is /root/.pyenv"),
    ],
)
def test_an_interpreter_that_is_not_the_locked_version_or_not_relocatable_is_refused_and_nothing_kept(
    tmp_path, python, reason
):
    from hostside.deploy_store import DeployFailure
    from hostside.layout import Layout

    item = stored_archive(tmp_path, python)
    with pytest.raises(DeployFailure, match=reason):
        deploy_interpreter.unpack(Layout(str(tmp_path)), item, "t1")
    assert list((tmp_path / "interpreters").iterdir()) == []
