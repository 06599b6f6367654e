"""The `model` standard event (LANGUAGE.md §13): `model.ask`, one question to a model tier
whose answer is constrained by a JSON Schema and validated against it (LangGraph's
`with_structured_output`).

The prompt is the chain's own text, its `{references}` filled in by the run before the
step starts: it is sent as it is and never rendered again (what a reference brought in
cannot become a template). `data` reaches the model as delimited data
(chainlang.llm.prompting.data_block), never as instructions. The request goes through the
run's model service (`ctx.models`: budgeted, recorded as a `model_call` of task `ask`,
given back on resume) with the schema, so an endpoint that supports structured output
constrains the answer; chainlang validates it either way (a model's text is untrusted).
What the schema must be and the form it is used in: chainlang.llm.ask_schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chainlang.llm.answers import parse_answer

if TYPE_CHECKING:
    from chainlang.runtime.context import RunContext

__all__ = ["DEFAULT_TIER", "ask"]

DEFAULT_TIER = "fast"  # the everyday tier; a project with one model uses it for every tier anyway
TIERS = ("heavy", "fast", "light")


class _Absent:
    """`data` not given (null is a value the prompt may be about)."""


_NO_DATA = _Absent()


async def ask(prompt: str, ctx: "RunContext", schema: dict[str, Any] | None = None, tier: str = DEFAULT_TIER,
              data: Any = _NO_DATA) -> Any:
    """The answer of `tier` to `prompt`: its text without `schema`, else the JSON value it
    answered, valid against `schema` (objects closed: chainlang.llm.ask_schema.closed)."""
    from chainlang.llm.ask_schema import closed, schema_problems
    from chainlang.llm.prompting import PromptError, messages
    from chainlang.llm.tiers import ModelRequest
    from chainlang.schemas.cache import location

    models = ctx.models
    if models is None:
        raise ValueError("model.ask needs the run's model tiers: run it with chainlang run or chainlang emit")
    if tier not in TIERS:
        raise ValueError(f"tier is one of {', '.join(TIERS)}, not {tier!r}")
    wanted: dict[str, Any] | None = None
    if schema is not None:
        problems = schema_problems(schema)
        if problems:
            path, problem = problems[0]
            where = f" (at {location(path)})" if path else ""
            raise ValueError(f"the schema is not a usable JSON Schema: {problem}{where}")
        wanted = closed(schema)
    given = not isinstance(data, _Absent)
    try:
        asked = messages("ask", {"prompt": prompt, "schema": wanted, "has_data": given,
                                 "data": data if given else None}, ctx.project)
    except PromptError as exc:
        raise ValueError(str(exc)) from None
    answer = await models.ask(tier, ModelRequest("ask", asked, wanted, "answer"))
    who = models.who(tier)
    if wanted is None:
        text = answer.text.strip()
        if not text:
            raise ValueError(f"{who}'s answer is empty")
        return text
    return parse_answer(answer.text, wanted, who)
