"""Loading @event tools (`--tools`, chainlang.toml), the config file, and build_registry."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from chainlang.config.project import find_config, find_project_config, load_config
from chainlang.registry import (
    ConfigError,
    RegistryError,
    ToolLoadError,
    build_registry,
    load_tools,
)

FIXTURES = Path(__file__).parent / "fixtures" / "tools"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _clean_modules() -> object:
    """Leave sys.modules / sys.path as they were (fixture modules are imported by name)."""
    before_modules = set(sys.modules)
    before_path = list(sys.path)
    yield
    for name in set(sys.modules) - before_modules:
        if name.startswith(("clfix", "_chainlang_tools_", "tmp_tools")):
            del sys.modules[name]
    sys.path[:] = before_path


# -- load_tools: what loads ------------------------------------------------------------


def test_load_from_a_module_name() -> None:
    specs = load_tools(["clfix_tools"], FIXTURES)
    assert [spec.name for spec in specs] == ["clfix.greet", "clfix.members"]  # `alias` is the same tool
    greet, members = specs
    assert greet.description == "Greet someone by name."
    assert greet.idempotent and greet.source == "clfix_tools"
    assert greet.params_schema["properties"]["punctuation"] == {"type": "string", "enum": ["!", "."], "default": "!"}
    assert greet.result_schema == {"type": "string"}
    assert members.is_async and members.accepts_ctx
    assert dict(members.effects) == {"reads_store": True}
    assert members.result_schema is not None and members.result_schema["type"] == "array"
    assert greet.func is not None and greet.func(name="Ada") == "Hello, Ada!"


def test_load_from_a_dotted_module_name() -> None:
    specs = load_tools(["clfix_pkg.tools"], FIXTURES)
    assert [spec.name for spec in specs] == ["clfix.pkg_echo"]
    assert specs[0].source == "clfix_pkg.tools"


def test_load_from_a_file_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    specs = load_tools(["clfix_tools.py"], FIXTURES)
    assert [spec.name for spec in specs] == ["clfix.greet", "clfix.members"]
    assert all(spec.func is not None for spec in specs)
    # the file is the source, not its internal module name
    assert specs[0].source.endswith("clfix_tools.py") and "_chainlang_tools_" not in specs[0].source


def test_load_a_file_relative_to_base_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(
        tmp_path / "lib" / "my_tools.py",
        """
        from chainlang import event

        @event("mine.hello")
        def hello(who: str = "world") -> str:
            return "hello " + who
        """,
    )
    monkeypatch.chdir(tmp_path)
    specs = load_tools(["lib/my_tools.py"], tmp_path)
    assert [spec.name for spec in specs] == ["mine.hello"]
    assert specs[0].source == str(Path("lib") / "my_tools.py")
    # loading the same file again (another spelling) gives the very same spec: no duplicate
    again = load_tools(["./lib/my_tools.py"], tmp_path)
    assert again[0] == specs[0]


def test_a_tools_file_can_import_its_siblings(tmp_path: Path) -> None:
    write(tmp_path / "tmp_tools_helpers.py", "FACTOR = 3\n")
    write(
        tmp_path / "tools.py",
        """
        from chainlang import event
        from tmp_tools_helpers import FACTOR

        @event("mine.triple")
        def triple(x: int) -> int:
            return x * FACTOR
        """,
    )
    (spec,) = load_tools(["tools.py"], tmp_path)
    assert spec.func is not None and spec.func(x=2) == 6


# -- load_tools: every error --------------------------------------------------------------


def test_module_not_found() -> None:
    with pytest.raises(ToolLoadError, match=r"tools module 'clfix_nope' not found: no module named 'clfix_nope'"):
        load_tools(["clfix_nope"], FIXTURES)
    with pytest.raises(ToolLoadError, match=r"tools module 'clfix_pkg.nope' not found"):
        load_tools(["clfix_pkg.nope"], FIXTURES)


def test_module_that_imports_a_missing_dependency() -> None:
    with pytest.raises(ToolLoadError) as info:
        load_tools(["clfix_imports_missing"], FIXTURES)
    message = str(info.value)
    assert "cannot import tools module 'clfix_imports_missing'" in message
    assert "ModuleNotFoundError: No module named 'clfix_no_such_dependency'" in message
    assert "\n" not in message and "Traceback" not in message


def test_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(ToolLoadError, match=r"tools file 'missing.py' not found \(looked in"):
        load_tools(["missing.py"], tmp_path)


def test_file_that_is_not_python(tmp_path: Path) -> None:
    write(tmp_path / "tools.txt", "x")
    with pytest.raises(ToolLoadError, match="must be a Python file ending in .py"):
        load_tools(["./tools.txt"], tmp_path)


def test_directory_instead_of_a_file(tmp_path: Path) -> None:
    (tmp_path / "pkg.py").mkdir()
    with pytest.raises(ToolLoadError, match="is a directory"):
        load_tools(["pkg.py"], tmp_path)


def test_exception_while_importing_a_file(tmp_path: Path) -> None:
    write(
        tmp_path / "boom.py",
        """
        from chainlang import event

        RATE = 1 / 0
        """,
    )
    with pytest.raises(ToolLoadError) as info:
        load_tools(["boom.py"], tmp_path)
    message = str(info.value)
    assert message.startswith("cannot import tools file 'boom.py': ZeroDivisionError: division by zero")
    assert "boom.py:4" in message
    assert "\n" not in message and "Traceback" not in message
    assert not any(name.endswith("_boom") for name in sys.modules if name.startswith("_chainlang_tools_"))


def test_syntax_error_in_a_file(tmp_path: Path) -> None:
    write(tmp_path / "bad.py", "def broken(:\n    pass\n")
    with pytest.raises(ToolLoadError, match=r"cannot import tools file 'bad.py': SyntaxError: .*line 1"):
        load_tools(["bad.py"], tmp_path)


def test_bad_event_name_in_a_file(tmp_path: Path) -> None:
    write(
        tmp_path / "badname.py",
        """
        from chainlang import event

        @event("Search")
        def search() -> None:
            pass
        """,
    )
    with pytest.raises(ToolLoadError) as info:
        load_tools(["badname.py"], tmp_path)
    message = str(info.value)
    assert "ValueError: @event: 'Search' is not a valid event name" in message
    assert "badname.py:4" in message  # the line of the decorator, not chainlang internals


def test_sys_exit_while_importing(tmp_path: Path) -> None:
    write(tmp_path / "exits.py", "import sys\nsys.exit(3)\n")
    with pytest.raises(ToolLoadError, match=r"SystemExit: the module called sys.exit\(3\)"):
        load_tools(["exits.py"], tmp_path)


def test_module_without_tools() -> None:
    with pytest.raises(ToolLoadError, match="tools module 'clfix_empty' defines no @event tools"):
        load_tools(["clfix_empty"], FIXTURES)


def test_file_without_tools(tmp_path: Path) -> None:
    write(tmp_path / "plain.py", "X = 1\n")
    with pytest.raises(ToolLoadError, match="tools file 'plain.py' defines no @event tools"):
        load_tools(["plain.py"], tmp_path)


def test_same_event_twice_in_one_module(tmp_path: Path) -> None:
    write(
        tmp_path / "twice.py",
        """
        from chainlang import event

        @event("dup.tool")
        def first() -> None:
            pass

        @event("dup.tool")
        def second() -> None:
            pass
        """,
    )
    with pytest.raises(ToolLoadError, match="declares event 'dup.tool' twice: first and second"):
        load_tools(["twice.py"], tmp_path)


@pytest.mark.parametrize("ref", ["not a module", "", "my-tools"])
def test_reference_that_is_neither(ref: str) -> None:
    with pytest.raises(ToolLoadError):
        load_tools([ref], FIXTURES)


def test_origin_is_named_in_the_message() -> None:
    with pytest.raises(ToolLoadError, match=r"\(given with --tools\)"):
        load_tools(["clfix_nope"], FIXTURES, origin="given with --tools")


# -- chainlang.toml -------------------------------------------------------------------------


def test_find_config_walks_up(tmp_path: Path) -> None:
    toml = write(tmp_path / "chainlang.toml", "tools = []\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_config(deep) == toml.resolve()
    assert find_config(tmp_path) == toml.resolve()


def test_find_config_none(tmp_path: Path) -> None:
    # tmp dirs normally have no chainlang.toml above them
    if any((parent / "chainlang.toml").exists() for parent in (tmp_path, *tmp_path.parents)):
        pytest.skip("a chainlang.toml exists above the temporary directory")
    assert find_config(tmp_path) is None
    assert find_project_config(tmp_path) is None


def test_load_config(tmp_path: Path) -> None:
    write(
        tmp_path / "chainlang.toml",
        """
        tools = ["mypkg.tools", "tools/local.py"]
        chains = ["chains"]

        [decide]
        base_url = "http://localhost:11434/v1"
        model = "phi3"
        api_key_env = "OPENAI_API_KEY"
        """,
    )
    config = load_config(tmp_path / "chainlang.toml")
    assert config.tools == ("mypkg.tools", "tools/local.py")
    assert config.chain_dirs() == [tmp_path / "chains"]
    assert config.root == tmp_path
    assert config.decide is not None and config.decide.model == "phi3"
    assert config.decide.api_key_env == "OPENAI_API_KEY"


def test_empty_config(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "chainlang.toml", ""))
    assert config.tools == () and config.chains == () and config.decide is None


def test_typo_key_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "chainlang.toml", 'tolls = ["x"]\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "chainlang.toml" in message
    assert "unknown key 'tolls'" in message and "Extra inputs are not permitted" in message
    assert "did you mean 'tools'?" in message


def test_typo_in_the_decide_table(tmp_path: Path) -> None:
    path = write(tmp_path / "chainlang.toml", '[decide]\nmodle = "x"\n')
    with pytest.raises(ConfigError, match=r"unknown key 'decide.modle'.*did you mean 'model'"):
        load_config(path)


def test_wrong_type_in_config(tmp_path: Path) -> None:
    path = write(tmp_path / "chainlang.toml", 'tools = "mypkg.tools"\n')
    with pytest.raises(ConfigError, match=r"chainlang.toml: tools: Input should be a valid list"):
        load_config(path)


def test_invalid_toml(tmp_path: Path) -> None:
    path = write(tmp_path / "chainlang.toml", "tools = [\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(path)


# -- build_registry ----------------------------------------------------------------------------


def test_build_registry_stdlib_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    registry = build_registry(start_dir=tmp_path)
    assert "tools.now" in registry and "agent.decide" in registry


def test_build_registry_with_config_and_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    write(
        project / "tools" / "proj.py",
        """
        from chainlang import event

        @event("proj.build")
        def build(target: str) -> None:
            pass
        """,
    )
    write(project / "chainlang.toml", 'tools = ["tools/proj.py"]\n')
    (project / "chains").mkdir()
    monkeypatch.chdir(FIXTURES)  # --tools refs are relative to the working directory
    registry = build_registry(["clfix_tools.py", "clfix_pkg.tools"], start_dir=project / "chains")
    assert {"proj.build", "clfix.greet", "clfix.members", "clfix.pkg_echo", "tools.now"} <= set(registry.names())


def test_build_registry_config_errors_name_the_config(tmp_path: Path) -> None:
    write(tmp_path / "chainlang.toml", 'tools = ["nowhere.py"]\n')
    with pytest.raises(ToolLoadError, match=r"tools file 'nowhere.py' \(listed in .*chainlang.toml\) not found"):
        build_registry(start_dir=tmp_path)


def test_build_registry_same_tools_twice_is_fine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "chainlang.toml", 'tools = ["clfix_tools.py"]\n')
    write(tmp_path / "clfix_tools.py", (FIXTURES / "clfix_tools.py").read_text(encoding="utf-8"))
    monkeypatch.chdir(tmp_path)
    registry = build_registry(["clfix_tools.py", "./clfix_tools.py"], start_dir=tmp_path)
    assert "clfix.greet" in registry


def test_build_registry_tool_clashing_with_stdlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(
        tmp_path / "clash.py",
        """
        from chainlang import event

        @event("tools.now")
        def now() -> str:
            return ""
        """,
    )
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RegistryError) as info:
        build_registry(["clash.py"], start_dir=tmp_path)
    assert "stdlib/tools.yaml" in str(info.value) and "clash.py" in str(info.value)
