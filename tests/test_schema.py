"""`chainlang schema` and the JSON Schemas shipped for editors (schemas/*.json).

The schemas printed by the CLI (`chainlang schema`, `chainlang schema --hooks`)
must be valid draft-07 schemas that accept every example and every ok golden
chain or hooks file, and give an editor precise errors: an unknown key is named,
with the keys allowed there, and a wrong step gets the errors of its own form
only (the form is chosen by `if`/`then` on its keys, not tried in an `anyOf`).
hooks.schema.json is self-contained (an editor may load it from a local file),
its definitions copied from chain.schema.json.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator
from jsonschema.exceptions import best_match
from ruamel.yaml import YAML

from chainlang.resources import data_dir
from tests.test_docs import read_docs

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
OK = REPO / "tests" / "chains" / "ok"


def load_yaml(path: Path) -> Any:
    yaml = YAML(typ="safe", pure=True)
    yaml.version = (1, 2)
    return yaml.load(path.read_text(encoding="utf-8"))


def files(root: Path, *patterns: str) -> list[Path]:
    return sorted({p for pattern in patterns for p in root.glob(f"**/{pattern}")})


CHAIN_FILES = files(EXAMPLES, "*.chain.yaml", "*.chain.yml") + files(OK, "*.chain.yaml", "*.chain.yml")
# every hooks file of the examples and of the tests, but the ones that are wrong on purpose
HOOKS_FILES = files(EXAMPLES, "*.hooks.yaml", "*.hooks.yml") + [
    p for p in files(REPO / "tests", "*.hooks.yaml", "*.hooks.yml") if (REPO / "tests" / "chains" / "err") not in p.parents
]


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def print_schema(*args: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "chainlang.cli", "schema", *args], cwd=REPO,
                          capture_output=True, check=False, text=True, encoding="utf-8", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    schema = json.loads(proc.stdout)
    assert isinstance(schema, dict)
    return schema


@pytest.fixture(scope="module")
def printed_schema() -> dict[str, Any]:
    return print_schema()


@pytest.fixture(scope="module")
def printed_hooks_schema() -> dict[str, Any]:
    return print_schema("--hooks")


@pytest.fixture(scope="module")
def chain_schema() -> dict[str, Any]:
    return json.loads((data_dir("schemas") / "chain.schema.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def hooks_schema() -> dict[str, Any]:
    return json.loads((data_dir("schemas") / "hooks.schema.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def chain_validator(printed_schema: dict[str, Any]) -> Draft7Validator:
    return Draft7Validator(printed_schema)


@pytest.fixture(scope="module")
def hooks_validator(printed_hooks_schema: dict[str, Any]) -> Draft7Validator:
    # used as the root schema, with nothing to fetch: as an editor does with a local file
    return Draft7Validator(printed_hooks_schema)


def errors_of(validator: Draft7Validator, instance: Any) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))]


# -- the schema itself --------------------------------------------------------------


def test_schema_is_valid_draft_07(printed_schema: dict[str, Any]) -> None:
    assert printed_schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    Draft7Validator.check_schema(printed_schema)


def test_printed_schema_is_the_packaged_one(printed_schema: dict[str, Any], chain_schema: dict[str, Any]) -> None:
    assert printed_schema == chain_schema
    assert printed_schema == json.loads((REPO / "schemas" / "chain.schema.json").read_text(encoding="utf-8"))


def test_hooks_schema_is_valid_draft_07(printed_hooks_schema: dict[str, Any]) -> None:
    assert printed_hooks_schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    Draft7Validator.check_schema(printed_hooks_schema)


def test_printed_hooks_schema_is_the_packaged_one(printed_hooks_schema: dict[str, Any],
                                                   hooks_schema: dict[str, Any]) -> None:
    assert printed_hooks_schema == hooks_schema
    assert printed_hooks_schema == json.loads((REPO / "schemas" / "hooks.schema.json").read_text(encoding="utf-8"))


def refs_in(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
        return found.union(*(refs_in(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(refs_in(v) for v in node))
    return set()


@pytest.mark.parametrize("which", ["chain", "hooks"])
def test_schemas_are_ready_for_schemastore(which: str, printed_schema: dict[str, Any],
                                           printed_hooks_schema: dict[str, Any]) -> None:
    schema = printed_schema if which == "chain" else printed_hooks_schema
    assert schema["$id"] == f"https://chainlang.dev/schemas/{which}.schema.json"
    assert schema["title"] and schema["description"]
    # every reference is local: the schema works from a file of its own, nothing fetched
    refs = refs_in(schema)
    assert refs and all(ref.startswith("#/definitions/") for ref in refs), refs
    assert {ref.removeprefix("#/definitions/") for ref in refs} <= set(schema["definitions"])


def test_hooks_schema_shares_the_chain_schema_definitions(printed_schema: dict[str, Any],
                                                          printed_hooks_schema: dict[str, Any]) -> None:
    """The hooks schema copies the definitions it needs (hooks, steps...) from the chain schema: they must not drift."""
    chain_defs, hooks_defs = printed_schema["definitions"], printed_hooks_schema["definitions"]
    shared = set(chain_defs) & set(hooks_defs)
    assert {"hook", "step", "events", "eventStep", "compactStep"} <= shared
    assert {name: hooks_defs[name] for name in shared} == {name: chain_defs[name] for name in shared}
    assert set(hooks_defs) - shared == {"hookList", "hooksMapping"}
    # and the hooks of a chain file are the hooks of a hooks file
    assert chain_defs["chainFile"]["properties"]["hooks"] == hooks_defs["hooksMapping"]["properties"]["hooks"]
    assert chain_defs["chainFile"]["properties"]["events"] == hooks_defs["hooksMapping"]["properties"]["events"]


def test_there_are_files_to_validate() -> None:
    assert len(CHAIN_FILES) >= 5
    assert len(HOOKS_FILES) >= 4
    assert any(p.parts[0] == "examples" for p in map(Path, map(rel, HOOKS_FILES)))


# -- valid files --------------------------------------------------------------------


@pytest.mark.parametrize("path", CHAIN_FILES, ids=rel)
def test_chain_files_validate(path: Path, chain_validator: Draft7Validator) -> None:
    assert errors_of(chain_validator, load_yaml(path)) == []


@pytest.mark.parametrize("path", HOOKS_FILES, ids=rel)
def test_hooks_files_validate(path: Path, hooks_validator: Draft7Validator) -> None:
    assert errors_of(hooks_validator, load_yaml(path)) == []


def clean_doc_examples() -> list[Any]:
    """The yaml examples of the docs that `chainlang check` accepts (tests/test_docs.py checks that they do)."""
    blocks, _ = read_docs()
    return [pytest.param(block, id=block.id) for block in blocks
            if block.lang == "yaml" and block.marker is not None and not block.marker.skip and not block.marker.rules]


@pytest.mark.parametrize("block", clean_doc_examples())
def test_doc_examples_validate(block: Any, chain_validator: Draft7Validator, hooks_validator: Draft7Validator) -> None:
    yaml = YAML(typ="safe", pure=True)
    yaml.version = (1, 2)
    validator = hooks_validator if block.marker.kind == "hooks" else chain_validator
    assert errors_of(validator, yaml.load(block.text)) == []


# -- invalid files ------------------------------------------------------------------


@pytest.mark.parametrize(
    "instance",
    [
        {"steps": ["tools.now"], "stpes": []},
        {"steps": [{"event": 42}]},
        [{"event": 42}],
        {"chainlang": 1},
        {"chainlang": 2, "steps": ["tools.now"]},
        {"steps": ["NotAnEvent"]},
        {"steps": [{"event": "tools.now", "on_error": "explode"}]},
        {"steps": [{"event": "tools.now", "timeout": "soon"}]},
        "tools.now",
    ],
    ids=["unknown-top-key", "event-42", "seq-event-42", "no-steps", "version-2", "bad-event-name", "bad-on-error",
         "bad-timeout", "scalar"],
)
def test_invalid_chains_are_rejected(instance: Any, chain_validator: Draft7Validator) -> None:
    assert errors_of(chain_validator, instance)


@pytest.mark.parametrize(
    "instance",
    [
        [{"trigger": "post:email.received", "action": ["tools.now"], "colour": "red"}],
        {"hooks": [{"trigger": "post:email.received", "action": ["tools.now"]}], "stepz": []},
        [{"trigger": 42, "action": ["tools.now"]}],
    ],
    ids=["unknown-hook-key", "unknown-top-key", "trigger-42"],
)
def test_invalid_hooks_are_rejected(instance: Any, hooks_validator: Draft7Validator) -> None:
    assert errors_of(hooks_validator, instance)


# -- precise errors, as an editor shows them ------------------------------------------

CHAIN_KEYS = ["chainlang", "chain", "description", "inputs", "steps", "hooks", "outputs", "limits", "allow", "events",
              "triggers"]
STEP_OPTIONS = ["id", "if", "foreach", "as", "timeout", "on_error", "description"]


def all_errors(validator: Draft7Validator, instance: Any) -> list[tuple[list[Any], str]]:
    return [(list(e.absolute_path), e.message) for e in validator.iter_errors(instance)]


def best(validator: Draft7Validator, instance: Any) -> tuple[list[Any], str]:
    error = best_match(validator.iter_errors(instance))
    assert error is not None
    return list(error.absolute_path), error.message


def assert_names_unknown_key(errors: list[tuple[list[Any], str]], path: list[Any], key: str,
                             allowed: list[str]) -> None:
    """One error, at `path`, about `key`, listing the allowed keys (or, among a compact step's
    event names, saying it does not match): an editor shows one diagnostic per misspelt key."""
    assert errors, "no error"
    assert len(errors) == 1, errors
    where, message = errors[0]
    assert where == path and repr(key) in message, errors
    if allowed and "does not match" not in message:
        assert "is not one of" in message and all(repr(name) in message for name in allowed), message


@pytest.mark.parametrize(
    ("instance", "path", "key", "allowed"),
    [
        ({"stpes": ["tools.now"], "steps": ["tools.now"]}, [], "stpes", CHAIN_KEYS),
        ({"steps": ["tools.now"], "limits": {"max_step": 3}}, ["limits"], "max_step",
         ["max_steps", "max_depth", "timeout", "max_parallel", "max_model_calls", "max_tokens"]),
        ({"steps": [{"event": "tools.now", "tiemout": "3s"}]}, ["steps", 0], "tiemout",
         [*STEP_OPTIONS, "event", "params", "decide", "retry", "max_parallel"]),
        ([{"email.search": {"query": "x"}, "tiemout": "3s"}], [0], "tiemout",
         [*STEP_OPTIONS, "decide", "retry", "max_parallel"]),
        ([{"parallel": ["tools.now"], "retry": {"attempts": 2}}], [0], "retry", [*STEP_OPTIONS, "parallel", "max_parallel"]),
        ([{"steps": ["tools.now"], "decide": "is it late"}], [0], "decide", [*STEP_OPTIONS, "steps", "max_parallel"]),
        ([{"if": "x > 1", "then": ["tools.now"], "els": ["tools.now"]}], [0], "els", ["if", "then", "else"]),
        ([["tools.now", {"event": "tools.now", "param": {}}]], [0, 1], "param", ["event", "params"]),
        ({"steps": ["tools.now"], "hooks": [{"trigger": "pre:tools.now", "cancel": True, "colour": "red"}]},
         ["hooks", 0], "colour", ["trigger", "condition", "action", "set", "cancel"]),
        ({"steps": ["tools.now"], "events": {"a.b": {"description": "x", "paylod": {}}}}, ["events", "a.b"], "paylod",
         ["description", "payload"]),
    ],
    ids=["top-level", "limits", "canonical-step", "compact-step", "parallel-block", "steps-block", "if-block",
         "in-parallel-group", "chain-hook", "event-declaration"],
)
def test_an_unknown_key_is_named_with_the_allowed_keys(instance: Any, path: list[Any], key: str, allowed: list[str],
                                                        chain_validator: Draft7Validator) -> None:
    errors = [(where, message) for where, message in all_errors(chain_validator, instance)
              if "is a required property" not in message]
    assert_names_unknown_key(errors, path, key, allowed)
    where, message = best(chain_validator, instance)
    assert where == path and repr(key) in message


def test_the_top_level_typo_of_the_issue(chain_validator: Draft7Validator) -> None:
    """`stpes:` for `steps:` is reported as that key, not as "not valid under any of the given schemas"."""
    errors = all_errors(chain_validator, {"chain": "a.b", "stpes": ["tools.now"]})
    assert ([], "'steps' is a required property") in errors
    assert sorted(message for _, message in errors) == sorted([
        "'steps' is a required property",
        f"'stpes' is not one of {CHAIN_KEYS!r}",
    ])
    assert not any("any of the given schemas" in message for _, message in errors)


@pytest.mark.parametrize(
    ("instance", "expected"),
    [
        # each wrong step gets the one error of its own form, not one per form tried
        ([{"event": 42}], [([0, "event"], "42 is not of type 'string'")]),
        ([{"event": "tools.now", "on_error": "explode"}], [([0, "on_error"], "'explode' is not one of ['fail', 'continue', 'break']")]),
        ([{"parallel": []}], [([0, "parallel"], "[] should be non-empty")]),
        ([{"steps": "tools.now"}], [([0, "steps"], "'tools.now' is not of type 'array'")]),
        ([{"if": "x", "then": "tools.now"}], [([0, "then"], "'tools.now' is not of type 'array'")]),
        ([{"email.send": {"to": "a"}, "timeout": "soon"}], [([0, "timeout"], "'soon' does not match '^(\\\\d+(\\\\.\\\\d+)?(ms|s|m|h|d|w))+$'")]),
        ([42], [([0], "42 is not of type 'string', 'array', 'object'")]),
        ([[]], [([0], "[] should be non-empty")]),
        ([{"event": "tools.now", "retry": {"attempts": 1}}], [([0, "retry", "attempts"], "1 is less than the minimum of 2")]),
    ],
    ids=["event-42", "on-error", "empty-parallel", "steps-not-list", "then-not-list", "compact-timeout", "number",
         "empty-group", "retry-attempts"],
)
def test_a_wrong_step_gets_the_errors_of_its_form_only(instance: Any, expected: list[tuple[list[Any], str]],
                                                       chain_validator: Draft7Validator) -> None:
    assert all_errors(chain_validator, instance) == expected
    assert all_errors(chain_validator, {"steps": instance}) == [(["steps", *where], message) for where, message in expected]


@pytest.mark.parametrize(
    ("instance", "path", "key", "allowed"),
    [
        ([{"trigger": "post:email.received", "action": ["tools.now"], "colour": "red"}], [0], "colour",
         ["id", "trigger", "condition", "priority", "after", "action", "cancel", "set", "mode", "max", "max_depth",
          "on_error", "description"]),
        ({"hooks": [{"trigger": "post:email.received", "action": ["tools.now"]}], "stepz": []}, [], "stepz",
         ["chainlang", "description", "events", "hooks"]),
        ({"hooks": [{"trigger": "post:a.b", "action": [{"event": "tools.now", "tiemout": "1s"}]}]},
         ["hooks", 0, "action", 0], "tiemout", ["event", "params", "timeout"]),
    ],
    ids=["hook-key", "top-level", "action-step"],
)
def test_hooks_file_unknown_keys_are_named(instance: Any, path: list[Any], key: str, allowed: list[str],
                                           hooks_validator: Draft7Validator) -> None:
    assert_names_unknown_key(all_errors(hooks_validator, instance), path, key, allowed)


def test_the_test_file_schema_is_printed_and_valid_draft_07() -> None:
    tests_schema = print_schema("--tests")
    Draft7Validator.check_schema(tests_schema)
    assert tests_schema["$id"].endswith("/chaintest.schema.json") and tests_schema["title"]
    both = subprocess.run([sys.executable, "-m", "chainlang", "schema", "--hooks", "--tests"],
                          capture_output=True, text=True, timeout=60)
    assert both.returncode == 2 and "give one of them" in both.stderr and "Traceback" not in both.stderr
