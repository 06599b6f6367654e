"""The precompiled dataclass methods (chainlang/dataclass_methods/, issue 27): the table is
current, it serves chainlang's classes, and what it serves is what `exec` makes of the same
text; other classes are left to the standard library."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import write_dataclass_methods  # noqa: E402

from chainlang.dataclass_methods import _table as table  # noqa: E402

_SAME_PYTHON = tuple(table.PYTHON) == sys.version_info[:2]
_NEEDS_SAME_PYTHON = pytest.mark.skipif(
    not _SAME_PYTHON, reason=f"the table was written for Python {table.PYTHON}; on this one it is not used")

# Every dataclass of the package, imported module by module, and the code of the methods that
# @dataclass added to it: the table on (the default) or off.
_DUMP = """
import dataclasses, importlib, json, pkgutil, sys
if sys.argv[1] == 'off':
    sys.modules['chainlang.dataclass_methods._table'] = None
import chainlang
out = {}
for info in pkgutil.walk_packages(chainlang.__path__, 'chainlang.', onerror=lambda name: None):
    if info.name.rpartition('.')[2] in ('__main__', '_table'):
        continue
    try:
        module = importlib.import_module(info.name)
    except ImportError:
        continue
    for obj in list(vars(module).values()):
        if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__:
            for name in ('__init__', '__repr__', '__eq__', '__lt__', '__hash__', '__setattr__', '__delattr__'):
                fn = obj.__dict__.get(name)
                fn = getattr(fn, '__wrapped__', fn)  # __repr__ is wrapped against recursion
                code = getattr(fn, '__code__', None)
                if code is not None and code.co_qualname.startswith('__create_fn__.'):  # written by @dataclass
                    out[f'{obj.__module__}.{obj.__qualname__}.{name}'] = [
                        code.co_code.hex(), repr(code.co_consts), list(code.co_names), list(code.co_varnames),
                        code.co_qualname, code.co_filename.endswith('dataclass_methods/_table.py'),
                        repr(fn.__annotations__) if hasattr(fn, '__annotations__') else '']
print(json.dumps(out))
"""


def _dump(mode: str) -> dict[str, list[object]]:
    proc = subprocess.run([sys.executable, "-c", _DUMP, mode], capture_output=True, text=True, cwd=ROOT, check=True)
    result: dict[str, list[object]] = json.loads(proc.stdout.splitlines()[-1])
    return result


@_NEEDS_SAME_PYTHON
def test_the_table_is_current() -> None:
    expected = write_dataclass_methods.render(write_dataclass_methods.collect())
    assert write_dataclass_methods.TARGET.read_text(encoding="utf-8") == expected, (
        "chainlang/dataclass_methods/_table.py is stale: run `python tools/write_dataclass_methods.py`")


@_NEEDS_SAME_PYTHON
def test_served_methods_are_the_code_exec_makes_of_the_same_text() -> None:
    served, compiled = _dump("on"), _dump("off")
    assert served.keys() == compiled.keys()
    assert len(served) > 300  # every class of the package, not a few
    from_table = [key for key, value in served.items() if value[5]]
    assert len(from_table) == len(served), sorted(set(served) - set(from_table))[:10]
    assert not any(value[5] for value in compiled.values())  # off means off
    for key, value in served.items():  # bytecode, constants, names, qualname, annotations: all alike
        assert value[:5] + value[6:] == compiled[key][:5] + compiled[key][6:], key


def test_a_class_of_the_package_behaves_as_a_dataclass() -> None:
    from chainlang.diagnostics import Diagnostic
    from chainlang.model.nodes import Limits

    fields = dict(rule="CL001", slug="s", severity="error", message="m", file="a.yaml", line=1, column=2,
                  end_line=1, end_column=3)
    a, b = Diagnostic(**fields), Diagnostic(**fields)  # type: ignore[arg-type]
    assert a == b and hash(a) == hash(b) and a.hint is None
    assert repr(a).startswith("Diagnostic(rule='CL001', slug='s', severity='error'")
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.line = 3  # type: ignore[misc]
    assert dataclasses.replace(a, line=4).line == 4
    assert dataclasses.is_dataclass(Limits) and Limits() == Limits()  # defaults served too
    if _SAME_PYTHON:
        assert Diagnostic.__init__.__code__.co_filename.endswith("dataclass_methods/_table.py")


def test_classes_outside_the_package_are_compiled_by_the_standard_library(monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclasses.dataclass(frozen=True)
    class Outside:
        x: int
        y: list[int] = dataclasses.field(default_factory=list)

    assert Outside(1) == Outside(1, []) and Outside(1).y == []
    assert Outside.__init__.__code__.co_filename == "<string>"
    # a class of a chainlang module whose methods are not in the table: compiled as usual
    module = types.ModuleType("chainlang.not_in_the_table")
    module.dataclasses = dataclasses  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec("@dataclasses.dataclass\nclass New:\n    never_seen_field_name: int = 5\n", module.__dict__)
    new = module.New  # type: ignore[attr-defined]
    assert new().never_seen_field_name == 5  # type: ignore[operator,attr-defined]
    assert new.__init__.__code__.co_filename == "<string>"  # type: ignore[attr-defined]


def test_the_table_waits_for_dataclasses_to_be_imported() -> None:
    probe = ("import sys, chainlang\n"
             "before = 'dataclasses' in sys.modules\n"
             "import dataclasses\n"
             "print(before, getattr(dataclasses._create_fn, '_chainlang_table', False), "
             "sum(type(f).__name__ == '_WhenImported' for f in sys.meta_path))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    installed = str(hasattr(dataclasses, "_create_fn"))  # Python 3.13 compiles a class's methods at once: no wrapper
    assert out.split() == ["False", installed, "0"]  # not imported by chainlang itself; installed; the finder gone
