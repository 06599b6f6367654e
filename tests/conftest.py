"""Fixtures any test file may ask for by name, without importing them.

The plain helpers they are built on live in tests/helpers.py (`from tests.helpers import
cli, records, ...`): the chainlang command in a subprocess, transcripts read back, SARIF.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from jsonschema import Draft4Validator

from tests.helpers import Spawned, sarif_validator


def pytest_configure(config: pytest.Config) -> None:
    """Compile chainlang's modules to bytecode once, in the main process, before any test
    starts the command. Where PYTHONDONTWRITEBYTECODE is set (as on this project's machines)
    no process writes bytecode, and each `chainlang` a test starts compiled every module it
    imports from source again: ~0.3 s of a ~0.5 s cold command, thousands of times in the
    suite. A user's install has its bytecode (pip writes it; a clone's first command does), so
    this is also what users run. A module edited later is compiled from source as before
    (its bytecode no longer matches it)."""
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the main process did it before starting the workers
    import compileall

    import chainlang

    compileall.compile_dir(Path(chainlang.__file__).parent, quiet=1)


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
