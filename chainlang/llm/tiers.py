"""The model tiers of a project (LANGUAGE.md §13): `heavy` plans, `fast` writes chains,
`light` decides. Each is an OpenAI-compatible endpoint or the `scripted` provider.

`ModelTiers.from_config` reads `[models.*]` of chainlang.toml, with `[decide]` as the light
tier's older name (both naming a model is an error: one place to look). A tier that is not
configured borrows the nearest one that is (`BORROW`): a project with one model uses it for
everything. `ask` sends one request and returns the answer's text and the tokens it took;
all the endpoints share one pool of connections (`HttpPool`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from chainlang.llm.client import HttpPool, ModelClient, ModelConfigError, Timeouts

if TYPE_CHECKING:
    from chainlang.config.model import DecideConfig, ModelTierConfig
    from chainlang.config.project import ProjectConfig

__all__ = ["BORROW", "TIERS", "ModelAnswer", "ModelRequest", "ModelTiers", "NoModel", "Tier", "estimate_prompt_tokens",
           "estimate_tokens"]

TIERS = ("heavy", "fast", "light")
# a tier that is not configured uses the first configured one of these
BORROW = {"heavy": ("heavy", "fast", "light"), "fast": ("fast", "heavy", "light"), "light": ("light", "fast", "heavy")}
HOW_TO_CONFIGURE = ('configure one in chainlang.toml, e.g. [models.fast] with base_url = "http://localhost:11434/v1" '
                    'and model = "llama3.2" (any OpenAI-compatible endpoint), or provider = "scripted" with '
                    'rules = "FILE" for answers from a file')


class NoModel(Exception):
    """The project has no model tier at all (the embedded tiers are the caller's to use)."""


@dataclass(frozen=True)
class ModelRequest:
    """One question to a tier: chat `messages` (system, user...), the JSON Schema the answer
    must match (None: free text), and what it is for (`task`: think, chain, decide...)."""

    task: str
    messages: list[dict[str, str]]
    schema: dict[str, Any] | None = None
    schema_name: str = "answer"
    # what the user said last, when the request is about a conversation (the thread's latest
    # user.input): the scripted provider's `last:` rules read it (the prompt holds the history)
    last_input: str | None = None

    def text(self) -> str:
        return "\n".join(m.get("content", "") for m in self.messages)


@dataclass(frozen=True)
class ModelAnswer:
    """A tier's answer: its text, the tokens it took, why it ended (`finish_reason`, as the
    endpoint says: "length" when a length limit cut it; None when not said) and what was
    simplified in the schema sent for the endpoint to take it (`schema_notes`)."""

    text: str
    usage: dict[str, int] = field(default_factory=dict)
    finish_reason: str | None = None
    schema_notes: tuple[str, ...] = ()


class Provider(Protocol):
    async def complete(self, tier: "Tier", request: ModelRequest) -> ModelAnswer: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class Tier:
    """A configured tier: its name, what answers it (`provider`), the model's name as shown."""

    name: str
    provider: Provider
    model: str
    max_tokens: int
    timeout: float
    context: int | None = None  # the endpoint's context window in tokens ([models.*] context), when known


def estimate_tokens(text: str) -> int:
    """Tokens of `text`, roughly (4 characters a token): what a call reserves of a budget
    before the endpoint says what it used, and the usage of a provider that does not say."""
    return max(1, (len(text) + 3) // 4)


# the pieces of text a BPE tokenizer mostly keeps whole: a run of letters, a digit, a run of
# punctuation, whitespace (one space goes with the word after it)
_PIECE = re.compile(r"[A-Za-z]+|[0-9]|\s+|[^A-Za-z0-9\s]+")
_PER_MESSAGE = 4  # a chat template's tokens around a message (role, start and end markers)


def estimate_prompt_tokens(request: ModelRequest) -> int:
    """The tokens of `request`'s prompt, roughly, for the check against a tier's context:
    a run of letters is a token per 8 letters, a digit a token, a run of punctuation a token
    per 2 characters, whitespace other than one space a token, plus a chat template's
    markers. Against SmolLM2's tokenizer (BPE, 49k tokens) through llama.cpp: whole
    agent.chain and decide requests 0.99-1.02 of the server's count, JSON data 0.93, text
    alone (prompts, reference docs, JSON schemas) 0.89-1.11; 4 characters a token gave
    0.52-1.18 (JSON with digits is 2 characters a token)."""
    total = 3  # the assistant's header the template adds after the last message
    for message in request.messages:
        total += _PER_MESSAGE
        for piece in _PIECE.finditer(message.get("content", "")):
            text = piece.group()
            first = text[0]
            if first.isspace():
                total += 0 if text == " " else 1
            elif "a" <= first.lower() <= "z":
                total += math.ceil(len(text) / 8)
            elif first.isdigit():
                total += 1
            else:
                total += math.ceil(len(text) / 2)
    return total


class OpenAIProvider:
    """A chat endpoint: POST /chat/completions, the schema as `response_format` where the
    tier asks for it (`structured`)."""

    def __init__(self, client: ModelClient, model: str, structured: str) -> None:
        self.client = client
        self.model = model
        self.structured = structured

    async def complete(self, tier: Tier, request: ModelRequest) -> ModelAnswer:
        from chainlang.llm.client import ModelError
        from chainlang.llm.schema_fit import simplify

        body: dict[str, Any] = {"model": self.model, "messages": request.messages, "temperature": 0,
                                "max_tokens": tier.max_tokens}
        notes: tuple[str, ...] = ()
        if request.schema is not None and self.structured == "json_schema":
            # what grammar converters refuse is simplified (and said); the answer is still
            # validated against the whole schema
            schema, simplified = simplify(request.schema)
            notes = tuple(simplified)
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": request.schema_name, "schema": schema}}
        elif request.schema is not None and self.structured == "json_object":
            body["response_format"] = {"type": "json_object"}
        try:
            done = await self.client.complete(body)
        except ModelError as exc:
            exc.schema_notes = notes  # the failure's record says what was sent, too
            raise
        return ModelAnswer(done.content, done.usage, done.finish_reason, notes)

    async def aclose(self) -> None:
        await self.client.aclose()


class ModelTiers:
    """The configured tiers of a project, sharing one connection pool."""

    def __init__(self, tiers: dict[str, Tier], pool: HttpPool | None = None, memory: str = "embedded") -> None:
        self.tiers = tiers
        self.pool = pool
        self.memory = memory  # the tier thread.summarize uses ([models] memory), or "embedded"

    @property
    def configured(self) -> bool:
        return bool(self.tiers)

    def resolve(self, name: str) -> Tier:
        """The tier that answers for `name` (itself, or the one it borrows); NoModel when none is configured."""
        for candidate in BORROW.get(name, (name,)):
            tier = self.tiers.get(candidate)
            if tier is not None:
                return tier
        raise NoModel(f"no model is configured for the {name} tier; {HOW_TO_CONFIGURE}")

    async def aclose(self) -> None:
        for tier in self.tiers.values():
            await tier.provider.aclose()
        if self.pool is not None:
            await self.pool.aclose()

    @classmethod
    def from_config(cls, config: "ProjectConfig | None") -> "ModelTiers":
        """The tiers of `config` (none without one). Raises ConfigError for a light tier named twice
        or a scripted tier whose rules cannot be read."""
        from chainlang.errors import ConfigError

        if config is None:
            return cls({})
        tables: dict[str, ModelTierConfig] = {}
        if config.models is not None:
            for name in TIERS:
                table = getattr(config.models, name)
                if table is not None:
                    tables[name] = table
        decide = config.decide
        if decide is not None and (decide.base_url or decide.model):
            if "light" in tables:
                raise ConfigError(f"{config.path.name}: [decide] and [models.light] both name a model; "
                                  "[decide] is the light tier's older name: keep one of them")
            light = _from_decide(decide)
            if light is not None:
                tables["light"] = light
        pool = HttpPool()
        labels = {"light": "the decide model"} if "light" in tables and config.decide is not None and \
            config.decide.base_url else {}
        tiers = {name: _tier(name, table, config.root, pool, labels.get(name, f"the {name} model"))
                 for name, table in tables.items()}
        memory = config.models.memory if config.models is not None else "embedded"
        if memory != "embedded" and not tiers:
            raise ConfigError(f"{config.path.name}: [models] memory = {memory!r} but no model tier is configured")
        return cls(tiers, pool, memory)


def _from_decide(decide: "DecideConfig") -> "ModelTierConfig | None":
    from chainlang.config.model import ModelTierConfig

    if not (decide.base_url and decide.model):
        return None  # half a model: decider_from_config says what is missing
    return ModelTierConfig(base_url=decide.base_url, model=decide.model, api_key_env=decide.api_key_env,
                           timeout=decide.timeout, max_tokens=decide.max_tokens)


def _tier(name: str, table: "ModelTierConfig", root: Path, pool: HttpPool, label: str) -> Tier:
    from chainlang.durations import parse_duration
    from chainlang.errors import ConfigError

    timeout = parse_duration(table.timeout) or 60.0
    if table.provider == "scripted":
        from chainlang.llm.scripted import ScriptedProvider

        assert table.rules is not None
        provider: Provider = ScriptedProvider.load(root / table.rules, shown=table.rules)
        return Tier(name, provider, f"scripted:{table.rules}", table.max_tokens, timeout, table.context)
    try:
        client = ModelClient(str(table.base_url), table.api_key_env, timeouts=Timeouts(total=timeout),
                             label=label, pool=pool)
    except ModelConfigError as exc:
        raise ConfigError(f"[models.{name}] in chainlang.toml: {exc}") from None
    return Tier(name, OpenAIProvider(client, str(table.model), table.structured), str(table.model),
                table.max_tokens, timeout, table.context)
