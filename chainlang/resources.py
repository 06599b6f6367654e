"""Package data (grammar, schemas, stdlib declarations), found the same way
in an installed wheel (chainlang/_data/...) and in a source checkout (repo top)."""

from __future__ import annotations

from functools import cache
from pathlib import Path


@cache
def data_dir(name: str) -> Path:
    """The directory `grammar`, `schemas` or `stdlib`."""
    package = Path(__file__).resolve().parent
    for candidate in (package / "_data" / name, package.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"chainlang package data '{name}' is missing: the installation is broken; reinstall chainlang"
    )


def read_text(name: str, filename: str) -> str:
    return (data_dir(name) / filename).read_text(encoding="utf-8")
