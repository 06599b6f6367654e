"""The embedded, model-free language tools of the thread and memory events (LANGUAGE.md §13):
words, keywords, lexical similarity (BM25) and extractive summaries. Deterministic, in
pure Python, for the small texts of one user's threads and journal.

Also the guard that keeps secret-looking values out of what is stored (`mask_secrets`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Iterable, Sequence

__all__ = ["STOPWORDS", "bm25_scores", "keywords", "mask_secrets", "names", "summarize", "tokens"]

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
    texts, in their original order, at most `sentences` of them and `limit` characters."""
    parts = [s.strip() for text in texts for s in _SENTENCE.split(text) if s.strip()]
    if not parts:
        return ""
    weight = Counter(w for part in parts for w in set(keywords(part, limit=50)))
    ranked = sorted(range(len(parts)), key=lambda i: (-sum(weight[w] for w in set(keywords(parts[i], 50))), i))
    chosen = sorted(ranked[:sentences])
    summary = " ".join(parts[i] for i in chosen)
    return summary if len(summary) <= limit else summary[: limit - 1].rstrip() + "…"


# What a secret looks like in free text: key-like prefixes, long random tokens, assignments
# of passwords and tokens. Masked before anything is stored in a journal, thread or digest.
_SECRETS = [
    re.compile(r"\b(?:sk|pk|rk|ghp|gho|ghs|xox[abpr]|AKIA|AIza)[-_A-Za-z0-9]{12,}"),
    re.compile(r"(?i)\b(password|passwd|pwd|secret|token|api[_-]?key)\b(\s*[:=]\s*|\s+is\s+)(\S+)"),
    re.compile(r"\b(?=[A-Za-z0-9+/_-]{32,}\b)(?=[^\s]*\d)(?=[^\s]*[A-Za-z])[A-Za-z0-9+/_-]{32,}={0,2}"),
]


def mask_secrets(text: str) -> str:
    """`text` with every secret-looking value replaced by `***`."""
    for pattern in _SECRETS:
        if pattern.groups == 3:
            text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}***", text)
        else:
            text = pattern.sub("***", text)
    return text
