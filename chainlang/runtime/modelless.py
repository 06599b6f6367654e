"""The decider of a project without a model, shared by every run of the process.

A project with no `[models]` table and a `[decide]` without `base_url`, `model` or
`api_key_env` (or none at all) decides with the embedded decider, then its `fallback`:
`decider_from_config` would build that per run, with an empty model pool to close after it.
That decider holds no state between decisions and nothing to close, so one per fallback
serves every run (a run saves building and closing it). It is built at its first decision:
the deciders' modules import jsonschema (~0.15 s), which a run that decides nothing never
needs. Any other configuration (a model tier, a half-configured `[decide]`, an unknown
fallback) goes the usual way, with its errors, through `decider_from_config`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chainlang.llm.tiers import ModelTiers

if TYPE_CHECKING:
    from chainlang.runtime.decide import ChainedDecider, DecideRequest, Decision

__all__ = ["ModellessDecider", "modelless_fallback", "shared_modelless"]

_FALLBACKS = ("fail", "skip", "break")  # chainlang.runtime.decide.decision.FALLBACKS (not imported: see above)


class ModellessDecider:
    """The embedded decider, then `fallback` (what `decider_from_config` builds without a model)."""

    def __init__(self, fallback: str) -> None:
        self.fallback = fallback
        self.tiers = ModelTiers({})  # what the run's model service reads (runtime/models.py): no tier
        self._chained: "ChainedDecider | None" = None

    def __repr__(self) -> str:
        return f"ModellessDecider(fallback={self.fallback!r})"

    def chained(self) -> "ChainedDecider":
        """The ChainedDecider this one stands for, built once."""
        if self._chained is None:
            from chainlang.runtime.decide import ChainedDecider, EmbeddedDecider

            self._chained = ChainedDecider(EmbeddedDecider(), None, self.fallback)  # type: ignore[arg-type]
            self._chained.tiers = self.tiers
        return self._chained

    async def decide(self, request: "DecideRequest") -> "Decision":
        return await self.chained().decide(request)


def modelless_fallback(config: Any) -> str | None:
    """The `[decide]` fallback of a project config without any model (None: it has one, or a
    configuration decider_from_config must judge)."""
    if config is None:
        return "fail"
    if getattr(config, "models", None) is not None or not hasattr(config, "decide"):
        return None  # a [models] table (or not a ProjectConfig): the usual way
    decide = config.decide
    if decide is None:
        return "fail"
    if decide.base_url or decide.model or decide.api_key_env:
        return None
    fallback = decide.fallback
    return fallback if fallback in _FALLBACKS else None


_SHARED: dict[str, ModellessDecider] = {}


def shared_modelless(config: Any) -> ModellessDecider | None:
    """This process' decider for a project config without a model; None for any other."""
    fallback = modelless_fallback(config)
    if fallback is None:
        return None
    shared = _SHARED.get(fallback)
    if shared is None:
        shared = _SHARED[fallback] = ModellessDecider(fallback)
    return shared
