"""No secret in a diagnostic: what `check` prints is masked as a run's output is.

A chain may hold a secret written literally (`api_key: "sk-live-..."`, the value of
a model tier's `api_key_env` variable or of a declared `[secrets]` entry). The
checker quotes user text in messages and the text format shows the source line,
so every rendering masks the secrets of the projects the diagnostics' files
belong to (LANGUAGE.md §16), with the run's own `Redactor`: a secret becomes `***`.

- `project_secrets(files)`: the Redactor of the projects of `files` (the values
  `known_secret_values` can read now; a project whose chainlang.toml does not load
  has none to give, and its files are reported by the checker anyway);
- `masked(diagnostics, secrets)`: the diagnostics with messages and hints masked;
- `secret_spans(text, secrets)`: where secrets are in a source line, for the text
  format to show `***` there and keep its caret under the right character.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from chainlang.diagnostics import Diagnostic
from chainlang.redaction import Redactor

__all__ = ["masked", "project_secrets", "secret_spans"]


def project_secrets(files: Iterable[str]) -> Redactor:
    from chainlang.config.project import find_config, load_config
    from chainlang.config.secrets import known_secret_values
    from chainlang.errors import RegistryError

    redactor = Redactor()
    seen_dirs: set[str] = set()
    seen_configs: set[Path] = set()
    for file in files:
        directory = os.path.dirname(os.path.abspath(file.split("#", 1)[0]))  # `tools.py#hooks` names a module's hooks
        if directory in seen_dirs:
            continue
        seen_dirs.add(directory)
        try:
            path = find_config(Path(directory))
            if path is None or path in seen_configs:
                continue
            seen_configs.add(path)
            values = known_secret_values(load_config(path))
        except (RegistryError, OSError):  # a config that does not load has no secrets to read
            continue
        for value in values:
            redactor.add(value)
    return redactor


def masked(diagnostics: Sequence[Diagnostic], secrets: Redactor) -> list[Diagnostic]:
    if not secrets:
        return list(diagnostics)
    return [dataclasses.replace(d, message=secrets.mask(d.message), hint=None if d.hint is None else secrets.mask(d.hint))
            for d in diagnostics]


def secret_spans(text: str, secrets: Redactor) -> list[tuple[int, int]]:
    """The (start, end) character spans of the secrets in `text`, overlapping ones merged."""
    if not secrets or secrets.mask(text) == text:
        return []
    spans: list[tuple[int, int]] = []
    for secret in secrets.secrets:
        start = text.find(secret)
        while start != -1:
            spans.append((start, start + len(secret)))
            start = text.find(secret, start + 1)
    spans.sort()
    merged = [spans[0]]
    for start, end in spans[1:]:
        if start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
