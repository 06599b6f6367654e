"""MkDocs hook: inline a repository file into a page, verbatim, as a code block.

A line of the form

    {% include "grammar/expr.lark" %}

on its own (outside any fenced code block) is replaced by the content of that
file, read relative to the repository root (the directory of mkdocs.yml),
inside a fenced code block. A missing file fails the build: the docs must never
silently drop what they promise to show.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

_MARKER = re.compile(r'^\s*\{%\s*include\s+"(?P<path>[^"]+)"\s*%\}\s*$')
_FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})")

_LANGUAGES = {
    ".py": "python",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".json": "json",
    ".toml": "toml",
}


def _root(config: Any) -> Path:
    return Path(config["config_file_path"]).resolve().parent


def _block(root: Path, relative: str, page: str) -> str:
    path = (root / relative).resolve()
    if root not in path.parents:
        raise PluginError(f'{page}: include "{relative}" points outside the repository')
    if not path.is_file():
        raise PluginError(
            f'{page}: include "{relative}": the file does not exist in the repository; '
            f"the page promises its content, so the build stops here"
        )
    text = path.read_text(encoding="utf-8").rstrip("\n")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    language = _LANGUAGES.get(path.suffix, "text")
    return f"{fence}{language}\n{text}\n{fence}"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    root = _root(config)
    out: list[str] = []
    open_fence: str | None = None
    for line in markdown.split("\n"):
        fence = _FENCE.match(line)
        if open_fence is not None:
            if fence and fence.group("fence")[0] == open_fence[0] and len(fence.group("fence")) >= len(open_fence):
                open_fence = None
            out.append(line)
            continue
        if fence:
            open_fence = fence.group("fence")
            out.append(line)
            continue
        marker = _MARKER.match(line)
        if marker:
            out.append(_block(root, marker.group("path"), page.file.src_uri))
        else:
            out.append(line)
    return "\n".join(out)
