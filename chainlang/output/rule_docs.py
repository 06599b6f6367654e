"""A rule's docs page (docs/checks/<slug>.md) as the help a SARIF viewer shows.

Code-scanning services show a rule's `fullDescription` and `help` beside each
alert (GitHub requires both). They come from the page the docs site builds for
the rule, so there is one text to keep: the pages ship inside the wheel
(chainlang/_data/checks, pyproject's force-include) and are read only when a
SARIF log is written.

From a page:

- the *group* is the link of its ``**Group:**`` line (``index.md#structure`` →
  ``structure``), a tag of the rule;
- the *description* is the prose between that line and the first ``##``
  heading (plain text: links keep their words, emphasis and code marks go);
- the *markdown* is the page without its title and the HTML comments the docs
  tests read, its relative links made absolute on the docs site (mkdocs'
  directory URLs: ``../reference/hooks.md#order`` → ``<docs>reference/hooks/#order``);
- the *text* (for viewers without markdown) is the description and the page's
  address: the whole page twice would double the log (~60 rules, 2-6 KB each).

A rule whose page is missing (an installation without the pages) gets its
title as the description and a pointer to its page: the log stays valid.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from chainlang.diagnostics import Rule

__all__ = ["RuleDocs", "rule_docs"]

_GROUP = re.compile(r"\*\*Group:\*\*\s*\[[^\]]*\]\(index\.md#([A-Za-z0-9_-]+)\)")
_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
_COMMENT = re.compile(r"<!--.*?-->\n?", re.DOTALL)
_EMPHASIS = re.compile(r"\*\*([^*]+)\*\*|(?<![\w*])\*([^*\n]+)\*(?![\w*])")
_CODE = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^(```|~~~)")
MAX_PAGE = 64 * 1024  # a page longer than this is cut (the docs pages are 2-6 KB)


@dataclass(frozen=True, slots=True)
class RuleDocs:
    """What a SARIF rule descriptor says of a rule, from its docs page."""

    description: str
    text: str
    markdown: str
    tags: tuple[str, ...]


def rule_docs(rule: Rule, base: str, page_uri: str) -> RuleDocs:
    """The docs of `rule` with links on the site at `base` (ending in ``/``)."""
    page = _page(rule.slug)
    if page is None:
        said = f"{rule.title}. See {page_uri} for what it means and how to fix it."
        return RuleDocs(rule.title, said, f"{rule.title}. See [the rule's page]({page_uri}).", ())
    group = _GROUP.search(page)
    body = _body(page)
    markdown = _absolute_links(body, base).strip() + "\n"
    lead = body.split("\n## ", 1)[0]
    description = " ".join(_plain(lead).split()) or rule.title
    text = f"{description}\n\nExamples and how to fix it: {page_uri}\n"
    return RuleDocs(description, text, markdown, (group.group(1),) if group else ())


@cache
def _page(slug: str) -> str | None:
    from chainlang.resources import data_dir

    try:
        path: Path = data_dir("checks") / f"{slug}.md"
        with path.open(encoding="utf-8") as file:
            return file.read(MAX_PAGE)
    except (OSError, UnicodeDecodeError):
        return None


def _body(page: str) -> str:
    """The page after its title and its severity/group line, without HTML comments."""
    lines = _COMMENT.sub("", page).splitlines()
    start = 0
    for index, line in enumerate(lines[:6]):
        if line.startswith("# ") or line.startswith("**Severity:**"):
            start = index + 1
    return "\n".join(lines[start:]).strip("\n")


def _absolute_links(markdown: str, base: str) -> str:
    """Relative links of a page under checks/ made absolute on the site at `base`."""

    def absolute(match: re.Match[str]) -> str:
        bang, words, target = match.groups()
        if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:|^#|^/", target):
            return match.group(0)
        path, _, fragment = target.partition("#")
        where = posixpath.normpath(posixpath.join("checks", path))
        if where.endswith(".md"):
            where = where[:-3]
            where = where[: -len("index")] if where.endswith("index") else where + "/"
        url = base + where.lstrip("./") + (f"#{fragment}" if fragment else "")
        return f"{bang}[{words}]({url})"

    return _LINK.sub(absolute, markdown)


def _plain(markdown: str) -> str:
    """Markdown as plain text: code blocks indented, links as their words, marks gone."""
    out: list[str] = []
    prose: list[str] = []
    in_code = False

    def flush() -> None:  # a link may run over a line break: prose is changed a chunk at a time
        text = _LINK.sub(lambda m: m.group(2), "\n".join(prose))
        parts = _CODE.split(text)  # odd parts: code, kept as it is
        out.extend("".join(part if i % 2 else _EMPHASIS.sub(lambda m: m.group(1) or m.group(2), part)
                           for i, part in enumerate(parts)).split("\n") if prose else [])
        prose.clear()

    for line in markdown.splitlines():
        if _FENCE.match(line.strip()):
            flush()
            in_code = not in_code
        elif in_code:
            out.append("    " + line if line else "")
        else:
            prose.append(line.lstrip("#").strip() if line.startswith("#") else line)
    flush()
    return "\n".join(out)
