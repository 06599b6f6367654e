"""The pytest plugin (entry point `pytest11`): `*.chaintest.yaml` files are collected as
tests, and the `chain_project` fixture gives Python tests the same project copies.

    pytest                        # runs the chaintest files with the other tests
    pytest --chaintest-update     # writes the golden transcripts (expect.transcript)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chainlang.testing.project import ChainProject
from chainlang.testing.isolate import run_isolated
from chainlang.testing.runner import CaseFailed
from chainlang.testing.spec import ChaintestError, TestCase, TestFile, is_test_file, load_test_file

__all__ = ["ChaintestFile", "ChaintestItem", "chain_project"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chainlang")
    group.addoption("--chaintest-update", action="store_true", default=False,
                    help="chainlang: write the golden transcripts of *.chaintest.yaml files instead of comparing")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if is_test_file(file_path):
        collector: ChaintestFile = ChaintestFile.from_parent(parent, path=file_path)
        return collector
    return None


class ChaintestFile(pytest.File):
    """A `*.chaintest.yaml` file: one item per test in it."""

    def collect(self) -> Iterator[pytest.Item]:
        try:
            spec = load_test_file(self.path)
        except ChaintestError as exc:
            raise self.CollectError(str(exc)) from None
        for case in spec.tests:
            yield ChaintestItem.from_parent(self, name=case.name, spec=spec, case=case)


class ChaintestItem(pytest.Item):
    """One test of a chaintest file."""

    def __init__(self, *, spec: TestFile, case: TestCase, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        self.case = case

    def runtest(self) -> None:
        # in a process of its own, killed past the test's timeout (a step that hangs cannot hang pytest)
        run_isolated(self.spec, self.case, update=bool(self.config.getoption("chaintest_update")))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        if isinstance(excinfo.value, CaseFailed):
            return f"{self.path}:{self.case.line}: {self.case.name}\n{excinfo.value}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.case.line - 1, f"chaintest: {self.case.name}"


@pytest.fixture
def chain_project(tmp_path: Path) -> Iterator[Callable[..., ChainProject]]:
    """A factory: `chain_project(SOURCE, tools=..., models=..., now=...)` copies the project at
    SOURCE into the test's temporary directory and returns it, ready to `run`, `emit` and
    `command` (chainlang.testing.ChainProject)."""
    made: list[ChainProject] = []

    def make(source: str | Path, *, tools: dict[str, Any] | None = None, models: Any = None,
             now: str | None = None) -> ChainProject:
        project = ChainProject(source, tmp_path / f"project-{len(made) + 1}", tools=tools, models=models, now=now)
        made.append(project)
        return project

    yield make
    for project in made:
        project.close()
