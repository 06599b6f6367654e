"""Fixtures any test file may ask for by name, without importing them.

The plain helpers they are built on live in tests/helpers.py (`from tests.helpers import
cli, records, ...`): the chainlang command in a subprocess, transcripts read back, SARIF.
"""

from __future__ import annotations

from typing import Iterator

import pytest
from jsonschema import Draft4Validator

from tests.helpers import Spawned, sarif_validator


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
