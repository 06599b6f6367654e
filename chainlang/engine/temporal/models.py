"""Model calls on Temporal.

In the workflow, the run's model service (budget, `model_call` records, the decider,
agent.chain's asking) works as in the embedded engine, over tiers whose provider sends
each question to the `chainlang.model` activity: the worker asks its configured tier (an
OpenAI-compatible endpoint, or the scripted provider), and the answer is in the workflow's
history, so a replay does not ask again.

A tool that asks a model itself (agent.think, thread.match with a model memory tier) runs
in an activity: there it gets a model service of its own over the worker's tiers, under
what is left of the run's budget, whose records and spending the workflow takes over.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

from chainlang.engine.temporal.messages import ModelAnswered, ModelAsked, from_json, received, to_json

if TYPE_CHECKING:
    from chainlang.llm.tiers import ModelAnswer, ModelRequest, ModelTiers, Tier

__all__ = ["MODEL_ACTIVITY", "ActivityProvider", "ActivityRun", "activity_tiers", "ask_model"]

MODEL_ACTIVITY = "chainlang.model"


class ActivityProvider:
    """A tier's provider in the workflow: the question goes to a worker's `chainlang.model`."""

    async def complete(self, tier: "Tier", request: "ModelRequest") -> "ModelAnswer":
        from chainlang.llm.client import ModelConfigError, ModelError
        from chainlang.llm.tiers import ModelAnswer

        asked = ModelAsked(tier.name, request.task, to_json(request.messages),
                           None if request.schema is None else to_json(request.schema), request.schema_name)
        out = received(ModelAnswered, await workflow.execute_activity(
            MODEL_ACTIVITY, asked, result_type=ModelAnswered | str,  # type: ignore[arg-type]
            start_to_close_timeout=timedelta(seconds=tier.timeout + 30),
            # a worker lost in the middle: ask again on another (the model's own failures come back as errors)
            retry_policy=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=1)),
            summary=f"{tier.name} model: {request.task}",
        ))
        if out.config_error:
            raise ModelConfigError(out.config_error)
        if out.error:
            error = ModelError(out.error)
            error.schema_notes = tuple(out.schema_notes)
            raise error
        return ModelAnswer(out.text, {k: int(v) for k, v in out.usage.items()}, out.finish_reason,
                           tuple(out.schema_notes))

    async def aclose(self) -> None:
        return None


def activity_tiers(tiers: "ModelTiers") -> "ModelTiers":
    """The worker's tiers as the workflow sees them: their names, models and limits, each
    answered through the `chainlang.model` activity."""
    from chainlang.llm.tiers import ModelTiers

    provider = ActivityProvider()
    return ModelTiers({name: replace(tier, provider=provider) for name, tier in tiers.tiers.items()},
                      memory=tiers.memory)


@activity.defn(name=MODEL_ACTIVITY)
async def ask_model(asked: ModelAsked | str) -> ModelAnswered:
    """Ask the worker's tier: the answer and its usage, or the model's error, or a
    configuration error."""
    from chainlang.engine.temporal.activities import current_project
    from chainlang.llm.client import ModelConfigError, ModelError
    from chainlang.llm.tiers import ModelRequest, NoModel

    asked = received(ModelAsked, asked)
    tiers = current_project().tiers
    assert tiers is not None
    try:
        tier = tiers.resolve(asked.tier)
        answer = await tier.provider.complete(tier, ModelRequest(asked.task, from_json(asked.messages_json),
                                                                 from_json(asked.schema_json), asked.schema_name))
    except ModelConfigError as exc:
        return ModelAnswered(config_error=exc.message)
    except ModelError as exc:
        return ModelAnswered(error=str(exc), schema_notes=list(exc.schema_notes))
    except NoModel as exc:
        return ModelAnswered(error=str(exc))
    return ModelAnswered(answer.text, dict(answer.usage), finish_reason=answer.finish_reason,
                         schema_notes=list(answer.schema_notes))


class ActivityRun:
    """What a model service in an activity needs of a run: where its records go."""

    replay = None

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def record(self, rec: Any) -> None:
        from chainlang.journal.records import fields

        self.records.append({"type": rec.TYPE, **fields(rec)})
