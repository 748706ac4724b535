"""The receipt model: what a receipt must hold, and the checker that says where one does not.

A receipt (`record.json`, written by the hostside launcher) is documented by
`orchestrator/schema/receipt.schema.json`. `validate` checks a document against
it with the few JSON Schema keywords the schema uses, so the controller needs no
extra dependency (a test keeps the schema within `SUPPORTED_KEYWORDS`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

Doc = dict[str, Any]  # a parsed JSON object (a receipt, or a part of one)

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schema" / "receipt.schema.json"
SCHEMA_VERSION = 1  # of the documents this package writes (gather.json, report and compare JSON)
# The start-up order every receipt should show (FIELD-GUIDE section 3): policy before any
# import, caches before the first computation, SPMD / distributed init before user code.
STARTUP_RANK = {
    "policy": 0,
    "import": 1,
    "cache-init": 2,
    "wait-release": 3,
    "spmd-init": 4,
    "distributed-init": 4,
    "user-code": 5,
}
STACK_KEYS = ("python", "torch", "torch_xla", "jax", "jaxlib", "libtpu", "torch_tpu")

# The JSON Schema keywords `validate` understands; a test keeps the schema within them.
SUPPORTED_KEYWORDS = {
    "$schema",
    "$id",
    "$ref",
    "$defs",
    "title",
    "description",
    "type",
    "enum",
    "required",
    "properties",
    "additionalProperties",
    "items",
    "minimum",
}
_TYPES: dict[str, Callable[[object], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


@lru_cache(maxsize=1)
def load_schema() -> Doc:
    """The shipped receipt schema (JSON Schema 2020-12)."""
    schema: Doc = json.loads(SCHEMA_PATH.read_text())
    return schema


def validate(doc: object, schema: Doc | None = None) -> list[str]:
    """Problems of `doc` against the receipt schema, as `path: what` lines (empty when valid)."""
    root = schema or load_schema()
    problems: list[str] = []
    _check(doc, root, root, "$", problems)
    return problems


_DROP = object()  # what `prune` returns for a value that does not fit its schema
_MAX_INT = 2**63  # larger numbers are no timing, count or id a launcher writes


def prune(doc: object, schema: Doc | None = None) -> Doc | None:
    """`doc` with every value that does not fit the receipt schema left out.

    The report reads receipts written on workers; a receipt of the wrong shape is
    flagged (`validate`), and what is read of it is only what has the type the schema
    promises: a value of the wrong type, a non-finite or absurdly large number, an
    object without its required keys are dropped (a list item, an object's key), never
    half-read. None when `doc` is not an object at all.
    """
    root = schema or load_schema()
    if not isinstance(doc, dict):
        return None
    out = _prune(doc, root, root, top=True)
    return out if isinstance(out, dict) else None


def _prune(value: Any, schema: Doc, root: Doc, *, top: bool = False) -> Any:
    if "$ref" in schema:
        return _prune(value, root["$defs"][schema["$ref"].split("/")[-1]], root, top=top)
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        if not any(_TYPES[t](value) for t in types):
            return _DROP
    if "enum" in schema and value not in schema["enum"]:
        return _DROP
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return value if abs(value) < _MAX_INT and value == value else _DROP  # finite, not NaN
    if isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, dict):
            return [v for v in value if isinstance(v, (str, bool)) or v is None]
        return [p for p in (_prune(v, items, root) for v in value) if p is not _DROP]
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        out = {}
        for name, item in value.items():
            sub = props.get(name, extra if isinstance(extra, dict) else None)
            if sub is None and (extra is False or name in props):
                continue
            pruned = _prune(item, sub, root) if sub is not None else _plain(item)
            if pruned is not _DROP:
                out[name] = pruned
        if not top and any(name not in out for name in schema.get("required", [])):
            return _DROP
        return out
    return _DROP


def _plain(value: Any) -> Any:
    """A value the schema says nothing about, kept only when it is a plain scalar."""
    if isinstance(value, (str, bool)) or value is None:
        return value
    if isinstance(value, (int, float)) and abs(value) < _MAX_INT and value == value:
        return value
    return _DROP


def startup_rank(step: str) -> int | None:
    """Where a start-up step (`import jax`, `user-code`, ...) belongs in the expected order."""
    return STARTUP_RANK.get(step.split(" ", 1)[0])


def _check(value: Any, schema: Doc, root: Doc, path: str, out: list[str]) -> None:
    if "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/$defs/"):
            raise ValueError(f"unsupported $ref {ref}")
        _check(value, root["$defs"][ref.split("/")[-1]], root, path, out)
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        if not any(_TYPES[t](value) for t in types):
            out.append(f"{path}: expected {' or '.join(types)}, got {_json_type(value)}")
            return
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: expected one of {schema['enum']}, got {value!r}")
    if "minimum" in schema and _TYPES["number"](value) and value < schema["minimum"]:
        out.append(f"{path}: {value} is below the minimum {schema['minimum']}")
    if isinstance(value, dict):
        _check_object(value, schema, root, path, out)
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _check(item, schema["items"], root, f"{path}[{i}]", out)


def _check_object(value: Doc, schema: Doc, root: Doc, path: str, out: list[str]) -> None:
    for name in schema.get("required", []):
        if name not in value:
            out.append(f"{path}: missing required key {name!r}")
    props = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in props:
            _check(item, props[name], root, f"{path}.{name}", out)
        elif extra is False:
            out.append(f"{path}: unexpected key {name!r}")
        elif isinstance(extra, dict):
            _check(item, extra, root, f"{path}.{name}", out)


def _json_type(value: object) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPES[name](value):
            return name
    return type(value).__name__
