"""The methods `@dataclass` writes for chainlang's own classes, compiled ahead of time.

On Python 3.11 `@dataclass` writes the source of each method it adds (`__init__`, `__repr__`,
`__eq__`, ...) and compiles it with `exec`, one compilation per method: about 1 ms per class on
a slow machine, 60-80 ms of a cold `chainlang check` (64 classes) and more of a cold run. The
text of those methods depends only on the class's fields, so it is compiled once, when the
package is made: `chainlang/dataclass_methods/_table.py` holds each text that chainlang's classes
produce, as a function definition that Python byte-compiles with the rest of the package.

`install()` (called by `chainlang/__init__.py` through `install_when_imported()`, before any
class of the package exists, and not before `dataclasses` is imported: `--help` needs no class) wraps
`dataclasses._create_fn`, the one place where the standard library compiles a method. For a
class of a chainlang module whose text is in the table, it makes the function from the
precompiled code object, with the same globals and arguments that `exec` would have used:
the very function `exec` would have made. Everything else (other packages' classes, a text not
in the table, another Python version than the table's) goes to the standard library as it is.

`python tools/write_dataclass_methods.py` writes the table again; tests/test_dataclass_methods.py
fails while it is stale.
"""

from __future__ import annotations

import sys
from typing import Any

_PACKAGE_PREFIX = "chainlang."


def method_text(name: str, args: list[str], body: list[str], local_names: list[str], returns: bool) -> str:
    """The text `dataclasses._create_fn` of Python 3.11 and 3.12 compiles for one method
    (its own lines, kept to the character: the text is the table's key)."""
    return_annotation = "->_return_type" if returns else ""
    body_text = "\n".join(f"  {b}" for b in body)
    txt = f" def {name}({','.join(args)}){return_annotation}:\n{body_text}"
    return f"def __create_fn__({', '.join(local_names)}):\n{txt}\n return {name}"


def install_when_imported() -> None:
    """`install()` now if `dataclasses` is imported, else just after it is: a finder first in
    `sys.meta_path` waits for that one import, leaves the finding to the others, and goes."""
    if "dataclasses" in sys.modules:
        install()
    else:
        sys.meta_path.insert(0, _WhenImported())


class _WhenImported:
    """Installs the table once the standard `dataclasses` module has run."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "dataclasses":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        for finder in list(sys.meta_path):  # as the import system would look, without this finder
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        run_module = getattr(loader, "exec_module", None)
        if run_module is None:
            return spec

        def exec_module(module: Any) -> None:
            run_module(module)
            install()

        loader.exec_module = exec_module  # this spec's own loader: no other import sees it
        return spec


def install() -> None:
    """Serve chainlang's dataclass methods from the precompiled table, when it was made for
    this Python and this Python's `dataclasses` compiles methods one by one."""
    import dataclasses

    original = getattr(dataclasses, "_create_fn", None)
    if original is None or getattr(original, "_chainlang_table", False):
        return  # another Python's dataclasses (3.13 compiles a class's methods at once), or done already
    missing = dataclasses.MISSING
    from types import FunctionType
    codes: dict[str, Any] | None = None  # the table, loaded with the first class of the package

    def create_fn(name: str, args: list[str], body: list[str], *, globals: dict[str, Any] | None = None,
                  locals: dict[str, Any] | None = None, return_type: Any = missing) -> Any:
        nonlocal codes
        if globals is not None and str(globals.get("__name__", "")).startswith(_PACKAGE_PREFIX):
            if codes is None:
                codes = _load_table()
            names = dict(locals) if locals is not None else {}
            if return_type is not missing:
                names["_return_type"] = return_type
            code = codes.get(method_text(name, args, body, list(names), return_type is not missing))
            if code is not None:
                return FunctionType(code, globals)(**names)
        return original(name, args, body, globals=globals, locals=locals, return_type=return_type)

    create_fn._chainlang_table = True  # type: ignore[attr-defined]
    dataclasses._create_fn = create_fn  # type: ignore[attr-defined]


def _load_table() -> dict[str, Any]:
    """The precompiled methods by text; empty when the table is missing or was written for
    another Python (the standard library then compiles every method, as without the table)."""
    try:
        from chainlang.dataclass_methods import _table as table
    except ImportError:
        return {}
    if tuple(table.PYTHON) != sys.version_info[:2]:
        return {}
    codes: dict[str, Any] = table.CODES
    return codes
