"""The firing order of hooks (LANGUAGE.md §6): a topological sort of the `after` lists that
picks by priority among the hooks whose `after` hooks are placed, ties in source order.

The case of issue 22: h-a (priority 10, after h-b), h-b (0), h-c (20), h-d and h-e (-5)
fire C, B, A, D, E — `after` delays h-a only until h-b is placed, not behind every hook
that was free before it. The order is the same wherever hooks come from and wherever
it is shown: a run's `pre:` and `post:` hooks, a sub-chain's own hooks merged with the
project's, an emit, hooks registered in Python, and `chainlang graph`.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from chainlang.compile.firing_order import Orderable, firing_order
from tests.helpers import cli
from tests.hooks_util import assert_clean, of_type, records, show, transcript_of, write, write_tools

ISSUE_ORDER = ["h-c", "h-b", "h-a", "h-d", "h-e"]


def ordered(*hooks: Orderable) -> list[str | None]:
    return [hooks[i].id for i in firing_order(hooks)]


# -- the function -------------------------------------------------------------------------------


def test_the_issue_case() -> None:
    assert ordered(Orderable("h-a", 10, ["h-b"]), Orderable("h-b", 0), Orderable("h-c", 20),
                   Orderable("h-d", -5), Orderable("h-e", -5)) == ISSUE_ORDER


def test_ties_keep_the_order_given() -> None:
    assert ordered(Orderable("z"), Orderable("y"), Orderable("x")) == ["z", "y", "x"]
    assert ordered(Orderable("z", 1), Orderable("y", 2), Orderable("x", 1)) == ["y", "z", "x"]
    # a hook released by `after` competes by priority, then by its place among the others
    assert ordered(Orderable("late", 0, ["first"]), Orderable("first", 5), Orderable("other", 0)) == \
        ["first", "late", "other"]


def test_after_wins_over_priority_and_chains_of_after_hold() -> None:
    assert ordered(Orderable("top", 100, ["mid"]), Orderable("mid", 0, ["low"]), Orderable("low", -100),
                   Orderable("free", 50)) == ["free", "low", "mid", "top"]
    # waiting for two hooks: placed once both are
    assert ordered(Orderable("both", 9, ["a", "b"]), Orderable("a", 1), Orderable("b", -1), Orderable("c", 0)) == \
        ["a", "c", "b", "both"]


def test_what_after_cannot_name_is_ignored() -> None:
    # unknown ids and a hook naming itself (CL042 / CL043 in the checker) do not stop the order
    assert ordered(Orderable("a", 0, ["nobody"]), Orderable("b", 1, ["b"]), Orderable(None, 2)) == [None, "b", "a"]
    # two hooks with one id (CL045 where they are in force together): `after` names the first
    assert ordered(Orderable("x", 0, ["dup"]), Orderable("dup", -1), Orderable("dup", 5)) == ["dup", "dup", "x"]
    assert firing_order([]) == []


def test_a_cycle_still_gives_every_hook_one_place() -> None:
    # the checker refuses cycles (CL043); the function stays total and deterministic all the same
    hooks = (Orderable("a", 0, ["b"]), Orderable("b", 3, ["a"]), Orderable("c", 1, ["a"]), Orderable("free", -9))
    assert ordered(*hooks) == ["free", "b", "a", "c"]
    assert ordered(*hooks) == ordered(*hooks)
    ring = [Orderable(f"r{i}", 0, [f"r{(i + 1) % 50}"]) for i in range(50)]
    assert sorted(firing_order(ring)) == list(range(50))


def test_a_long_chain_of_after_is_followed_to_its_end() -> None:  # no recursion, no walk per hook
    hooks = [Orderable(f"h{i}", i % 7, [f"h{i - 1}"] if i else []) for i in range(20_000)]
    assert firing_order(hooks) == list(range(20_000))


# -- end to end -----------------------------------------------------------------------------------

def five(phase: str, prefix: str) -> str:
    """The five hooks of the issue on `PHASE:t.say`, ids PREFIX-a … PREFIX-e, as a YAML sequence."""
    def what(letter: str) -> str:
        if phase == "pre":
            return f'set: {{message: "{{message}} {letter.upper()}"}}'
        return f"action: [t.log: {{label: {prefix}-{letter}}}]"

    return textwrap.dedent(f"""\
        - id: {prefix}-a
          trigger: {phase}:t.say
          priority: 10
          after: [{prefix}-b]
          {what("a")}
        - id: {prefix}-b
          trigger: {phase}:t.say
          {what("b")}
        - id: {prefix}-c
          trigger: {phase}:t.say
          priority: 20
          {what("c")}
        - id: {prefix}-d
          trigger: {phase}:t.say
          priority: -5
          {what("d")}
        - id: {prefix}-e
          trigger: {phase}:t.say
          priority: -5
          {what("e")}
        """)


def fired(recs: list[dict], when: str) -> list[str]:
    return [r["hook"] for r in of_type(recs, "hook_fired") if r["when"] == when]


def run_ok(cwd: Path, *args: str) -> list[dict]:
    proc = cli(cwd, "run", *args, "--tools", "hk_tools.py", "--progress", "quiet", "--transcript", "run.jsonl")
    assert proc.returncode == 0, show(proc)
    assert_clean(proc)
    return records(cwd / "run.jsonl")


def test_a_run_fires_pre_and_post_hooks_in_the_contracts_order(tmp_path: Path) -> None:
    write_tools(tmp_path)
    write(tmp_path, "order.hooks.yaml", five("pre", "h") + five("post", "p"))
    write(tmp_path, "main.chain.yaml", """\
        steps:
          - t.say: {message: go}
        """)
    proc = cli(tmp_path, "run", "main.chain.yaml", "--tools", "hk_tools.py", "--progress", "quiet",
               "--transcript", "run.jsonl")
    assert proc.returncode == 0, show(proc)
    assert proc.stdout.splitlines() == ["go C B A D E"], show(proc)  # each `set` saw the one before
    recs = records(tmp_path / "run.jsonl")
    assert fired(recs, "pre") == ISSUE_ORDER
    assert fired(recs, "post") == ["p-c", "p-b", "p-a", "p-d", "p-e"]
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "ok", recs[-1]


def test_the_order_is_the_same_across_sources(tmp_path: Path) -> None:
    # the chain's own hooks, a hooks file and a Python registration: one order over all of them
    write_tools(tmp_path)
    write(tmp_path, "main.chain.yaml", """\
        steps:
          - t.say: {message: go}
        hooks:
          - id: h-a
            trigger: pre:t.say
            priority: 10
            after: [h-b]
            set: {message: "{message} A"}
        """)
    write(tmp_path, "more.hooks.yaml", """\
        - id: h-b
          trigger: pre:t.say
          set: {message: "{message} B"}
        - id: h-c
          trigger: pre:t.say
          priority: 20
          set: {message: "{message} C"}
        """)
    write(tmp_path, "py_hooks.py", """\
        import chainlang

        low = [chainlang.hook("pre:t.say", id="h-d", priority=-5, set={"message": "{message} D"}),
               chainlang.hook("pre:t.say", id="h-e", priority=-5, set={"message": "{message} E"})]
        """)
    proc = cli(tmp_path, "run", "main.chain.yaml", "--tools", "hk_tools.py", "--tools", "py_hooks.py",
               "--progress", "quiet", "--transcript", "run.jsonl")
    assert proc.returncode == 0, show(proc)
    assert proc.stdout.splitlines() == ["go C B A D E"], show(proc)
    assert fired(records(tmp_path / "run.jsonl"), "pre") == ISSUE_ORDER


def test_a_sub_chains_own_hooks_take_their_place_among_the_projects(tmp_path: Path) -> None:
    # the sub-chain's h-a and h-c are merged with the project's h-b, h-d, h-e by the same rule,
    # not appended after them
    write(tmp_path, "chainlang.toml", 'chains = ["library"]\n')
    write_tools(tmp_path)
    write(tmp_path, "library/inner.chain.yaml", """\
        chain: lib.inner
        steps:
          - t.say: {message: go}
        hooks:
          - id: h-a
            trigger: pre:t.say
            priority: 10
            after: [h-b]
            set: {message: "{message} A"}
          - id: h-c
            trigger: pre:t.say
            priority: 20
            set: {message: "{message} C"}
        """)
    write(tmp_path, "hooks/project.hooks.yaml", """\
        - id: h-b
          trigger: pre:t.say
          set: {message: "{message} B"}
        - id: h-d
          trigger: pre:t.say
          priority: -5
          set: {message: "{message} D"}
        - id: h-e
          trigger: pre:t.say
          priority: -5
          set: {message: "{message} E"}
        """)
    write(tmp_path, "main.chain.yaml", """\
        steps:
          - lib.inner: {}
          - t.say: {message: outside}
        """)
    proc = cli(tmp_path, "run", "main.chain.yaml", "--tools", "hk_tools.py", "--progress", "quiet",
               "--transcript", "run.jsonl")
    assert proc.returncode == 0, show(proc)
    assert proc.stdout.splitlines() == ["go C B A D E", "outside B D E"], show(proc)
    recs = records(tmp_path / "run.jsonl")
    assert [r["hook"] for r in of_type(recs, "hook_fired") if r["step"] == "1/1"] == ISSUE_ORDER


def test_an_emit_fires_post_hooks_in_the_contracts_order(tmp_path: Path) -> None:
    write_tools(tmp_path)
    events = textwrap.dedent("""\
        events:
          t.ping:
            description: A ping from outside.
            payload: {type: object, properties: {n: {type: integer}}}
        hooks:
        """)
    hooks = five("post", "h").replace("post:t.say", "post:t.ping")
    write(tmp_path, "ping.hooks.yaml", events + textwrap.indent(hooks, "  "))
    proc = cli(tmp_path, "emit", "t.ping", "--data", '{"n": 1}', "--tools", "hk_tools.py")
    assert proc.returncode == 0, show(proc)
    assert_clean(proc)
    assert [line.split()[1] for line in proc.stdout.splitlines()[1:]] == ISSUE_ORDER, show(proc)  # "✓ ID ok …"
    assert fired(records(transcript_of(proc.stderr, tmp_path)), "post") == ISSUE_ORDER


def test_chainlang_graph_lists_the_hooks_in_firing_order(tmp_path: Path) -> None:
    write_tools(tmp_path)
    hooks = textwrap.indent(five("pre", "h"), "  ")
    write(tmp_path, "main.chain.yaml", "steps:\n  - t.say: {message: go}\nhooks:\n" + hooks)
    proc = cli(tmp_path, "graph", "main.chain.yaml", "--format", "json", "--tools", "hk_tools.py")
    assert proc.returncode == 0, show(proc)
    assert json.loads(proc.stdout)["hooks"] == ISSUE_ORDER


def test_an_after_cycle_is_still_a_static_error(tmp_path: Path) -> None:
    write_tools(tmp_path)
    write(tmp_path, "main.chain.yaml", "steps:\n  - t.say: {message: go}\n")
    write(tmp_path, "loop.hooks.yaml", """\
        - id: x
          trigger: pre:t.say
          after: [y]
          set: {message: "{message} X"}
        - id: y
          trigger: pre:t.say
          after: [x]
          set: {message: "{message} Y"}
        """)
    proc = cli(tmp_path, "run", "main.chain.yaml", "--tools", "hk_tools.py", "--transcript", "run.jsonl")
    assert proc.returncode == 1, show(proc)
    assert_clean(proc)
    assert "CL043" in proc.stderr and "x → y → x" in proc.stderr, show(proc)
    assert not (tmp_path / "run.jsonl").exists() and "go" not in proc.stdout
