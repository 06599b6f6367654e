"""One rule for colour in every command: NO_COLOR wins, FORCE_COLOR forces, else a terminal."""

from __future__ import annotations

import os
from typing import Any


def use_color(stream: Any) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR", "").strip().lower() not in ("", "0", "false", "no"):
        return True
    return bool(getattr(stream, "isatty", lambda: False)())
