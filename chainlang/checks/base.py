"""What every check receives, and the helpers they share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from chainlang.diagnostics import DiagnosticSink, Rule, Severity
from chainlang.load.loader import AnyNode, ScalarNode
from chainlang.model.nodes import Chain
from chainlang.load.scalar_offsets import source_offset
from chainlang.load.source import SourceFile, Span

if TYPE_CHECKING:
    from chainlang.checks.scope import Analysis
    from chainlang.registry.registry import Registry


@dataclass
class Project:
    """What checks need to know beyond one file: every chain and hook file being checked."""

    chains: list[Chain] = field(default_factory=list)
    named: dict[str, Chain] = field(default_factory=dict)  # chain name → chain (callable as an event)
    # derived once per project by the checks that need them (call graphs, hook universes)
    memo: dict[str, Any] = field(default_factory=dict)


@dataclass
class CheckContext:
    """What every check of one chain sees: the chain, its file, where diagnostics go, the registry and the project."""
    chain: Chain
    source: SourceFile
    sink: DiagnosticSink
    registry: "Registry"  # the base registry plus this project's declared events and named chains
    project: Project
    _analysis: "Analysis | None" = None

    @property
    def analysis(self) -> "Analysis":
        """The reference/scope analysis, computed once and shared by the checks that need it."""
        if self._analysis is None:
            from chainlang.checks.scope import analyse

            self._analysis = analyse(self)
        return self._analysis

    def report(self, rule: Rule, message: str, where: AnyNode | Span, hint: str | None = None,
               severity: Severity | None = None) -> None:
        span = where if isinstance(where, Span) else where.span
        self.sink.add(rule, message, span, hint, severity)

    def expr_span(self, node: AnyNode, start: int, end: int) -> Span:
        """The file span of characters [start, end) of a scalar's value (a list: the whole list)."""
        if not isinstance(node, ScalarNode):
            return node.span
        text = self.source.text
        a = source_offset(text, node, start)
        b = source_offset(text, node, max(end, start + 1))
        line, column = self.source.position(a)
        end_line, end_column = self.source.position(b)
        if (end_line, end_column) <= (line, column):
            end_line, end_column = line, column + 1
        return Span(line, column, end_line, end_column)


class Check(Protocol):
    """A check module: its rules, and a function that reports into the context."""

    RULES: tuple[Rule, ...]

    def check(self, ctx: CheckContext) -> None: ...


def suggestion(word: str, candidates: Any) -> str | None:
    from chainlang.diagnostics.suggest import did_you_mean

    return did_you_mean(word, candidates)
