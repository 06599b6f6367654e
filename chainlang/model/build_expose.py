"""`expose: [NAME, ...]` on an event step (LANGUAGE.md §16): the declared secrets that the
step may send to a model or to `user.notify`. Only the form is read here; whether each
NAME is a declared secret, and whether a secret needs it, is chainlang.checks.secrets_flow's."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from chainlang.load.loader import AnyNode, ScalarNode, SeqNode

if TYPE_CHECKING:
    from chainlang.model.build import ModelBuilder
    from chainlang.model.nodes import EventStep

SECRET_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")  # as [secrets] names are written (config.secrets)


def read_expose(builder: "ModelBuilder", step: "EventStep", node: AnyNode | None) -> None:
    """A list of secret names (one name alone is read as a list of one)."""
    from chainlang.diagnostics import rules

    if node is None or node.invalid:
        return
    step.expose_node = node
    items: list[AnyNode] = list(node.items) if isinstance(node, SeqNode) else [node]
    if isinstance(node, SeqNode) and not items:
        builder.error(rules.WRONG_TYPE, "an empty expose lets nothing out", node,
                      "name the secrets this step may send, e.g. expose: [crm_token], or remove it")
        return
    for item in items:
        if not isinstance(item, ScalarNode) or not isinstance(item.value, str):
            builder.wrong_type(item, "an expose entry", "the name of a declared secret", "e.g. expose: [crm_token]")
            continue
        name = item.value.strip()
        if name.startswith("secrets."):  # the reference written where its name is meant
            name = name[len("secrets."):]
        if not SECRET_NAME.match(name):
            builder.error(rules.WRONG_TYPE, f"'{item.value}' is not a secret's name", item,
                          "write the name as [secrets] declares it, e.g. expose: [crm_token]")
            continue
        step.expose.append((name, item))
