"""The embedded, model-free language tools of the thread and memory events (LANGUAGE.md §13):
words, keywords, lexical similarity (BM25) and extractive summaries. Deterministic, in
pure Python, for the small texts of one user's threads and journal.

The guard that keeps secret-looking values out of what is stored is
`chainlang.redaction.lexical` (the store and the run use it too).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Iterable, Sequence

__all__ = ["STOPWORDS", "bm25_scores", "entities", "keywords", "mentions", "name_phrases", "names",
           "sentence_key", "summarize", "tokens"]

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")

STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being below
between both but by can could did do does doing done down during each few for from further get got had has
have having he her here hers herself him himself his how i if in into is it its itself just let me more
most my myself no nor not now of off on once only or other our ours ourselves out over own same she should
so some such than that the their theirs them themselves then there these they this those through to too
under until up very was we were what when where which while who whom why will with would you your yours
yourself yourselves today tomorrow yesterday please thanks thank ok okay yes hi hello need want like make
going know think one two new also re via per
""".split())


def tokens(text: str) -> list[str]:
    """The words of `text`, lower-cased, stop words kept."""
    return [w.lower().replace("’", "'") for w in _WORD.findall(text)]


def keywords(text: str, limit: int = 8) -> list[str]:
    """The words that say what `text` is about: not stop words, not numbers alone, the most
    frequent first (ties: first seen first)."""
    words = [w for w in tokens(text) if w not in STOPWORDS and len(w) > 2 and not w.isdigit()]
    counts = Counter(words)
    order = {w: i for i, w in reversed(list(enumerate(words)))}
    return sorted(counts, key=lambda w: (-counts[w], order[w]))[:limit]


def names(text: str) -> list[str]:
    """Capitalised words not at the start of a sentence: the people and projects a text names."""
    found: list[str] = []
    for sentence in _SENTENCE.split(text):
        words = _WORD.findall(sentence)
        for word in words[1:]:
            if word[:1].isupper() and word.lower() not in STOPWORDS and word not in found:
                found.append(word)
    return found


# Capitalised words that name no person or project: days, months, greetings.
CALENDAR = frozenset("""
monday tuesday wednesday thursday friday saturday sunday january february march april may june july august
september october november december mon tue wed thu fri sat sun jan feb mar apr jun jul aug sep sept oct nov dec
""".split())
# The last word of a name that makes it a project (or an organisation), not a person.
PROJECT_WORDS = frozenset("""
project projects launch release plan planning review report roadmap program programme initiative campaign product
products app platform api service system team group corp corporation inc ltd llc gmbh co company budget strategy
analysis meeting sprint milestone migration redesign website site
""".split())


def name_phrases(text: str, known: Iterable[str] = ()) -> list[tuple[str, str | None]]:
    """The runs of capitalised words of `text` (a run may hold digits: "Q2 Launch"), each
    with the word before it (lower-cased; None at the start of a sentence). The first word
    of a sentence is left out (its capital says nothing) unless it is one of the `known`
    names; so are stop words and the days and months."""
    known = frozenset(known)
    found: list[tuple[str, str | None]] = []
    for sentence in _SENTENCE.split(text):
        words = _WORD.findall(sentence)
        run: list[str] = []
        before: str | None = None
        for i, word in enumerate(words + [""]):
            first = i == 0 and word in known
            capital = bool(word) and (i > 0 or first) and (word[:1].isupper() or (word[:1].isdigit() and bool(run))) \
                and word.lower() not in STOPWORDS and word.lower() not in CALENDAR
            if capital:
                if not run:
                    before = words[i - 1].lower() if i else None
                run.append(word)
                continue
            if run:
                found.append((" ".join(run), before))
                run = []
    return found


def entities(texts: Iterable[str]) -> tuple[list[str], list[str]]:
    """The people and the projects that `texts` name, each in order of first mention.

    A name of several words is a project when one of them holds a digit or is an acronym
    ("Q2 Launch", "CRM Migration"), when its last word says so ("Acme Corp", "Pricing
    Review"; see PROJECT_WORDS), or when "the" comes before it; else (two or three plain
    words: "Sarah Chen") a person. A single word is a person unless it is an acronym, holds
    a digit, comes after "the", or comes before a project word ("the Apollo project").
    Heuristics for the model-free tier: a model tier does better.
    """
    people: list[str] = []
    projects: list[str] = []
    texts = list(texts)
    known = {p.split()[0] for text in texts for p, _ in name_phrases(text)}
    for text in texts:
        for sentence in _SENTENCE.split(text):
            words = _WORD.findall(sentence)
            for phrase, before in name_phrases(sentence, known):
                parts = phrase.split()
                after = _word_after(words, parts)
                odd = any(any(c.isdigit() for c in p) or (len(p) > 1 and p.isupper()) for p in parts)
                project = odd or before == "the" or parts[-1].lower() in PROJECT_WORDS or (
                    after is not None and after.lower() in PROJECT_WORDS) or len(parts) > 3
                target = projects if project else people
                if phrase not in target:
                    target.append(phrase)
    return people, [p for p in projects if p not in people]


def _word_after(words: list[str], parts: list[str]) -> str | None:
    for i in range(len(words) - len(parts) + 1):
        if words[i:i + len(parts)] == parts:
            return words[i + len(parts)] if i + len(parts) < len(words) else None
    return None


def mentions(texts: Iterable[str], name: str) -> list[str]:
    """The sentences of `texts` that mention `name` (as whole words, any case)."""
    pattern = re.compile(r"(?<![^\W_])" + re.escape(name) + r"(?![^\W_])", re.IGNORECASE)
    return [s.strip() for text in texts for s in _SENTENCE.split(text) if s.strip() and pattern.search(s)]


def bm25_scores(query: str, documents: Sequence[str], k1: float = 1.5, b: float = 0.75) -> list[float]:
    """The BM25 score of each document for `query` (0: no query word in it)."""
    wanted = [w for w in tokens(query) if w not in STOPWORDS] or tokens(query)
    docs = [tokens(d) for d in documents]
    if not docs or not wanted:
        return [0.0] * len(documents)
    average = sum(len(d) for d in docs) / len(docs) or 1.0
    frequency = Counter(w for d in docs for w in set(d))
    scores = []
    for doc in docs:
        counts = Counter(doc)
        score = 0.0
        for word in wanted:
            f = counts.get(word, 0)
            if not f:
                continue
            idf = math.log(1 + (len(docs) - frequency[word] + 0.5) / (frequency[word] + 0.5))
            score += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(doc) / average))
        scores.append(score)
    return scores


def summarize(texts: Iterable[str], sentences: int = 3, limit: int = 600) -> str:
    """An extractive summary: the sentences that carry the most frequent keywords of all the
    texts, in their original order, at most `sentences` of them and `limit` characters. A
    sentence said again (the same after case, spacing and end punctuation are set aside: a
    reply also written to the journal) is chosen once, where it first appears; its repeats
    still count for the weight of its words."""
    every = [s.strip() for text in texts for s in _SENTENCE.split(text) if s.strip()]
    if not every:
        return ""
    weight = Counter(w for part in every for w in set(keywords(part, limit=50)))
    firsts: dict[str, str] = {}
    for part in every:
        firsts.setdefault(sentence_key(part), part)
    parts = list(firsts.values())
    ranked = sorted(range(len(parts)), key=lambda i: (-sum(weight[w] for w in set(keywords(parts[i], 50))), i))
    chosen = sorted(ranked[:sentences])
    summary = " ".join(parts[i] for i in chosen)
    return summary if len(summary) <= limit else summary[: limit - 1].rstrip() + "…"


_EDGES = re.compile(r"^[\W_]+|[\W_]+$", re.UNICODE)


def sentence_key(sentence: str) -> str:
    """What makes two sentences the same one: their words and inner punctuation, in any case
    and spacing, without the punctuation at either end ("Same." and " same!" are one)."""
    return _EDGES.sub("", " ".join(sentence.split()).casefold())
