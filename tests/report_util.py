"""What the report tests share: a project whose run has a parallel group, a retry, a decide
and a hook (the run the docs' screenshots show), and a small DOM of an HTML page (the
standard library's parser) for checking a report's structure without a browser."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from tests.helpers import cli, cli_here, show

TOOLS = Path(__file__).resolve().parent / "run" / "run_tools.py"
NOW = "2026-11-20T09:00:00+00:00"

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "guides" / "looking-at-runs.md"


def _demo() -> str:
    """The chain of the guide (the yaml block after `<!-- report-demo -->`): the run its text
    describes and its screenshots show is this one."""
    text = GUIDE.read_text(encoding="utf-8")
    after = text[text.index("<!-- report-demo -->"):]
    start = after.index("```yaml\n") + len("```yaml\n")
    return after[start:after.index("```", start)]


DEMO = _demo()


def demo_project(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(TOOLS, directory / "tools.py")
    (directory / "chainlang.toml").write_text('tools = ["tools.py"]\n', encoding="utf-8")
    (directory / "review.chain.yaml").write_text(DEMO, encoding="utf-8")
    return directory


def run_demo(project: Path, transcript: str = "review.jsonl", own_process: bool = False) -> Path:
    """The demo's run, in this process (what is tested is its report), or in a process of its
    own where this one runs an event loop already (the browser tests' driver)."""
    args = ("run", "review.chain.yaml", "--now", NOW, "--transcript", transcript)
    ran = cli(project, *args) if own_process else cli_here(project, *args)
    assert ran.returncode == 0, show(ran)
    return project / transcript


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    text: str = ""
    children: list["Element"] = field(default_factory=list)

    def find_all(self, tag: str | None = None, **attrs: str) -> list["Element"]:
        """Elements below this one with the tag and attributes (`class_` matches one class)."""
        found = []
        for child in self.children:
            if (tag is None or child.tag == tag) and all(
                    (value in child.attrs.get("class", "").split()) if name == "class_"
                    else child.attrs.get(name.replace("_", "-")) == value for name, value in attrs.items()):
                found.append(child)
            found.extend(child.find_all(tag, **attrs))
        return found

    def one(self, tag: str | None = None, **attrs: str) -> "Element":
        found = self.find_all(tag, **attrs)
        assert len(found) == 1, f"{len(found)} <{tag} {attrs}>"
        return found[0]

    def all_text(self) -> str:
        return self.text + "".join(child.all_text() for child in self.children)


_VOID = {"meta", "link", "br", "img", "input", "hr"}


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(element)
        if tag not in _VOID:
            self.stack.append(element)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(Element("#text", {}, data))


def dom(html: str) -> Element:
    builder = _Builder()
    builder.feed(html)
    builder.close()
    return builder.root


def island(page: Element) -> dict[str, Any]:
    """The report's data island: what its script shows on a click."""
    return dict(json.loads(page.one("script", id="report-data").all_text()))
