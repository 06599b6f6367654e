"""CL038: in a project whose chainlang.toml runs chains on Temporal (`[engine] kind =
"temporal"`), a chain that engine cannot run as it is written: its `limits.max_steps`
allows a run longer than one workflow's history holds (Temporal ends a workflow past
51,200 events; `MAX_STEPS_IN_ONE_HISTORY`), or it references a secret
(`{secrets.NAME}`): the params of a tool are an activity's input, which Temporal keeps in
the workflow's history, so the value would be stored there in clear. Told by the checker,
before a run fails on it. A chain file outside any project is not reported."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from chainlang.checks.base import CheckContext
from chainlang.diagnostics import rules

if TYPE_CHECKING:
    from chainlang.config.project import ProjectConfig

RULES = (rules.NOT_ON_ENGINE,)

# Temporal ends a workflow whose history passes 51,200 events, and a step takes from about 3
# (an activity scheduled, started, completed) to 6 (with the workflow task that follows it).
# A named chain's steps are in the history of their own child workflow. Kept here, below
# the engine, so the checker does not import the engine it checks for.
MAX_STEPS_IN_ONE_HISTORY = 8_000  # 51,200 events at about 6 a step, with room for timers and markers


@lru_cache(maxsize=64)
def _temporal_project(directory: str) -> "ProjectConfig | None":
    """The config of the project of `directory` when it runs on Temporal (None: it does not,
    there is no project, or its chainlang.toml cannot be read, which another stage reports)."""
    from chainlang.config.project import find_project_config
    from chainlang.errors import RegistryError

    try:
        config = find_project_config(Path(directory))
    except (RegistryError, OSError):
        return None
    if config is None:  # no project: a small check imports no configuration models (pydantic)
        return None
    from chainlang.config.engine_kind import engine_kind

    if engine_kind(config) != "temporal":
        return None
    return config


def check(ctx: CheckContext) -> None:
    file = ctx.chain.file
    directory = str(Path(file).resolve().parent) if file and not file.startswith("<") else str(Path.cwd())
    config = _temporal_project(directory)
    if config is None:
        return
    limits = ctx.chain.limits
    where = limits.node.get("max_steps") if limits.node is not None else None
    if ctx.chain.kind == "chain" and where is not None and limits.max_steps > MAX_STEPS_IN_ONE_HISTORY:
        ctx.report(rules.NOT_ON_ENGINE,
                   f"limits.max_steps = {limits.max_steps:,} allows a run longer than one Temporal workflow holds: "
                   f"Temporal ends a workflow whose history passes 51,200 events, about "
                   f"{MAX_STEPS_IN_ONE_HISTORY:,} steps of one chain",
                   where, f"keep max_steps at {MAX_STEPS_IN_ONE_HISTORY:,} or less, and move the repeated steps into "
                          "a named chain: each call of it runs as a child workflow, with a history of its own")
    for info in ctx.analysis.refs:
        if info.kind == "secret" and info.problem is None:
            site = info.site
            ctx.report(rules.NOT_ON_ENGINE,
                       f"{info.ref.dotted()}: a secret cannot be used on the Temporal engine: a tool's params are "
                       "an activity's input, which Temporal keeps in the workflow's history, so the value would be "
                       "stored there in clear",
                       ctx.expr_span(site.node, site.base + info.ref.start, site.base + info.ref.end),
                       "run this chain on the embedded engine (a project without [engine] kind = \"temporal\"), or "
                       "let the tool read the secret itself (from its environment on the workers)")
