"""`agent.reply {message}`: the answer a conversation turn gives the user (LANGUAGE.md §13).

The step's result is `{message}`. What makes it the turn's answer is around it:

- **shown**: the message goes to the run's notifier (`ctx.notify`: the progress display of
  `chainlang run`, in every mode, quiet included, masked like every note), one line per
  line of the message, the first one marked `reply:`;
- **kept**: a run attached to a thread adds every step's result to it (runtime/threads.py
  `ThreadRecorder`), this one included; a run on no thread replies all the same;
- **the output**: a chain that declares no `outputs:` and ends with an agent.reply step has
  the output `reply` (chainlang.model.reply_outputs).

The message is sent to the user: a secret in it is refused unless the step exposes it
(chainlang.registry.sinks), as for `user.notify`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chainlang.runtime.context import RunContext

__all__ = ["reply", "reply_lines"]

HEAD = "reply: "
LINE = 900  # characters of one shown line: a display cuts a longer note (progress format _MAX_NOTE)


def reply(ctx: "RunContext", message: str) -> dict[str, Any]:
    """Show the reply to the user; returns `{"message": message}`."""
    if not isinstance(message, str) or not message.strip():
        raise ValueError("message: expected the non-empty text of the answer")
    for line in reply_lines(message):
        ctx.notify(line)
    return {"message": message}


def reply_lines(message: str) -> list[str]:
    """The lines that show `message`: `reply: ` before the first, the others indented under
    it; blank lines at either end left out, long lines cut in pieces a display shows whole."""
    lines = [line.rstrip() for line in message.strip().splitlines()]
    pad = " " * len(HEAD)
    shown: list[str] = []
    for line in lines:
        pieces = [line[i:i + LINE] for i in range(0, len(line), LINE)] or [""]
        for piece in pieces:
            shown.append((pad if shown else HEAD) + piece if piece else "")
    return shown
