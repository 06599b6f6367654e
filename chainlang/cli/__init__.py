"""The `chainlang` command.

- `main`: the click group and the check-side commands (check, schema, events, describe,
  graph); imports stay lazy so that `chainlang --help` is fast.
- `run`: `chainlang run` and `chainlang resume` (driving a run, its exit code).
- `describe`: what `events` and `describe` print.
"""

from chainlang.cli.main import main

__all__ = ["main"]
