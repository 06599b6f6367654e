"""`{secrets.NAME}` references (LANGUAGE.md §16), end to end through the CLI.

- `chainlang check`: an undeclared name (or a chain in no project) is CL039 with its place,
  a did-you-mean hint and how to declare it; a secret is a string; a filter, an index or
  arithmetic other than `+` on a secret is refused (masking could not recognize the new
  value); on a Temporal project a secret is CL038 (its value would be kept in the
  workflow's history).
- `chainlang run`: every secret the chain, its hooks and the named chains it calls
  reference is read before the first step; a missing variable or file stops the run there
  (exit 2, nothing run, no transcript), naming the secret and its source and never a value.
- The tool gets the real value (it records its sha256); the transcript, stdout, stderr, the
  outputs, an error message and the HTML report show `***` instead.
- `chainlang emit`: the hooks' secrets the same way (a missing one fails the emit before
  any action runs).

The test tools write what they were given to the project's state directory as a sha256,
so no test output holds the value unless chainlang leaked it.
"""

from __future__ import annotations

import hashlib
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from hooks_util import records, show, transcript_of
from serve_util import Servers, env_with, run, run_many, servers  # noqa: F401 - servers is a fixture

TOKEN = "crm-Tk-8842-zq"  # the value of the secret that comes from a variable
FILE_SECRET = "deploy-Key-5531-xv"  # the value of the secret that comes from a file

TOOLS = '''\
import hashlib
import json
from pathlib import Path
from typing import Any

from chainlang import event


@event("vault.call", description="Use a token: record its sha256, give it back")
def vault_call(token: str, ctx: Any = None) -> dict:
    state = Path(ctx.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    with open(state / "got.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"sha256": hashlib.sha256(token.encode()).hexdigest()}) + "\\n")
    return {"echo": token}


@event("vault.note", description="Record a note's sha256 (a param whose name does not say secret)")
def vault_note(text: str, ctx: Any = None) -> dict:
    return vault_call(text, ctx)


@event("vault.fail", description="Fail, quoting the token")
def vault_fail(token: str) -> None:
    raise RuntimeError(f"the server refused {token}")
'''

CONFIG = '''\
tools = ["tools.py"]

[secrets]
crm_token = {env = "TEST_CRM_TOKEN"}
deploy_key = {file = "deploy.key"}
'''


def project(root: Path, files: dict[str, str], config: str = CONFIG, key_file: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools.py").write_text(TOOLS, encoding="utf-8")
    (root / "chainlang.toml").write_text(config, encoding="utf-8")
    if key_file:
        (root / "deploy.key").write_text(FILE_SECRET + "\n", encoding="utf-8")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def got(root: Path) -> list[str]:
    """The sha256 of each token the tool vault.call was given, in order."""
    path = root / ".chainlang" / "state" / "got.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["sha256"] for line in path.read_text(encoding="utf-8").splitlines()]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def every_file_text(root: Path) -> str:
    """The text of every file chainlang wrote under .chainlang (transcripts, reports, state)."""
    parts = []
    for path in sorted((root / ".chainlang").rglob("*")):
        if path.is_file():
            parts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


def diagnostics(proc: Any) -> list[dict[str, Any]]:
    assert proc.returncode in (0, 1), show(proc)
    return json.loads(proc.stdout)


# -- check ----------------------------------------------------------------------------------


def test_check_reports_an_undeclared_secret_with_its_place_and_the_fix(tmp_path: Path) -> None:
    root = project(tmp_path / "p", {"bad.chain.yaml": """\
        chain: bad.secret
        steps:
          - vault.call: {token: "{secrets.crm_tokn}"}
          - vault.call: {token: "{secrets.api_key}"}
        """})
    outside = project(tmp_path / "q", {"lone.chain.yaml": """\
        chain: lone.secret
        steps:
          - vault.call: {token: "{secrets.crm_token}"}
        """}, config='tools = ["tools.py"]\n')
    (outside / "chainlang.toml").unlink()  # a chain in no project
    text, as_json, lone = run_many((root, ["check", "bad.chain.yaml"], None),
                                   (root, ["check", "--format", "json", "bad.chain.yaml"], None),
                                   (outside, ["check", "--tools", "tools.py", "lone.chain.yaml"], None))
    assert text.returncode == 1, show(text)
    assert ("bad.chain.yaml:3:35: error: secrets.crm_tokn is not declared in chainlang.toml "
            "(declared: crm_token, deploy_key) [CL039 ref-secret]") in text.stdout, show(text)
    assert "hint: did you mean 'crm_token'?" in text.stdout, show(text)
    found = diagnostics(as_json)
    assert [(d["line"], d["column"], d["rule"]) for d in found] == [(3, 35, "CL039"), (4, 35, "CL039")]
    assert found[1]["hint"] == 'add it to the [secrets] table of chainlang.toml: api_key = {env = "API_KEY"} (or {file = "PATH"})'
    assert lone.returncode == 1, show(lone)
    assert "lone.chain.yaml:3:35: error: secrets.crm_token: this chain is in no project" in lone.stdout, show(lone)
    assert 'hint: create chainlang.toml in the project\'s directory, with [secrets] crm_token = {env = "CRM_TOKEN"}' \
        in lone.stdout, show(lone)


def test_check_allows_a_secret_as_it_is_and_refuses_a_new_value_made_of_it(tmp_path: Path) -> None:
    root = project(tmp_path / "p", {
        "good.chain.yaml": """\
            chain: good.secret
            steps:
              - if: "secrets.crm_token != '' and secrets.crm_token startswith 'crm-'"
                vault.call: {token: "Bearer {secrets.crm_token}"}
              - vault.call: {token: "{'k=' + secrets.deploy_key}"}
              - vault.call: {token: "{secrets['deploy_key']}"}
            """,
        "bad.chain.yaml": """\
            chain: bad.secret
            steps:
              - vault.call: {token: "{secrets.crm_token | upper}"}
              - vault.call: {token: "{(secrets.crm_token + 'x')[0]}"}
              - vault.call: {token: "{secrets.crm_token.value}"}
              - vault.call: {token: "{secrets}"}
              - if: "secrets.crm_token > 3"
                vault.call: {token: x}
            """})
    good, bad = run_many((root, ["check", "--format", "json", "good.chain.yaml"], None),
                         (root, ["check", "--format", "json", "bad.chain.yaml"], None))
    assert diagnostics(good) == []
    found = [(d["line"], d["column"], d["rule"], d["message"]) for d in diagnostics(bad)]
    assert [f[:3] for f in found] == [(3, 27, "CL039"), (4, 28, "CL039"), (5, 45, "CL039"), (6, 27, "CL039"),
                                      (7, 10, "CL027")], found
    assert found[0][3].startswith("the filter upper would make a new value out of secrets.crm_token")
    assert found[1][3].startswith("an index would make a new value out of secrets.crm_token")
    assert found[2][3] == "secrets.crm_token is a string: it has no fields or items"
    assert found[3][3] == "a secret is referenced by its name: secrets.NAME"


def test_check_refuses_secrets_on_the_temporal_engine(tmp_path: Path) -> None:
    root = project(tmp_path / "p", {"use.chain.yaml": """\
        chain: use.secret
        steps:
          - vault.call: {token: "{secrets.crm_token}"}
        """}, config=CONFIG + '\n[engine]\nkind = "temporal"\n')
    proc = run(root, "check", "--format", "json", "use.chain.yaml")
    found = diagnostics(proc)
    assert [(d["line"], d["column"], d["rule"]) for d in found] == [(3, 27, "CL038")], found
    assert "workflow's history" in found[0]["message"]


# -- run --------------------------------------------------------------------------------------


CALLS_A_CHAIN = {
    "chains/notify.chain.yaml": """\
        chain: crm.push
        steps:
          - vault.call: {token: "{secrets.crm_token}"}
        """,
    "use.chain.yaml": """\
        chain: use.secret
        steps:
          - id: first
            vault.call: {token: "k={secrets.deploy_key}"}
          - crm.push: {}
        """,
}


def test_a_missing_secret_stops_the_run_before_its_first_step(tmp_path: Path) -> None:
    """The variable of a secret that only a called chain uses, and a secret file that is
    not there: the run does not start, and says which and where, without any value."""
    config = CONFIG.replace('tools = ["tools.py"]', 'tools = ["tools.py"]\nchains = ["chains"]')
    no_var = project(tmp_path / "a", CALLS_A_CHAIN, config)
    no_file = project(tmp_path / "b", CALLS_A_CHAIN, config, key_file=False)
    short = project(tmp_path / "c", CALLS_A_CHAIN, config)
    unused = project(tmp_path / "d", {"other.chain.yaml": """\
        chain: other.secret
        steps:
          - vault.call: {token: "{secrets.deploy_key}"}
        """}, config)
    a, b, c, d = run_many((no_var, ["run", "use.chain.yaml"], env_with(TEST_CRM_TOKEN=None)),
                          (no_file, ["run", "use.chain.yaml"], env_with(TEST_CRM_TOKEN=TOKEN)),
                          (short, ["run", "use.chain.yaml"], env_with(TEST_CRM_TOKEN="abc")),
                          (unused, ["run", "other.chain.yaml"], env_with(TEST_CRM_TOKEN=None)))
    assert a.returncode == 2, show(a)
    assert ("chainlang: error: cannot start the run: secrets.crm_token: the variable TEST_CRM_TOKEN is not set "
            "(or is empty)") in a.stderr, show(a)
    assert b.returncode == 2, show(b)
    assert "secrets.deploy_key: cannot read the file deploy.key" in b.stderr, show(b)
    assert TOKEN not in b.stdout + b.stderr
    assert c.returncode == 2, show(c)
    assert "secrets.crm_token: the value of the variable TEST_CRM_TOKEN is shorter than 4 characters" in c.stderr
    assert "abc" not in c.stderr.replace("chainlang", "")
    for root in (no_var, no_file, short):  # nothing ran, nothing was written
        assert got(root) == []
        assert not (root / ".chainlang" / "runs").exists() or not list((root / ".chainlang" / "runs").iterdir())
    # a declared secret that the chain does not use may be missing
    assert d.returncode == 0, show(d)
    assert got(unused) == [sha(FILE_SECRET)]


def test_the_tool_gets_the_value_and_every_surface_masks_it(tmp_path: Path) -> None:
    root = project(tmp_path / "p", {
        "use.chain.yaml": """\
            chain: use.secret
            steps:
              - id: call
                vault.call: {token: "Bearer {secrets.crm_token}"}
              - vault.call: {token: "{secrets.deploy_key}"}
              - user.notify: {message: "the tool answered {call.echo}"}
                expose: [crm_token]  # the rule of CL066 lets it through: masking still hides it
              - vault.fail: {token: "{secrets.deploy_key}"}
            outputs:
              echoed: "{call.echo}"
            """})
    env = env_with(TEST_CRM_TOKEN=TOKEN)
    proc, as_json = run_many((root, ["run", "use.chain.yaml"], env), (root, ["run", "--json", "use.chain.yaml"], env))
    assert proc.returncode == 1 and as_json.returncode == 1, show(proc)
    # the real values reached the tool (the two runs ran at once: in any order)
    assert sorted(got(root)) == sorted([sha(f"Bearer {TOKEN}"), sha(FILE_SECRET)] * 2)
    assert "vault.fail failed: RuntimeError: the server refused ***" in proc.stderr, show(proc)
    assert "the tool answered Bearer ***" in proc.stderr, show(proc)
    assert json.loads(as_json.stdout)["echoed"] == "Bearer ***", show(as_json)
    where = transcript_of(proc.stderr, root)
    report = run(root, "report", str(where), "-o", str(root / ".chainlang" / "report.html"))
    assert report.returncode == 0, show(report)
    recs = records(where)
    called = [r for r in recs if r["type"] == "step_finished" and r.get("event") == "vault.call"]
    assert [r["result"]["echo"] for r in called] == ["Bearer ***", "***"], recs
    shown = "\n".join(p.stdout + p.stderr for p in (proc, as_json, report))
    for value in (TOKEN, FILE_SECRET):
        assert value not in shown, shown
        for path in sorted((root / ".chainlang").rglob("*")):
            if path.is_file():  # notifications.jsonl included: user.notify's log masks a value a tool echoed
                assert value not in path.read_bytes().decode("utf-8", "replace"), path


# -- emit -------------------------------------------------------------------------------------


HOOKS = """\
    events:
      ticket.opened:
        description: A ticket arrived.
        payload: {type: object, properties: {id: {type: string}}}
    hooks:
      - id: to-crm
        trigger: post:ticket.opened
        action:
          - vault.call: {token: "{id}:{secrets.crm_token}"}
    """


def test_an_emit_reads_its_hooks_secrets_first(tmp_path: Path) -> None:
    missing = project(tmp_path / "a", {"crm.hooks.yaml": HOOKS})
    present = project(tmp_path / "b", {"crm.hooks.yaml": HOOKS})
    a, b = run_many((missing, ["emit", "ticket.opened", "--data", '{"id": "T1"}'], env_with(TEST_CRM_TOKEN=None)),
                    (present, ["emit", "ticket.opened", "--data", '{"id": "T1"}'], env_with(TEST_CRM_TOKEN=TOKEN)))
    assert a.returncode == 1, show(a)
    assert "secrets.crm_token: the variable TEST_CRM_TOKEN is not set" in a.stderr, show(a)
    assert got(missing) == []
    recs = records(transcript_of(a.stderr, missing))
    assert [r["type"] for r in recs] == ["run_started", "run_finished"], recs
    assert recs[-1]["status"] == "failed" and "TEST_CRM_TOKEN" in recs[-1]["error"]["message"]
    assert b.returncode == 0, show(b)
    assert got(present) == [sha(f"T1:{TOKEN}")]
    assert TOKEN not in b.stdout + b.stderr + every_file_text(present)


@pytest.mark.slow
def test_serve_fires_a_hook_with_its_secret_and_shows_it_masked(tmp_path: Path, servers: Servers) -> None:
    root = project(tmp_path / "p", {"crm.hooks.yaml": HOOKS.replace('"{id}:{secrets.crm_token}"',
                                                                     '"{id}:{secrets.crm_token}:{secrets.deploy_key}"')})
    server = servers.start(root, env=env_with(TEST_CRM_TOKEN=TOKEN))
    reply = server.event("ticket.opened", {"id": "T7"}, wait=True)
    assert reply.status_code == 200 and reply.json()["status"] == "ok", reply.text
    assert got(root) == [sha(f"T7:{TOKEN}:{FILE_SECRET}")]
    run_id = reply.json()["run_id"]
    pages = [server.get(path) for path in ("/", f"/runs/{run_id}", f"/runs/{run_id}/report", "/metrics")]
    assert [page.status_code for page in pages] == [200] * 4, [p.text[:200] for p in pages]
    seen = "\n".join(page.text for page in pages) + reply.text + every_file_text(root)
    assert f"T7:***" in seen  # the transcript and the report show the params, masked
    for value in (TOKEN, FILE_SECRET):
        assert value not in seen
    assert server.stop() == 0, server.describe()
    assert TOKEN not in server.stdout + server.stderr and FILE_SECRET not in server.stdout + server.stderr


# -- a chain a model writes -------------------------------------------------------------------


def test_a_chain_a_model_writes_cannot_use_the_project_s_secrets(tmp_path: Path) -> None:
    """A model (or a prompt that steers it) must not route a secret to a tool it chose."""
    config = CONFIG + '\n[models.heavy]\nprovider = "scripted"\nrules = "answers.yaml"\n'
    root = project(tmp_path / "p", {
        "answers.yaml": """\
            rules:
              - task: chain
                when: "plan-leak"
                answer: {chain: [{"vault.note": {"text": "{secrets.crm_token}"}}]}
            """,
        "agent.chain.yaml": """\
            chain: agent.leak
            steps:
              - agent.chain: {plan: "plan-leak", max_repairs: 0}
            """}, config)
    proc = run(root, "run", "agent.chain.yaml", env=env_with(TEST_CRM_TOKEN=TOKEN))
    assert proc.returncode == 1, show(proc)
    assert got(root) == []
    assert ("the chain uses the project's secrets (secrets.crm_token): a chain written by a model cannot"
            in proc.stderr), show(proc)
    assert TOKEN not in proc.stdout + proc.stderr + every_file_text(root)
