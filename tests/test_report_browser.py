"""Reports and serve's pages in a real browser: headless Chromium (Debian's package; .ci/run
installs it) driven by Playwright. The tests read the structure through the DOM, click as a
user does, fail on any console error (a script the page's CSP refused would be one), and
keep screenshots in build/artifacts (with UPDATE_DOCS=1, also the docs' images).

Skipped, saying why, without Playwright or a Chromium."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.helpers import cli, show
from tests.report_util import demo_project, run_demo
from tests.serve_util import Servers, env_with

pytestmark = pytest.mark.slow  # a browser: the full suite runs these, make test-fast does not

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "build" / "artifacts"
DOCS_IMAGES = REPO / "docs" / "images"
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install -e '.[test]')")


def chromium() -> str | None:
    for candidate in (os.environ.get("CHAINLANG_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(candidate) if candidate else None
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium()
    if path is None:
        pytest.skip("no Chromium on this machine (Debian: apt-get install chromium; or set CHAINLANG_CHROMIUM)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def errors() -> list[str]:
    """The page's console errors so far (a test that expects some takes them out)."""
    return []


@pytest.fixture
def page(browser: Any, errors: list[str]) -> Iterator[Any]:
    """A page at a desktop's size; the test fails on a console error or an uncaught exception."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    yield opened
    context.close()
    assert errors == [], errors


def keep(page: Any, name: str) -> None:
    """A screenshot of the whole page, kept as an artifact (and as the docs' image with UPDATE_DOCS=1)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)
    if os.environ.get("UPDATE_DOCS"):
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(DOCS_IMAGES / name), full_page=False)


def test_a_report_of_a_parallel_group_a_retry_a_decide_and_a_hook(page: Any, tmp_path: Path) -> None:
    project = demo_project(tmp_path / "shop")
    transcript = run_demo(project, own_process=True)  # the page's driver runs an event loop here
    made = cli(project, "report", transcript.name)
    assert made.returncode == 0, show(made)
    page.goto((project / "review.html").as_uri())
    keep(page, "report.png")
    assert page.text_content("#run-status") == "ok"
    assert page.locator(".bar").count() == 11
    assert page.locator(".lane-chain").count() >= 2 and page.locator(".lane-hooks .bar").count() == 1
    assert page.locator("#detail").is_hidden()
    # the first attempt of the retried step: its error
    page.locator('.bar[data-step="4"]').first.click()
    assert page.locator("#detail").is_visible()
    assert page.text_content("#detail-title") == "4 test.flaky"
    assert "attempt 1 failed" in page.text_content(".detail-error")
    assert page.locator(".bar.selected").count() == 1 and page.locator("tr.selected").count() == 1
    # the decided step, from its row in the table: what the decide model was asked and answered
    page.locator('tr[data-step="5"]').click()
    decided = json.loads(page.text_content(".detail-decide"))
    assert decided[0]["action"] == "continue" and decided[0]["asked"]["condition"] == "inputs.n > 5"
    # a step of the graph opens its last attempt; the address names it (a link to it)
    page.locator('.g-event[data-path="2.1"]').click()
    assert page.text_content("#detail-title") == "2.1 test.sleep"
    assert page.url.endswith("#step=2.1&attempt=1")
    page.keyboard.press("Escape")
    assert page.locator("#detail").is_hidden()
    # the hook's action, in its lane, with the mark where the hook fired
    page.locator(".lane-hooks .bar").click()
    assert "action of hook audit" in page.text_content(".detail-status")
    assert page.locator(".fire[data-hook=audit]").count() == 1
    # the timeline zooms: twice in is four times as wide, scrolled; fit is the whole run again
    fitted = page.locator("#chart-inner").bounding_box()["width"]
    page.locator('[data-zoom="in"]').click()
    page.locator('[data-zoom="in"]').click()
    assert page.text_content("#zoom-level") == "4\u00d7"
    assert abs(page.locator("#chart-inner").bounding_box()["width"] - 4 * fitted) < 2
    page.locator('[data-zoom="fit"]').click()
    assert abs(page.locator("#chart-inner").bounding_box()["width"] - fitted) < 2
    # opened at a link to a step: its details at once
    page.goto((project / "review.html").as_uri() + "#step=4&attempt=1")
    assert "attempt 1 failed" in page.text_content(".detail-error")
    keep(page, "report-step.png")


def test_a_report_of_10000_steps_opens_and_answers(page: Any, tmp_path: Path) -> None:
    project = demo_project(tmp_path / "big")
    (project / "big.chain.yaml").write_text(
        "inputs:\n  items: {type: array}\nlimits: {max_steps: 20000}\nsteps:\n  - id: each\n"
        "    foreach: inputs.items\n    test.add: {a: \"{item}\", b: 1}\n", encoding="utf-8")
    ran = cli(project, "run", "big.chain.yaml", "--input", f"items={list(range(10_000))}", "--transcript", "big.jsonl",
              "--progress", "quiet", timeout=300)
    assert ran.returncode == 0, show(ran)
    assert cli(project, "report", "big.jsonl", timeout=300).returncode == 0
    page.goto((project / "big.html").as_uri(), timeout=60_000)
    assert page.locator(".bar").count() == 10_000
    page.locator('tr[data-i="5000"]').click()
    assert page.text_content("#detail-title") == "1[5000] test.add"
    assert page.text_content(".detail-result").strip() == "5001"


HOOKS = """
events:
  order.placed:
    payload: {type: object, properties: {item: {type: string}}, required: [item]}
hooks:
  - id: pack
    trigger: post:order.placed
    action:
      - test.echo: {value: "{item}"}
      - test.sleep: {seconds: 0.05}
  - id: crate
    trigger: post:order.placed
    condition: "item == 'piano'"
    action:
      - test.sleep: {seconds: 4}
"""
SCHEDULE = """
steps:
  - task.schedule: {type: repeat, interval: 1 day, id: nightly, description: Nightly stock count,
                    action: [{test.echo: {value: count}}]}
"""


def shop(directory: Path, toml: str = "") -> Path:
    project = demo_project(directory)
    (project / "orders.hooks.yaml").write_text(HOOKS, encoding="utf-8")
    (project / "schedule.chain.yaml").write_text(SCHEDULE, encoding="utf-8")
    if toml:
        (project / "chainlang.toml").write_text('tools = ["tools.py"]\n' + toml, encoding="utf-8")
    for chain in ("review.chain.yaml", "schedule.chain.yaml"):
        ran = cli(project, "run", chain)
        assert ran.returncode == 0, show(ran)
    return project


def test_serve_s_pages_list_runs_and_tasks_and_follow_a_run_live(page: Any, tmp_path: Path) -> None:
    project = shop(tmp_path / "shop")
    with Servers() as servers:
        server = servers.start(project)
        assert server.event("order.placed", {"item": "lute"}, wait=True).status_code == 200
        slow = server.event("order.placed", {"item": "piano"})  # 4 s: under way while we look
        assert slow.status_code == 202, slow.text
        page.goto(server.url + "/?refresh=0")
        rows = page.locator("table.runs tbody tr")
        assert rows.count() == 4
        assert rows.first.get_attribute("data-run") == slow.json()["run_id"]
        assert page.text_content("table.runs tbody tr >> nth=0 >> .status") == "running"
        assert "nightly" in page.text_content("table.tasks")
        keep(page, "serve.png")
        # the running run's report: it reloads itself until the run ends
        rows.first.locator("a").click()
        assert page.text_content("#run-status") == "running"
        assert page.locator('meta[http-equiv="refresh"]').count() == 1
        sync_api.expect(page.locator("#run-status")).to_have_text("ok", timeout=30_000)
        assert page.locator('meta[http-equiv="refresh"]').count() == 0
        page.locator('.bar[data-step="hook:pack/2"]').click()  # the page's script runs under serve's CSP
        assert page.text_content("#detail-title") == "hook:pack/2 test.sleep"
        page.locator("a.home").click()
        assert page.url.rstrip("/") == server.url.rstrip("/")


def test_a_browser_signs_in_to_serve_with_the_token_once(page: Any, errors: list[str], tmp_path: Path) -> None:
    project = shop(tmp_path / "shop", '[serve]\ntoken_env = "PAGES_TOKEN"\n')
    with Servers() as servers:
        server = servers.start(project, env=env_with(PAGES_TOKEN="s3cret"), token="s3cret")
        refused = page.goto(server.url + "/")
        assert refused is not None and refused.status == 401
        assert all("401" in error for error in errors)  # the browser says so in its console: expected
        errors.clear()
        page.goto(server.url + "/?token=s3cret&refresh=0")
        assert "token" not in page.url and page.locator("table.runs tbody tr").count() == 2
        page.locator("table.runs tbody tr >> nth=0 >> a").click()  # the cookie, on the next page too
        assert page.text_content("#run-status") == "ok"
