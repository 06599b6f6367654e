"""Reading a `*.chaintest.yaml` file: the tests it holds, each a list of steps (run a chain,
fire an event, run a command) with what must come out.

The file is read by the chain loader (bounded size and depth, no tags, no duplicate keys)
and checked against `schemas/chaintest.schema.json`; every problem is a `ChaintestError`
naming the file, the line and column, what is wrong and how to fix it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["COMMANDS", "DEFAULT_TIMEOUT", "ChaintestError", "Step", "TestCase", "TestFile", "load_test_file",
           "is_test_file"]

SUFFIXES = (".chaintest.yaml", ".chaintest.yml")
# what a test is made of, besides its steps; the same keys may sit at the top of a one-test file
_ONE_STEP = ("chain", "inputs", "thread", "emit", "data", "id", "expect")
_DEFAULTS = ("now", "tools", "models", "timeout")
#: seconds a test may take when its file does not say (timeout:); then it fails and its process is killed
DEFAULT_TIMEOUT = 60.0


class ChaintestError(Exception):
    """A test file that cannot be used: the message names the file, line and column."""


@dataclass
class Step:
    """One thing a test does. `kind`: run (`target` is the chain file), emit (`target` is
    the event) or command (`target` is the command line)."""

    kind: str
    target: str
    line: int
    name: str | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    data: Any = None
    thread: str | None = None
    id: str | None = None
    now: str | None = None
    expect: dict[str, Any] = field(default_factory=dict)

    @property
    def shown(self) -> str:
        verb = {"run": "run", "emit": "emit", "command": "chainlang", "resume": "resume"}[self.kind]
        return f"{self.name + ': ' if self.name else ''}{verb} {self.target} (line {self.line})"


@dataclass
class TestCase:
    """One test of a chaintest file: its name, line and steps."""
    name: str
    line: int
    steps: list[Step]
    now: str | None = None
    tools: dict[str, Any] = field(default_factory=dict)
    models: Any = None  # a rules file (its path, checked to be in the project) or {"rules": [...]}
    timeout: float = DEFAULT_TIMEOUT  # seconds for the whole test

    __test__ = False  # not a pytest class, despite its name


@dataclass
class TestFile:
    """A chaintest file read: its path, the project each test copies, its tests."""
    path: Path
    project: Path  # the directory each test copies
    tests: list[TestCase]
    #: the project the test file belongs to (the directory of the chainlang.toml above it, else its
    #: own): every file the tests name (the project copied, goldens, rules files) is inside it
    home: Path | None = None

    __test__ = False


def is_test_file(path: Path) -> bool:
    return path.name.endswith(SUFFIXES)


def load_test_file(path: Path) -> TestFile:
    """The tests of the file at `path`. Raises ChaintestError."""
    from chainlang.diagnostics import DiagnosticSink
    from chainlang.load.loader import load_bytes, to_data

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ChaintestError(f"{path}: cannot read: {exc.strerror or exc}") from None
    sink = DiagnosticSink(str(path))
    loaded = load_bytes(str(path), raw, sink)
    errors = [d for d in sink.items if d.severity == "error"]
    if errors:
        first = errors[0]
        hint = f" ({first.hint})" if first.hint else ""
        raise ChaintestError(f"{path}:{first.line}:{first.column}: {first.message}{hint}")
    if loaded.root is None:
        raise ChaintestError(f"{path}:1:1: the file is empty; write a test: chain: FILE, inputs:, expect:")
    document = to_data(loaded.root)
    reader = _Reader(path, loaded.root)
    reader.validate(document)
    return reader.test_file(document)


class _Reader:
    def __init__(self, path: Path, root: Any) -> None:
        self.path = path
        self.root = root
        self.home = _project_of(path.parent).resolve()

    def where(self, at: list[Any]) -> str:
        from chainlang.load.loader import node_at

        node = node_at(self.root, at)
        line, column = (node.line, node.column) if node is not None else (1, 1)
        return f"{self.path}:{line}:{column}"

    def line(self, at: list[Any]) -> int:
        from chainlang.load.loader import node_at

        node = node_at(self.root, at)
        return node.line if node is not None else 1

    def fail(self, at: list[Any], message: str) -> ChaintestError:
        return ChaintestError(f"{self.where(at)}: {message}")

    def validate(self, document: Any) -> None:
        import jsonschema

        from chainlang.resources import read_text

        if not isinstance(document, dict):
            raise self.fail([], "a test file is a mapping: chain: FILE, inputs:, expect: (or tests: [...])")
        schema = json.loads(read_text("schemas", "chaintest.schema.json"))
        validator = jsonschema.Draft7Validator(schema)
        errors = sorted(validator.iter_errors(document), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
        if errors:
            error = jsonschema.exceptions.best_match(errors)
            at = list(error.absolute_path)
            shown = "/".join(str(p) for p in at) or "the file"
            if error.validator == "additionalProperties" and isinstance(error.instance, dict):
                allowed = sorted(error.schema.get("properties", {}))
                unknown = sorted(set(error.instance) - set(allowed))
                from chainlang.diagnostics.suggest import did_you_mean

                hint = did_you_mean(unknown[0], allowed)
                raise ChaintestError(f"{self.key_where(at, unknown[0])}: {unknown[0]}: not a key of "
                                     f"{'a test file' if not at else shown}; " + (f"{hint} " if hint else "")
                                     + f"the keys are {', '.join(allowed)}")
            raise self.fail(at, f"{shown}: {_short(error.message)}")

    def key_where(self, at: list[Any], key: str) -> str:
        """file:line:column of the key `key` of the mapping at `at`."""
        from chainlang.load.loader import MapNode, node_at

        node = node_at(self.root, at)
        if isinstance(node, MapNode):
            for name, _ in node.pairs:
                if name.text == key:
                    return f"{self.path}:{name.line}:{name.column}"
        return self.where(at)

    def inside_home(self, at: list[Any], given: str, what: str) -> Path:
        """`given` (relative to the test file) resolved, links followed; ChaintestError when it
        is absolute or leads out of the project the test file belongs to."""
        if Path(given).is_absolute() or given.startswith("~"):
            raise self.fail(at, f"{what}: {given} is an absolute path; name it relative to the test file, inside "
                                f"its project ({self.home})")
        target = (self.path.parent / given).resolve()
        if not target.is_relative_to(self.home):
            raise self.fail(at, f"{what}: {given} is outside the test's project ({self.home}): it leads out of it "
                                "(with .., or through a link that points out); a test names only files of its project")
        return target

    def in_copy(self, at: list[Any], given: str, what: str) -> None:
        """A path inside the project's copy (a chain, a file a test reads): relative, not
        leading out of it (links are followed when the test runs)."""
        if Path(given).is_absolute() or given.startswith("~"):
            raise self.fail(at, f"{what}: {given} is an absolute path; name a file of the project, relative to it")
        if os.path.normpath(given).split(os.sep)[0] == "..":
            raise self.fail(at, f"{what}: {given} leads out of the project; name a file of the project, relative to it")

    def test_file(self, document: dict[str, Any]) -> TestFile:
        project = self.path.parent
        if "project" in document:
            project = self.inside_home(["project"], document["project"], "project")
            if not project.is_dir():
                raise self.fail(["project"], f"project: {document['project']} is not a directory")
        else:
            project = _project_of(self.path.parent)
        setup = [self.step(s, ["setup", i]) for i, s in enumerate(document.get("setup", []))]
        defaults = {key: document[key] for key in _DEFAULTS if key in document}
        if "tests" in document:
            mixed = [key for key in _ONE_STEP + ("steps", "name") if key in document]
            if mixed:
                raise self.fail([mixed[0]], f"{mixed[0]}: a file with tests: lists its tests there; move "
                                            f"{', '.join(mixed)} into one of them")
            tests = [self.test(t, ["tests", i], defaults, setup) for i, t in enumerate(document["tests"])]
        else:
            name = document.get("name") or self.path.name.removesuffix(".yaml").removesuffix(".yml") \
                .removesuffix(".chaintest")
            tests = [self.test({**document, "name": name}, [], defaults, setup)]
        names = [t.name for t in tests]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise self.fail(["tests", i, "name"], f"two tests are named {name!r}; give each its own name")
        return TestFile(self.path, project, tests, self.home)

    def test(self, data: dict[str, Any], at: list[Any], defaults: dict[str, Any], setup: list[Step]) -> TestCase:
        one = [key for key in ("chain", "emit", "steps") if key in data]
        if len(one) != 1:
            what = "has none of them" if not one else f"has {' and '.join(one)}"
            raise self.fail(at, f"a test runs a chain (chain: FILE), fires an event (emit: EVENT) or has "
                                f"steps: a list of them; this one {what}")
        if "steps" in data:
            stray = [key for key in _ONE_STEP if key in data]
            if stray:
                raise self.fail(at + [stray[0]], f"{stray[0]}: a test with steps: puts it in one of its steps")
            steps = [self.step(s, at + ["steps", i]) for i, s in enumerate(data["steps"])]
        else:
            steps = [self.step({k: data[k] for k in _ONE_STEP if k in data}, at)]
        tools = {**defaults.get("tools", {}), **data.get("tools", {})}
        models = data.get("models", defaults.get("models"))
        if isinstance(models, str):
            where = at + ["models"] if "models" in data else ["models"]
            models = str(self.inside_home(where, models, "models"))
        timeout = float(data.get("timeout", defaults.get("timeout", DEFAULT_TIMEOUT)))
        return TestCase(str(data["name"]), self.line(at), setup + steps, data.get("now", defaults.get("now")),
                        tools, models, timeout)

    def step(self, data: dict[str, Any], at: list[Any]) -> Step:
        kinds = [key for key in ("chain", "emit", "command", "resume") if key in data]
        if len(kinds) != 1:
            what = "has none of them" if not kinds else f"has {' and '.join(kinds)}"
            raise self.fail(at, f"a step runs a chain (chain: FILE), fires an event (emit: EVENT), runs a "
                                f"command (command: ...) or resumes an earlier run (resume: STEP); this one {what}")
        kind = kinds[0]
        allowed = {"chain": {"inputs", "thread"}, "emit": {"data", "id"}, "command": set(), "resume": set()}[kind]
        for key in ("inputs", "thread", "data", "id"):
            if key in data and key not in allowed:
                raise self.fail(at + [key], f"{key}: not for a step with {kind}: (it is for "
                                            f"{'chain:' if key in ('inputs', 'thread') else 'emit:'})")
        expect = data.get("expect", {})
        by_kind = {"outputs": "chain", "error": "chain", "fired": "emit", "exit": "command", "output": "command"}
        for key, owner in by_kind.items():
            if key in expect and owner != (kind if kind != "resume" else "chain"):  # a resume ends like a run
                raise self.fail(at + ["expect", key], f"expect.{key}: not for a step with {kind}: (it is for {owner}:)")
        if kind == "command" and any(k in expect for k in ("status", "records", "transcript", "calls")):
            key = next(k for k in ("status", "records", "transcript", "calls") if k in expect)
            raise self.fail(at + ["expect", key], f"expect.{key}: a command step is checked with exit, output and files")
        if kind == "command":
            _check_command(data["command"], lambda message: self.fail(at + ["command"], message))
        if kind == "chain":
            self.in_copy(at + ["chain"], data["chain"], "chain")
        if "transcript" in expect:
            expect = {**expect, "transcript": str(self.inside_home(at + ["expect", "transcript"], expect["transcript"],
                                                                   "expect.transcript"))}
        for name in expect.get("files", {}):
            self.in_copy(at + ["expect", "files"], name, f"expect.files.{name}")
        return Step({"chain": "run", "emit": "emit", "command": "command", "resume": "resume"}[kind], data[kind],
                    self.line(at),
                    name=data.get("name"), inputs=dict(data.get("inputs", {})), data=data.get("data"),
                    thread=data.get("thread"), id=data.get("id"), now=data.get("now"), expect=dict(expect))


#: the commands a test step may give: the ones that end by themselves (serve, worker and lsp run
#: until they are stopped: a test that started one would never end)
COMMANDS = ("check", "describe", "emit", "events", "graph", "report", "resume", "run", "schema", "tasks", "threads",
            "waits")


def _check_command(line: str, fail: Callable[[str], Exception]) -> None:
    """A command step's command is one of COMMANDS (raises `fail(message)` otherwise)."""
    import shlex

    try:
        argv = shlex.split(line)
    except ValueError:
        return  # said when the step runs, with what shlex found
    if argv[:1] == ["chainlang"]:
        argv = argv[1:]
    if argv and not argv[0].startswith("-") and argv[0] not in COMMANDS:
        long_running = argv[0] in ("serve", "worker", "lsp")
        why = "it runs until it is stopped, so the test would never end" if long_running else "not a chainlang command"
        raise fail(f"command: {argv[0]}: {why}; a test step gives one of {', '.join(COMMANDS)}"
                   + (" (test serve's hooks with emit: steps, which run them the same way)" if long_running else ""))


def _project_of(directory: Path) -> Path:
    """The directory of the chainlang.toml above `directory`, else `directory`."""
    from chainlang.config.project import find_config

    found = find_config(directory)
    return found.parent if found is not None else directory.resolve()


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
