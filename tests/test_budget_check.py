"""Budgets on the checker's side (LANGUAGE.md §13, §8): the limits max_model_calls and
max_tokens (CL030 for bad values), the model_calls effect of events, and CL036
over-budget, the worst case of a chain's model calls against max_model_calls, all
through the CLI (`chainlang check --format json`, `schema`, `graph`)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cli_here

TOOLS = """\
from chainlang import event


@event("llm.ask", description="Ask the model once", model_calls=1)
def ask(question: str = "") -> dict:
    return {"answer": ""}


@event("llm.vote", description="Ask three models", model_calls=3)
def vote(question: str = "") -> dict:
    return {"answer": ""}


@event("llm.free", description="No model at all")
def free(question: str = "") -> dict:
    return {"answer": ""}
"""


# a model tier for the projects of these tests (else CL037 no-model warns about agent.think)
MODELS = '\n[models.heavy]\nprovider = "scripted"\nrules = "answers.yaml"\n'


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "chainlang.toml").write_text('tools = ["tools.py"]\n' + MODELS, encoding="utf-8")
    return tmp_path


def check(project: Path, text: str, name: str = "c.chain.yaml", *paths: str) -> list[dict[str, Any]]:
    """The diagnostics of `chainlang check --format json` on `text` (saved as `name`)."""
    (project / name).parent.mkdir(parents=True, exist_ok=True)
    (project / name).write_text(text, encoding="utf-8")
    proc = cli_here(project, "check", "--format", "json", *(paths or (name,)))
    assert proc.returncode in (0, 1), proc.stderr
    items: list[dict[str, Any]] = json.loads(proc.stdout)
    assert (proc.returncode == 1) == any(d["severity"] == "error" for d in items)
    return items


def budget(project: Path, steps: str, limit: int, head: str = "") -> list[dict[str, Any]]:
    """The CL036 diagnostics of a chain with `limits: {max_model_calls: limit}`; any other problem fails."""
    text = f"{head}limits:\n  max_model_calls: {limit}\nsteps:\n{steps}"
    items = check(project, text)
    others = [d for d in items if d["rule"] != "CL036"]
    assert not others, others
    return items


def worst(project: Path, steps: str, head: str = "") -> int:
    """The worst case the checker finds (more than 1), as its message says; that many checks clean."""
    [diag] = budget(project, steps, 1, head)
    count = int(diag["message"].split(" makes ", 1)[1].split(" model calls", 1)[0].replace(",", ""))
    assert budget(project, steps, count, head) == []
    return count


# -- the worst case ---------------------------------------------------------------------------


def test_sequences_and_parallel_groups_add(project: Path) -> None:
    assert worst(project, "  - llm.ask\n  - llm.vote\n  - llm.free\n") == 4
    assert worst(project, "  - [llm.ask, llm.vote, llm.vote]\n") == 7
    assert worst(project, "  - steps: [llm.ask, llm.ask]\n  - parallel: [llm.vote, llm.free]\n") == 5


def test_if_takes_the_larger_branch(project: Path) -> None:
    steps = "  - if: \"1 > 2\"\n    then: [llm.ask]\n    else: [llm.vote, llm.ask]\n"
    assert worst(project, steps) == 4
    steps = "  - if: \"1 > 2\"\n    then: [llm.vote]\n    else: [llm.ask]\n"
    assert worst(project, steps) == 3
    assert worst(project, "  - if: \"1 > 2\"\n    then: [llm.vote, llm.vote]\n") == 6  # then alone
    # a step's own `if:` may be true: it counts
    assert worst(project, "  - event: llm.vote\n    if: \"1 > 2\"\n") == 3


def test_a_foreach_over_a_literal_list_multiplies(project: Path) -> None:
    assert worst(project, "  - event: llm.vote\n    foreach: [a, b, c, d]\n") == 12
    assert worst(project, "  - event: llm.ask\n    foreach: \"[1, 2, 3]\"\n") == 3
    assert worst(project, "  - event: llm.ask\n    foreach: \"{[1, 2]}\"\n") == 2
    nested = ("  - foreach: [a, b]\n    as: x\n    steps:\n"
              "      - event: llm.ask\n        foreach: [1, 2, 3]\n      - llm.ask\n")
    assert worst(project, nested) == 8  # 2 × (3 + 1)
    block = "  - foreach: [a, b, c]\n    parallel: [llm.ask, llm.vote]\n"
    assert worst(project, block) == 12
    assert not budget(project, "  - event: llm.vote\n    foreach: []\n  - llm.ask\n", 1)


def test_a_foreach_over_a_computed_list_counts_for_nothing(project: Path) -> None:
    head = "inputs:\n  topics: {type: array}\n"
    assert not budget(project, "  - event: llm.vote\n    foreach: inputs.topics\n", 1, head)
    steps = "  - event: llm.vote\n    foreach: inputs.topics\n  - llm.vote\n"
    assert worst(project, steps, head) == 3


def test_retry_multiplies_by_its_attempts(project: Path) -> None:
    assert worst(project, "  - event: llm.vote\n    retry: {attempts: 4, delay: 1s}\n") == 12
    steps = "  - event: llm.ask\n    foreach: [a, b]\n    retry: {attempts: 3}\n"
    assert worst(project, steps) == 6
    # a step that makes no model call is not multiplied into one
    assert not budget(project, "  - event: llm.free\n    retry: {attempts: 5}\n  - llm.ask\n", 1)


def test_the_limit_itself_is_allowed_and_one_less_is_an_error(project: Path) -> None:
    steps = "  - event: llm.ask\n    foreach: [a, b, c]\n"
    assert budget(project, steps, 3) == []
    [diag] = budget(project, steps, 2)
    assert diag["rule"] == "CL036" and diag["slug"] == "over-budget" and diag["severity"] == "error"
    # it points at the max_model_calls value (line 2 of the file, after `  max_model_calls: `)
    assert (diag["line"], diag["column"]) == (2, 20)
    assert diag["message"] == ("in the worst case this chain makes 3 model calls, more than max_model_calls (2): "
                               "llm.ask ×3 in the foreach at line 5")
    assert diag["hint"] == "raise limits.max_model_calls to 3 or loop over fewer items"


def test_the_message_names_where_the_calls_come_from(project: Path) -> None:
    steps = ("  - llm.ask\n  - llm.ask\n"
             "  - event: llm.vote\n    retry: {attempts: 2}\n"
             "  - event: llm.ask\n    foreach: [a, b, c, d]\n"
             "  - llm.free\n")
    [diag] = budget(project, steps, 5)
    assert diag["message"].startswith("in the worst case this chain makes 12 model calls, more than max_model_calls (5): ")
    assert "llm.vote ×6 at line 7 (retry: 2 attempts)" in diag["message"]
    assert "llm.ask ×4 in the foreach at line 9" in diag["message"]
    assert "llm.ask ×2 at lines 4 and 5" in diag["message"]
    assert "llm.free" not in diag["message"]
    assert diag["hint"] == "raise limits.max_model_calls to 12, loop over fewer items or retry fewer times"
    [plain] = budget(project, "  - llm.vote\n", 2)
    assert plain["hint"] == "raise limits.max_model_calls to 3 or make fewer model calls"


def test_without_max_model_calls_nothing_is_counted(project: Path) -> None:
    assert check(project, "steps:\n  - event: llm.vote\n    foreach: [a, b, c, d, e, f]\n") == []
    assert check(project, "limits: {max_tokens: 10}\nsteps:\n  - event: llm.vote\n    foreach: [a, b, c]\n") == []


def test_the_stdlib_agent_events_count(project: Path) -> None:
    head = "inputs:\n  thread_id: {type: string}\n"
    steps = ("  - agent.think: {thread_id: \"{inputs.thread_id}\"}\n"
             "  - agent.chain: {plan: do it}\n")
    assert worst(project, steps, head) == 2


# -- calls to other chains --------------------------------------------------------------------


def test_a_named_chain_adds_its_worst_case(project: Path) -> None:
    (project / "ask.chain.yaml").write_text(
        "chain: util.ask\nsteps:\n  - event: llm.ask\n    foreach: [a, b]\n  - llm.vote\n", encoding="utf-8")
    text = "limits: {max_model_calls: 10}\nsteps:\n  - llm.ask\n  - event: util.ask\n    foreach: [x, y]\n"
    [diag] = check(project, text, "c.chain.yaml", ".")
    assert diag["file"].endswith("c.chain.yaml") and diag["rule"] == "CL036"
    assert "makes 11 model calls" in diag["message"]
    assert "llm.vote ×6 via util.ask in the foreach at line 5" in diag["message"]
    assert "llm.ask ×4 via util.ask in the foreach at line 5" in diag["message"]
    # checked alone, the chain still sees the named chains of the project's `chains` dirs
    (project / "chainlang.toml").write_text('tools = ["tools.py"]\nchains = ["lib"]\n' + MODELS, encoding="utf-8")
    (project / "lib").mkdir()
    (project / "ask.chain.yaml").rename(project / "lib" / "ask.chain.yaml")
    [alone] = check(project, text)
    assert alone["message"] == diag["message"]


def test_chain_run_with_a_literal_path_adds_that_chain(project: Path) -> None:
    (project / "sub").mkdir()
    (project / "sub" / "review.chain.yaml").write_text("steps:\n  - [llm.vote, llm.vote]\n", encoding="utf-8")
    text = "limits: {max_model_calls: 5}\nsteps:\n  - chain.run: {path: sub/review.chain.yaml}\n"
    [diag] = check(project, text)
    assert "makes 6 model calls" in diag["message"]
    assert "llm.vote ×6 via sub/review.chain.yaml at line 3" in diag["message"]
    # a path worked out at run time cannot be followed
    head = "inputs:\n  which: {type: string}\n"
    assert not check(project, head + "limits: {max_model_calls: 1}\nsteps:\n"
                     "  - chain.run: {path: \"sub/{inputs.which}.chain.yaml\"}\n")
    # nor one that names no file
    assert not check(project, "limits: {max_model_calls: 1}\nsteps:\n  - chain.run: {path: sub/none.chain.yaml}\n")


def test_recursion_adds_nothing_and_ends(project: Path) -> None:
    (project / "countdown.chain.yaml").write_text(
        "chain: util.countdown\ninputs:\n  n: {type: integer, default: 3}\n"
        "limits: {max_depth: 5, max_model_calls: 2}\nsteps:\n  - llm.ask\n"
        "  - if: inputs.n > 0\n    then:\n      - util.countdown: {n: \"{inputs.n - 1}\"}\n", encoding="utf-8")
    (project / "ping.chain.yaml").write_text(
        "chain: util.ping\nlimits: {max_depth: 3}\nsteps: [llm.ask, util.pong]\n", encoding="utf-8")
    (project / "pong.chain.yaml").write_text("chain: util.pong\nsteps: [llm.vote, util.ping]\n", encoding="utf-8")
    items = check(project, "limits: {max_model_calls: 4}\nsteps: [util.countdown, util.ping]\n", "c.chain.yaml", ".")
    assert [d["rule"] for d in items] == ["CL036"], items
    assert "makes 5 model calls" in items[0]["message"]  # 1 (countdown) + 1 (ping) + 3 (pong)


def test_a_long_line_of_chains_and_a_wide_diamond_are_quick(project: Path) -> None:
    """No recursion in Python over the chains (a line of 400 chains), and each chain counted
    once however many ways it is reached (2^30 calls through 30 levels of doubling)."""
    lib = project / "lib"
    lib.mkdir()
    for i in range(400):
        nxt = f"\n  - line.c{i + 1}" if i < 399 else ""
        (lib / f"c{i}.chain.yaml").write_text(f"chain: line.c{i}\nsteps:\n  - llm.ask{nxt}\n", encoding="utf-8")
    for i in range(30):
        body = f"  - wide.d{i + 1}\n  - wide.d{i + 1}\n" if i < 29 else "  - llm.ask\n"
        (lib / f"d{i}.chain.yaml").write_text(f"chain: wide.d{i}\nsteps:\n{body}", encoding="utf-8")
    (project / "chainlang.toml").write_text('tools = ["tools.py"]\nchains = ["lib"]\n' + MODELS, encoding="utf-8")
    started = time.monotonic()
    items = check(project, "limits: {max_model_calls: 1000000}\nsteps: [line.c0, wide.d0]\n")
    assert time.monotonic() - started < 60
    [diag] = items
    assert f"makes {400 + 2 ** 29:,} model calls" in diag["message"]


# -- the limits themselves --------------------------------------------------------------------


@pytest.mark.parametrize(("key", "value", "message"), [
    ("max_model_calls", "0", "max_model_calls must be from 1 to 1,000,000; got 0"),
    ("max_model_calls", "1000001", "max_model_calls must be from 1 to 1,000,000; got 1,000,001"),
    ("max_model_calls", "ten", "max_model_calls must be a whole number from 1 to 1,000,000, not the string 'ten'"),
    ("max_model_calls", "true", "max_model_calls must be a whole number from 1 to 1,000,000, not the boolean true"),
    ("max_tokens", "-5", "max_tokens must be from 1 to 100,000,000; got -5"),
    ("max_tokens", "100000001", "max_tokens must be from 1 to 100,000,000; got 100,000,001"),
    ("max_tokens", "1.5", "max_tokens must be a whole number from 1 to 100,000,000, not the number 1.5"),
])
def test_bad_budget_values_are_cl030(project: Path, key: str, value: str, message: str) -> None:
    [diag] = check(project, f"limits:\n  {key}: {value}\nsteps: [llm.ask]\n")
    assert (diag["rule"], diag["message"], diag["line"], diag["column"]) == ("CL030", message, 2, len(key) + 5)


def test_the_bounds_are_allowed_and_a_misspelling_is_named(project: Path) -> None:
    assert check(project, "limits: {max_model_calls: 1000000, max_tokens: 100000000}\nsteps: [llm.ask]\n") == []
    assert check(project, "limits: {max_model_calls: 1, max_tokens: 1}\nsteps: [llm.ask]\n") == []
    [diag] = check(project, "limits: {max_token: 5}\nsteps: [llm.ask]\n")
    assert diag["rule"] == "CL010" and diag["hint"] == "did you mean 'max_tokens'?"


def test_the_schema_and_the_graph_know_the_budgets(project: Path) -> None:
    schema = json.loads(cli_here(project, "schema").stdout)
    limits = schema["definitions"]["limits"]["properties"]
    assert (limits["max_model_calls"]["minimum"], limits["max_model_calls"]["maximum"]) == (1, 1_000_000)
    assert (limits["max_tokens"]["minimum"], limits["max_tokens"]["maximum"]) == (1, 100_000_000)
    (project / "g.chain.yaml").write_text("limits: {max_model_calls: 5, max_tokens: 900}\nsteps: [llm.ask]\n",
                                          encoding="utf-8")
    graph = json.loads(cli_here(project, "graph", "--format", "json", "g.chain.yaml").stdout)
    assert graph["limits"]["max_model_calls"] == 5 and graph["limits"]["max_tokens"] == 900
    (project / "g.chain.yaml").write_text("steps: [llm.ask]\n", encoding="utf-8")
    graph = json.loads(cli_here(project, "graph", "--format", "json", "g.chain.yaml").stdout)
    assert graph["limits"]["max_model_calls"] is None and graph["limits"]["max_tokens"] is None


# -- the model_calls effect -------------------------------------------------------------------


@pytest.mark.parametrize("value", ["True", "-1", "'2'", "1.5"])
def test_a_tool_declares_model_calls_as_a_whole_number(project: Path, value: str) -> None:
    (project / "tools.py").write_text(TOOLS + f"\n\n@event('llm.odd', model_calls={value})\ndef odd() -> dict:\n"
                                      "    return {}\n", encoding="utf-8")
    (project / "c.chain.yaml").write_text("steps: [llm.ask]\n", encoding="utf-8")
    proc = cli_here(project, "check", "c.chain.yaml")
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert "model_calls= must be a whole number >= 0" in line and "llm.odd" in line


def test_describe_shows_the_model_calls_effect(project: Path) -> None:
    proc = cli_here(project, "describe", "--json", "llm.vote")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["effects"]["model_calls"] == 3
