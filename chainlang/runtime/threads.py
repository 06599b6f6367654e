"""A run and the project's threads (LANGUAGE.md §13): which thread a run is attached to,
recording its steps' results there, and reading `{thread.ID.KEY}` references.

- **Attaching.** A run is attached when it starts by `chainlang run --thread ID` or by an
  input named `thread_id` (both given: they must agree); the thread must exist and be
  active (else a usage error). The attachment is the `thread` member of `run_started`,
  so a resume is attached again. A run not attached from the start becomes attached when
  a `thread.match` step ends ok with `action` `continue` or `new`: to that thread, from
  that step on (the step included). Nothing more is recorded for it: a resume replays the
  `thread.match` step and attaches again the same way.
- **Recording.** Every event step of an attached run that ends ok (in the chain, its
  sub-chains and hook actions), except `thread.summarize`, adds its result to the thread
  (`Store.add_event`: masked, once per run and step path, so a resumed run records
  nothing twice), once its `step_finished` is in the transcript: `ThreadRecorder`, an
  interceptor, given to the runs that are attached or may become so (`may_attach`). A step with an `id` is recorded with the id as its key: a *named value*.
  When the thread cannot take it (the store is gone), the run fails at that step.
- **Reading.** `{thread.ID.KEY}` (`ThreadLink.read`): KEY is `summary`, `status`,
  `created_at` or `updated_at`; else the longest dotted name that is an event recorded in
  the thread (its latest result, then a path into it: `{thread.t1.memory.search.matches}`);
  else a named value (the latest result of a step with that id in a run attached to the
  thread). A thread that does not exist, or a KEY it has no value for, fails the step,
  naming the thread and the keys it has. The thread's id is a name segment, or a quoted
  one for ids that are not names: `{thread['thread-0f3a2b4c5d6e'].summary}`.

The run's `ThreadLink` is found by references through a context variable (`CURRENT`), set
for the run by the runner: the accessors of a chain are made once, without the run.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol

from chainlang.expr.ast import Computed, Index, Key, Name, unparse
from chainlang.expr.errors import ExprEvalError
from chainlang.expr.values import walk_path
from chainlang.errors import UsageError
from chainlang.runtime.interceptors import PassThrough, StepInfo

if TYPE_CHECKING:
    from chainlang.compile import ExecutionGraph, GraphNode
    from chainlang.runtime.context import Clock
    from chainlang.store import Store

__all__ = ["CURRENT", "FIELDS", "NOT_RECORDED", "ThreadLink", "ThreadRecorder", "attachment", "may_attach", "reference"]

FIELDS = ("summary", "status", "created_at", "updated_at")  # what {thread.ID.KEY} reads of the thread itself
NOT_RECORDED = frozenset({"thread.summarize"})  # its result is the thread's own summary
ATTACHING = ("continue", "new")  # the thread.match actions that attach a run that is not attached
SHOWN = 5  # the active threads an error names

class ThreadReader(Protocol):
    """What `{thread.ID.KEY}` reads through: the run's ThreadLink (the store), or on Temporal
    the values read ahead by activities (chainlang.engine.temporal.threadrefs.Snapshot)."""

    def read(self, thread_id: str, rest: tuple[Any, ...], shown: str) -> Any: ...


CURRENT: ContextVar["ThreadReader | None"] = ContextVar("chainlang_thread_link", default=None)

# `thread[EXPR].KEY` on Temporal: the id is known only when EXPR is evaluated, and a workflow
# reads the store only by an activity (async), while expressions are evaluated synchronously.
# Where the walker can wait (`reading`), a reference the run's reader does not hold raises
# ReadAhead; `reading` has the reader fetch it and evaluates again. Elsewhere it is an error.
READ_AHEAD: ContextVar[bool] = ContextVar("chainlang_thread_read_ahead", default=False)
MAX_READS_AHEAD = 16  # fetches for one evaluation: each one adds a reference, so this bounds it


class ReadAhead(Exception):
    """A thread reference the run's reader must fetch before the expression can be evaluated."""

    def __init__(self, thread_id: str, rest: tuple[Any, ...]) -> None:
        super().__init__(thread_id)
        self.thread_id = thread_id
        self.rest = rest


def reads_ahead() -> bool:
    """Whether the run's reader fetches thread references before an expression is evaluated
    (Temporal); when not, `evaluate(*args)` may be called directly, without `reading`'s
    coroutine: the step pipeline's fast path."""
    return getattr(CURRENT.get(), "fetch", None) is not None


async def reading(evaluate: Callable[..., Any], *args: Any) -> Any:
    """`evaluate(*args)`, fetching the thread references it needs first when the run's
    reader reads ahead (Temporal: by an activity, so a replay gets the same values). On
    the embedded engine the reader reads the store at once: this is `evaluate(*args)`."""
    reader = CURRENT.get()
    fetch = getattr(reader, "fetch", None)
    if fetch is None:
        return evaluate(*args)
    token = READ_AHEAD.set(True)
    try:
        for _ in range(MAX_READS_AHEAD):
            try:
                return evaluate(*args)
            except ReadAhead as need:
                await fetch(need.thread_id, need.rest)
    finally:
        READ_AHEAD.reset(token)
    return evaluate(*args)  # a reference still missing is an error now


class ThreadLink:
    """One run's link to the project's threads: the thread it is attached to (None: not
    attached), and the store, opened when first needed."""

    def __init__(self, root: Path, run_id: str, thread: str | None, clock: "Clock",
                 graphs: Callable[[], Iterable["ExecutionGraph"]] = tuple) -> None:
        self.root = root
        self.run_id = run_id
        self.thread = thread
        self.facts: dict[str, Any] | None = None  # the run's facts: `thread` follows an attach
        self.clock = clock
        self.ids = StepIds(graphs)
        self._store: "Store | None" = None

    def store(self, create: bool) -> "Store | None":
        """The project's store; None when it does not exist and `create` is false."""
        if self._store is None:
            from chainlang.tasks.stored import project_store, store_exists

            if not create and not store_exists(self.root):
                return None
            self._store = project_store(self.root)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    # -- {thread.ID.KEY}

    def read(self, thread_id: str, rest: tuple[Any, ...], shown: str) -> Any:
        """The value of `{thread.ID.KEY...}` (`rest`: the segments after the id); raises
        ValueError with the message for a thread or a KEY that is not there."""
        from chainlang.store import StoreError

        try:
            store = self.store(create=False)
            thread = store.get_thread(thread_id) if store is not None else None
            if store is None or thread is None:
                raise ValueError(f"{shown}: {unknown_thread(thread_id, store)}")
            names = _names(rest)
            if names and names[0] in FIELDS:
                return walk_path(getattr(thread, names[0]), rest[1:])
            events, keys = store.thread_keys(thread_id)
            for k in range(len(names), 1, -1):  # the longest dotted name of an event it recorded
                event = ".".join(names[:k])
                if event in events:
                    found = store.latest(thread_id, event)
                    return _tail(found.result if found else None, rest[k:])
            if names and names[0] in keys:
                found = store.latest(thread_id, key=names[0])
                return _tail(found.result if found else None, rest[1:])
            if names and names[0] in events:  # an event of one word (a named chain)
                found = store.latest(thread_id, names[0])
                return _tail(found.result if found else None, rest[1:])
        except StoreError as exc:
            raise ValueError(f"{shown}: {exc}") from None
        has = ", ".join(FIELDS)
        if events:
            has += "; its events " + ", ".join(events)
        if keys:
            has += "; its named values " + ", ".join(keys)
        what = f"no value for {'.'.join(names)!r}" if names else "no key given"
        raise ValueError(f"{shown}: the thread {thread_id!r} has {what}; it has {has}")


def unknown_thread(thread_id: str, store: "Store | None") -> str:
    """Why a thread id names no thread: the active threads (a few), and how to make one."""
    import difflib

    every = store.list_threads() if store is not None else []
    threads = [t for t in every if t.status == "active"]
    message = f"no thread {thread_id!r} in the project's store"
    close = difflib.get_close_matches(thread_id, [t.id for t in every], n=1, cutoff=0.6)
    if close:
        message += f" (did you mean {close[0]!r}?)"
    if threads:
        names = ", ".join(t.id for t in threads[:SHOWN])
        more = f" and {len(threads) - SHOWN} more (chainlang threads)" if len(threads) > SHOWN else ""
        message += f"; the active threads are: {names}{more}"
    else:
        message += "; there are no active threads"
    return message + f"; create it with: chainlang threads create {_quoted(thread_id)}"


def _quoted(text: str) -> str:
    import shlex

    return shlex.quote(text)


def _names(rest: tuple[Any, ...]) -> list[str]:
    names: list[str] = []
    for seg in rest:
        if type(seg) is not Name:
            break
        names.append(seg.name)
    return names


def _tail(result: Any, rest: tuple[Any, ...]) -> Any:
    """A path into a recorded result; a leading `.result` is the result itself (as §3's)."""
    if rest and type(rest[0]) is Name and rest[0].name == "result":
        rest = rest[1:]
    return walk_path(result, rest) if rest else result


def shown_of(path: tuple[Any, ...]) -> str:
    """A `{thread.ID.KEY}` reference as messages show it (`path`: the segments after `thread`)."""
    return "thread" + "".join(f".{s.name}" if type(s) is Name else f"[{s.value}]" if type(s) is Index
                              else f"[{unparse(s.expr)}]" if type(s) is Computed else f"[{s.value!r}]"
                              for s in path)


def reference(path: tuple[Any, ...], start: int, end: int) -> Callable[[Any], Any]:
    """The accessor of a `{thread.ID.KEY}` reference (`path`: the segments after `thread`).
    `thread[EXPR].KEY` computes the id when it is read: EXPR must give a string."""
    first = path[0] if path else None
    computed = first if type(first) is Computed else None
    fixed_id = first.name if type(first) is Name else first.value if type(first) is Key else None
    shown = shown_of(path)

    rest_computed = any(type(s) is Computed for s in path[1:])
    fixed = computed is None and not rest_computed

    def read(scope: Any) -> Any:
        thread_id = fixed_id if computed is None else _computed_id(computed, scope, shown)
        rest = path[1:] if not rest_computed else _literal_path(path[1:], scope)
        if rest is None:  # a computed index gave null: so does the reference
            return None
        if thread_id is None:
            raise ExprEvalError("reference", f"{shown}: name a thread and a key: thread.ID.KEY (KEY: "
                                f"{', '.join(FIELDS)}, an event or a named value)", start, end)
        link = CURRENT.get()
        if link is None:
            raise ExprEvalError("reference", f"{shown}: thread references need the project's store: run the chain "
                                "with chainlang run", start, end)
        try:  # a computed id or index is shown as it was worked out (the same on a Temporal worker)
            return link.read(thread_id, rest, shown if fixed else shown_of((Key(thread_id), *rest)))
        except ValueError as exc:
            raise ExprEvalError("reference", str(exc), start, end) from None
    return read


def _literal_path(path: tuple[Any, ...], scope: Any) -> tuple[Any, ...] | None:
    """The path after the thread id with its computed indexes evaluated (`[i]` becomes
    `[2]` or `['key']`): the store and the Temporal snapshot read literal paths only.
    None when an index is null."""
    from chainlang.expr.values import computed_index

    out: list[Any] = []
    for seg in path:
        if type(seg) is Computed:
            index = computed_index(seg, scope)
            if index is None:
                return None
            seg = Index(index, seg.start, seg.end) if isinstance(index, int) else Key(index, seg.start, seg.end)
        out.append(seg)
    return tuple(out)


def _computed_id(seg: Computed, scope: Any, shown: str) -> str:
    """The thread id `thread[EXPR]` names: EXPR's value, which must be a string."""
    from chainlang.expr.evaluate import evaluate

    value = evaluate(seg.expr, scope)
    if type(value) is not str or not value:
        from chainlang.expr.values import kind_of

        what = "an empty string" if value == "" else "null" if value is None else f"{kind_of(value)} {value!r}"[:80]
        if value is None and unparse(seg.expr) == "run.thread":
            what += " (the run is attached to no thread: run it with --thread ID or an input thread_id)"
        raise ExprEvalError("reference", f"{shown}: the thread id must be a non-empty string, got {what}",
                            seg.start, seg.end)
    return value


# -- attaching a run


def attachment(root: Path, given: str | None, inputs: dict[str, Any]) -> str | None:
    """The thread a run starts attached to (`--thread`, or the input `thread_id`), shown to
    exist and be active; raises UsageError."""
    from chainlang.store import StoreError

    by_input = inputs.get("thread_id")
    if by_input == "":  # the seed's `thread_id: {type: string, default: ""}`: no thread given
        by_input = None
    if by_input is not None and not isinstance(by_input, str):
        raise UsageError(f"the input thread_id attaches the run to a thread: give a thread id (text), not "
                         f"{type(by_input).__name__} {by_input!r}")
    if given is not None and by_input is not None and given != by_input:
        raise UsageError(f"--thread {given} and the input thread_id={by_input} name two threads; a run is "
                         "attached to one (give one of them, or the same id)")
    thread_id = given if given is not None else by_input
    if thread_id is None:
        return None
    where = f"--thread {thread_id}" if given is not None else f"the input thread_id={thread_id}"
    from chainlang.tasks.stored import project_store, store_exists

    try:
        if not store_exists(root):
            raise UsageError(f"{where}: {unknown_thread(thread_id, None)}")
        with project_store(root) as store:
            thread = store.get_thread(thread_id)
            if thread is None:
                raise UsageError(f"{where}: {unknown_thread(thread_id, store)}")
    except StoreError as exc:
        raise UsageError(f"{where}: {exc}") from None
    if thread.status != "active":
        raise UsageError(f"{where}: the thread {thread_id!r} is {thread.status}; attach the run to an active "
                         "thread (see chainlang threads)")
    return thread_id


# -- recording


CALLS_CHAINS = frozenset({"chain.run", "agent.chain"})  # the events that run chains of their own


def _event_names(graph: "ExecutionGraph") -> frozenset[str]:
    """The events the steps of `graph` and of its hooks' actions call."""
    names: set[str] = set()

    def walk(nodes: Iterable["GraphNode"]) -> None:
        for node in nodes:
            if node.event:
                names.add(node.event)
            walk(node.children)
            walk(node.else_)

    walk(graph.nodes)
    for hook in graph.hook_set.hooks if graph.hook_set is not None else ():
        if hook.action is not None:
            walk(hook.action.nodes)
    return frozenset(names)


# by id() of the graph; each entry keeps its graph alive, so the id stays its own (bounded)
_EVENT_NAMES: dict[int, tuple["ExecutionGraph", frozenset[str]]] = {}


def may_attach(graph: "ExecutionGraph", registry: Any) -> bool:
    """Whether a run of `graph` that is not attached when it starts may become attached: a
    `thread.match` step may run in it (in the chain, a hook's action, or a chain it calls).
    A run that can do neither gets no ThreadRecorder: its steps pay nothing for threads."""
    entry = _EVENT_NAMES.get(id(graph))
    if entry is None or entry[0] is not graph:  # once per compiled chain, not per run: a walk of every node
        if len(_EVENT_NAMES) > 1024:
            _EVENT_NAMES.clear()
        entry = _EVENT_NAMES[id(graph)] = (graph, _event_names(graph))
    names = entry[1]
    if "thread.match" in names or names & CALLS_CHAINS:
        return True
    return any(getattr(registry.get(name), "kind", None) == "chain" for name in names)


class ThreadRecorder(PassThrough):
    """Adds the result of every step that ends ok in an attached run to its thread, and
    attaches a run that is not attached on a `thread.match` that continues or starts one."""

    def __init__(self, link: ThreadLink) -> None:
        self.link = link

    async def after(self, step: StepInfo, params: dict[str, Any], result: Any) -> None:
        link = self.link
        if link.thread is None:
            if step.event != "thread.match" or not _attaches(result):
                return
            link.thread = result["thread_id"]
            if link.facts is not None:  # {run.thread} from here on
                link.facts["thread"] = link.thread
        if step.event in NOT_RECORDED:
            return
        await self.add(step, result)

    async def add(self, step: StepInfo, result: Any) -> None:
        """Add the result to the thread (on Temporal: an activity, chainlang.engine.temporal)."""
        record(self.link, step, result)


def _attaches(result: Any) -> bool:
    return (isinstance(result, dict) and result.get("action") in ATTACHING
            and isinstance(result.get("thread_id"), str) and bool(result["thread_id"]))


def record(link: ThreadLink, step: StepInfo, result: Any) -> None:
    """One step's result into the link's thread (once per run and step path)."""
    from chainlang.runtime.outcomes import StepFailed, error_of
    from chainlang.store import StoreError

    assert link.thread is not None
    try:
        store = link.store(create=True)
        assert store is not None
        store.add_event(link.thread, step.event, result, link.run_id, step.path, key=link.ids.of(step),
                        at=link.clock.now())
    except StoreError as exc:
        raise StepFailed(step.path, step.event, error_of(
            "thread", f"{step.event} ended ok, but its result could not be added to the thread "
                      f"{link.thread!r}: {exc}")) from None


# -- step ids


_ITERATION = re.compile(r"\[\d+\]|#\d+")  # a foreach item (3[0].1) or a repeat's pass (3#2.1)


class StepIds:
    """The `id` of the step a StepInfo names: its `step_id` when the pipeline gave it, else
    found by its chain's file and step path in the graphs the run has compiled.

    A path is `4/3[0].1`: the calling steps of sub-chains before the last `/`, and
    foreach iterations in brackets; a hook's action adds `hook:KEY/`, its static paths
    starting with the hook's `strip` (`hook:ID.`)."""

    def __init__(self, graphs: Callable[[], Iterable["ExecutionGraph"]]) -> None:
        self.graphs = graphs
        self.seen: set[int] = set()
        self.ids: dict[tuple[str, str], str] = {}
        self.strips: dict[str, str] = {}

    def of(self, step: StepInfo) -> str | None:
        if step.step_id is not None:
            return step.step_id
        head, _, last = step.path.rpartition("/")
        static = _ITERATION.sub("", last)
        parent = head.rpartition("/")[2]
        if parent.startswith("hook:"):
            strip = self.strips.get(parent[len("hook:"):])
            if strip is None:
                self.learn()
                strip = self.strips.get(parent[len("hook:"):])
            if strip is None:
                return None  # a stored hook's action: not among the run's graphs
            static = strip + static
        key = (step.file, static)
        if key not in self.ids:
            self.learn()
        return self.ids.get(key)

    def learn(self) -> None:
        for graph in self.graphs():
            if id(graph) in self.seen:
                continue
            self.seen.add(id(graph))
            self._walk(graph.file, graph.nodes)
            hooks = graph.hook_set.hooks if graph.hook_set is not None else ()
            for hook in hooks:
                self.strips.setdefault(hook.key, hook.strip)
                if hook.action is not None:
                    self._walk(hook.action.file, hook.action.nodes)

    def _walk(self, file: str, nodes: Iterable["GraphNode"]) -> None:
        for node in nodes:
            if node.id is not None:
                self.ids[(file, node.path)] = node.id
            self._walk(file, node.children)
            self._walk(file, node.else_)
