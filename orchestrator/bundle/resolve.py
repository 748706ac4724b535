"""Resolution with pip: which wheels a bundle's pins resolve to, and their dependency closure.

Resolution is pip's (`pip install --dry-run --report`), for the bundle's
Python version on linux x86_64 (manylinux up to the glibc of TPU VM images),
not for the controller. Every pip run of orch goes through this module:
resolving, and downloading the wheels resolution chose.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse, urlunparse

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from orchestrator.bundle.lockfile import WheelMeta, wheel_tags
from orchestrator.bundle.target import WheelTarget
from orchestrator.errors import BundleError

if TYPE_CHECKING:
    from orchestrator.fleet import Bundle

PIP_TIMEOUT = 1800.0
MIN_PIP = (23, 0)  # `--report` format 1 is stable from pip 23.0
# pip warns about every extra index that lacks a project page; that is noise in an error.
_PIP_NOISE = re.compile(r"^WARNING: Location '.*' is ignored: it is neither a file nor a directory\.$")
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


# ---------------------------------------------------------------------------
# The interpreter that runs pip


@dataclass(frozen=True)
class PipInterpreter:
    """The Python that runs pip; markers are evaluated against it."""

    executable: str
    version: str  # full, e.g. 3.11.7
    pip_version: str

    @property
    def minor(self) -> str:
        """X.Y of `version`."""
        return ".".join(self.version.split(".")[:2])


_PROBE = "import sys, pip; print('%d.%d.%d' % sys.version_info[:3]); print(pip.__version__)"


def _probe_interpreter(executable: str) -> PipInterpreter | None:
    try:
        proc = subprocess.run([executable, "-c", _PROBE], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = proc.stdout.split()
    if proc.returncode != 0 or len(lines) != 2:
        return None
    pip_version = tuple(int(p) for p in re.findall(r"\d+", lines[1])[:2])
    if pip_version < MIN_PIP:
        return None
    return PipInterpreter(executable, lines[0], lines[1])


def pip_interpreter(python: str, explicit: str | None = None) -> PipInterpreter:
    """The interpreter to run pip with: `explicit`, else this one if it is Python `python`,
    else `python<X.Y>` from PATH, else this one (markers then need the target check)."""
    if explicit:
        found = _probe_interpreter(explicit)
        if found is None:
            raise BundleError(f"{explicit}: not a Python with pip >= {MIN_PIP[0]}.{MIN_PIP[1]}")
        return found
    here = _probe_interpreter(sys.executable)
    if here is None:
        raise BundleError(
            f"{sys.executable}: pip >= {MIN_PIP[0]}.{MIN_PIP[1]} is needed to lock bundles",
            hint=f"{sys.executable} -m pip install -U pip",
        )
    if here.minor == python:
        return here
    candidate = shutil.which(f"python{python}")
    found = _probe_interpreter(candidate) if candidate else None
    return found if found and found.minor == python else here


def source_args(bundle: Bundle, base_dir: Path) -> list[str]:
    """pip options for a bundle's `source` (added to pip's own configuration)."""
    src = bundle.source
    args: list[str] = []
    if src.no_index:
        args.append("--no-index")
    if src.index_url:
        args += ["--index-url", src.index_url]
    for url in src.extra_index_urls:
        args += ["--extra-index-url", url]
    for link in src.find_links:
        args += ["--find-links", _find_links_entry(link, base_dir)]
    return args


def _find_links_entry(link: str, base_dir: Path) -> str:
    """A URL as it is; a path made absolute against fleet.yaml's directory, which must exist."""
    if _URL.match(link):
        return link
    path = Path(os.path.expanduser(link))
    path = path if path.is_absolute() else base_dir / path
    if not path.is_dir():
        raise BundleError(
            f"find_links entry '{link}' is not a directory ({path})",
            hint="find_links paths are relative to fleet.yaml",
        )
    return str(path)


def _pip_env() -> dict[str, str]:
    return {
        **os.environ,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
        "PIP_PROGRESS_BAR": "off",
        "PYTHONIOENCODING": "utf-8",
    }


# ---------------------------------------------------------------------------
# Resolution errors


class ResolutionError(BundleError):
    """pip could not resolve (some of) a bundle's pins; carries pip's own reason."""

    def __init__(self, message: str, *, reason: str, pins: Sequence[str], tail: str, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.reason = reason
        self.pins = list(pins)
        self.tail = tail


def _named_pins(pins: Sequence[str], text: str) -> list[str]:
    words = {canonicalize_name(w) for w in re.findall(r"[A-Za-z0-9][A-Za-z0-9._-]*", text)}
    return [p for p in pins if canonicalize_name(Requirement(p).name) in words]


def _pip_reasons(out: list[str], err: list[str]) -> list[str]:
    """pip's ERROR lines, and the conflict it printed on stdout, as short reasons."""
    reasons = [
        ln.removeprefix("ERROR: ").rstrip(".")
        for ln in err
        if ln.startswith("ERROR:") and "ResolutionImpossible: for help visit" not in ln
    ]
    if "The conflict is caused by:" in out:
        start = out.index("The conflict is caused by:") + 1
        conflict = []
        for ln in out[start:]:
            if not ln.startswith(" "):
                break
            conflict.append(ln.strip())
        reasons.append("the conflict is caused by: " + "; ".join(conflict))
    return reasons


def _resolution_error(
    bundle_name: str, target: WheelTarget, pins: Sequence[str], proc: subprocess.CompletedProcess[str]
) -> ResolutionError:
    out = [ln.rstrip() for ln in (proc.stdout or "").splitlines()]
    err = [ln.rstrip() for ln in (proc.stderr or "").splitlines() if ln.strip() and not _PIP_NOISE.match(ln)]
    reasons = _pip_reasons(out, err)
    reason = "; ".join(reasons) or (err[-1] if err else f"pip exited with {proc.returncode}")
    named = _named_pins(pins, " ".join(reasons)) or list(pins)
    tail = "\n".join(([ln for ln in out if ln.strip()] + err)[-15:])
    what = "pin" if len(named) == 1 else "pins"
    return ResolutionError(
        f"bundle '{bundle_name}': pip cannot resolve {what} {', '.join(named)} for {target.describe()}: "
        f"{reason}\n  pip's output (last lines):\n    " + tail.replace("\n", "\n    "),
        reason=reason,
        pins=named,
        tail=tail,
        hint=f"fix the pins of bundle '{bundle_name}' in fleet.yaml; "
        f"`orch bundle check {bundle_name}` compares the pins' own metadata without resolving",
    )


# ---------------------------------------------------------------------------
# Resolving


@dataclass(frozen=True)
class ResolvedWheel:
    """One entry of pip's installation report."""

    name: str
    version: str
    url: str
    filename: str
    sha256: str | None
    metadata: dict[str, object]  # the report's `metadata` object (core metadata as JSON)
    requested_extras: tuple[str, ...]

    def meta(self) -> WheelMeta:
        """The wheel's identity and metadata as pip reported them."""
        requires_python = self.metadata.get("requires_python")
        requires_dist = self.metadata.get("requires_dist")
        return WheelMeta(
            name=self.name,
            version=self.version,
            filename=self.filename,
            requires_python=str(requires_python) if requires_python is not None else None,
            requires_dist=tuple(str(r) for r in requires_dist) if isinstance(requires_dist, list) else (),
            tags=wheel_tags(self.filename),
        )


@dataclass(frozen=True)
class Resolution:
    """What pip resolved, and with which interpreter."""

    wheels: tuple[ResolvedWheel, ...]
    interpreter: PipInterpreter
    pip_version: str


def pip_resolve(
    bundle_name: str,
    bundle: Bundle,
    base_dir: Path,
    *,
    pins: Sequence[str] | None = None,
    no_deps: bool = False,
    relaxed: bool = False,
    interpreter: PipInterpreter | None = None,
) -> Resolution:
    """Ask pip which wheels `pins` (default: the bundle's) resolve to, with their metadata.

    `relaxed` resolves for the controller's own interpreter and platform and ignores
    Requires-Python: it finds what exists, so that `bundle check` can say why it does
    not fit the bundle's Python.
    """
    target = WheelTarget(bundle.python)
    pins = list(pins if pins is not None else bundle.pins)
    interpreter = interpreter or pip_interpreter(bundle.python)
    with tempfile.TemporaryDirectory(prefix="orch-pip-") as tmp:
        report = Path(tmp) / "report.json"
        argv = [interpreter.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed"]
        argv += ["--report", str(report), "--only-binary=:all:"]
        if relaxed:
            argv += ["--ignore-requires-python"]
        else:
            argv += [*target.pip_args(), "--target", str(Path(tmp) / "target")]
        if no_deps:
            argv.append("--no-deps")
        argv += [*source_args(bundle, base_dir), *pins]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT, env=_pip_env(), cwd=tmp)
        except subprocess.TimeoutExpired:
            raise BundleError(
                f"bundle '{bundle_name}': pip did not finish resolving within {PIP_TIMEOUT:.0f}s"
            ) from None
        if proc.returncode != 0 or not report.exists():
            raise _resolution_error(bundle_name, target, pins, proc)
        doc = _object(json.loads(report.read_text()))
    wheels = tuple(_resolved_wheel(bundle_name, _object(item)) for item in _list(doc.get("install")))
    return Resolution(wheels, interpreter, str(doc.get("pip_version", interpreter.pip_version)))


def _object(value: object) -> dict[str, object]:
    """A JSON object of pip's report, or {} where the report has none."""
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def _resolved_wheel(bundle_name: str, item: dict[str, object]) -> ResolvedWheel:
    """One `install` entry of pip's report (format 1)."""
    info = _object(item.get("download_info"))
    url = str(info.get("url", ""))
    meta = _object(item.get("metadata"))
    filename = unquote(urlparse(url).path.rsplit("/", 1)[-1])
    if not filename.endswith(".whl"):
        raise BundleError(f"bundle '{bundle_name}': pip chose {url}, which is not a wheel")
    sha256 = _object(_object(info.get("archive_info")).get("hashes")).get("sha256")
    return ResolvedWheel(
        name=canonicalize_name(str(meta.get("name", filename.split("-")[0]))),
        version=str(meta.get("version", "")),
        url=url,
        filename=filename,
        sha256=str(sha256) if sha256 else None,
        metadata=meta,
        requested_extras=tuple(str(e) for e in _list(item.get("requested_extras"))),
    )


# ---------------------------------------------------------------------------
# Downloading what was resolved


def pip_download(
    bundle_name: str,
    wheels: Sequence[ResolvedWheel],
    dest: Path,
    target: WheelTarget,
    interpreter: PipInterpreter,
    extra_args: Sequence[str],
) -> None:
    """Download exactly `wheels` into `dest` with pip, hash-checked where pip reported a hash.

    pip downloads (not orch), so proxies, certificates and index credentials behave as in resolution.
    """
    reqs = []
    for w in wheels:
        url = urlunparse(urlparse(w.url)._replace(fragment=""))
        reqs.append(f"{w.name} @ {url}" + (f"#sha256={w.sha256}" if w.sha256 else ""))
    argv = [interpreter.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    argv += [*target.pip_args(), *extra_args, "--dest", str(dest), *reqs]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT, env=_pip_env())
    except subprocess.TimeoutExpired:
        raise BundleError(
            f"bundle '{bundle_name}': downloading {len(wheels)} wheel(s) took longer than {PIP_TIMEOUT:.0f}s"
        ) from None
    if proc.returncode != 0:
        tail = "\n    ".join([ln for ln in proc.stderr.splitlines() if ln.strip()][-10:])
        raise BundleError(
            f"bundle '{bundle_name}': pip could not download {', '.join(w.filename for w in wheels)}:\n    {tail}"
        )


# ---------------------------------------------------------------------------
# Dependency closure under the target's markers


def requirement_applies(req: Requirement, env: Mapping[str, str], extras: Iterable[str]) -> str | None:
    """None if `req` does not apply; '' if it applies unconditionally; else the extra that enables it."""
    if req.marker is None or req.marker.evaluate({**env, "extra": ""}):
        return ""
    for extra in sorted(extras):
        if req.marker.evaluate({**env, "extra": extra}):
            return extra
    return None


def parse_requirements(wheel: WheelMeta) -> list[Requirement]:
    """The wheel's Requires-Dist entries that parse (an unreadable one constrains nothing)."""
    out = []
    for text in wheel.requires_dist:
        try:
            out.append(Requirement(text))
        except InvalidRequirement:
            continue
    return out


def closure(
    pins: Sequence[str], wheels: Mapping[str, WheelMeta], env: Mapping[str, str]
) -> tuple[dict[str, set[str]], list[tuple[WheelMeta, Requirement]]]:
    """Walk requirements from the pins under the target's markers.

    Returns the reached distributions with the extras requested of each, and the
    requirements whose distribution is not among `wheels`.
    """
    reached: dict[str, set[str]] = {}
    missing: list[tuple[WheelMeta, Requirement]] = []
    todo = [(canonicalize_name(r.name), set(r.extras)) for r in map(Requirement, pins)]
    while todo:
        name, extras = todo.pop()
        if name in reached and extras <= reached[name]:
            continue
        reached.setdefault(name, set()).update(extras)
        wheel = wheels.get(name)
        if wheel is None:
            continue
        for req in parse_requirements(wheel):
            if requirement_applies(req, env, reached[name]) is None:
                continue
            dep = canonicalize_name(req.name)
            if dep not in wheels:
                missing.append((wheel, req))
            todo.append((dep, set(req.extras)))
    return reached, missing
