"""Talking to language models: one pooled HTTP client for OpenAI-compatible endpoints
(`client.ModelClient`), shared by everything in a run that asks a model.

Nothing here imports httpx until a request is made, so commands that ask no model
(`chainlang check`, `--help`) never load it.
"""

from __future__ import annotations

from chainlang.llm.client import (
    DEFAULT_MAX_ANSWER_BYTES,
    ModelAnswerTooLarge,
    ModelBadAnswer,
    ModelClient,
    ModelConfigError,
    ModelError,
    ModelHTTPError,
    ModelTimeout,
    ModelUnreachable,
    Timeouts,
)

__all__ = [
    "DEFAULT_MAX_ANSWER_BYTES",
    "ModelAnswerTooLarge",
    "ModelBadAnswer",
    "ModelClient",
    "ModelConfigError",
    "ModelError",
    "ModelHTTPError",
    "ModelTimeout",
    "ModelUnreachable",
    "Timeouts",
]
