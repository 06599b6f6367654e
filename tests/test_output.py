"""The output formats of `chainlang check`: text, json, github and sarif.

Diagnostics are built by hand here; no checker is needed. Text output is
compared with golden strings; SARIF output is validated against the official
SARIF 2.1.0 JSON schema (OASIS errata01), kept byte-exact in tests/data.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft4Validator, FormatChecker

from chainlang import __version__
from chainlang.diagnostics import Diagnostic, Rule
from chainlang.output import FORMATS, render
from chainlang.output.github import escape_data, escape_property
from chainlang.output.sarif import SARIF_SCHEMA, artifact_location, docs_url, help_uri
from chainlang.redaction import Redactor
from chainlang.diagnostics.rules import (
    ALL_RULES,
    EXPR_SYNTAX,
    MISSING_PARAM,
    NOT_A_CHAIN,
    UNKNOWN_EVENT,
    UNKNOWN_KEY,
    YAML_SYNTAX,
)
from chainlang.load.source import SourceFile

DATA = Path(__file__).parent / "data"
SARIF_SCHEMA_FILE = DATA / "sarif-schema-2.1.0.json"
DOCS_CHECKS = Path(__file__).parent.parent / "docs" / "checks"
SARIF_SCHEMA_SHA256 = "ddddcccbf95c7c50c037b5b07eff4140556278ca574ff374db46786b5fce7949"

MAIL = "chains/mail.chain.yaml"
MAIL_TEXT = (
    "name: mail\n"
    "steps:\n"
    "  - emial.send: {to: bob}\n"
    "  - notify.user:\n"
    "      when: '{x >}'\n"
)


def diag(
    rule: Rule,
    message: str,
    file: str,
    line: int,
    column: int,
    end_line: int | None = None,
    end_column: int | None = None,
    *,
    hint: str | None = None,
) -> Diagnostic:
    return Diagnostic(
        rule=rule.id,
        slug=rule.slug,
        severity=rule.severity,
        message=message,
        file=file,
        line=line,
        column=column,
        end_line=line if end_line is None else end_line,
        end_column=column + 1 if end_column is None else end_column,
        hint=hint,
    )


def lines(*text: str) -> str:
    return "\n".join(text) + "\n"


def sources(*files: tuple[str, str]) -> dict[str, SourceFile]:
    return {path: SourceFile(path, text) for path, text in files}


MAIL_SOURCES = sources((MAIL, MAIL_TEXT))
UNKNOWN = diag(UNKNOWN_EVENT, "unknown event 'emial.send'", MAIL, 3, 5, 3, 15, hint="did you mean 'email.send'?")
MISSING = diag(MISSING_PARAM, "required param 'text' is missing", MAIL, 4, 5, 4, 16)
SYNTAX = diag(EXPR_SYNTAX, "expected an operand after '>'", MAIL, 5, 18, 5, 19)


# -- text ------------------------------------------------------------------------


def test_text_golden() -> None:
    out = render([UNKNOWN, MISSING, SYNTAX], "text", MAIL_SOURCES)
    assert out == lines(
        "chains/mail.chain.yaml:3:5: error: unknown event 'emial.send' [CL014 unknown-event]",
        "  3 |   - emial.send: {to: bob}",
        "    |     ^~~~~~~~~~",
        "  hint: did you mean 'email.send'?",
        "",
        "chains/mail.chain.yaml:4:5: warning: required param 'text' is missing [CL016 missing-param]",
        "  4 |   - notify.user:",
        "    |     ^~~~~~~~~~~",
        "",
        "chains/mail.chain.yaml:5:18: error: expected an operand after '>' [CL020 expr-syntax]",
        "  5 |       when: '{x >}'",
        "    |                  ^",
        "",
        "2 errors, 1 warning in 1 file",
    )


def test_text_header_is_the_diagnostic_str_plus_slug() -> None:
    first = render([MISSING], "text", {}).splitlines()[0]
    assert first == str(MISSING)[:-1] + " missing-param]"


def test_text_gutter_widens_with_the_line_number() -> None:
    text = "".join(f"k{n}: {n}\n" for n in range(1, 13))
    d = diag(UNKNOWN_KEY, "unknown key 'k12'", "long.yaml", 12, 1, 12, 4)
    out = render([d], "text", sources(("long.yaml", text)))
    assert out == lines(
        "long.yaml:12:1: error: unknown key 'k12' [CL010 unknown-key]",
        "  12 | k12: 12",
        "     | ^~~",
        "",
        "1 error, 0 warnings in 1 file",
    )


def test_text_tabs_expand_to_tab_stops_and_the_caret_follows() -> None:
    text = "\tkey:\tvalue\nab\tc\n"
    src = sources(("tabs.yaml", text))
    after_tabs = diag(UNKNOWN_KEY, "after tabs", "tabs.yaml", 1, 7, 1, 12)
    mid_stop = diag(UNKNOWN_KEY, "tab off a stop", "tabs.yaml", 2, 4)
    over_tab = diag(UNKNOWN_KEY, "span over a tab", "tabs.yaml", 2, 3, 2, 5)
    out = render([after_tabs, mid_stop, over_tab], "text", src)
    assert out == lines(
        "tabs.yaml:1:7: error: after tabs [CL010 unknown-key]",
        "  1 |     key:    value",
        "    |             ^~~~~",
        "",
        "tabs.yaml:2:4: error: tab off a stop [CL010 unknown-key]",
        "  2 | ab  c",
        "    |     ^",
        "",
        "tabs.yaml:2:3: error: span over a tab [CL010 unknown-key]",
        "  2 | ab  c",
        "    |   ^~~",
        "",
        "3 errors, 0 warnings in 1 file",
    )
    assert "\t" not in out


def test_text_multibyte_and_wide_characters() -> None:
    text = 'title: "héllo 日本語"\ncafe\u0301: 🚀 x\n'
    src = sources(("u.yaml", text))
    wide = diag(UNKNOWN_KEY, "wide span", "u.yaml", 1, 15, 1, 18)
    after_wide = diag(UNKNOWN_KEY, "after wide", "u.yaml", 1, 18)
    combining = diag(UNKNOWN_KEY, "after a combining mark", "u.yaml", 2, 6)
    after_emoji = diag(UNKNOWN_KEY, "after an emoji", "u.yaml", 2, 10)
    out = render([wide, after_wide, combining, after_emoji], "text", src)
    assert out == lines(
        "u.yaml:1:15: error: wide span [CL010 unknown-key]",
        '  1 | title: "héllo 日本語"',
        "    |               ^~~~~~",
        "",
        "u.yaml:1:18: error: after wide [CL010 unknown-key]",
        '  1 | title: "héllo 日本語"',
        "    |                     ^",
        "",
        "u.yaml:2:6: error: after a combining mark [CL010 unknown-key]",
        "  2 | cafe\u0301: 🚀 x",
        "    |     ^",
        "",
        "u.yaml:2:10: error: after an emoji [CL010 unknown-key]",
        "  2 | cafe\u0301: 🚀 x",
        "    |          ^",
        "",
        "4 errors, 0 warnings in 1 file",
    )


def test_text_multiline_span_and_empty_span_get_one_caret() -> None:
    multi = diag(UNKNOWN_EVENT, "spans lines", MAIL, 3, 5, 4, 3)
    empty = diag(UNKNOWN_EVENT, "empty span", MAIL, 3, 5, 3, 5)
    out = render([multi, empty], "text", MAIL_SOURCES)
    carets = [line for line in out.splitlines() if line.startswith("    |")]
    assert carets == ["    |     ^", "    |     ^"]


def test_text_column_past_the_end_of_the_line_points_just_after_it() -> None:
    d = diag(UNKNOWN_KEY, "far right", MAIL, 1, 40, 1, 45)
    out = render([d], "text", MAIL_SOURCES)
    assert out.splitlines()[1:3] == ["  1 | name: mail", "    |           ^"]


@pytest.mark.parametrize("line", [0, -1, 7, 99])
def test_text_line_out_of_range_omits_the_source(line: int) -> None:
    d = diag(YAML_SYNTAX, "broken", MAIL, line, 1)
    out = render([d], "text", MAIL_SOURCES)
    assert out == lines(f"chains/mail.chain.yaml:{line}:1: error: broken [CL001 yaml-syntax]", "", "1 error, 0 warnings in 1 file")


def test_text_the_empty_line_after_a_final_newline_is_shown() -> None:
    d = diag(NOT_A_CHAIN, "unexpected end of file", MAIL, 6, 1)
    out = render([d], "text", MAIL_SOURCES)
    assert out.splitlines()[1:3] == ["  6 |", "    | ^"]


def test_text_file_missing_from_sources_omits_the_source() -> None:
    out = render([UNKNOWN], "text", {})
    assert out == lines(
        "chains/mail.chain.yaml:3:5: error: unknown event 'emial.send' [CL014 unknown-event]",
        "  hint: did you mean 'email.send'?",
        "",
        "1 error, 0 warnings in 1 file",
    )


def test_text_crlf_line_endings_are_not_shown() -> None:
    src = sources(("w.yaml", "a: 1\r\nb: 2\r\n"))
    out = render([diag(UNKNOWN_KEY, "unknown key 'b'", "w.yaml", 2, 1, 2, 2)], "text", src)
    assert "\r" not in out
    assert out.splitlines()[1:3] == ["  2 | b: 2", "    | ^"]


def test_text_control_characters_cannot_reach_the_terminal() -> None:
    src = sources(("c.yaml", "x: \x1b[31mred\x7f\n"))
    d = diag(UNKNOWN_KEY, "bad \x1b[2J key", "c.yaml", 1, 4, 1, 9, hint="drop \x07 it")
    out = render([d], "text", src)
    assert "\x1b" not in out and "\x07" not in out and "\x7f" not in out
    assert out == lines(
        "c.yaml:1:4: error: bad \u241b[2J key [CL010 unknown-key]",
        "  1 | x: \u241b[31mred\u2421",
        "    |    ^~~~~",
        "  hint: drop \u2407 it",
        "",
        "1 error, 0 warnings in 1 file",
    )


def test_text_multiline_hint_is_indented() -> None:
    d = diag(UNKNOWN_EVENT, "unknown event 'x'", MAIL, 3, 5, hint="did you mean one of:\n  email.send\n  email.search")
    out = render([d], "text", {})
    assert out.splitlines()[1:4] == [
        "  hint: did you mean one of:",
        "          email.send",
        "          email.search",
    ]


@pytest.mark.parametrize(
    ("diagnostics", "files_checked", "expected"),
    [
        ([], None, "no problems found in 0 files"),
        ([], 1, "no problems found in 1 file"),
        ([], 3, "no problems found in 3 files"),
        ([UNKNOWN], None, "1 error, 0 warnings in 1 file"),
        ([MISSING], 2, "0 errors, 1 warning in 2 files"),
        ([UNKNOWN, SYNTAX, MISSING], None, "2 errors, 1 warning in 1 file"),
        (
            [UNKNOWN, MISSING, diag(MISSING_PARAM, "m", "b.yaml", 1, 1), diag(YAML_SYNTAX, "y", "c.yaml", 1, 1)],
            None,
            "2 errors, 2 warnings in 3 files",
        ),
        ([UNKNOWN, MISSING], 10, "1 error, 1 warning in 10 files"),
    ],
)
def test_text_summary_line(diagnostics: list[Diagnostic], files_checked: int | None, expected: str) -> None:
    out = render(diagnostics, "text", MAIL_SOURCES, files_checked=files_checked)
    assert out.endswith("\n")
    assert out.splitlines()[-1] == expected


def test_text_empty_input() -> None:
    assert render([], "text", {}, files_checked=4) == "no problems found in 4 files\n"
    assert render([], "text", {}) == "no problems found in 0 files\n"


def test_text_colour() -> None:
    out = render([UNKNOWN], "text", MAIL_SOURCES, color=True)
    assert out == (
        "\x1b[36mchains/mail.chain.yaml:3:5\x1b[0m: \x1b[1;31merror\x1b[0m: unknown event 'emial.send' [CL014 unknown-event]\n"
        "\x1b[34m  3 |\x1b[0m   - emial.send: {to: bob}\n"
        "\x1b[34m    |\x1b[0m     \x1b[1;31m^~~~~~~~~~\x1b[0m\n"
        "  \x1b[1mhint\x1b[0m: did you mean 'email.send'?\n"
        "\n"
        "\x1b[1m1 error, 0 warnings in 1 file\x1b[0m\n"
    )
    warning = render([MISSING], "text", MAIL_SOURCES, color=True)
    assert "\x1b[1;33mwarning\x1b[0m" in warning
    assert "\x1b[1;33m^~~~~~~~~~~\x1b[0m" in warning


def test_text_no_colour_by_default() -> None:
    out = render([UNKNOWN, MISSING, SYNTAX], "text", MAIL_SOURCES)
    assert "\x1b" not in out
    assert out == render([UNKNOWN, MISSING, SYNTAX], "text", MAIL_SOURCES, color=False)


# -- every format ------------------------------------------------------------------


def test_formats() -> None:
    assert FORMATS == ("text", "json", "github", "sarif")


def test_unknown_format_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown output format 'xml'"):
        render([], "xml", {})


@pytest.mark.parametrize("fmt", FORMATS)
def test_order_is_kept_as_given(fmt: str) -> None:
    later = diag(UNKNOWN_KEY, "zzz-first", "z.yaml", 9, 1)
    earlier = diag(UNKNOWN_KEY, "aaa-second", "a.yaml", 1, 1)
    out = render([later, earlier], fmt, {})
    assert out.index("zzz-first") < out.index("aaa-second")


@pytest.mark.parametrize("fmt", FORMATS)
def test_output_is_deterministic(fmt: str) -> None:
    diagnostics = [UNKNOWN, MISSING, SYNTAX]
    first = render(diagnostics, fmt, MAIL_SOURCES, tool_version="1.2.3")
    second = render(list(diagnostics), fmt, sources((MAIL, MAIL_TEXT)), tool_version="1.2.3")
    assert first == second


# -- json --------------------------------------------------------------------------


JSON_KEYS = ["file", "line", "column", "end_line", "end_column", "severity", "rule", "slug", "message", "hint"]


def test_json_fields_and_key_order() -> None:
    out = render([UNKNOWN, MISSING], "json", MAIL_SOURCES)
    items = json.loads(out)
    assert [list(item) for item in items] == [JSON_KEYS, JSON_KEYS]
    assert items[0] == {
        "file": MAIL,
        "line": 3,
        "column": 5,
        "end_line": 3,
        "end_column": 15,
        "severity": "error",
        "rule": "CL014",
        "slug": "unknown-event",
        "message": "unknown event 'emial.send'",
        "hint": "did you mean 'email.send'?",
    }
    assert items[1]["severity"] == "warning"
    assert items[1]["hint"] is None


def test_json_layout() -> None:
    out = render([MISSING], "json", {})
    assert out.startswith('[\n  {\n    "file": "chains/mail.chain.yaml",\n    "line": 4,\n')
    assert out.endswith("\n  }\n]\n")


def test_json_empty_is_an_empty_array() -> None:
    assert render([], "json", {}) == "[]\n"


def test_json_keeps_unicode_and_escapes_what_json_must() -> None:
    d = diag(UNKNOWN_KEY, 'clé "日本"\nnext', "é.yaml", 1, 1)
    out = render([d], "json", {})
    assert "é.yaml" in out and '\\"日本\\"' in out and "\\n" in out
    assert json.loads(out)[0]["message"] == 'clé "日本"\nnext'


# -- github ------------------------------------------------------------------------


def test_github_golden() -> None:
    out = render([UNKNOWN, MISSING], "github", MAIL_SOURCES)
    assert out == lines(
        "::error file=chains/mail.chain.yaml,line=3,col=5,endLine=3,endColumn=15,"
        "title=CL014 unknown-event::unknown event 'emial.send'%0Ahint: did you mean 'email.send'?",
        "::warning file=chains/mail.chain.yaml,line=4,col=5,endLine=4,endColumn=16,"
        "title=CL016 missing-param::required param 'text' is missing",
    )


def test_github_escapes_message_data() -> None:
    d = diag(UNKNOWN_KEY, "100% sure\r\nnext: a, b %0A", "a.yaml", 1, 2, 1, 3)
    out = render([d], "github", {})
    assert out == (
        "::error file=a.yaml,line=1,col=2,endLine=1,endColumn=3,title=CL010 unknown-key"
        "::100%25 sure%0D%0Anext: a, b %250A\n"
    )


def test_github_escapes_properties() -> None:
    d = diag(UNKNOWN_KEY, "m", "dir,x/a:b%c\n.yaml", 2, 1)
    out = render([d], "github", {})
    # control characters in file names are shown as escapes in every format, then GitHub-escaped
    assert out.startswith("::error file=dir%2Cx/a%3Ab%25c\\x0a.yaml,line=2,")
    assert out.count("\n") == 1


@pytest.mark.parametrize(
    ("raw", "data", "prop"),
    [
        ("plain", "plain", "plain"),
        ("%", "%25", "%25"),
        ("%0A", "%250A", "%250A"),
        ("a\rb\nc", "a%0Db%0Ac", "a%0Db%0Ac"),
        ("k: v, w", "k: v, w", "k%3A v%2C w"),
        ("::error::", "::error::", "%3A%3Aerror%3A%3A"),
    ],
)
def test_github_escape_functions(raw: str, data: str, prop: str) -> None:
    assert escape_data(raw) == data
    assert escape_property(raw) == prop


def test_github_multiline_span_sends_no_columns() -> None:
    d = diag(UNKNOWN_EVENT, "m", "a.yaml", 3, 5, 6, 2)
    assert render([d], "github", {}) == "::error file=a.yaml,line=3,endLine=6,title=CL014 unknown-event::m\n"


def test_github_whole_file_diagnostic() -> None:
    d = diag(YAML_SYNTAX, "not YAML", "a.yaml", 0, 0, 0, 0)
    assert render([d], "github", {}) == "::error file=a.yaml,title=CL001 yaml-syntax::not YAML\n"


def test_github_empty() -> None:
    assert render([], "github", {}) == ""


# -- sarif -------------------------------------------------------------------------


def sarif(diagnostics: list[Diagnostic], validator: Draft4Validator, **kwargs: Any) -> dict[str, Any]:
    out = render(diagnostics, "sarif", MAIL_SOURCES, **kwargs)
    assert out.endswith("}\n")
    log = json.loads(out)
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)
    return log  # type: ignore[no-any-return]


def test_sarif_schema_fixture_is_the_official_one() -> None:
    data = SARIF_SCHEMA_FILE.read_bytes()
    assert hashlib.sha256(data).hexdigest() == SARIF_SCHEMA_SHA256
    assert json.loads(data)["id"] == SARIF_SCHEMA


def test_sarif_log_is_valid(sarif_validator: Draft4Validator) -> None:
    odd = [
        diag(UNKNOWN_KEY, "spaces and unicode", "my chains/naïve #1.yaml", 1, 1),
        diag(UNKNOWN_KEY, "windows relative", "chains\\sub\\a.yaml", 1, 1),
        diag(UNKNOWN_KEY, "windows absolute", "C:\\repo\\a b.yaml", 1, 1),
        diag(UNKNOWN_KEY, "posix absolute", "/srv/repo/a.yaml", 1, 1),
        diag(UNKNOWN_KEY, "colon", "a:b.yaml", 1, 1),
        diag(YAML_SYNTAX, "whole file", "z.yaml", 0, 0, 0, 0),
    ]
    log = sarif([UNKNOWN, MISSING, SYNTAX, *odd], sarif_validator)
    assert log["$schema"] == SARIF_SCHEMA
    assert log["version"] == "2.1.0"
    assert len(log["runs"]) == 1
    assert len(log["runs"][0]["results"]) == 9


def test_sarif_empty_log_is_valid(sarif_validator: Draft4Validator) -> None:
    log = sarif([], sarif_validator)
    assert log["runs"][0]["results"] == []


def test_sarif_driver_lists_every_rule(sarif_validator: Draft4Validator) -> None:
    driver = sarif([], sarif_validator, tool_version="9.8.7")["runs"][0]["tool"]["driver"]
    assert driver["name"] == "chainlang"
    assert driver["version"] == "9.8.7"
    rules = driver["rules"]
    assert [(r["id"], r["name"], r["shortDescription"]["text"], r["defaultConfiguration"]["level"]) for r in rules] == [
        (rule.id, rule.slug, rule.title, rule.severity) for rule in ALL_RULES
    ]
    assert [r["helpUri"] for r in rules] == [help_uri(rule) for rule in ALL_RULES]
    assert driver["informationUri"] == docs_url()


def test_sarif_rules_carry_their_docs_page_as_help(sarif_validator: Draft4Validator) -> None:
    """GitHub code scanning requires fullDescription and help on every rule: they come from
    the rule's page in docs/checks, with its links made absolute on the docs site."""
    rules = sarif([], sarif_validator)["runs"][0]["tool"]["driver"]["rules"]
    base = docs_url()
    for rule, described in zip(ALL_RULES, rules):
        page = (DOCS_CHECKS / f"{rule.slug}.md").read_text(encoding="utf-8")
        full = described["fullDescription"]["text"]
        assert full != rule.title and "\n" not in full and "**" not in full, (rule.id, full)
        assert not re.search(r"\]\([^)\s]*\.md", full), (rule.id, "a link is left in", full)
        prose = next(p for p in page.split("\n\n") if not p.startswith(("#", "**Severity:**", "<!--")))
        first_words = " ".join(prose.split()[:3]).replace("`", "")
        assert full.startswith(first_words), (rule.id, full[:80], first_words)
        markdown = described["help"]["markdown"]
        assert not markdown.startswith("# ") and "<!--" not in markdown and "\n## " in markdown, rule.id
        assert not re.search(r"\]\((?!https?://|#)", markdown), (rule.id, "a relative link is left")
        assert described["help"]["text"] == f"{full}\n\nExamples and how to fix it: {help_uri(rule)}\n"
        group = re.search(r"\*\*Group:\*\* \[[^]]+\]\(index\.md#([a-z-]+)\)", page)
        assert group is not None and described["properties"]["tags"] == ["chainlang", group.group(1)], rule.id
    # links: a sibling rule's page, a reference page with its anchor, the checks index
    ref_secret = rules[[r.id for r in ALL_RULES].index(next(r.id for r in ALL_RULES if r.slug == "ref-secret"))]
    assert f"]({base}reference/references/#secrets)" in ref_secret["help"]["markdown"]
    assert f"]({base}checks/ref-input/)" in ref_secret["help"]["markdown"]


def test_sarif_help_links_follow_the_docs_url(monkeypatch: pytest.MonkeyPatch,
                                              sarif_validator: Draft4Validator) -> None:
    monkeypatch.setenv("CHAINLANG_DOCS_URL", "https://docs.example.org/chainlang")
    driver = sarif([], sarif_validator)["runs"][0]["tool"]["driver"]
    assert driver["informationUri"] == "https://docs.example.org/chainlang/"
    assert "](https://docs.example.org/chainlang/checks/" in "".join(r["help"]["markdown"] for r in driver["rules"])


def test_sarif_results_carry_snippets_unless_a_secret_is_near(sarif_validator: Draft4Validator) -> None:
    region = sarif([UNKNOWN], sarif_validator)["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert region["region"]["snippet"] == {"text": "emial.send"}
    assert region["contextRegion"] == {"startLine": 2, "endLine": 4, "snippet": {
        "text": "steps:\n  - emial.send: {to: bob}\n  - notify.user:"}}
    two_lines = diag(UNKNOWN_KEY, "two lines", MAIL, 3, 18, 4, 9)
    region = sarif([two_lines], sarif_validator)["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert region["region"]["snippet"] == {"text": "to: bob}\n  - noti"}
    # a secret of the project on a context line: no snippet at all (a cut could show part of it)
    out = json.loads(render([UNKNOWN], "sarif", MAIL_SOURCES, secrets=Redactor(["notify.user"])))
    physical = out["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert "snippet" not in physical["region"] and "contextRegion" not in physical
    assert "notify.user" not in json.dumps(out["runs"][0]["results"])
    # a file whose text is not at hand, or a region past its end: the location alone
    alone = json.loads(render([UNKNOWN], "sarif", {}))["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert "snippet" not in alone["region"] and "contextRegion" not in alone
    beyond = diag(UNKNOWN_KEY, "past the end", MAIL, 40, 1, 40, 2)
    physical = sarif([beyond], sarif_validator)["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert "snippet" not in physical["region"] and "contextRegion" not in physical


def test_sarif_default_tool_version(sarif_validator: Draft4Validator) -> None:
    assert sarif([], sarif_validator)["runs"][0]["tool"]["driver"]["version"] == __version__


def test_sarif_results(sarif_validator: Draft4Validator) -> None:
    run = sarif([UNKNOWN, MISSING], sarif_validator)["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    first, second = run["results"]
    assert first == {
        "ruleId": "CL014",
        "ruleIndex": first["ruleIndex"],
        "level": "error",
        "message": {"text": "unknown event 'emial.send'\nhint: did you mean 'email.send'?"},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": "chains/mail.chain.yaml", "uriBaseId": "%SRCROOT%"},
                    "region": {"startLine": 3, "startColumn": 5, "endLine": 3, "endColumn": 15,
                               "snippet": {"text": "emial.send"}},
                    "contextRegion": {"startLine": 2, "endLine": 4,
                                      "snippet": {"text": "steps:\n  - emial.send: {to: bob}\n  - notify.user:"}},
                }
            }
        ],
    }
    assert rules[first["ruleIndex"]]["id"] == "CL014"
    assert second["level"] == "warning"
    assert second["message"] == {"text": "required param 'text' is missing"}
    assert rules[second["ruleIndex"]]["id"] == "CL016"
    assert run["columnKind"] == "unicodeCodePoints"


def test_sarif_whole_file_and_unknown_rule(sarif_validator: Draft4Validator) -> None:
    internal = Diagnostic("CL999", "internal", "error", "oops", "a.yaml", 2, 3, 1, 1)
    whole = diag(YAML_SYNTAX, "not YAML", "a.yaml", 0, 0, 0, 0)
    internal_result, whole_result = sarif([internal, whole], sarif_validator)["runs"][0]["results"]
    assert internal_result["ruleId"] == "CL999" and "ruleIndex" not in internal_result
    # an end before the start is pulled up to the start
    assert internal_result["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 2,
        "startColumn": 3,
        "endLine": 2,
        "endColumn": 3,
    }
    assert "region" not in whole_result["locations"][0]["physicalLocation"]


@pytest.mark.parametrize(
    ("path", "location"),
    [
        ("chains/a.chain.yaml", {"uri": "chains/a.chain.yaml", "uriBaseId": "%SRCROOT%"}),
        ("./a.yaml", {"uri": "./a.yaml", "uriBaseId": "%SRCROOT%"}),
        ("../up/a.yaml", {"uri": "../up/a.yaml", "uriBaseId": "%SRCROOT%"}),
        ("chains\\sub\\a.yaml", {"uri": "chains/sub/a.yaml", "uriBaseId": "%SRCROOT%"}),
        ("my chains/naïve #1.yaml", {"uri": "my%20chains/na%C3%AFve%20%231.yaml", "uriBaseId": "%SRCROOT%"}),
        ("a:b.yaml", {"uri": "a%3Ab.yaml", "uriBaseId": "%SRCROOT%"}),
        ("/srv/repo/a b.yaml", {"uri": "file:///srv/repo/a%20b.yaml"}),
        ("C:\\repo\\a.yaml", {"uri": "file:///C:/repo/a.yaml"}),
        ("d:/repo/a.yaml", {"uri": "file:///d:/repo/a.yaml"}),
    ],
)
def test_sarif_artifact_location(path: str, location: dict[str, str]) -> None:
    assert artifact_location(path) == location


def test_sarif_uri_format_is_really_checked() -> None:
    """Without a URI validator installed, jsonschema skips `format` silently."""
    pytest.importorskip("rfc3986_validator")
    checker = FormatChecker()
    assert not checker.conforms("my chains/a.yaml", "uri-reference")
    assert checker.conforms(artifact_location("my chains/a.yaml")["uri"], "uri-reference")
