"""Sub-chains as child workflows (LANGUAGE.md §14): a named chain or `chain.run` step of a
run on Temporal runs as a `chainlang.subchain` workflow (id `RUN/STEP@ATTEMPT`), with its
own history, so a run that fans out over sub-chains does not carry all their steps in one
history, and each shows in Temporal's UI on its own.

The sub-chain is still part of the run: its steps keep their paths under the calling step
(`4/1`), count against the run's `max_steps` and model budget, and may attach the run to
a thread. The hooks in force (the project's, its callers' and its own) fire on its steps:
the child compiles them again from its lineage (the chains that called it, with their
inputs), as the walker merges them. The child is given the caller's depth, allow lists,
counters and facts, and gives back what it used. Its records stay in its own workflow:
the parent records a marker (`{"child": ID}`) where they belong, and the submitter reads
the child's records there (chainlang.engine.temporal.submit).

The chain `agent.chain` writes runs as a child workflow too (`run_written`): the model is
asked in the caller's workflow, and the child checks and compiles the chain again from its
text. What stays in the caller's workflow: a sub-chain called from a hook's action. Post-
hook actions fired by a child's steps run in the child, which waits for them before it ends.
"""

from __future__ import annotations

import asyncio
import functools
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from temporalio import workflow
from temporalio.exceptions import CancelledError as TemporalCancelled
from temporalio.exceptions import ChildWorkflowError

from chainlang.engine.temporal.workflow import (ActivityExecutor, ActivityThreadRecorder, Recording, WorkflowClock,
                                                exposures_of, worker_chain, worker_decider)

if TYPE_CHECKING:
    from chainlang.runtime.events import EventRuntime
    from chainlang.runtime.threads import ThreadLink
    from chainlang.runtime.walk import ChainRun

__all__ = ["SUBCHAIN_WORKFLOW", "Children", "SubchainWorkflow", "as_child", "run_child", "run_written"]

SUBCHAIN_WORKFLOW = "chainlang.subchain"
CHILDREN_PATCH = "chainlang.subchain-children"


@dataclass
class Children:
    """What a workflow gives the workflows of its sub-chains: the top chain (path, digest) and
    its inputs, the lineage (the sub-chains from the top to this workflow's chain: target,
    caller file, inputs), the pinned clock, where the parent marks a child's records, the
    run's thread link, and the workflow's own chain (`root`: only its steps call children)."""

    path: str
    digest: str
    inputs: dict[str, Any]
    lineage: list[dict[str, Any]]
    now: str | None
    mark: Callable[[str], None]
    link: "ThreadLink | None"
    root: "ChainRun | None" = None
    transcript: str | None = None  # the run's, named by the rows of its waits (chainlang.engine.temporal.waits)


def as_child(children: Children, caller: "ChainRun", rt: "EventRuntime") -> bool:
    """Whether this sub-chain step runs as a child workflow (see the module's text). A run
    started before sub-chains became child workflows replays as it ran: in its workflow
    (Temporal's patch marker, recorded in the history of the runs started since)."""
    return rt.spec.name != "agent.chain" and _may_start(children, caller)


def _may_start(children: Children, caller: "ChainRun") -> bool:
    """Whether `caller` starts children: the workflow's own chain (not a hook's action), in a
    run started since sub-chains became child workflows."""
    return caller is children.root and caller.run.actions is not None and workflow.patched(CHILDREN_PATCH)


def _relative(file: str, root: Path | None) -> str:
    """The caller's file as the workers' copies share it: relative to the project."""
    if root is None:
        return file
    try:
        return Path(file).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return file


async def run_child(caller: "ChainRun", children: Children, rt: "EventRuntime", params: dict[str, Any],
                    ipath: str, attempt: int) -> Any:
    """Run the sub-chain of this step as a child workflow; its outputs are the step's result."""
    from chainlang.runtime.invoke import subchain_call, subchain_result

    target, graph, inputs = subchain_call(caller, rt, params, ipath)
    level = {"target": target, "caller": _relative(caller.graph.file, caller.run.project), "inputs": inputs}
    out = await _child(caller, children, level, ipath, attempt, {}, f"{ipath} {graph.name or target}")
    return subchain_result(graph.name or target, out["status"], out["outputs"], out["error"])


async def run_written(children: Children, caller: "ChainRun", text: str, name: str, prefix: str, ipath: str,
                      attempt: int) -> tuple[str, dict[str, Any] | None, Any] | None:
    """Run the chain `agent.chain` wrote (its document `text`, checked as the file `name`) as a
    child workflow: (status, error, the result of its last step); None when it runs in the
    caller's workflow instead (see the module's text)."""
    if not _may_start(children, caller):
        return None
    level = {"text": text, "name": _relative(name, caller.run.project), "inputs": {}}
    extra = {"prefix": prefix, "parallel": caller.default_parallel, "written": True}
    out = await _child(caller, children, level, ipath, attempt, extra, f"{ipath} the chain agent.chain wrote")
    return out["status"], out["error"], out.get("last")


async def _child(caller: "ChainRun", children: Children, level: dict[str, Any], ipath: str, attempt: int,
                 extra: dict[str, Any], summary: str) -> dict[str, Any]:
    """Start the child workflow of one more `level` below the caller, wait for its end, and
    take back what it used (steps, budget, a thread it attached); raise what must stop the
    run (a limit, a hook action's halt) or fail the step."""
    from chainlang.runtime.outcomes import LimitExceeded

    run = caller.run
    budget = run.models.budget if run.models is not None else None
    job = {
        "run_id": run.run_id, "path": children.path, "digest": children.digest, "now": children.now,
        "top_inputs": children.inputs, "lineage": [*children.lineage, level], "ipath": ipath,
        "depth": caller.depth + 1, "depth_limit": caller.depth_limit, "allow": [list(g) for g in caller.allow],
        "steps": run.steps_run, "max_steps": run.max_steps, "facts": run.facts,
        "budget": None if budget is None else [budget.max_calls, budget.max_tokens, budget.calls,
                                               budget.tokens + budget.reserved],
        "exposed": sorted(exposures.of(ipath)) if (exposures := exposures_of(caller)) is not None else [],
        "transcript": children.transcript,
        **extra,
    }
    child_id = f"{run.run_id}/{ipath}@{attempt}"
    try:
        handle = await workflow.start_child_workflow(
            SUBCHAIN_WORKFLOW, json.dumps(job, ensure_ascii=False), id=child_id, static_summary=summary)
        children.mark(child_id)  # once it exists: the submitter reads its records from here
        out: dict[str, Any] = json.loads(await handle)
    except ChildWorkflowError as exc:
        if isinstance(exc.cause, TemporalCancelled):
            raise asyncio.CancelledError() from None
        raise ValueError(f"the workflow {child_id} of the sub-chain failed: {exc.cause or exc}") from None
    run.steps_run += out.get("steps", job["steps"]) - job["steps"]
    if budget is not None:
        calls, tokens = out.get("used") or (0, 0)
        budget.calls += calls
        budget.tokens += tokens
    thread = out.get("thread")
    if thread and children.link is not None and children.link.thread is None:  # a thread.match in the sub-chain
        children.link.thread = thread
        run.facts["thread"] = thread
    if out.get("limit"):
        raise LimitExceeded(*out["limit"])
    if out.get("halt") is not None:  # a hook's action in the sub-chain stops the whole run
        assert run.actions is not None
        run.actions.halt(out["halt"])
        raise asyncio.CancelledError()
    if out["status"] == "invalid":
        raise ValueError(out["error"]["message"])
    return out


@workflow.defn(name=SUBCHAIN_WORKFLOW, sandboxed=False)
class SubchainWorkflow(Recording):
    """One sub-chain of a run. Input: the job `run_child` makes."""

    @workflow.run
    async def run(self, text: str) -> str:
        """Run the sub-chain; returns how it ended and what it used, as JSON text."""
        return json.dumps(await _run_subchain(self, json.loads(text)), ensure_ascii=False)


async def _run_subchain(recording: Recording, job: dict[str, Any]) -> dict[str, Any]:
    """The sub-chain's steps under the run's counters; what it used goes back to the parent."""
    from chainlang.engine.temporal.threadrefs import Snapshot
    from chainlang.runtime.host import RunHost, RunSpec, drive, open_run
    from chainlang.runtime.outcomes import TIMER, ChainLoadError
    from chainlang.runtime.secret_guard import Exposures
    from chainlang.runtime.walk import ChainRun

    def invalid(message: str) -> dict[str, Any]:
        return {"status": "invalid", "outputs": {}, "error": {"type": "worker", "message": message}}

    prepared = worker_chain(job["path"], job["digest"])
    if isinstance(prepared, str):
        return invalid(prepared)
    assert prepared.graph is not None
    levels = [(prepared.graph, job["top_inputs"])]
    for level in job["lineage"]:
        if "text" in level:  # a chain agent.chain wrote: checked and compiled again from its text
            written, problems = prepared.loader.from_text(str(prepared.root / level["name"]), level["text"])
            if written is None:
                return invalid(f"the chain agent.chain wrote does not check on the worker: {'; '.join(problems[:3])}")
            levels.append((written, level["inputs"]))
            continue
        try:
            levels.append((prepared.loader(level["target"], str(prepared.root / level["caller"])), level["inputs"]))
        except ChainLoadError as exc:
            return invalid(f"the worker cannot load the sub-chain {level['target']}: {exc}")
    graph, inputs = levels.pop()
    TIMER.set(workflow.time)
    snapshot = Snapshot()  # {thread.ID.KEY}: read by activities, before the steps and after each
    max_calls, max_tokens, calls, tokens = job["budget"] or (None, None, 0, 0)
    # the sub-chain runs under its run's counters: its facts, steps so far and budget, given by the parent
    spec = RunSpec(job["run_id"], graph, inputs, {}, prepared.root, prepared.registry, prepared.loader,
                   facts=dict(job["facts"]), steps_run=job["steps"], max_steps=job["max_steps"],
                   budget=(max_calls, max_tokens, calls, tokens))
    host = RunHost(record=recording.record, clock=WorkflowClock(datetime.fromisoformat(job["now"]) if job.get("now")
                                                                 else None),
                   decider=worker_decider(), notify=recording.note, recorder=ActivityThreadRecorder, record_thread=True,
                   references=snapshot, waiter=recording.waiter(job),
                   # called once the run is open (`children` needs its thread link)
                   executor=lambda chain: ActivityExecutor(chain, job.get("now"), children))
    run = open_run(spec, host)
    state = run.state
    children = Children(job["path"], job["digest"], job["top_inputs"], job["lineage"], job.get("now"),
                        recording.mark, run.link, transcript=job.get("transcript"))
    for interceptor in state.interceptors:  # what the calling steps expose covers the sub-chain's steps (§16)
        if isinstance(interceptor, Exposures) and job.get("exposed"):
            interceptor.exposed_at[job["ipath"]] = tuple(job["exposed"])
    state.run_written = functools.partial(run_written, children)
    hooks, hook_inputs = None, {}  # the callers' hooks, merged as the walker merges them
    for caller, given in levels:
        if caller.hook_set:
            hooks = state.merged_hooks(hooks, caller.hook_set)
            hook_inputs.update({id(hook.bindings): given for hook in caller.hook_set.hooks})
    sub = children.root = ChainRun(
        state, graph, inputs, depth=job["depth"], prefix=job.get("prefix") or job["ipath"] + "/",
        allow=tuple(tuple(group) for group in job["allow"]), depth_limit=job["depth_limit"], hooks=hooks,
        hook_inputs=hook_inputs)
    if job.get("parallel"):  # a chain agent.chain wrote runs no wider than its caller
        sub.default_parallel = min(sub.default_parallel, job["parallel"])

    def used() -> dict[str, Any]:
        budget = state.models.budget if state.models is not None else None
        return {"steps": state.steps_run, "thread": run.link.thread,
                "used": [budget.calls - calls, budget.tokens - tokens] if budget is not None else [0, 0]}

    async def body() -> tuple[str, dict[str, Any], dict[str, Any] | None]:
        await snapshot.ahead([caller for caller, _ in levels] + [graph])
        return await sub.execute()

    end = await drive(run, body, record=False)
    if end.status == "limit" and end.error is not None and end.error.get("type") == "limit":
        return {**used(), "limit": [end.error["limit"], end.error["message"]]}
    if isinstance(run.actions.stop, dict):
        return {**used(), "halt": run.actions.stop}
    ended = {**used(), "status": end.status, "outputs": end.outputs, "error": end.error,
             "records": len(recording.records)}
    if job.get("written"):
        from chainlang.runtime.agent_chain import last_result

        ended["last"] = last_result(sub)
    return ended

