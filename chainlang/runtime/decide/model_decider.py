"""The model decider: asks an OpenAI-compatible chat endpoint (LANGUAGE.md §5)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from chainlang.llm.client import MAX_TIMEOUT, ModelClient, ModelConfigError, ModelError, Timeouts
from chainlang.runtime.decide.decision import DEFAULT_TIMEOUT, DecideRequest, DeciderConfigError, Decision, Undecided
from chainlang.runtime.decide.keep import answer_schema, is_repair, model_decision

if TYPE_CHECKING:
    from pathlib import Path

    from chainlang.llm.tiers import ModelTiers

__all__ = ["CONDITION_PROMPT", "REPAIR_PROMPT", "ModelDecider", "TierDecider"]

CONDITION_PROMPT = """\
You are the decide model of chainlang, a language whose chains run events one step at a time.
Judge a step's condition: its params are valid and are kept as they are. Answer only the
action, as one JSON object:
  {"action": "continue"}  the condition holds: the event runs with its params
  {"action": "skip"}      it does not hold: the step is skipped, the chain goes on
  {"action": "break"}     stop the chain here, cleanly
You may add "reason": one short sentence. Answer with the JSON object only."""

REPAIR_PROMPT = """\
You are the decide model of chainlang, a language whose chains run events one step at a time.
Repair a step's params: they failed validation against the event's JSON Schema. When the
step has a condition, it must hold too. Answer with exactly one JSON object, one of:
  {"action": "continue", "params": {...}}  run the event with these params, valid against the
                                           schema; only the params in error are taken from
                                           your answer, the others are kept as given
  {"action": "skip"}                       do not run this step; the chain goes on
  {"action": "break"}                      stop the chain here, cleanly
When the params cannot be completed from what you are given, answer break rather than
inventing values. Answer with the JSON object only."""

_MAX_CONTEXT_CHARS = 24_000
_LABEL = "the decide model"
_KEY_HINT = "set it, or remove api_key_env from [decide] in chainlang.toml if the endpoint needs no key"


class ModelDecider:
    """Asks an OpenAI-compatible chat endpoint: POST `{base_url}/chat/completions` with the
    answer's JSON Schema as the required `response_format` (`keep.answer_schema`: the action
    alone for a condition on valid params, params typed by the event's schema for a repair).
    The answer is validated (`keep.model_decision`); an HTTP error, a timeout, an answer
    that is too large, not JSON or not a decision raise `Undecided` with a one-line reason.

    The exchange goes through a `chainlang.llm.ModelClient` (pooled connections, `timeout`
    as a deadline over the whole request, bounded answers, bounded retries): its own, made
    here and closed by `aclose()`, or one shared with other model-backed events
    (`ModelDecider.over(client, model)`), which `aclose()` leaves open.

    The API key is read from the environment variable named `api_key_env` at each request
    and sent as `Authorization: Bearer ...`; it never appears in a reason, an error or a
    decision. Without `api_key_env` no key is sent (local servers). Redirects are refused,
    so the key is never sent anywhere but `base_url`.
    """

    def __init__(self, base_url: str, model: str, api_key_env: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        if isinstance(timeout, bool) or not (isinstance(timeout, (int, float)) and 0 < timeout <= MAX_TIMEOUT):
            raise DeciderConfigError(f"{_LABEL}'s timeout must be more than 0 seconds, not {timeout!r}")
        try:
            client = ModelClient(base_url, api_key_env, timeouts=Timeouts(total=float(timeout)), label=_LABEL)
        except ModelConfigError as exc:
            raise DeciderConfigError(str(exc)) from None
        self._setup(client, model, owns_client=True)

    @classmethod
    def over(cls, client: ModelClient, model: str) -> ModelDecider:
        """A decider that asks through `client`, shared with other model-backed events;
        its `aclose()` does not close the client (the client's owner does)."""
        decider = cls.__new__(cls)
        decider._setup(client, model, owns_client=False)
        return decider

    def _setup(self, client: ModelClient, model: str, owns_client: bool) -> None:
        if not model:
            raise DeciderConfigError(f"{_LABEL} needs a model name ([decide] model = ...)")
        self.client = client
        self.model = model
        self._owns_client = owns_client

    @property
    def base_url(self) -> str:
        return self.client.base_url

    @property
    def api_key_env(self) -> str | None:
        return self.client.api_key_env

    @property
    def timeout(self) -> float:
        """Seconds: the deadline of one decision's whole exchange with the endpoint."""
        return self.client.timeouts.total

    @property
    def url(self) -> str:
        return self.client.url("chat/completions")

    def __repr__(self) -> str:
        return f"ModelDecider(base_url={self.base_url!r}, model={self.model!r}, api_key_env={self.api_key_env!r}, timeout={self.timeout!r})"

    def request_body(self, request: DecideRequest) -> dict[str, Any]:
        """The JSON posted to the endpoint (no key in it)."""
        return {
            "model": self.model,
            "messages": [
                {"role": "system", "content": REPAIR_PROMPT if is_repair(request) else CONDITION_PROMPT},
                {"role": "user", "content": _user_message(request)},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "decision", "schema": answer_schema(request), "strict": True},
            },
            "temperature": 0,
        }

    async def decide(self, request: DecideRequest) -> Decision:
        try:
            content = await self.client.chat(self.request_body(request))
        except ModelConfigError as exc:  # the key variable is not set: not a question the model could not answer
            raise DeciderConfigError(f"{exc} ({_KEY_HINT})") from None
        except ModelError as exc:
            raise Undecided(exc.message) from None
        try:
            return model_decision(request, content, f"the decide model {self.model}")
        except Undecided as exc:  # a server that echoes the key back
            raise Undecided(self.client.redact(exc.reason)) from None

    async def aclose(self) -> None:
        """Close the connections of the decider's own client (a shared one stays open)."""
        if self._owns_client:
            await self.client.aclose()


def _user_message(request: DecideRequest) -> str:
    def dump(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, default=str)

    context = dump(request.context)
    if len(context) > _MAX_CONTEXT_CHARS:
        context = context[:_MAX_CONTEXT_CHARS] + " …(truncated)"
    if not is_repair(request):  # the schema and the errors are not the question: fewer tokens
        return "\n".join([
            "Task: judge the condition (the params are valid and are kept); answer only the action.",
            f"Event: {request.event}",
            f"Description: {request.description or '(none)'}",
            f"Params: {dump(request.params)}",
            f"Condition: {request.condition if request.condition is not None else '(none)'}",
            f"Context: {context}",
        ])
    errors = "\n".join(f"- {error}" for error in request.errors)
    lines = [
        "Task: repair the params (only the params in error are taken from your answer).",
        f"Event: {request.event}",
        f"Description: {request.description or '(none)'}",
        f"Params schema: {dump(request.params_schema)}",
        f"Params: {dump(request.params)}",
        f"Validation errors:\n{errors}",
        f"Condition: {request.condition if request.condition is not None else '(none)'}",
        f"Context: {context}",
    ]
    return "\n".join(lines)


class TierDecider:
    """The light tier as a decider (`[models.light]`, or `[decide]`, its older name): asked
    through the step's model service when the request carries one (budgeted, recorded as a
    `model_call`, replayed on resume), else straight through the tier. The prompt is the
    project's `prompts/decide.*.j2` or chainlang's (given `repair`: whether the params are
    asked for); the answer is validated as a decision (`keep.model_decision`)."""

    def __init__(self, tiers: "ModelTiers", project: "Path | None" = None) -> None:
        self.tiers = tiers
        self.project = project

    def __repr__(self) -> str:
        return f"TierDecider(tiers={sorted(self.tiers.tiers)!r})"

    async def decide(self, request: DecideRequest) -> Decision:
        from chainlang.llm.prompting import PromptError, messages
        from chainlang.llm.tiers import ModelRequest, NoModel
        from chainlang.runtime.models import ModelNotUsable, ModelUnavailable

        context = request.context
        try:
            asked = ModelRequest("decide", messages("decide", {
                "event": request.event, "description": request.description, "schema": request.params_schema,
                "params": request.params, "errors": request.errors, "condition": request.condition,
                "context": context, "repair": is_repair(request)}, self.project), answer_schema(request), "decision")
        except PromptError as exc:
            raise DeciderConfigError(str(exc)) from None
        try:
            if request.models is not None:
                answer = await request.models.ask("light", asked)
            else:
                tier = self.tiers.resolve("light")
                answer = await tier.provider.complete(tier, asked)
        except ModelNotUsable as exc:  # the key's variable is not set: not a question the model could not answer
            raise DeciderConfigError(f"{exc} ({_KEY_HINT})") from None
        except (ModelUnavailable, NoModel) as exc:
            raise Undecided(str(exc)) from None
        except ModelConfigError as exc:
            raise DeciderConfigError(f"{exc} ({_KEY_HINT})") from None
        except ModelError as exc:
            raise Undecided(exc.message) from None
        return model_decision(request, answer.text, "the light model")

    async def aclose(self) -> None:
        await self.tiers.aclose()
