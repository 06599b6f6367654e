"""A run's calls to the model tiers (LANGUAGE.md §13): budgeted, recorded, given back on resume.

`ModelService` is the run's (one per run, shared by its sub-chains and hook actions); a
step asks through `StepModels` (its `ctx.models`), which knows the step's path:

1. on resume, an answer recorded for this step (in order) is given back: nothing is asked;
2. a request that would not fit the tier's `context` (its prompt, estimated, and its
   `max_tokens`) is refused (`ModelRequestTooLarge`): nothing is sent, recorded or charged;
3. otherwise the call reserves its share of the budgets first (`Budget.reserve`: one call,
   and the prompt's tokens plus the tier's `max_tokens`); over a budget, the run stops
   (`LimitExceeded`, exit 3, naming it) and nothing is sent;
4. the answer (or the failure) is recorded as a `model_call` before it is used, secrets
   masked, and what the call used (the endpoint's count, else an estimate) replaces the
   reservation;
5. an answer cut at a length limit (`finish_reason: length`) is the step's error
   (`ModelAnswerCut`), saying which limit and how to raise it, not an answer to parse: on
   resume, the recorded cut answer fails the same way. (A cut answer whose JSON is
   complete, a model padding it with whitespace, is used.)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chainlang.llm.tiers import ModelAnswer, ModelRequest, ModelTiers, NoModel, Tier, estimate_prompt_tokens, estimate_tokens
from chainlang.runtime.outcomes import LimitExceeded, perf
from chainlang.status import MODEL

if TYPE_CHECKING:
    from chainlang.runtime.state import RunState

__all__ = ["Budget", "ModelAnswerCut", "ModelNotUsable", "ModelRequestTooLarge", "ModelService", "ModelUnavailable",
           "StepModels", "run_models"]

MAX_RECORDED_CHARS = 16_000  # of one message in a model_call record


class ModelUnavailable(ValueError):
    """No tier can answer (none configured) or the exchange failed: the step's error."""


class ModelNotUsable(ModelUnavailable):
    """The tier cannot be used as configured (its API key variable is not set): nothing was
    sent, and a decider must not fall back as if the model had not known the answer."""


class ModelRequestTooLarge(ModelUnavailable):
    """The request would not fit the tier's context: refused before it was sent."""


class ModelAnswerCut(ModelUnavailable):
    """The answer was cut at a length limit (`finish_reason: length`): the step's error."""


class Budget:
    """The ledger of `limits.max_model_calls` and `limits.max_tokens` (None: unbounded)."""

    def __init__(self, max_calls: int | None = None, max_tokens: int | None = None) -> None:
        self.max_calls = max_calls
        self.max_tokens = max_tokens
        self.calls = 0
        self.tokens = 0  # used by calls that ended
        self.reserved = 0  # held by calls under way

    def reserve(self, tokens: int, what: str) -> None:
        """Hold one call and `tokens` for `what`, or raise LimitExceeded naming the budget."""
        if self.max_calls is not None and self.calls + 1 > self.max_calls:
            raise LimitExceeded("max_model_calls", f"{what} would be model call {self.calls + 1}, beyond "
                                                   f"limits.max_model_calls = {self.max_calls}")
        if self.max_tokens is not None and self.tokens + self.reserved + tokens > self.max_tokens:
            raise LimitExceeded("max_tokens", (
                f"{what} reserves {tokens} tokens (its prompt and the tier's max_tokens) with "
                f"{self.tokens} used and {self.reserved} held by calls under way: beyond limits.max_tokens = "
                f"{self.max_tokens}"))
        self.calls += 1
        self.reserved += tokens

    def settle(self, reserved: int, used: int) -> None:
        self.reserved -= reserved
        self.tokens += used

    def release(self, reserved: int) -> None:
        """A reservation whose call was never sent: the call and its tokens given back."""
        self.calls -= 1
        self.reserved -= reserved


class ModelService:
    """The run's model calls (see the module's documentation)."""

    def __init__(self, run: "RunState", tiers: ModelTiers, budget: Budget) -> None:
        self._run: "RunState | None" = run  # let go by `close` (the run holds this service: a cycle)
        self.tiers = tiers
        self.budget = budget
        replay = run.replay
        if replay is not None:  # what the interrupted attempts spent is spent
            budget.calls += replay.model_calls_made
            budget.tokens += replay.model_tokens_used

    @property
    def run(self) -> "RunState":
        if self._run is None:
            raise RuntimeError("a model call after its run ended")
        return self._run

    def close(self) -> None:
        """The run has ended: let go of it, so that reference counting frees the two
        (runtime/walk.py ChainRun.release says why)."""
        self._run = None

    def for_step(self, step: str, event: str) -> "StepModels":
        return StepModels(self, step, event)

    async def ask(self, step: str, event: str, tier_name: str, request: ModelRequest) -> ModelAnswer:
        from chainlang.journal.records import ModelCall
        from chainlang.llm.client import ModelConfigError, ModelError

        replay = self.run.replay
        recorded = replay.model_calls.get(step) if replay is not None else None
        if recorded:
            call = recorded.pop(0)
            if call.task == request.task:
                usage = {k: v for k, v in call.usage.items() if isinstance(v, int)}
                answer = ModelAnswer(call.answer or "", usage, call.finish_reason)
                self._check_whole(event, call.tier, request, answer)
                return answer
            recorded.clear()  # not the question this step asks now: its recorded answers are not its own
        try:
            tier = self.tiers.resolve(tier_name)
        except NoModel as exc:
            raise ModelUnavailable(f"{event}: {exc}") from None
        if tier.context is not None:
            _check_fits(event, request, tier)
        prompt = estimate_tokens(request.text())
        held = prompt + tier.max_tokens
        self.budget.reserve(held, f"step {step} ({event}, {tier.name} tier)")
        start = perf()
        sent = _recorded_request(request)
        try:
            answer = await tier.provider.complete(tier, request)
        except ModelConfigError as exc:  # nothing was sent (the key's variable is not set)
            self.budget.release(held)
            raise ModelNotUsable(f"{event}: {exc.message}") from None
        except ModelError as exc:
            self.budget.settle(held, prompt)
            if exc.schema_notes:
                sent["schema_simplified"] = list(exc.schema_notes)
            self.run.record(ModelCall(step, tier.name, tier.model, request.task, sent, None,
                                      {"prompt_tokens": prompt}, _ms(start),
                                      {"type": MODEL, "message": exc.message[:1000]}))
            raise ModelUnavailable(f"{event}: {exc.message}") from None
        except BaseException:  # cancelled (a step's timeout, a sibling's failure), or a bug: the tokens held go back
            self.budget.settle(held, prompt)
            raise
        text = _mask(answer.text)
        usage = {"prompt_tokens": answer.usage.get("prompt_tokens", prompt),
                 "completion_tokens": answer.usage.get("completion_tokens", estimate_tokens(text))}
        self.budget.settle(held, usage["prompt_tokens"] + usage["completion_tokens"])
        if answer.schema_notes:
            sent["schema_simplified"] = list(answer.schema_notes)
        # recorded before it is used: a resume gives this answer back instead of asking again
        self.run.record(ModelCall(step, tier.name, tier.model, request.task, sent, text, usage, _ms(start),
                                  finish_reason=answer.finish_reason))
        done = ModelAnswer(text, usage, answer.finish_reason)
        self._check_whole(event, tier.name, request, done)
        return done

    def _check_whole(self, event: str, tier_name: str, request: ModelRequest, answer: ModelAnswer) -> None:
        """ModelAnswerCut for an answer cut at a length limit, unless its JSON is whole."""
        if answer.finish_reason != "length" or (request.schema is not None and _whole_json(answer.text)):
            return
        tier = self.tiers.tiers.get(tier_name)
        raise ModelAnswerCut(f"{event}: {_cut_message(tier_name, tier, answer)}")


def _check_fits(event: str, request: ModelRequest, tier: Tier) -> None:
    """ModelRequestTooLarge when the prompt (estimated) and max_tokens exceed the tier's context."""
    assert tier.context is not None
    prompt = estimate_prompt_tokens(request)
    if prompt + tier.max_tokens <= tier.context:
        return
    room = tier.context - prompt
    how = (f"lower max_tokens to {room:,} or less, or shorten the prompt" if room >= 64 else
           "shorten the prompt (fewer events allowed, less data, a shorter thread) or use a model with a larger context")
    raise ModelRequestTooLarge(
        f"{event}: the {request.task} request is about {prompt:,} tokens and max_tokens is {tier.max_tokens:,}: "
        f"more than [models.{tier.name}] context = {tier.context:,}; it was not sent; {how}, or raise context "
        "if the endpoint's is larger")


def _cut_message(tier_name: str, tier: Tier | None, answer: ModelAnswer) -> str:
    """Which limit cut an answer, and what to change. The context was the limit when the
    prompt and max_tokens did not fit it, or when the answer stopped short of max_tokens."""
    who = f"the {tier_name} model's answer"
    where = f"[models.{tier_name}]"
    prompt, written = answer.usage.get("prompt_tokens"), answer.usage.get("completion_tokens")
    max_tokens = tier.max_tokens if tier is not None else None
    context = tier.context if tier is not None else None
    if max_tokens is not None and prompt is not None and context is not None and prompt + max_tokens > context:
        return (f"{who} was cut by the context: the prompt took {prompt:,} tokens and max_tokens = {max_tokens:,} do "
                f"not fit {where} context = {context:,} (finish_reason: length); shorten the prompt or lower max_tokens")
    if max_tokens is not None and written is not None and written < max_tokens:
        took = f" (the prompt took {prompt:,} tokens)" if prompt is not None else ""
        return (f"{who} was cut after {written:,} tokens, before max_tokens = {max_tokens:,}: the endpoint's context "
                f"was the limit{took} (finish_reason: length); shorten the prompt, or set {where} context to the "
                "endpoint's so such a request is refused before it is sent")
    at = f" at max_tokens = {max_tokens:,}" if max_tokens is not None else ""
    return (f"{who} was cut{at} (finish_reason: length); raise max_tokens in {where} or shorten the prompt")


def _whole_json(text: str) -> bool:
    """Whether `text` is JSON whole (one ``` fence allowed), however it is padded."""
    from chainlang.llm.answers import parse_answer

    try:
        parse_answer(text, {}, "")
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class StepModels:
    """The run's model service as one step sees it (`ctx.models`)."""

    service: ModelService
    step: str
    event: str

    @property
    def configured(self) -> bool:
        return self.service.tiers.configured

    @property
    def memory(self) -> str:
        """The tier the thread and memory events ask (`[models] memory`), or "embedded"."""
        return self.service.tiers.memory

    async def ask(self, tier: str, request: ModelRequest) -> ModelAnswer:
        return await self.service.ask(self.step, self.event, tier, request)

    def who(self, tier: str) -> str:
        """The model that answers for `tier`, as messages name it: "the fast model" when the
        heavy tier borrows the fast one (the one the user configured)."""
        try:
            return f"the {self.service.tiers.resolve(tier).name} model"
        except NoModel:
            return f"the {tier} model"


def run_models(run: "RunState", decider: Any, max_calls: int | None, max_tokens: int | None) -> ModelService:
    """The model service of a run: the tiers the decider was built with (`decider.tiers`, none
    for a decider without them), under the run's budgets."""
    tiers = getattr(decider, "tiers", None)
    return ModelService(run, tiers if isinstance(tiers, ModelTiers) else ModelTiers({}),
                        Budget(max_calls, max_tokens))


# a JSON string literal; a key that names a secret ("password", "api_key", "access_token"...)
_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"')
_SECRET_BEFORE = re.compile(r"(?i)\b(?:password|passwd|pwd|secret|token|api[_-]?key)\s*[:=]\s*$")


def _mask(text: str) -> str:
    """`text` with its secrets masked (mask_secrets), one JSON string literal at a time: a
    mask never eats the quote that ends a string, so an answer that was JSON stays JSON (it
    is used as it is recorded), and the value of a key that names a secret is masked whole,
    also in JSON written inside a string (a tool's result quoted in a prompt's data)."""
    from chainlang.redaction import SECRET_KEY, mask_secrets

    out: list[str] = []
    last, key = 0, False
    for match in _LITERAL.finditer(text):
        gap = text[last:match.start()]
        out.append(mask_secrets(gap))
        literal = match.group()
        try:
            value = json.loads(literal)
        except ValueError:  # quotes of prose, not JSON: its inside, masked alone
            out.append('"' + mask_secrets(literal[1:-1]) + '"')
            value, key = None, False
        else:
            secret = (key and gap.strip() == ":") or _SECRET_BEFORE.search(gap) is not None
            masked = "***" if secret and value else _mask(value)  # it may hold JSON text in turn
            out.append(literal if masked == value else _encoded(masked, literal))
            key = SECRET_KEY.fullmatch(value) is not None
        last = match.end()
    out.append(mask_secrets(text[last:]))
    return "".join(out)


def _encoded(value: str, was: str) -> str:
    """`value` as a JSON string, escaped as the literal it replaces was: a prompt's data
    (chainlang.llm.prompting.data_block) writes <, > and & as \\u escapes."""
    text = json.dumps(value, ensure_ascii=False)
    if not any(ch in was for ch in "<>&"):
        text = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return text


def _recorded_request(request: ModelRequest) -> dict[str, Any]:
    messages = []
    for message in request.messages:
        content = _mask(message.get("content", ""))
        if len(content) > MAX_RECORDED_CHARS:
            content = content[:MAX_RECORDED_CHARS] + " …(cut)"
        messages.append({"role": message.get("role", "user"), "content": content})
    out: dict[str, Any] = {"messages": messages}
    if request.schema is not None:
        out["schema"] = request.schema_name
    return out


def _ms(start: float) -> float:
    return round((perf() - start) * 1000, 3)
