"""Diagnostics as a SARIF 2.1.0 log, for code-scanning uploads.

One run, whose `tool.driver` lists every rule of the catalogue (`id`, the slug
as `name`, the title as `shortDescription`, the default level), so that a
viewer can describe rules that produced no result in this run. Each result
points at its rule by `ruleId` and `ruleIndex`; a hint is appended to the
message text.

Locations keep the path as the diagnostic gives it, written as a URI
reference: backslashes become slashes and characters that a URI cannot hold
are percent-encoded. A relative path stays relative, with `uriBaseId`
``%SRCROOT%`` (the root of the checkout, for consumers such as GitHub code
scanning); an absolute path becomes a ``file://`` URI. Regions are 1-based
with an exclusive end column, like SARIF's own, and columns are counted in
Unicode code points (`columnKind`), as chainlang counts them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import PurePosixPath, PureWindowsPath
from urllib.parse import quote

from chainlang.diagnostics import Diagnostic, Rule
from chainlang.diagnostics.rules import ALL_RULES

__all__ = ["SARIF_SCHEMA", "SARIF_VERSION", "render"]

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"

_RULE_INDEX = {rule.id: index for index, rule in enumerate(ALL_RULES)}
_WINDOWS_ABSOLUTE = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\)")


def render(diagnostics: Sequence[Diagnostic], *, tool_version: str) -> str:
    log = {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "chainlang",
                        "version": tool_version,
                        "rules": [_rule(rule) for rule in ALL_RULES],
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": [_result(d) for d in diagnostics],
            }
        ],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _level(severity: str) -> str:
    return "error" if severity == "error" else "warning"


def _rule(rule: Rule) -> dict[str, object]:
    return {
        "id": rule.id,
        "name": rule.slug,
        "shortDescription": {"text": rule.title},
        "defaultConfiguration": {"level": _level(rule.severity)},
    }


def _result(d: Diagnostic) -> dict[str, object]:
    result: dict[str, object] = {"ruleId": d.rule}
    if d.rule in _RULE_INDEX:
        result["ruleIndex"] = _RULE_INDEX[d.rule]
    result["level"] = _level(d.severity)
    text = d.message if not d.hint else f"{d.message}\nhint: {d.hint}"
    result["message"] = {"text": text}
    physical: dict[str, object] = {"artifactLocation": artifact_location(d.file)}
    if d.line >= 1:
        physical["region"] = _region(d)
    result["locations"] = [{"physicalLocation": physical}]
    return result


def _region(d: Diagnostic) -> dict[str, int]:
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
