"""The lexical secret rule: what a secret looks like in free text, masked before anything
is stored (a journal, a thread, a digest, the project's store) even when nobody declared
its value (LANGUAGE.md §16).

`chainlang.redaction.redactor.Redactor` masks the secrets a run knows by value; this rule
catches the ones it does not know: key-like prefixes (`sk-...`, `ghp_...`, `AKIA...`),
long random tokens, and assignments such as `password=...` or `token is ...`.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["SECRET_KEY", "mask_secrets", "mask_value"]

_SECRETS = [
    re.compile(r"\b(?:sk|pk|rk|ghp|gho|ghs|xox[abpr]|AKIA|AIza)[-_A-Za-z0-9]{12,}"),
    re.compile(r"(?i)\b(password|passwd|pwd|secret|token|api[_-]?key)\b(\s*[:=]\s*|\s+is\s+)(\S+)"),
    re.compile(r"\b(?=[A-Za-z0-9+/_-]{32,}\b)(?=[^\s]*\d)(?=[^\s]*[A-Za-z])[A-Za-z0-9+/_-]{32,}={0,2}"),
]


# a key that names a secret: its value is masked whole ("password", "api_key", "access_token"...)
SECRET_KEY = re.compile(r"(?i)[\w-]*(?:password|passwd|pwd|secret|token|api[_-]?key)")


def mask_value(value: Any) -> Any:
    """A JSON value with every text masked (`mask_secrets`), and the value of every key that
    names a secret (`SECRET_KEY`) replaced by `***` whole."""
    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, list):
        return [mask_value(v) for v in value]
    if isinstance(value, dict):
        return {k: "***" if isinstance(k, str) and SECRET_KEY.fullmatch(k) and v not in (None, "", {}, [])
                else mask_value(v) for k, v in value.items()}
    return value


def mask_secrets(text: str) -> str:
    """`text` with every secret-looking value replaced by `***`."""
    for pattern in _SECRETS:
        if pattern.groups == 3:
            text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}***", text)
        else:
            text = pattern.sub("***", text)
    return text
