"""serve's pages: `GET /` (the recent runs and the tasks) and `GET /runs/ID/report`, over HTTP
from a real serve on loopback; tests/test_report_browser.py renders them in Chromium."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers import cli, show
from tests.report_util import demo_project, dom, island
from tests.serve_util import env_with, servers  # noqa: F401  (fixture)

HOOKS = """
events:
  order.placed:
    payload: {type: object, properties: {item: {type: string}}, required: [item]}
hooks:
  - id: every-order
    trigger: post:order.placed
    action:
      - test.echo: {value: "{item}"}
      - test.fail: {message: "no stock of {item}"}
        on_error: continue
"""
SCHEDULE = """
steps:
  - task.schedule: {type: repeat, interval: 1 day, id: nightly, description: Nightly stock count,
                    action: [{test.echo: {value: count}}]}
"""


def project_with_runs(tmp_path):  # type: ignore[no-untyped-def]
    project = demo_project(tmp_path / "shop")
    (project / "orders.hooks.yaml").write_text(HOOKS, encoding="utf-8")
    (project / "schedule.chain.yaml").write_text(SCHEDULE, encoding="utf-8")
    for chain in ("review.chain.yaml", "schedule.chain.yaml"):  # chains run here go to .chainlang/runs
        ran = cli(project, "run", chain)
        assert ran.returncode == 0, show(ran)
    return project


def test_the_home_page_lists_runs_and_tasks(servers, tmp_path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    project = project_with_runs(tmp_path)
    server = servers.start(project)
    reply = server.event("order.placed", {"item": "harp"}, wait=True)
    assert reply.status_code == 200, reply.text
    page = server.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'none'" in page.headers["content-security-policy"]
    doc = dom(page.text)
    runs = {row.attrs["data-run"]: row.all_text() for row in doc.one("table", class_="runs").find_all("tr")
            if "data-run" in row.attrs}
    assert len(runs) == 3, runs
    newest = next(iter(runs))
    assert newest == reply.json()["run_id"]  # newest first
    assert "order.placed" in runs[newest] and "event" in runs[newest]
    assert any("orders.review" in text and "cli" in text for text in runs.values())
    tasks = doc.one("table", class_="tasks").all_text()
    assert "nightly" in tasks and "Nightly stock count" in tasks and "pending" in tasks


def test_a_run_s_report_is_served_and_links_home(servers, tmp_path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    project = project_with_runs(tmp_path)
    server = servers.start(project)
    run_id = server.event("order.placed", {"item": "lute"}, wait=True).json()["run_id"]
    home = dom(server.get("/").text)
    link = next(a.attrs["href"] for a in home.find_all("a") if run_id in a.attrs.get("href", ""))
    assert link == f"runs/{run_id}/report"
    report = server.get("/" + link)
    assert report.status_code == 200, report.text
    policy = report.headers["content-security-policy"]
    nonce = policy.split("'nonce-")[1].split("'")[0]
    doc = dom(report.text)
    assert doc.one("script", nonce=nonce)  # the page's own script runs; no other could
    assert doc.one(id="run-status").all_text() == "ok" and doc.one(id="run-trigger").all_text() == "event"
    steps = {a["step"]: a for a in island(doc)["attempts"]}
    assert steps["hook:every-order/2"]["error"]["message"].endswith("no stock of lute")
    assert steps["hook:every-order/2"]["hook"] == "every-order"
    assert doc.one("a", class_="home").attrs["href"] == "../../"
    assert "An emit runs the hooks" in doc.one(id="graph-note").all_text()


@pytest.mark.parametrize("path", ["/runs/nope/report", "/runs/..%2F..%2Fchainlang.toml/report", "/runs/a b/report"])
def test_no_report_of_what_is_not_a_run(servers, tmp_path, path: str) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    server = servers.start(project_with_runs(tmp_path))
    reply = server.get(path)
    assert reply.status_code == 404 and "no run" in reply.json()["error"]


def test_with_a_token_a_browser_signs_in_once(servers, tmp_path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    project = project_with_runs(tmp_path)
    (project / "chainlang.toml").write_text('tools = ["tools.py"]\n[serve]\ntoken_env = "PAGES_TOKEN"\n',
                                            encoding="utf-8")
    server = servers.start(project, env=env_with(PAGES_TOKEN="s3cret-token"), token="s3cret-token")
    browser = httpx.Client(base_url=server.url, follow_redirects=False)
    refused = browser.get("/")
    assert refused.status_code == 401 and "?token=TOKEN" in refused.json()["error"]
    assert browser.get("/?token=wrong").status_code == 401
    signed = browser.get("/?token=s3cret-token&limit=5")
    assert signed.status_code == 303 and signed.headers["location"] == "/?limit=5"  # the token out of the address
    cookie = signed.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert browser.get("/?limit=5").status_code == 200  # the cookie
    assert browser.post("/events/order.placed", json={"item": "x"}).status_code == 401  # a cookie is for pages only
    assert server.get("/").status_code == 200  # the header, as before


def test_a_run_whose_first_line_the_reader_refuses_is_listed_unreadable(servers, tmp_path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """The list reads two lines of each transcript, each checked and typed by the transcript
    reader: a first line it refuses lists the run as unreadable (its report names the line),
    not with the status and chain the line claims."""
    import json

    project = demo_project(tmp_path / "shop")
    runs = project / ".chainlang" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    envelope = {"run_id": "20260101T000000Z-crafted"}
    claimed = [
        {"type": "run_started", **envelope, "seq": 1, "ts": "yesterday", "chain": "claims.all.ok",
         "file": str(project / "review.chain.yaml"), "file_sha256": "0" * 64, "inputs": {}, "now": None,
         "started_at": "2026-01-01T00:00:00Z", "tools": [], "resumed": False},
        {"type": "run_finished", **envelope, "seq": 2, "ts": "2026-01-01T00:00:01.000Z", "status": "ok",
         "outputs": {}, "error": None, "duration_ms": 1},
    ]
    (runs / "20260101T000000Z-crafted.jsonl").write_text("".join(json.dumps(r) + "\n" for r in claimed),
                                                        encoding="utf-8")
    server = servers.start(project)
    doc = dom(server.get("/").text)
    rows = {row.attrs["data-run"]: row for row in doc.one("table", class_="runs").find_all("tr")
            if "data-run" in row.attrs}
    row = rows["20260101T000000Z-crafted"]
    assert "s-unreadable" in row.attrs["class"] and "claims.all.ok" not in row.all_text(), row.all_text()
    report = server.get("/runs/20260101T000000Z-crafted/report")
    assert report.status_code == 422 and ":1: run_started record: ts 'yesterday'" in report.text, report.text
