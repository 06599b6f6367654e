"""`chainlang report`: a run's transcript as one HTML page, through the CLI. The structure is
read with a parser (tests/report_util.py); tests/test_report_browser.py renders the same
pages in Chromium."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import cli_here, show
from tests.hooks_util import assert_clean
from tests.report_util import demo_project, dom, island, run_demo


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo project with one finished run (review.jsonl) and its report (review.html)."""
    project = demo_project(tmp_path_factory.mktemp("report"))
    transcript = run_demo(project)
    made = cli_here(project, "report", transcript.name)
    assert made.returncode == 0 and made.stdout.strip() == "review.html", show(made)
    return project


def test_the_report_sums_the_run_up(demo: Path) -> None:
    page = dom((demo / "review.html").read_text(encoding="utf-8"))
    assert page.one(id="run-status").all_text() == "ok"
    assert page.one("span", class_="title").all_text() == "orders.review"
    assert page.one(id="run-trigger").all_text() == "cli"
    assert json.loads(page.one(id="run-inputs").all_text()) == {"n": 7}
    assert json.loads(page.one(id="run-outputs").all_text()) == {"sums": [11, 12, 13], "supplier": 2}
    assert page.find_all(id="run-error") == []


def test_the_timeline_has_lanes_for_parallel_steps_retries_and_hook_actions(demo: Path) -> None:
    page = dom((demo / "review.html").read_text(encoding="utf-8"))
    bars = page.find_all("button", class_="bar")
    steps = [bar.attrs["data-step"] for bar in bars]
    # every attempt a bar: the retried step twice, the hook's action among them
    assert sorted(steps) == sorted(["1", "2.1", "2.2", "3[0]", "3[1]", "3[2]", "4", "4", "5", "6",
                                    "4/hook:audit/1"])
    lane_of = {}
    for number, lane in enumerate(page.find_all("div", class_="lane")):
        for bar in lane.find_all("button", class_="bar"):
            lane_of.setdefault(bar.attrs["data-step"], set()).add((number, lane.attrs["class"]))
    assert lane_of["2.1"] != lane_of["2.2"]  # the parallel group side by side
    assert all("lane-hooks" in cls for _, cls in lane_of["4/hook:audit/1"])
    assert not any("lane-hooks" in cls for step, lanes in lane_of.items() if "hook:" not in step for _, cls in lanes)
    first, second = [bar for bar in bars if bar.attrs["data-step"] == "4"]
    assert "s-failed" in first.attrs["class"] and "s-ok" in second.attrs["class"]
    assert "#2" in second.all_text()
    fired = page.find_all("span", class_="fire")
    assert [f.attrs["data-hook"] for f in fired] == ["audit"]


def test_each_attempt_s_details_are_in_the_page(demo: Path) -> None:
    page = dom((demo / "review.html").read_text(encoding="utf-8"))
    attempts = island(page)["attempts"]
    retried = [a for a in attempts if a["step"] == "4"]
    assert [(a["attempt"], a["status"]) for a in retried] == [(1, "failed"), (2, "ok")]
    assert retried[0]["error"]["message"] == "attempt 1 failed" and retried[1]["result"] == 2
    decided = next(a for a in attempts if a["step"] == "5")
    assert decided["decide"][0]["action"] == "continue" and decided["decide"][0]["source"]
    assert decided["params"] == {"value": "7 orders"}
    hook_action = next(a for a in attempts if a["step"] == "4/hook:audit/1")
    assert hook_action["hook"] == "audit" and hook_action["params"] == {"seconds": 0.1, "label": "audited"}
    rows = page.one("table", class_="steps").find_all("tr", class_="s-ok") + \
        page.one("table", class_="steps").find_all("tr", class_="s-failed")
    assert len(rows) == len(attempts) == 11
    hooks = page.one("table", class_="hooks").all_text()
    assert "audit" in hooks and "fired (post)" in hooks and "finished" in hooks


def test_the_graph_shows_how_each_step_ended(demo: Path) -> None:
    page = dom((demo / "review.html").read_text(encoding="utf-8"))
    graph = page.one("div", class_="graph")
    status = {node.attrs["data-path"]: node.attrs["class"].split()[-1]
              for node in graph.find_all("div", class_="g-event")}
    assert status["4"] == "s-ok"  # failed once, then ok: how it ended
    assert status["2.1"] == status["2.2"] == status["6"] == "s-ok"
    assert graph.find_all("div", class_="g-parallel")


def test_a_run_cut_off_is_shown_interrupted_with_its_unfinished_step(demo: Path, tmp_path: Path) -> None:
    lines = (demo / "review.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    started = next(i for i, line in enumerate(lines) if '"step_started"' in line and '"4"' in line)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:started + 1]) + lines[started + 1][:20], encoding="utf-8")  # and a torn line
    made = cli_here(demo, "report", str(cut), "-o", "-")
    assert made.returncode == 0, show(made)
    page = dom(made.stdout)
    assert page.one(id="run-status").all_text() == "interrupted"
    assert "chainlang resume" in page.all_text() and "cut off" in page.all_text()
    attempts = island(page)["attempts"]
    assert attempts[-1]["step"] == "4" and attempts[-1]["status"] == "interrupted"


def test_a_run_under_way_is_shown_running(demo: Path, tmp_path: Path) -> None:
    from chainlang.journal.lock import RunLock

    lines = (demo / "review.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    going = tmp_path / "going.jsonl"
    going.write_text("".join(lines[:6]), encoding="utf-8")
    lock = RunLock.acquire(going)  # as the process running it holds it
    try:
        made = cli_here(demo, "report", str(going), "-o", "-")
    finally:
        lock.release()
    assert made.returncode == 0, show(made)
    page = dom(made.stdout)
    assert page.one(id="run-status").all_text() == "running"
    assert "Under way" in page.all_text()
    assert any(a["status"] == "running" for a in island(page)["attempts"])


def test_what_a_transcript_holds_is_shown_never_run(tmp_path: Path) -> None:
    project = demo_project(tmp_path / "p")
    evil = '</script><script>document.title="owned"</script><img src=x onerror=alert(1)>'
    (project / "evil.chain.yaml").write_text(
        "steps:\n  - test.echo: {value: %s}\noutputs: {v: \"{test.echo.result}\"}\n" % json.dumps(evil),
        encoding="utf-8")
    assert cli_here(project, "run", "evil.chain.yaml", "--transcript", "evil.jsonl").returncode == 0
    made = cli_here(project, "report", "evil.jsonl", "-o", "-")
    assert made.returncode == 0, show(made)
    page = dom(made.stdout)
    assert len(page.find_all("script")) == 2 and page.find_all("img") == []  # the data island and the page's own
    assert island(page)["attempts"][0]["params"] == {"value": evil}
    assert json.loads(page.one(id="run-outputs").all_text()) == {"v": evil}


def test_big_values_are_cut_in_the_report_not_in_the_transcript(tmp_path: Path) -> None:
    project = demo_project(tmp_path / "p")
    (project / "big.chain.yaml").write_text('steps:\n  - test.echo: {value: "%s"}\n' % ("x" * 200_000),
                                            encoding="utf-8")
    assert cli_here(project, "run", "big.chain.yaml", "--transcript", "big.jsonl").returncode == 0
    made = cli_here(project, "report", "big.jsonl", "-o", "-")
    shown = island(dom(made.stdout))["attempts"][0]["result"]
    assert "cut to" in shown["cut"] and len(shown["start"]) < 70_000


def test_the_graph_is_left_out_when_the_chain_changed_or_is_elsewhere(demo: Path, tmp_path: Path) -> None:
    elsewhere = cli_here(tmp_path, "report", str(demo / "review.jsonl"), "-o", "-")
    assert elsewhere.returncode == 0, show(elsewhere)
    assert "not in this project" in dom(elsewhere.stdout).one(id="graph-note").all_text()
    project = demo_project(tmp_path / "changed")
    run_demo(project)
    chain = project / "review.chain.yaml"
    chain.write_text(chain.read_text(encoding="utf-8") + "\n# changed\n", encoding="utf-8")
    changed = cli_here(project, "report", "review.jsonl", "-o", "-")
    assert "has changed since the run" in dom(changed.stdout).one(id="graph-note").all_text()


def test_an_edited_transcript_is_said_to_be_edited(demo: Path, tmp_path: Path) -> None:
    edited = demo / "edited.jsonl"
    edited.write_text((demo / "review.jsonl").read_text(encoding="utf-8").replace('"7 orders"', '"8 orders"'),
                      encoding="utf-8")
    made = cli_here(demo, "report", "edited.jsonl", "-o", "-")
    assert made.returncode == 0, show(made)
    assert "seals do not verify" in made.stdout


@pytest.mark.parametrize("args, message", [
    (["."], "is a directory, not a transcript; give one transcript file, e.g. the newest one there: chainlang report"),
    (["missing.jsonl"], "missing.jsonl: cannot read: No such file or directory"),
    (["review.chain.yaml"], "not a transcript chainlang can read: review.chain.yaml:1"),
    (["review.jsonl", "-o", "review.jsonl"], "that is the transcript"),
    (["review.jsonl", "-o", "no/such/dir/r.html"], "cannot write the report"),
])
def test_what_cannot_be_reported_is_said(demo: Path, args: list[str], message: str) -> None:
    made = cli_here(demo, "report", *args)
    # a file whose content is not a transcript exits 1 (it names the line); the rest are usage errors
    assert made.returncode == (1 if "not a transcript chainlang can read" in message else 2) and message in made.stderr, \
        show(made)
    assert_clean(made)


def test_a_cancelled_step_and_the_failure_that_cancelled_it_are_both_shown(tmp_path: Path) -> None:
    project = demo_project(tmp_path / "p")
    (project / "cut.chain.yaml").write_text(
        "steps:\n  - [test.fail: {message: the supplier is down}, test.sleep: {seconds: 30}]\n", encoding="utf-8")
    ran = cli_here(project, "run", "cut.chain.yaml", "--transcript", "cut.jsonl")
    assert ran.returncode == 1, show(ran)
    made = cli_here(project, "report", "cut.jsonl", "-o", "-")
    page = dom(made.stdout)
    assert page.one(id="run-status").all_text() == "failed"
    assert "the supplier is down" in page.one(id="run-error").all_text()
    bars = {bar.attrs["data-step"]: bar.attrs["class"] for bar in page.find_all("button", class_="bar")}
    assert "s-failed" in bars["1.1"] and "s-cancelled" in bars["1.2"]
    cancelled = next(a for a in island(page)["attempts"] if a["step"] == "1.2")
    assert "another branch failed" in cancelled["error"]["message"]  # why it was cancelled


def test_a_run_killed_then_resumed_is_shown_whole_with_where_it_was_resumed(tmp_path: Path) -> None:
    """SIGKILL in the middle of a step: the report says interrupted, with the step cut off; after
    `chainlang resume`, one report of the whole run, the resumption marked on the timeline."""
    import os
    import signal
    import subprocess
    import time

    from tests.helpers import clean_env, command

    project = demo_project(tmp_path / "p")
    (project / "slow.chain.yaml").write_text(
        "steps:\n  - test.echo: {value: before}\n  - test.pid_once: {name: slow.pid}\n  - test.echo: {value: after}\n",
        encoding="utf-8")
    proc = subprocess.Popen(command("run", "slow.chain.yaml", "--transcript", "slow.jsonl"), cwd=project,
                            env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        marker, deadline = project / ".chainlang" / "state" / "slow.pid", time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the run did not reach its slow step"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    cut = dom(cli_here(project, "report", "slow.jsonl", "-o", "-").stdout)
    assert cut.one(id="run-status").all_text() == "interrupted"
    assert [(a["step"], a["status"]) for a in island(cut)["attempts"]] == [("1", "ok"), ("2", "interrupted")]
    resumed = cli_here(project, "resume", "slow.jsonl")
    assert resumed.returncode == 0, show(resumed)
    whole = dom(cli_here(project, "report", "slow.jsonl", "-o", "-").stdout)
    assert whole.one(id="run-status").all_text() == "ok"
    assert [(a["step"], a["status"]) for a in island(whole)["attempts"]] == [
        ("1", "ok"), ("2", "interrupted"), ("2", "ok"), ("3", "ok")]
    assert len(whole.find_all("span", class_="restart")) == 1 and "1 time(s)" in whole.all_text()
    cut_off = island(whole)["attempts"][1]
    restart = min(a["start_ms"] for a in island(whole)["attempts"][2:])
    assert cut_off["end_ms"] <= restart  # its bar ends where the killed process stopped writing
