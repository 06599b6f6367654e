"""Package data (grammar, schemas, stdlib declarations, the rules' docs pages), found
the same way in an installed wheel (chainlang/_data/...) and in a source checkout
(the repo's top, or docs/ for the rules' pages)."""

from __future__ import annotations

from functools import cache
from pathlib import Path


_CHECKOUT = {"checks": "docs/checks"}  # where a checkout keeps what the wheel has in _data/


@cache
def data_dir(name: str) -> Path:
    """The directory `grammar`, `schemas`, `stdlib` or `checks` (docs/checks in a checkout)."""
    package = Path(__file__).resolve().parent
    for candidate in (package / "_data" / name, package.parent / _CHECKOUT.get(name, name)):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"chainlang package data '{name}' is missing: the installation is broken; reinstall chainlang"
    )


def read_text(name: str, filename: str) -> str:
    return (data_dir(name) / filename).read_text(encoding="utf-8")
