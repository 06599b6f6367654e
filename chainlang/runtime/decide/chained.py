"""The chain of deciders a run uses, and how chainlang.toml's `[decide]` builds it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from chainlang.runtime.decide.decision import (
    FALLBACKS,
    MAX_REASON,
    Action,
    DecideRequest,
    Decider,
    DeciderConfigError,
    Decision,
    DecisionNeeded,
    Fallback,
    Undecided,
    shorten,
)
from chainlang.runtime.decide.embedded import EmbeddedDecider

from chainlang.runtime.decide.model_decider import TierDecider

if TYPE_CHECKING:
    from chainlang.llm.tiers import ModelTiers
    from chainlang.config.project import ProjectConfig
    from chainlang.config.model import DecideConfig

__all__ = ["ChainedDecider", "close_decider", "decider_from_config"]

_CLOSE_GRACE = 2.0  # seconds

_HOW_TO_CONFIGURE = (
    'configure one in chainlang.toml: [decide] with base_url = "http://localhost:11434/v1" (any OpenAI-compatible '
    'endpoint) and model = "phi3", plus api_key_env = "NAME_OF_THE_KEY_VARIABLE" if it needs a key; or set '
    'fallback = "skip" or "break" in [decide]'
)


class ChainedDecider:
    """`first` (the embedded decider), then `then` (the model, if configured); when neither
    decides, the fallback: `fail` raises `DecisionNeeded`, `skip` and `break` return that
    decision with source `fallback`."""

    def __init__(self, first: Decider, then: Decider | None = None, fallback: Fallback = "fail") -> None:
        if fallback not in FALLBACKS:
            raise DeciderConfigError(f"the decide fallback is fail, skip or break, not {fallback!r}")
        self.first = first
        self.then = then
        self.fallback = fallback
        self.tiers: ModelTiers | None = None  # the project's model tiers, when built from its config

    def __repr__(self) -> str:
        return f"ChainedDecider(first={self.first!r}, then={self.then!r}, fallback={self.fallback!r})"

    async def decide(self, request: DecideRequest) -> Decision:
        reasons: list[str] = []
        for decider in (self.first, self.then):
            if decider is None:
                continue
            try:
                return await decider.decide(request)
            except Undecided as exc:
                reasons.append(exc.reason)
        why = "; ".join(reasons) or "no decider is configured"
        if self.fallback in ("skip", "break"):
            action: Action = "skip" if self.fallback == "skip" else "break"
            return Decision(action, None, shorten(f"fallback {self.fallback}: {why}", MAX_REASON), "fallback")
        if self.then is None:
            message = f"{request.event}: a decide model is needed ({why}); {_HOW_TO_CONFIGURE}"
        else:
            message = (f"{request.event}: neither the embedded decider nor the decide model could decide ({why}); "
                       f'check the light tier\'s endpoint in chainlang.toml ([models.light], or [decide]; without them the '
                       f'tier it borrows), or set fallback = "skip" or "break" in [decide]')
        raise DecisionNeeded(message, request.event, tuple(reasons))

    async def aclose(self) -> None:
        """Close what the deciders of the chain hold open (the models' connections)."""
        for decider in (self.first, self.then):
            if decider is not None:
                await close_decider(decider)
        if self.tiers is not None and not isinstance(self.then, TierDecider):
            await self.tiers.aclose()


async def close_decider(decider: object, grace: float = _CLOSE_GRACE) -> None:
    """Close what `decider` holds open, if it has an `aclose()` (the runner calls this at the
    end of a run, for the decider it made). Never raises, and gives up after `grace` seconds:
    closing must not keep a run from ending."""
    close = getattr(decider, "aclose", None)
    if close is None:
        return
    try:
        async with asyncio.timeout(grace):
            await close()
    except Exception:  # a failure to close a connection changes nothing in the run
        pass


def decider_from_config(config: ProjectConfig | DecideConfig | None) -> ChainedDecider:
    """The decider of a project: the embedded decider, then the light tier (`[models.light]`,
    or `[decide]` with `base_url` and `model`, or the tier it borrows: see
    chainlang.llm.tiers), then `[decide]`'s `fallback` (default `fail`). The decider holds
    the project's tiers (`tiers`), which the run's other model calls use too, and closes them.
    Raises `chainlang.registry.errors.ConfigError` for a half-configured model."""
    from chainlang.config.model import DecideConfig
    from chainlang.config.project import ProjectConfig
    from chainlang.llm.tiers import ModelTiers
    from chainlang.errors import ConfigError
    from chainlang.runtime.decide.model_decider import TierDecider

    decide = config if isinstance(config, DecideConfig) or config is None else config.decide
    if decide is not None:
        if decide.base_url or decide.model:
            missing = [name for name in ("base_url", "model") if not getattr(decide, name)]
            if missing:
                raise ConfigError(f"[decide] in chainlang.toml has {'model' if missing == ['base_url'] else 'base_url'} "
                                  f"but no {missing[0]}: a decide model needs both base_url and model")
        elif decide.api_key_env:
            raise ConfigError("[decide] in chainlang.toml has api_key_env but no base_url and model: "
                              "a decide model needs both base_url and model")
    if isinstance(config, ProjectConfig):
        tiers = ModelTiers.from_config(config)
        project = config.root
    elif decide is not None and decide.base_url and decide.model:  # a [decide] table alone (tests, embedders)
        from pathlib import Path

        tiers = ModelTiers.from_config(ProjectConfig(path=Path("chainlang.toml"), decide=decide))
        project = None
    else:
        tiers, project = ModelTiers({}), None
    model = TierDecider(tiers, project) if tiers.configured else None
    chained = ChainedDecider(EmbeddedDecider(), model, decide.fallback if decide is not None else "fail")
    chained.tiers = tiers
    return chained