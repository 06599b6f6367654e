"""`error:` hooks at run time (LANGUAGE.md §6.1): they fire when a step of their event ends
`failed` — after its last retry, since the pipeline raises `StepFailed` only then — with
the payload `{error: {type, message}, params}`.

They run like `post:` hooks (through `fire_post`: actions start at once beside the chain,
`mode`/`max`/`max_depth` apply, the run does not end before they end) and cannot undo the
failure: `StepFailed` goes on to the walker, where the step's `on_error` decides.

`on_failure` wraps a chain's step pipeline only when some hook in force triggers on
`error:`, so a run without one pays nothing. Every way a step of an event ends failed
goes through the pipeline (not allowed, invalid params, decide, the tool, a sub-chain, a
pre hook's `on_error: fail`), and so does a resume, which replays a failed step by raising
`StepFailed` again: the firings recorded as ended are not run again (`fire_post`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chainlang.runtime.hooks import fire_post
from chainlang.runtime.outcomes import StepFailed

if TYPE_CHECKING:
    from chainlang.compile import GraphNode
    from chainlang.runtime.scope import Scope
    from chainlang.runtime.step import StepPipeline
    from chainlang.runtime.walk import ChainRun

__all__ = ["FiringOnFailure", "error_payload", "on_failure"]


def on_failure(chain: "ChainRun", pipeline: "StepPipeline") -> "StepPipeline | FiringOnFailure":
    """The pipeline that runs `chain`'s event steps: `pipeline` itself, or wrapped so that
    a failed step fires the `error:` hooks in force."""
    hooks = chain.hooks
    if hooks is None or "error" not in hooks.phases:
        return pipeline
    return FiringOnFailure(chain, pipeline)


class FiringOnFailure:
    """A step pipeline whose failed steps fire the matching `error:` hooks."""

    __slots__ = ("chain", "pipeline")

    def __init__(self, chain: "ChainRun", pipeline: "StepPipeline") -> None:
        self.chain = chain
        self.pipeline = pipeline

    def __getattr__(self, name: str) -> Any:  # anything else is the pipeline's
        return getattr(self.pipeline, name)

    async def __call__(self, node: "GraphNode", scope: "Scope", ipath: str) -> None:
        try:
            await self.pipeline(node, scope, ipath)
        except StepFailed as exc:
            fire_error(self.chain, node, scope, ipath, exc)
            raise


def error_payload(error: dict[str, Any], params: Any) -> dict[str, Any]:
    """What an error: hook's bare names read: the error's type and message, and the params
    the step was called with (an empty object when it failed before they were rendered)."""
    return {"error": {"type": str(error.get("type", "failed")), "message": str(error.get("message", ""))},
            "params": params if isinstance(params, dict) else {}}


def fire_error(chain: "ChainRun", node: "GraphNode", scope: "Scope", ipath: str, failed: StepFailed) -> None:
    """Start the actions of the `error:` hooks of the failed step whose condition holds."""
    assert chain.hooks is not None
    event = node.event or ""
    hooks = chain.hooks.matching("error", event)
    if not hooks:
        return
    rec = scope.paths.get(node.path)  # every failure of the pipeline records the step first
    payload = error_payload(failed.error, rec.params if rec is not None else None)
    event_data = {"name": event, "params": payload["params"], "error": payload["error"], "payload": payload}
    fire_post(chain, hooks, event, ipath, payload["params"], None, payload=payload, event_data=event_data,
              when="error")
