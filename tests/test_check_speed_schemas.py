"""`chainlang check` answers "is this schema valid draft-07" without jsonschema for plain
schemas (chainlang/schemas/meta.py): its True must always be the meta-schema's answer, and
the diagnostics of schemas it does not vouch for must stay jsonschema's."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys

import jsonschema
import pytest

from chainlang.pipeline import check_text
from chainlang.schemas.meta import plainly_valid, schema_problems

# Keyword values, good and bad for the meta-schema, to combine.
_VALUES: dict[str, list[object]] = {
    "type": ["string", "integer", "strng", ["string", "null"], ["string", "string"], [], 3, None],
    "description": ["text", 3, None],
    "default": ["team", 3, None, {"$ref": "http://example.com"}, [1, 2]],
    "const": [1, "x"],
    "enum": [["a", "b"], [], "a", None],
    "examples": [[1], 1],
    "minimum": [0, 1.5, True, "1", None],
    "exclusiveMaximum": [10, "x"],
    "minLength": [0, 3, -1, 1.5, True, "2"],
    "maxItems": [2, -3],
    "uniqueItems": [True, 1, "yes"],
    "required": [["a"], ["a", "a"], [1], "a", []],
    "format": ["date", 7],
    "pattern": ["^a+$", "(", 5],
    "$ref": ["#/definitions/x", "http://example.com/s.json"],
    "$id": ["http://example.com/s", 5],
    "patternProperties": [{"^a": {}}, {"(": {}}],
    "dependencies": [{"a": ["b"]}],
    "items": [{"type": "string"}, [{"type": "string"}, True], {"type": "strng"}, [], 3, False],
    "additionalProperties": [False, {"type": "integer"}, {"minimum": "x"}, "no"],
    "properties": [{"a": {"type": "string"}}, {"a": {"type": 1}}, {"a": True}, [], {"a": 3}],
    "anyOf": [[{"type": "string"}, {"type": "null"}], [], [{"minLength": -1}], {"type": "string"}],
    "not": [{"type": "string"}, {"type": "x"}, 4],
    "definitions": [{"x": {"type": "string"}}, {"x": 1}],
    "x-custom": [1],
    "readOnly": [True, "no"],
}


def _schemas() -> list[object]:
    rng = random.Random(27)
    keys = sorted(_VALUES)
    found: list[object] = [True, False, None, [], "string", {}]
    for key in keys:
        found += [{key: value} for value in _VALUES[key]]
    for a, b in itertools.combinations(keys, 2):
        found.append({a: rng.choice(_VALUES[a]), b: rng.choice(_VALUES[b])})
    for _ in range(3000):
        chosen = rng.sample(keys, rng.randint(1, 5))
        schema = {key: rng.choice(_VALUES[key]) for key in chosen}
        found.append(schema if rng.random() < 0.7 else {"type": "object", "properties": {"p": schema}})
    return found


def _meta_valid(schema: object) -> bool:
    try:
        jsonschema.Draft7Validator.check_schema(schema)
    except jsonschema.SchemaError:
        return False
    return True


def test_plainly_valid_only_vouches_for_valid_usable_schemas() -> None:
    schemas = _schemas()
    vouched = 0
    for schema in schemas:
        if plainly_valid(schema):
            vouched += 1
            assert _meta_valid(schema), json.dumps(schema)
    assert vouched > len(schemas) // 10  # it does vouch for plenty: the fast path is taken


@pytest.mark.parametrize("schema", [{"type": "string", "default": "team"}, {"type": "integer", "minimum": 0},
                                    {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}},
                                     "required": ["a"], "additionalProperties": False},
                                    {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "who"}])
def test_plain_schemas_are_vouched_for(schema: dict[str, object]) -> None:
    assert plainly_valid(schema) and not schema_problems(schema) and _meta_valid(schema)


@pytest.mark.parametrize("schema", [{"$ref": "#/definitions/a"}, {"pattern": "^a$"}, {"type": "strng"},
                                    {"minLength": -1}, {"unknown": 1}, True, {"type": ["string", "string"]}])
def test_other_schemas_go_to_jsonschema(schema: object) -> None:
    assert not plainly_valid(schema)


_CHAIN = """\
chainlang: 1
chain: s.c
inputs:
  who: {{type: string, default: team}}
  {extra}
steps:
  - user.notify: {{message: "hi {{inputs.who}}"}}
"""


def _diagnostics(schemas: list[object]) -> list[tuple[object, ...]]:
    inputs = "".join(f"  n{i}: {json.dumps(schema)}\n" for i, schema in enumerate(schemas))
    text = _CHAIN.format(extra="").replace("  \nsteps:", inputs + "steps:")
    return [(d.rule, d.message, d.line, d.column, d.end_line, d.end_column) for d in check_text(text, "s.chain.yaml")]


def test_diagnostics_are_jsonschemas_with_or_without_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    import chainlang.schemas.cache as cache
    import chainlang.schemas.meta as meta

    schemas = [s for s in _schemas() if isinstance(s, dict)][::10]
    for schema in schemas[::3]:  # defaults that fit and defaults that do not
        schema.setdefault("default", "text")
    fast = _diagnostics(schemas)
    assert any(rule == "CL033" for rule, *_ in fast)
    monkeypatch.setattr(meta, "plainly_valid", lambda schema: False)  # every schema through jsonschema
    monkeypatch.setattr(cache, "compile_fast_check", lambda schema: None)  # every default through jsonschema
    monkeypatch.setattr(cache, "_BY_ID", {})
    monkeypatch.setattr(cache, "_BY_TEXT", {})
    assert _diagnostics(schemas) == fast


def test_checking_plain_input_schemas_does_not_import_jsonschema() -> None:
    code = ("import sys; from chainlang.pipeline import check_text; "
            f"r = check_text({_CHAIN.format(extra='n: {type: integer, default: 3}')!r}, 's.chain.yaml'); "
            "assert not [d for d in r if d.severity == 'error'], r; "
            "print('jsonschema' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
