"""The schema of `chainlang.toml`: its tables as frozen dataclasses, each field declaring what
its value must be (config/fields.py); unknown keys are errors.

Kept apart from `config/project.py`, which finds the file.

```toml
tools = ["mypkg.tools", "tools/local.py"]   # module names, or .py files relative to this file
chains = ["chains"]                         # directories of named chains

[decide]                                    # the decide model (optional)
base_url = "http://localhost:11434/v1"      # an OpenAI-compatible endpoint
model = "phi3"
api_key_env = "OPENAI_API_KEY"              # the NAME of the variable holding the key, never the key

[models.heavy]                              # model tiers (optional, §13): heavy plans (agent.think),
base_url = "http://localhost:11434/v1"      # fast writes chains (agent.chain), light decides (agent.decide;
model = "llama3.1:70b"                      # [decide] is its older name); a missing tier uses another one
timeout = "120s"
max_tokens = 2048                           # the longest answer asked for; what a call reserves of limits.max_tokens

[models.fast]
provider = "scripted"                       # answers from a rules file: offline demos and tests
rules = "models/answers.yaml"

[store]                                     # the project's store (optional)
url = "sqlite:///state/chainlang.db"        # default: .chainlang/store.db

[serve]                                     # chainlang serve (optional)
token_env = "CHAINLANG_TOKEN"               # every request must carry this bearer token; allows other hosts
grace = "30s"                               # on SIGTERM: how long running actions may take to finish
max_failures = 3                            # failed runs in a row that make a task dead
lease = "30s"                               # a task firing's lease, renewed while it runs

[secrets]                                   # secrets (optional, §16): {secrets.NAME} in a chain
crm_token = {env = "CRM_TOKEN"}             # read from a variable when a run needs it
deploy_key = {file = "/run/secrets/deploy"} # or from a file (its text, without the final newline)

[mcp.servers.calc]                          # an MCP server (optional): its tools become events calc.TOOL
command = "python"                          # a stdio server: the command and its args (run in this directory)
args = ["tools/calc_server.py"]
env = { CALC_MODE = "exact" }               # extra environment variables for the server
timeout = "30s"                             # how long starting it and listing its tools may take

[mcp.servers.search]
url = "http://localhost:8000/mcp"           # or a server over streamable HTTP
```
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from chainlang.config.engine import EngineConfig
from chainlang.config.fields import checked, flag, integer, key_names, mapping, table, tables, text, texts

__all__ = ["ConfigFile", "DecideConfig", "McpConfig", "McpServerConfig", "ModelTierConfig", "ModelsConfig",
           "RunsConfig", "SecretSource", "ServeConfig", "ServeEventConfig", "StoreConfig", "TIER_NAMES"]

_VARIABLE = r"^[A-Za-z_][A-Za-z0-9_]*$"  # the name of an environment variable


def _duration(least: float, most: float, shown: str) -> Any:
    """A field check: a duration in quotes from `least` to `most` seconds."""

    def check(value: Any) -> Any:
        from chainlang.durations import DURATION_HINT, parse_duration

        if isinstance(value, bool) or not isinstance(value, str):
            raise ValueError(f"must be a duration in quotes, e.g. \"30s\"; {DURATION_HINT}")
        seconds = parse_duration(value)
        if seconds is None:
            raise ValueError(f"{value!r} is not a duration; {DURATION_HINT}")
        if not least <= seconds <= most:
            raise ValueError(f"{value!r} is out of range: {shown}")
        return value

    return check


@dataclass(frozen=True)
class DecideConfig:
    """`[decide]`: the model-backed decider (LANGUAGE.md §5). Every key is optional;
    without this table the embedded deterministic decider is used."""

    base_url: str | None = text(optional=True, min_length=1,
                                description="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1")
    model: str | None = text(optional=True, min_length=1, description="the model name sent to the endpoint")
    api_key_env: str | None = text(optional=True, min_length=1, pattern=_VARIABLE,
                                   description="name of the environment variable that holds the API key")
    fallback: Literal["fail", "skip", "break"] = text(
        "fail", choices=("fail", "skip", "break"),
        description="what a step gets when no decider can decide: fail (the step fails), skip, or break")
    timeout: str = text("60s", check=_duration(1e-9, 600, "more than 0 and at most 10m"),
                        description="how long to wait for the model's answer: a duration, e.g. 30s or 2m")
    max_tokens: int = integer(256, ge=1, le=1_000_000, description="the longest answer asked for: a decision is "
                              "short (what a call reserves of limits.max_tokens)")


TIER_NAMES = ("heavy", "fast", "light")


@dataclass(frozen=True)
class ModelTierConfig:
    """`[models.heavy]`, `[models.fast]`, `[models.light]`: one model tier (LANGUAGE.md §13)."""

    provider: Literal["openai", "scripted"] = text(
        "openai", choices=("openai", "scripted"),
        description="openai: any OpenAI-compatible endpoint; scripted: answers from a rules file")
    base_url: str | None = text(optional=True, min_length=1,
                                description="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1")
    model: str | None = text(optional=True, min_length=1, description="the model name sent to the endpoint")
    api_key_env: str | None = text(optional=True, min_length=1, pattern=_VARIABLE,
                                   description="name of the environment variable that holds the API key")
    timeout: str = text("60s", check=_duration(1e-9, 3600, "more than 0 and at most 1h"),
                        description="how long one request may take, retries included: a duration")
    max_tokens: int = integer(1024, ge=1, le=1_000_000, description="the longest answer asked for, in tokens")
    context: int | None = integer(
        optional=True, ge=16, le=10_000_000,
        description="the endpoint's context window in tokens: a request whose prompt (estimated) and max_tokens "
                    "would not fit is refused before it is sent")
    structured: Literal["json_schema", "json_object", "none"] = text(
        "json_schema", choices=("json_schema", "json_object", "none"),
        description="how JSON answers are asked for: json_schema (the answer's schema as response_format), "
                    "json_object (any JSON), none (the prompt only); answers are validated in every case")
    rules: str | None = text(optional=True, min_length=1,
                             description="scripted: the rules file, relative to chainlang.toml")

    def check_table(self) -> None:
        if self.context is not None and self.max_tokens >= self.context:
            raise ValueError(f"max_tokens = {self.max_tokens} leaves no room for the prompt in context = "
                             f"{self.context}: lower max_tokens (an answer is rarely over 1024 tokens)")
        if self.provider == "scripted":
            if not self.rules:
                raise ValueError('a scripted tier needs rules = "FILE" (its answers)')
            extra = [k for k in ("base_url", "model", "api_key_env") if getattr(self, k)]
            if extra:
                raise ValueError(f"a scripted tier asks no endpoint: remove {', '.join(extra)}")
        else:
            missing = [k for k in ("base_url", "model") if not getattr(self, k)]
            if missing:
                raise ValueError(f"an openai tier needs base_url and model (missing: {', '.join(missing)})")
            if self.rules:
                raise ValueError('rules is for provider = "scripted"')


@dataclass(frozen=True)
class ModelsConfig:
    """`[models]`: the tiers; each is optional."""

    heavy: ModelTierConfig | None = table(ModelTierConfig)
    fast: ModelTierConfig | None = table(ModelTierConfig)
    light: ModelTierConfig | None = table(ModelTierConfig)
    memory: Literal["embedded", "heavy", "fast", "light"] = text(
        "embedded", choices=("embedded", "heavy", "fast", "light"),
        description="what thread.match, thread.summarize and memory.digest use: embedded (no model) or a tier")


@dataclass(frozen=True)
class StoreConfig:
    """`[store]`: where the project's store lives (LANGUAGE.md §12)."""

    url: str | None = text(optional=True, min_length=1, max_length=2000,
                           description="sqlite:///PATH (relative to chainlang.toml) or postgresql://USER@HOST:PORT/DB "
                                       "(password: PGPASSWORD); default .chainlang/store.db")


@dataclass(frozen=True)
class ServeEventConfig:
    """`[serve.events.NAME]`: the endpoint `POST /events/NAME` of one external event."""

    token_env: str = text(min_length=1, pattern=_VARIABLE,
                          description="name of the environment variable holding this endpoint's own bearer token: a "
                                      "request to it must carry that one (the [serve] token does not open it)")


def _event_names_are_quoted(value: Any) -> Any:
    # [serve.events.deploy.finished] is a table `deploy` holding `finished`: say how to write it
    if isinstance(value, dict):
        for name, inner_table in value.items():
            if isinstance(inner_table, dict) and "token_env" not in inner_table and \
                    any(isinstance(v, dict) for v in inner_table.values()):
                inner = next(k for k, v in inner_table.items() if isinstance(v, dict))
                raise ValueError(f'event names are dotted: quote them, [serve.events."{name}.{inner}"]')
    return value


# a DNS name (a final dot allowed), an IPv4 address, or an IPv6 one in brackets
_HOST = (r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}"
         r"[A-Za-z0-9])?\.?|\[[0-9A-Fa-f:.]+\]")


def _hosts_are_names(value: Any) -> Any:
    import re

    if not isinstance(value, list):
        return value  # the list check says it must be a list
    for name in value:
        if isinstance(name, str) and (len(name) > 253 or not re.fullmatch(_HOST, name)):
            raise ValueError(f"{name!r} is not a host name: give a name such as chains.example.com or an "
                             "address such as 192.0.2.7 or [2001:db8::7], without a scheme or a port")
    return value


@dataclass(frozen=True)
class ServeConfig:
    """`[serve]`: the long-running process of the project (`chainlang serve`)."""

    token_env: str | None = text(optional=True, min_length=1, pattern=_VARIABLE,
                                 description="name of the environment variable holding the bearer token")
    grace: str = text("30s", check=_duration(0, 3600, "0s to 1h"),
                      description="on SIGTERM, how long running actions may take to finish")
    max_failures: int = integer(3, ge=1, le=1000, description="failed runs in a row that make a task dead")
    lease: str = text("30s", check=_duration(1, 3600, "from 1s to 1h"),
                      description="how long a task firing's lease lasts unless renewed (it is renewed every third "
                                  "of it while the firing runs)")
    hosts: list[str] = texts(max_length=100, check=_hosts_are_names,
                             description="more names (or addresses) a request's Host may give, besides the address "
                                         "serve listens on: the names a reverse proxy or a client reaches it by")
    header_timeout: str = text("5s", check=_duration(0.1, 600, "from 100ms to 10m"),
                               description="how long a client may take to send a request's line and headers (and "
                                           "to start the next one on a kept connection)")
    body_timeout: str = text("10s", check=_duration(0.1, 600, "from 100ms to 10m"),
                             description="how long a client may take to send a request's body")
    max_connections: int | None = integer(optional=True, ge=1, le=1_000_000,
                                          description="connections open at once; default: 512, or half the "
                                                      "process's descriptor limit if that is lower")
    events: dict[str, ServeEventConfig] = tables(ServeEventConfig, max_length=1000, check=_event_names_are_quoted,
                                                 description="per-event endpoints with a key of their own: "
                                                             "[serve.events.NAME] token_env = \"VAR\"")


@dataclass(frozen=True)
class McpServerConfig:
    """`[mcp.servers.NAME]`: one MCP server, whose tools become the events `NAME.TOOL`."""

    command: str | None = text(optional=True, min_length=1, description="a stdio server: the executable to start")
    args: list[str] = texts(description="a stdio server: its arguments")
    env: dict[str, str] = mapping(description="a stdio server: extra environment variables")
    url: str | None = text(optional=True, min_length=1, pattern=r"^https?://",
                           description="a server over streamable HTTP: its endpoint, e.g. http://localhost:8000/mcp")
    timeout: str = text("30s", check=_duration(1e-9, 600, "more than 0 and at most 10m"),
                        description="how long starting the server and listing its tools may take")
    strict: bool = flag(True, description="check params and result paths against the tool's schemas as closed "
                        "when they list their properties (false: as the server gave them)")

    def check_table(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command (a stdio server) or url (an HTTP server)")
        if self.url is not None and (self.args or self.env):
            raise ValueError("args and env are for a stdio server (command), not a url")

    def key(self) -> str:
        """The server's settings as one stable text (a cache key of its tools)."""
        import json
        from dataclasses import asdict

        return json.dumps(asdict(self), sort_keys=True, ensure_ascii=False)


MCP_SERVER_NAME = r"^[a-z][a-z0-9_]*$"

SECRET_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


@dataclass(frozen=True)
class SecretSource:
    """`[secrets] NAME = {env = "VAR"}` or `{file = "PATH"}`: where one secret's value is read
    from when a run needs it (LANGUAGE.md §16). The value itself is never written here."""

    env: str | None = text(optional=True, min_length=1, pattern=_VARIABLE,
                           description="the NAME of the environment variable holding the value")
    file: str | None = text(optional=True, min_length=1, max_length=4096,
                            description="a file holding the value (relative to chainlang.toml); one final newline "
                                        "is dropped")

    def check_table(self) -> None:
        if (self.env is None) == (self.file is None):
            raise ValueError('give exactly one of env = "VARIABLE" or file = "PATH"')


@dataclass(frozen=True)
class McpConfig:
    """`[mcp]`: the MCP servers whose tools are events."""

    servers: dict[str, McpServerConfig] = tables(
        McpServerConfig, check=key_names(MCP_SERVER_NAME, lambda name: f"server name {name!r} must be an event "
                                                                       "namespace: lowercase [a-z][a-z0-9_]*"),
        description="NAME = server; its tools are the events NAME.TOOL")


def _keep(value: object) -> int | str | None:
    from chainlang.durations import parse_duration

    if value is None:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, str)) or (isinstance(value, int) and value < 1):
        raise ValueError("keep must be a count of runs (1 or more) or an age such as \"30d\"")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)  # keep = "500": a count all the same
    if isinstance(value, int) and value < 1:
        raise ValueError("keep must be a count of runs (1 or more) or an age such as \"30d\"")
    if isinstance(value, str) and not (parse_duration(value) or 0) > 0:
        raise ValueError(f"keep = {value!r} is neither a count nor a duration; write e.g. keep = 500 or "
                         "keep = \"30d\"")
    return value


@dataclass(frozen=True)
class RunsConfig:
    """`[runs]`: where runs write their transcripts, and how long ended runs' transcripts
    stay (applied by `chainlang gc` and by serve)."""

    dir: str = text(".chainlang/runs", min_length=1, max_length=1000,
                    description="the transcripts' directory (relative to chainlang.toml)")
    keep: int | str | None = checked(_keep, description="ended runs kept: a count (keep the newest N) or an age "
                                     "(\"30d\": keep those that ended within it); none: keep every run")


@dataclass(frozen=True)
class ConfigFile:
    """The top level of `chainlang.toml`."""

    tools: list[str] = texts(description="tool modules or .py files (relative to the toml)")
    chains: list[str] = texts(description="directories of named chains (relative to the toml)")
    decide: DecideConfig | None = table(DecideConfig)
    models: ModelsConfig | None = table(ModelsConfig)
    store: StoreConfig | None = table(StoreConfig)
    serve: ServeConfig | None = table(ServeConfig)
    mcp: McpConfig | None = table(McpConfig)
    engine: EngineConfig | None = table(EngineConfig)
    runs: RunsConfig | None = table(RunsConfig)
    secrets: dict[str, SecretSource] = tables(
        SecretSource, check=key_names(SECRET_NAME, lambda name: f"secret name {name!r} must be an identifier: "
                                                                "[A-Za-z_][A-Za-z0-9_]*"),
        description="NAME = {env = VAR} or {file = PATH}: {secrets.NAME} in chains")

