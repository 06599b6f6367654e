"""Tools for tests/test_surfaces.py: tools that leak a secret, return strings that are not
valid Unicode, or try to end the process. The secret is the value of the variable that
`SURFACE_KEY_ENV` names (the decide model's key variable in the tests' chainlang.toml)."""

from __future__ import annotations

import os
from typing import Any

from chainlang import event

SURFACE_KEY_ENV = "CHAINLANG_TEST_DECIDE_KEY"


def _key() -> str:
    return os.environ[SURFACE_KEY_ENV]


@event("surface.key", description="Return the secret, in a text, a list and an object key", idempotent=True)
def key() -> dict[str, Any]:
    secret = _key()
    return {"token": secret, "said": f"the key is {secret}!", "all": [secret, secret], secret: "as a key"}


@event("surface.fail_with_key", description="Fail with the secret in the message", idempotent=True)
def fail_with_key() -> None:
    raise RuntimeError(f"401 Unauthorized for Bearer {_key()}")


@event("surface.tell_key", description="Notify and report progress with the secret in the text", idempotent=True)
def tell_key(ctx: Any = None) -> str:
    ctx.notify(f"using {_key()} now")
    ctx.progress(f"sending with {_key()}", 0.5)
    return "told"


@event("surface.echo", description="Return the value given", idempotent=True)
def echo(value: Any = None) -> Any:
    return value


@event("surface.surrogate", description="Put a lone surrogate in the result, an error, a notification or progress",
       idempotent=True)
def surrogate(where: str = "result", ctx: Any = None) -> Any:
    if where == "error":
        raise RuntimeError("cannot decode b'\\x80': got \udc80 here")
    if where == "note":
        ctx.notify("half a pair: \ud800 (a note)")
        ctx.progress("and \udfff in progress", 0.5)
    return {"text": "a\ud800b", "\udc80key": ["\udfff"], "fine": "é ✓ 😀"}


@event("surface.exit", description="Call sys.exit", idempotent=True)
def exit_(code: int = 7) -> None:
    raise SystemExit(code)


@event("surface.exit_in_thread", description="Call sys.exit in a worker thread", idempotent=True, blocking=True)
def exit_in_thread(code: int = 7) -> None:
    raise SystemExit(code)


@event("surface.interrupt", description="Raise KeyboardInterrupt", idempotent=True)
async def interrupt() -> None:
    raise KeyboardInterrupt


@event("surface.interrupt_in_thread", description="Raise KeyboardInterrupt in a worker thread", idempotent=True,
       blocking=True)
def interrupt_in_thread() -> None:
    raise KeyboardInterrupt
