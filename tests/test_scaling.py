"""Adversarial shapes that would make a naive checker quadratic (or worse).

These are hang guards, not timings: each file is checked by the real CLI in a
subprocess with a generous timeout, and the result is asserted. Speed itself is
measured in benchmarks/.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the fast tier (make test-fast) leaves it out

TIMEOUT = 60  # seconds; each case takes about a second


def check_json(path: Path, cwd: Path) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "chainlang.cli", "check", "--format", "json", str(path)],
        cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def test_many_ids_and_unknown_references(tmp_path: Path) -> None:
    n = 3000
    lines = ["steps:"]
    lines += [f"  - event: tools.now\n    id: step_{i:05d}_abcdef\n    timout: 1s" for i in range(n)]
    lines += [f'  - user.notify: {{message: "{{stap_{i:05d}_abcdeg.result}}"}}' for i in range(n)]
    (tmp_path / "x.chain.yaml").write_text("\n".join(lines) + "\n")
    diags = check_json(tmp_path / "x.chain.yaml", tmp_path)
    assert sum(d["rule"] == "CL010" for d in diags) == n
    assert sum(d["rule"] == "CL021" for d in diags) == n


def test_long_after_chain_and_recursion_of_many_hooks(tmp_path: Path) -> None:
    n = 2000
    hooks = [f"- id: h{i}\n  trigger: post:user.notify\n  after: [h{i + 1}]\n  max_depth: 2\n"
             f"  action: [user.notify: {{message: m}}]" for i in range(n)]
    hooks.append(f"- id: h{n}\n  trigger: post:user.notify\n  after: [h0]\n  action: [user.notify: {{message: m}}]")
    (tmp_path / "x.hooks.yaml").write_text("\n".join(hooks) + "\n")
    diags = check_json(tmp_path / "x.hooks.yaml", tmp_path)
    rules = sorted({d["rule"] for d in diags})
    assert rules == ["CL043", "CL044"]  # the after cycle, and the one hook without max_depth


def test_wide_parallel_group_of_one_event_with_references(tmp_path: Path) -> None:
    n = 1500
    branches = "\n".join(f'    - user.notify: {{message: "{{tools.now.iso}} {i}"}}' for i in range(n))
    refs = "\n".join(f'    - user.notify: {{message: "{{user.notify.status}}"}}' for _ in range(n))
    text = f"steps:\n  - tools.now\n  - parallel:\n{branches}\n{refs}\n"
    (tmp_path / "x.chain.yaml").write_text(text)
    diags = check_json(tmp_path / "x.chain.yaml", tmp_path)
    assert {d["rule"] for d in diags} == {"CL024"}


def test_minified_json_chain_on_one_line_with_many_errors(tmp_path: Path) -> None:
    n = 5000
    steps = [{"event": "tools.nwo", "params": {}} for _ in range(n)]
    (tmp_path / "x.chain.yaml").write_text(json.dumps(steps, separators=(",", ":")))
    proc = subprocess.run([sys.executable, "-m", "chainlang.cli", "check", "x.chain.yaml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 1
    assert proc.stdout.count("[CL014 unknown-event]") == n
    longest = max(len(line) for line in proc.stdout.splitlines())
    assert longest < 400  # the one huge source line is shown as a window


def test_one_long_string_with_many_bad_references(tmp_path: Path) -> None:
    n = 5000
    message = " ".join(f"{{nope{i}}}" for i in range(n))
    (tmp_path / "x.chain.yaml").write_text(f'steps:\n  - user.notify: {{message: "{message}"}}\n')
    diags = check_json(tmp_path / "x.chain.yaml", tmp_path)
    assert len(diags) == n
    columns = [d["column"] for d in diags]
    assert columns == sorted(columns) and len(set(columns)) == n


@pytest.mark.parametrize("n", [400])
def test_many_named_chains_calling_in_a_line_and_a_cycle(tmp_path: Path, n: int) -> None:
    for i in range(n):
        callee = f"c.n{(i + 1) % n}"
        (tmp_path / f"c{i}.chain.yaml").write_text(f"chain: c.n{i}\nsteps:\n  - tools.now\n  - {callee}\n")
    diags = check_json(tmp_path, tmp_path)
    assert len(diags) == n and {d["rule"] for d in diags} == {"CL045"}


def test_many_hooks_in_a_ring_through_distinct_events(tmp_path: Path) -> None:
    """A loop of n hooks: r_i fires after chain c_i and its action calls c_(i+1). Hook-to-hook
    searches from every hook would be quadratic; strongly connected components are linear."""
    n = 1500
    for i in range(n):
        (tmp_path / f"c{i}.chain.yaml").write_text(f"chain: ring.c{i}\nsteps: [user.notify: {{message: m}}]\n")
    hooks = "\n".join(f"- {{id: r{i}, trigger: post:ring.c{i}, action: [ring.c{(i + 1) % n}]}}" for i in range(n))
    (tmp_path / "ring.hooks.yaml").write_text(hooks + "\n")
    diags = check_json(tmp_path, tmp_path)
    assert len(diags) == n and {d["rule"] for d in diags} == {"CL044"}
    assert all(len(d["message"]) <= 400 for d in diags)  # a 1,500-hook loop is cut short in the message
