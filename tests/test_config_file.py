"""chainlang.toml's checks (config/fields.py, config/model.py): one bad file per rule, and
the message `load_config` gives for it. The wording of the field checks is what pydantic
gave (which read the file before), so that what users saw and searched for stays the same;
the expected messages below were taken from pydantic's own output for the same tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from chainlang.config.project import load_config
from chainlang.errors import ConfigError

BAD = [
    ('tools = "x"', "tools: Input should be a valid list"),
    ("tools = [1]", "tools.0: Input should be a valid string"),
    ("decide = 3", "decide: Input should be a valid dictionary or instance of DecideConfig"),
    ('[decide]\nfallback = "no"', "decide.fallback: Input should be 'fail', 'skip' or 'break'"),
    ("[decide]\nmax_tokens = 0", "decide.max_tokens: Input should be greater than or equal to 1"),
    ("[decide]\nmax_tokens = 1.5", "decide.max_tokens: Input should be a valid integer"),
    ('[decide]\nbase_url = ""', "decide.base_url: String should have at least 1 character"),
    ('[decide]\napi_key_env = "1x"', "decide.api_key_env: String should match pattern '^[A-Za-z_][A-Za-z0-9_]*$'"),
    ("[decide]\ntimeout = 5", 'decide.timeout: Value error, must be a duration in quotes, e.g. "30s"'),
    ('[decide]\ntimeout = "11m"', "decide.timeout: Value error, '11m' is out of range: more than 0 and at most 10m"),
    ('[decide]\ntimeout = "soon"', "decide.timeout: Value error, 'soon' is not a duration"),
    (f'[store]\nurl = "{"x" * 2001}"', "store.url: String should have at most 2000 characters"),
    ("[serve]\nhosts = [" + ", ".join(['"a"'] * 101) + "]",
     "serve.hosts: List should have at most 100 items after validation, not 101"),
    ('[serve]\nhosts = "a"', "serve.hosts: Input should be a valid list"),
    ('[serve]\nhosts = ["http://a.example"]', "serve.hosts: Value error, 'http://a.example' is not a host name"),
    ("[serve.events.a]", "serve.events.a.token_env: Field required"),
    ('[serve.events.deploy.finished]\ntoken_env = "T"',
     'serve.events: Value error, event names are dotted: quote them, [serve.events."deploy.finished"]'),
    ('[serve]\nlease = "0s"', "serve.lease: Value error, '0s' is out of range: from 1s to 1h"),
    ("[serve]\nmax_failures = 1001", "serve.max_failures: Input should be less than or equal to 1000"),
    ('[mcp.servers.x]\nstrict = true',
     "mcp.servers.x: Value error, give exactly one of command (a stdio server) or url (an HTTP server)"),
    ('[mcp.servers.x]\nurl = "http://h/mcp"\nargs = ["a"]',
     "mcp.servers.x: Value error, args and env are for a stdio server (command), not a url"),
    ('[mcp.servers.x]\ncommand = "c"\nenv = {a = 1}', "mcp.servers.x.env.a: Input should be a valid string"),
    ('[mcp.servers.x]\nurl = "ftp://h"', "mcp.servers.x.url: String should match pattern '^https?://'"),
    ('[mcp.servers.Bad]\ncommand = "c"',
     "mcp.servers: Value error, server name 'Bad' must be an event namespace: lowercase [a-z][a-z0-9_]*"),
    ("[secrets]\na = {}", 'secrets.a: Value error, give exactly one of env = "VARIABLE" or file = "PATH"'),
    ('[secrets]\n"a-b" = {env = "A"}',
     "secrets: Value error, secret name 'a-b' must be an identifier: [A-Za-z_][A-Za-z0-9_]*"),
    ("[runs]\nkeep = true", 'runs.keep: Value error, keep must be a count of runs (1 or more) or an age such as "30d"'),
    ('[runs]\nkeep = "later"', "runs.keep: Value error, keep = 'later' is neither a count nor a duration"),
    ('[models.fast]\nprovider = "scripted"', 'models.fast: Value error, a scripted tier needs rules = "FILE"'),
    ('[models.fast]\nbase_url = "http://h/v1"',
     "models.fast: Value error, an openai tier needs base_url and model (missing: model)"),
    ('[models.heavy]\nbase_url = "http://h/v1"\nmodel = "m"\ncontext = 1000\nmax_tokens = 1000',
     "models.heavy: Value error, max_tokens = 1000 leaves no room for the prompt in context = 1000"),
    ("[models]\nmemory = 3", "models.memory: Input should be 'embedded', 'heavy', 'fast' or 'light'"),
    ('[engine]\nkind = "x"', "engine.kind: Input should be 'embedded' or 'temporal'"),
    ('[engine]\naddress = "nope"', "engine.address: String should match pattern '^[^\\s/]+:\\d{1,5}$'"),
    # stricter than pydantic was: a TOML boolean or a quoted number is not a number, a number not a boolean
    ("[decide]\nmax_tokens = true", "decide.max_tokens: Input should be a valid integer"),
    ('[serve]\nmax_connections = "5"', "serve.max_connections: Input should be a valid integer"),
    ('[mcp.servers.x]\ncommand = "c"\nstrict = 1', "mcp.servers.x.strict: Input should be a valid boolean"),
]


@pytest.mark.parametrize(("toml", "message"), BAD, ids=[message.split(":")[0] for _, message in BAD])
def test_a_bad_table_is_refused_with_its_message(tmp_path: Path, toml: str, message: str) -> None:
    path = tmp_path / "chainlang.toml"
    path.write_text(toml + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert message in str(caught.value), str(caught.value)
    assert str(caught.value).startswith(f"{path}: ") or str(caught.value).startswith("chainlang.toml: ")


def test_unknown_keys_are_named_with_the_closest_known_one(tmp_path: Path) -> None:
    path = tmp_path / "chainlang.toml"
    path.write_text('tolls = []\n[serve]\ngrac = "1s"\n[mcp.servers.x]\ncommand = "c"\nargz = []\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    said = str(caught.value)
    assert "unknown key 'tolls': Extra inputs are not permitted (did you mean 'tools'?)" in said
    assert "unknown key 'serve.grac': Extra inputs are not permitted (did you mean 'grace'?)" in said
    assert "unknown key 'mcp.servers.x.argz': Extra inputs are not permitted (did you mean 'args'?)" in said


def test_every_problem_of_a_file_is_told_at_once(tmp_path: Path) -> None:
    path = tmp_path / "chainlang.toml"
    path.write_text('tools = "x"\n[decide]\nfallback = "no"\nmax_tokens = 0\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).count("; ") == 2, str(caught.value)


def test_a_full_file_gives_its_values_and_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "chainlang.toml"
    path.write_text(
        'tools = ["t.py"]\nchains = ["chains"]\n[decide]\nbase_url = "http://h/v1"\nmodel = "m"\n'
        '[models.fast]\nprovider = "scripted"\nrules = "a.yaml"\n[store]\nurl = "sqlite:///s.db"\n'
        '[serve]\nhosts = ["chains.example.com", "[2001:db8::7]"]\nmax_connections = 10\n'
        '[serve.events."deploy.done"]\ntoken_env = "DEPLOY"\n[mcp.servers.calc]\ncommand = "python"\n'
        'args = ["c.py"]\nenv = {MODE = "exact"}\n[engine]\nkind = "temporal"\n[runs]\nkeep = "500"\n'
        '[secrets]\ncrm = {env = "CRM"}\nkey = {file = "k.txt"}\n', encoding="utf-8")
    config = load_config(path)
    assert config.tools == ("t.py",) and config.chains == ("chains",)
    assert config.decide is not None and (config.decide.model, config.decide.fallback, config.decide.timeout,
                                          config.decide.max_tokens) == ("m", "fail", "60s", 256)
    assert config.models is not None and config.models.fast is not None and config.models.fast.rules == "a.yaml"
    assert config.models.heavy is None and config.models.memory == "embedded"
    assert config.store is not None and config.store.url == "sqlite:///s.db"
    assert config.serve is not None and config.serve.hosts == ["chains.example.com", "[2001:db8::7]"]
    assert config.serve.max_connections == 10 and config.serve.grace == "30s"
    assert config.serve.events["deploy.done"].token_env == "DEPLOY"
    assert config.mcp is not None and config.mcp.servers["calc"].env == {"MODE": "exact"}
    assert config.mcp.servers["calc"].strict is True and config.mcp.servers["calc"].key() == \
        '{"args": ["c.py"], "command": "python", "env": {"MODE": "exact"}, "strict": true, "timeout": "30s", "url": null}'
    assert config.engine is not None and (config.engine.kind, config.engine.task_queue) == ("temporal", "chainlang")
    assert config.runs is not None and config.runs.keep == 500 and config.runs.dir == ".chainlang/runs"
    assert config.secrets["crm"].env == "CRM" and config.secrets["key"].file == "k.txt"
