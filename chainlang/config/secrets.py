"""Where secrets come from (LANGUAGE.md §16): the one place that reads their values.

Two kinds of secret are known to a project:
- the API keys of the model tiers and of `[decide]`, read from the variables their
  `api_key_env` names;
- the `[secrets]` table: `NAME = {env = "VAR"}` or `{file = "PATH"}`, referenced in chains
  as `{secrets.NAME}`.

`secret_value(config, name)` reads one declared secret for a run that needs it, raising
`MissingSecret` (naming the secret and its source, never a value) when it cannot.
`known_secret_values(config)` is every value that can be read now, for masking: whatever
writes anything of the project (a transcript, the store, a page, a diagnostic) masks these.
A missing one is left out there: masking cannot hide what it cannot read, and the run that
needs it fails before its first step.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chainlang.config.project import ProjectConfig

__all__ = ["MAX_SECRET_BYTES", "DeclaredSecrets", "MissingSecret", "declared_secrets", "known_secret_values",
           "secret_value", "source_of"]

#: The longest secret file read (a key or a token, not a document).
MAX_SECRET_BYTES = 64 * 1024

#: Values shorter than this are not masked (masking every "a" would destroy the output);
#: the same bound as chainlang.redaction.MIN_SECRET_LENGTH.
_MIN_LENGTH = 4


class MissingSecret(Exception):
    """A declared secret whose value cannot be read; the message names it and its source."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


def source_of(config: "ProjectConfig", name: str) -> str:
    """How messages name where a secret comes from: `env CRM_TOKEN` or `file PATH`."""
    source = config.secrets[name]
    return f"the variable {source.env}" if source.env else f"the file {source.file}"


def secret_value(config: "ProjectConfig", name: str) -> str:
    """The value of the declared secret `name`; raises MissingSecret when it cannot be read
    (an unset or empty variable, a missing, unreadable, too large or non-UTF-8 file)."""
    if name not in config.secrets:
        raise MissingSecret(name, f"secrets.{name} is not declared in {config.path.name}: add it to its [secrets] table")
    source = config.secrets[name]
    if source.env is not None:
        value = os.environ.get(source.env)
        if not value:
            raise MissingSecret(name, f"secrets.{name}: the variable {source.env} is not set (or is empty); "
                                      f"set it before the run, or change [secrets] {name} in {config.path.name}")
        return _long_enough(config, name, value)
    assert source.file is not None
    path = Path(os.path.expanduser(source.file))
    if not path.is_absolute():
        path = config.root / path
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_SECRET_BYTES + 1)
    except OSError as exc:
        raise MissingSecret(name, f"secrets.{name}: cannot read the file {source.file}: "
                                  f"{exc.strerror or type(exc).__name__}") from None
    if len(data) > MAX_SECRET_BYTES:
        raise MissingSecret(name, f"secrets.{name}: the file {source.file} is over {MAX_SECRET_BYTES // 1024} KiB; "
                                  "a secret file holds one value")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise MissingSecret(name, f"secrets.{name}: the file {source.file} is not UTF-8 text") from None
    if text.endswith("\n"):
        text = text[:-2] if text.endswith("\r\n") else text[:-1]
    if not text:
        raise MissingSecret(name, f"secrets.{name}: the file {source.file} is empty")
    return _long_enough(config, name, text)


def _long_enough(config: "ProjectConfig", name: str, value: str) -> str:
    """`value`, unless it is too short to be masked: a run refuses it rather than show it."""
    if len(value) < _MIN_LENGTH:
        raise MissingSecret(name, f"secrets.{name}: the value of {source_of(config, name)} is shorter than "
                                  f"{_MIN_LENGTH} characters, too short to be masked in what a run shows; "
                                  "use a real secret")
    return value


def api_key_values(config: "ProjectConfig | None") -> list[str]:
    """The API keys of `[decide]` and the model tiers that are set (4 characters or more)."""
    if config is None:
        return []
    tables: list[Any] = [config.decide]
    if config.models is not None:
        tables += [config.models.heavy, config.models.fast, config.models.light]
    values = [os.environ.get(t.api_key_env) or "" for t in tables if t is not None and t.api_key_env]
    if config.serve is not None:  # serve's bearer tokens, its own and its events' (masked like keys)
        names = [config.serve.token_env] + [e.token_env for e in config.serve.events.values()]
        values += [(os.environ.get(n) or "").strip() for n in names if n]
    return [v for v in values if len(v) >= _MIN_LENGTH]


def known_secret_values(config: "ProjectConfig | None") -> list[str]:
    """Every secret value of the project that can be read now (API keys and declared
    secrets), for masking; one that cannot be read is left out."""
    values = api_key_values(config)
    if config is not None:
        for name in config.secrets:
            try:
                value = secret_value(config, name)
            except MissingSecret:
                continue
            if len(value) >= _MIN_LENGTH and value not in values:
                values.append(value)
    return values


@dataclass(frozen=True)
class DeclaredSecrets:
    """What the checker knows of the secrets of the project a chain file is in: the names
    its chainlang.toml declares (`config` None: no chainlang.toml above the file;
    `unreadable`: there is one, which cannot be loaded, reported by another stage)."""

    config: "ProjectConfig | None"
    unreadable: bool = False

    @property
    def names(self) -> list[str]:
        return sorted(self.config.secrets) if self.config is not None else []


_declared: dict[str, tuple[tuple[int, int], DeclaredSecrets]] = {}


def declared_secrets(start: Path) -> DeclaredSecrets:
    """The secrets declared by the chainlang.toml nearest `start` (a directory). Loaded again
    when the file changes (the editor's checker sees an edit of chainlang.toml at once)."""
    from chainlang.config.project import find_config, load_config
    from chainlang.errors import RegistryError

    path = find_config(start)
    if path is None:
        return DeclaredSecrets(None)
    try:
        stat = path.stat()
    except OSError:
        return DeclaredSecrets(None, unreadable=True)
    stamp = (stat.st_mtime_ns, stat.st_size)
    key = str(path)
    cached = _declared.get(key)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        found = DeclaredSecrets(load_config(path))
    except (RegistryError, OSError):
        found = DeclaredSecrets(None, unreadable=True)
    if len(_declared) > 64:  # a long-lived editor session over many projects
        _declared.clear()
    _declared[key] = (stamp, found)
    return found
