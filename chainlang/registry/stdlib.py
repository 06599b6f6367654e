"""The standard events, declared in `stdlib/*.yaml` (package data).

Loading happens on every cold `chainlang check`, so it is kept cheap: the
files are composed by ruamel.yaml's safe loader on its C parser (with the
plain YAML 1.2 resolver, see `_yaml`) and the node trees turned into data
directly (`_plain`; anything unusual goes through the full constructor).
The declarations are only shape-checked (the tests check every schema
against the draft-07 meta-schema), nothing is imported, and the result is
cached for the process.

Cheaper still: `stdlib/_declarations.json` holds the same data as JSON, with
the text of the YAML files it came from. When the files' names and texts are
those, their data is read from it (~1 ms instead of ~25 ms of composing YAML;
comparing the texts costs less than importing hashlib would); otherwise (a YAML
file edited since) from the YAML, so it can only be slow, never stale.
`write_snapshot()` rewrites it; a test keeps it current.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from chainlang.registry.errors import RegistryError
from chainlang.registry.spec import (
    EMPTY_PARAMS,
    EventSpec,
    event_name_problem,
    is_implementation_pointer,
)

__all__ = ["DECLARATION_KEYS", "SNAPSHOT", "declarations_from_data", "load_declarations", "spec_from_declaration",
           "stdlib_specs", "write_snapshot"]

SNAPSHOT = "_declarations.json"  # in the stdlib data directory, beside the YAML files

DECLARATION_KEYS = frozenset({"description", "params", "result", "idempotent", "effects", "implementation", "kind"})
_FILE_KEYS = frozenset({"namespace", "description", "events"})


@cache
def stdlib_specs() -> tuple[EventSpec, ...]:
    """Every standard event, in file then declaration order (cached per process)."""
    from chainlang.resources import data_dir

    directory = data_dir("stdlib")
    files = [(path.name, _read(path, f"stdlib/{path.name}")) for path in sorted(directory.glob("*.yaml"))]
    snapshot = _snapshot_data(directory / SNAPSHOT, files)
    specs: list[EventSpec] = []
    for index, (name, text) in enumerate(files):
        source = f"stdlib/{name}"
        data = snapshot[index] if snapshot is not None else _safe_load(text, source)
        specs.extend(declarations_from_data(data, source))
    return tuple(specs)


def load_declarations(path: Path, *, source: str | None = None) -> list[EventSpec]:
    """The events declared in one YAML file of the stdlib format
    (`namespace:` + `events:` name → declaration)."""
    source = source or str(path)
    return declarations_from_data(_safe_load(_read(path, source), source), source)


def _read(path: Path, source: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise RegistryError(f"{source}: cannot read: {exc.strerror or exc}") from None


def _snapshot_data(path: Path, files: list[tuple[str, bytes]]) -> list[Any] | None:
    """The data of each file from the snapshot at `path`, or None when there is none or it
    was written from other files (then the YAML is read)."""
    try:
        snapshot = json.loads(path.read_bytes())
        entries = snapshot["files"]
        if [entry[:2] for entry in entries] != [[name, text.decode("utf-8")] for name, text in files]:
            return None
        return [entry[2] for entry in entries]
    except (OSError, ValueError, TypeError, KeyError, IndexError):  # no snapshot, or not one of ours
        return None


def write_snapshot(directory: Path | None = None) -> Path:
    """Write `_declarations.json` from the YAML files of the stdlib data directory (run it
    after editing them: `python -c "from chainlang.registry.stdlib import write_snapshot;
    write_snapshot()"`). Refuses data that JSON would not give back exactly."""
    from chainlang.resources import data_dir

    directory = directory or data_dir("stdlib")
    files = [(path.name, _read(path, f"stdlib/{path.name}")) for path in sorted(directory.glob("*.yaml"))]
    data = [[name, text.decode("utf-8"), _safe_load(text, f"stdlib/{name}")] for name, text in files]
    text = json.dumps({"files": data}, ensure_ascii=False, indent=1)
    if not _same(json.loads(text)["files"], data):
        raise RegistryError("the stdlib declarations hold values JSON cannot keep (non-text keys, infinity...)")
    target = directory / SNAPSHOT
    target.write_text(text + "\n", encoding="utf-8")
    return target


def _same(one: Any, two: Any) -> bool:
    """Equal, with the same types all the way down (1, 1.0 and True are three values here)."""
    if type(one) is not type(two):
        return False
    if isinstance(one, dict):
        return list(one) == list(two) and all(_same(one[k], two[k]) for k in one)
    if isinstance(one, list):
        return len(one) == len(two) and all(_same(a, b) for a, b in zip(one, two))
    return bool(one == two) or (one != one and two != two)  # NaN is itself here


def declarations_from_data(data: Any, source: str) -> list[EventSpec]:
    """The events of one declarations file, from its data."""
    if not isinstance(data, Mapping):
        raise RegistryError(f"{source}: expected a mapping with `namespace` and `events`")
    unknown = sorted(set(data) - _FILE_KEYS)
    if unknown:
        raise RegistryError(f"{source}: unknown top-level key {unknown[0]!r} (expected namespace, description, events)")
    namespace = data.get("namespace")
    events = data.get("events") or {}
    if not isinstance(events, Mapping):
        raise RegistryError(f"{source}: `events` must map event names to declarations")
    specs = []
    for name, declaration in events.items():
        if namespace is not None and not str(name).startswith(f"{namespace}."):
            raise RegistryError(f"{source}: event '{name}' is outside the file's namespace '{namespace}'")
        specs.append(spec_from_declaration(str(name), declaration, source=source))
    return specs


def spec_from_declaration(name: str, declaration: object, *, source: str) -> EventSpec:
    """An EventSpec from a declaration mapping (keys: DECLARATION_KEYS)."""
    problem = event_name_problem(name)
    if problem is not None:
        raise RegistryError(f"{source}: {problem}")
    if declaration is None:
        declaration = {}
    if not isinstance(declaration, Mapping):
        raise RegistryError(f"{source}: event '{name}': the declaration must be a mapping")
    unknown = sorted(set(declaration) - DECLARATION_KEYS)
    if unknown:
        raise RegistryError(
            f"{source}: event '{name}': unknown key {unknown[0]!r} (expected one of {', '.join(sorted(DECLARATION_KEYS))})"
        )
    description = declaration.get("description") or ""
    params = declaration.get("params")
    result = declaration.get("result")
    idempotent = declaration.get("idempotent", False)
    effects = declaration.get("effects") or {}
    implementation = declaration.get("implementation")
    kind = declaration.get("kind", "tool")
    if kind not in ("tool", "external"):
        raise RegistryError(f"{source}: event '{name}': kind is tool (the default) or external, not {kind!r}")
    if not isinstance(description, str):
        raise RegistryError(f"{source}: event '{name}': description must be text")
    if params is None:
        params = dict(EMPTY_PARAMS)
    if not isinstance(params, Mapping) or params.get("type") != "object":
        raise RegistryError(f"{source}: event '{name}': params must be a JSON Schema with type: object")
    if result is not None and not isinstance(result, Mapping):
        raise RegistryError(f"{source}: event '{name}': result must be a JSON Schema mapping")
    if not isinstance(idempotent, bool):
        raise RegistryError(f"{source}: event '{name}': idempotent must be true or false")
    if not isinstance(effects, Mapping):
        raise RegistryError(f"{source}: event '{name}': effects must be a mapping of flags")
    calls = effects.get("model_calls", 0)
    if isinstance(calls, bool) or not isinstance(calls, int) or calls < 0:
        raise RegistryError(f"{source}: event '{name}': effects.model_calls is a whole number >= 0 (the model "
                            f"calls the event makes each time it runs), not {calls!r}")
    if implementation is not None and not is_implementation_pointer(implementation):
        raise RegistryError(
            f"{source}: event '{name}': implementation must be 'package.module:function', not {implementation!r}"
        )
    if kind == "external":  # fired by chainlang itself (task.due), not called by a step: params are its payload
        if implementation is not None or result is not None:
            raise RegistryError(f"{source}: event '{name}': an external event has a payload (params), no result "
                                "or implementation")
        return EventSpec.external_event(name, dict(params), description=description.strip(), source=source)
    return EventSpec(
        name=name,
        description=description.strip(),
        params_schema=dict(params),
        result_schema=dict(result) if result is not None else None,
        kind="tool",
        idempotent=idempotent,
        effects=dict(effects),
        implementation=implementation,
        source=source,
    )


def _safe_load(text: bytes, source: str) -> Any:
    yaml = _yaml()
    try:
        try:
            return _plain(yaml.compose(text))
        except _Unsupported:  # anything beyond plain maps, lists and scalars
            return yaml.load(text)
    except Exception as exc:  # ruamel's YAMLError, or a C-parser error
        message = " ".join(str(exc).split())
        raise RegistryError(f"{source}: invalid YAML: {message}") from None


class _Unsupported(Exception):
    pass


_TAG = "tag:yaml.org,2002:"
_SPECIAL_FLOATS = {".inf": float("inf"), "+.inf": float("inf"), "-.inf": float("-inf"), ".nan": float("nan")}


def _plain(root: Any) -> Any:
    """Python data from a composed node tree: the same result as the safe
    constructor for maps, sequences, strings, ints, floats, booleans and nulls
    in half the time. Anything else (merge keys, timestamps, other tags, odd
    number forms, duplicate keys) raises _Unsupported and the file goes
    through the full constructor instead."""
    from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

    str_tag, int_tag, float_tag = _TAG + "str", _TAG + "int", _TAG + "float"
    bool_tag, null_tag, map_tag, seq_tag = _TAG + "bool", _TAG + "null", _TAG + "map", _TAG + "seq"

    def convert(node: Any, depth: int) -> Any:
        if depth > 64:
            raise _Unsupported
        tag = node.tag
        if isinstance(node, ScalarNode):
            value = node.value
            if tag == str_tag:
                return value
            try:
                if tag == int_tag:
                    return int(value, 10)
                if tag == float_tag:
                    lowered = value.lower()
                    return _SPECIAL_FLOATS[lowered] if lowered in _SPECIAL_FLOATS else float(value)
            except ValueError:
                raise _Unsupported from None
            if tag == bool_tag:
                return value.lower() == "true"
            if tag == null_tag:
                return None
            raise _Unsupported
        if isinstance(node, MappingNode) and tag == map_tag:
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                key = convert(key_node, depth + 1)
                if isinstance(key, (dict, list)) or key in out:
                    raise _Unsupported  # the constructor reports duplicate keys with their position
                out[key] = convert(value_node, depth + 1)
            return out
        if isinstance(node, SequenceNode) and tag == seq_tag:
            return [convert(item, depth + 1) for item in node.value]
        raise _Unsupported

    return None if root is None else convert(root, 0)


@cache
def _yaml() -> Any:
    """ruamel.yaml's safe loader (C parser when ruamel.yaml.clib is installed),
    with the plain YAML 1.2 resolver instead of the version-switching one: the
    same results for files without a `%YAML` directive, in about half the time
    (the version lookup runs for every scalar)."""
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe")
    try:
        from ruamel.yaml.resolver import Resolver

        class _Yaml12Resolver(Resolver):
            def __init__(self, version: Any = None, loader: Any = None, loadumper: Any = None) -> None:
                super().__init__(loadumper=loadumper)

        yaml.Resolver = _Yaml12Resolver
        yaml.load(b"probe: [1, true, null, text]")
    except Exception:  # a ruamel.yaml whose internals differ: keep its default resolver
        yaml = YAML(typ="safe")
    return yaml
