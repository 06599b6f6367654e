"""The `memory` standard events backed by the project's store (LANGUAGE.md §13): the daily
journal and the knowledge organized from it. These are the embedded defaults, which need
no model (the store's FTS5 full-text indexes with BM25 ranking; `lexical`'s keywords,
names and extractive summaries).

- `memory.append {thread_id, content}` adds an entry to the journal: secret-looking values
  masked first (`chainlang.redaction.mask_secrets`), its keywords extracted. `day` is the date on the
  run's clock. The step attempt's idempotency key is kept with it: a resumed step finds
  its entry and appends nothing. The thread need not be stored (journal entries name it).
  Returns `{id, thread_id, date, keywords}`.
- `memory.search {query?, scope, type, date?}` ranks the journal entries and the knowledge
  items (people, projects) that hold any of the query's words by BM25 (best first); without
  a query it lists them newest first. `scope: recent` keeps the journal entries of the last
  30 days of the run's clock (the knowledge is long-term memory: `scope` does not narrow
  it); `date` (a day, an ISO date-time read on the run's clock, or `{start, end}`) keeps
  the entries of those days and the knowledge updated on them. At most 20 matches. An
  empty query is an error; a project without a store has no matches (none is created).
- `memory.digest {period: daily|weekly}` organizes the journal of the run's day (daily) or
  of its last 7 days (weekly) into knowledge: the people and projects the entries name
  (`lexical.entities`), and recurring keywords (in 2 entries or more) as projects, each
  with an extractive summary of the sentences that mention it and its sources (journal
  ids). An item is kept once per (kind, name): digesting again updates it. Returns
  `{period, start, end, entries, people, projects}`. With `[models] memory = TIER` the tier
  names the people and projects instead (`_model_names`: only names the journal holds);
  what is stored of each stays extractive.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone
from typing import TYPE_CHECKING, Any

from chainlang.redaction import mask_secrets
from chainlang.stdlib.projectstore import memory_tier, open_store, project_of

from . import lexical

if TYPE_CHECKING:
    from chainlang.runtime.context import RunContext
    from chainlang.store import Store
    from chainlang.store.memory import JournalEntry, KnowledgeItem

__all__ = ["append", "digest", "search"]

RECENT_DAYS = 30
MAX_MATCHES = 20
MAX_TOPICS = 5  # recurring keywords made projects by one digest, at most


def append(ctx: "RunContext", thread_id: str, content: str) -> dict[str, Any]:
    """Add an entry to the journal of the run's day; returns `{id, thread_id, date, keywords}`."""
    from chainlang.store import StoreError

    masked = mask_secrets(content)
    words = lexical.keywords(masked)
    moment = ctx.now()
    day = moment.date().isoformat()
    with open_store(project_of(ctx, "memory")) as store:
        try:
            entry = store.append_journal(thread_id, masked, words, at=moment, day=day, origin=ctx.idempotency_key)
        except StoreError as exc:
            raise ValueError(f"the entry was not added to the journal: {exc}") from None
    return {"id": entry.id, "thread_id": entry.thread_id, "date": entry.day, "keywords": entry.keywords}


def search(ctx: "RunContext", query: str | None = None, scope: str = "recent", type: str = "any",
           date: str | dict[str, Any] | None = None) -> dict[str, Any]:
    """The journal entries and knowledge items matching `query`, best first."""
    from chainlang.store import StoreError
    from chainlang.tasks.stored import store_exists

    words = _words(query)
    today = ctx.now().date()
    days = _days(date, ctx) if date is not None else None
    root = project_of(ctx, "memory")
    try:
        if not store_exists(root):
            return {"matches": []}
    except StoreError as exc:
        raise ValueError(f"the project's store cannot be opened: {exc}") from None
    start = days[0] if days else (today - timedelta(days=RECENT_DAYS - 1) if scope == "recent" else None)
    end = days[1] if days else None
    found: list[tuple[float, str, dict[str, Any]]] = []  # (score or moment order, sort key, match)
    with open_store(root) as store:
        try:
            if type in ("journal", "any"):
                for entry in store.search_journal(words, start_day=None if start is None else start.isoformat(),
                                                  end_day=None if end is None else end.isoformat(),
                                                  limit=MAX_MATCHES):
                    found.append((entry.score or 0.0, entry.at, _journal_match(entry)))
            if type in ("people", "project", "any"):
                kinds = ["people", "project"] if type == "any" else [type]
                since, until = _moments(days, ctx) if days else (None, None)
                for item in store.search_knowledge(words, kinds=kinds, since=since, until=until, limit=MAX_MATCHES):
                    found.append((item.score or 0.0, item.updated_at, _knowledge_match(item, ctx)))
        except StoreError as exc:
            raise ValueError(f"the memory search failed: {exc}") from None
    if words is None:
        found.sort(key=lambda f: f[1], reverse=True)  # newest first
    else:
        found.sort(key=lambda f: (f[0], f[1]), reverse=True)  # best first, then newest
    return {"matches": [match for _, _, match in found[:MAX_MATCHES]]}


async def digest(ctx: "RunContext", period: str) -> dict[str, Any]:
    """Organize the journal of the period into people and projects (see the module's docstring):
    the names found lexically, or by the tier of `[models] memory` (`_model_names`). The
    store is read and written in a worker thread: its waits never hold the run's event loop."""
    import asyncio

    from chainlang.store import StoreError

    if period not in ("daily", "weekly"):
        raise ValueError(f"memory.digest: period is daily or weekly, not {period!r}")
    moment = ctx.now()
    end = moment.date()
    start = end if period == "daily" else end - timedelta(days=6)
    result: dict[str, Any] = {"period": period, "start": start.isoformat(), "end": end.isoformat(), "entries": 0,
                              "people": [], "projects": []}
    root = project_of(ctx, "memory")

    def read() -> list["JournalEntry"]:
        with open_store(root) as store:
            return store.journal(start_day=start.isoformat(), end_day=end.isoformat())

    def organize(people: list[str], projects: list[str]) -> None:
        with open_store(root) as store:
            for kind, names, key in (("people", people, "people"), ("project", projects, "projects")):
                for name in names:
                    if _organize(store, kind, name, entries, moment):
                        result[key].append(name)

    try:
        entries = await asyncio.to_thread(read)
        result["entries"] = len(entries)
        if not entries:
            return result
        tier = memory_tier(ctx)
        if tier == "embedded":
            people, projects = lexical.entities(e.content for e in entries)
        else:
            people, projects = await _model_names(ctx, tier, result, entries)
        projects += _topics(entries, people + projects)
        await asyncio.to_thread(organize, people, projects)
    except StoreError as exc:
        raise ValueError(f"the digest was not stored: {exc}") from None
    return result


# -- digest --------------------------------------------------------------------------------

MAX_MODEL_NAMES = 50  # of each kind, from one answer
NAMES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {kind: {"type": "array", "maxItems": MAX_MODEL_NAMES,
                          "items": {"type": "string", "minLength": 1, "maxLength": 120}}
                   for kind in ("people", "projects")},
    "required": ["people", "projects"],
    "additionalProperties": False,
}


async def _model_names(ctx: "RunContext", tier: str, period: dict[str, Any],
                       entries: list["JournalEntry"]) -> tuple[list[str], list[str]]:
    """The people and projects the tier names in the entries. A name the entries do not hold
    is dropped (the model cannot invent knowledge); what is stored of each name stays
    extractive: the entries' own sentences."""
    from chainlang.llm.prompting import PromptError, messages
    from chainlang.llm.tiers import ModelRequest
    from chainlang.llm.answers import parse_answer

    shown = [{"date": e.day, "thread_id": e.thread_id, "content": e.content} for e in entries[-200:]]
    try:
        asked = messages("digest", {**period, "entries": shown}, ctx.project)
    except PromptError as exc:
        raise ValueError(str(exc)) from None
    answer = await ctx.models.ask(tier, ModelRequest("digest", asked, NAMES_SCHEMA, "names"))
    names = parse_answer(answer.text, NAMES_SCHEMA, f"the {tier} model")
    texts = [e.content for e in entries]

    def held(found: list[str]) -> list[str]:
        out: list[str] = []
        for name in found:
            name = " ".join(name.split())
            if name and name not in out and lexical.mentions(texts, name):
                out.append(name)
        return out

    return held(names["people"]), held(names["projects"])


def _topics(entries: list["JournalEntry"], named: list[str]) -> list[str]:
    """Keywords found in 2 entries or more that are no part of a name (nor a word like
    "project"): the recurring topics."""
    taken = {w.lower() for name in named for w in lexical.tokens(name)}
    counts: dict[str, int] = {}
    for entry in entries:
        for word in set(entry.keywords):
            counts[word] = counts.get(word, 0) + 1
    recurring = [w for w, n in counts.items() if n >= 2 and w not in taken and w not in lexical.PROJECT_WORDS]
    recurring.sort(key=lambda w: (-counts[w], w))
    return recurring[:MAX_TOPICS]


def _organize(store: "Store", kind: str, name: str, entries: list["JournalEntry"], moment: datetime) -> bool:
    """Upsert the item of `name` from the entries that mention it (and those it had before)."""
    if mask_secrets(name) != name:
        return False  # a secret-looking "name" is never stored
    sources = [e for e in entries if lexical.mentions([e.content], name)]
    if not sources:
        return False
    known = {item.name: item for item in store.knowledge(kind) if item.name == name}
    earlier = set(known[name].sources) - {e.id for e in sources} if name in known else set()
    texts = [e.content for e in store.journal(ids=sorted(earlier))] if earlier else []
    texts += [e.content for e in sources]
    sentences = lexical.mentions(texts, name)
    content = mask_secrets(lexical.summarize(sentences or texts, sentences=3))
    if not content:
        return False
    words = [w for w in lexical.keywords(" ".join(sentences or texts), limit=8)]
    store.upsert_knowledge(kind, name, content, words, [e.id for e in sources], at=moment)
    return True


# -- search --------------------------------------------------------------------------------


def _words(query: str | None) -> list[str] | None:
    if query is None:
        return None
    if not query.strip():
        raise ValueError("memory.search: the query is empty; give words to look for, or leave query out to list "
                         "the entries of a type or date")
    words = [w for w in lexical.tokens(query) if w not in lexical.STOPWORDS] or lexical.tokens(query)
    if not words:
        raise ValueError(f"memory.search: the query {query!r} has no words to look for (only punctuation or "
                         "symbols); give words, or leave query out")
    return list(dict.fromkeys(words))


def _days(given: str | dict[str, Any], ctx: "RunContext") -> tuple[date, date]:
    """The first and last day of `date` (a day, an ISO date-time, or {start, end})."""
    if isinstance(given, dict):
        start, end = _day(given.get("start"), ctx, "date.start"), _day(given.get("end"), ctx, "date.end")
        if start > end:
            raise ValueError(f"memory.search: date.start ({start}) is after date.end ({end})")
        return start, end
    day = _day(given, ctx, "date")
    return day, day


def _day(value: Any, ctx: "RunContext", what: str) -> date:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"memory.search: {what} must be a date (YYYY-MM-DD) or an ISO date-time, not {value!r}")
    text = value.strip()
    try:
        if len(text) == 10:
            return date.fromisoformat(text)
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"memory.search: {what} {value!r} is not a date (YYYY-MM-DD) or an ISO date-time") from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(ctx.now().tzinfo)
    return moment.date()


def _moments(days: tuple[date, date], ctx: "RunContext") -> tuple[str, str]:
    """The days as UTC moments [since, until) in the zone of the run's clock."""
    zone = ctx.now().tzinfo or timezone.utc
    since = datetime.combine(days[0], time(), zone).astimezone(timezone.utc)
    until = datetime.combine(days[1] + timedelta(days=1), time(), zone).astimezone(timezone.utc)
    return since.isoformat(timespec="microseconds"), until.isoformat(timespec="microseconds")


def _journal_match(entry: "JournalEntry") -> dict[str, Any]:
    match: dict[str, Any] = {"content": entry.content, "type": "journal", "date": entry.day,
                             "thread_id": entry.thread_id, "keywords": entry.keywords}
    if entry.score is not None:
        match["score"] = entry.score
    return match


def _knowledge_match(item: "KnowledgeItem", ctx: "RunContext") -> dict[str, Any]:
    day = datetime.fromisoformat(item.updated_at).astimezone(ctx.now().tzinfo).date().isoformat()
    match: dict[str, Any] = {"content": f"{item.name}: {item.content}", "type": item.kind, "date": day,
                             "keywords": item.keywords}
    if item.score is not None:
        match["score"] = item.score
    return match
