"""Load `@event` tools from Python modules and `.py` files (`--tools`, `chainlang.toml`)."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

from chainlang.registry.hooks import HookDef
from chainlang.registry.decorator import spec_of
from chainlang.registry.errors import ToolLoadError
from chainlang.registry.spec import EventSpec

__all__ = ["is_file_ref", "load_tools", "module_items"]

_MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
FILE_MODULE_PREFIX = "_chainlang_tools_"  # the modules of tools files (.py paths): the language server re-imports edited ones


def is_file_ref(ref: str) -> bool:
    """A tools reference naming a file (`tools.py`, `lib/tools.py`) rather than a module."""
    return ref.endswith(".py") or "/" in ref or "\\" in ref or ref.startswith(".")


def load_tools(refs: Sequence[str], base_dir: Path, *, origin: str | None = None) -> list[EventSpec | HookDef]:
    """The @event tools and the hooks (`chainlang.hook(...)` at module level) of each
    module name or `.py` file in `refs`.

    Files are relative to `base_dir`; module names are imported from
    sys.path plus `base_dir`. `origin` (e.g. "listed in chainlang.toml")
    is added to error messages. Raises ToolLoadError (one line) when a
    reference cannot be loaded or defines neither tools nor hooks.
    """
    specs: list[EventSpec | HookDef] = []
    for ref in refs:
        specs.extend(_load_one(ref, Path(base_dir), origin))
    return specs


def _load_one(ref: str, base_dir: Path, origin: str | None) -> list[EventSpec | HookDef]:
    suffix = f" ({origin})" if origin else ""
    if not isinstance(ref, str) or not ref.strip():
        raise ToolLoadError(f"empty tools reference{suffix}: give a module name (mypkg.tools) or a .py file")
    ref = ref.strip()
    if is_file_ref(ref):
        module, label, source = _import_file(ref, base_dir, suffix)
    elif _MODULE_RE.fullmatch(ref):
        module, label, source = _import_module(ref, base_dir, suffix)
    else:
        raise ToolLoadError(
            f"tools reference {ref!r}{suffix} is neither a Python module name (mypkg.tools) nor a .py file"
        )
    return _collect(module, label, source, suffix)


def module_items(module: ModuleType, origin: str | None = None) -> list[EventSpec | HookDef]:
    """The @event tools and hooks of a module the caller already imported (the API's
    `tools=[my_module]`): not imported again, so they share the caller's module state."""
    suffix = f" ({origin})" if origin else ""
    return _collect(module, f"tools module '{module.__name__}'", module.__name__, suffix)


def _import_file(ref: str, base_dir: Path, suffix: str) -> tuple[ModuleType, str, str]:
    path = Path(ref).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    label = f"tools file '{ref}'"
    if path.suffix != ".py":
        raise ToolLoadError(f"{label}{suffix}: a tools file must be a Python file ending in .py")
    if not path.is_file():
        where = "" if Path(ref).is_absolute() else f" (looked in {_display(base_dir)})"
        if path.is_dir():
            raise ToolLoadError(f"{label}{suffix} is a directory: name a .py file, or give a module name")
        raise ToolLoadError(f"{label}{suffix} not found{where}")
    path = path.resolve()
    digest = _sha1()(str(path).encode("utf-8")).hexdigest()[:12]
    stem = re.sub(r"\W", "_", path.stem)
    module_name = f"{FILE_MODULE_PREFIX}{digest}_{stem}"
    cached = sys.modules.get(module_name)
    source = _display(path)  # one name per file, however it was referred to
    if cached is not None and getattr(cached, "__file__", None) == str(path):
        return cached, label, source
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ToolLoadError(f"{label}{suffix}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses, pydantic and pickling look modules up by name
    try:
        with _on_sys_path(path.parent):
            spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(module_name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise ToolLoadError(f"cannot import {label}{suffix}: {_describe(exc, [path.parent, base_dir])}") from None
    return module, label, source


def _sha1() -> Any:
    """SHA-1 from CPython's built-in `_sha1` when there is one: the same digest as hashlib's,
    without hashlib loading OpenSSL (~4 ms of a cold `chainlang check --tools FILE.py`)."""
    try:
        return importlib.import_module("_sha1").sha1
    except (ImportError, AttributeError):
        import hashlib

        return hashlib.sha1


def _import_module(ref: str, base_dir: Path, suffix: str) -> tuple[ModuleType, str, str]:
    label = f"tools module '{ref}'"
    try:
        with _on_sys_path(base_dir):
            module = importlib.import_module(ref)
    except ModuleNotFoundError as exc:
        if exc.name and (ref == exc.name or ref.startswith(exc.name + ".")):
            raise ToolLoadError(
                f"{label}{suffix} not found: no module named '{exc.name}' "
                "(install it, or run from the directory that contains it; to load a file, give a path ending in .py)"
            ) from None
        raise ToolLoadError(f"cannot import {label}{suffix}: {_describe(exc, [base_dir])}") from None
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise ToolLoadError(f"cannot import {label}{suffix}: {_describe(exc, [base_dir])}") from None
    return module, label, ref


def _collect(module: ModuleType, label: str, source: str, suffix: str) -> list[EventSpec | HookDef]:
    found: dict[str, tuple[str, EventSpec]] = {}
    hooks: list[HookDef] = []
    for attribute, value in list(vars(module).items()):
        if isinstance(value, ModuleType):
            continue
        if isinstance(value, HookDef) or (isinstance(value, (list, tuple)) and value
                                          and all(isinstance(v, HookDef) for v in value)):
            for item in (value if isinstance(value, (list, tuple)) else [value]):
                if not any(h is item for h in hooks):
                    hooks.append(item.with_source(source))
            continue
        spec = spec_of(value)
        if spec is None:
            continue
        if spec.source == module.__name__ and module.__name__.startswith(FILE_MODULE_PREFIX):
            spec = dataclasses.replace(spec, source=source)  # name the file, not its internal module name
        previous = found.get(spec.name)
        if previous is not None:
            if previous[1].func is spec.func:
                continue  # the same function under two names
            raise ToolLoadError(
                f"{label}{suffix} declares event '{spec.name}' twice: {previous[0]} and {attribute}"
            )
        found[spec.name] = (attribute, spec)
    if not found and not hooks:
        raise ToolLoadError(
            f"{label}{suffix} defines no @event tools and no hooks: decorate functions with "
            "@chainlang.event('namespace.action'), or register hooks with chainlang.hook(...)"
        )
    return [spec for _, spec in found.values()] + hooks


@contextlib.contextmanager
def _on_sys_path(directory: Path) -> Iterator[None]:
    entry = str(directory)
    added = entry not in sys.path
    if added:
        sys.path.insert(0, entry)
    importlib.invalidate_caches()  # files created since the last import are found
    try:
        yield
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(entry)


def _describe(exc: BaseException, roots: Sequence[Path]) -> str:
    """`Type: message (at file:line)`, on one line, no traceback."""
    if isinstance(exc, SystemExit):
        text = f"SystemExit: the module called sys.exit({exc.code!r}) while being imported"
    else:
        message = " ".join(str(exc).split())
        text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    where = None if isinstance(exc, SyntaxError) else _last_user_frame(exc.__traceback__, roots)
    return f"{text} (at {where})" if where else text


def _last_user_frame(tb: TracebackType | None, roots: Sequence[Path]) -> str | None:
    """The deepest traceback frame in the user's code (under one of `roots`),
    else the deepest frame outside the import machinery."""
    resolved = [root.resolve() for root in roots]
    deepest = in_roots = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not filename.startswith("<") and "importlib" not in filename:
            path = Path(filename)
            deepest = (path, tb.tb_lineno)
            if any(_is_under(path, root) for root in resolved):
                in_roots = (path, tb.tb_lineno)
        tb = tb.tb_next
    chosen = in_roots or deepest
    if chosen is None:
        return None
    return f"{_display(chosen[0], roots[-1] if roots else None)}:{chosen[1]}"


def _display(path: Path, base_dir: Path | None = None) -> str:
    """`path` relative to base_dir or the working directory when under them."""
    for root in (base_dir, Path.cwd()):
        if root is not None and _is_under(path, root):
            relative = os.path.relpath(path.resolve(), root.resolve())
            return "the current directory" if relative == "." else relative
    return str(path)


def _is_under(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return False
    return True
