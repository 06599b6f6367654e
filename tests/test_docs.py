"""The docs cannot drift from the checker: every example in them is checked.

* Every ```yaml block of docs/**/*.md is a complete chain file and must check
  clean (no diagnostics at all, warnings included), unless the line just before
  its fence is a marker:

      <!-- check: CL014 CL012 -->        must produce exactly these rule ids
      <!-- check: hooks -->              a hooks file (*.hooks.yaml) that checks clean
      <!-- check: hooks CL041 -->        a hooks file that must produce exactly these ids
      <!-- check: skip -- reason -->     not a chain file; not checked

  Any other `<!-- check` comment, or a marker that is not directly followed by a
  ```yaml fence, is an error.
* Every ```console block whose first line is `$ chainlang check [OPTIONS]
  example.chain.yaml` (or `example.hooks.yaml`) holds the exact output of that
  command, run by the real CLI in a directory that holds only the preceding
  yaml block under that name, with `--tools docs/_tools/example_tools.py` added.
* Every ```console block whose first line is `$ chainlang run [OPTIONS] FILE`
  (FILE a `*.chain.yaml` name) holds what that command prints, stdout and
  stderr together as a terminal shows them, run by the real CLI in a fresh
  directory that holds the preceding yaml block, saved as FILE, and a
  chainlang.toml that loads docs/_tools/example_tools.py (so the command is
  exactly the one on the page, and the transcript names no extra tools). Later
  lines of the block that start with `$ ` are more commands, run in the same
  directory: `$ chainlang run ...` again, or `$ cat PATH` (a file as the runs
  left it). A block may also start with (or hold) `$ chainlang emit NAME ...`:
  the preceding yaml block (a hooks file) is saved under its marker's name and
  the event is emitted in that directory. What changes from one run to the next is not compared: durations
  (`0.3 ms`, `1.25 s`, `"duration_ms":0.3`), wall-clock stamps
  (`"ts":"2026-01-05T09:00:00.123Z"`) and run ids (`20260105T090000Z-1a2b3c`).
  The directory the example ran in is shown as `/path/to`.
* Every rule of the catalogue has its page docs/checks/<slug>.md, with a failing
  example and its output, and docs/checks/index.md lists every rule.
* `mkdocs build --strict` passes.

The examples run against the example tools of docs/_tools/example_tools.py.
After a deliberate change to the checker's output, UPDATE_DOCS=1 rewrites the
console blocks with what the CLI prints now (then read the diff!).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import pytest

from chainlang.pipeline import check_files, default_registry
from chainlang.diagnostics import Rule
from chainlang.registry.registry import Registry
from chainlang.diagnostics.rules import ALL_RULES, RULES_BY_ID, RULES_BY_SLUG
from tests.helpers import cli_here

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CHECKS = DOCS / "checks"
TOOLS = ROOT / "docs" / "_tools" / "example_tools.py"

_FENCE = re.compile(r"^(?P<indent>[ ]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_MARKER_START = re.compile(r"^\s*<!--\s*check\b")
_MARKER = re.compile(r"^<!-- check: (?P<body>\S.*?) -->$")
_SKIP = re.compile(r"^skip -- (?P<reason>\S.*)$")
_CHECK_COMMAND = re.compile(r"^\$ chainlang check\b")
_RUN_COMMAND = re.compile(r"^\$ chainlang (?:run|emit)\b")


# -- reading the docs -----------------------------------------------------------


@dataclass(frozen=True)
class Marker:
    kind: str = "chain"  # "chain" or "hooks"
    rules: frozenset[str] = frozenset()  # the rule ids the block must produce; empty: it checks clean
    skip: str | None = None  # the reason, for YAML that is not a chain file

    @property
    def filename(self) -> str:
        return f"example.{self.kind}.yaml"


@dataclass(frozen=True, eq=False)
class Block:
    page: str  # path under docs/, e.g. "checks/unknown-event.md"
    line: int  # 1-based line of the opening fence
    index: int = field(repr=False)  # position among the blocks of its page
    lang: str
    text: str = field(repr=False)
    marker: Marker | None = field(repr=False)  # yaml blocks only; None also for a malformed marker
    previous: Block | None = field(repr=False)  # the block just before this one on the page
    adjacent: bool = field(repr=False)  # only blank lines separate this block from `previous`

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def parse_marker(line: str) -> Marker:
    """The marker of a `<!-- check ... -->` line; ValueError for a form that is not one of the known ones."""
    match = _MARKER.match(line.strip())
    if not match:
        raise ValueError(f"not a marker of the form <!-- check: ... -->: {line.strip()!r}")
    body = match.group("body")
    skip = _SKIP.match(body)
    if skip:
        return Marker(skip=skip.group("reason"))
    if body.startswith("skip"):
        raise ValueError(f"a skip marker is written <!-- check: skip -- reason -->: {line.strip()!r}")
    words = body.split(" ")
    kind = "chain"
    if words[0] == "hooks":
        kind, words = "hooks", words[1:]
    if not words and kind == "chain":
        raise ValueError(f"an empty marker: {line.strip()!r}")
    for word in words:
        if not re.fullmatch(r"CL\d{3}", word):
            raise ValueError(f"{word!r} is not a rule id (CL014), 'hooks' or 'skip -- reason': {line.strip()!r}")
        if word not in RULES_BY_ID:
            raise ValueError(f"{word} is not a rule of chainlang.diagnostics.rules: {line.strip()!r}")
    if len(set(words)) != len(words):
        raise ValueError(f"a rule id is listed twice: {line.strip()!r}")
    return Marker(kind=kind, rules=frozenset(words))


def read_page(path: Path) -> tuple[list[Block], list[str]]:
    """The fenced blocks of one page, and the problems found with its markers."""
    page = path.relative_to(DOCS).as_posix()
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    problems: list[str] = []
    i = 0
    last_end = -1  # index of the closing fence of the previous block
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if not fence:
            if _MARKER_START.match(line):
                after = lines[i + 1] if i + 1 < len(lines) else ""
                opener = _FENCE.match(after)
                if not opener or _language(opener.group("info")) != "yaml":
                    problems.append(f"{page}:{i + 1}: a check marker must be on the line just before a ```yaml fence")
            i += 1
            continue
        indent, marks = len(fence.group("indent")), fence.group("fence")
        lang = _language(fence.group("info"))
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            close = _FENCE.match(lines[j])
            if close and close.group("fence")[0] == marks[0] and len(close.group("fence")) >= len(marks) and not close.group("info").strip():
                break
            text = lines[j]
            body.append(text[indent:] if text[:indent].strip() == "" else text.lstrip())
            j += 1
        if j == len(lines):
            problems.append(f"{page}:{i + 1}: the fence is never closed")
        marker: Marker | None = None
        if lang == "yaml":
            marker = Marker()
            if i > 0 and _MARKER_START.match(lines[i - 1]):
                try:
                    marker = parse_marker(lines[i - 1])
                except ValueError as exc:
                    problems.append(f"{page}:{i}: {exc}")
                    marker = None  # not checked: the marker problem is the failure
        previous = blocks[-1] if blocks else None
        adjacent = previous is not None and all(not text.strip() for text in lines[last_end + 1 : i])
        blocks.append(Block(page, i + 1, len(blocks), lang, "\n".join(body) + "\n", marker, previous, adjacent))
        last_end = j
        i = j + 1
    return blocks, problems


def _language(info: str) -> str:
    words = info.split()
    return words[0] if words else ""


def read_docs() -> tuple[list[Block], list[str]]:
    blocks: list[Block] = []
    problems: list[str] = []
    for path in sorted(DOCS.rglob("*.md")):
        if any(part.startswith("_") for part in path.relative_to(DOCS).parts):
            continue
        found, trouble = read_page(path)
        blocks.extend(found)
        problems.extend(trouble)
    return blocks, problems


BLOCKS, MARKER_PROBLEMS = read_docs()
# the project of the CL038 examples: on Temporal
TEMPORAL_PROJECT = '[engine]\nkind = "temporal"\n'
# secret-flow, bad-expose: said of a project that declares a secret (its value is never read by check)
SECRETS_PROJECT = '[secrets]\ncrm_token = {env = "CRM_TOKEN"}\n'
SECRETS_RULES = ("CL066", "CL067")

YAML_BLOCKS = [b for b in BLOCKS if b.lang == "yaml" and b.marker is not None and b.marker.skip is None]
CONSOLE_BLOCKS = [b for b in BLOCKS if b.lang == "console" and _CHECK_COMMAND.match(b.text.split("\n", 1)[0])]
RUN_BLOCKS = [b for b in BLOCKS if b.lang == "console" and _RUN_COMMAND.match(b.text.split("\n", 1)[0])]


def block_id(block: Block) -> str:
    return block.id


# -- running the checker -----------------------------------------------------------


@pytest.fixture(scope="module")
def registry() -> Registry:
    return default_registry([str(TOOLS)])


def write_example(block: Block, directory: Path) -> Path:
    assert block.marker is not None
    path = directory / block.marker.filename
    path.write_text(block.text, encoding="utf-8")
    return path


def console_command(block: Block) -> tuple[list[str], str]:
    """The CLI arguments after `check` (with --tools added) and the file name the command checks."""
    words = shlex.split(block.text.split("\n", 1)[0][1:])
    options, name = words[2:-1], words[-1] if len(words) > 2 else ""
    return ["check", "--tools", str(TOOLS), *options, name], name


def expected_console(block: Block) -> str:
    lines = [line.rstrip() for line in block.text.split("\n")[1:]]
    return "\n".join(lines).strip("\n")


def run_cli(block: Block, directory: Path) -> subprocess.CompletedProcess[str]:
    assert block.previous is not None and block.previous.marker is not None
    if block in RUN_BLOCKS:
        return run_commands(block, directory)
    write_example(block.previous, directory)
    if "CL037" in block.previous.marker.rules:  # no-model: said of a project (a chainlang.toml) without models
        (directory / "chainlang.toml").write_text("", encoding="utf-8")
    if "CL038" in block.previous.marker.rules:  # not-on-engine: said of a project that runs on Temporal
        (directory / "chainlang.toml").write_text(TEMPORAL_PROJECT, encoding="utf-8")
    if set(SECRETS_RULES) & set(block.previous.marker.rules):
        (directory / "chainlang.toml").write_text(SECRETS_PROJECT, encoding="utf-8")
    args, _ = console_command(block)
    return cli_here(directory, *args, env={"FORCE_COLOR": None})


# -- `$ chainlang run` blocks ----------------------------------------------------------

_DURATION = re.compile(r"\b\d+(?:\.\d+)? m?s\b|\b\d+m \d{2}s\b|\b\d+h \d{2}m \d{2}s\b|(?<=\"duration_ms\":)\d+(?:\.\d+)?")
_STAMP = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
_RUN_ID = re.compile(r"\b\d{8}T\d{6}Z-[0-9a-f]{6,10}\b")
_MAC = re.compile(r'(?<="mac":")[0-9a-f]{32}(?=")')  # a line's seal: keyed by the project's own key
_QUESTION = re.compile(r"\bq-[0-9a-f]{16}\b")  # a user.ask's question id: made from the run id
EXAMPLE_DIR = "/path/to"  # how the pages show the directory an example ran in


def run_block_commands(block: Block) -> list[tuple[str, list[str]]]:
    """The commands of a `$ chainlang run` block: each line as written, and its words (without the `$`)."""
    return [(line.rstrip(), shlex.split(line[2:])) for line in block.text.split("\n") if line.startswith("$ ")]


def run_block_file(words: list[str]) -> str:
    """The chain file a `chainlang run` command names."""
    files = [w for w in words[2:] if re.fullmatch(r"[\w.-]+\.chain\.ya?ml", w)]
    return files[0] if len(files) == 1 else ""


def run_commands(block: Block, directory: Path) -> subprocess.CompletedProcess[str]:
    """Run the commands of a `$ chainlang run` block in `directory`; their output in one text."""
    assert block.previous is not None
    (directory / "chainlang.toml").write_text(f"tools = [{json.dumps(str(TOOLS))}]\n", encoding="utf-8")
    out: list[str] = []
    for line, words in run_block_commands(block):
        if words[:2] == ["chainlang", "run"] and run_block_file(words):
            (directory / run_block_file(words)).write_text(block.previous.text, encoding="utf-8")
            done = cli_here(directory, *words[1:], merged=True, env={"FORCE_COLOR": None})
            out.append(f"{line}\n{done.stdout}")
        elif words[:2] == ["chainlang", "emit"] and block.previous.marker is not None:
            # an emit fires the hooks of the project: the preceding block, saved under its marker's name
            write_example(block.previous, directory)
            done = cli_here(directory, *words[1:], merged=True, env={"FORCE_COLOR": None})
            out.append(f"{line}\n{done.stdout}")
        elif words[:1] == ["cat"] and len(words) == 2:
            out.append(f"{line}\n{(directory / words[1]).read_text(encoding='utf-8')}")
        else:
            out.append(f"{line}\nunsupported command in a run block\n")
    text = "".join(out)
    for where in {str(directory.resolve()), str(directory)}:
        text = text.replace(where, EXAMPLE_DIR)
    return subprocess.CompletedProcess(["chainlang", "run"], 0, text, "")


_BRANCH_LINE = re.compile(r"^\S (\S+?)\[\d+\]")  # a progress line of one branch of a foreach: `✓ 2[1] jokes.write`


def _branches_sorted(text: str) -> str:
    """The progress lines of a foreach's branches, sorted within each run of them: the
    branches run concurrently, so they finish (and are printed) in any order."""
    lines, out = text.split("\n"), []
    i = 0
    while i < len(lines):
        match = _BRANCH_LINE.match(lines[i])
        j = i + 1
        if match:
            while j < len(lines) and (m := _BRANCH_LINE.match(lines[j])) and m.group(1) == match.group(1):
                j += 1
        out.extend(sorted(lines[i:j]))
        i = j
    return "\n".join(out)


def comparable(text: str) -> str:
    """`text` without what changes from run to run: durations, wall-clock stamps, run ids (and the
    question ids made from them), seals, the order in which a foreach's branches end."""
    text = _QUESTION.sub("QUESTION", text)
    text = _MAC.sub("MAC", _RUN_ID.sub("RUN_ID", _STAMP.sub("TS", _DURATION.sub("N", text))))
    return _branches_sorted(text)


CliRuns = Callable[[Block], subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory: pytest.TempPathFactory) -> CliRuns:
    """What the commands of a console block print, run through the CLI's entry point in this
    process (a process each was most of these tests' time), in a directory of their own."""
    return lambda block: run_cli(block, tmp_path_factory.mktemp("console"))


# -- 1. every yaml example checks as its marker says -------------------------------------


def test_markers_are_well_formed() -> None:
    assert not MARKER_PROBLEMS, "\n".join(MARKER_PROBLEMS)


def test_docs_have_examples() -> None:
    assert len(YAML_BLOCKS) > len(ALL_RULES), "the yaml blocks of the docs were not found"
    assert CONSOLE_BLOCKS, "the console blocks of the docs were not found"
    assert RUN_BLOCKS, "the `$ chainlang run` blocks of the docs were not found"


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=block_id)
def test_yaml_example(block: Block, registry: Registry, tmp_path: Path) -> None:
    assert block.marker is not None
    path = write_example(block, tmp_path)
    if "CL037" in block.marker.rules:  # no-model: said of a project (a chainlang.toml) without models
        (tmp_path / "chainlang.toml").write_text("", encoding="utf-8")
    if "CL038" in block.marker.rules:  # not-on-engine: said of a project that runs on Temporal
        (tmp_path / "chainlang.toml").write_text(TEMPORAL_PROJECT, encoding="utf-8")
    if set(SECRETS_RULES) & set(block.marker.rules):
        (tmp_path / "chainlang.toml").write_text(SECRETS_PROJECT, encoding="utf-8")
    diagnostics = check_files([str(path)], registry=registry, start_dir=tmp_path).diagnostics
    shown = "\n".join(str(d).replace(str(path), block.marker.filename) for d in diagnostics)
    if not block.marker.rules:
        assert not diagnostics, f"{block.id}: this example must check clean, but:\n{shown}"
    else:
        got = {d.rule for d in diagnostics}
        assert got == set(block.marker.rules), (
            f"{block.id}: the marker says {' '.join(sorted(block.marker.rules))}, "
            f"the checker says {' '.join(sorted(got)) or 'nothing'}:\n{shown}"
        )


# -- 2. every console block is the exact output of the CLI --------------------------------


@pytest.mark.parametrize("block", CONSOLE_BLOCKS, ids=block_id)
def test_console_output(block: Block, cli_runs: CliRuns, registry: Registry, tmp_path: Path) -> None:
    previous = block.previous
    assert previous is not None and previous.lang == "yaml", (
        f"{block.id}: a `$ chainlang check` console block must follow the yaml block it checks")
    assert previous.marker is not None, f"{block.id}: the yaml block above has a malformed marker"
    assert previous.marker.skip is None, f"{block.id}: the yaml block before this console block is skipped"
    args, name = console_command(block)
    assert name == previous.marker.filename, (
        f"{block.id}: the command must check {previous.marker.filename} (the file the yaml block above is)")
    result = cli_runs(block)
    assert result.stderr == "", f"{block.id}: the command wrote to stderr:\n{result.stderr}"
    got = "\n".join(line.rstrip() for line in result.stdout.split("\n")).strip("\n")
    if os.environ.get("UPDATE_DOCS") and got != expected_console(block):
        update_console_block(block, got)
        return
    assert got == expected_console(block), f"{block.id}: the output differs from the page; the command printed:\n{got}"
    if args[-2:] == [str(TOOLS), name]:  # plain text output: the exit status follows the errors
        path = write_example(previous, tmp_path)
        if "CL038" in previous.marker.rules:
            (tmp_path / "chainlang.toml").write_text(TEMPORAL_PROJECT, encoding="utf-8")
        if set(SECRETS_RULES) & set(previous.marker.rules):
            (tmp_path / "chainlang.toml").write_text(SECRETS_PROJECT, encoding="utf-8")
        errors = [d for d in check_files([str(path)], registry=registry, start_dir=tmp_path).diagnostics if d.severity == "error"]
        assert result.returncode == (1 if errors else 0), f"{block.id}: exit status {result.returncode}"


@pytest.mark.parametrize("block", RUN_BLOCKS, ids=block_id)
def test_run_output(block: Block, cli_runs: CliRuns) -> None:
    previous = block.previous
    assert previous is not None and previous.lang == "yaml", (
        f"{block.id}: a `$ chainlang run` console block must follow the yaml block it runs")
    assert previous.marker is not None and previous.marker.skip is None and not previous.marker.rules, (
        f"{block.id}: the yaml block above must be a chain (or hooks file) that checks clean")
    for line, words in run_block_commands(block):
        if words[:2] == ["chainlang", "run"]:
            assert run_block_file(words), f"{block.id}: `{line}` must name one FILE.chain.yaml"
        elif words[:2] == ["chainlang", "emit"]:
            assert len(words) >= 3, f"{block.id}: `{line}` must name the event"
        else:
            assert words[:1] == ["cat"] and len(words) == 2, f"{block.id}: unsupported command `{line}`"
    got = "\n".join(line.rstrip() for line in cli_runs(block).stdout.split("\n")).strip("\n")
    expected = "\n".join(line.rstrip() for line in block.text.split("\n")).strip("\n")
    assert "Traceback" not in got, f"{block.id}: the command crashed:\n{got}"
    if comparable(got) == comparable(expected):
        return
    if os.environ.get("UPDATE_DOCS"):
        update_console_block(block, got, keep=0)
        return
    assert comparable(got) == comparable(expected), f"{block.id}: the output differs from the page; the commands printed:\n{got}"


def update_console_block(block: Block, output: str, keep: int = 1) -> None:
    """Replace the output lines of a console block in its page (found again by position: earlier updates move lines)."""
    path = DOCS / block.page
    current, _ = read_page(path)
    line = current[block.index].line  # 1-based line of the opening fence
    lines = path.read_text(encoding="utf-8").split("\n")
    end = line + len(current[block.index].text.split("\n")) - 1  # index of the closing fence
    lines[line + keep : end] = output.split("\n")  # keep the fence (and the `$ chainlang check` line)
    path.write_text("\n".join(lines), encoding="utf-8")


# -- 3. every rule has its page -----------------------------------------------------------


def page_blocks(slug: str) -> list[Block]:
    return [b for b in BLOCKS if b.page == f"checks/{slug}.md"]


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: f"{rule.id}-{rule.slug}")
def test_rule_has_a_page(rule: Rule) -> None:
    page = CHECKS / f"{rule.slug}.md"
    assert page.is_file(), f"{rule.id} has no page docs/checks/{rule.slug}.md"
    title = page.read_text(encoding="utf-8").split("\n", 1)[0]
    assert title == f"# {rule.id} {rule.slug}", f"{page.name}: the title must be '# {rule.id} {rule.slug}', not {title!r}"
    blocks = page_blocks(rule.slug)
    failing = [b for b in blocks if b.lang == "yaml" and b.marker is not None and rule.id in b.marker.rules]
    assert failing, f"{page.name}: no yaml example marked <!-- check: {rule.id} -->"
    shown = [b for b in blocks if b.lang == "console" and b in CONSOLE_BLOCKS and b.adjacent and b.previous in failing]
    assert shown, f"{page.name}: the failing example must be followed by a console block with its output"
    clean = [b for b in blocks if b.lang == "yaml" and b.marker is not None and b.marker.skip is None and not b.marker.rules]
    assert clean, f"{page.name}: no fixed example (a yaml block that checks clean)"


def test_every_check_page_is_a_rule() -> None:
    pages = {p.stem for p in CHECKS.glob("*.md")} - {"index"}
    unknown = sorted(pages - set(RULES_BY_SLUG))
    assert not unknown, f"pages in docs/checks/ that name no rule: {unknown}"


def test_index_lists_every_rule() -> None:
    text = (CHECKS / "index.md").read_text(encoding="utf-8")
    row = re.compile(r"^\|\s*(CL\d{3})\s*\|\s*\[([a-z0-9-]+)\]\(([a-z0-9-]+)\.md\)\s*\|\s*(\w+)\s*\|\s*(.*?)\s*\|\s*$", re.MULTILINE)
    rows = {m.group(1): m.groups()[1:] for m in row.finditer(text)}
    for rule in ALL_RULES:
        assert rule.id in rows, f"index.md has no table row for {rule.id}"
        slug, link, severity, title = rows[rule.id]
        # the title as in chainlang.diagnostics.rules; the page may add code spans
        assert (slug, link, severity, title.replace("`", "")) == (rule.slug, rule.slug, rule.severity, rule.title.replace("`", "")), (
            f"index.md row of {rule.id}")
    assert set(rows) == set(RULES_BY_ID), f"index.md lists unknown rules: {sorted(set(rows) - set(RULES_BY_ID))}"


def test_nav_lists_every_check_page() -> None:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r"\bchecks/([a-z0-9-]+)\.md\b", text))
    pages = {p.stem for p in CHECKS.glob("*.md")}
    assert pages <= listed, f"check pages missing from the nav of mkdocs.yml: {sorted(pages - listed)}"


# -- 4. the site builds -------------------------------------------------------------------


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr


# -- the Python hooks example of hooks.md -----------------------------------------------


def test_python_hooks_example_checks_and_fires(tmp_path: Path) -> None:
    """The ```python block of docs/reference/hooks.md#python registers hooks that check
    clean and fire: a chain that sends a mail and searches the inbox shows both."""
    page = (DOCS / "reference" / "hooks.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(from chainlang import hook\n.*?)```", page, re.S)
    assert code is not None, "hooks.md lost its Python example"
    (tmp_path / "doc_hooks.py").write_text(code.group(1), encoding="utf-8")
    (tmp_path / "chainlang.toml").write_text(f"tools = [{json.dumps(str(TOOLS))}, \"doc_hooks.py\"]\n",
                                             encoding="utf-8")
    (tmp_path / "mail.chain.yaml").write_text(
        "steps:\n  - email.send: {to: a@example.com, subject: Hi, body: Hello}\n"
        "  - email.search: {query: budget}\n", encoding="utf-8")
    env = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}
    checked = subprocess.run([sys.executable, "-m", "chainlang.cli", "check", "mail.chain.yaml"], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=120, check=False)
    assert checked.returncode == 0 and checked.stdout.startswith("no problems found in 2 files"), checked.stdout
    ran = subprocess.run([sys.executable, "-m", "chainlang.cli", "run", "mail.chain.yaml", "--progress", "plain"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert ran.returncode == 0, ran.stderr
    assert "hook audit-copy at 1 fired on pre:email.send" in ran.stderr
    assert "1 new mails" in ran.stderr and "✓ hook budget-mail at 2 ok" in ran.stderr
    transcript = next((tmp_path / ".chainlang" / "runs").glob("*.jsonl")).read_text(encoding="utf-8")
    assert '"cc":"audit@example.com"' in transcript  # the set reached the params the event ran with
