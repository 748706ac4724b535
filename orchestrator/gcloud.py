"""Import a TPU VM slice from `gcloud compute tpus tpu-vm describe NAME --format=json`.

The describe document (the TPU API's `Node` resource) lists one entry of
`networkEndpoints` per worker VM, in worker order: `ipAddress` is the worker's
internal address, and `accessConfig.externalIp` its external one when the
slice was created with external IPs. The accelerator is `acceleratorType`
(e.g. `v6e-32`), or on nodes created with `--type/--topology` only
`acceleratorConfig` (`{type: V6E, topology: 4x8}`).

`import_describe` turns that document into an `ImportedSlice`;
`render_snippet` prints it as a `slices:` entry of fleet.yaml, and
`add_slice` / `write_slice` add it to an existing fleet file without touching
any other byte of it. Every problem with the input names the file and the
JSON path (`tpu.json: networkEndpoints[2].ipAddress: missing`).
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from hostside.files import write_atomic
from orchestrator.errors import ConfigError
from orchestrator.fleet import Fleet, build_fleet, load_fleet
from orchestrator.fleet_values import is_name
from orchestrator.yamlsrc import loads

# acceleratorConfig.type -> (acceleratorType prefix, TensorCores per chip).
# The suffix of an accelerator type counts TensorCores on v2, v3, v4 and v5p
# (two per chip: v4-32 is 16 chips) and chips on v5e and v6e (v6e-32 is 32).
ACCELERATOR_TYPES = {
    "V2": ("v2", 2),
    "V3": ("v3", 2),
    "V4": ("v4", 2),
    "V5LITE_POD": ("v5litepod", 1),
    "V5P": ("v5p", 2),
    "V6E": ("v6e", 1),
}

# Records one problem with the input: (JSON path, message); all are reported together.
Problem = Callable[[str, str], None]
# A JSON object of the describe document.
JSONObject = Mapping[str, object]


@dataclass(frozen=True)
class ImportedWorker:
    """One worker VM: the address orch connects to, and the one its peers use."""

    index: int
    address: str
    internal_address: str | None  # set only when it differs from address


@dataclass(frozen=True)
class ImportedSlice:
    """A slice entry for fleet.yaml, built from one describe document."""

    name: str  # the slice name in fleet.yaml
    source: str  # the file it came from
    node: str | None  # projects/P/locations/Z/nodes/N
    zone: str | None
    accelerator_type: str
    topology: str | None
    runtime_version: str | None  # fleet.yaml has no field for it: a comment
    state: str | None
    health: str | None
    workers: tuple[ImportedWorker, ...]
    user: str | None = None
    identity_file: str | None = None
    warnings: tuple[str, ...] = ()

    def entry(self) -> dict[str, object]:
        """The slice as fleet.yaml data (what load_fleet will see)."""
        out: dict[str, object] = {
            "accelerator_type": self.accelerator_type,
            # On GCE the metadata server exists: libtpu reads
            # the topology from it, as on any TPU VM.
            "skip_metadata_query": False,
        }
        if self.user:
            out["user"] = self.user
        if self.identity_file:
            out["identity_file"] = self.identity_file
        out["workers"] = [_worker_data(w) for w in self.workers]
        return out


def _worker_data(w: ImportedWorker) -> dict[str, int | str]:
    data: dict[str, int | str] = {"index": w.index, "address": w.address}
    if w.internal_address:
        data["internal_address"] = w.internal_address
    return data


# ---------------------------------------------------------------------------
# Reading the describe document


def import_describe(
    path: str | os.PathLike[str], *, name: str | None = None, user: str | None = None, identity_file: str | None = None
) -> ImportedSlice:
    """Read a describe document from `path` and build the slice entry."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save gcloud's JSON output as is") from None
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: no such file",
            hint="gcloud compute tpus tpu-vm describe NAME --zone ZONE --format=json > tpu.json",
        ) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    return slice_from_text(text, source=path.name, name=name, user=user, identity_file=identity_file)


def slice_from_text(
    text: str, *, source: str, name: str | None = None, user: str | None = None, identity_file: str | None = None
) -> ImportedSlice:
    """Parse describe JSON text (as if read from `source`) into an ImportedSlice."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{source}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}",
            hint="use the output of `gcloud compute tpus tpu-vm describe NAME --format=json`",
        ) from None
    except (ValueError, RecursionError) as exc:  # an integer of thousands of digits, nesting thousands deep
        raise ConfigError(f"{source}: not a describe document: {str(exc)[:200] or type(exc).__name__}") from None
    if isinstance(doc, list):
        # `tpu-vm list --format=json` prints a list; one node is as good as describe.
        if len(doc) != 1:
            names = ", ".join(_short_name(n.get("name")) or "?" for n in doc if isinstance(n, dict))
            raise ConfigError(
                f"{source}: a list of {len(doc)} TPUs ({names or 'none'}); import one at a time",
                hint="gcloud compute tpus tpu-vm describe NAME --zone ZONE --format=json",
            )
        doc = doc[0]
        return _build(doc, source=source, base="[0]", name=name, user=user, identity_file=identity_file)
    return _build(doc, source=source, base="", name=name, user=user, identity_file=identity_file)


def _join(base: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{base}[{key}]"
    return f"{base}.{key}" if base else key


def _build(
    doc: object, *, source: str, base: str, name: str | None, user: str | None, identity_file: str | None
) -> ImportedSlice:
    problems: list[str] = []
    warnings: list[str] = []

    def problem(path: str, msg: str) -> None:
        problems.append(f"{source}: {path or '(top level)'}: {msg}")

    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: {base or '(top level)'}: expected a JSON object (a TPU node), got {_kind(doc)}")

    node = _string(doc, "name", base, problem, required=False)
    slice_name = name or _short_name(node)
    if not slice_name:
        problem(_join(base, "name"), "missing; pass --slice NAME")
    elif not is_name(slice_name):
        where = "--slice" if name else _join(base, "name")
        problem(where, f"'{_one_line(slice_name)}' is not a valid slice name (letters, digits, '.', '_' or '-')")

    accelerator_type, topology, derived = _accelerator(doc, base, problem)
    if accelerator_type and derived and derived != accelerator_type:
        warnings.append(
            f"{source}: acceleratorType {accelerator_type} does not match acceleratorConfig "
            f"({derived}); using acceleratorType"
        )
    runtime = _string(doc, "runtimeVersion", base, problem, required=False)
    state = _string(doc, "state", base, problem, required=False)
    health = _string(doc, "health", base, problem, required=False)
    workers = _workers(doc, base, problem, state)

    if state and state != "READY":
        warnings.append(f"{source}: state is {state}, not READY; the workers may not answer yet")
    if health and health != "HEALTHY":
        warnings.append(
            f"{source}: health is {health}"
            + (f" ({doc['healthDescription']})" if isinstance(doc.get("healthDescription"), str) else "")
        )
    external = [w for w in workers if w.internal_address]
    if external and len(external) != len(workers):
        inside = [str(w.index) for w in workers if not w.internal_address]
        warnings.append(
            f"{source}: only some workers have an external IP; workers {', '.join(inside)} "
            f"are reached at their internal address"
        )
    if not accelerator_type and not problems:
        # acceleratorType is there but empty, and acceleratorConfig's problems were not reported because of it.
        problem(_join(base, "acceleratorType"), "empty, and acceleratorConfig does not give a valid type")
    if problems or not slice_name or not accelerator_type:
        raise ConfigError(problems)
    return ImportedSlice(
        name=slice_name,
        source=source,
        node=node,
        zone=_zone(node),
        accelerator_type=accelerator_type,
        topology=topology,
        runtime_version=runtime,
        state=state,
        health=health,
        workers=tuple(workers),
        user=user,
        identity_file=identity_file,
        warnings=tuple(warnings),
    )


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _string(doc: JSONObject, key: str, base: str, problem: Problem, *, required: bool) -> str | None:
    path = _join(base, key)
    value = doc.get(key)
    if value is None or value == "":
        if required:
            problem(path, "missing")
        return None
    if not isinstance(value, str):
        problem(path, f"expected a string, got {_kind(value)}")
        return None
    return value


def _short_name(node: object) -> str | None:
    if not isinstance(node, str) or not node:
        return None
    return node.rstrip("/").rsplit("/", 1)[-1]


def _zone(node: str | None) -> str | None:
    m = re.search(r"/locations/([^/]+)/", node or "")
    return m.group(1) if m else None


def _accelerator(doc: JSONObject, base: str, problem: Problem) -> tuple[str | None, str | None, str | None]:
    """(accelerator type, topology, the type acceleratorConfig implies): acceleratorType wins."""
    topology = None
    derived = None
    config = doc.get("acceleratorConfig")
    cpath = _join(base, "acceleratorConfig")
    if config is not None and not isinstance(config, dict):
        problem(cpath, f"expected an object, got {_kind(config)}")
        config = None
    if config:
        topology = _string(config, "topology", cpath, problem, required=False)
        kind = _string(config, "type", cpath, problem, required=False)
        if kind and topology:
            derived = _type_from_config(kind, topology, cpath, problem, quiet="acceleratorType" in doc)
    given = _string(doc, "acceleratorType", base, problem, required=False)
    if given:
        # Some API clients print the full resource path; fleet.yaml wants the short name.
        return given.rsplit("/", 1)[-1], topology, derived
    if derived:
        return derived, topology, derived
    if not config:
        problem(_join(base, "acceleratorType"), "missing (and no acceleratorConfig to derive it from)")
    elif not (config.get("type") and config.get("topology")):
        missing = [k for k in ("type", "topology") if not config.get(k)]
        problem(_join(cpath, missing[0]), "missing (needed to derive the accelerator type)")
    return None, topology, derived


def _type_from_config(kind: str, topology: str, cpath: str, problem: Problem, *, quiet: bool) -> str | None:
    dims = topology.lower().split("x")
    if not all(d.isdigit() and int(d) > 0 for d in dims):
        if not quiet:
            problem(_join(cpath, "topology"), f"'{topology}' is not a topology like 4x8 or 2x2x4")
        return None
    if kind not in ACCELERATOR_TYPES:
        if not quiet:
            problem(_join(cpath, "type"), f"unknown TPU type '{kind}' (known: {', '.join(ACCELERATOR_TYPES)})")
        return None
    prefix, cores_per_chip = ACCELERATOR_TYPES[kind]
    chips = math.prod(int(d) for d in dims)
    return f"{prefix}-{chips * cores_per_chip}"


def _workers(doc: JSONObject, base: str, problem: Problem, state: str | None) -> list[ImportedWorker]:
    path = _join(base, "networkEndpoints")
    endpoints = doc.get("networkEndpoints")
    if endpoints is None:
        problem(path, "missing" + (f" (state: {state}; a slice has endpoints once it is READY)" if state else ""))
        return []
    if not isinstance(endpoints, list):
        problem(path, f"expected a list, got {_kind(endpoints)}")
        return []
    if not endpoints:
        problem(path, "empty: the TPU has no workers" + (f" (state: {state})" if state else ""))
        return []
    workers: list[ImportedWorker] = []
    seen: dict[str, str] = {}
    for i, ep in enumerate(endpoints):
        epath = _join(path, i)
        if not isinstance(ep, dict):
            problem(epath, f"expected an object, got {_kind(ep)}")
            continue
        internal = _address(ep, "ipAddress", epath, problem, required=True)
        external = None
        access = ep.get("accessConfig")
        if access is not None and not isinstance(access, dict):
            problem(_join(epath, "accessConfig"), f"expected an object, got {_kind(access)}")
        elif access:
            external = _address(access, "externalIp", _join(epath, "accessConfig"), problem, required=False)
        # `port` (8470) is the TPU runtime's port, not SSH: it is deliberately ignored.
        for label, value in (("ipAddress", internal), ("accessConfig.externalIp", external)):
            if value and value in seen:
                problem(_join(epath, label), f"{value} is also {seen[value]}")
            elif value:
                seen[value] = _join(epath, label)
        if internal:
            workers.append(
                ImportedWorker(index=i, address=external or internal, internal_address=internal if external else None)
            )
    return workers


def _address(doc: JSONObject, key: str, base: str, problem: Problem, *, required: bool) -> str | None:
    value = _string(doc, key, base, problem, required=required)
    if value is None:
        return None
    try:
        ipaddress.ip_address(value)
    except ValueError:
        problem(_join(base, key), f"{_one_line(value)[:100]!r} is not an IP address")
        return None
    return value


# ---------------------------------------------------------------------------
# Rendering


def _scalar(value: object) -> str:
    """A YAML scalar that reads back as exactly `value`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    plain = text and not re.search(r"[:#{}\[\],&*!|>'\"%@`]|^[-?\s]|\s$", text)
    if plain:
        try:
            if yaml.safe_load(text) == text:
                return text
        except yaml.YAMLError:
            pass
    return json.dumps(text)


# Characters YAML reads as a line break (or that a terminal would act on): never inside a comment.
_BREAKS = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")


def _one_line(text: str) -> str:
    """`text` with every line break and control character escaped, so it stays on one line."""
    return _BREAKS.sub(lambda m: repr(m.group())[1:-1], text)


def render_entry(imp: ImportedSlice, *, indent: int = 2, step: int = 2) -> str:
    """The slice entry (`NAME:` and its body) indented `indent` spaces, ending in a newline."""
    pad, body = " " * indent, " " * (indent + step)
    notes = [f"imported from {imp.source}" + (f": {imp.node}" if imp.node else "")]
    facts = []
    if imp.runtime_version:
        facts.append(f"runtime version {imp.runtime_version}")
    if imp.topology:
        facts.append(f"topology {imp.topology}")
    if imp.zone:
        facts.append(f"zone {imp.zone}")
    if facts:
        notes.append("; ".join(facts))
    lines = [f"{pad}{_scalar(imp.name)}:"]
    lines += [f"{body}# {_one_line(note)}" for note in notes]
    for key, value in imp.entry().items():
        if key == "workers":
            continue
        comment = "   # GCE: libtpu reads the topology from the metadata server" if key == "skip_metadata_query" else ""
        lines.append(f"{body}{key}: {_scalar(value)}{comment}")
    lines.append(f"{body}workers:")
    for w in imp.workers:
        inner = ", ".join(f"{k}: {_scalar(v)}" for k, v in _worker_data(w).items())
        lines.append(f"{body}{' ' * step}- {{{inner}}}")
    return "\n".join(lines) + "\n"


def render_snippet(imp: ImportedSlice) -> str:
    """A `slices:` section holding only this slice, ready to paste into fleet.yaml."""
    return "slices:\n" + render_entry(imp)


# ---------------------------------------------------------------------------
# Adding the slice to a fleet file


def add_slice(text: str, fleet_path: Path, imp: ImportedSlice) -> str:
    """Return the fleet text with the slice appended to `slices:`; every other byte unchanged.

    Refuses when a slice of that name exists or `slices` is not a block mapping
    (a flow-style `slices: {...}` cannot be extended textually).
    """
    name = fleet_path.name
    if not text.strip():
        return text + f"# orch fleet\nversion: 1\n\n{render_snippet(imp)}"
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(f"{name}:{mark.line + 1 if mark else 1}: not valid YAML; fix it before importing") from None
    if not isinstance(root, yaml.MappingNode):
        raise ConfigError(f"{name}:1: expected a mapping at the top level")
    slices = next((v for k, v in root.value if k.value == "slices"), None)
    if slices is None:
        sep = "" if text.endswith("\n") else "\n"
        return text + sep + "\n" + render_snippet(imp)
    if not isinstance(slices, yaml.MappingNode) or slices.flow_style or not slices.value:
        raise ConfigError(
            f"{name}:{slices.start_mark.line + 1} slices: not a block mapping; "
            f"add the slice by hand (`orch fleet import-gcloud` without --write prints it)"
        )
    for key, _ in slices.value:
        if key.value == imp.name:
            raise ConfigError(
                f"{name}:{key.start_mark.line + 1} slices.{imp.name}: a slice named '{imp.name}' already exists",
                hint="pass --slice NAME to import it under another name",
            )
    first_key, first_value = slices.value[0]
    indent = first_key.start_mark.column
    step = 2
    if isinstance(first_value, yaml.MappingNode) and first_value.value and not first_value.flow_style:
        step = max(1, first_value.value[0][0].start_mark.column - indent)
    end = _last_leaf(slices.value[-1][1]).end_mark
    if end.column == 0:
        pos = end.index
    else:
        newline = text.find("\n", end.index)
        pos = len(text) if newline < 0 else newline + 1
    head, tail = text[:pos], text[pos:]
    if not head.endswith("\n"):
        head += "\n"
    return head + render_entry(imp, indent=indent, step=step) + tail


def _last_leaf(node: yaml.Node) -> yaml.Node:
    """The last scalar or flow collection inside `node`.

    A block collection's end mark lies at the next token, past blank lines and
    comments that belong to what follows; a leaf's end mark is exact.
    """
    while isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and not node.flow_style and node.value:
        last = node.value[-1]
        node = last[1] if isinstance(node, yaml.MappingNode) else last
    return node


@dataclass(frozen=True)
class WriteResult:
    """What `write_slice` did."""

    path: Path
    created: bool
    fleet: Fleet


def write_slice(fleet_path: str | os.PathLike[str], imp: ImportedSlice) -> WriteResult:
    """Add the slice to the fleet file (created if missing), validated before and after writing."""
    path = Path(fleet_path)
    created = not path.exists()
    try:
        original = "" if created else path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    updated = add_slice(original, path, imp)
    # Validate the result before the file changes: a fleet that would not load is not written.
    build_fleet(loads(updated, path))
    write_atomic(str(path), updated, mode=(0o644 if created else path.stat().st_mode) & 0o7777)
    return WriteResult(path=path, created=created, fleet=load_fleet(path))
