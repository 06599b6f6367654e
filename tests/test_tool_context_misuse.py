"""A tool that calls its `ctx` wrongly fails its step with an error naming the call (never a
traceback printed by the event loop while the run ends ok), and the documented keyword forms
work however the tool runs: in a worker thread, inline, or as a coroutine (issue 28)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import cli, records, show

TOOLS = Path(__file__).parent / "run" / "ctx_misuse_tools.py"
KINDS = ["misuse.threaded", "misuse.quick", "misuse.awaited"]


def run(tmp_path: Path, event: str, call: str) -> tuple[object, list[dict[str, object]]]:
    (tmp_path / "c.chain.yaml").write_text(
        "steps:\n" + "".join(f"  - {event}: {{call: warm}}\n" for _ in range(4))  # the quick tool goes inline
        + f"  - {event}: {{call: {call}}}\n", encoding="utf-8")
    done = cli(tmp_path, "run", "c.chain.yaml", "--tools", TOOLS, "--transcript", tmp_path / "t.jsonl")
    assert "Traceback" not in done.stderr and "Exception in callback" not in done.stderr, show(done)
    return done, records(tmp_path / "t.jsonl")


@pytest.mark.parametrize("event", KINDS)
def test_progress_with_keywords_is_recorded(tmp_path: Path, event: str) -> None:
    done, recs = run(tmp_path, event, "progress-keywords")
    assert done.returncode == 0, show(done)
    reports = [(r["message"], r["fraction"]) for r in recs if r["type"] == "step_progress"]
    assert reports == [("half", 0.5), ("most", 0.9)], reports


@pytest.mark.parametrize(("call", "said"), [
    ("progress-three", "ctx.progress(message, fraction=None): takes from 1 to 2 positional arguments but 3 were given"),
    ("notify-level", "ctx.notify(text): got an unexpected keyword argument 'level'"),
    ("notify-none", "ctx.notify(text): missing 1 required positional argument: 'text'"),
])
@pytest.mark.parametrize("event", KINDS)
def test_a_wrong_ctx_call_fails_its_step_naming_the_call(tmp_path: Path, event: str, call: str, said: str) -> None:
    done, recs = run(tmp_path, event, call)
    assert done.returncode == 1, show(done)
    failed = [r for r in recs if r["type"] == "step_finished" and r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["step"] == "5", failed
    assert f"TypeError: {said}" in done.stderr, show(done)
    assert said in str(failed[0]["error"]), failed[0]["error"]
