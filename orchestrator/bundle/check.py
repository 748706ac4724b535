"""`bundle check`: cross-check a bundle's wheels against each other before any host is touched.

The checks read the wheels' own metadata: from the lock when there is one, or
else from pip with `--no-deps` per pin (so a bundle whose pins conflict, and
therefore cannot be locked, can still be checked). They cover:

- every wheel's Requires-Dist against the other wheels of the bundle, under the
  bundle's Python and linux x86_64 markers (torch_xla vs torch, jax vs jaxlib,
  and everything else);
- the libtpu a `torch_xla[tpu]` / `torch-tpu` / `jax[tpu]` wheel was released
  against vs the libtpu the bundle carries (stock torch_xla 2.9.0 wants
  libtpu==0.0.21), whether or not the extra is requested;
- torch_xla's release line vs torch when torch_xla declares no torch requirement
  (stock wheels do not: torch_xla X.Y only loads into torch X.Y);
- every wheel's Python tag and Requires-Python vs the bundle's Python, and its
  platform tag vs linux x86_64 / manylinux;
- the bundle's interpreter archive, if it has one, vs its Python and every
  wheel's Python and ABI tags (cp313 wheels need a CPython 3.13 of that ABI);
- the lock vs fleet.yaml (pins, Python, source) when the lock is older.

Each finding is an error or a warning naming the two wheels and the requirement.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag, parse_tag
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from orchestrator.bundle.interpreter import InterpreterInfo, artifact_filename, inspect_archive, interpreter_problems
from orchestrator.bundle.lockfile import Lock, LockedInterpreter, WheelMeta, read_lock
from orchestrator.bundle.resolve import (
    ResolutionError,
    parse_requirements,
    pip_interpreter,
    pip_resolve,
    requirement_applies,
)
from orchestrator.bundle.store import fetch_artifact
from orchestrator.bundle.target import WheelTarget
from orchestrator.errors import BundleError

if TYPE_CHECKING:
    from orchestrator.fleet import Bundle, Fleet

Severity = Literal["error", "warning"]

# Frontends whose `tpu` extra names the libtpu they were released against. For
# torch_xla (and torch-tpu, which requires libtpu outright) a different libtpu is
# an ABI risk at the PJRT boundary; jax's pin is the libtpu it was tested with.
TPU_FRONTENDS: dict[str, Severity] = {"torch-xla": "error", "torch-tpu": "error", "jax": "warning"}


@dataclass(frozen=True)
class Finding:
    """One problem: which wheel, against which other wheel (or Python, platform), by which requirement."""

    severity: Severity
    kind: (
        str  # pin, lock, python, interpreter, platform, libtpu, torch_xla-torch, jax-jaxlib, requires, missing, resolve
    )
    message: str
    wheel: str | None = None
    other: str | None = None
    requirement: str | None = None

    def __str__(self) -> str:
        return f"{self.severity}: {self.message}"

    def to_json(self) -> dict[str, object]:
        return {
            "severity": self.severity,
            "kind": self.kind,
            "message": self.message,
            "wheel": self.wheel,
            "other": self.other,
            "requirement": self.requirement,
        }


@dataclass(frozen=True)
class CheckReport:
    """The outcome of checking one bundle."""

    bundle: str
    python: str
    metadata_from: Literal["lock", "index"]
    lock_path: Path | None
    bundle_id: str | None
    wheels: tuple[WheelMeta, ...]
    findings: tuple[Finding, ...] = field(default_factory=tuple)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, object]:
        return {
            "schema_version": 1,
            "bundle": self.bundle,
            "python": self.python,
            "metadata_from": self.metadata_from,
            "lock": str(self.lock_path) if self.lock_path else None,
            "bundle_id": self.bundle_id,
            "ok": self.ok,
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "wheels": [{"name": w.name, "version": w.version, "filename": w.filename} for w in self.wheels],
            "findings": [f.to_json() for f in self.findings],
        }


# ---------------------------------------------------------------------------
# Entry point


def check_bundle(fleet: Fleet, name: str, *, interpreter: str | None = None) -> CheckReport:
    """Check bundle `name` of `fleet` from its lock, or from its pins' metadata when unlocked."""
    bundle = fleet.bundle(name)
    tpu_lanes = sorted(
        lane for lane, spec in fleet.model.lanes.items() if spec.bundle == name and spec.platform == "tpu"
    )
    lock_path = fleet.lock_path(name)
    if lock_path.exists():
        lock = read_lock(lock_path)
        findings = _lock_vs_spec(name, lock, bundle)
        findings += check_wheels(name, bundle.python, bundle.pins, lock.wheels, complete=True, tpu_lanes=tpu_lanes)
        if lock.interpreter is not None:
            findings += check_interpreter(lock.interpreter, bundle.python, lock.wheels)
        return CheckReport(
            name, bundle.python, "lock", lock_path, lock.bundle_id, lock.wheels, tuple(_ordered(findings))
        )
    wheels, findings = _index_metadata(name, bundle, fleet.base_dir.resolve(), interpreter)
    findings += check_wheels(name, bundle.python, bundle.pins, wheels, complete=False, tpu_lanes=tpu_lanes)
    findings += _unlocked_interpreter(bundle, fleet.base_dir.resolve(), wheels)
    return CheckReport(name, bundle.python, "index", None, None, tuple(wheels), tuple(_ordered(findings)))


def _ordered(findings: list[Finding]) -> list[Finding]:
    seen: set[str] = set()
    out: list[Finding] = []
    for f in sorted(findings, key=lambda f: f.severity != "error"):
        if f.message not in seen:
            seen.add(f.message)
            out.append(f)
    return out


def _index_metadata(
    name: str, bundle: Bundle, base_dir: Path, interpreter: str | None
) -> tuple[list[WheelMeta], list[Finding]]:
    """Each pin's own wheel metadata, without dependencies; pins that do not resolve become findings."""
    python = pip_interpreter(bundle.python, interpreter)
    try:
        resolution = pip_resolve(name, bundle, base_dir, no_deps=True, interpreter=python)
        return [w.meta() for w in resolution.wheels], []
    except ResolutionError:
        pass
    wheels: list[WheelMeta] = []
    findings: list[Finding] = []
    target = WheelTarget(bundle.python)
    for pin in bundle.pins:
        try:
            resolution = pip_resolve(name, bundle, base_dir, pins=[pin], no_deps=True, interpreter=python)
        except ResolutionError as exact:
            # What does exist (for any Python)? Its tags then say why it does not fit.
            try:
                resolution = pip_resolve(
                    name, bundle, base_dir, pins=[pin], no_deps=True, relaxed=True, interpreter=python
                )
            except ResolutionError:
                findings.append(
                    Finding(
                        "error", "resolve", f"pin {pin}: no wheel for {target.describe()}: {exact.reason}", wheel=pin
                    )
                )
                continue
        wheels += [w.meta() for w in resolution.wheels]
    return wheels, findings


def check_interpreter(
    interpreter: LockedInterpreter | InterpreterInfo, python: str, wheels: Sequence[WheelMeta]
) -> list[Finding]:
    """The bundle's interpreter against its Python and every wheel's Python and ABI tags."""
    label = f"CPython {interpreter.version} ({interpreter.abi})"
    return [
        Finding("error", "interpreter", message, wheel=wheel, other=label)
        for message, wheel in interpreter_problems(interpreter, python, wheels)
    ]


def _unlocked_interpreter(bundle: Bundle, base_dir: Path, wheels: Sequence[WheelMeta]) -> list[Finding]:
    """An unlocked bundle's interpreter archive, fetched and verified, against its wheels."""
    spec = bundle.interpreter
    if spec is None:
        return []
    try:
        path = fetch_artifact(artifact_filename(spec.source), spec.source, spec.sha256, base_dir)[0]
        info = inspect_archive(path, spec.source)
    except BundleError as exc:
        return [Finding("error", "interpreter", f"interpreter {spec.source}: {exc.message}")]
    return check_interpreter(info, bundle.python, wheels)


def _lock_vs_spec(name: str, lock: Lock, bundle: Bundle) -> list[Finding]:
    out = []
    redo = f"re-run `orch bundle lock {name}`"
    system = "the workers' system Python"
    locked = lock.interpreter.sha256 if lock.interpreter else system
    wanted = bundle.interpreter.sha256 if bundle.interpreter else system
    if locked != wanted:
        out.append(
            Finding(
                "warning",
                "lock",
                f"the lock's interpreter is {locked}, fleet.yaml now names {wanted}; {redo}",
            )
        )
    if lock.python != bundle.python:
        out.append(
            Finding(
                "warning",
                "lock",
                f"the lock was made for Python {lock.python}, but bundle '{name}' "
                f"now declares Python {bundle.python}; {redo}",
                other=f"Python {bundle.python}",
            )
        )
    if list(lock.pins) != list(bundle.pins):
        out.append(
            Finding(
                "warning",
                "lock",
                f"the lock was made for pins {', '.join(lock.pins)}; fleet.yaml "
                f"now pins {', '.join(bundle.pins)}; {redo}",
            )
        )
    if lock.source != bundle.source.model_dump(mode="json"):
        out.append(
            Finding("warning", "lock", f"bundle '{name}' has a different wheel source than when it was locked; {redo}")
        )
    return out


# ---------------------------------------------------------------------------
# The checks (pure)


def check_wheels(
    bundle: str,
    python: str,
    pins: Sequence[str],
    wheels: Sequence[WheelMeta],
    *,
    complete: bool,
    tpu_lanes: Sequence[str] = (),
    target: WheelTarget | None = None,
) -> list[Finding]:
    """Cross-check `wheels` (the bundle's wheels; with `complete`, its whole dependency closure)."""
    target = target or WheelTarget(python)
    by_name = {w.name: w for w in wheels}
    pin_reqs = [Requirement(p) for p in pins]
    pinned = {canonicalize_name(r.name) for r in pin_reqs}
    findings: list[Finding] = []
    findings += _check_pins(pin_reqs, by_name, complete)
    for wheel in wheels:
        findings += _check_python_and_platform(wheel, target)
    findings += _check_requirements(pin_reqs, by_name, pinned, target, complete)
    findings += _check_torch_xla_line(by_name, pinned)
    findings += _check_tpu_runtime(by_name, tpu_lanes, target)
    return findings


def _has(dep: WheelMeta, pinned: Set[str]) -> str:
    return f"the bundle {'pins' if dep.name in pinned else 'has'} {dep.label}"


def _req_text(req: Requirement) -> str:
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}{req.specifier}"


def _check_pins(pin_reqs: list[Requirement], by_name: dict[str, WheelMeta], complete: bool) -> list[Finding]:
    out = []
    for req in pin_reqs:
        wheel = by_name.get(canonicalize_name(req.name))
        where = "the lock" if complete else "the resolved wheels"
        if wheel is None:
            if complete:
                out.append(
                    Finding("error", "pin", f"pin {req} has no wheel in {where}", wheel=str(req), requirement=str(req))
                )
        elif not req.specifier.contains(wheel.version, prereleases=True):
            out.append(
                Finding(
                    "error",
                    "pin",
                    f"pin {req} does not match {wheel.label} in {where}",
                    wheel=wheel.label,
                    requirement=str(req),
                )
            )
    return out


def _tag_python(tag: Tag) -> str:
    return tag.interpreter if tag.abi in ("none", tag.interpreter) else f"{tag.interpreter}-{tag.abi}"


def _check_python_and_platform(wheel: WheelMeta, target: WheelTarget) -> list[Finding]:
    out = _check_requires_python(wheel, target)
    tags = {t for text in wheel.tags for t in parse_tag(text)}
    supported = set(target.supported_tags())
    if tags & supported:
        return out
    pairs = {(t.interpreter, t.abi) for t in supported}
    if not any((t.interpreter, t.abi) in pairs for t in tags):
        built_for = ", ".join(sorted({_tag_python(t) for t in tags}))
        out.append(
            Finding(
                "error",
                "python",
                f"{wheel.label} ({wheel.filename}) is built for {built_for}, "
                f"but the bundle's Python is {target.python}",
                wheel=wheel.label,
                other=f"Python {target.python}",
                requirement=f"wheel tag {built_for}",
            )
        )
    else:
        out.append(_platform_finding(wheel, tags, target))
    return out


def _check_requires_python(wheel: WheelMeta, target: WheelTarget) -> list[Finding]:
    if not wheel.requires_python:
        return []
    try:
        fits = SpecifierSet(wheel.requires_python).contains(Version(target.python), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return [
            Finding(
                "warning",
                "python",
                f"{wheel.label}: unreadable Requires-Python '{wheel.requires_python}'",
                wheel=wheel.label,
            )
        ]
    if fits:
        return []
    return [
        Finding(
            "error",
            "python",
            f"{wheel.label} requires Python {wheel.requires_python}, but the bundle's Python is {target.python}",
            wheel=wheel.label,
            other=f"Python {target.python}",
            requirement=f"Requires-Python {wheel.requires_python}",
        )
    ]


def _platform_finding(wheel: WheelMeta, tags: set[Tag], target: WheelTarget) -> Finding:
    """Why a wheel built for the right Python has no tag the target accepts."""
    plats = ", ".join(sorted({t.platform for t in tags}))
    if any(t.platform in {*target.platforms(), "any"} for t in tags):
        return Finding(
            "error",
            "platform",
            f"{wheel.label} ({wheel.filename}): no tag fits {target.describe()}",
            wheel=wheel.label,
            requirement=f"wheel tags {plats}",
        )
    newer = [glibc for t in tags if (glibc := _glibc_of(t.platform, target.machine))]
    if newer:
        glibc = min(newer)
        return Finding(
            "warning",
            "platform",
            f"{wheel.label} ({wheel.filename}) needs glibc "
            f"{glibc[0]}.{glibc[1]}, newer than the glibc {target.max_glibc[0]}."
            f"{target.max_glibc[1]} of TPU VM images",
            wheel=wheel.label,
            other=f"linux {target.machine}",
            requirement=f"platform tag {plats}",
        )
    return Finding(
        "error",
        "platform",
        f"{wheel.label} ({wheel.filename}) is built for {plats}, not linux {target.machine}",
        wheel=wheel.label,
        other=f"linux {target.machine}",
        requirement=f"platform tag {plats}",
    )


def _glibc_of(platform: str, machine: str) -> tuple[int, int] | None:
    parts = platform.split("_")
    if platform.startswith("manylinux_") and platform.endswith(f"_{machine}") and len(parts) >= 4:
        try:
            return int(parts[1]), int(parts[2])
        except ValueError:
            return None
    return None


def _requested_extras(
    pin_reqs: list[Requirement], by_name: dict[str, WheelMeta], env: dict[str, str]
) -> dict[str, set[str]]:
    """Extras each wheel is asked for: by a pin, or by another wheel's applicable requirement."""
    extras: dict[str, set[str]] = {name: set() for name in by_name}
    for req in pin_reqs:
        extras.setdefault(canonicalize_name(req.name), set()).update(req.extras)
    changed = True
    while changed:
        changed = False
        for wheel in by_name.values():
            for req in parse_requirements(wheel):
                if req.extras and requirement_applies(req, env, extras[wheel.name]) is not None:
                    have = extras.setdefault(canonicalize_name(req.name), set())
                    if not req.extras <= have:
                        have.update(req.extras)
                        changed = True
    return extras


def _kind(wheel: str, dep: str) -> str:
    pair = {wheel, dep}
    if pair == {"torch-xla", "torch"}:
        return "torch_xla-torch"
    if pair == {"jax", "jaxlib"}:
        return "jax-jaxlib"
    if dep == "libtpu":
        return "libtpu"
    return "requires"


def _check_requirements(
    pin_reqs: list[Requirement], by_name: dict[str, WheelMeta], pinned: Set[str], target: WheelTarget, complete: bool
) -> list[Finding]:
    env = target.marker_environment()
    extras = _requested_extras(pin_reqs, by_name, env)
    out = []
    for wheel in by_name.values():
        for req in parse_requirements(wheel):
            via, implied = _applies(wheel, req, env, extras[wheel.name])
            if via is None or req.url:
                continue
            finding = _requirement_finding(wheel, req, via, implied, by_name, pinned, complete)
            if finding is not None:
                out.append(finding)
    return out


def _applies(wheel: WheelMeta, req: Requirement, env: dict[str, str], extras: set[str]) -> tuple[str | None, bool]:
    """As `requirement_applies`, and whether it applies only as the libtpu of a frontend's release."""
    via = requirement_applies(req, env, extras)
    if via is None and canonicalize_name(req.name) == "libtpu" and wheel.name in TPU_FRONTENDS:
        # The release's libtpu, even when its [tpu] extra is not requested.
        via = requirement_applies(req, env, {"tpu"})
        return via, via is not None
    return via, False


def _requirement_finding(
    wheel: WheelMeta,
    req: Requirement,
    via: str,
    implied: bool,
    by_name: dict[str, WheelMeta],
    pinned: Set[str],
    complete: bool,
) -> Finding | None:
    """The finding for one applicable requirement of `wheel`, if the bundle does not satisfy it."""
    label = f"{wheel.label} [{via}]" if via else wheel.label
    dep_name = canonicalize_name(req.name)
    dep = by_name.get(dep_name)
    if dep is None:
        # Without a lock only the pins are known; their dependencies come with the lock.
        if not complete or implied:
            return None
        return Finding(
            "error",
            "missing",
            f"{label} requires {_req_text(req)}, but the bundle has no {req.name}",
            wheel=label,
            other=req.name,
            requirement=_req_text(req),
        )
    if not req.specifier or req.specifier.contains(dep.version, prereleases=True):
        return None
    severity: Severity = TPU_FRONTENDS[wheel.name] if implied else "error"
    message = f"{label} requires {_req_text(req)}, but {_has(dep, pinned)}"
    if implied:
        message += f" ({wheel.project}'s [tpu] extra is not requested)"
    return Finding(
        severity, _kind(wheel.name, dep_name), message, wheel=label, other=dep.label, requirement=_req_text(req)
    )


def _release(version: str) -> tuple[int, ...] | None:
    try:
        return Version(version).release[:2]
    except InvalidVersion:
        return None


def _check_torch_xla_line(by_name: dict[str, WheelMeta], pinned: Set[str]) -> list[Finding]:
    xla = by_name.get("torch-xla")
    if xla is None or any(canonicalize_name(r.name) == "torch" for r in parse_requirements(xla)):
        return []  # a declared requirement is checked with the others
    line = _release(xla.version)
    if line is None:
        return []
    want = ".".join(map(str, line)) + ".*"
    torch = by_name.get("torch")
    if torch is None:
        return [
            Finding(
                "error",
                "torch_xla-torch",
                f"{xla.label} needs torch {want} (its own release line), but the bundle has no torch",
                wheel=xla.label,
                other="torch",
                requirement=f"torch=={want}",
            )
        ]
    if _release(torch.version) != line:
        return [
            Finding(
                "error",
                "torch_xla-torch",
                f"{xla.label} declares no torch requirement, but only loads "
                f"into torch from its own release line ({want}), and {_has(torch, pinned)}",
                wheel=xla.label,
                other=torch.label,
                requirement=f"torch=={want}",
            )
        ]
    return []


def _check_tpu_runtime(by_name: dict[str, WheelMeta], tpu_lanes: Sequence[str], target: WheelTarget) -> list[Finding]:
    if not tpu_lanes or "libtpu" in by_name:
        return []
    frontends = [w for w in by_name.values() if w.name in TPU_FRONTENDS]
    if not frontends:
        return []
    env = target.marker_environment()
    wants = []
    for w in frontends:
        for req in parse_requirements(w):
            if canonicalize_name(req.name) == "libtpu" and requirement_applies(req, env, {"tpu"}) is not None:
                wants.append(f"{w.label} [tpu] requires {_req_text(req)}")
    lanes = ", ".join(tpu_lanes)
    detail = f" ({'; '.join(wants)})" if wants else ""
    return [
        Finding(
            "error",
            "libtpu",
            f"lane {lanes} runs this bundle on TPU, but the bundle has no libtpu{detail}",
            wheel=frontends[0].label,
            other="libtpu",
            requirement=wants[0].split(" requires ", 1)[1] if wants else None,
        )
    ]
