"""Resume you can trust (issue 7): one process per transcript, sealed records, a required
chain hash, and no code imported because a transcript names it.

Each test fails on the interpreter before these were added: two resumes both ran and
doubled a side effect; an edited result was used as it was; a transcript's `tools` were
imported; a transcript without `file_sha256` skipped the check.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import cli_many, show
from tests.journal_util import read_records, rewrite
from tests.test_run_cli import (
    KILL_CHAIN,
    TOOLS,
    assert_clean,
    cli,
    one_error_line,
    sends,
    start_until,
    stop,
    write_chain,
)


def interrupted(tmp_path: Path, spawned: list["subprocess.Popen[str]"]) -> Path:
    """A run of KILL_CHAIN killed (SIGKILL) in step 3; its transcript (run.jsonl)."""
    chain = write_chain(tmp_path, KILL_CHAIN)
    proc = start_until(spawned, chain, tmp_path / ".chainlang" / "state" / "step3.pid", "--transcript", "run.jsonl")
    stop(proc, signal.SIGKILL)
    assert sends(tmp_path) == ["a"]
    return tmp_path / "run.jsonl"


def copy_project(src: Path, dst: Path) -> Path:
    """A copy of a test project (key, head and state included) whose transcript names the copy's chain."""
    shutil.copytree(src, dst)
    records = read_records(dst / "run.jsonl")
    records[0]["file"] = str((dst / "main.chain.yaml").resolve())
    rewrite(dst / "run.jsonl", records, dst)
    return dst / "run.jsonl"


# -- one process at a time --------------------------------------------------------------------


def test_a_run_in_progress_cannot_be_resumed(tmp_path: Path, spawned: list["subprocess.Popen[str]"]) -> None:
    chain = write_chain(tmp_path, "steps:\n  - test.pid_once: {name: step.pid}\n")
    proc = start_until(spawned, chain, tmp_path / ".chainlang" / "state" / "step.pid", "--transcript", "run.jsonl")
    started = time.monotonic()
    second = cli("resume", "run.jsonl", "--tools", TOOLS, cwd=tmp_path)
    assert time.monotonic() - started < 10
    assert_clean(second)
    line = one_error_line(second)
    assert f"in use by process {proc.pid}" in line and "run.jsonl" in line, line
    stop(proc, signal.SIGTERM)
    # the first process still owns a well-formed transcript: seq numbers are unique
    seqs = [r["seq"] for r in read_records(tmp_path / "run.jsonl")]
    assert seqs == sorted(set(seqs))


def test_two_resumes_at_once_run_the_rest_once(tmp_path: Path, spawned: list["subprocess.Popen[str]"]) -> None:
    interrupted(tmp_path, spawned)
    first, second = cli_many(*[(tmp_path, ["resume", "run.jsonl", "--tools", TOOLS, "--json"])] * 2)
    for proc in (first, second):
        assert_clean(proc)
    codes = sorted([first.returncode, second.returncode])
    # one resumed the run; the other was refused (the run in use) or found it finished
    assert codes in ([0, 0], [0, 2]), show(first) + show(second)
    assert sends(tmp_path) == ["a", "b"]  # the non-idempotent step after the cut ran once
    records = read_records(tmp_path / "run.jsonl")
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert sum(r["type"] == "run_finished" for r in records) == 1
    # and the transcript still resumes (as a finished run: nothing runs)
    again = cli("resume", "run.jsonl", "--tools", TOOLS, "--json", cwd=tmp_path)
    assert again.returncode == 0, show(again)
    assert sends(tmp_path) == ["a", "b"]


# -- sealed records ---------------------------------------------------------------------------


def _edit_result(lines: list[str]) -> list[str]:
    i = next(i for i, line in enumerate(lines) if '"step_finished"' in line and '"sent":"a"' in line)
    return lines[:i] + [lines[i].replace('"sent":"a"', '"sent":"z"')] + lines[i + 1:]


def _remove(lines: list[str]) -> list[str]:
    i = next(i for i, line in enumerate(lines) if '"step_started"' in line and '"step":"2"' in line)
    return lines[:i] + lines[i + 1:]


def _swap(lines: list[str]) -> list[str]:
    i = next(i for i, line in enumerate(lines) if '"step_started"' in line and '"step":"2"' in line)
    return lines[:i - 1] + [lines[i], lines[i - 1]] + lines[i + 1:]


def _cut_tail(lines: list[str]) -> list[str]:
    i = next(i for i, line in enumerate(lines) if '"step_finished"' in line and '"step":"1"' in line)
    return lines[: i + 1]


def _unseal(lines: list[str]) -> list[str]:
    record = json.loads(lines[1])
    del record["mac"]
    return [lines[0], json.dumps(record, separators=(",", ":")) + "\n", *lines[2:]]


EDITS = {"edited": (_edit_result, ":3: the record does not match its seal"),
         "removed": (_remove, ":4: the record does not match its seal"),
         "reordered": (_swap, ":3: the record does not match its seal"),
         "cut": (_cut_tail, "records were removed from its end"),
         "unsealed": (_unseal, ":2: the line has no seal")}


def test_an_edited_transcript_is_refused_naming_the_first_bad_line(
        tmp_path: Path, spawned: list["subprocess.Popen[str]"]) -> None:
    original = interrupted(tmp_path / "base", spawned)
    lines = original.read_text(encoding="utf-8").splitlines(keepends=True)
    assert '"step_finished"' in lines[2] and '"step":"1"' in lines[2]  # line 3: step 1 finished
    calls = []
    for name, (edit, _) in EDITS.items():
        transcript = copy_project(tmp_path / "base", tmp_path / name)
        fresh = transcript.read_text(encoding="utf-8").splitlines(keepends=True)
        transcript.write_text("".join(edit(fresh)), encoding="utf-8")
        calls.append((tmp_path / name, ["resume", "run.jsonl", "--tools", TOOLS, "--json"]))
    for (name, (_, message)), proc in zip(EDITS.items(), cli_many(*calls)):
        assert_clean(proc)
        line = one_error_line(proc)
        assert "cannot resume" in line and message in line, (name, line)
        assert sends(tmp_path / name) == ["a"], name  # nothing ran
    # untouched, the same transcript resumes
    untouched = copy_project(tmp_path / "base", tmp_path / "untouched")
    proc = cli("resume", untouched.name, "--tools", TOOLS, "--json", cwd=untouched.parent)
    assert proc.returncode == 0, show(proc)
    assert sends(tmp_path / "untouched") == ["a", "b"]


def test_a_missing_head_or_key_is_refused(tmp_path: Path, spawned: list["subprocess.Popen[str]"]) -> None:
    interrupted(tmp_path / "base", spawned)
    no_head = copy_project(tmp_path / "base", tmp_path / "nohead")
    (tmp_path / "nohead" / "run.jsonl.head").unlink()
    no_key = copy_project(tmp_path / "base", tmp_path / "nokey")
    (tmp_path / "nokey" / ".chainlang" / "transcript.key").unlink()
    other_key = copy_project(tmp_path / "base", tmp_path / "otherkey")
    (tmp_path / "otherkey" / ".chainlang" / "transcript.key").write_text("ab" * 32 + "\n")
    procs = cli_many(*[(t.parent, ["resume", t.name, "--tools", TOOLS]) for t in (no_head, no_key, other_key)])
    messages = [one_error_line(p) for p in procs]
    assert "run.jsonl.head is missing" in messages[0]
    assert "transcript key is missing" in messages[1]
    assert ":1: the record does not match its seal" in messages[2]


def test_the_chain_hash_is_required(tmp_path: Path, spawned: list["subprocess.Popen[str]"]) -> None:
    transcript = interrupted(tmp_path, spawned)
    records = read_records(transcript)
    del records[0]["file_sha256"]
    rewrite(transcript, records, tmp_path)  # sealed again, as only a holder of the key could
    proc = cli("resume", "run.jsonl", "--tools", TOOLS, cwd=tmp_path)
    assert "run.jsonl:1: run_started record needs 'file_sha256'" in one_error_line(proc)
    assert sends(tmp_path) == ["a"]


# -- nothing imported because a transcript names it ---------------------------------------------

EVIL = """\
from pathlib import Path
Path(__file__).with_name("imported.txt").write_text("the transcript's tools were imported")
"""


def test_resume_never_imports_the_tools_a_transcript_names(
        tmp_path: Path, spawned: list["subprocess.Popen[str]"]) -> None:
    transcript = interrupted(tmp_path, spawned)
    (tmp_path / "evil.py").write_text(EVIL, encoding="utf-8")
    records = read_records(transcript)
    records[0]["tools"] = [str(tmp_path / "evil.py"), str(TOOLS)]
    rewrite(transcript, records, tmp_path)
    bare = cli("resume", "run.jsonl", cwd=tmp_path)
    assert_clean(bare)
    assert not (tmp_path / "imported.txt").exists()
    assert bare.returncode == 1, show(bare)  # its events are unknown without the tools: it does not start
    assert "unknown event 'test.send'" in bare.stderr
    assert "resume imports only the tools it is given" in bare.stderr and "evil.py" in bare.stderr
    given = cli("resume", "run.jsonl", "--tools", TOOLS, "--json", cwd=tmp_path)
    assert given.returncode == 0, show(given)
    assert not (tmp_path / "imported.txt").exists()
    assert sends(tmp_path) == ["a", "b"]


@pytest.mark.parametrize("where", ["dir", "missing"])
def test_resume_of_a_directory_or_nothing_is_a_usage_error(tmp_path: Path, where: str) -> None:
    target = tmp_path / "runs"
    if where == "dir":
        target.mkdir()
    proc = cli("resume", "runs", cwd=tmp_path)
    line = one_error_line(proc)
    assert ("is a directory" if where == "dir" else "no such transcript") in line
    assert not (tmp_path / "runs.head").exists()
