"""The Python API for applications that embed chainlang (LANGUAGE.md §11): a project opened
once (`open_project`), its chains compiled once (`Project.chain`), run many times
(`Chain.run`). The one-shot `chainlang.run`/`emit`/`resume` are in chainlang.engine.entry."""

from chainlang.api.chain import Chain
from chainlang.api.project import Project, open_project, open_project_sync

__all__ = ["Chain", "Project", "open_project", "open_project_sync"]
