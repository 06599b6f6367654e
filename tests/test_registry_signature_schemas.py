"""The schemas of simple signatures built without pydantic (chainlang/schemas/signatures.py)
are exactly those of the pydantic path: equal, with the keys in the same order.

Every case is built both ways: `params_schema` against `model_schema(create_model(...))` (what
`@event` did for every tool), `annotation_schema` against `type_schema` (the result schema). A case
the fast path leaves to pydantic (None) is fine; a different schema is not.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, Union

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, create_model
from typing_extensions import Annotated, TypedDict

from chainlang.registry.decorator import build_spec
from chainlang.schemas.from_python import model_schema, type_schema
from chainlang.schemas.signatures import NO_DEFAULT, PYDANTIC_NAMES, annotation_schema, params_schema

REPO = Path(__file__).resolve().parent.parent


def pydantic_params(fields: list[tuple[str, Any, Any]]) -> dict[str, Any]:
    definitions: dict[str, Any] = {
        name: (annotation, ... if default is NO_DEFAULT else default) for name, annotation, default in fields
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = create_model(
            "Params", __config__=ConfigDict(protected_namespaces=(), arbitrary_types_allowed=False), **definitions
        )
    return model_schema(model)


def same(fast: dict[str, Any] | None, slow: dict[str, Any]) -> bool:
    """Equal, and equal as JSON text (key order, int vs float vs bool kept apart)."""
    return fast == slow and json.dumps(fast) == json.dumps(slow)


def assert_params(fields: list[tuple[str, Any, Any]], *, fast: bool = True) -> None:
    got = params_schema(fields)
    if got is None:
        assert not fast, f"expected the fast path for {fields}"
        return
    want = pydantic_params(fields)
    assert same(got, want), f"{fields}\nfast:     {json.dumps(got)}\npydantic: {json.dumps(want)}"


def assert_annotation(annotation: Any, *, fast: bool = True) -> None:
    got = annotation_schema(annotation)
    if got is None:
        assert not fast, f"expected the fast path for {annotation!r}"
        return
    want = type_schema(annotation)
    assert same(got, want), f"{annotation!r}\nfast:     {json.dumps(got)}\npydantic: {json.dumps(want)}"


class Model(BaseModel):
    a: int


class TD(TypedDict):
    a: int


SIMPLE: list[Any] = [
    str, int, float, bool, None, type(None), Any, list, dict, List, Dict,
    list[str], list[int], list[Any], list[list[float]], List[str], Dict[str, int],
    dict[str, int], dict[str, Any], dict[str, list[str]], dict[str, dict[str, bool]], dict[str, Optional[int]],
    Optional[int], Optional[str], Optional[list[str]], Optional[dict[str, Any]], Optional[Any], int | None,
    None | int, Union[int, str], Union[None, int, str], Union[int, str, None], Union[int, None, str],
    bool | int, int | float, float | int, str | list[str], list[int] | list[str], list | list[Any],
    dict | dict[str, Any], Union[list[int], None, dict[str, str]], Optional[Union[int, str]],
    Literal["a"], Literal["a", "b"], Literal[1], Literal[1, 2], Literal[True], Literal[True, False],
    Literal[None], Literal["a", 1], Literal[1, True], Literal["x", 1, True, None], Optional[Literal["a"]],
    Optional[Literal["a", "b"]], Literal["a"] | Literal["b"], Literal["a"] | Literal["a", "b"],
    Union[Literal[1], Literal[True]], Literal[1] | int, Literal["a"] | None | str,
    Annotated[str, "doc"], Annotated[int, "doc", "more"], list[Annotated[str, "doc"]],
    Optional[Annotated[int, "doc"]], Annotated[Optional[str], "doc"],
    list[Optional[int]], list[int | str | None], dict[str, Literal["x", "y"]], list[Literal[1, "a"]],
]

PYDANTIC_ONLY: list[Any] = [
    tuple[int, str], set[str], frozenset[int], bytes, Model, TD, object, dict[int, str], Annotated[int, Field(ge=1)],
    list[Annotated[str, Field(description="d")]], Literal[b"x"], Optional[Model], list[Model], "str",
]


@pytest.mark.parametrize("annotation", SIMPLE, ids=repr)
def test_simple_annotations(annotation: Any) -> None:
    assert_annotation(annotation)
    assert_params([("value", annotation, NO_DEFAULT)])
    assert_params([("value", annotation, None)])


@pytest.mark.parametrize("annotation", PYDANTIC_ONLY, ids=repr)
def test_other_annotations_are_left_to_pydantic(annotation: Any) -> None:
    assert annotation_schema(annotation) is None
    assert params_schema([("value", annotation, NO_DEFAULT)]) is None


DEFAULTS: list[Any] = [
    None, True, False, 0, 1, -7, 2**70, 0.0, -0.0, 1.5, 1e300, "", "text", "é ✓ \n\t", [], [1, "a", None],
    {}, {"b": 1, "a": 2}, {"z": {"y": 1, "x": [{"d": 1, "c": 2}]}}, {"default": {"b": 1, "a": 2}},
    {"properties": {"b": {"d": 1, "c": 2}}}, [[{"b": 1, "a": 2}]],
]


@pytest.mark.parametrize("default", DEFAULTS, ids=repr)
def test_defaults(default: Any) -> None:
    for annotation in (Any, int, str, Optional[dict[str, Any]], list[Any]):
        assert_params([("value", annotation, default)])


@pytest.mark.parametrize("default", [float("nan"), float("inf"), (1, 2), {1: "a"}, {"a"}, b"x", "\ud800",
                                     [("x",)], Model(a=1), Field(default=3), object()],
                         ids=lambda v: "object()" if type(v) is object else repr(v))  # stable ids: xdist compares them
def test_other_defaults_are_left_to_pydantic(default: Any) -> None:
    assert params_schema([("value", int, default)]) is None


def test_field_descriptions() -> None:
    assert_params([("q", Annotated[str, Field(description="the query")], NO_DEFAULT)])
    assert_params([("q", Annotated[Optional[str], Field(description="d")], None)])
    assert_params([("q", Annotated[int, "doc", Field(description="d")], 3)])
    assert_params([("q", Annotated[int, Field(description="a"), Field(description="b")], 3)])
    for other in (Field(title="t"), Field(description="d", ge=1), Field(default=1), Field(description="d", examples=[1])):
        assert params_schema([("q", Annotated[int, other], NO_DEFAULT)]) is None
        pydantic_params([("q", Annotated[int, other], NO_DEFAULT)])  # the pydantic path does it
    assert annotation_schema(Annotated[str, Field(description="d")]) is None  # a result: pydantic's


def test_names_pydantic_treats_specially_are_left_to_it() -> None:
    specials = {name for name in dir(BaseModel) if not name.startswith("_")} | {"Config", "properties", "default"}
    for name in specials:
        assert params_schema([(name, int, 3)]) is None, name
    assert {name for name in specials if not name.startswith("model_")} <= PYDANTIC_NAMES | {"properties", "default"}


def test_signatures() -> None:
    assert_params([])
    assert_params([("query", str, NO_DEFAULT), ("days", int, 7), ("tags", Optional[list[str]], None)])
    assert_params([("a", int, NO_DEFAULT), ("b", int, NO_DEFAULT)])
    assert_params([("z", bool, False), ("a", float, 1), ("m", Literal["x", "y"], "x"), ("b", Any, NO_DEFAULT)])
    assert_params([("title", str, "t"), ("type", str, NO_DEFAULT), ("required", list[str], []), ("items", int, 1)])
    assert_params([("value", int, True), ("other", str, None), ("n", float, "text")])  # defaults are not checked


# -- generated signatures -------------------------------------------------------------------

_leaf = st.sampled_from([str, int, float, bool, None, Any, list, dict])
_literal_value = st.one_of(st.text(max_size=3), st.integers(-3, 3), st.booleans(), st.none())


def _annotations() -> st.SearchStrategy[Any]:
    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            inner.map(lambda t: list[t]),  # type: ignore[valid-type]
            inner.map(lambda t: dict[str, t]),  # type: ignore[valid-type]
            inner.map(lambda t: Optional[t]),
            st.lists(inner, min_size=2, max_size=4).map(lambda ts: Union[tuple(ts)]),
            inner.map(lambda t: Annotated[t, "doc"]),
        )

    literals = st.lists(_literal_value, min_size=1, max_size=4).map(lambda vs: Literal[tuple(vs)])
    return st.recursive(st.one_of(_leaf, literals), extend, max_leaves=6)


_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=8,
)
_names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)


@pytest.mark.slow  # hypothesis-generated: the full suite runs it, make test-fast does not
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(annotation=_annotations())
def test_generated_annotations(annotation: Any) -> None:
    assert_annotation(annotation)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields=st.lists(st.tuples(_names, _annotations(), st.one_of(st.just(NO_DEFAULT), _json)), max_size=5,
                       unique_by=lambda field: field[0]))
@pytest.mark.slow  # hypothesis-generated: the full suite runs it, make test-fast does not
def test_generated_params(fields: list[tuple[str, Any, Any]]) -> None:
    fast = not any(name in PYDANTIC_NAMES or name.startswith("model_") or name in ("properties", "default")
                   for name, _, _ in fields)
    assert_params(fields, fast=fast)


# -- through @event ---------------------------------------------------------------------------


def test_event_registration_does_not_import_pydantic(tmp_path: Path) -> None:
    tools = tmp_path / "tools_simple.py"
    tools.write_text(
        "from __future__ import annotations\n"
        "from typing import Any, Literal, Optional\n"
        "from chainlang import event\n"
        "@event('t.search')\n"
        "async def search(query: str, days: int = 7, tags: Optional[list[str]] = None, ctx: Any = None) -> list[str]:\n"
        "    return []\n"
        "@event('t.pick')\n"
        "def pick(mode: Literal['a', 'b'] = 'a', **extra: Any) -> dict[str, int]:\n"
        "    return {}\n",
        encoding="utf-8")
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from chainlang.registry.loading import load_tools\n"
        f"specs = load_tools([{str(tools)!r}], Path('.'))\n"
        "assert len(specs) == 2, specs\n"
        "print(sorted(m for m in sys.modules if m == 'pydantic' or m.startswith('pydantic.')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout == "[]\n", proc.stdout + proc.stderr


def test_event_schemas_match_the_pydantic_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """build_spec with the fast path and with it switched off give the same EventSpec schemas."""
    from chainlang.registry import decorator

    def search(query: str, days: int = 7, tags: Optional[list[str]] = None, ctx: Any = None, **kw: Any) -> list[str]:
        return []

    def pick(mode: Literal["a", "b"] = "a", n: Annotated[int, Field(description="how many")] = 1) -> Optional[dict[str, int]]:
        return None

    def plain(x, y=2):  # type: ignore[no-untyped-def]
        return x

    def nothing() -> dict:  # type: ignore[type-arg]
        return {}

    for fn in (search, pick, plain, nothing):
        fast = build_spec(fn, "t.fn")
        monkeypatch.setattr(decorator, "fast_params_schema", lambda fields: None)
        monkeypatch.setattr(decorator, "fast_annotation_schema", lambda annotation: None)
        slow = build_spec(fn, "t.fn")
        monkeypatch.undo()
        assert json.dumps(fast.params_schema) == json.dumps(slow.params_schema), fn
        assert json.dumps(fast.result_schema) == json.dumps(slow.result_schema), fn
