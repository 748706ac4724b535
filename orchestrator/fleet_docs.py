"""docs/fleet-reference.md, generated from the fleet.yaml JSON Schema (itself generated from the model).

    python -m orchestrator.fleet_docs > docs/fleet-reference.md

A test compares the committed file with `render_reference()`, so the reference
changes whenever a field, type, default or description in
`orchestrator/fleet.py` does.
"""

from __future__ import annotations

import json
import re

from pydantic.json_schema import JsonSchemaValue

from orchestrator.fleet import FOLKLORE_VARS, json_schema

# A JSON Schema node as pydantic generates and types it (dict[str, Any]: its values are any JSON).
Node = JsonSchemaValue

HEADER = """\
# fleet.yaml reference

<!-- Generated from the model in orchestrator/fleet.py by orchestrator/fleet_docs.py; \
regenerate with `python -m orchestrator.fleet_docs > docs/fleet-reference.md`, do not edit by hand. -->

`fleet.yaml` describes the slices orch reaches over SSH, the bundles it installs, and the lanes
that tie workers, a bundle and policies together. It is validated once, when a command loads it;
`orch fleet validate` checks it on its own and `orch fleet schema` prints the JSON Schema this page is
generated from. Unknown keys are errors (with a suggestion for a misspelled one), and every problem
names the file, the line and the YAML path, e.g.
`fleet.yaml:14 lanes.validation.bundle: no bundle 'torch211'; did you mean 'torch-2.11'?`.

Paths on the controller (`known_hosts`, `config_file`, `identity_file`, `find_links`, `lock`) are
relative to the directory of fleet.yaml unless absolute, and `~` is expanded. Paths on the workers
(`root`, `shared_dir`, cache roots) are absolute paths on every worker; `root` and `shared_dir` are
normalised (`/var/lib/orch/` is `/var/lib/orch`). `python` is a command name or an absolute path.
No value that reaches a worker may hold a control character or start with `-`, and an `address` that
looks like an IP address must be one (`999.1.1.1` is refused).

The file is read as untrusted input: it must be UTF-8; YAML tags (`!foo`, `!!python/...`) and merge
keys are refused; anchors and aliases work, but a document whose aliases expand past 200 000 values
or that nests deeper than 64 levels is refused at once, naming the line; integers are at most 100
digits; a slice has at most 4096 workers, so a worker index or range stays below 4096.

Names (of slices, bundles, profiles, policies and lanes) are letters, digits, `.`, `_` and `-`.
An annotated example is [fleet.yaml](../fleet.yaml) at the top of the repository;
`orch fleet import-gcloud` writes a slice entry from `gcloud compute tpus tpu-vm describe`
(see [bring-up](bring-up.md)).
"""

RULES = """\
## Rules across sections

Checked after every field is valid, all reported together:

- A worker's index is unique in its slice, and no two workers share an address and port.
- A lane's `slice` names a slice (and is required once the fleet has several); its `bundle`,
  `runtime` and `cache` name a bundle, runtime profile and cache policy of this file; its `workers`
  exist in that slice.
- A worker belongs to at most one lane.
- A runtime profile does not both set and forbid a variable, sets only valid variable names, and never
  sets folklore that breaks current stacks:
{folklore}
- `single-writer` caches: `root` is required and lies under the slice's `shared_dir`; the writer is a
  worker of the lane, and for a lane whose bundle pins `jax` it is the lane's first worker (process 0),
  because JAX only writes its persistent cache from process 0.
- `per-host` caches are not placed on the shared mount (every worker would write one directory).
"""


# Descriptions for keys the model leaves undescribed (the model's own text wins when it has one).
FALLBACK = {
    ("Top level", "version"): "Format version of this file.",
    ("Top level", "slices"): "The TPU slices, by name; worker names are `<slice>-w<index>`.",
    ("Top level", "bundles"): "Pinned software stacks, by name; `orch bundle lock NAME` writes each one's lock.",
    ("Top level", "runtime_profiles"): "Environment policies applied before import, by name.",
    ("Top level", "cache_policies"): "Compilation-cache ownership policies, by name.",
    ("Top level", "lanes"): "Named groups of workers with their bundle and policies.",
    ("Lane", "bundle"): "Bundle name: what `orch deploy --lane` installs on the lane's workers.",
    ("BundleSource", "extra_index_urls"): "More package indexes, searched after index_url.",
}


def _resolve(schema: Node, node: Node) -> tuple[str | None, Node]:
    """(definition name, definition) for a `$ref` node; (None, node) for any other."""
    if node.get("$ref"):
        name = _ref_name(node)
        return name, schema["$defs"][name]
    return None, node


def _ref_name(node: Node) -> str:
    """The definition a `$ref` node points at: '#/$defs/Lane' -> 'Lane'."""
    return str(node["$ref"]).rsplit("/", 1)[-1]


def _anchor(title: str) -> str:
    """GitHub's heading anchor for a plain heading."""
    return re.sub(r"[^a-z0-9 _-]", "", title.lower()).replace(" ", "-")


def _type(schema: Node, node: Node) -> str:
    if "$ref" in node:
        name = _ref_name(node)
        return f"[{name}](#{_anchor(name)})"
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return "one of " + ", ".join(f"`{v}`" for v in node["enum"])
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        parts = [_type(schema, o) for o in options]
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]
    kind = node.get("type")
    if kind == "array":
        return f"list of {_plural(_type(schema, node.get('items', {})))}"
    if kind == "object":
        values = node.get("additionalProperties")
        if isinstance(values, dict):
            key = "name" if "$ref" in values else "string"
            return f"mapping of {key} to {_type(schema, values)}"
        return "mapping"
    return kind if kind in ("string", "integer", "number", "boolean") else "any"


def _plural(text: str) -> str:
    if text in ("string", "integer", "number", "boolean"):
        return text + "s"
    if "," in text or " or " in text:
        return f"({text})"
    return text


def _constraints(node: Node) -> list[str]:
    out = []
    for option in [node] + [o for o in node.get("anyOf", []) if o.get("type") != "null"]:
        if "minimum" in option:
            out.append(f">= {option['minimum']}")
        if "exclusiveMinimum" in option:
            out.append(f"> {option['exclusiveMinimum']}")
        if "maximum" in option:
            out.append(f"<= {option['maximum']}")
        if "pattern" in option:
            out.append(f"matches `{option['pattern']}`")
        if "minItems" in option:
            n = option["minItems"]
            out.append("at least one item" if n == 1 else f"at least {n} items")
        if "minProperties" in option:
            n = option["minProperties"]
            out.append("at least one entry" if n == 1 else f"at least {n} entries")
    return out


def _default(node: Node, required: bool) -> str:
    if required:
        return "required"
    if "default" in node:
        value = node["default"]
        if value is None:
            return "none"
        return f"`{value if isinstance(value, str) else json.dumps(value)}`"
    kind = node.get("type")
    if kind == "array":
        return "empty"
    if kind == "object":
        return "empty"
    if "$ref" in node:
        return "all defaults"
    return "none"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _sections(schema: Node) -> list[tuple[str, str, Node]]:
    """(title, YAML path, schema node) for the document and every nested model, depth first."""
    out: list[tuple[str, str, Node]] = [("Top level", "", schema)]
    seen: set[str] = set()

    def visit(path: str, node: Node) -> None:
        for key, prop in node.get("properties", {}).items():
            target = None
            sub_path = f"{path}.{key}" if path else key
            refs = [p for p in prop.get("anyOf", []) if "$ref" in p]  # an optional model: `X | None`
            if "$ref" in prop:
                target = prop
            elif len(refs) == 1:
                target = refs[0]
            elif (
                prop.get("type") == "object"
                and isinstance(prop.get("additionalProperties"), dict)
                and "$ref" in prop["additionalProperties"]
            ):
                target, sub_path = prop["additionalProperties"], f"{sub_path}.<name>"
            elif prop.get("type") == "array" and "$ref" in prop.get("items", {}):
                target, sub_path = prop["items"], f"{sub_path}[]"
            if target is None:
                continue
            name = _ref_name(target)
            definition = schema["$defs"][name]
            if name in seen:
                continue
            seen.add(name)
            out.append((name, sub_path, definition))
            visit(sub_path, definition)

    visit("", schema)
    return out


def render_reference() -> str:
    """The whole docs/fleet-reference.md text."""
    schema = json_schema()
    sections = _sections(schema)
    lines = [HEADER]
    lines.append("## Sections\n")
    for title, path, _ in sections:
        where = f" (`{path}`)" if path else ""
        lines.append(f"- [{title}](#{_anchor(title)}){where}")
    lines.append("- [Rules across sections](#rules-across-sections)\n")
    for title, path, node in sections:
        lines.append(f"## {title}\n")
        if path:
            lines.append(f"Path: `{path}`\n")
        if node.get("description"):
            lines.append(node["description"] + "\n")
        required = set(node.get("required", []))
        lines.append("| Key | Type | Default | Description |")
        lines.append("| --- | --- | --- | --- |")
        for key, prop in node.get("properties", {}).items():
            _, shown = _resolve(schema, prop) if "$ref" in prop else (None, prop)
            description = (
                prop.get("description")
                or FALLBACK.get((title, key))
                or (shown.get("description") if shown is not prop else "")
                or ""
            )
            extra = _constraints(prop)
            if extra:
                description = (description + " " if description else "") + f"({'; '.join(extra)})"
            lines.append(
                f"| `{key}` | {_cell(_type(schema, prop))} | {_cell(_default(prop, key in required))} "
                f"| {_cell(description) or '-'} |"
            )
        lines.append("")
    folklore = "\n".join(f"  - `{var}` {why}." for var, why in FOLKLORE_VARS.items())
    lines.append(RULES.format(folklore=folklore))
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_reference(), end="")
