"""`{thread.ID.KEY}` references on Temporal (LANGUAGE.md §13, §14).

On the embedded engine a reference reads the project's store while its expression is
evaluated. In a workflow a read must give the same value on every replay, so the store is
read by activities and the values are kept in the workflow (its history has them):

- before a chain's steps run, the references of that chain (its steps, outputs and hooks,
  hook actions included) are read by the `chainlang.thread_reads` activity: at the start of
  a run, of a sub-chain's workflow and of an emit, and when a chain is loaded during the run;
- a reference with a computed id (`thread[inputs.thread_id].summary`) is known only when its
  expression is evaluated: where the walker can wait (a step's params, an `if`, a `foreach`,
  the outputs), the snapshot misses, `chainlang.runtime.threads.reading` has it fetched by
  the same activity, and the expression is evaluated again; from then on it is read with the
  others, the most recent `COMPUTED_KEPT` of them (an older one is fetched again if needed,
  so a loop over many ids does not make every later activity read them all);
- every tool and thread activity reads them all again after it ran, so a reference sees
  what the steps before it wrote (a `memory.append`, a step recorded into the thread).

A reference therefore reads the thread as of the end of the last step that finished
before it, where the embedded engine reads it at that very moment: the two differ only
for a write by another process in between. The `Snapshot` stands in for the run's
ThreadLink in `chainlang.runtime.threads.CURRENT`; a miss (a chain whose references were
not read ahead) fails the step with a message, never reads the store in the workflow.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from chainlang.engine.temporal.messages import ThreadRead, ThreadReads, ThreadRefs, received, to_json
from chainlang.expr.ast import Index, Key, Name
from chainlang.runtime.threads import READ_AHEAD, ReadAhead

if TYPE_CHECKING:
    from pathlib import Path

    from chainlang.compile import ExecutionGraph

__all__ = ["READS_ACTIVITY", "Snapshot", "keys_of", "read_on_worker"]

READS_ACTIVITY = "chainlang.thread_reads"
COMPUTED_KEPT = 32  # references with a computed id read again after each activity (the most recent)


def _encode(segments: Iterable[Any]) -> list[list[Any]]:
    out: list[list[Any]] = []
    for seg in segments:
        if type(seg) is Name:
            out.append(["n", seg.name])
        elif type(seg) is Key:
            out.append(["k", seg.value])
        elif type(seg) is Index:
            out.append(["i", seg.value])
    return out


def _decode(segments: list[list[Any]]) -> tuple[Any, ...]:
    kinds = {"n": Name, "k": Key, "i": Index}
    return tuple(kinds[kind](value) for kind, value in segments)


def shown_of_key(thread_id: str, rest: tuple[Any, ...]) -> str:
    from chainlang.runtime.threads import shown_of

    return shown_of((Key(thread_id), *rest))


def key_of(thread_id: str, rest: Iterable[Any]) -> str:
    """The snapshot's key of one reference: the thread and the path after it."""
    return json.dumps([thread_id, _encode(rest)], ensure_ascii=False)


def _holders(graph: "ExecutionGraph") -> Iterator[Any]:
    """What holds bindings in a chain: the graph, its hooks, their actions (and theirs)."""
    yield graph
    hook_set = graph.hook_set
    for hook in hook_set.hooks if hook_set is not None else ():
        yield hook
        if hook.action is not None:
            yield from _holders(hook.action)


def keys_of(graphs: Iterable[Any]) -> dict[str, list[Any]]:
    """The thread references of `graphs` (ExecutionGraphs, or a HookSet's hooks): key →
    [thread id, the reference's encoded path, thread id first]. A reference naming no thread is left out (it fails
    on its own, as on the embedded engine)."""
    found: dict[str, list[Any]] = {}
    for graph in graphs:
        for holder in _holders(graph) if hasattr(graph, "nodes") else (graph,):
            bindings = getattr(holder, "bindings", None)
            for binding in bindings.refs.values() if bindings is not None else ():
                if binding.kind != "thread" or not binding.path:
                    continue
                first = binding.path[0]
                thread_id = first.name if type(first) is Name else first.value if type(first) is Key else None
                if thread_id is None:
                    continue
                found[key_of(thread_id, binding.path[1:])] = [thread_id, _encode(binding.path)]
    return found


def read_on_worker(root: "Path", refs: ThreadRefs) -> dict[str, ThreadRead]:
    """Read each reference from the worker's store: its value, or the error the embedded
    engine gives for it."""
    from chainlang.runtime.context import SystemClock
    from chainlang.runtime.threads import ThreadLink, shown_of

    link = ThreadLink(root, "", None, SystemClock())
    out: dict[str, ThreadRead] = {}
    try:
        for key, (thread_id, encoded) in refs.items():
            path = _decode(encoded)
            try:
                out[key] = ThreadRead(value_json=to_json(link.read(thread_id, path[1:], shown_of(path))))
            except ValueError as exc:
                out[key] = ThreadRead(error=str(exc))
    finally:
        link.close()
    return out


class Snapshot:
    """The thread references' values in a workflow (see the module's text): what
    `chainlang.runtime.threads.CURRENT` holds there instead of a ThreadLink."""

    def __init__(self) -> None:
        self.keys: dict[str, list[Any]] = {}
        self.values: dict[str, dict[str, Any]] = {}
        self.computed: list[str] = []  # keys fetched for computed ids, oldest first

    def read(self, thread_id: str, rest: tuple[Any, ...], shown: str) -> Any:
        entry = self.values.get(key_of(thread_id, rest))
        if entry is None and READ_AHEAD.get():  # a computed id (thread[EXPR].KEY): fetched, then again
            raise ReadAhead(thread_id, rest)
        if entry is None:
            raise ValueError(f"{shown}: this reference was not read ahead on the Temporal engine (a thread id "
                             "computed in a hook's condition or set, or a chain loaded in a way chainlang does not "
                             "follow yet); read it in a step's params, or read the thread with a step "
                             "(thread.summarize, memory.search)")
        if "error" in entry:
            raise ValueError(str(entry["error"]))
        return entry.get("value")

    def update(self, values: dict[str, ThreadRead] | None) -> None:
        """The values an activity read (after its tool ran)."""
        for key, read in (values or {}).items():
            self.values[key] = {"error": read.error} if read.error is not None else {"value": json.loads(read.value_json)}

    def wanted(self) -> ThreadRefs | None:
        """What a tool or thread activity reads again after it ran (None: nothing)."""
        return self.keys or None

    async def fetch(self, thread_id: str, rest: tuple[Any, ...]) -> None:
        """Read one reference known only now (`thread[EXPR].KEY`), with every other one; it is
        read again after each later activity, as the static ones are."""
        key = key_of(thread_id, rest)
        if key in self.keys:  # asked and read already: whatever it gave is the answer
            self.values.setdefault(key, {"error": f"{shown_of_key(thread_id, rest)}: not read"})
            return
        self.keys[key] = [thread_id, _encode((Key(thread_id), *rest))]
        self.computed.append(key)
        while len(self.computed) > COMPUTED_KEPT:  # bounded: the oldest is fetched again when needed
            old = self.computed.pop(0)
            self.keys.pop(old, None)
            self.values.pop(old, None)
        await self._read_all()

    async def ahead(self, graphs: Iterable[Any]) -> None:
        """Read the references of `graphs` not read yet (with every other one), by an activity."""
        found = keys_of(graphs)
        self.computed = [key for key in self.computed if key not in found]  # now static: kept for good
        new = {key: value for key, value in found.items() if key not in self.keys}
        if not new:
            return
        self.keys.update(new)
        await self._read_all()

    async def _read_all(self) -> None:
        from temporalio import workflow
        from temporalio.common import RetryPolicy

        out = await workflow.execute_activity(
            READS_ACTIVITY, ThreadReads(refs=dict(self.keys)), start_to_close_timeout=timedelta(minutes=1),
            retry_policy=RetryPolicy(maximum_attempts=5, initial_interval=timedelta(seconds=1)),
            summary=f"read {len(self.keys)} thread reference(s)", result_type=ThreadReads | str)  # type: ignore[arg-type]
        self.update(received(ThreadReads, out).values)
