"""Where runs go and how long they stay (issue 26, deliverable 7), through the CLI:
`chainlang gc` removes the transcripts (and .head files) of ended runs beyond `--keep` or
`[runs] keep`, never those of runs that wait, were interrupted or that a process holds;
`[runs] dir` puts them elsewhere; serve applies `[runs] keep` at start."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from chainlang.journal.lock import RunLock
from tests.helpers import cli_here, show
from tests.journal_util import cut_after
from tests.serve_util import Servers, servers, wait_until  # noqa: F401 (the servers fixture)

TICK = """\
chain: demo.tick
steps:
  - tools.now
  - tools.now
"""

WAITS = """\
chain: demo.waits
events:
  demo.approved:
    payload: {type: object, properties: {ok: {type: boolean}}}
steps:
  - tools.now
  - wait: {event: demo.approved, timeout: 1d}
  - tools.now
"""

DAY = 86400.0


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "chainlang.toml").write_text('chains = ["."]\n', encoding="utf-8")
    (tmp_path / "tick.chain.yaml").write_text(TICK, encoding="utf-8")
    (tmp_path / "waits.chain.yaml").write_text(WAITS, encoding="utf-8")
    return tmp_path


def runs(project: Path) -> Path:
    return project / ".chainlang" / "runs"


def ran(project: Path, name: str, age_days: float, chain: str = "tick.chain.yaml", *args: str,
        code: int = 0) -> Path:
    """`chainlang run CHAIN --transcript .chainlang/runs/NAME.jsonl`, its files dated `age_days` ago."""
    path = runs(project) / f"{name}.jsonl"
    proc = cli_here(project, "run", chain, "--transcript", path, *args)
    assert proc.returncode == code, show(proc)
    date(path, age_days)
    return path


def date(path: Path, age_days: float) -> None:
    moment = time.time() - age_days * DAY
    for file in (path, path.with_name(path.name + ".head")):
        os.utime(file, (moment, moment))


def names(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()} if directory.is_dir() else set()


def gc(project: Path, *args: str, code: int = 0) -> "subprocess.CompletedProcess[str]":
    proc = cli_here(project, "gc", *args)
    assert proc.returncode == code, show(proc)
    return proc


def test_keep_count_removes_older_ended_runs_and_never_unfinished_ones(project: Path) -> None:
    for i, name in enumerate(("end1", "end2", "end3", "end4")):
        ran(project, name, age_days=10 - i)
    interrupted = ran(project, "cut", age_days=20)
    cut_after(interrupted, lambda r: r["type"] == "step_finished")  # as a crash after step 1 leaves it
    date(interrupted, 20)
    ran(project, "waiting", 20, "waits.chain.yaml", "--detach", code=4)

    proc = cli_here(project, "gc", "--keep", "2")
    assert proc.returncode == 0, show(proc)
    assert names(runs(project)) == {f"{n}.jsonl{h}" for n in ("end3", "end4", "cut", "waiting") for h in ("", ".head")}
    lines = proc.stdout.splitlines()
    assert sorted(lines[:-1]) == [f"removed {Path('.chainlang/runs') / n}.jsonl" for n in ("end1", "end2")]
    assert lines[-1] == ("removed 2 transcripts of ended runs; kept 2 within keep = 2; "
                         "2 unfinished (interrupted or waiting) kept")

    # the interrupted run is still resumable after gc, and ends ok
    resumed = cli_here(project, "resume", interrupted)
    assert resumed.returncode == 0, show(resumed)


def test_dry_run_removes_nothing_and_json_says_what(project: Path) -> None:
    for i in range(3):
        ran(project, f"end{i}", age_days=3 - i)
    before = names(runs(project))
    proc = cli_here(project, "gc", "--keep", "1", "--dry-run")
    assert proc.returncode == 0, show(proc)
    assert names(runs(project)) == before
    assert proc.stdout.splitlines()[-1].startswith("would remove 2 transcripts of ended runs; kept 1")
    proc = cli_here(project, "gc", str(project), "--keep", "1", "--dry-run", "--json")
    assert proc.returncode == 0, show(proc)
    report = json.loads(proc.stdout)
    assert report["dry_run"] is True and report["kept"] == 1
    assert sorted(Path(p).name for p in report["removed"]) == ["end0.jsonl", "end1.jsonl"]
    assert names(runs(project)) == before


def test_keep_age(project: Path) -> None:
    ran(project, "old", age_days=40)
    ran(project, "new", age_days=1)
    gc(project, "--keep", "30d")
    assert names(runs(project)) == {"new.jsonl", "new.jsonl.head"}


def test_keep_from_chainlang_toml_and_none_at_all(project: Path) -> None:
    for i in range(3):
        ran(project, f"end{i}", age_days=3 - i)
    proc = cli_here(project, "gc")
    assert proc.returncode == 2, show(proc)
    assert "--keep" in proc.stderr and "[runs]" in proc.stderr, show(proc)
    assert len(names(runs(project))) == 6
    (project / "chainlang.toml").write_text('chains = ["."]\n[runs]\nkeep = 1\n', encoding="utf-8")
    gc(project)
    assert names(runs(project)) == {"end2.jsonl", "end2.jsonl.head"}


@pytest.mark.parametrize("keep", ["0", '"soon"', '"0s"', "true"])
def test_bad_keep_in_chainlang_toml_is_a_config_error(project: Path, keep: str) -> None:
    (project / "chainlang.toml").write_text(f'chains = ["."]\n[runs]\nkeep = {keep}\n', encoding="utf-8")
    for args in (("gc",), ("run", "tick.chain.yaml")):  # every command that reads chainlang.toml says so
        proc = cli_here(project, *args)
        assert proc.returncode == 2, show(proc)
        assert "chainlang.toml" in proc.stderr and "keep" in proc.stderr, show(proc)


@pytest.mark.parametrize("keep", ["0", "soon", "-3"])
def test_bad_keep_option(project: Path, keep: str) -> None:
    proc = cli_here(project, "gc", "--keep", keep)
    assert proc.returncode == 2, show(proc)
    assert "--keep" in proc.stderr, show(proc)


def test_runs_dir_puts_transcripts_elsewhere(project: Path) -> None:
    (project / "chainlang.toml").write_text('chains = ["."]\n[runs]\ndir = "kept/runs"\nkeep = 1\n',
                                            encoding="utf-8")
    for _ in range(2):
        proc = cli_here(project, "run", "tick.chain.yaml")
        assert proc.returncode == 0, show(proc)
    elsewhere = project / "kept" / "runs"
    written = sorted(p for p in elsewhere.iterdir() if p.name.endswith(".jsonl"))
    assert len(written) == 2 and not runs(project).exists()
    date(written[0], 2)
    gc(project)
    assert names(elsewhere) == {written[1].name, written[1].name + ".head"}


def test_orphan_head_is_removed(project: Path) -> None:
    ran(project, "end", age_days=1)
    orphan = runs(project) / "gone.jsonl.head"
    orphan.write_text("{}\n", encoding="utf-8")
    proc = cli_here(project, "gc", "--keep", "5")
    assert proc.returncode == 0, show(proc)
    assert not orphan.exists() and (runs(project) / "end.jsonl").exists()
    assert "gone.jsonl.head" in proc.stdout


def test_a_transcript_a_process_holds_is_not_removed(project: Path) -> None:
    held = ran(project, "held", age_days=5)
    ran(project, "new", age_days=1)
    lock = RunLock.acquire(held, create=False)  # as a resume of it going on would
    try:
        proc = cli_here(project, "gc", "--keep", "1")
        assert proc.returncode == 0, show(proc)
        assert held.exists() and held.with_name("held.jsonl.head").exists()
        assert "1 held by a running process kept" in proc.stdout, show(proc)
    finally:
        lock.release()
    gc(project, "--keep", "1")
    assert not held.exists()


@pytest.mark.slow
def test_serve_applies_runs_keep_at_start(project: Path, servers: Servers) -> None:  # noqa: F811
    for i in range(3):
        ran(project, f"end{i}", age_days=3 - i)
    (project / "chainlang.toml").write_text('chains = ["."]\n[runs]\nkeep = 1\n', encoding="utf-8")
    server = servers.start(project)
    wait_until("serve removed the older transcripts",
               lambda: names(runs(project)) == {"end2.jsonl", "end2.jsonl.head"}, within=30, server=server)
    assert server.stop() == 0
