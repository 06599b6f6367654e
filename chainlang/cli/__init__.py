"""The `chainlang` command.

- `main`: the click group, `--version`, and the commands in the order `--help` lists them.
- `commands_check`, `commands_runs`, `commands_store`, `commands_servers`: the commands, by
  what they are about (checking and describing chains; running, resuming and emitting; what the
  project's store holds; the servers). Their imports stay inside the commands, so that
  `chainlang --help` loads none of what they do.
- `options`, `guard`: the options several commands share, and the error handling every
  command body runs under.
- `run`, `tasks`, `threads`, `waits`, `gc`, `log`, `report`, `post`...: what the commands call.
"""

from chainlang.cli.main import main

__all__ = ["main"]
