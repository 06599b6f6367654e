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
```
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


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


class ConfigFile(BaseModel):
    """The top level of `chainlang.toml`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: list[str] = Field(default_factory=list, description="tool modules or .py files (relative to the toml)")
    chains: list[str] = Field(default_factory=list, description="directories of named chains (relative to the toml)")
    decide: DecideConfig | None = None
