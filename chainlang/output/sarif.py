"""Diagnostics as a SARIF 2.1.0 log, for code-scanning uploads.

One run, whose `tool.driver` (with `informationUri`: the docs site) lists every
rule of the catalogue, so that a viewer can describe rules that produced no
result in this run: `id`, the slug as `name`, the title as `shortDescription`,
the rule's docs page as `fullDescription` (its description) and `help` (the
page, as text and markdown: output/rule_docs.py), `helpUri` (the page on the
site), the default level, and `properties.tags` (the rule's group). GitHub
code scanning requires `fullDescription` and `help`. Each result points at
its rule by `ruleId` and `ruleIndex`; a hint is appended to the message text.
When the file's text is at hand, the region carries a `snippet` (the text it
covers) and a `contextRegion` (its lines and one on each side), unless a
secret of the project occurs in those lines: then neither is written.

Locations keep the path as the diagnostic gives it, written as a URI
reference: backslashes become slashes and characters that a URI cannot hold
are percent-encoded. A relative path stays relative, with `uriBaseId`
``%SRCROOT%`` (the root of the checkout, for consumers such as GitHub code
scanning); an absolute path becomes a ``file://`` URI. Regions are 1-based
with an exclusive end column, like SARIF's own, and columns are counted in
Unicode code points (`columnKind`), as chainlang counts them.

A rule's `helpUri` is ``<docs>/checks/<slug>/``, the page mkdocs builds from
docs/checks/<slug>.md. ``<docs>`` is the environment variable
``CHAINLANG_DOCS_URL`` when it holds an absolute URI (``https://...`` or
``file://...``; SARIF requires an absolute URI here), else `DOCS_URL`. The
project has no published site yet, so `DOCS_URL` is a placeholder under the
reserved ``.invalid`` domain: set ``CHAINLANG_DOCS_URL`` to where the site is
served (e.g. a `mkdocs gh-deploy` of the repository) for working links.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import PurePosixPath, PureWindowsPath
from urllib.parse import quote, urlsplit

from typing import TYPE_CHECKING

from chainlang.diagnostics import Diagnostic, Rule
from chainlang.diagnostics.rules import ALL_RULES
from chainlang.output.rule_docs import rule_docs

if TYPE_CHECKING:
    from collections.abc import Mapping

    from chainlang.load.source import SourceFile
    from chainlang.redaction import Redactor

__all__ = ["DOCS_URL", "DOCS_URL_ENV", "SARIF_SCHEMA", "SARIF_VERSION", "docs_url", "help_uri", "render"]

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"

# The docs site's root when CHAINLANG_DOCS_URL does not name one; a placeholder
# (RFC 2606 reserves .invalid) until the site is published.
DOCS_URL = "https://chainlang.invalid/"
DOCS_URL_ENV = "CHAINLANG_DOCS_URL"

_RULE_INDEX = {rule.id: index for index, rule in enumerate(ALL_RULES)}
_WINDOWS_ABSOLUTE = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\)")


def docs_url() -> str:
    """The root of the docs site, ending in ``/``: $CHAINLANG_DOCS_URL if it is an absolute URI, else `DOCS_URL`."""
    value = os.environ.get(DOCS_URL_ENV, "").strip()
    if not value or not urlsplit(value).scheme or any(c.isspace() for c in value):
        return DOCS_URL
    return value if value.endswith("/") else value + "/"


def help_uri(rule: Rule, base: str | None = None) -> str:
    """The URI of a rule's docs page: ``<base>checks/<slug>/``."""
    return f"{docs_url() if base is None else base}checks/{quote(rule.slug)}/"


MAX_SNIPPET = 2000  # characters of a snippet at most (a minified line is cut)


def render(diagnostics: Sequence[Diagnostic], *, tool_version: str,
           sources: "Mapping[str, SourceFile] | None" = None, secrets: "Redactor | None" = None) -> str:
    """The SARIF log of `diagnostics` (masked already); `sources` give the snippets."""
    base = docs_url()
    log = {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "chainlang",
                        "version": tool_version,
                        "informationUri": base,
                        "rules": [_rule(rule, base) for rule in ALL_RULES],
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": [_result(d, (sources or {}).get(d.file), secrets) for d in diagnostics],
            }
        ],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _level(severity: str) -> str:
    return "error" if severity == "error" else "warning"


def _rule(rule: Rule, base: str) -> dict[str, object]:
    page = help_uri(rule, base)
    docs = rule_docs(rule, base, page)
    return {
        "id": rule.id,
        "name": rule.slug,
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": docs.description},
        "help": {"text": docs.text, "markdown": docs.markdown},
        "helpUri": page,
        "defaultConfiguration": {"level": _level(rule.severity)},
        "properties": {"tags": ["chainlang", *docs.tags]},
    }


def _result(d: Diagnostic, source: "SourceFile | None" = None, secrets: "Redactor | None" = None
            ) -> dict[str, object]:
    result: dict[str, object] = {"ruleId": d.rule}
    if d.rule in _RULE_INDEX:
        result["ruleIndex"] = _RULE_INDEX[d.rule]
    result["level"] = _level(d.severity)
    text = d.message if not d.hint else f"{d.message}\nhint: {d.hint}"
    result["message"] = {"text": text}
    physical: dict[str, object] = {"artifactLocation": artifact_location(d.file)}
    if d.line >= 1:
        physical["region"] = region = _region(d)
        if source is not None:
            _add_snippets(physical, region, source, secrets)
    result["locations"] = [{"physicalLocation": physical}]
    return result


def _add_snippets(physical: dict[str, object], region: dict[str, object], source: "SourceFile",
                  secrets: "Redactor | None") -> None:
    """The region's text and its context lines, when the file has those lines and none of
    them holds a secret (a cut through a secret would show part of it)."""
    first, last = int(str(region["startLine"])), int(str(region["endLine"]))
    if last > source.line_count:
        return
    above, below = max(first - 1, 1), min(last + 1, source.line_count)
    lines = [source.line_text(n).removesuffix("\r") for n in range(above, below + 1)]
    if secrets and any(secrets.mask(line) != line for line in lines):
        return
    covered = lines[first - above : last - above + 1]
    start, end = int(str(region["startColumn"])) - 1, int(str(region["endColumn"])) - 1
    if len(covered) == 1:
        text = covered[0][start:end]
    else:
        text = "\n".join([covered[0][start:], *covered[1:-1], covered[-1][:end]])
    region["snippet"] = {"text": text[:MAX_SNIPPET]}
    physical["contextRegion"] = {"startLine": above, "endLine": below,
                                 "snippet": {"text": "\n".join(lines)[:MAX_SNIPPET]}}


def _region(d: Diagnostic) -> dict[str, object]:
    start_column = max(d.column, 1)
    end_line = max(d.end_line, d.line)
    end_column = max(d.end_column, 1)
    if end_line == d.line:
        end_column = max(end_column, start_column)
    return {
        "startLine": d.line,
        "startColumn": start_column,
        "endLine": end_line,
        "endColumn": end_column,
    }


def artifact_location(path: str) -> dict[str, str]:
    """The SARIF `artifactLocation` of a diagnostic's file path."""
    if _WINDOWS_ABSOLUTE.match(path):
        return {"uri": PureWindowsPath(path).as_uri()}
    posix = path.replace("\\", "/")
    if posix.startswith("/"):
        return {"uri": PurePosixPath(posix).as_uri()}
    return {"uri": quote(posix, safe="/"), "uriBaseId": "%SRCROOT%"}
