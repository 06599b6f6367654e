"""serve resumes waiting runs with the chains it keeps prepared (serve/prepared_chains.py):
a chain is loaded, checked and compiled once for every run of it that serve resumes, and
again only when its content (or the project) changed; the guarantees of a resume stay (the
digest the run recorded is compared, the transcript verified).

In process: the runs are started detached with `run_async`, their waits settled with
`deliver_event`, and resumed by a `WaitKeeper` sharing serve's `Projects`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from chainlang.errors import UsageError
from chainlang.runtime.deliver import deliver_event
from chainlang.runtime.runner import run_async
from chainlang.serve import projects as projects_module
from chainlang.serve.projects import Projects
from chainlang.serve.waits import WaitKeeper
from chainlang.store import open_store

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
steps:
  - wait:
      event: approval.given
      where: "draft_id == inputs.draft"
      timeout: 2d
    id: approval
outputs:
  approved: "{approval.result.approved}"
"""


@pytest.fixture(autouse=True)
def _scan_at_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """serve looks at the project's files once a second; here at every call, so that what a
    test changes is seen at once (and the counts do not depend on timing)."""
    monkeypatch.setattr(projects_module, "_SCAN_EVERY", 0.0)


def make_project(root: Path) -> Path:
    root.mkdir()
    (root / "chainlang.toml").write_text('chains = ["."]\n', encoding="utf-8")
    (root / "approve.chain.yaml").write_text(APPROVE, encoding="utf-8")
    return root


async def waiting_run(root: Path, draft: str) -> Path:
    """A run of the chain detached at its wait, the wait settled by an event: its transcript."""
    result = await run_async(root / "approve.chain.yaml", {"draft": draft}, detach=True, notify=lambda _: None)
    assert result.status == "waiting" and result.transcript is not None
    with open_store(root) as store:
        assert deliver_event(store, "approval.given", {"draft_id": draft, "approved": True}, f"e-{draft}")
    return Path(result.transcript)


def ends(transcript: Path) -> list[dict[str, Any]]:
    lines = transcript.read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r["type"] == "run_finished"]


async def resume_settled(keeper: WaitKeeper) -> None:
    """One turn of serve's loop, and the resumes it started, to their end."""
    await keeper.turn()
    await asyncio.gather(*keeper.resuming.values())


def test_two_runs_of_a_chain_are_resumed_with_the_chain_prepared_once(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p")

    async def scenario() -> None:
        first, second = await waiting_run(root, "d-1"), await waiting_run(root, "d-2")
        with open_store(root) as store:
            projects = Projects(root, (), None, store)
            try:
                projects.current()  # serve loads the project before it serves
                keeper = WaitKeeper(root, store, projects=projects)
                await resume_settled(keeper)
                assert [e["status"] for e in ends(first)] == ["waiting", "ok"]
                assert ends(second)[-1]["status"] == "ok" and ends(second)[-1]["outputs"] == {"approved": True}
                assert keeper.chains().prepared == 1
                assert projects.loads == 1  # the resumes used the project serve had loaded for its events
                third = await waiting_run(root, "d-3")
                await resume_settled(keeper)
                assert ends(third)[-1]["status"] == "ok"
                assert keeper.chains().prepared == 1  # nothing changed: still the chain prepared first
            finally:
                projects.close()

    asyncio.run(scenario())


def test_a_chain_whose_content_changed_is_prepared_again_and_its_old_runs_refused(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p")
    chain = root / "approve.chain.yaml"

    async def scenario() -> None:
        with open_store(root) as store:
            keeper = WaitKeeper(root, store)  # no Projects given: one of its own
            old = await waiting_run(root, "d-1")
            await resume_settled(keeper)
            assert ends(old)[-1]["status"] == "ok" and keeper.chains().prepared == 1

            stale = await waiting_run(root, "d-2")
            chain.write_text(APPROVE.replace("timeout: 2d", "timeout: 3d"), encoding="utf-8")
            # the recorded digest is compared with the chain as it is now, kept prepared or not
            with pytest.raises(UsageError, match="changed since the run started"):
                await keeper._continue(stale)
            assert keeper.chains().prepared == 2  # the new content, prepared
            assert ends(stale)[-1]["status"] == "waiting"

            fresh = await waiting_run(root, "d-3")
            assert (await keeper._continue(fresh)).status == "ok"
            assert keeper.chains().prepared == 2  # the new content, kept
            await keeper.drain(1.0)

    asyncio.run(scenario())


def test_a_transcript_changed_by_hand_is_refused_with_the_chain_kept_prepared(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p")

    async def scenario() -> None:
        with open_store(root) as store:
            keeper = WaitKeeper(root, store)
            assert (await keeper._continue(await waiting_run(root, "d-1"))).status == "ok"
            forged = await waiting_run(root, "d-2")
            text = forged.read_text(encoding="utf-8")
            forged.write_text(text.replace('"draft":"d-2"', '"draft":"d-9"').replace('"draft": "d-2"', '"draft": "d-9"'),
                              encoding="utf-8")
            assert forged.read_text(encoding="utf-8") != text
            with pytest.raises(UsageError, match="does not match its seal"):
                await keeper._continue(forged)
            assert keeper.chains().prepared == 1
            await keeper.drain(1.0)

    asyncio.run(scenario())
