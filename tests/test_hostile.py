"""Hostile input: no chain, however malformed, may raise, hang, lose data or print a traceback.

Chains are written by people, by LLMs and by attackers. This file holds:

1. property tests (hypothesis, derandomized and bounded):
   (a) random and mutated bytes through ``load_file`` + ``check_loaded``;
   (b) YAML-ish text built from YAML tokens and the language's own words;
   (c) valid-shaped chain structures dumped as JSON or YAML: every diagnostic
       lies inside the file, diagnostics are sorted and deterministic, and an
       expression error points at the offending character;
   (d) expression strings through the parser, the template parser and the
       static type checker: only ``ExprSyntaxError`` may come out;
2. regression tests, one per problem found by hand, each with its reproducer;
3. CLI end-to-end runs on the nastiest files, in a subprocess with a time limit
   and a memory limit.

The error goldens ``tests/chains/err/hostile-*`` cover one malformed shape each.
``CHAINLANG_FUZZ_EXAMPLES=2000`` gives a longer local run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainlang.pipeline import LoadedFile, check_loaded, default_registry, load_file
from chainlang.diagnostics import Diagnostic, sort_diagnostics
from chainlang.expr import (
    ANY,
    ExprSyntaxError,
    check_expression,
    check_template,
    parse_expression,
    parse_template,
)
from chainlang.diagnostics.rules import RULES_BY_ID

pytestmark = pytest.mark.slow  # the fast tier (make test-fast) leaves it out

HERE = Path(__file__).parent
CHAINS = HERE / "chains"
TOOLS = str(CHAINS / "golden_tools.py")
REGISTRY = default_registry([TOOLS])  # built once for the module

EXAMPLES = int(os.environ.get("CHAINLANG_FUZZ_EXAMPLES", "0")) or None


def bounded(n: int, deadline_s: float = 5.0) -> settings:
    """Deterministic, bounded settings: the whole file stays well under a minute on 2 cores."""
    return settings(
        max_examples=EXAMPLES or n,
        derandomize=True,
        database=None,
        deadline=timedelta(seconds=deadline_s),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


# ====================================================================== helpers


def check_bytes(data: bytes, name: str = "hostile.chain.yaml") -> tuple[LoadedFile, list[Diagnostic]]:
    loaded = load_file(name, data=data)
    return loaded, check_loaded([loaded], REGISTRY)


def assert_sane(loaded: LoadedFile, diags: list[Diagnostic], *, in_file: bool) -> None:
    """What every answer of the checker must satisfy. `in_file`: positions lie inside the text."""
    assert isinstance(diags, list)
    text = loaded.source.text
    lines = text.count("\n") + 1
    for d in diags:
        assert isinstance(d, Diagnostic), d
        rule = RULES_BY_ID.get(d.rule)
        assert rule is not None and rule.slug == d.slug, d
        assert d.severity in ("error", "warning"), d
        assert isinstance(d.message, str) and d.message.strip(), d
        assert "Traceback" not in d.message, d
        assert d.file == loaded.path, d
        assert d.line >= 1 and d.column >= 1, d
        assert (d.end_line, d.end_column) >= (d.line, d.column), d
        if in_file:
            assert d.line <= lines, f"{d} is past the last line ({lines})"
            width = len(loaded.source.line_text(d.line))
            assert d.column <= width + 1, f"{d} is past the end of its line ({width} characters)"
    assert diags == sort_diagnostics(diags), "diagnostics are not sorted (or hold duplicates)"


def assert_deterministic(data: bytes, diags: list[Diagnostic], name: str = "hostile.chain.yaml") -> None:
    _, again = check_bytes(data, name)
    assert again == diags, "checking the same bytes twice gave different diagnostics"


_TOKEN_AT = re.compile(r"^unexpected '([)\]}|+*/%<>=!,.(\[])'")


def assert_expression_columns(loaded: LoadedFile, diags: list[Diagnostic]) -> None:
    """An expression error names its token: the file must hold that token at the reported column."""
    for d in diags:
        if d.rule != "CL020":
            continue
        m = _TOKEN_AT.match(d.message)
        if m:
            want = m.group(1)
        elif d.message.startswith("single '}'"):
            want = "}"
        elif d.message.startswith("'{' is not closed"):
            want = "{"
        else:
            continue
        line = loaded.source.line_text(d.line)
        got = line[d.column - 1 : d.column]
        assert got == want, f"{d}: the file has {got!r} there, not {want!r}; line {d.line}: {line!r}"


# ====================================================================== (a) random bytes

SEEDS: list[bytes] = [p.read_bytes() for p in sorted((CHAINS / "ok").glob("*.yaml"))] + [
    b"steps:\n  - tools.now\n  - user.notify: {message: \"It is {tools.now.time}\"}\n",
    b"[\"tools.now\", {\"event\": \"user.notify\", \"params\": {\"message\": \"{tools.now.date}\"}}]\n",
    b"- trigger: post:email.search\n  condition: \"matches | length > 0\"\n  action: [tools.now]\n",
    b"steps:\n  - if: \"{tools.now.hour} > 12\"\n    then: [tools.now]\n    else:\n      - parallel: [tools.now, tools.now]\n",
    b"a: &a [x, x]\nsteps:\n  - user.notify: {message: hi, title: *a}\n",
    b"steps:\n  - user.notify:\n      message: |\n        line {tools.now.date}\n        more\n",
]

INTERESTING = [
    b"\t", b"\r", b"\r\n", b"\x00", b"\x1b", b"\x7f", b"\x85", b"\xff", b"\xc0\x80", b"\xed\xa0\x80",
    b"\xef\xbb\xbf", b"\xe2\x80\xae", b"\xf0\x9f\x8e\x89", b"{", b"}", b"{{", b"}}", b"[", b"]", b"\"", b"'",
    b"\\", b"\\u", b": ", b"- ", b"? ", b"&a ", b"*a", b"*b", b"!!python/object ", b"!x ", b"<<: ", b"|\n",
    b">-\n", b"|2+\n", b"---\n", b"...\n", b"%YAML 1.2\n", b"%TAG ! x\n", b"#", b"  ", b"\n", b"1e400",
    b".nan", b"0x" + b"f" * 40, b"(" * 70, b"[" * 70, b"{tools.now.date", b" | nope", b"~", b",",
]


@st.composite
def mutated_seed(draw: Any) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["insert", "insert", "delete", "replace", "duplicate", "truncate"]))
        pos = draw(st.integers(0, len(data)))
        if op == "insert":
            data[pos:pos] = draw(st.one_of(st.sampled_from(INTERESTING), st.binary(min_size=1, max_size=6)))
        elif op == "delete":
            del data[pos : pos + draw(st.integers(1, 12))]
        elif op == "replace" and pos < len(data):
            data[pos] = draw(st.integers(0, 255))
        elif op == "duplicate":
            end = min(len(data), pos + draw(st.integers(1, 40)))
            data[end:end] = data[pos:end]
        elif op == "truncate":
            del data[pos:]
    return bytes(data)


random_bytes = st.one_of(st.binary(max_size=400), mutated_seed(), mutated_seed())


@given(data=random_bytes, hooks=st.booleans())
@bounded(1200)
def test_random_bytes_only_give_diagnostics(data: bytes, hooks: bool) -> None:
    name = "fuzz.hooks.yaml" if hooks else "fuzz.chain.yaml"
    loaded, diags = check_bytes(data, name)
    assert_sane(loaded, diags, in_file=False)


# ====================================================================== (b) YAML-ish token soup

KEYS = [
    "steps", "event", "params", "if", "then", "else", "parallel", "max_parallel", "hooks", "trigger",
    "condition", "action", "id", "foreach", "as", "retry", "attempts", "delay", "timeout", "on_error",
    "inputs", "outputs", "events", "payload", "limits", "max_steps", "max_depth", "allow", "chain",
    "chainlang", "set", "cancel", "after", "priority", "mode", "max", "decide", "description", "<<",
    "type", "default", "properties", "items", "pattern", "$ref", "message", "team", "query", "steps ",
]
EVENTS = [
    "tools.now", "user.notify", "email.search", "email.send", "team.members", "calendar.search",
    "http.request", "tools.date_calc", "memory.search", "a.b.c", "nope.nope", "Tools.Now", "tools",
    "tools.now.result", "post:email.*", "pre:http.request", "post:tools.now", "during:x.y",
]
SCALARS = [
    "1", "-1", "0", "3", "1000001", "1e400", ".inf", ".nan", "0x1f", "0o7", "true", "false", "yes", "null",
    "~", "''", '""', "1s", "500ms", "5m", "1h30m", "fail", "continue", "break", "queued", "x", "Sarah",
    "string", "integer", "object", "{type: string}", "[a, b]", "[]", "{}", "é", "🎉", "ｔ",
]
TEMPLATES = [
    '"{tools.now.date}"', '"{tools.now.date"', '"a } b"', "'{{x}}'", '"{{x}"', '"{x | nope}"',
    '"{tools.now.hour + }"', '"{(((1}"', "\"{'a' matches '(a+)+$'}\"", '"{email.search.result.matches[0].sender}"',
    '"{inputs.who}"', '"{item}"', '"{run.id}"', '"{tools.now.date | default(\'x\')}"', "{tools.now.result}",
    '"\\ud800"', '"\\u00e9 {x"', "tools.now.hour > 3 and", "(tools.now.hour", "sender contains 'Sarah'",
]
INDICATORS = [
    "- ", ": ", "? ", "[", "]", "{", "}", ", ", "&a ", "*a", "&b ", "*b", "!!str ", "!!python/object ",
    "!x ", "!!binary ", "| ", ">- ", "|2 ", "# c", "'", '"', "\t", "---", "...", "%YAML 1.2", "<<: *a",
]

word = st.sampled_from(KEYS + EVENTS + SCALARS + TEMPLATES + INDICATORS)
indent = st.integers(0, 5).map(lambda n: "  " * n)
yaml_line = st.one_of(
    st.tuples(indent, st.sampled_from(KEYS + EVENTS), st.sampled_from(SCALARS + TEMPLATES + EVENTS + [""]))
    .map(lambda t: f"{t[0]}{t[1]}: {t[2]}"),
    st.tuples(indent, st.sampled_from(EVENTS + TEMPLATES + SCALARS)).map(lambda t: f"{t[0]}- {t[1]}"),
    st.tuples(indent, st.sampled_from(KEYS + EVENTS), st.sampled_from(SCALARS + TEMPLATES + EVENTS))
    .map(lambda t: f"{t[0]}- {t[1]}: {t[2]}"),
    st.tuples(indent, st.lists(word, min_size=1, max_size=6)).map(lambda t: t[0] + " ".join(t[1])),
)
yaml_text = st.tuples(
    st.sampled_from(["", "steps:\n", "hooks:\n", "chainlang: 1\nsteps:\n", "\ufeff", "---\n"]),
    st.lists(yaml_line, max_size=18),
    st.sampled_from(["\n", "\n", "\r\n"]),
).map(lambda t: t[0] + t[2].join(t[1]) + t[2])


@given(text=yaml_text, hooks=st.booleans())
@bounded(1200)
def test_yaml_token_soup_only_gives_diagnostics(text: str, hooks: bool) -> None:
    name = "soup.hooks.yaml" if hooks else "soup.chain.yaml"
    data = text.encode("utf-8")
    loaded, diags = check_bytes(data, name)
    assert_sane(loaded, diags, in_file=False)


# ====================================================================== (c) valid-shaped chains

STEP_EVENTS = ["tools.now", "user.notify", "email.search", "email.send", "team.members", "calendar.search",
               "http.request", "tools.date_calc", "nope.event", "Bad.Name"]
PARAM_NAMES = ["message", "title", "level", "query", "sender", "days", "team", "to", "subject", "url",
               "from", "add", "people", "date_range", "extra", "decide"]
REFS = ["tools.now.date", "tools.now.hour", "tools.now.result", "email.search.result.matches",
        "email.search.matches[0].sender", "team.members[-1].members", "inputs.who", "item", "run.id",
        "nope.nope", "first.result", "tools.now.nope"]
EXPRS = st.one_of(
    st.sampled_from(REFS),
    st.sampled_from(REFS).map(lambda r: f"{r} | length"),
    st.sampled_from(REFS).map(lambda r: f"{r} | default('x') | upper"),
    st.sampled_from(REFS).map(lambda r: f"{r} == 'Sarah'"),
    st.sampled_from(REFS).map(lambda r: f"({r} + 1) * 2"),
    st.sampled_from(REFS).map(lambda r: f"{r} | nope"),
)
# broken pieces: each names its offending token, which assert_expression_columns looks for in the file
BROKEN_TEMPLATE = st.sampled_from(["{tools.now.hour + )}", "{tools.now.date ]}", "{(tools.now.hour}",
                                   "{tools.now.date", " } ", "{tools.now..date}", "{1 ** 2}", "{a | }"])
BROKEN_CONDITION = st.sampled_from(["tools.now.hour + )", "tools.now.date ]", "tools.now..hour", "1 ** 2",
                                    "(tools.now.hour", "tools.now.hour >"])
# U+0085, U+2028 and U+2029 are left out: libyaml counts them as line breaks (test_unicode_line_separators)
TEXT = st.text(
    alphabet=st.one_of(
        st.characters(blacklist_categories=("Cs", "Zl", "Zp"), blacklist_characters="{}\x85"),
        st.sampled_from(list(" \n\t'\"\\:#-&*!|>%@`,[]é🎉👩‍👧\u0301\u202e\x00\x1b")),
    ),
    max_size=12,
)
template_string = st.lists(
    st.one_of(TEXT, TEXT, st.just("{{"), st.just("}}"), EXPRS.map(lambda e: "{" + e + "}"), BROKEN_TEMPLATE),
    max_size=5,
).map("".join)
condition = st.one_of(EXPRS, EXPRS.map(lambda e: "{" + e + "}"), BROKEN_CONDITION)
scalar_value = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.floats(allow_nan=False, allow_infinity=False),
    template_string,
)
param_value = st.recursive(
    scalar_value,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(PARAM_NAMES), inner, max_size=3)),
    max_leaves=6,
)
params = st.dictionaries(st.sampled_from(PARAM_NAMES), param_value, max_size=4)
ident = st.sampled_from(["first", "second", "x1", "inputs", "Bad", "my id", "item"])
duration = st.sampled_from(["30s", "500ms", "1h30m", "0s", "8d", "soon", 5])

canonical_step = st.fixed_dictionaries(
    {"event": st.sampled_from(STEP_EVENTS)},
    optional={
        "params": params, "id": ident, "if": condition, "foreach": condition, "as": ident,
        "timeout": duration, "on_error": st.sampled_from(["fail", "continue", "break", "ignore"]),
        "retry": st.fixed_dictionaries({}, optional={"attempts": st.integers(-1, 200), "delay": duration}),
        "description": TEXT, "decide": template_string,
    },
)
leaf_step = st.one_of(
    st.sampled_from(STEP_EVENTS),
    canonical_step,
    st.builds(lambda e, p: {e: p}, st.sampled_from(STEP_EVENTS), params),
)


def _blocks(children: Any) -> Any:
    kids = st.lists(children, max_size=3)
    return st.one_of(
        kids,  # parallel shorthand
        st.fixed_dictionaries({"parallel": kids}, optional={"max_parallel": st.integers(0, 2000), "id": ident}),
        st.fixed_dictionaries({"steps": kids}, optional={"if": condition, "on_error": st.just("continue")}),
        st.fixed_dictionaries({"if": condition, "then": kids}, optional={"else": kids}),
    )


step = st.recursive(leaf_step, _blocks, max_leaves=8)
steps = st.lists(step, max_size=6)
chain_doc = st.one_of(
    steps,
    st.fixed_dictionaries(
        {"steps": steps},
        optional={
            "chainlang": st.sampled_from([1, 2, "1"]),
            "chain": st.sampled_from(["reports.weekly", "Bad", "tools.now"]),
            "inputs": st.dictionaries(st.sampled_from(["who", "n"]),
                                      st.sampled_from([{"type": "string"}, {"type": "integer", "default": 3}, "string",
                                                       {"type": "banana"}]), max_size=2),
            "outputs": st.dictionaries(st.sampled_from(["out", "summary"]), template_string, max_size=2),
            "limits": st.fixed_dictionaries({}, optional={"max_steps": st.integers(0, 2_000_000), "timeout": duration}),
            "allow": st.lists(st.sampled_from(["tools.*", "user.notify", "Bad glob", "email.*"]), max_size=3),
        },
    ),
)

_ASTRAL = re.compile(r"[\U00010000-\U0010FFFF]")


@st.composite
def dumped_chain(draw: Any) -> bytes:
    doc = draw(chain_doc)
    if draw(st.booleans()):
        indent_ = draw(st.sampled_from([None, 2]))
        text = json.dumps(doc, indent=indent_, ensure_ascii=False)
        if draw(st.booleans()) and not _ASTRAL.search(text):  # astral escapes: test_json_surrogate_pair_escapes
            text = json.dumps(doc, indent=indent_, ensure_ascii=True)
    else:
        import ruamel.yaml

        yaml = ruamel.yaml.YAML(typ="safe", pure=True)
        yaml.default_flow_style = draw(st.sampled_from([False, True, None]))
        yaml.width = draw(st.sampled_from([20, 80, 4096]))
        yaml.allow_unicode = draw(st.booleans())
        out = StringIO()
        yaml.dump(doc, out)
        text = out.getvalue()
    return text.encode("utf-8")


@given(data=dumped_chain())
@bounded(400, deadline_s=10)
def test_valid_shaped_chains_point_inside_the_file(data: bytes) -> None:
    loaded, diags = check_bytes(data)
    assert_sane(loaded, diags, in_file=True)
    assert_expression_columns(loaded, diags)
    assert_deterministic(data, diags)


@given(data=dumped_chain())
@bounded(150, deadline_s=10)
def test_valid_shaped_chains_with_crlf_point_inside_the_file(data: bytes) -> None:
    """The same with Windows line ends (YAML reads them as plain line breaks)."""
    data = data.replace(b"\n", b"\r\n")
    loaded, diags = check_bytes(data)
    assert_sane(loaded, diags, in_file=True)
    assert_expression_columns(loaded, diags)


# ====================================================================== (d) expressions

EXPR_TOKENS = [
    "a", "b", "tools.now.date", "x1", "_y", "item", "inputs.who", "run.id", "and", "or", "not", "AND", "OR",
    "NOT", "in", "not in", "contains", "matches", "startswith", "endswith", "true", "false", "null", "0",
    "-1", "2.5", "1e3", "1e400", "99999999999999999999999999999", "'a'", '"b"', "''", "'\\u00e9'", "'it\\'s'",
    "'", '"', "+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "=", "!", "&&", "||", ".", ",", "|",
    "(", ")", "[", "]", "{", "}", "{{", "}}", ":", "#", "é", "🎉", "\\", "length", "default(", "join(',')",
    "round(2)", "nope", "__class__", "[0]", "[-1]", "['k']", "[1:2]", "\n", "\t", "\x00",
]
expr_soup = st.lists(
    st.tuples(st.sampled_from(EXPR_TOKENS), st.sampled_from(["", " ", " ", "  "])), max_size=16
).map(lambda items: "".join(tok + sep for tok, sep in items))
deep_expr = st.tuples(st.sampled_from(["(", "[", "not ", "-", "a | ", "!"]), st.integers(30, 140)).map(
    lambda t: t[0] * t[1] + "a" + {"(": ")", "[": "]"}.get(t[0], "") * t[1]
)
long_expr = st.integers(4000, 4200).map(lambda n: ("a + " * n)[:n] + "a")
expression_text = st.one_of(expr_soup, expr_soup, st.text(max_size=40), deep_expr, long_expr)


def _assert_syntax_error(err: ExprSyntaxError, text: str) -> None:
    assert err.category in ("syntax", "limit"), err
    assert 0 <= err.offset <= len(text), f"offset {err.offset} outside {len(text)} characters: {err!r}"
    assert err.message, err


@given(text=expression_text)
@bounded(1500)
def test_expressions_raise_only_syntax_errors(text: str) -> None:
    try:
        expr = parse_expression(text)
    except ExprSyntaxError as err:
        _assert_syntax_error(err, text)
    else:
        _, issues = check_expression(expr, lambda ref: ANY)
        for issue in issues:
            assert 0 <= issue.start <= issue.end <= len(text) + 1, issue
    template_text = f"x {{{text}}} y"
    for candidate in (text, template_text):
        try:
            template = parse_template(candidate)
        except ExprSyntaxError as err:
            _assert_syntax_error(err, candidate)
        else:
            _, issues = check_template(template, lambda ref: ANY)
            for issue in issues:
                assert 0 <= issue.start <= issue.end <= len(candidate) + 1, issue


# ====================================================================== regressions found by hand
# Each test names the bug and carries its reproducer; see the hostile report for what was expected.


def _alias_tower(levels: int = 20, width: int = 60) -> str:
    """Each anchor nests `width` deep and holds the previous one: legal depth per level, huge in total."""
    lines = ["a0: &a0 " + "[" * width + "1" + "]" * width]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} " + "[" * width + f"*a{i - 1}" + "]" * width)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("tail", ["steps:\n  - user.notify: {message: *a19}\n", "steps: *a19\n"], ids=["params", "steps"])
def test_depth_through_aliases_is_bounded(tail: str) -> None:
    """BUG: nesting built from aliases is not bounded by the 64-level limit → RecursionError."""
    data = (_alias_tower() + tail).encode()
    loaded, diags = check_bytes(data)
    assert_sane(loaded, diags, in_file=True)
    assert any(d.rule == "CL004" for d in diags)


def test_huge_hex_literal_does_not_crash() -> None:
    """Was a crash: a 5000-digit hex int was accepted, then str() of it raised ValueError in the param check."""
    data = b"steps:\n  - user.notify: {message: 0x" + b"f" * 5000 + b"}\n"
    loaded, diags = check_bytes(data)
    assert_sane(loaded, diags, in_file=True)
    assert diags


def test_huge_decimal_literal_is_reported_where_it_is() -> None:
    """Was reported at 1:1 as 'invalid YAML' with Python's int-digits advice.
    BUG (still): reported twice, the second time as 'max_steps must be ..., not null'."""
    data = b"limits:\n  max_steps: " + b"9" * 5000 + b"\nsteps: [tools.now]\n"
    loaded, diags = check_bytes(data)
    assert_sane(loaded, diags, in_file=True)
    assert [(d.line, d.column) for d in diags] == [(2, 14)], [str(d) for d in diags]
    assert not any("set_int_max_str_digits" in d.message for d in diags)


@pytest.mark.parametrize("where", ["http", "file"])
def test_remote_schema_ref_does_not_crash(where: str) -> None:
    """BUG: `$ref` to a URL in an input schema with a default → jsonschema Unresolvable escapes the checker."""
    if where == "http":
        text = 'inputs:\n  a: {$ref: "http://127.0.0.1:9/x.json", default: 1}\nsteps: [tools.now]\n'
    else:
        text = 'inputs:\n  a: {$ref: "file:///etc/passwd", default: 1}\nsteps: [tools.now]\n'
    loaded, diags = check_bytes(text.encode())
    assert_sane(loaded, diags, in_file=True)
    assert any(d.rule == "CL033" for d in diags)


def test_schema_refs_are_never_fetched(tmp_path: Path) -> None:
    """BUG (security): jsonschema's deprecated automatic retrieval resolves `$ref` while the default of an
    input is checked: `chainlang check` on an untrusted chain makes HTTP requests to any host (SSRF; a
    blackholed address may hang) and reads local files (`file://`), whose content leaks through messages."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            body = b'{"type": "integer"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        local = tmp_path / "secret.json"
        local.write_text('{"type": "integer"}')
        url = f"http://127.0.0.1:{server.server_address[1]}/schema.json"
        text = (f'inputs:\n  a: {{$ref: "{url}", default: "text"}}\n'
                f'  b: {{$ref: "{local.as_uri()}", default: "text"}}\nsteps: [tools.now]\n')
        try:
            _, diags = check_bytes(text.encode())
        except Exception as exc:  # noqa: BLE001 - the crash is part of the bug
            pytest.fail(f"check raised {type(exc).__name__}: {exc}")
    finally:
        server.shutdown()
        server.server_close()
    assert hits == [], f"the checker fetched {hits}"
    assert not any("integer" in d.message for d in diags), [str(d) for d in diags]


def test_non_finite_float_literal_is_rejected() -> None:
    """Was: 1e400 was read as infinity without the '.inf is not a JSON number' diagnostic."""
    _, diags = check_bytes(b"outputs: {x: 1e400, y: -1e999}\nsteps: [tools.now]\n")
    assert [(d.rule, d.line, d.column) for d in diags] == [("CL011", 1, 14), ("CL011", 1, 24)], [str(d) for d in diags]


@pytest.mark.parametrize("value", ["42", "\"'abc'\"", "\"1 + 2\""])
def test_foreach_over_a_non_list_literal_is_an_error(value: str) -> None:
    """BUG: foreach whose static type is certainly not a list gives no diagnostic."""
    text = f"steps:\n  - event: tools.now\n    foreach: {value}\n"
    _, diags = check_bytes(text.encode())
    assert any(d.severity == "error" and d.line == 3 for d in diags), [str(d) for d in diags]


def test_paren_nesting_is_bounded() -> None:
    """Was: 2000 nested parentheses passed, while 65 nested `not`, `-` or `[` were 'nested too deeply'."""
    text = 'steps:\n  - if: "' + "(" * 2000 + "1" + ")" * 2000 + '"\n    then: [tools.now]\n'
    _, diags = check_bytes(text.encode())
    assert [(d.rule, d.line, d.column) for d in diags] == [("CL020", 2, 74)], [str(d) for d in diags]


@pytest.mark.parametrize(
    "text, where",
    [
        # CR-only line ends (classic Mac): YAML sees 3 lines, the position mapper 1
        ('steps:\r  - tools.now\r  - user.notify: {message: "at {tools.now.date"}\r', (3, 32)),
        # CRLF in block scalars: one column lost per line above the error
        (("steps:\r\n  - tools.now\r\n  - user.notify:\r\n      message: |\r\n        a\r\n        b\r\n"
          "        c\r\n        world {tools.now.date\r\n"), (8, 15)),
        (("steps:\r\n  - tools.now\r\n  - user.notify:\r\n      message: >\r\n        a\r\n        b\r\n"
          "        world {tools.now.date\r\n"), (7, 15)),
        # an explicit indentation indicator: the mapper guesses the indent from the first line
        ("steps:\n  - tools.now\n  - user.notify:\n      message: |2+\n          two extra {(tools.now.date}\n", (5, 37)),
    ],
    ids=["cr-only", "crlf-literal", "crlf-folded", "indentation-indicator"],
)
def test_expression_error_columns(text: str, where: tuple[int, int]) -> None:
    """BUG: expression errors reported at the wrong line or column."""
    _, diags = check_bytes(text.encode())
    assert [(d.line, d.column) for d in diags if d.rule == "CL020"] == [where], [str(d) for d in diags]


@pytest.mark.parametrize("char", ["\x85", "\u2028", "\u2029"], ids=["NEL", "LS", "PS"])
def test_unicode_line_separators(char: str) -> None:
    """BUG: libyaml counts U+0085/U+2028/U+2029 inside a string as line breaks (YAML 1.1); the source
    map does not (YAML 1.2): every line number after one is off by one."""
    text = f'steps:\n  - user.notify: {{message: "a{char}b"}}\n  - nope.nope\n'
    _, diags = check_bytes(text.encode())
    assert [(d.rule, d.line, d.column) for d in diags] == [("CL014", 3, 5)], [str(d) for d in diags]


@pytest.mark.parametrize("data", [b"[", b"steps:\n  - {a: "], ids=["bracket", "flow-map"])
def test_yaml_error_at_end_of_file_without_newline(data: bytes) -> None:
    """BUG: without a final newline, 'did not find expected node content' is reported on a line
    after the last one, and says 'that starts here' about the end of the file."""
    loaded, diags = check_bytes(data)
    assert_sane(loaded, diags, in_file=True)


def test_json_surrogate_pair_escapes() -> None:
    """BUG: json.dumps (ensure_ascii, Python's default) writes emoji as surrogate-pair escapes,
    which JSON allows; the loader rejects them as 'invalid Unicode character escape code'."""
    text = json.dumps([{"event": "user.notify", "params": {"message": "party \U0001f389 {tools.now.date"}}, "tools.now"])
    _, diags = check_bytes(text.encode())
    column = text.index("{tools.now.date") + 1
    assert [(d.rule, d.line, d.column) for d in diags] == [("CL020", 1, column)], [str(d) for d in diags]


def test_colon_inside_flow_plain_scalar_is_yaml_1_2() -> None:
    """BUG: `{trigger: post:http.request}` is valid YAML 1.2 (':' not followed by a space);
    libyaml's 1.1 scanner rejects it and no hint says to quote it."""
    data = b"- {trigger: pre:http.request, cancel: true}\n- {trigger: post:tools.now, action: [user.notify: {message: hi}]}\n"
    _, diags = check_bytes(data, "flow.hooks.yaml")
    assert not [d for d in diags if d.rule == "CL001"], [str(d) for d in diags]


@pytest.mark.parametrize("data", [b"steps:\n\t- tools.now\n", b"steps:\n  -\ttools.now\n"], ids=["indent", "after-dash"])
def test_tab_gets_the_tab_hint(data: bytes) -> None:
    """The tab hint must fire with libyaml's message ('found character that cannot start any token').
    BUG (still): not for a tab after '- '."""
    _, diags = check_bytes(data)
    assert diags and all("tab" in (d.message + (d.hint or "")).lower() for d in diags), [(str(d), d.hint) for d in diags]


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_without_bom_is_named(codec: str) -> None:
    """BUG: UTF-16 without a BOM is reported as 'control characters are not allowed'."""
    _, diags = check_bytes("steps:\n  - tools.now\n".encode(codec))
    assert len(diags) == 1 and "UTF-16" in diags[0].message, [str(d) for d in diags]


@pytest.mark.parametrize(
    "text",
    ["limits: {max_steps: .inf}\nsteps: [tools.now]\n", "limits: {max_steps: !!int many}\nsteps: [tools.now]\n",
     "steps:\n  - event: tools.now\n    retry: {attempts: -.inf}\n"],
    ids=["inf", "bad-int-tag", "retry"],
)
def test_a_rejected_value_is_reported_once(text: str) -> None:
    """BUG: after the loader rejects a value, the model reports it again as 'not null'."""
    _, diags = check_bytes(text.encode())
    assert len(diags) == 1 and "null" not in diags[0].message, [str(d) for d in diags]


def test_github_output_escapes_control_characters() -> None:
    """BUG: messages echo control characters (NUL, ESC) raw into GitHub workflow commands."""
    from chainlang.output import render

    loaded, diags = check_bytes(b'steps:\n  - "tools.now\\e[2J\\0"\n')
    assert diags
    out = render(diags, "github", {loaded.path: loaded.source}, color=False, tool_version="0", files_checked=1)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", out), repr(out)


def test_text_output_escapes_file_names() -> None:
    """BUG: a file name is printed raw: with colour on (a terminal), `\\e[2J` in a name found by a
    directory scan clears the screen, and a newline in a name splits the diagnostic line."""
    from chainlang.output import render

    name = "a\x1b[2J\nb.chain.yaml"
    loaded, diags = check_bytes(b"steps: 42\n", name)
    assert diags
    out = render(diags, "text", {name: loaded.source}, color=True, tool_version="0", files_checked=1)
    assert "\x1b[2J" not in out, repr(out)
    assert "\nb.chain.yaml" not in out, repr(out)


def test_hostile_golden_bytes_survive() -> None:
    """The byte-level goldens must keep their bytes (an editor or a git filter could normalise them)."""
    err = CHAINS / "err"
    expect = {
        "hostile-crlf-literal-block.chain.yaml": b"\r\n",
        "hostile-cr-only-line-ends.chain.yaml": b"steps:\r  - ",
        "hostile-bom-then-error.chain.yaml": b"\xef\xbb\xbf",
        "hostile-invalid-utf8.chain.yaml": b"caf\xe9",
        "hostile-utf16le-no-bom.chain.yaml": b"s\x00t\x00",
        "hostile-nul-byte.chain.yaml": b"a\x00b",
        "hostile-tab-indent.chain.yaml": b"\t- ",
    }
    for name, needle in expect.items():
        path = err / name
        if path.exists():
            assert needle in path.read_bytes(), f"{name} lost its {needle!r}"


# ====================================================================== CLI end to end

MEMORY_LIMIT = 1 << 30  # 1 GiB of address space


def _limit_memory() -> None:  # pragma: no cover - runs in the child
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_check(*paths: str | Path, cwd: Path, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CHAINLANG_DEBUG", "FORCE_COLOR")}
    env["NO_COLOR"] = "1"
    try:
        return subprocess.run(
            [sys.executable, "-m", "chainlang.cli", "check", *map(str, paths)],
            cwd=cwd, env=env, capture_output=True, text=True, errors="replace", timeout=timeout,
            preexec_fn=_limit_memory if sys.platform != "win32" else None, stdin=subprocess.DEVNULL, check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"`chainlang check {' '.join(map(str, paths))}` did not finish within {timeout} s")


def assert_clean_exit(proc: subprocess.CompletedProcess[str], code: int) -> None:
    both = proc.stdout + proc.stderr
    assert "Traceback" not in both, both[-2000:]
    assert "internal error" not in both, both[-2000:]
    assert proc.returncode == code, f"exit {proc.returncode}, wanted {code}:\n{both[-2000:]}"


NASTY = {
    "invalid-utf8.chain.yaml": b"steps:\n  - user.notify: {message: \"caf\xe9 \xff\xfe\"}\n",
    "utf16.chain.yaml": "steps:\n  - tools.now\n".encode("utf-16-le"),
    "alias-bomb.chain.yaml": (
        "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"{c}: &{c} [" + ", ".join([f"*{p}"] * 10) + "]\n" for p, c in zip("abcdefgh", "bcdefghi"))
        + "steps: *i\n"
    ).encode(),
    "nested.chain.yaml": b"steps: " + b"[" * 200 + b"tools.now" + b"]" * 200 + b"\n",
    "nested-block.chain.yaml": b"steps:\n" + b"".join(b"  " * i + b"-\n" for i in range(1, 100)) + b"  " * 100 + b"- tools.now\n",
    "deep-expr.chain.yaml": b'steps:\n  - if: "' + b"not " * 1000 + b'true"\n    then: [tools.now]\n',
    "control.chain.yaml": b"steps:\n  - user.notify: {message: \"\x1b[2J\x00\"}\n",
    "alias-tower.chain.yaml": (_alias_tower() + "steps: *a19\n").encode(),
}


@pytest.mark.parametrize("name", sorted(NASTY))
def test_cli_nasty_file(name: str, tmp_path: Path) -> None:
    (tmp_path / name).write_bytes(NASTY[name])
    proc = run_check(name, cwd=tmp_path)
    assert_clean_exit(proc, 1)
    assert "error" in proc.stdout


@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])
def test_cli_nasty_formats(fmt: str, tmp_path: Path) -> None:
    for name in ("invalid-utf8.chain.yaml", "control.chain.yaml", "alias-bomb.chain.yaml"):
        (tmp_path / name).write_bytes(NASTY[name])
    env_run = subprocess.run(
        [sys.executable, "-m", "chainlang.cli", "check", "--format", fmt, "."], cwd=tmp_path,
        capture_output=True, text=True, errors="replace", timeout=20, preexec_fn=_limit_memory, check=False,
    )
    assert_clean_exit(env_run, 1)
    if fmt in ("json", "sarif"):
        json.loads(env_run.stdout)


def test_cli_five_megabyte_file(tmp_path: Path) -> None:
    line = b"  - user.notify: {message: \"" + b"x" * 90 + b"\"}\n"
    (tmp_path / "big.chain.yaml").write_bytes(b"steps:\n" + line * (5 * 1024 * 1024 // len(line) + 1))
    proc = run_check("big.chain.yaml", cwd=tmp_path, timeout=15)
    assert_clean_exit(proc, 1)
    assert "CL004" in proc.stdout


def test_cli_huge_sparse_file_is_not_read_whole(tmp_path: Path) -> None:
    """BUG: the whole file is read before the size check: a 2 GiB file → MemoryError (exit 2) under 1 GiB."""
    path = tmp_path / "sparse.chain.yaml"
    with open(path, "wb") as f:
        f.truncate(2 * 1024 * 1024 * 1024)
    proc = run_check(path.name, cwd=tmp_path, timeout=20)
    assert_clean_exit(proc, 1)
    assert "CL004" in proc.stdout


def test_cli_many_references_is_not_quadratic(tmp_path: Path) -> None:
    """Reference resolution once scanned every earlier step for every reference: 20,000 steps took ~2 minutes."""
    lines = ["steps:"]
    for i in range(12_000):
        lines.append("  - tools.now" if i % 2 == 0 else f'  - user.notify: {{message: "{{tools.now.date}} {i}"}}')
    (tmp_path / "refs.chain.yaml").write_text("\n".join(lines) + "\n")
    proc = run_check("refs.chain.yaml", cwd=tmp_path, timeout=8)
    assert_clean_exit(proc, 0)


def test_cli_many_hooks_is_not_quadratic(tmp_path: Path) -> None:
    """Hook ordering and recursion once paired every hook with every hook: 5,000 hooks took ~35 s."""
    parts = ["hooks:"]
    for i in range(3_000):
        parts.append(f'  - id: h{i}\n    trigger: "post:tools.now"\n    after: [h{i + 1}]\n    action: [tools.now]')
    parts.append('  - id: h3000\n    trigger: "post:tools.now"\n    action: [user.notify: {message: hi}]')
    (tmp_path / "hooks.chain.yaml").write_text("\n".join(parts) + "\nsteps: [tools.now]\n")
    proc = run_check("hooks.chain.yaml", cwd=tmp_path, timeout=8)
    assert_clean_exit(proc, 1)  # every tools.now hook re-triggers itself


def test_cli_many_unknown_events_is_bounded(tmp_path: Path) -> None:
    """BUG: every unknown event gets a difflib 'did you mean' over the whole registry and every diagnostic
    is printed (no cap): 150,000 unknown events (2 MB) take ~14 s."""
    (tmp_path / "unknown.chain.yaml").write_text("steps:\n" + "".join(f"  - a.b{i}\n" for i in range(100_000)))
    proc = run_check("unknown.chain.yaml", cwd=tmp_path, timeout=30)  # a hang guard, not a timing: the quadratic bug took minutes
    assert_clean_exit(proc, 1)


def test_cli_directory_with_symlink_loop(tmp_path: Path) -> None:
    root = tmp_path / "chains"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "loop").symlink_to("..", target_is_directory=True)
    (root / "sub" / "self").symlink_to("self")
    (root / "bad.chain.yaml").write_bytes(b"steps: [tools.now, {user.notify: {message: \"{x\"}}]\n")
    proc = run_check("chains", cwd=tmp_path, timeout=15)
    assert_clean_exit(proc, 1)
    assert "bad.chain.yaml" in proc.stdout


def test_cli_symlink_loop_named_like_a_chain(tmp_path: Path) -> None:
    (tmp_path / "a.chain.yaml").symlink_to("b.chain.yaml")
    (tmp_path / "b.chain.yaml").symlink_to("a.chain.yaml")
    proc = run_check("a.chain.yaml", cwd=tmp_path, timeout=10)
    assert_clean_exit(proc, 2)
    assert "chainlang: error:" in proc.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this OS")
def test_cli_fifo_given_directly(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "x.chain.yaml")
    proc = run_check("x.chain.yaml", cwd=tmp_path, timeout=10)
    assert_clean_exit(proc, 2)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this OS")
def test_cli_fifo_inside_a_directory(tmp_path: Path) -> None:
    """BUG: discover() keeps any name ending in .chain.yaml; reading a FIFO blocks forever."""
    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "d" / "x.chain.yaml")
    (tmp_path / "d" / "bad.chain.yaml").write_bytes(b"steps: 42\n")
    proc = run_check("d", cwd=tmp_path, timeout=6)
    assert proc.returncode in (1, 2), proc
    assert_clean_exit(proc, proc.returncode)


def test_cli_missing_path(tmp_path: Path) -> None:
    proc = run_check("nope/none.chain.yaml", cwd=tmp_path)
    assert_clean_exit(proc, 2)
    assert "no such file" in proc.stderr


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads every file")
def test_cli_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "secret.chain.yaml"
    path.write_bytes(b"steps: [tools.now]\n")
    path.chmod(0)
    try:
        proc = run_check(path.name, cwd=tmp_path)
    finally:
        path.chmod(0o600)
    assert_clean_exit(proc, 2)
    assert "cannot read" in proc.stderr


REDOS = "^(a+)+$"
EVIL = "a" * 40 + "!"


def test_cli_input_default_pattern_cannot_hang(tmp_path: Path) -> None:
    """BUG: the default of an input is matched against its `pattern` with Python's backtracking `re`."""
    (tmp_path / "x.chain.yaml").write_text(
        f'inputs:\n  code: {{type: string, pattern: "{REDOS}", default: "{EVIL}"}}\nsteps: [tools.now]\n'
    )
    proc = run_check("x.chain.yaml", cwd=tmp_path, timeout=6)
    assert proc.returncode in (0, 1), proc
    assert_clean_exit(proc, proc.returncode)


def test_cli_literal_param_against_chain_input_pattern_cannot_hang(tmp_path: Path) -> None:
    """BUG: a literal param checked against a named chain's input `pattern` backtracks forever."""
    (tmp_path / "callee.chain.yaml").write_text(
        f'chain: my.callee\ninputs:\n  code: {{type: string, pattern: "{REDOS}"}}\nsteps: [tools.now]\n'
    )
    (tmp_path / "caller.chain.yaml").write_text(f'steps:\n  - my.callee: {{code: "{EVIL}"}}\n')
    proc = run_check(".", cwd=tmp_path, timeout=6)
    assert proc.returncode in (0, 1), proc
    assert_clean_exit(proc, proc.returncode)


def test_cli_regex_in_expression_is_bounded(tmp_path: Path) -> None:
    (tmp_path / "x.chain.yaml").write_text(
        textwrap.dedent(f"""\
            steps:
              - if: "'{EVIL}' matches '{REDOS}'"
                then: [tools.now]
              - if: "'{EVIL}' matches '(a|a)*$' and 'x' matches '(x+x+)+y'"
                then: [tools.now]
            """)
    )
    proc = run_check("x.chain.yaml", cwd=tmp_path, timeout=10)
    assert proc.returncode in (0, 1), proc
    assert_clean_exit(proc, proc.returncode)


def test_a_control_character_after_multibyte_text_is_pointed_at_exactly() -> None:
    """libyaml reports a bad character at a UTF-8 byte offset: non-ASCII text before it moved
    the caret lines further (hypothesis found it with CRLF line ends)."""
    data = b'{\n  "steps": [\n    {\n      "description": "\xc2\xa0\xc2\xa0\xf0\x90\x80\x80",\n' \
           b'      "params": ["\xc2\xa0\xf0\x90\x80\x80\x7f"]\n    }\n  ]\n}'
    for text in (data, data.replace(b"\n", b"\r\n")):
        _, diags = check_bytes(text)
        assert [(d.line, d.column, d.rule) for d in diags] == [(5, 21, "CL001")]
