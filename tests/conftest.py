"""Fixtures any test file may ask for by name, without importing them.

The plain helpers they are built on live in tests/helpers.py (`from tests.helpers import
cli, records, ...`): the chainlang command in a subprocess, transcripts read back, SARIF.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest
from jsonschema import Draft4Validator

from tests.helpers import Spawned, sarif_validator


def pytest_configure(config: pytest.Config) -> None:
    """Let this suite's processes keep bytecode, as a user's machine does. Where
    PYTHONDONTWRITEBYTECODE is set (as on this project's machines) nothing was kept: each of
    the suite's thousands of `chainlang` processes compiled every module it imported from
    source again (~0.3 s of a ~0.5 s cold command), and each pytest process the suite starts
    (pytester) rewrote and compiled every chainlang module it imported, since pytest rewrites
    the asserts of a plugin's whole package (chainlang.testing is one): 6.6 s for an empty
    test run, 2.6 s with the bytecode kept. The main process compiles the package once before
    the workers start; a module edited later no longer matches its bytecode and is compiled
    again, as usual. (Bytecode is kept in __pycache__ folders, which git ignores.)"""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # the commands and pytest runs the tests start
    sys.dont_write_bytecode = False  # this process: pytest's rewritten test modules and plugins
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the main process compiled the package before starting the workers
    import compileall

    import chainlang

    compileall.compile_dir(Path(chainlang.__file__).parent, quiet=1)


# The test files that take a worker longest (30 s or more each in `pytest --durations=0` of
# 2026-11-29 07:10, 2 cores, in a fresh clone: test_typing's mypy has no cache there), longest first; test_chain_triggers.py early, as its cron test
# waits for the wall clock's next minute (up to 60 s). `make test` runs them before the rest
# (with xdist's --no-loadscope-reorder, which otherwise orders files by their number of
# tests): a file of one long test started last kept one worker busy alone for minutes.
LONGEST_FIRST = ("test_temporal.py", "test_serve.py", "test_wait_worker_kills.py", "test_wait_kills.py",
                 "test_chain_triggers.py", "test_readme_fresh_clone.py", "test_hostile.py", "test_cli.py",
                 "test_waits_cli.py", "test_serve_kill.py", "test_mcp.py", "test_chaintest_hardening.py",
                 "test_wheel.py", "test_report_browser.py", "test_typing.py", "test_chaintest.py",
                 "test_wait_temporal.py", "test_store_postgres.py", "test_lsp.py", "test_run_ends.py",
                 "test_api_typing.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first (LONGEST_FIRST); each file's tests keep their order."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture
def spawned() -> Iterator[Spawned]:
    """Commands the test starts in the background (`spawned.start(cwd, *args)`, or
    `spawned.append(popen)`); any still running when the test ends are killed."""
    procs = Spawned()
    try:
        yield procs
    finally:
        procs.close()


@pytest.fixture(name="sarif_validator", scope="session")
def sarif_validator_fixture() -> Draft4Validator:
    """The SARIF 2.1.0 schema's validator (tests/data/sarif-schema-2.1.0.json)."""
    return sarif_validator()
