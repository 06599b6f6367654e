"""A run's calls to the model tiers (LANGUAGE.md §13): budgeted, recorded, given back on resume.

`ModelService` is the run's (one per run, shared by its sub-chains and hook actions); a
step asks through `StepModels` (its `ctx.models`), which knows the step's path:

1. on resume, an answer recorded for this step (in order) is given back: nothing is asked;
2. otherwise the call reserves its share of the budgets first (`Budget.reserve`: one call,
   and the prompt's tokens plus the tier's `max_tokens`); over a budget, the run stops
   (`LimitExceeded`, exit 3, naming it) and nothing is sent;
3. the answer (or the failure) is recorded as a `model_call` before it is used, secrets
   masked, and what the call used (the endpoint's count, else an estimate) replaces the
   reservation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chainlang.llm.tiers import ModelAnswer, ModelRequest, ModelTiers, NoModel, estimate_tokens
from chainlang.runtime.outcomes import LimitExceeded, perf
from chainlang.status import MODEL

if TYPE_CHECKING:
    from chainlang.runtime.state import RunState

__all__ = ["Budget", "ModelNotUsable", "ModelService", "ModelUnavailable", "StepModels", "run_models"]

MAX_RECORDED_CHARS = 16_000  # of one message in a model_call record


class ModelUnavailable(ValueError):
    """No tier can answer (none configured) or the exchange failed: the step's error."""


class ModelNotUsable(ModelUnavailable):
    """The tier cannot be used as configured (its API key variable is not set): nothing was
    sent, and a decider must not fall back as if the model had not known the answer."""


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
        self.run = run
        self.tiers = tiers
        self.budget = budget
        replay = run.replay
        if replay is not None:  # what the interrupted attempts spent is spent
            budget.calls += replay.model_calls_made
            budget.tokens += replay.model_tokens_used

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
                return ModelAnswer(call.answer or "", {k: v for k, v in call.usage.items() if isinstance(v, int)})
            recorded.clear()  # not the question this step asks now: its recorded answers are not its own
        try:
            tier = self.tiers.resolve(tier_name)
        except NoModel as exc:
            raise ModelUnavailable(f"{event}: {exc}") from None
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
        # recorded before it is used: a resume gives this answer back instead of asking again
        self.run.record(ModelCall(step, tier.name, tier.model, request.task, sent, text, usage, _ms(start)))
        return ModelAnswer(text, usage)


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
