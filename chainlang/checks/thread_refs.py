"""`{thread.ID.KEY}` and `{thread[EXPR].KEY}` in the checks (LANGUAGE.md §3, §13).

The scope analysis (checks/scope.py) hands a reference whose root is `thread` here. It must
name a thread and a key (CL021 ref-unknown). The id is a name (`thread.t1.summary`), a
quoted one (`thread['meet-001'].summary`) or computed (`thread[inputs.thread_id].summary`,
`thread[run.thread].analysis`): a computed id is typed like any expression, and one that
can only be something other than text is an error (CL027 type-mismatch), as is a literal
number (`thread[1].summary`). What only the run can know (a null, an empty string, a thread
that does not exist) fails the step when it is read (runtime/threads.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chainlang.diagnostics import rules
from chainlang.expr import types as T
from chainlang.expr.ast import Computed, Index, Ref, unparse
from chainlang.model.bindings import Binding

if TYPE_CHECKING:
    from chainlang.checks.scope import Analyser, Document, ExprSite, RefInfo, Scope
    from chainlang.expr.types import TypeIssue

KEYS_HINT = "KEY is summary, status, updated_at, an event (thread.ID.memory.search) or a named value (a step id)"


def thread_ref(analyser: "Analyser", ref: Ref, site: "ExprSite", doc: "Document", scope: "Scope") -> "RefInfo":
    """The RefInfo of a reference whose root is `thread`: any value (what a thread holds is
    known only when the run reads it), or the problem with it."""
    from chainlang.checks.scope import RefInfo

    segs = ref.segments
    which = segs[1] if len(segs) > 1 else None
    if type(which) is Index:  # thread[1]: not an id
        return analyser.problem(ref, site, "thread", rules.TYPE_MISMATCH,
                                f"a thread id is text, not the number {which.value}",
                                f"quote the id: thread['{which.value}'].KEY, or compute it: thread[EXPR].KEY with "
                                "EXPR giving text", which.start, which.end)
    if len(segs) < 3:
        return analyser.problem(ref, site, "thread", rules.REF_UNKNOWN,
                                "a thread reference names a thread and a key: thread.ID.KEY", KEYS_HINT,
                                ref.start, ref.end)
    if type(which) is Computed:
        problem = _id_problem(analyser, which, site, doc, scope)
        if problem is not None:
            message, hint = problem
            return analyser.problem(ref, site, "thread", rules.TYPE_MISMATCH, message, hint, which.start, which.end)
    return RefInfo(site, ref, "thread", T.ANY, binding=Binding("thread", "", "", segs[1:]))


def _id_problem(analyser: "Analyser", which: Computed, site: "ExprSite", doc: "Document",
                scope: "Scope") -> tuple[str, str] | None:
    """Why `thread[EXPR]`'s EXPR cannot give a thread id (it can only be something other
    than text), or None. Its own references are resolved and reported where it sits."""
    kind, _ = T.check_expression(which.expr, lambda inner: analyser.resolve(inner, site, doc, scope).type)
    if kind is T.ANY:
        return None
    kinds = {T.kind(member) for member in T.members(kind)}
    if None in kinds or "string" in kinds:
        return None  # text, or maybe text: the run checks the value it gets
    text = unparse(which.expr)
    what = " or ".join(sorted(k for k in kinds if k)) or kind.describe()
    return (f"a thread id is text; {text} gives {_article(what)}",
            f"make it text: thread[{text} | string].KEY, or name the thread: thread['ID'].KEY")


def _article(text: str) -> str:
    return f"an {text}" if text[:1] in "aeiou" else f"a {text}"


def not_as_indexes(issues: list["TypeIssue"], threads: list[Ref]) -> list["TypeIssue"]:
    """`issues` without those the type checker found in thread ids taken as indexes (`an
    index must be a number or a string`): `thread_ref` reports a thread id's type itself."""
    spans = {(seg.start, seg.end) for ref in threads for seg in ref.segments[1:2] if type(seg) is Computed}
    return [issue for issue in issues if (issue.start, issue.end) not in spans]
