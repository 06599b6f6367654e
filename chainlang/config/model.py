"""The schema of `chainlang.toml` (pydantic; unknown keys are errors).

Kept apart from `config.py` so that finding the file does not import
pydantic: only a project that has a `chainlang.toml` pays for it.

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

from typing import Any, Literal

from chainlang.config.engine import EngineConfig
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class DecideConfig(BaseModel):
    """`[decide]`: the model-backed decider (LANGUAGE.md §5). Every key is optional;
    without this table the embedded deterministic decider is used."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = Field(default=None, min_length=1, description="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1")
    model: str | None = Field(default=None, min_length=1, description="the model name sent to the endpoint")
    api_key_env: str | None = Field(
        default=None,
        min_length=1,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="name of the environment variable that holds the API key",
    )
    fallback: Literal["fail", "skip", "break"] = Field(
        default="fail",
        description="what a step gets when no decider can decide: fail (the step fails), skip, or break",
    )
    timeout: str = Field(default="60s", description="how long to wait for the model's answer: a duration, e.g. 30s or 2m")
    max_tokens: int = Field(default=256, ge=1, le=1_000_000,
                            description="the longest answer asked for: a decision is short (what a call reserves of limits.max_tokens)")

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout_is_a_duration(cls, value: Any) -> Any:
        return _duration(value, 1e-9, 600, "more than 0 and at most 10m")


def _duration(value: Any, least: float, most: float, shown: str) -> Any:
    from chainlang.durations import DURATION_HINT, parse_duration

    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(f"must be a duration in quotes, e.g. \"30s\"; {DURATION_HINT}")
    seconds = parse_duration(value)
    if seconds is None:
        raise ValueError(f"{value!r} is not a duration; {DURATION_HINT}")
    if not least <= seconds <= most:
        raise ValueError(f"{value!r} is out of range: {shown}")
    return value


TIER_NAMES = ("heavy", "fast", "light")


class ModelTierConfig(BaseModel):
    """`[models.heavy]`, `[models.fast]`, `[models.light]`: one model tier (LANGUAGE.md §13)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Literal["openai", "scripted"] = Field(
        default="openai", description="openai: any OpenAI-compatible endpoint; scripted: answers from a rules file")
    base_url: str | None = Field(default=None, min_length=1, description="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1")
    model: str | None = Field(default=None, min_length=1, description="the model name sent to the endpoint")
    api_key_env: str | None = Field(
        default=None, min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="name of the environment variable that holds the API key")
    timeout: str = Field(default="60s", description="how long one request may take, retries included: a duration")
    max_tokens: int = Field(default=1024, ge=1, le=1_000_000, description="the longest answer asked for, in tokens")
    context: int | None = Field(
        default=None, ge=16, le=10_000_000,
        description="the endpoint's context window in tokens: a request whose prompt (estimated) and max_tokens "
                    "would not fit is refused before it is sent")
    structured: Literal["json_schema", "json_object", "none"] = Field(
        default="json_schema",
        description="how JSON answers are asked for: json_schema (the answer's schema as response_format), "
                    "json_object (any JSON), none (the prompt only); answers are validated in every case")
    rules: str | None = Field(default=None, min_length=1, description="scripted: the rules file, relative to chainlang.toml")

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout_is_a_duration(cls, value: Any) -> Any:
        return _duration(value, 1e-9, 3600, "more than 0 and at most 1h")

    @model_validator(mode="after")
    def _complete(self) -> "ModelTierConfig":
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
        return self


class ModelsConfig(BaseModel):
    """`[models]`: the tiers; each is optional."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    heavy: ModelTierConfig | None = None
    fast: ModelTierConfig | None = None
    light: ModelTierConfig | None = None
    memory: Literal["embedded", "heavy", "fast", "light"] = Field(
        default="embedded",
        description="what thread.match, thread.summarize and memory.digest use: embedded (no model) or a tier")


class StoreConfig(BaseModel):
    """`[store]`: where the project's store lives (LANGUAGE.md §12)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str | None = Field(default=None, min_length=1, max_length=2000,
                            description="sqlite:///PATH (relative to chainlang.toml) or postgresql://USER@HOST:PORT/DB "
                            "(password: PGPASSWORD); default .chainlang/store.db")


class ServeEventConfig(BaseModel):
    """`[serve.events.NAME]`: the endpoint `POST /events/NAME` of one external event."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token_env: str = Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                           description="name of the environment variable holding this endpoint's own bearer token: a "
                                       "request to it must carry that one (the [serve] token does not open it)")


class ServeConfig(BaseModel):
    """`[serve]`: the long-running process of the project (`chainlang serve`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token_env: str | None = Field(default=None, min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                                  description="name of the environment variable holding the bearer token")
    grace: str = Field(default="30s", description="on SIGTERM, how long running actions may take to finish")
    max_failures: int = Field(default=3, ge=1, le=1000, description="failed runs in a row that make a task dead")
    lease: str = Field(default="30s", description="how long a task firing's lease lasts unless renewed (it is renewed "
                                                  "every third of it while the firing runs)")
    hosts: list[str] = Field(default_factory=list, max_length=100,
                             description="more names (or addresses) a request's Host may give, besides the address "
                                         "serve listens on: the names a reverse proxy or a client reaches it by")
    header_timeout: str = Field(default="5s", description="how long a client may take to send a request's line and "
                                                           "headers (and to start the next one on a kept connection)")
    body_timeout: str = Field(default="10s", description="how long a client may take to send a request's body")
    max_connections: int | None = Field(default=None, ge=1, le=1_000_000,
                                        description="connections open at once; default: 512, or half the process's "
                                                    "descriptor limit if that is lower")
    events: dict[str, ServeEventConfig] = Field(default_factory=dict, max_length=1000,
                                                description="per-event endpoints with a key of their own: "
                                                            "[serve.events.NAME] token_env = \"VAR\"")

    @field_validator("grace", mode="before")
    @classmethod
    def _grace_is_a_duration(cls, value: Any) -> Any:
        return _duration(value, 0, 3600, "0s to 1h")

    @field_validator("events", mode="before")
    @classmethod
    def _event_names_are_quoted(cls, value: Any) -> Any:
        # [serve.events.deploy.finished] is a table `deploy` holding `finished`: say how to write it
        if isinstance(value, dict):
            for name, table in value.items():
                if isinstance(table, dict) and "token_env" not in table and any(isinstance(v, dict) for v in table.values()):
                    inner = next(k for k, v in table.items() if isinstance(v, dict))
                    raise ValueError(f'event names are dotted: quote them, [serve.events."{name}.{inner}"]')
        return value

    @field_validator("lease", mode="before")
    @classmethod
    def _lease_is_a_duration(cls, value: Any) -> Any:
        return _duration(value, 1, 3600, "from 1s to 1h")

    @field_validator("header_timeout", "body_timeout", mode="before")
    @classmethod
    def _timeout_is_a_duration(cls, value: Any) -> Any:
        return _duration(value, 0.1, 600, "from 100ms to 10m")

    @field_validator("hosts", mode="before")
    @classmethod
    def _hosts_are_names(cls, value: Any) -> Any:
        import re

        # a DNS name (a final dot allowed), an IPv4 address, or an IPv6 one in brackets
        host = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}"
                          r"[A-Za-z0-9])?\.?|\[[0-9A-Fa-f:.]+\]")
        if not isinstance(value, list):
            return value  # pydantic says it must be a list
        for name in value:
            if isinstance(name, str) and (len(name) > 253 or not host.fullmatch(name)):
                raise ValueError(f"{name!r} is not a host name: give a name such as chains.example.com or an "
                                 "address such as 192.0.2.7 or [2001:db8::7], without a scheme or a port")
        return value


class McpServerConfig(BaseModel):
    """`[mcp.servers.NAME]`: one MCP server, whose tools become the events `NAME.TOOL`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str | None = Field(default=None, min_length=1, description="a stdio server: the executable to start")
    args: list[str] = Field(default_factory=list, description="a stdio server: its arguments")
    env: dict[str, str] = Field(default_factory=dict, description="a stdio server: extra environment variables")
    url: str | None = Field(default=None, min_length=1, pattern=r"^https?://",
                            description="a server over streamable HTTP: its endpoint, e.g. http://localhost:8000/mcp")
    timeout: str = Field(default="30s", description="how long starting the server and listing its tools may take")
    strict: bool = Field(default=True, description="check params and result paths against the tool's schemas as "
                         "closed when they list their properties (false: as the server gave them)")

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout_is_a_duration(cls, value: Any) -> Any:
        return _duration(value, 1e-9, 600, "more than 0 and at most 10m")

    @model_validator(mode="after")
    def _one_transport(self) -> "McpServerConfig":
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command (a stdio server) or url (an HTTP server)")
        if self.url is not None and (self.args or self.env):
            raise ValueError("args and env are for a stdio server (command), not a url")
        return self


MCP_SERVER_NAME = r"^[a-z][a-z0-9_]*$"

SECRET_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class SecretSource(BaseModel):
    """`[secrets] NAME = {env = "VAR"}` or `{file = "PATH"}`: where one secret's value is read
    from when a run needs it (LANGUAGE.md §16). The value itself is never written here."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    env: str | None = Field(default=None, min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                            description="the NAME of the environment variable holding the value")
    file: str | None = Field(default=None, min_length=1, max_length=4096,
                             description="a file holding the value (relative to chainlang.toml); one final newline is dropped")

    @model_validator(mode="after")
    def _one_source(self) -> "SecretSource":
        if (self.env is None) == (self.file is None):
            raise ValueError('give exactly one of env = "VARIABLE" or file = "PATH"')
        return self


class McpConfig(BaseModel):
    """`[mcp]`: the MCP servers whose tools are events."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: dict[str, McpServerConfig] = Field(default_factory=dict,
                                                description="NAME = server; its tools are the events NAME.TOOL")

    @field_validator("servers")
    @classmethod
    def _names_are_namespaces(cls, value: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        import re

        for name in value:
            if not re.fullmatch(MCP_SERVER_NAME, name):
                raise ValueError(f"server name {name!r} must be an event namespace: lowercase [a-z][a-z0-9_]*")
        return value


class RunsConfig(BaseModel):
    """`[runs]`: where runs write their transcripts, and how long ended runs' transcripts
    stay (applied by `chainlang gc` and by serve)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dir: str = Field(default=".chainlang/runs", min_length=1, max_length=1000,
                     description="the transcripts' directory (relative to chainlang.toml)")
    keep: int | str | None = Field(
        default=None, description="ended runs kept: a count (keep the newest N) or an age (\"30d\": keep those "
        "that ended within it); none: keep every run")

    @field_validator("keep", mode="before")  # before: pydantic would make keep = true the count 1
    @classmethod
    def _keep(cls, value: object) -> int | str | None:
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


class ConfigFile(BaseModel):
    """The top level of `chainlang.toml`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: list[str] = Field(default_factory=list, description="tool modules or .py files (relative to the toml)")
    chains: list[str] = Field(default_factory=list, description="directories of named chains (relative to the toml)")
    decide: DecideConfig | None = None
    models: ModelsConfig | None = None
    store: StoreConfig | None = None
    serve: ServeConfig | None = None
    mcp: McpConfig | None = None
    engine: EngineConfig | None = None
    runs: RunsConfig | None = None
    secrets: dict[str, SecretSource] = Field(default_factory=dict,
                                             description="NAME = {env = VAR} or {file = PATH}: {secrets.NAME} in chains")

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, value: dict[str, SecretSource]) -> dict[str, SecretSource]:
        import re

        for name in value:
            if not re.fullmatch(SECRET_NAME, name):
                raise ValueError(f"secret name {name!r} must be an identifier: [A-Za-z_][A-Za-z0-9_]*")
        return value
