"""`chainlang schema` and the JSON Schemas shipped for editors (schemas/*.json).

The schema printed by the CLI must be a valid draft-07 schema that accepts
every example and every ok golden chain; hooks files validate against
hooks.schema.json, which refers to chain.schema.json.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator
from referencing import Registry
from referencing.jsonschema import DRAFT7
from ruamel.yaml import YAML

from chainlang.resources import data_dir

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
HOOKS_FILES = files(EXAMPLES, "*.hooks.yaml", "*.hooks.yml") + files(OK, "*.hooks.yaml", "*.hooks.yml")


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


@pytest.fixture(scope="module")
def printed_schema() -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "chainlang.cli", "schema"], cwd=REPO,
                          capture_output=True, check=False, text=True, encoding="utf-8", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    schema = json.loads(proc.stdout)
    assert isinstance(schema, dict)
    return schema


@pytest.fixture(scope="module")
def chain_schema() -> dict[str, Any]:
    return json.loads((data_dir("schemas") / "chain.schema.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def hooks_schema() -> dict[str, Any]:
    return json.loads((data_dir("schemas") / "hooks.schema.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def registry(chain_schema: dict[str, Any], hooks_schema: dict[str, Any]) -> Registry:
    return Registry().with_resources(
        [(chain_schema["$id"], DRAFT7.create_resource(chain_schema)),
         (hooks_schema["$id"], DRAFT7.create_resource(hooks_schema))]
    )


@pytest.fixture(scope="module")
def chain_validator(printed_schema: dict[str, Any], registry: Registry) -> Draft7Validator:
    return Draft7Validator(printed_schema, registry=registry)


@pytest.fixture(scope="module")
def hooks_validator(hooks_schema: dict[str, Any], registry: Registry) -> Draft7Validator:
    # The hooks schema is looked up by its $id, the way an editor that fetched it resolves its relative $ref.
    return Draft7Validator({"$ref": hooks_schema["$id"]}, registry=registry)


def errors_of(validator: Draft7Validator, instance: Any) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))]


# -- the schema itself --------------------------------------------------------------


def test_schema_is_valid_draft_07(printed_schema: dict[str, Any]) -> None:
    assert printed_schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    Draft7Validator.check_schema(printed_schema)


def test_printed_schema_is_the_packaged_one(printed_schema: dict[str, Any], chain_schema: dict[str, Any]) -> None:
    assert printed_schema == chain_schema
    assert printed_schema == json.loads((REPO / "schemas" / "chain.schema.json").read_text(encoding="utf-8"))


def test_hooks_schema_is_valid_draft_07(hooks_schema: dict[str, Any]) -> None:
    Draft7Validator.check_schema(hooks_schema)
    # allOf, not a bare $ref: draft-07 ignores the siblings of $ref (including $id)
    assert hooks_schema["allOf"][0]["$ref"].startswith("chain.schema.json#")


def test_there_are_files_to_validate() -> None:
    assert len(CHAIN_FILES) >= 5
    assert HOOKS_FILES


# -- valid files --------------------------------------------------------------------


@pytest.mark.parametrize("path", CHAIN_FILES, ids=rel)
def test_chain_files_validate(path: Path, chain_validator: Draft7Validator) -> None:
    assert errors_of(chain_validator, load_yaml(path)) == []


@pytest.mark.parametrize("path", HOOKS_FILES, ids=rel)
def test_hooks_files_validate(path: Path, hooks_validator: Draft7Validator) -> None:
    assert errors_of(hooks_validator, load_yaml(path)) == []


def test_hooks_schema_works_as_a_root_schema(hooks_schema: dict[str, Any], registry: Registry) -> None:
    """hooks.schema.json used directly as the root schema (no retrieval URI).

    Fails today: in draft-07 a `$ref` makes its sibling keywords, `$id`
    included, be ignored, so the relative `chain.schema.json#/...` has no base
    URI and cannot be resolved (referencing.exceptions.Unresolvable). Wrapping
    the reference (`"allOf": [{"$ref": "chain.schema.json#/definitions/hooksFile"}]`)
    keeps the `$id` in effect.
    """
    validator = Draft7Validator(hooks_schema, registry=registry)
    assert errors_of(validator, load_yaml(HOOKS_FILES[0])) == []


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
