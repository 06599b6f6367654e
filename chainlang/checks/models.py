"""CL037 (a warning): a step calls an event that must ask a model (`effects.model_calls` > 0:
agent.think, agent.chain) in a project whose chainlang.toml configures no model tier, so the
run would fail at that step. A chain file outside any project is not reported: where it
will run, and with which models, is not known. agent.decide and the thread and memory events
are never reported: they have embedded, model-free defaults."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from chainlang.checks.base import CheckContext
from chainlang.diagnostics import rules
from chainlang.model.nodes import EventStep, walk_steps

RULES = (rules.NO_MODEL,)


@lru_cache(maxsize=64)
def _has_model(directory: str) -> bool | None:
    """Whether the project of `directory` configures a model tier (None: no project, or its
    chainlang.toml cannot be read, which another stage reports)."""
    from chainlang.config.project import find_project_config
    from chainlang.errors import RegistryError

    try:
        config = find_project_config(Path(directory))
    except (RegistryError, OSError):
        return None
    if config is None:
        return None
    models = config.models
    tiers = models is not None and any(getattr(models, n) is not None for n in ("heavy", "fast", "light"))
    decide = config.decide is not None and bool(config.decide.base_url and config.decide.model)
    return tiers or decide


def check(ctx: CheckContext) -> None:
    steps = walk_steps(ctx.chain.steps) + [s for hook in ctx.chain.hooks for s in walk_steps(hook.action)]
    needing = []
    for step in steps:
        if not isinstance(step, EventStep) or not step.event or step.event_node is None:
            continue
        spec = ctx.registry.get(step.event)
        if spec is not None and spec.model_calls > 0:
            needing.append(step)
    if not needing:
        return
    file = ctx.chain.file
    directory = str(Path(file).resolve().parent) if file and not file.startswith("<") else str(Path.cwd())
    if _has_model(directory) is not False:
        return
    for step in needing:
        assert step.event_node is not None
        ctx.report(rules.NO_MODEL, f"{step.event} asks a model, and this project configures none",
                   step.event_node,
                   'add a tier to chainlang.toml, e.g. [models.heavy] with base_url = "http://localhost:11434/v1" and '
                   'model = "llama3.2", or provider = "scripted" with rules = "FILE" for answers from a file')
