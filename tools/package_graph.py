"""The import graph of chainlang's packages: who imports whom, and the cycles.

    python tools/package_graph.py                # each package's imports, the floors, the cycles
    python tools/package_graph.py --sites A B    # every import of package B by package A
    python tools/package_graph.py --max-cycle 3  # exit 1 when a cycle spans more than 3 packages

A *package* is a directory of chainlang/ (`runtime`, `store`, ...), a module at its top
(`pipeline`, `errors`, ...), or `chainlang` itself (its `__init__.py`, the public API, and
`__main__.py`).
Every import counts: at the top of a module, inside a function (the lazy imports that keep
start-up fast) and under `if TYPE_CHECKING:` (a type is a dependency too), so a lazy import
cannot hide a cycle. A cycle is a strongly connected component of the graph: packages each
of which imports, directly or not, every other.

`FLOORS` are the layers of the house, bottom first: a package imports from its own floor
and the floors below, never from above. An import that goes up is listed (and fails
tests/test_architecture.py): move what it needs down, or pass it in as data.

Standard library only; nothing of chainlang is imported.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "chainlang"

#: The floors, bottom first, each with what it holds. A new package goes on the lowest floor
#: whose packages are all it imports.
FLOORS: list[tuple[str, frozenset[str]]] = [
    ("leaves: import nothing of chainlang", frozenset({"errors", "redaction", "version", "durations", "resources",
                                                        "status", "dataclass_methods"})),
    ("the language: files, expressions, models, configuration, events, graphs, schedules, models' answers",
     frozenset({"diagnostics", "load", "expr", "schemas", "config", "model", "registry", "compile", "llm",
                "schedules"})),
    ("checking", frozenset({"checks", "pipeline"})),
    ("what is written: transcripts, the store, output views", frozenset({"journal", "store", "output"})),
    ("the task system: stored hooks, schedules, firings", frozenset({"tasks"})),
    ("the run", frozenset({"runtime"})),
    ("the standard events (tools that use the run's context)", frozenset({"stdlib"})),
    ("the engines", frozenset({"engine"})),
    ("the doors: public API, CLI, serve, language server, reports, the pytest plugin",
     frozenset({"chainlang", "api", "cli", "serve", "lsp", "report", "testing"})),
]


@dataclass(frozen=True)
class Site:
    """One import statement: where it is, what it names, and whether it runs when its
    module is imported (`lazy`: inside a function or under TYPE_CHECKING)."""

    file: str  # relative to the repository, with /
    line: int
    target: str  # the module imported
    lazy: bool

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.target}" + (" (lazy)" if self.lazy else "")


@dataclass
class Graph:
    packages: set[str] = field(default_factory=set)
    sites: dict[tuple[str, str], list[Site]] = field(default_factory=lambda: defaultdict(list))
    module_imports: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # module -> chainlang modules

    def imports(self, package: str) -> dict[str, int]:
        """The packages `package` imports, with the number of import statements of each."""
        return {dst: len(found) for (src, dst), found in sorted(self.sites.items()) if src == package}

    def edges(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {p: set() for p in self.packages}
        for src, dst in self.sites:
            out[src].add(dst)
        return out

    def upward(self) -> list[tuple[str, str, list[Site]]]:
        """The imports from a package to a package on a higher floor (or on no floor)."""
        out = []
        for (src, dst), found in sorted(self.sites.items()):
            low, high = floor_of(src), floor_of(dst)
            if low is None or high is None or high > low:
                out.append((src, dst, found))
        return out

    def cycles(self) -> list[list[str]]:
        """The strongly connected components of more than one package, largest first."""
        return sorted((sorted(c) for c in _components(self.edges()) if len(c) > 1), key=lambda c: (-len(c), c))


def package_of(module: str) -> str | None:
    """The package of a dotted module name (None: not chainlang's)."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    return parts[1] if len(parts) > 1 and parts[1] != "__main__" else PACKAGE


def floor_of(package: str) -> int | None:
    """The floor (0: the bottom) of a package; None: it is on no floor yet."""
    for number, (_, members) in enumerate(FLOORS):
        if package in members:
            return number
    return None


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(dotted: str, root: Path) -> bool:
    base = root.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """The lines of the bodies of `if TYPE_CHECKING:` blocks."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else None
            if name == "TYPE_CHECKING":
                for child in node.body:
                    lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _function_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def imported_modules(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, module) for every chainlang module the file at `path` imports."""
    module = _module_name(path, root)
    is_init = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from its package (a module's package is its parent)
                base = module.split(".") if is_init else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:  # `from chainlang import errors` imports chainlang.errors
                sub = f"{target}.{alias.name}"
                found.append((node.lineno, sub if alias.name != "*" and _is_module(sub, root) else target))
    unique = dict.fromkeys((line, name) for line, name in found if package_of(name) is not None)
    return list(unique)  # `from m import a, b` is one import of m


def build_graph(root: Path = ROOT) -> Graph:
    graph = Graph()
    for path in sorted((root / PACKAGE).rglob("*.py")):
        module = _module_name(path, root)
        source = package_of(module)
        assert source is not None
        graph.packages.add(source)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        lazy_lines = _type_checking_lines(tree) | _function_lines(tree)
        rel = path.relative_to(root).as_posix()
        for line, target in imported_modules(path, root):
            graph.module_imports[module].add(target)
            dest = package_of(target)
            if dest is not None and dest != source:
                graph.packages.add(dest)
                graph.sites[(source, dest)].append(Site(rel, line, target, line in lazy_lines))
    return graph


def _components(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, without recursion."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(component)
    return out


def report(graph: Graph) -> str:
    lines = ["imports of packages (import statements per package imported):"]
    for package in sorted(graph.packages):
        imports = graph.imports(package)
        shown = ", ".join(f"{dst} {n}" for dst, n in sorted(imports.items(), key=lambda kv: (-kv[1], kv[0])))
        lines.append(f"  {package} -> {shown or '(nothing)'}")
    lines.append("")
    lines.append("floors, bottom first:")
    for number, (what, members) in enumerate(FLOORS):
        present = sorted(members & graph.packages)
        lines.append(f"  {number} {what}: {', '.join(present) or '-'}")
    homeless = sorted(p for p in graph.packages if floor_of(p) is None)
    if homeless:
        lines.append(f"  on no floor yet: {', '.join(homeless)}")
    upward = graph.upward()
    lines.append(f"imports that go up a floor: {len(upward)}")
    for src, dst, found in upward:
        lines.append(f"  {src} -> {dst}: {'; '.join(str(s) for s in found[:4])}" + (" ..." if len(found) > 4 else ""))
    cycles = graph.cycles()
    lines.append("")
    lines.append(f"cycles: {len(cycles)}")
    for cycle in cycles:
        lines.append(f"  {len(cycle)}: {', '.join(cycle)}")
    lines.append(f"largest: {len(cycles[0]) if cycles else 1} package(s)"
                 + (f" ({', '.join(cycles[0])})" if cycles else " (no cycle)"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    parser.add_argument("--sites", nargs=2, metavar=("FROM", "TO"), help="list every import of TO by FROM")
    parser.add_argument("--json", action="store_true", help="the graph and its cycles as JSON")
    parser.add_argument("--max-cycle", type=int, metavar="N",
                        help="exit 1 when a cycle spans more than N packages")
    args = parser.parse_args(argv)
    if not (args.root / PACKAGE).is_dir():
        parser.error(f"{args.root}: no {PACKAGE}/ directory here; pass the repository with --root")
    graph = build_graph(args.root)
    if args.sites:
        src, dst = args.sites
        unknown = [p for p in (src, dst) if p not in graph.packages]
        if unknown:
            parser.error(f"unknown package {unknown[0]!r}; the packages: {', '.join(sorted(graph.packages))}")
        for site in graph.sites.get((src, dst), []):
            print(site)
        return 0
    if args.json:
        print(json.dumps({"imports": {p: graph.imports(p) for p in sorted(graph.packages)},
                          "upward": [[src, dst, [str(s) for s in found]] for src, dst, found in graph.upward()],
                          "cycles": graph.cycles()}, indent=2))
    else:
        print(report(graph))
    if args.max_cycle is not None:
        too_large = [c for c in graph.cycles() if len(c) > args.max_cycle]
        if too_large:
            print(f"a cycle spans more than {args.max_cycle} packages: {', '.join(too_large[0])}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
