"""The `thread` standard events backed by the project's store (LANGUAGE.md §13), in their
embedded tier: lexical, deterministic, no model.

`thread.match {message, thread_id?, threshold?, margin?, prefer?}` compares the message with
each active thread's *conversation*: its summary and the texts of its last `RECENT` events
that say what the user said (`user.input`), what the user was answered (`agent.reply`) and
what tools found. Words written by models for models (plans, chains, prompts, decisions:
`NOT_SAID`), the results of named chains (their steps are recorded one by one), the thread
events' own results and the clock's are left out: a thread is never matched on a word only
a prompt used. Words are compared as stems (`stems`: lower case, stop words and the words
of any request (`GENERIC`: check, show, remind ...) left out, common endings cut); each
thread is scored with BM25 (`lexical.bm25_scores`, the threads as the documents).

The current thread is kept unless another is clearly better. Another thread is suggested
only when it shares at least `threshold` (default 2) of the message's words (all of them,
for a message with fewer; one, for a message that goes back: "go back to my schedule"),
at least `margin` (default 1) words more than the current thread, and scores at least
`SWITCH_RATIO` (1.5) times as well.

- With a current `thread_id` (an unknown or archived one fails the step, naming the known
  threads):
  - another thread is clearly better: `suggest_switch` to the best of them (the reason
    names the words in common);
  - else the current one shares a word, or has no words yet (a thread just created), or
    the message has no words of its own ("ok, do it") or refers back ("this", "that",
    "it" ... `FOLLOW_UP`): `continue`;
  - else `suggest_new` (the reason says what the current thread is about).
- Without one: the best thread that has `threshold` words in common gets `suggest_switch`;
  none does: a new thread is created, its id derived from the step attempt's idempotency
  key (`thread-` and 12 hex digits), so a resumed step finds the thread it created: `new`.
- `prefer` is how a user declines a suggestion (the chain runs the turn again with it):
  `current` continues the current thread whatever matches elsewhere (without one: `new`),
  `new` starts a new thread; neither compares anything nor asks a model. `auto` (the
  default) decides as above.

The message is recorded (masked, `chainlang.redaction.mask_secrets`) as a `user.input` event
(`{text}`) of the thread it continues or creates, once per step (a resumed step does not
record it twice). A suggestion records nothing: the user decides.

`thread.summarize {thread_id}` summarizes the thread's conversation (the same events)
extractively (`lexical.summarize`, `SUMMARY_SENTENCES` sentences), stores the summary
(masked) with the run's clock as `updated_at`, and returns `{thread_id, summary, updated_at}`.

`thread.list` is in `thread_list.py`.
"""

from __future__ import annotations

import difflib
import hashlib
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from chainlang.stdlib.projectstore import memory_tier, open_store, project_of

from chainlang.redaction import mask_secrets
from chainlang.stdlib.lexical import STOPWORDS, bm25_scores, keywords, summarize as summarize_texts
from chainlang.stdlib.lexical import tokens
from chainlang.stdlib.thread_list import list_threads  # thread.list: a module of its own

if TYPE_CHECKING:
    from chainlang.runtime.context import RunContext
    from chainlang.store import Store
    from chainlang.store.threads import ThreadEvent, ThreadRecord

__all__ = ["FOLLOW_UP", "GENERIC", "MARGIN", "NOT_SAID", "RECENT", "SWITCH_RATIO", "THRESHOLD", "list_threads",
           "match", "said", "stem", "stems", "summarize", "thread_text"]

RECENT = 20  # the events of a thread that are compared with a message (its last ones that are said)
SWITCH_RATIO = 1.5  # another thread must score this many times the current one to be suggested
THRESHOLD = 2  # the words a suggested thread shares with the message, at least (the param's default)
MARGIN = 1  # the words it shares more than the current thread, at least (the param's default)
SUMMARY_SENTENCES = 3
MESSAGE_EVENT = "user.input"

# Events whose results are not the conversation: plans, chains and prompts written by models
# for models, decisions, the clock. (`thread.*` results and named chains' are left out too.)
NOT_SAID = frozenset({"agent.think", "agent.chain", "agent.decide", "model.ask", "chain.run",
                      "tools.now", "tools.date_calc"})

# Words of any request, which say nothing about its topic.
GENERIC = frozenset("""
actually add again ask back check could create does done find first give help later look maybe mind never
next note now okay remind see send set show start still sure tell wait well would let please thanks right
""".split())
# Words of a message that refers back to what was said before.
FOLLOW_UP = frozenset("this that it these those them there same".split())
# Word pairs of a message that goes back to an earlier topic ("go back to my schedule").
GOING_BACK = frozenset({("back", "to"), ("go", "back"), ("come", "back"), ("return", "to"), ("returning", "to")})

_ENDINGS = (("ies", "y"), ("ied", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""))


def stem(word: str) -> str:
    """A word cut to its stem, crudely: `replied`, `replies` -> `repli`; `emails` -> `email`."""
    word = word.lower().replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    for _ in range(2):
        for ending, instead in _ENDINGS:
            if word.endswith(ending) and len(word) - len(ending) >= 3 and not word.endswith("ss"):
                word = word[: -len(ending)] + instead
                break
        else:
            break
    if word.endswith("y") and len(word) > 3:
        word = word[:-1] + "i"
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def stems(text: str) -> dict[str, str]:
    """The topic words of `text` as {stem: the first word that gave it}, in order."""
    found: dict[str, str] = {}
    for word in tokens(text):
        if word in STOPWORDS or word in GENERIC or len(word) < 3 or word.isdigit():
            continue
        found.setdefault(stem(word), word)
    return found


def said(event: str, registry: Any = None) -> bool:
    """Whether an event's result is part of a thread's conversation: what the user said,
    was answered, or a tool found; not what models wrote for models (`NOT_SAID`), not the
    thread events' own results, not a named chain's outputs (its steps are recorded too)."""
    if event in NOT_SAID or event.startswith("thread."):
        return False
    spec = registry.get(event) if registry is not None else None
    return getattr(spec, "kind", None) != "chain"


def conversation(events: list["ThreadEvent"], registry: Any = None) -> list["ThreadEvent"]:
    """The events of a thread that are said (see `said`), in order. A step that ran a chain
    of its own is known by the registry (a named chain), or by its steps recorded under its
    path (`4/1` under `4`): the registry of a run knows only the chains it loaded."""
    callers = {(e.run_id, e.step[:i]) for e in events if e.step for i, c in enumerate(e.step) if c == "/"}
    return [e for e in events if said(e.event, registry) and (e.run_id, e.step) not in callers]


def thread_text(thread: "ThreadRecord", events: list["ThreadEvent"], registry: Any = None) -> str:
    """What a thread is about, as text: its summary and the texts of its conversation's results."""
    parts = [thread.summary] if thread.summary else []
    for item in conversation(events, registry):
        parts.extend(_texts(item.result))
    return "\n".join(parts)


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    return []


@dataclass(frozen=True)
class _Candidate:
    """A thread that may be the one a message belongs to, with its score."""
    thread: "ThreadRecord"
    score: float
    common: list[str]  # the message's words the thread has too
    empty: bool = False  # the thread has no words yet (just created)


@dataclass(frozen=True)
class Routing:
    """How clearly better another thread must be (`thread.match`'s params)."""

    threshold: int = THRESHOLD
    margin: int = MARGIN
    prefer: str = "auto"


async def match(ctx: "RunContext", message: str, thread_id: str | None = None, threshold: int = THRESHOLD,
                margin: int = MARGIN, prefer: str = "auto") -> dict[str, Any]:
    """Which thread the message belongs to (see the module's docstring): decided lexically, or by
    the model tier named by `[models] memory` in chainlang.toml among the ranked threads. The
    store is read and written in a worker thread: its waits never hold the run's event loop."""
    import asyncio

    routing = _routing(threshold, margin, prefer)
    text = mask_secrets(message)
    new_id = "thread-" + hashlib.sha256(ctx.idempotency_key.encode("utf-8")).hexdigest()[:12]
    root = project_of(ctx, "thread")

    def read() -> tuple["ThreadRecord | None", list[_Candidate]] | None:
        with open_store(root) as store, _store_errors():
            if _created_here(store, new_id, ctx):  # this very step created it before an interruption
                return None
            threads = store.list_threads()
            current = _current(threads, thread_id) if thread_id is not None else None
            if routing.prefer != "auto":  # the user chose: nothing to compare
                return current, []
            return current, _rank(store, [t for t in threads if t.status == "active"], message, ctx.registry)

    found = await asyncio.to_thread(read)
    if found is None:
        return {"action": "new", "thread_id": new_id}
    current, candidates = found
    tier = memory_tier(ctx)
    if routing.prefer != "auto":
        decision: dict[str, Any] = {"action": "continue", "thread_id": current.id} \
            if routing.prefer == "current" and current is not None else {"action": "new"}
    elif tier == "embedded":
        decision = _decide(candidates, current, message, routing)
    else:
        decision = await _model_match(ctx, tier, text, current, candidates)
    if decision["action"] not in ("new", "continue"):
        return decision
    moment = ctx.now()

    def write() -> None:
        with open_store(root) as store, _store_errors():
            if decision["action"] == "new":
                if store.get_thread(new_id) is not None:
                    raise ValueError(f"the thread id {new_id!r} derived from this step is taken by "
                                     "another thread; run the chain again")
                store.create_thread(new_id, at=moment)
                decision["thread_id"] = new_id
            store.add_event(decision["thread_id"], MESSAGE_EVENT, {"text": text}, ctx.run_id, ctx.step, at=moment)

    await asyncio.to_thread(write)
    return decision


def _routing(threshold: Any, margin: Any, prefer: Any) -> Routing:
    """The routing params, checked (the params schema says the same; a direct call is checked too)."""
    if type(threshold) is not int or threshold < 1:
        raise ValueError(f"thread.match: threshold must be a whole number of words, 1 or more, not {threshold!r}")
    if type(margin) is not int or margin < 0:
        raise ValueError(f"thread.match: margin must be a whole number of words, 0 or more, not {margin!r}")
    if prefer not in ("auto", "current", "new"):
        raise ValueError(f"thread.match: prefer must be auto, current or new, not {prefer!r}")
    return Routing(threshold, margin, prefer)


@contextmanager
def _store_errors() -> Iterator[None]:
    """A store's problem as the step's error (ValueError)."""
    from chainlang.store import StoreError

    try:
        yield
    except StoreError as exc:
        raise ValueError(f"{exc}") from None


def _created_here(store: "Store", thread_id: str, ctx: "RunContext") -> bool:
    if store.get_thread(thread_id) is None:
        return False
    first = store.thread_events(thread_id, limit=None)[:1]
    return bool(first) and first[0].run_id == ctx.run_id and first[0].step == ctx.step


def _current(threads: list["ThreadRecord"], thread_id: str) -> "ThreadRecord":
    for thread in threads:
        if thread.id == thread_id:
            if thread.status != "active":
                raise ValueError(f"the thread {thread_id!r} is {thread.status}; continue an active "
                                 "thread, or leave thread_id out to start a new one")
            return thread
    raise ValueError(f"{unknown_thread(thread_id, threads)}")


def unknown_thread(thread_id: str, threads: list["ThreadRecord"]) -> str:
    """The message for a thread id that is not in the store: the close one, the active ones."""
    active = [t.id for t in threads if t.status == "active"]
    message = f"no thread {thread_id!r} in the project's store"
    close = difflib.get_close_matches(thread_id, [t.id for t in threads], n=1, cutoff=0.6)
    if close:
        message += f" (did you mean {close[0]!r}?)"
    if active:
        shown = ", ".join(active[:10]) + (f" and {len(active) - 10} more" if len(active) > 10 else "")
        message += f"; the active threads are: {shown}"
    else:
        message += "; there are no active threads: leave thread_id out to start one"
    return message


EVENTS_READ = 4 * RECENT  # the last events read of a thread to find its last RECENT said ones


def _rank(store: "Store", threads: list["ThreadRecord"], message: str, registry: Any = None) -> list[_Candidate]:
    """The active threads scored against the message, the best first (ties: the most recent)."""
    wanted = stems(message)
    texts = [stems(thread_text(t, conversation(store.thread_events(t.id, limit=EVENTS_READ), registry)[-RECENT:]))
             for t in threads]
    if not threads or not wanted:
        return [_Candidate(t, 0.0, [], not words) for t, words in zip(threads, texts)]
    scores = bm25_scores(" ".join(wanted), [" ".join(t) for t in texts])
    found = []
    for thread, words, score in zip(threads, texts, scores):
        common = [wanted[s] for s in wanted if s in words]
        if common and score <= 0:  # a stem BM25 reads as a stop word: still a word in common
            score = 0.001 * len(common)
        found.append(_Candidate(thread, score if common else 0.0, common, not words))
    order = {t.id: i for i, t in enumerate(threads)}  # list_threads: the most recently updated first
    return sorted(found, key=lambda c: (-c.score, order[c.thread.id]))


def goes_back(message: str) -> bool:
    """Whether the message says it goes back to an earlier topic ("now back to that meeting")."""
    words = tokens(message)
    return bool(GOING_BACK & set(zip(words, words[1:]))) or "resume" in words


def _needed(message: str, routing: Routing) -> int:
    """The words a thread must share with the message to be suggested: `threshold`, all of a
    shorter message's, one for a message that goes back (the words it names are the thread's)."""
    return 1 if goes_back(message) else max(1, min(routing.threshold, len(stems(message))))


def _decide(candidates: list[_Candidate], current: "ThreadRecord | None", message: str,
            routing: Routing = Routing()) -> dict[str, Any]:
    others = [c for c in candidates if current is None or c.thread.id != current.id]
    needed = _needed(message, routing)
    if current is None:
        best = next((c for c in others if len(c.common) >= needed), None)
        if best is not None:
            return {"action": "suggest_switch", "thread_id": best.thread.id, "reason": _why(best)}
        return {"action": "new"}
    mine = next((c for c in candidates if c.thread.id == current.id), _Candidate(current, 0.0, [], True))
    best = next((c for c in others if len(c.common) >= needed and len(c.common) >= len(mine.common) + routing.margin
                 and c.score > 0 and c.score >= SWITCH_RATIO * mine.score), None)
    if best is not None:
        return {"action": "suggest_switch", "thread_id": best.thread.id, "reason": _why(best, mine)}
    if mine.common or mine.empty or not stems(message) or FOLLOW_UP & set(tokens(message)):
        return {"action": "continue", "thread_id": current.id}
    about = _about(current)
    close = next((c for c in others if c.common), None)  # shares too few words to be suggested
    rest = " nor with any other thread" if close is None else (
        f", and other threads share too few to be suggested (the thread {close.thread.id!r} shares "
        f"{', '.join(map(repr, close.common[:6]))})")
    return {"action": "suggest_new",
            "reason": f"the message has no words in common with the current thread {current.id!r}{about}{rest}"}


MODEL_CANDIDATES = 10  # threads the model chooses among: the best lexical matches
MATCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"action": {"enum": ["continue", "suggest_switch", "suggest_new", "new"]},
                   "thread_id": {"type": "string"}, "reason": {"type": "string", "maxLength": 500}},
    "required": ["action"],
    "additionalProperties": False,
}


async def _model_match(ctx: "RunContext", tier: str, message: str, current: "ThreadRecord | None",
                       candidates: list[_Candidate]) -> dict[str, Any]:
    """The tier's choice among the current thread and the best lexical candidates, checked:
    only listed ids, `continue` only with a current thread, `new` only without one."""
    from chainlang.llm.prompting import PromptError, messages
    from chainlang.llm.tiers import ModelRequest
    from chainlang.llm.answers import parse_answer

    others = [c for c in candidates if current is None or c.thread.id != current.id][:MODEL_CANDIDATES]
    listed = [{"thread_id": c.thread.id, "summary": c.thread.summary, "words_in_common": c.common[:8]}
              for c in others]
    shown: dict[str, Any] | None = None
    if current is not None:  # what the current thread shares too, and whether it was just created
        mine = next((c for c in candidates if c.thread.id == current.id), _Candidate(current, 0.0, [], True))
        shown = {"thread_id": current.id, "summary": current.summary, "words_in_common": mine.common[:8]}
        if mine.empty:
            shown["just_created"] = True
    try:
        asked = messages("match", {"message": message, "candidates": listed, "current": shown}, ctx.project)
    except PromptError as exc:
        raise ValueError(str(exc)) from None
    answer = await ctx.models.ask(tier, ModelRequest("match", asked, MATCH_SCHEMA, "thread_match",
                                                        last_input=message))
    who = f"the {tier} model"
    decision: dict[str, Any] = parse_answer(answer.text, MATCH_SCHEMA, who)
    action, chosen = decision["action"], decision.get("thread_id")
    ids = {c.thread.id for c in others}
    if action == "continue" and (current is None or chosen not in (None, current.id)):
        raise ValueError(f"{who} answered continue {'without a current thread' if current is None else f'with {chosen!r}, not the current thread'}")
    if action == "suggest_switch" and chosen not in ids:
        raise ValueError(f"{who} suggested switching to {chosen!r}, which is not one of the threads it was shown")
    if action == "new" and current is not None:
        raise ValueError(f"{who} answered new although the message has a current thread: suggest_new is for that")
    if action == "suggest_new" and current is None:
        raise ValueError(f"{who} answered suggest_new without a current thread: new is for that")
    out: dict[str, Any] = {"action": action}
    if action == "continue":
        assert current is not None
        out["thread_id"] = current.id
    elif action == "suggest_switch":
        out["thread_id"] = chosen
    if action != "continue" and decision.get("reason"):
        out["reason"] = mask_secrets(str(decision["reason"]))
    return out


def _why(best: _Candidate, mine: _Candidate | None = None) -> str:
    words = ", ".join(repr(w) for w in best.common[:6])
    reason = f"the thread {best.thread.id!r}{_about(best.thread)} shares the words {words} with the message"
    if mine is not None:
        if mine.common:
            reason += f"; the current thread {mine.thread.id!r} shares fewer: {', '.join(map(repr, mine.common[:6]))}"
        else:
            reason += f"; the current thread {mine.thread.id!r} shares none"
    return reason


def _about(thread: "ThreadRecord") -> str:
    if not thread.summary:
        return ""
    words = keywords(thread.summary, limit=4)
    return f" (about {', '.join(words)})" if words else ""


async def summarize(ctx: "RunContext", thread_id: str) -> dict[str, Any]:
    """Summarize a thread's events and store the summary: extractively, or with the model
    tier named by `[models] memory` in chainlang.toml (the store's I/O in a worker thread)."""
    import asyncio

    moment = ctx.now()
    tier = memory_tier(ctx)
    root = project_of(ctx, "thread")

    def read() -> tuple["ThreadRecord", list["ThreadEvent"]]:
        with open_store(root) as store, _store_errors():
            thread = store.get_thread(thread_id)
            if thread is None:
                raise ValueError(f"{unknown_thread(thread_id, store.list_threads())}")
            return thread, conversation(store.thread_events(thread_id), ctx.registry)

    thread, events = await asyncio.to_thread(read)
    if tier != "embedded" and events:
        summary = mask_secrets(await _model_summary(ctx, tier, thread, events))
    else:
        texts = [t for e in events for t in _texts(e.result)]
        summary = mask_secrets(summarize_texts(texts, sentences=SUMMARY_SENTENCES)) if texts else thread.summary

    def write() -> "ThreadRecord":
        with open_store(root) as store, _store_errors():
            return store.set_summary(thread_id, summary, at=moment)

    stored = await asyncio.to_thread(write)
    return {"thread_id": thread_id, "summary": stored.summary, "updated_at": moment.isoformat()}


MAX_SUMMARY_CHARS = 2000


async def _model_summary(ctx: "RunContext", tier: str, thread: "ThreadRecord", events: list["ThreadEvent"]) -> str:
    """The summary the tier writes (plain text, checked: not empty, not too long)."""
    from chainlang.llm.prompting import PromptError, messages
    from chainlang.llm.tiers import ModelRequest

    view = {"summary": thread.summary, "events": [{"event": e.event, "result": e.result, "at": e.at}
                                                   for e in events[-RECENT:]]}
    try:
        asked = messages("summarize", {"thread": view, "thread_id": thread.id}, ctx.project)
    except PromptError as exc:
        raise ValueError(str(exc)) from None
    answer = await ctx.models.ask(tier, ModelRequest("summarize", asked))
    text = " ".join(answer.text.split())
    if not text:
        raise ValueError(f"the {tier} model answered an empty summary for the thread {thread.id!r}")
    if len(text) > MAX_SUMMARY_CHARS:
        raise ValueError(f"the {tier} model's summary of {thread.id!r} is {len(text)} characters, more than "
                         f"{MAX_SUMMARY_CHARS}: a summary is three sentences")
    return text
