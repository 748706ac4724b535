"""The fleet model: slices, workers, lanes, bundles, runtime profiles, caches.

`fleet.yaml` is validated once, at load. Every problem names the file, the
line, the YAML path and what was expected, with a suggestion for misspelled
keys and names. After loading, the rest of orch works with frozen models and
never re-validates.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from hostside.folklore import FOLKLORE_VARS as FOLKLORE_VARS  # a profile setting one is refused
from hostside.pins import is_exact, project_names
from orchestrator.errors import ConfigError
from orchestrator.fleet_values import MAX_WORKERS, Address, Command, Word, WorkerPath, is_name
from orchestrator.workers import WorkerRef as WorkerRef  # its home; callers import it here too
from orchestrator.workers import select_workers as select_workers
from orchestrator.yamlsrc import Located, did_you_mean, format_path, load

FLEET_ENV = "ORCH_FLEET"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
DEFAULT_ROOT = "/var/lib/orch"


class _Model(BaseModel):
    """Frozen, strict about unknown keys, with a suggestion for typos."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            known = set(cls.model_fields) | {f.alias for f in cls.model_fields.values() if f.alias}
            for key in data:
                if key not in known:
                    raise PydanticCustomError(
                        "unknown_key",
                        "unknown key '{key}'{hint} (expected one of: {known})",
                        {"key": str(key), "hint": did_you_mean(key, known), "known": ", ".join(sorted(known))},
                    )
        return data


Name = Field(pattern=NAME_PATTERN)


class SshSettings(_Model):
    """How the controller talks to workers."""

    connect_timeout: float = Field(10.0, gt=0, description="Seconds to establish an SSH session (TCP, banner, auth).")
    command_timeout: float = Field(600.0, gt=0, description="Default seconds a remote command may run.")
    max_parallel: int = Field(
        256,
        ge=1,
        le=1024,
        description="Workers contacted at once (a thread and a socket each on the controller); "
        "the default reaches every host of a 256-host slice in one wave.",
    )
    host_key_policy: Literal["strict", "accept-new"] = Field(
        "strict",
        description="strict: unknown or changed host keys are refused. "
        "accept-new: first-seen keys are recorded in known_hosts; changed keys are still refused.",
    )
    known_hosts: str | None = Field(
        None, description="known_hosts file (relative to fleet.yaml); default: the user's ~/.ssh/known_hosts."
    )
    config_file: str | None = Field(
        None,
        description="ssh_config file for aliases, users, ports and keys (relative to fleet.yaml); "
        "default: ~/.ssh/config and /etc/ssh/ssh_config.",
    )
    persist: float = Field(
        600.0,
        ge=0,
        description="Seconds a background holder keeps the fleet's SSH connections open for later commands "
        "once idle; 0: every command connects itself (ORCH_SSH_PERSIST=0 does that for one command).",
    )


class Worker(_Model):
    """One worker VM of a slice."""

    index: int = Field(ge=0, lt=MAX_WORKERS, description="Worker index in the slice (TPU_WORKER_ID).")
    address: Address | None = Field(None, description="Address the controller connects to.")
    ssh_alias: Word | None = Field(None, description="Host alias from ~/.ssh/config, instead of address.")
    port: int | None = Field(None, ge=1, le=65535, description="SSH port (default: slice port, 22).")
    user: Word | None = Field(None, description="SSH user (default: slice user, ssh config, then local user).")
    identity_file: str | None = Field(None, description="Private key (relative to fleet.yaml).")
    internal_address: Address | None = Field(
        None, description="Address other workers use to reach this one (coordinator, wheel relay); default: address."
    )

    @model_validator(mode="after")
    def _has_target(self) -> Worker:
        if not self.address and not self.ssh_alias:
            raise PydanticCustomError("no_target", "a worker needs 'address' or 'ssh_alias'")
        return self


class Slice(_Model):
    """A TPU pod slice: several worker VMs reached over SSH."""

    accelerator_type: str | None = Field(
        None, description="e.g. v6e-32; exported as TPU_ACCELERATOR_TYPE when skip_metadata_query is set."
    )
    root: WorkerPath = Field(
        DEFAULT_ROOT, description="orch's directory on every worker (bundles, runs, caches); an absolute path."
    )
    shared_dir: WorkerPath | None = Field(
        None, description="A directory mounted on every worker (NFS/Filestore); an absolute path."
    )
    python: Command = Field(
        "python3", description="Worker interpreter used before any bundle exists: a command name or an absolute path."
    )
    user: Word | None = Field(None, description="Default SSH user for the workers.")
    port: int = Field(22, ge=1, le=65535, description="Default SSH port.")
    identity_file: str | None = Field(None, description="Default private key (relative to fleet.yaml).")
    skip_metadata_query: bool = Field(
        False,
        description="Set TPU_SKIP_MDS_QUERY=1 with explicit topology variables, so libtpu never "
        "waits on a metadata server (needed off-GCE).",
    )
    workers: list[Worker] = Field(min_length=1, max_length=MAX_WORKERS)


class BundleSource(_Model):
    """Where a bundle's wheels come from."""

    find_links: list[str] = Field(
        default_factory=list, description="Local wheelhouse directories (relative to fleet.yaml) or URLs."
    )
    index_url: str | None = Field(None, description="Package index; default: pip's configuration.")
    extra_index_urls: list[str] = Field(default_factory=list, description="Further package indexes to search.")
    no_index: bool = Field(False, description="Resolve from find_links only.")


class BundleInterpreter(_Model):
    """The bundle's own Python: a relocatable CPython archive (python-build-standalone install_only layout)."""

    path: str | None = Field(
        None,
        description="The .tar.gz on the controller (relative to fleet.yaml); e.g. what "
        "`orch bundle interpreter pack` wrote.",
    )
    url: str | None = Field(None, description="Where to download the .tar.gz (http, https or file URL).")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="The archive's sha256: lock refuses any other bytes.")

    @model_validator(mode="after")
    def _one_source(self) -> BundleInterpreter:
        if (self.path is None) == (self.url is None):
            raise PydanticCustomError("interpreter_source", "give the interpreter's `path` or its `url` (one of them)")
        return self

    @property
    def source(self) -> str:
        """The path or URL, as given."""
        return self.url or self.path or ""


class Bundle(_Model):
    """A pinned software stack: exact wheels, Python version, provenance."""

    python: str = Field(pattern=r"^3\.\d+$", description="Python version of the bundle environment, e.g. '3.11'.")
    pins: list[str] = Field(min_length=1, description="Requirements, each pinned with '==', e.g. 'jax==0.10.2'.")
    source: BundleSource = Field(default_factory=BundleSource)  # type: ignore[arg-type]  # pydantic, no plugin
    interpreter: BundleInterpreter | None = Field(
        None,
        description="The bundle's own CPython, sent to every worker like a wheel; "
        "without it the workers' system Python of version `python` is used.",
    )
    provenance: dict[str, str] = Field(
        default_factory=dict, description="Free-form notes: custom build, OpenXLA commit, ..."
    )
    lock: str | None = Field(
        None, description="Lock file path (relative to fleet.yaml); default locks/<bundle>.lock.json."
    )

    @model_validator(mode="after")
    def _pins_are_pinned(self) -> Bundle:
        for pin in self.pins:
            if not is_exact(pin):
                raise PydanticCustomError(
                    "unpinned", "pin '{pin}' is not exact; expected NAME==VERSION (e.g. 'jax==0.10.2')", {"pin": pin}
                )
        return self


class RuntimeProfile(_Model):
    """Environment applied before any frontend is imported."""

    env: dict[str, str] = Field(
        default_factory=dict, description="Variables set before import, e.g. PJRT_DEVICE, XLA_FLAGS."
    )
    forbid: list[str] = Field(
        default_factory=list, description="Variables that must not be set (e.g. XLA_USE_BF16, XLA_USE_SPMD)."
    )

    @model_validator(mode="before")
    @classmethod
    def _env_values_are_strings(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("env"), dict):
            for key, value in data["env"].items():
                if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                    raise PydanticCustomError(
                        "env_value",
                        "env.{key}: expected a string (quote it in YAML), got {value}",
                        {"key": str(key), "value": repr(value)},
                    )
            data = {**data, "env": {k: str(v) for k, v in data["env"].items()}}
        return data


class CachePolicy(_Model):
    """Who may write the compilation caches, and where they live."""

    @model_validator(mode="before")
    @classmethod
    def _yaml_off(cls, data: Any) -> Any:
        # YAML 1.1 reads an unquoted `off` as false.
        if isinstance(data, dict) and data.get("mode") is False:
            data = {**data, "mode": "off"}
        return data

    mode: Literal["per-host", "single-writer", "off"] = Field(
        description="per-host: every worker its own writable cache on local disk. "
        "single-writer: one worker warms a cache on the shared mount, the others read it. off: no cache."
    )
    root: str | None = Field(
        None,
        description="Cache root. per-host: default <worker root>/cache. single-writer: required, "
        "on the slice's shared_dir. torch_xla and jax get separate subdirectories per lane and bundle.",
    )
    writer: int | None = Field(
        None,
        ge=0,
        description="single-writer: worker index of the writer (default: the lane's first worker, "
        "which is process 0; JAX only writes from process 0).",
    )


WorkerSpec = int | str


class Lane(_Model):
    """A named group of workers running one bundle under one policy."""

    slice: str | None = Field(None, description="Slice name (optional when the fleet has one slice).")
    slices: list[str] | None = Field(
        None,
        description="Multislice: two or more slices of one accelerator type joined over the data-center "
        "network, every worker of each; process ids run slice by slice (instead of 'slice').",
    )
    megascale_port: int = Field(
        8081, ge=1024, le=65535, description="MEGASCALE_PORT of a multislice lane (process 0 listens on it)."
    )
    workers: WorkerSpec | list[WorkerSpec] = Field(
        "all", description="'all', an index, a range '0-5', or a list of those."
    )
    bundle: str = Field(description="Bundle name (a key of `bundles`).")
    runtime: str | None = Field(None, description="Runtime profile name.")
    cache: str | None = Field(None, description="Cache policy name.")
    platform: Literal["tpu", "cpu"] = Field(
        description="Intended device platform; a probe that answers from another is a failure."
    )


class FleetModel(_Model):
    """The whole fleet.yaml document."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        title="orch fleet.yaml",
        json_schema_extra={"$id": "https://orch.dev/schema/fleet.schema.json"},
    )

    version: Literal[1] = Field(1, description="Format version of this file.")
    ssh: SshSettings = Field(default_factory=SshSettings)  # type: ignore[arg-type]  # pydantic, no plugin
    slices: dict[str, Slice] = Field(min_length=1, description="Pod slices by name.")
    bundles: dict[str, Bundle] = Field(default_factory=dict, description="Pinned software stacks by name.")
    runtime_profiles: dict[str, RuntimeProfile] = Field(
        default_factory=dict, description="Environments applied before any frontend import, by name."
    )
    cache_policies: dict[str, CachePolicy] = Field(
        default_factory=dict, description="Compilation-cache ownership policies, by name."
    )
    lanes: dict[str, Lane] = Field(
        default_factory=dict, description="Named groups of workers, each with one bundle and policy."
    )


# ---------------------------------------------------------------------------
# Resolved view used by the rest of orch


@dataclass(frozen=True)
class Fleet:
    """A validated fleet with its source location."""

    model: FleetModel
    path: Path
    workers: tuple[WorkerRef, ...]
    lane_members: dict[str, tuple[str, ...]]  # lane -> worker names, ordered by index

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    def resolve_path(self, value: str) -> Path:
        """Interpret a path from fleet.yaml relative to the fleet file."""
        p = Path(os.path.expanduser(value))
        return p if p.is_absolute() else (self.base_dir / p)

    def worker(self, name: str) -> WorkerRef:
        for w in self.workers:
            if w.name == name:
                return w
        raise ConfigError(f"no worker '{name}'{did_you_mean(name, [w.name for w in self.workers])}")

    def lane(self, name: str) -> Lane:
        if name not in self.model.lanes:
            known = list(self.model.lanes)
            raise ConfigError(
                f"{self.path.name}: no lane '{name}'{did_you_mean(name, known)}"
                + ("" if known else "; the fleet defines no lanes")
                + (f" (lanes: {', '.join(known)})" if known else "")
            )
        return self.model.lanes[name]

    def lane_workers(self, name: str) -> list[WorkerRef]:
        """The lane's workers ordered by index; position = process id."""
        self.lane(name)
        return [self.worker(n) for n in self.lane_members[name]]

    def lane_slice(self, name: str) -> tuple[str, Slice]:
        """The lane's (first) slice: process 0's."""
        slice_name = self.lane_slices(name)[0]
        return slice_name, self.model.slices[slice_name]

    def lane_slices(self, name: str) -> list[str]:
        """The lane's slices in process order (one, unless the lane is multislice)."""
        return lane_slice_names(self.model, self.lane(name))

    def bundle(self, name: str) -> Bundle:
        if name not in self.model.bundles:
            raise ConfigError(f"{self.path.name}: no bundle '{name}'{did_you_mean(name, self.model.bundles)}")
        return self.model.bundles[name]

    def lock_path(self, bundle_name: str) -> Path:
        bundle = self.bundle(bundle_name)
        return self.resolve_path(bundle.lock or f"locks/{bundle_name}.lock.json")

    def runtime_profile(self, lane_name: str) -> RuntimeProfile:
        lane = self.lane(lane_name)
        return self.model.runtime_profiles[lane.runtime] if lane.runtime else RuntimeProfile()

    def cache_policy(self, lane_name: str) -> CachePolicy:
        lane = self.lane(lane_name)
        return self.model.cache_policies[lane.cache] if lane.cache else CachePolicy(mode="off", root=None, writer=None)

    def select(self, *, lane: str | None = None, workers: str | None = None) -> list[WorkerRef]:
        """Workers chosen by --lane and/or --workers (names, globs, or index ranges); never none."""
        pool = self.lane_workers(lane) if lane else list(self.workers)
        if not pool:  # validation refuses an empty lane; a fleet built some other way must not run nowhere
            raise ConfigError(f"{self.path.name}: lane '{lane}' has no workers")
        if workers is None:
            return pool
        return select_workers(pool, workers, fleet_path=self.path)


# ---------------------------------------------------------------------------
# Loading


def find_fleet_path(explicit: str | os.PathLike[str] | None) -> Path:
    """--fleet PATH, then $ORCH_FLEET, then ./fleet.yaml."""
    if explicit:
        return Path(explicit)
    if os.environ.get(FLEET_ENV):
        return Path(os.environ[FLEET_ENV])
    path = Path("fleet.yaml")
    if not path.exists():
        raise ConfigError(
            "no fleet: pass --fleet PATH, set $ORCH_FLEET, or run where fleet.yaml is",
            hint="`orch sandbox up` writes a ready fleet.yaml for a local slice",
        )
    return path


def load_fleet(path: str | os.PathLike[str] | None = None) -> Fleet:
    """Load and validate a fleet file (see `find_fleet_path` for the search)."""
    located = load(find_fleet_path(path), what="fleet file")
    return build_fleet(located)


def build_fleet(located: Located) -> Fleet:
    """Validate parsed YAML into a Fleet, or raise one ConfigError listing every problem."""
    if not isinstance(located.data, dict):
        raise ConfigError(
            f"{located.file}:1: expected a mapping at the top level "
            f"(version, ssh, slices, bundles, runtime_profiles, cache_policies, lanes)"
        )
    try:
        model = FleetModel.model_validate(located.data)
    except ValidationError as exc:
        raise ConfigError(_translate(exc, located)) from None
    problems: list[str] = []
    workers, members = _resolve(model, located, problems)
    if problems:
        raise ConfigError(problems)
    return Fleet(model=model, path=located.file.resolve(), workers=tuple(workers), lane_members=members)


_EXPECTED = {
    "int_parsing": "expected an integer",
    "int_type": "expected an integer",
    "int_from_float": "expected an integer",
    "float_parsing": "expected a number",
    "float_type": "expected a number",
    "bool_parsing": "expected true or false",
    "bool_type": "expected true or false",
    "string_type": "expected a string",
    "list_type": "expected a list",
    "dict_type": "expected a mapping",
    "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping",
}


def _translate(exc: ValidationError, located: Located) -> list[str]:
    out = []
    seen = set()
    for err in exc.errors():
        loc = tuple(
            p
            for p in err["loc"]
            if not (isinstance(p, str) and ("[" in p or p in ("int", "str", "list[union[int,str]]")))
        )
        kind = err["type"]
        ctx = err.get("ctx") or {}
        if kind == "unknown_key":
            loc = loc + (ctx["key"],)
            msg = f"unknown key '{ctx['key']}'{ctx['hint']} (expected one of: {ctx['known']})"
        elif kind == "missing":
            msg = f"missing required key '{loc[-1]}'"
        elif kind == "literal_error":
            msg = f"expected one of {ctx.get('expected')}, got {err['input']!r}"
            msg += did_you_mean(err["input"], re.findall(r"'([^']*)'", str(ctx.get("expected", ""))))
        elif kind in _EXPECTED:
            msg = f"{_EXPECTED[kind]}, got {_shown(err['input'])}"
        elif kind.startswith(("greater_than", "less_than", "too_short", "too_long", "string_pattern")):
            msg = f"{err['msg'][0].lower()}{err['msg'][1:]}, got {_shown(err['input'])}"
        else:
            msg = err["msg"]
            msg = msg[0].lower() + msg[1:]
        line = f"{located.where(loc)}: {msg}"
        if line not in seen:
            seen.add(line)
            out.append(line)
    return out


def _shown(value: object) -> str:
    """`value` as an error message shows it: repr, cut short."""
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def _some(values: list[int], most: int = 20) -> str:
    """The first `most` of `values`, comma-separated, saying how many more there are."""
    text = ", ".join(map(str, values[:most]))
    return text + (f", ... ({len(values) - most} more)" if len(values) > most else "")


def _parse_worker_spec(spec: Any) -> list[int] | None:
    """'all' -> None; 3 -> [3]; '0-5' -> [0..5]; lists combine. Indices are below MAX_WORKERS."""
    items = spec if isinstance(spec, list) else [spec]
    out: set[int] = set()
    for item in items:
        if item == "all" and not isinstance(spec, list):
            return None
        m = re.fullmatch(r"\s*(\d{1,9})\s*(?:-\s*(\d{1,9})\s*)?", str(item)) if not isinstance(item, bool) else None
        if m is None or int(m.group(1)) > int(m.group(2) or m.group(1)):
            raise ValueError(_shown(item)[:60])
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi >= MAX_WORKERS:
            raise ValueError(
                f"{_shown(item)[:60]} (a slice has at most {MAX_WORKERS} workers, indices 0-{MAX_WORKERS - 1})"
            )
        out.update(range(lo, hi + 1))
    return sorted(out)


def _resolve(
    model: FleetModel, located: Located, problems: list[str]
) -> tuple[list[WorkerRef], dict[str, tuple[str, ...]]]:
    where = located.where

    def ref_problem(path: tuple[Any, ...], kind: str, value: str, known: Iterable[str]) -> None:
        problems.append(
            f"{where(path)}: no {kind} '{value}'{did_you_mean(value, known)}"
            + (f" (defined: {', '.join(known)})" if known else f" (the fleet defines no {kind}s)")
        )

    for kind, mapping in (
        ("slice", model.slices),
        ("bundle", model.bundles),
        ("runtime profile", model.runtime_profiles),
        ("cache policy", model.cache_policies),
        ("lane", model.lanes),
    ):
        section = {
            "slice": "slices",
            "bundle": "bundles",
            "runtime profile": "runtime_profiles",
            "cache policy": "cache_policies",
            "lane": "lanes",
        }[kind]
        for key in mapping:
            if not is_name(key):
                problems.append(
                    f"{where((section, key))}: {kind} name {_shown(key)} must be letters, digits, '.', '_' or '-'"
                )

    workers: list[WorkerRef] = []
    endpoints: dict[tuple[str, int | None], tuple[Any, ...]] = {}
    for slice_name, sl in model.slices.items():
        seen_index: dict[int, int] = {}
        for i, w in enumerate(sl.workers):
            path = ("slices", slice_name, "workers", i)
            if w.index in seen_index:
                problems.append(
                    f"{where(path + ('index',))}: duplicate worker index {w.index} "
                    f"(also slices.{slice_name}.workers[{seen_index[w.index]}])"
                )
                continue
            seen_index[w.index] = i
            host = w.ssh_alias or w.address
            assert host is not None  # the model requires an address or an ssh_alias
            port = w.port or (None if w.ssh_alias else sl.port)
            endpoint = (host, port)
            if endpoint in endpoints:
                other = endpoints[endpoint]
                problems.append(
                    f"{where(path)}: duplicate worker: {host}"
                    f"{':' + str(port) if port else ''} is also {format_path(other)}"
                )
                continue
            endpoints[endpoint] = path
            workers.append(
                WorkerRef(
                    name=f"{slice_name}-w{w.index}",
                    slice=slice_name,
                    index=w.index,
                    host=host,
                    port=port,
                    user=w.user or sl.user,
                    identity_file=w.identity_file or sl.identity_file,
                    internal_address=w.internal_address or w.address or host,
                    root=sl.root,
                    shared_dir=sl.shared_dir,
                    python=sl.python,
                    lane=None,
                )
            )

    members: dict[str, tuple[str, ...]] = {}
    owner: dict[str, str] = {}
    by_slice = {s: {w.index: w for w in workers if w.slice == s} for s in model.slices}
    for lane_name, lane in model.lanes.items():
        base = ("lanes", lane_name)
        if lane.slices is not None:
            slice_names = _multislice_problems(model, lane_name, lane, where, problems)
            if slice_names is None:
                continue
            if lane.bundle not in model.bundles:
                ref_problem(base + ("bundle",), "bundle", lane.bundle, list(model.bundles))
            if lane.runtime and lane.runtime not in model.runtime_profiles:
                ref_problem(base + ("runtime",), "runtime profile", lane.runtime, list(model.runtime_profiles))
            if lane.cache and lane.cache not in model.cache_policies:
                ref_problem(base + ("cache",), "cache policy", lane.cache, list(model.cache_policies))
            names = []
            for s in slice_names:
                for i in sorted(by_slice[s]):
                    wname = by_slice[s][i].name
                    if wname in owner:
                        problems.append(
                            f"{where(base + ('slices',))}: worker {wname} is already in lane "
                            f"'{owner[wname]}'; a worker belongs to one lane at a time"
                        )
                    else:
                        owner[wname] = lane_name
                    names.append(wname)
                _check_cache_policy(model, lane_name, lane, s, sorted(by_slice[s]), where, problems)
            members[lane_name] = tuple(names)
            continue
        if lane.slice is None and len(model.slices) > 1:
            problems.append(
                f"{where(base)}: 'slice' is required when the fleet has several slices ({', '.join(model.slices)})"
            )
            continue
        slice_name = lane.slice or next(iter(model.slices))
        if slice_name not in model.slices:
            ref_problem(base + ("slice",), "slice", slice_name, list(model.slices))
            continue
        if lane.bundle not in model.bundles:
            ref_problem(base + ("bundle",), "bundle", lane.bundle, list(model.bundles))
        if lane.runtime and lane.runtime not in model.runtime_profiles:
            ref_problem(base + ("runtime",), "runtime profile", lane.runtime, list(model.runtime_profiles))
        if lane.cache and lane.cache not in model.cache_policies:
            ref_problem(base + ("cache",), "cache policy", lane.cache, list(model.cache_policies))
        try:
            indices = _parse_worker_spec(lane.workers)
        except ValueError as bad:
            problems.append(
                f"{where(base + ('workers',))}: cannot read worker {bad}; "
                f"expected 'all', an index, a range like '0-5', or a list of those"
            )
            continue
        if indices == []:
            problems.append(
                f"{where(base + ('workers',))}: lane '{lane_name}' has no workers; "
                f"expected 'all', an index, a range like '0-5', or a non-empty list of those"
            )
            continue
        available = by_slice[slice_name]
        if indices is None:
            indices = sorted(available)
        missing = [i for i in indices if i not in available]
        if missing:
            problems.append(
                f"{where(base + ('workers',))}: slice '{slice_name}' has no worker index "
                f"{_some(missing)} (indices: {_some(sorted(available))})"
            )
            continue
        names = []
        for i in sorted(set(indices)):
            wname = available[i].name
            if wname in owner:
                problems.append(
                    f"{where(base + ('workers',))}: worker {wname} is already in lane "
                    f"'{owner[wname]}'; a worker belongs to one lane at a time"
                )
            else:
                owner[wname] = lane_name
            names.append(wname)
        members[lane_name] = tuple(names)
        _check_cache_policy(model, lane_name, lane, slice_name, indices, where, problems)

    for prof_name, prof in model.runtime_profiles.items():
        base = ("runtime_profiles", prof_name)
        for var in prof.env:
            if var in prof.forbid:
                problems.append(f"{where(base + ('env', var))}: {var} is both set and forbidden")
            elif var in FOLKLORE_VARS:
                problems.append(f"{where(base + ('env', var))}: {var} {FOLKLORE_VARS[var]}")
            elif not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
                problems.append(f"{where(base + ('env', var))}: '{var}' is not a valid variable name")

    workers = [WorkerRef(**{**w.__dict__, "lane": owner.get(w.name)}) for w in workers]
    return workers, members


def lane_slice_names(model: FleetModel, lane: Lane) -> list[str]:
    """A lane's slices in process order."""
    if lane.slices:
        return list(lane.slices)
    return [lane.slice or next(iter(model.slices))]


def _multislice_problems(
    model: FleetModel, lane_name: str, lane: Lane, where: Callable[[tuple[Any, ...]], str], problems: list[str]
) -> list[str] | None:
    """A multislice lane's slices, or None after adding why it cannot run as one gang."""
    base = ("lanes", lane_name)
    slices = lane.slices or []
    before = len(problems)
    if lane.slice is not None:
        problems.append(f"{where(base + ('slice',))}: give 'slice' or 'slices', not both")
    if lane.workers != "all":
        problems.append(
            f"{where(base + ('workers',))}: a multislice lane takes every worker of each slice; "
            f"drop 'workers' (or use 'slice' and 'workers' for part of one slice)"
        )
    if len(slices) < 2:
        problems.append(
            f"{where(base + ('slices',))}: a multislice lane needs two or more slices, got {len(slices)}; "
            f"use 'slice: NAME' for one"
        )
    dupes = sorted({s for s in slices if slices.count(s) > 1})
    if dupes:
        problems.append(f"{where(base + ('slices',))}: slice {', '.join(dupes)} is listed twice")
    for i, s in enumerate(slices):
        if s not in model.slices:
            known = list(model.slices)
            problems.append(
                f"{where(base + ('slices', i))}: no slice '{s}'{did_you_mean(s, known)} (defined: {', '.join(known)})"
            )
    if len(problems) > before:
        return None
    kinds = {s: model.slices[s].accelerator_type for s in slices}
    if len(set(kinds.values())) > 1:
        listed = ", ".join(f"{s}: {k or 'unset'}" for s, k in kinds.items())
        problems.append(
            f"{where(base + ('slices',))}: the slices of multislice lane '{lane_name}' differ in accelerator "
            f"type ({listed}); one gang spans slices of one type and shape"
        )
    sizes = {s: len(model.slices[s].workers) for s in slices}
    if len(set(sizes.values())) > 1:
        listed = ", ".join(f"{s}: {n} worker{'s' if n != 1 else ''}" for s, n in sizes.items())
        problems.append(
            f"{where(base + ('slices',))}: the slices of multislice lane '{lane_name}' differ in size "
            f"({listed}); every slice runs one process per host of the same shape"
        )
    return None if len(problems) > before else list(slices)


def _check_cache_policy(
    model: FleetModel,
    lane_name: str,
    lane: Lane,
    slice_name: str,
    indices: list[int],
    where: Callable[[tuple[Any, ...]], str],
    problems: list[str],
) -> None:
    if not lane.cache or lane.cache not in model.cache_policies:
        return
    policy = model.cache_policies[lane.cache]
    sl = model.slices[slice_name]
    path = ("cache_policies", lane.cache)
    if policy.root and not policy.root.startswith("/"):
        line = (
            f"{where(path + ('root',))}: cache root {policy.root!r} must be an absolute path on the workers "
            "(it is used as given on every worker)"
        )
        if line not in problems:
            problems.append(line)
        return
    if policy.mode == "single-writer":
        if not policy.root:
            problems.append(f"{where(path)}: single-writer needs 'root' on the slice's shared mount")
        elif not sl.shared_dir:
            problems.append(
                f"{where(path + ('root',))}: single-writer for lane '{lane_name}' needs a shared "
                f"mount, but slice '{slice_name}' has no shared_dir"
            )
        elif not _is_within(policy.root, sl.shared_dir):
            problems.append(
                f"{where(path + ('root',))}: single-writer root {policy.root} is not under slice "
                f"'{slice_name}' shared_dir {sl.shared_dir}; readers could not see the writer's entries"
            )
        first = min(indices) if indices else None
        writer = policy.writer if policy.writer is not None else first
        if writer not in indices:
            problems.append(f"{where(path + ('writer',))}: writer {writer} is not a worker of lane '{lane_name}'")
        elif writer != first and _bundle_has(model, lane.bundle, "jax"):
            problems.append(
                f"{where(path + ('writer',))}: lane '{lane_name}' runs JAX, which only writes its "
                f"cache from process 0 (worker {first}); writer {writer} would never write"
            )
    elif policy.mode == "per-host" and policy.root and sl.shared_dir and _is_within(policy.root, sl.shared_dir):
        problems.append(
            f"{where(path + ('root',))}: per-host root {policy.root} is on the shared mount "
            f"{sl.shared_dir}; every worker would write one directory (use single-writer)"
        )


def _is_within(path: str, parent: str) -> bool:
    p, q = Path(path), Path(parent)
    return p == q or q in p.parents


def _bundle_has(model: FleetModel, bundle: str, dist: str) -> bool:
    b = model.bundles.get(bundle)
    return b is not None and dist in project_names(b.pins)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of fleet.yaml, generated from the model."""
    schema = FleetModel.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema
