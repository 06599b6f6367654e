"""`chainlang serve` and the runs waiting inside (LANGUAGE.md §15), end to end: a real serve
on loopback, runs started by the CLI with `--detach` (exit 4, holding no process), events
posted to serve or emitted by `chainlang emit` in another process, deadlines, and the page
that answers a `user.ask`.

The step after each wait is `k.record` (tests/kill_tools.py): it appends one line to
`.chainlang/state/effects.jsonl`, so a test counts how often it really ran.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import command
from tests.serve_util import env_with, run, servers, show, wait_until  # noqa: F401  (servers: a fixture)

HERE = Path(__file__).parent
TOKEN = "waits-page-token-3b1f"

APPROVE = """\
chain: mail.approve
inputs:
  draft: {type: string}
events:
  approval.given:
    payload:
      type: object
      properties:
        draft_id: {type: string}
        approved: {type: boolean}
      required: [draft_id, approved]
      additionalProperties: false
steps:
  - wait:
      event: approval.given
      where: "draft_id == inputs.draft"
      timeout: 2d
    id: approval
  - k.record: {kind: after-wait, ref: "{inputs.draft}"}
outputs:
  approved: "{approval.result.approved}"
"""

LATE = """\
chain: mail.late
inputs:
  draft: {type: string}
steps:
  - wait:
      event: approval.given
      where: "draft_id == inputs.draft"
      timeout: 2s
      on_timeout: continue
    id: approval
  - k.record: {kind: after-wait, ref: "{inputs.draft}"}
outputs:
  result: "{approval.result}"
"""

ASK = """\
chain: mail.ask
steps:
  - user.ask: {question: "Send the summary to the team?", choices: ["yes", "no"], timeout: 1d}
    id: send
  - k.record: {kind: after-ask, ref: "{send.result.answer}"}
outputs:
  answer: "{send.result.answer}"
  by: "{send.result.by}"
"""


def make_project(root: Path, serve_toml: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "kill_tools.py", root / "kill_tools.py")
    (root / "chainlang.toml").write_text('chains = ["."]\ntools = ["kill_tools.py"]\n' + serve_toml, encoding="utf-8")
    for name, text in (("approve", APPROVE), ("late", LATE), ("ask", ASK)):
        (root / f"{name}.chain.yaml").write_text(text, encoding="utf-8")
    return root


def detach(project: Path, chain: str, name: str, *inputs: str) -> Path:
    """`chainlang run CHAIN --detach` to its first wait (exit 4): the run's transcript."""
    where = project / ".chainlang" / "runs" / f"{name}.jsonl"
    done = run(project, "run", f"{chain}.chain.yaml", "--detach", "--transcript", where, *inputs)
    assert done.returncode == 4, show(done)
    # its first end: a serve already running may have resumed it since (a short deadline on a busy machine)
    assert [r["status"] for r in records(where) if r["type"] == "run_finished"][0] == "waiting"
    return where


def records(transcript: Path) -> list[dict[str, Any]]:
    lines = transcript.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def finished(transcript: Path) -> dict[str, Any]:
    """The transcript's last run_finished record ({} when none)."""
    ends = [r for r in records(transcript) if r["type"] == "run_finished"]
    return ends[-1] if ends else {}


def ended(transcript: Path, server: Any = None, within: float = 30.0) -> dict[str, Any]:
    """Wait until the run recorded an end other than `waiting`: that run_finished record."""
    wait_until(f"{transcript.name} ends", lambda: finished(transcript).get("status") not in (None, "waiting"),
               within=within, server=server)
    return finished(transcript)


def effects(project: Path, kind: str = "after-wait") -> list[dict[str, Any]]:
    path = project / ".chainlang" / "state" / "effects.jsonl"
    if not path.exists():
        return []
    return [e for e in map(json.loads, path.read_text(encoding="utf-8").splitlines()) if e["kind"] == kind]


# -- delivery and resuming ---------------------------------------------------------------------


@pytest.mark.slow
def test_an_event_posted_to_serve_is_delivered_and_the_run_resumed(servers, tmp_path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    project = make_project(tmp_path / "p")
    server = servers.start(project)
    where = detach(project, "approve", "d1", "--input", "draft=d-1")
    listed = server.get("/waits").json()
    assert [(w["run_id"], w["event"], w["where"]) for w in listed["waits"]] == \
        [(records(where)[0]["run_id"], "approval.given", "draft_id == inputs.draft")]
    assert listed["waits"][0]["values"] == {"inputs.draft": "d-1"} and listed["waits"][0]["deadline"]

    other = server.event("approval.given", {"draft_id": "d-2", "approved": False})  # where is false: not for it
    assert other.status_code == 202 and other.json()["delivered"] == [], other.text
    reply = server.event("approval.given", {"draft_id": "d-1", "approved": True})
    assert reply.status_code == 202, reply.text
    run_id = records(where)[0]["run_id"]
    assert [(d["run_id"], d["step"]) for d in reply.json()["delivered"]] == [(run_id, "1")]

    end = ended(where, server)
    assert end["status"] == "ok" and end["outputs"] == {"approved": True}, end
    wait = [r for r in records(where) if r["type"] == "wait_finished"]
    assert [(w["status"], w["payload"]) for w in wait] == [("ok", {"draft_id": "d-1", "approved": True})]
    assert [e["ref"] for e in effects(project)] == ["d-1"]  # the step after the wait ran once
    assert server.get("/waits").json()["waits"] == []
    # the same event again finds nobody waiting
    again = server.event("approval.given", {"draft_id": "d-1", "approved": True}, wait=True)
    assert again.status_code == 200 and again.json()["delivered"] == [], again.text


@pytest.mark.slow
def test_a_plain_emit_in_another_process_is_resumed_by_serve(servers, tmp_path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    project = make_project(tmp_path / "p")
    server = servers.start(project)
    where = detach(project, "approve", "d1", "--input", "draft=d-1")
    emitted = run(project, "emit", "approval.given", "--data", '{"draft_id": "d-1", "approved": false}')
    assert emitted.returncode == 0, show(emitted)
    end = ended(where, server)  # nobody told serve: it finds the settled wait by itself
    assert end["status"] == "ok" and end["outputs"] == {"approved": False}, end
    assert len(effects(project)) == 1


@pytest.mark.slow
def test_a_deadline_passing_under_serve_times_the_wait_out(servers, tmp_path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    project = make_project(tmp_path / "p")
    server = servers.start(project)
    where = detach(project, "late", "l1", "--input", "draft=l-1")
    end = ended(where, server)
    assert end["status"] == "ok" and end["outputs"] == {"result": None}, end  # on_timeout: continue
    assert [r["status"] for r in records(where) if r["type"] == "wait_finished"] == ["timed_out"]
    assert len(effects(project)) == 1
    assert "passed its deadline" in server.stderr


@pytest.mark.slow
def test_serve_resumes_at_startup_a_run_whose_wait_was_settled_before(servers, tmp_path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    project = make_project(tmp_path / "p")
    where = detach(project, "approve", "d1", "--input", "draft=d-1")
    emitted = run(project, "emit", "approval.given", "--data", '{"draft_id": "d-1", "approved": true}')
    assert emitted.returncode == 0, show(emitted)
    assert finished(where)["status"] == "waiting" and effects(project) == []  # settled, nobody resumed it yet
    server = servers.start(project)
    end = ended(where, server)
    assert end["status"] == "ok" and end["outputs"] == {"approved": True}, end
    assert len(effects(project)) == 1


@pytest.mark.slow
def test_a_foreground_run_watching_its_wait_is_not_resumed_by_serve(servers, tmp_path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    project = make_project(tmp_path / "p")
    server = servers.start(project)
    where = project / ".chainlang" / "runs" / "fg.jsonl"
    foreground = subprocess.Popen(command("run", "approve.chain.yaml", "--transcript", where, "--input", "draft=f-1"),
                                  cwd=project, env=env_with(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
    try:
        wait_until("the foreground run waits", lambda: server.get("/waits").json()["count"] == 1, within=30,
                   server=server)
        reply = server.event("approval.given", {"draft_id": "f-1", "approved": True})
        assert reply.status_code == 202 and len(reply.json()["delivered"]) == 1, reply.text
        out, err = foreground.communicate(timeout=60)
    finally:
        if foreground.poll() is None:
            foreground.kill()
            foreground.communicate()
    assert foreground.returncode == 0, show(foreground, out, err)
    assert finished(where)["status"] == "ok"
    run_id = records(where)[0]["run_id"]
    assert [e["run"] for e in effects(project)] == [run_id]  # the step after the wait ran once, in the foreground
    assert [r["type"] for r in records(where)].count("run_started") == 1  # serve never resumed it
    assert f"run {run_id} resumed" not in server.stderr


# -- the page of waiting runs and its answer form ------------------------------------------------


def browser(server: Any) -> httpx.Client:
    """A client as a browser on serve's page is: signed in by ?token= (the cookie), no bearer header."""
    client = httpx.Client(base_url=server.url, timeout=30)
    signed = client.get("/waiting", params={"token": TOKEN})
    assert signed.status_code == 303 and "chainlang_token" in client.cookies, signed.text
    return client


@pytest.mark.slow
def test_the_page_answers_a_question_with_its_form(servers, tmp_path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    project = make_project(tmp_path / "p", '\n[serve]\ntoken_env = "WAITS_TOKEN"\n')
    server = servers.start(project, env=env_with(WAITS_TOKEN=TOKEN), token=TOKEN)
    where = detach(project, "ask", "a1")
    run_id = records(where)[0]["run_id"]
    assert httpx.get(server.url + "/waiting").status_code == 401  # the page needs the token
    assert httpx.get(server.url + "/waits").status_code == 401
    waits = server.get("/waits").json()["waits"]  # the API: the bearer token
    question = waits[0]["question"]
    assert (waits[0]["run_id"], question["question"], question["choices"]) == \
        (run_id, "Send the summary to the team?", ["yes", "no"])

    page = browser(server)
    try:
        shown = page.get("/waiting")
        assert shown.status_code == 200 and "form-action 'self'" in shown.headers["content-security-policy"]
        assert f'data-question="{question["id"]}"' in shown.text and "Send the summary to the team?" in shown.text
        assert '<option value="&#34;yes&#34;">yes</option>' in shown.text
        origin = {"Origin": server.url}
        form = {"question_id": question["id"], "kind": "json", "answer": '"maybe"', "by": "ann"}

        refused = page.post("/waiting/answer", data=form, headers=origin)
        assert refused.status_code == 422, refused.text
        assert "is not one of the choices" in refused.text and "yes, no" in refused.text
        assert server.get("/waits").json()["count"] == 1 and finished(where)["status"] == "waiting"

        # another site's page cannot answer, even with the browser's cookie; a program needs the bearer
        evil = page.post("/waiting/answer", data={**form, "answer": '"yes"'}, headers={"Origin": "http://evil.example"})
        assert evil.status_code == 403, evil.text
        bare = page.post("/waiting/answer", data={**form, "answer": '"yes"'})
        assert bare.status_code == 401, bare.text
        assert server.get("/waits").json()["count"] == 1

        taken = page.post("/waiting/answer", data={**form, "answer": '"yes"'}, headers=origin)
        assert taken.status_code == 303 and taken.headers["location"].startswith("../waiting?answered="), taken.text
        end = ended(where, server)
        assert end["status"] == "ok" and end["outputs"] == {"answer": "yes", "by": "ann"}, end
        assert [e["ref"] for e in effects(project, "after-ask")] == ["yes"]
        after = page.get("/" + taken.headers["location"].removeprefix("../"))
        assert after.status_code == 200 and f"run {run_id} goes on" in after.text
        late = page.post("/waiting/answer", data={**form, "answer": '"no"'}, headers=origin)
        assert late.status_code == 422 and "was answered" in late.text, late.text
    finally:
        page.close()


@pytest.mark.slow
def test_an_answer_posted_as_an_event_is_checked(servers, tmp_path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    project = make_project(tmp_path / "p")
    server = servers.start(project)
    where = detach(project, "ask", "a1")
    qid = server.get("/waits").json()["waits"][0]["question"]["id"]
    refused = server.event("user.answered", {"question_id": qid, "answer": "perhaps"})
    assert refused.status_code == 422 and "not one of the choices" in refused.json()["errors"][0], refused.text
    unknown = server.event("user.answered", {"question_id": "q-0000000000000000", "answer": "yes"})
    assert unknown.status_code == 422, unknown.text
    assert finished(where)["status"] == "waiting"
    taken = run(project, "emit", "user.answered", "--to", server.url, "--data",
                json.dumps({"question_id": qid, "answer": "no"}))
    assert taken.returncode == 0, show(taken)
    end = ended(where, server)
    assert end["outputs"] == {"answer": "no", "by": None}, end
