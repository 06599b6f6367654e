"""The registry core: EventSpec, Registry, the @event decorator and its schemas."""

from __future__ import annotations

from typing import Any, Literal

import jsonschema
import pytest
from pydantic import BaseModel, ConfigDict, Field

from chainlang import event
from chainlang.registry import (
    EventRegistry,
    EventSpec,
    ImplementationError,
    Registry,
    RegistryError,
    is_event_name,
    spec_of,
)


def tool_spec(name: str, source: str = "tests", **kwargs: Any) -> EventSpec:
    return EventSpec(name=name, params_schema={"type": "object", "properties": {}}, source=source, **kwargs)


def spec_for(fn: object) -> EventSpec:
    found = spec_of(fn)
    assert found is not None, fn
    return found


def assert_draft7(schema: dict[str, Any]) -> None:
    jsonschema.Draft7Validator.check_schema(schema)


# -- the decorator: signature → schema ------------------------------------------------


def test_sync_function_with_defaults() -> None:
    @event("email.search", description="Search the mailbox")
    def search(query: str, days: int = 7, unread: bool = False) -> dict:  # type: ignore[type-arg]
        return {}

    spec = spec_for(search)
    assert spec.params_schema == {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "days": {"type": "integer", "default": 7},
            "unread": {"type": "boolean", "default": False},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    assert spec.result_schema is None  # `dict` says nothing
    assert spec.description == "Search the mailbox"
    assert spec.kind == "tool" and spec.func is search and spec.source == __name__
    assert not spec.is_async and not spec.accepts_ctx
    assert spec.implemented


def test_async_function_and_ctx_is_not_a_param() -> None:
    @event("email.search")
    async def search(query: str, days: int = 7, ctx=None) -> dict:  # type: ignore[no-untyped-def,type-arg]
        return {}

    spec = spec_for(search)
    assert spec.is_async and spec.accepts_ctx
    assert set(spec.params_schema["properties"]) == {"query", "days"}
    assert spec.params_schema["required"] == ["query"]


def test_decorator_returns_the_function_unchanged() -> None:
    def plain(x: int) -> int:
        return x + 1

    decorated = event("math.inc")(plain)
    assert decorated is plain and decorated(1) == 2
    assert spec_of(plain) is vars(plain)["__chainlang_event__"]


def test_literal_list_optional_and_unannotated() -> None:
    @event("task.filter")
    def fn(status: Literal["pending", "done"], tags: list[str], note: str | None = None, anything=None) -> list[str]:  # type: ignore[no-untyped-def]
        return []

    schema = spec_for(fn).params_schema
    props = schema["properties"]
    assert props["status"] == {"type": "string", "enum": ["pending", "done"]}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["note"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    assert props["anything"] == {"default": None}
    assert schema["required"] == ["status", "tags"]
    assert spec_for(fn).result_schema == {"type": "array", "items": {"type": "string"}}
    assert_draft7(schema)


def test_kwargs_opens_the_params() -> None:
    @event("http.request")
    def fn(url: str, **rest: Any) -> None:
        return None

    schema = spec_for(fn).params_schema
    assert "additionalProperties" not in schema
    assert spec_for(fn).result_schema == {"type": "null"}


def test_field_descriptions_and_docstring_description() -> None:
    from typing import Annotated

    @event("notes.add")
    def fn(text: Annotated[str, Field(description="the note", min_length=1)]) -> None:
        """Add a note.

        Longer explanation that is not the description.
        """

    spec = spec_for(fn)
    assert spec.description == "Add a note."
    assert spec.params_schema["properties"]["text"] == {"type": "string", "description": "the note", "minLength": 1}


class SearchParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(description="words")
    days: int = 7


class Hit(BaseModel):
    subject: str
    sender: str


class SearchResult(BaseModel):
    matches: list[Hit]


def test_explicit_pydantic_params_and_result() -> None:
    @event("email.search", params=SearchParams, result=SearchResult)
    def fn(query: str, days: int = 7, ctx: Any = None) -> Any:
        return None

    spec = spec_for(fn)
    assert spec.params_schema == {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "words"}, "days": {"type": "integer", "default": 7}},
        "required": ["query"],
        "additionalProperties": False,
    }
    # nested models are inlined: no $defs/$ref left to resolve, no titles
    assert spec.result_schema == {
        "type": "object",
        "properties": {
            "matches": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"subject": {"type": "string"}, "sender": {"type": "string"}},
                    "required": ["subject", "sender"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["matches"],
        "additionalProperties": False,
    }
    assert spec.accepts_ctx


def test_result_derived_from_a_model_return_annotation() -> None:
    @event("email.search")
    def fn(query: str) -> SearchResult:
        raise NotImplementedError

    result = spec_for(fn).result_schema
    assert result is not None and result["required"] == ["matches"]
    assert "$defs" not in str(result) and "title" not in result


def test_recursive_models_keep_draft7_definitions() -> None:
    class Node(BaseModel):
        name: str
        children: list[Node] = []

    Node.model_rebuild()

    @event("tree.get", result=Node)
    def fn() -> Any:
        return None

    result = spec_for(fn).result_schema
    assert result is not None
    assert "$defs" not in result and "definitions" in result
    assert_draft7(result)
    validator = jsonschema.Draft7Validator(result)
    assert validator.is_valid({"name": "a", "children": [{"name": "b", "children": []}]})
    assert not validator.is_valid({"name": "a", "children": [{"children": []}]})


def test_tuple_becomes_draft7_items_array() -> None:
    @event("geo.point")
    def fn() -> tuple[float, float]:
        return (0.0, 0.0)

    result = spec_for(fn).result_schema
    assert result is not None
    assert result["items"] == [{"type": "number"}, {"type": "number"}]
    assert "prefixItems" not in result
    assert jsonschema.Draft7Validator(result).is_valid([1.0, 2.0])
    assert not jsonschema.Draft7Validator(result).is_valid([1.0, 2.0, 3.0])


def test_explicit_json_schema_params_and_result() -> None:
    params = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}

    @event("weather.get", params=params, result={"type": "object", "properties": {"temp": {"type": "number"}}})
    def fn(city: str) -> dict[str, Any]:
        return {}

    spec = spec_for(fn)
    assert spec.params_schema == params and spec.params_schema is not params
    assert spec.result_schema == {"type": "object", "properties": {"temp": {"type": "number"}}}


def test_result_as_a_type_annotation() -> None:
    @event("team.names", result=list[str])
    def fn() -> Any:
        return []

    assert spec_for(fn).result_schema == {"type": "array", "items": {"type": "string"}}


@pytest.mark.parametrize("annotation", ["missing", "dict", "any", "dict_any"])
def test_imprecise_return_annotations_give_no_result_schema(annotation: str) -> None:
    if annotation == "missing":
        def fn(x: int):  # type: ignore[no-untyped-def]
            return x
    elif annotation == "dict":
        def fn(x: int) -> dict:  # type: ignore[misc,type-arg]
            return {}
    elif annotation == "any":
        def fn(x: int) -> Any:
            return x
    else:
        def fn(x: int) -> dict[str, Any]:  # type: ignore[misc]
            return {}
    assert spec_for(event("a.b")(fn)).result_schema is None


def test_effect_flags_and_idempotent() -> None:
    @event("clock.read", idempotent=True, reads_clock=True, side_effects=False)
    def fn() -> str:
        return ""

    spec = spec_for(fn)
    assert spec.idempotent is True
    assert dict(spec.effects) == {"reads_clock": True, "side_effects": False}


def test_decorator_does_not_register_globally() -> None:
    @event("hidden.tool")
    def fn() -> None:
        return None

    from chainlang.registry import build_registry

    assert "hidden.tool" not in build_registry()


# -- the decorator: errors at decoration time ---------------------------------------------


@pytest.mark.parametrize(
    "name, fragment",
    [
        ("search", "needs a namespace"),
        ("Email.search", "lowercase"),
        ("email.", "dotted lowercase"),
        ("email..search", "dotted lowercase"),
        ("email.1search", "dotted lowercase"),
        ("email.search-all", "dotted lowercase"),
        ("", "needs a namespace"),
    ],
)
def test_invalid_names_are_rejected_at_decoration_time(name: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        event(name)


@pytest.mark.parametrize("name", ["a.b", "email.search", "calendar.v2.create", "x1.y_2.z"])
def test_valid_names(name: str) -> None:
    assert is_event_name(name)
    event(name)  # no error


def test_bare_decorator_without_a_name() -> None:
    def fn() -> None:
        return None

    with pytest.raises(TypeError, match="needs an event name"):
        event(fn)  # type: ignore[arg-type]


def test_var_positional_and_positional_only_are_rejected() -> None:
    def star(*items: int) -> None:
        return None

    def posonly(a: int, /) -> None:
        return None

    with pytest.raises(ValueError, match=r"\*items is not supported"):
        event("a.star")(star)
    with pytest.raises(ValueError, match="positional-only"):
        event("a.posonly")(posonly)


def test_unconvertible_annotation_is_a_clear_error() -> None:
    class Opaque:
        pass

    def fn(thing: Opaque) -> None:
        return None

    with pytest.raises(ValueError, match="cannot derive a params schema.*pass params="):
        event("a.opaque")(fn)


def test_invalid_explicit_schema() -> None:
    def fn(x: int) -> None:
        return None

    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        event("a.b", params={"type": "object", "properties": {"x": {"type": "integr"}}})(fn)
    with pytest.raises(ValueError, match="must describe an object"):
        event("a.b", params={"type": "string"})(fn)
    with pytest.raises(ValueError, match="pydantic model class or a JSON Schema"):
        event("a.b", params=int)(fn)


def test_explicit_params_must_fit_the_function() -> None:
    def fn(city: str) -> None:
        return None

    with pytest.raises(ValueError, match="'query'.*no such parameter"):
        event("a.b", params=SearchParams)(fn)

    def needs_more(query: str, days: int, extra: str) -> None:
        return None

    with pytest.raises(ValueError, match="'extra' has no default"):
        event("a.b", params=SearchParams)(needs_more)

    def open_kwargs(**params: Any) -> None:
        return None

    event("a.b", params=SearchParams)(open_kwargs)  # **kwargs accepts anything


def test_one_function_one_event() -> None:
    def fn() -> None:
        return None

    event("a.first")(fn)
    with pytest.raises(ValueError, match="already the tool of 'a.first'"):
        event("a.second")(fn)


def test_bad_effect_flag_value() -> None:
    with pytest.raises(TypeError, match="effect flag"):
        event("a.b", side_effects=[1])


# -- EventSpec -----------------------------------------------------------------------


def test_external_event_spec() -> None:
    payload = {"type": "object", "properties": {"sender": {"type": "string"}}}
    spec = EventSpec.external_event("email.received", payload, description="mail arrived", source="x.chain.yaml")
    assert spec.kind == "external"
    assert spec.params_schema == payload and spec.result_schema == payload
    assert not spec.implemented
    with pytest.raises(ImplementationError, match="external event"):
        spec.resolve_implementation()


def test_chain_event_spec() -> None:
    spec = EventSpec.chain_event(
        "reports.weekly",
        inputs={"team": {"type": "string"}, "weeks": {"type": "integer", "default": 1}},
        outputs={"summary": "{x}"},
        source="chains/weekly.chain.yaml",
    )
    assert spec.kind == "chain" and spec.implemented
    assert spec.params_schema["required"] == ["team"]
    assert spec.params_schema["additionalProperties"] is False
    assert spec.result_schema is not None and spec.result_schema["required"] == ["summary"]


def test_implementation_pointer_resolves_lazily() -> None:
    spec = tool_spec("text.wrap", implementation="textwrap:fill")
    assert spec.implemented
    import textwrap

    assert spec.resolve_implementation() is textwrap.fill
    resolved = spec.resolved()
    assert resolved.func is textwrap.fill and not resolved.is_async


def test_missing_implementation() -> None:
    spec = tool_spec("x.y", implementation="chainlang_no_such_module.sub:fn")
    assert not spec.implemented
    with pytest.raises(ImplementationError, match="not implemented yet"):
        spec.resolve_implementation()
    spec = tool_spec("x.z", implementation="textwrap:no_such_function")
    assert not spec.implemented  # textwrap is imported, so the attribute is checked
    with pytest.raises(ImplementationError, match="has no 'no_such_function'"):
        spec.resolve_implementation()
    with pytest.raises(ImplementationError, match="not implemented yet"):
        tool_spec("x.w").resolve_implementation()


def test_to_json() -> None:
    data = tool_spec("x.y", description="d", idempotent=True, effects={"side_effects": False}).to_json()
    assert data["name"] == "x.y" and data["params"]["type"] == "object"
    assert data["implemented"] is False and data["effects"] == {"side_effects": False}


# -- Registry ------------------------------------------------------------------------


def test_add_get_contains_names() -> None:
    registry = Registry([tool_spec("b.two"), tool_spec("a.one")])
    assert registry.names() == ["a.one", "b.two"]
    assert [spec.name for spec in registry.specs()] == ["a.one", "b.two"]
    assert "a.one" in registry and "a.three" not in registry
    assert registry.get("a.one") is not None and registry.get("nope.x") is None
    assert len(registry) == 2
    assert isinstance(registry, EventRegistry)


def test_duplicate_registration_names_both_sources() -> None:
    registry = Registry([tool_spec("email.search", source="stdlib/email.yaml")])
    with pytest.raises(RegistryError) as info:
        registry.add(tool_spec("email.search", source="mytools"))
    assert "stdlib/email.yaml" in str(info.value) and "mytools" in str(info.value)


def test_duplicate_in_the_same_source() -> None:
    registry = Registry([tool_spec("email.search", description="one", source="mytools")])
    with pytest.raises(RegistryError, match="declared twice in mytools"):
        registry.add(tool_spec("email.search", description="two", source="mytools"))


def test_adding_an_equal_spec_again_is_a_no_op() -> None:
    registry = Registry([tool_spec("email.search")])
    registry.add(tool_spec("email.search"))
    assert len(registry) == 1


def test_match_globs() -> None:
    registry = Registry(
        tool_spec(name) for name in ["email.search", "email.send", "email.draft.save", "emails.x", "task.list"]
    )
    assert registry.match("email.*") == ["email.draft.save", "email.search", "email.send"]
    assert registry.match("email.s*") == ["email.search", "email.send"]
    assert registry.match("*.list") == ["task.list"]
    assert registry.match("task.?ist") == ["task.list"]
    assert registry.match("email.search") == ["email.search"]
    assert registry.match("email.nope") == []
    assert registry.match("EMAIL.*") == []  # case-sensitive


def test_suggest() -> None:
    registry = Registry(
        tool_spec(name) for name in ["email.search", "memory.search", "user.notify", "tools.now", "tools.date_calc"]
    )
    assert registry.suggest("email.serach") == "email.search"
    assert registry.suggest("tools.nwo") == "tools.now"
    assert registry.suggest("tool.date_calc") == "tools.date_calc"
    assert registry.suggest("date_calc") == "tools.date_calc"  # the part after the namespace
    assert registry.suggest("notify") == "user.notify"
    assert registry.suggest("calendar.notify") == "user.notify"
    assert registry.suggest("memory.serch") == "memory.search"
    assert registry.suggest("Email.Search") == "email.search"
    assert registry.suggest("completely.unrelated") is None
    assert registry.suggest("email.search") is None  # it exists
    assert Registry().suggest("x.y") is None


def test_copy_and_with_specs_do_not_mutate_the_base() -> None:
    base = Registry([tool_spec("a.one")])
    derived = base.with_specs([EventSpec.external_event("email.received", source="f.chain.yaml")])
    assert "email.received" in derived and "email.received" not in base
    copied = base.copy()
    copied.add(tool_spec("b.two"))
    assert "b.two" not in base
    with pytest.raises(RegistryError):
        base.with_specs([tool_spec("a.one", source="elsewhere")])
