"""The standard declarations are read from `stdlib/_declarations.json` when it was written
from the YAML files as they are (chainlang/registry/stdlib.py): the same events either
way, and a snapshot of other files is never used."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import chainlang.resources
from chainlang.registry import stdlib
from chainlang.resources import data_dir


def _yaml_files(directory: Path) -> list[tuple[str, bytes]]:
    return [(path.name, path.read_bytes()) for path in sorted(directory.glob("*.yaml"))]


def test_the_snapshot_is_current() -> None:
    directory = data_dir("stdlib")
    assert stdlib._snapshot_data(directory / stdlib.SNAPSHOT, _yaml_files(directory)) is not None, (
        "stdlib/_declarations.json is out of date: run "
        "python -c 'from chainlang.registry.stdlib import write_snapshot; write_snapshot()'")


def test_the_snapshot_gives_the_yaml_files_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with_snapshot = stdlib.stdlib_specs.__wrapped__()
    copy = tmp_path / "stdlib"
    shutil.copytree(data_dir("stdlib"), copy)
    (copy / stdlib.SNAPSHOT).unlink()
    monkeypatch.setattr(chainlang.resources, "data_dir", lambda name: copy)
    from_yaml = stdlib.stdlib_specs.__wrapped__()
    assert [repr(spec) for spec in with_snapshot] == [repr(spec) for spec in from_yaml]
    assert len(from_yaml) > 20


def test_a_snapshot_of_other_files_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "stdlib"
    shutil.copytree(data_dir("stdlib"), copy)
    path = copy / "tools.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("events:", "description: edited\nevents:", 1), encoding="utf-8")
    assert stdlib._snapshot_data(copy / stdlib.SNAPSHOT, _yaml_files(copy)) is None
    (copy / "zzz.yaml").write_text("namespace: zzz\nevents:\n  zzz.new: {description: added after the snapshot}\n",
                                   encoding="utf-8")
    path.write_bytes((data_dir("stdlib") / "tools.yaml").read_bytes())
    assert stdlib._snapshot_data(copy / stdlib.SNAPSHOT, _yaml_files(copy)) is None  # a file more
    monkeypatch.setattr(chainlang.resources, "data_dir", lambda name: copy)
    assert "zzz.new" in [spec.name for spec in stdlib.stdlib_specs.__wrapped__()]


def test_write_snapshot_refuses_what_json_would_change(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("namespace: x\nevents:\n  x.y: {params: {type: object, enum_key: {1: one}}}\n",
                                     encoding="utf-8")
    with pytest.raises(stdlib.RegistryError, match="JSON cannot keep"):
        stdlib.write_snapshot(tmp_path)
    assert not (tmp_path / stdlib.SNAPSHOT).exists()
