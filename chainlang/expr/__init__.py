"""The chainlang expression language: parser, AST, evaluator, templates,
filters and static types.

Importing this package is cheap: names are loaded from their submodules on
first use, Lark is only imported if the LALR tables shipped with the package
do not match ``grammar/expr.lark`` (see ``_lalr``), and RE2 only when a
``matches`` pattern is first compiled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# `evaluate` is both a submodule and a function: import the function now so
# that the package attribute is the function (a lazy lookup would find the
# submodule once anything had imported it).
from chainlang.expr.evaluate import evaluate

if TYPE_CHECKING:
    from chainlang.expr.ast import (
        Binary,
        BoolOp,
        Compare,
        Computed,
        Expr,
        Filter,
        Index,
        Key,
        ListLit,
        Literal,
        Name,
        Not,
        Ref,
        Segment,
        Subscript,
        Unary,
        dump,
        iter_refs,
        iter_template_refs,
        unparse,
    )
    from chainlang.expr.errors import (
        CATEGORIES,
        ExprError,
        ExprEvalError,
        ExprSyntaxError,
    )
    from chainlang.expr.evaluate import compile_expression, regex_error
    from chainlang.expr.filters import FILTERS
    from chainlang.expr.parser import MAX_DEPTH, MAX_EXPR_LENGTH, parse_expression
    from chainlang.expr.template import (
        Embedded,
        Template,
        compile_template,
        parse_template,
        render_template,
    )
    from chainlang.expr.types import (
        ANY,
        BOOL,
        NULL,
        NUMBER,
        STRING,
        Array,
        Object,
        Type,
        TypeIssue,
        Union,
        check_expression,
        check_template,
        path_type,
        type_from_schema,
        type_of_value,
        union,
    )
    from chainlang.expr.values import (
        MAX_SIZE,
        DataResolver,
        json_equal,
        to_json,
        to_text,
        truthy,
        walk_path,
    )

_LAZY = {
    "Binary": "chainlang.expr.ast",
    "BoolOp": "chainlang.expr.ast",
    "Compare": "chainlang.expr.ast",
    "Expr": "chainlang.expr.ast",
    "Filter": "chainlang.expr.ast",
    "Index": "chainlang.expr.ast",
    "Computed": "chainlang.expr.ast",
    "Key": "chainlang.expr.ast",
    "ListLit": "chainlang.expr.ast",
    "Literal": "chainlang.expr.ast",
    "Name": "chainlang.expr.ast",
    "Not": "chainlang.expr.ast",
    "Ref": "chainlang.expr.ast",
    "Segment": "chainlang.expr.ast",
    "Subscript": "chainlang.expr.ast",
    "Unary": "chainlang.expr.ast",
    "dump": "chainlang.expr.ast",
    "iter_refs": "chainlang.expr.ast",
    "iter_template_refs": "chainlang.expr.ast",
    "unparse": "chainlang.expr.ast",
    "CATEGORIES": "chainlang.expr.errors",
    "ExprError": "chainlang.expr.errors",
    "ExprEvalError": "chainlang.expr.errors",
    "ExprSyntaxError": "chainlang.expr.errors",
    "compile_expression": "chainlang.expr.evaluate",
    "regex_error": "chainlang.expr.evaluate",
    "FILTERS": "chainlang.expr.filters",
    "MAX_DEPTH": "chainlang.expr.parser",
    "MAX_EXPR_LENGTH": "chainlang.expr.parser",
    "parse_expression": "chainlang.expr.parser",
    "Embedded": "chainlang.expr.template",
    "Template": "chainlang.expr.template",
    "compile_template": "chainlang.expr.template",
    "parse_template": "chainlang.expr.template",
    "render_template": "chainlang.expr.template",
    "ANY": "chainlang.expr.types",
    "BOOL": "chainlang.expr.types",
    "NULL": "chainlang.expr.types",
    "NUMBER": "chainlang.expr.types",
    "STRING": "chainlang.expr.types",
    "Array": "chainlang.expr.types",
    "Object": "chainlang.expr.types",
    "Type": "chainlang.expr.types",
    "TypeIssue": "chainlang.expr.types",
    "Union": "chainlang.expr.types",
    "check_expression": "chainlang.expr.types",
    "check_template": "chainlang.expr.types",
    "path_type": "chainlang.expr.types",
    "type_from_schema": "chainlang.expr.types",
    "type_of_value": "chainlang.expr.types",
    "union": "chainlang.expr.types",
    "MAX_SIZE": "chainlang.expr.values",
    "DataResolver": "chainlang.expr.values",
    "json_equal": "chainlang.expr.values",
    "to_json": "chainlang.expr.values",
    "to_text": "chainlang.expr.values",
    "truthy": "chainlang.expr.values",
    "walk_path": "chainlang.expr.values",
}

__all__ = [
    # parsing
    "parse_expression",
    "parse_template",
    "Template",
    "Embedded",
    "MAX_EXPR_LENGTH",
    "MAX_DEPTH",
    # AST
    "Expr",
    "Literal",
    "ListLit",
    "Ref",
    "Subscript",
    "Name",
    "Index",
    "Key",
    "Computed",
    "Segment",
    "Unary",
    "Not",
    "Binary",
    "Compare",
    "BoolOp",
    "Filter",
    "iter_refs",
    "iter_template_refs",
    "dump",
    "unparse",
    # evaluation
    "evaluate",
    "compile_expression",
    "compile_template",
    "render_template",
    "walk_path",
    "DataResolver",
    "truthy",
    "json_equal",
    "to_text",
    "to_json",
    "regex_error",
    "FILTERS",
    "MAX_SIZE",
    # errors
    "ExprError",
    "ExprSyntaxError",
    "ExprEvalError",
    "CATEGORIES",
    # types
    "Type",
    "ANY",
    "NULL",
    "BOOL",
    "NUMBER",
    "STRING",
    "Array",
    "Object",
    "Union",
    "union",
    "TypeIssue",
    "type_from_schema",
    "type_of_value",
    "path_type",
    "check_expression",
    "check_template",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'chainlang.expr' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
