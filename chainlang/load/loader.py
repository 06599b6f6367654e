"""YAML 1.2 → a tree of nodes that keep their 1-based positions.

The loader reads the YAML *event* stream (libyaml's C parser when available,
ruamel.yaml's pure-Python parser otherwise) and builds the tree itself. That is
~40× faster than ruamel's round-trip loader, and it lets the loader enforce what
untrusted chains need: core-schema tags only, no duplicate keys, bounded size,
depth and alias expansion. Problems become diagnostics; nothing here raises.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from typing import Any, Iterator, Union

from ruamel.yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)

from chainlang.diagnostics import rules
from chainlang.diagnostics import DiagnosticSink
from chainlang.load.source import YAML11_ONLY_BREAKS, SourceFile, Span

MAX_FILE_CHARS = 4 * 1024 * 1024  # a chain is text written by people or models: 4 MiB is plenty
MAX_DEPTH = 64  # nesting of collections
MAX_NODES = 500_000  # nodes after alias expansion ("billion laughs" stops here)

CORE_TAG = "tag:yaml.org,2002:"
_ALLOWED_TAGS = {CORE_TAG + t for t in ("str", "int", "float", "bool", "null", "seq", "map")} | {"!"}

_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_INT10 = re.compile(r"^[-+]?[0-9]+$")
_INT8 = re.compile(r"^0o[0-7]+$")
_INT16 = re.compile(r"^0x[0-9a-fA-F]+$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_INF = re.compile(r"^[-+]?\.(?:inf|Inf|INF)$")
_NAN = re.compile(r"^\.(?:nan|NaN|NAN)$")
_SURROGATE = re.compile("[\ud800-\udfff]")


class Node:
    """Base of the node tree. Offsets are 0-based; line/column are 1-based."""

    __slots__ = ("start", "end", "line", "column", "end_line", "end_column", "tag", "invalid")

    def __init__(self, mark_start: Any, mark_end: Any, tag: str | None = None) -> None:
        self.start: int = mark_start.index
        self.end: int = mark_end.index
        self.line: int = mark_start.line + 1
        self.column: int = mark_start.column + 1
        self.end_line: int = mark_end.line + 1
        self.end_column: int = mark_end.column + 1
        self.tag = tag
        self.invalid = False  # the loader already reported this node (its value is unusable)

    @property
    def span(self) -> Span:
        if self.end_line == self.line and self.end_column <= self.column:
            return Span(self.line, self.column, self.line, self.column + 1)
        return Span(self.line, self.column, self.end_line, self.end_column)

    @property
    def kind(self) -> str:
        raise NotImplementedError


class ScalarNode(Node):
    __slots__ = ("value", "text", "style", "offsets")

    def __init__(self, mark_start: Any, mark_end: Any, value: Any, text: str, style: str, tag: str | None) -> None:
        super().__init__(mark_start, mark_end, tag)
        self.value = value  # the resolved value: str, int, float, bool or None
        self.text = text  # the scalar's text after YAML unescaping
        self.style = style  # "" plain, "'" single, '"' double, "|" literal, ">" folded
        self.offsets: list[int] | None = None  # value index → file offset, built on first need

    @property
    def kind(self) -> str:
        if self.value is None:
            return "null"
        if isinstance(self.value, bool):
            return "boolean"
        if isinstance(self.value, (int, float)):
            return "number"
        return "string"

    def __repr__(self) -> str:
        return f"ScalarNode({self.value!r} @{self.line}:{self.column})"


class SeqNode(Node):
    __slots__ = ("items", "flow")

    def __init__(self, mark_start: Any, mark_end: Any, flow: bool, tag: str | None) -> None:
        super().__init__(mark_start, mark_end, tag)
        self.items: list[AnyNode] = []
        self.flow = flow

    @property
    def kind(self) -> str:
        return "list"

    def __repr__(self) -> str:
        return f"SeqNode({len(self.items)} items @{self.line}:{self.column})"


class MapNode(Node):
    __slots__ = ("pairs", "index", "flow", "merged")

    def __init__(self, mark_start: Any, mark_end: Any, flow: bool, tag: str | None) -> None:
        super().__init__(mark_start, mark_end, tag)
        self.pairs: list[tuple[ScalarNode, AnyNode]] = []  # keys are always scalars
        self.index: dict[str, int] = {}  # key text → position in pairs (first occurrence)
        self.flow = flow
        self.merged: set[str] | None = None  # keys that came from a `<<` merge (explicit keys override them)

    @property
    def kind(self) -> str:
        return "mapping"

    def get(self, key: str) -> "AnyNode | None":
        i = self.index.get(key)
        return None if i is None else self.pairs[i][1]

    def key_node(self, key: str) -> ScalarNode | None:
        i = self.index.get(key)
        return None if i is None else self.pairs[i][0]

    def keys(self) -> list[str]:
        return [k.text for k, _ in self.pairs]

    def __repr__(self) -> str:
        return f"MapNode({self.keys()} @{self.line}:{self.column})"


AnyNode = Union[ScalarNode, SeqNode, MapNode]


@dataclass
class LoadResult:
    """A file loaded: its source and its YAML tree (None when it is not one YAML document)."""
    source: SourceFile
    root: AnyNode | None  # None when the file could not be read as one YAML document


MAX_NUMBER_CHARS = 400  # longer number literals are not JSON numbers anyone can use


def resolve_plain(text: str) -> tuple[Any, bool]:
    """YAML 1.2 core schema resolution of a plain scalar: (value, is_usable_json_number)."""
    if _NULL.match(text):
        return None, True
    first = text[0]
    if first in "tTfF" and text in _BOOL:
        return _BOOL[text], True
    if first in "+-0123456789.":
        if len(text) > MAX_NUMBER_CHARS and (_INT10.match(text) or _FLOAT.match(text) or _INT8.match(text) or _INT16.match(text)):
            return math.inf, False
        if _INT10.match(text):
            return int(text), True
        if _FLOAT.match(text):
            value = float(text)
            return value, math.isfinite(value)
        if _INF.match(text):
            return (math.inf if text[0] != "-" else -math.inf), False
        if _NAN.match(text):
            return math.nan, False
        if _INT8.match(text):
            return int(text[2:], 8), True
        if _INT16.match(text):
            return int(text[2:], 16), True
    return text, True


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def kind_of(tag: str) -> str:
    return tag[len(CORE_TAG):] if tag.startswith(CORE_TAG) else tag


def _fast_events(text: str) -> Iterator[Any] | None:
    """Events from libyaml's C parser, or None when the C extension is not installed."""
    try:
        from _ruamel_yaml import CParser
    except ImportError:
        return None

    def events() -> Iterator[Any]:
        parser = CParser(io.StringIO(text))
        while True:
            event = parser.get_event()
            yield event
            if type(event) is StreamEndEvent:
                return

    return events()


def _yaml12_events(text: str) -> Iterator[Any]:
    """Events from ruamel.yaml's pure-Python YAML 1.2 parser (slower; the final word)."""
    import ruamel.yaml

    return iter(ruamel.yaml.YAML(typ="safe", pure=True).parse(io.StringIO(text)))


class _Builder:
    """Builds nodes from events with an explicit stack (no recursion)."""

    def __init__(self, source: SourceFile, sink: DiagnosticSink) -> None:
        self.source = source
        self.sink = sink
        self.anchors: dict[str, AnyNode] = {}
        self.weights: dict[int, int] = {}  # id(node) → expanded size, for anchored nodes
        self.heights: dict[int, int] = {}  # id(node) → nesting below it, for anchored nodes
        self.expanded = 0

    def point(self, mark: Any) -> Span:
        return Span.point(mark.line + 1, mark.column + 1)

    def check_tag(self, tag: str | None, mark: Any) -> bool:
        if tag is None or tag in _ALLOWED_TAGS:
            return True
        shown = "!!" + tag[len(CORE_TAG):] if tag.startswith(CORE_TAG) else tag
        self.sink.add(
            rules.FORBIDDEN_TAG,
            f"YAML tag '{shown}' is not allowed: chains use plain YAML 1.2 values only",
            self.point(mark),
            hint="remove the tag; tags that construct objects are never accepted",
        )
        return False

    def scalar(self, event: Any) -> ScalarNode:
        text: str = event.value
        style: str = event.style or ""
        if style == '"' and _SURROGATE.search(text):
            text = self.combine_surrogates(text, event.start_mark)
        tag: str | None = event.tag
        if tag == "!":
            tag = None
            style = style or "'"  # non-specific tag: a string
        value: Any = text
        invalid = False
        if not self.check_tag(tag, event.start_mark):
            value, invalid = None, True
        elif tag is None:
            if not style:
                value, finite = resolve_plain(text)
                if not finite:
                    self.sink.add(
                        rules.WRONG_TYPE,
                        f"'{_short(text)}' is not a usable JSON number (too large, infinite or NaN)",
                        self.point(event.start_mark),
                        hint=f"quote it if you mean the text: \"{_short(text)}\"",
                    )
                    value, invalid = None, True
        elif tag != CORE_TAG + "str":
            value = self.tagged_scalar(tag, text, event.start_mark)
            invalid = value is None and kind_of(tag) != "null"
        node = ScalarNode(event.start_mark, event.end_mark, value, text, style, tag)
        node.invalid = invalid
        return node

    def combine_surrogates(self, text: str, mark: Any) -> str:
        """JSON writes characters beyond U+FFFF as surrogate-pair escapes: join each pair."""
        try:
            return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
        except UnicodeDecodeError:
            self.sink.add(rules.YAML_SYNTAX, "a \\u escape names half of a UTF-16 surrogate pair, which is not a character",
                          self.point(mark), hint="write the character itself, or a \\U00XXXXXX escape")
            return _SURROGATE.sub("\ufffd", text)

    def tagged_scalar(self, tag: str, text: str, mark: Any) -> Any:
        kind = tag[len(CORE_TAG):]
        value, _ = resolve_plain(text) if text else (None, True)
        expected = {
            "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "bool": lambda v: isinstance(v, bool),
            "null": lambda v: v is None,
        }.get(kind)
        if expected is None or not expected(value):
            self.sink.add(rules.WRONG_TYPE, f"'{text}' is not a valid !!{kind}", self.point(mark))
            return None
        return float(value) if kind == "float" and value is not None else value

    def add_weight(self, weight: int, mark: Any) -> bool:
        self.expanded += weight
        if self.expanded > MAX_NODES:
            self.sink.add(
                rules.YAML_LIMIT,
                f"the document expands to more than {MAX_NODES:,} nodes (through aliases or sheer size)",
                self.point(mark),
                hint="aliases that repeat large nodes many times are rejected; write the data out or shrink it",
            )
            return False
        return True

    def too_deep(self, mark: Any, via: str = "") -> None:
        self.sink.add(rules.YAML_LIMIT, f"the document nests deeper than {MAX_DEPTH} levels{via}", self.point(mark),
                      hint="flatten the structure; chains never need this depth")

    def build(self, events: Iterator[Any]) -> AnyNode | None:
        # stack entries: [node, pending_key (for maps), start_expanded, anchor]
        stack: list[list[Any]] = []
        root: AnyNode | None = None
        documents = 0
        for event in events:
            cls = type(event)
            if cls is ScalarEvent:
                node: AnyNode = self.scalar(event)
                if not self.add_weight(1, event.start_mark):
                    return None
                if event.anchor:
                    self.anchors[event.anchor] = node
                    self.weights[id(node)] = 1
            elif cls is AliasEvent:
                target = self.anchors.get(event.anchor)
                if target is None:
                    recursive = any(entry[3] == event.anchor for entry in stack)
                    self.sink.add(
                        rules.YAML_SYNTAX,
                        f"alias '*{event.anchor}' refers to its own enclosing node (recursive aliases are not allowed)"
                        if recursive
                        else f"alias '*{event.anchor}' has no anchor '&{event.anchor}' before it",
                        self.point(event.start_mark),
                    )
                    return None
                node = target
                if not self.add_weight(self.weights.get(id(target), 1), event.start_mark):
                    return None
                target_height = self.heights.get(id(target), 0)
                if stack:
                    stack[-1][4] = max(stack[-1][4], target_height)
                if len(stack) + target_height > MAX_DEPTH:
                    self.too_deep(event.start_mark, f" (through alias '*{event.anchor}')")
                    return None
            elif cls is SequenceStartEvent or cls is MappingStartEvent:
                if len(stack) >= MAX_DEPTH:
                    self.too_deep(event.start_mark)
                    return None
                tag = event.tag
                seq = cls is SequenceStartEvent
                if tag == "!" or tag == CORE_TAG + ("seq" if seq else "map"):
                    tag = None
                flow = bool(event.flow_style)
                coll: AnyNode = (
                    SeqNode(event.start_mark, event.end_mark, flow, tag)
                    if seq
                    else MapNode(event.start_mark, event.end_mark, flow, tag)
                )
                if tag is not None and not self.check_tag(tag, event.start_mark):
                    coll.invalid = True
                if not self.add_weight(1, event.start_mark):
                    return None
                # an anchor becomes usable only when its collection ends: no recursive aliases
                stack.append([coll, None, self.expanded, event.anchor, 0])
                continue
            elif cls is SequenceEndEvent or cls is MappingEndEvent:
                entry = stack.pop()
                node = entry[0]
                height = entry[4] + 1  # collections below this one, aliases included
                if stack:
                    stack[-1][4] = max(stack[-1][4], height)
                node.end = event.end_mark.index
                node.end_line = event.end_mark.line + 1
                node.end_column = event.end_mark.column + 1
                if entry[3]:
                    self.anchors[entry[3]] = node
                    self.weights[id(node)] = self.expanded - entry[2] + 1
                    self.heights[id(node)] = height
            elif cls is DocumentStartEvent:
                documents += 1
                if documents > 1:
                    self.sink.add(
                        rules.YAML_SYNTAX,
                        "a chain file holds one YAML document; found a second one",
                        self.point(event.start_mark),
                        hint="split the documents into separate files",
                    )
                    return None
                continue
            else:  # stream start/end, document end
                continue

            if not stack:
                root = node
                continue
            parent = stack[-1]
            container = parent[0]
            if isinstance(container, SeqNode):
                container.items.append(node)
            elif parent[1] is None:
                if not isinstance(node, ScalarNode):
                    self.sink.add(
                        rules.WRONG_TYPE,
                        f"a mapping key must be a plain value, not a {node.kind}",
                        Span.point(node.line, node.column),
                        hint="if this is a template, quote it: \"{...}\"",
                    )
                    parent[1] = _DROP  # reported: the pair is left out of the mapping
                else:
                    parent[1] = node
            else:
                if parent[1] is not _DROP:
                    self.add_pair(container, parent[1], node)
                parent[1] = None
        return root

    def add_pair(self, mapping: MapNode, key: ScalarNode, value: AnyNode) -> None:
        name = key.text
        if name == "<<" and not key.style and not isinstance(value, (MapNode, SeqNode)):
            self.sink.add(rules.WRONG_TYPE, "'<<' merges mappings only", Span(key.line, key.column, key.end_line, key.end_column),
                          hint="merge an anchored mapping: <<: *name")
            return
        if name == "<<" and not key.style and isinstance(value, (MapNode, SeqNode)):
            # YAML merge key: copy pairs not already present (explicit keys win)
            merged = value.items if isinstance(value, SeqNode) else [value]
            if mapping.merged is None:
                mapping.merged = set()
            for source in merged:
                if isinstance(source, MapNode):
                    for k, v in source.pairs:
                        if k.text not in mapping.index:
                            mapping.index[k.text] = len(mapping.pairs)
                            mapping.pairs.append((k, v))
                            mapping.merged.add(k.text)
                else:
                    self.sink.add(rules.WRONG_TYPE, "'<<' merges mappings only", Span.point(source.line, source.column))
            return
        if mapping.merged and name in mapping.merged:  # an explicit key overrides a merged one
            mapping.merged.discard(name)
            mapping.pairs[mapping.index[name]] = (key, value)
            return
        if name in mapping.index:
            first = mapping.pairs[mapping.index[name]][0]
            self.sink.add(
                rules.DUPLICATE_KEY,
                f"duplicate key '{name}' (first defined at line {first.line}, column {first.column})",
                Span(key.line, key.column, key.end_line, key.end_column),
                hint="remove one of them: YAML would silently keep only the last",
            )
            return
        mapping.index[name] = len(mapping.pairs)
        mapping.pairs.append((key, value))


_DROP = object()  # stands for a rejected mapping key: its value is dropped


def decode(data: bytes) -> tuple[str | None, str | None, int]:
    """Decode file bytes as UTF-8 (BOM allowed) or UTF-16/32 with a BOM: (text, error, bad offset)."""
    for bom, codec in ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"),
                       (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")):
        if data.startswith(bom):
            try:
                return data[len(bom):].decode(codec), None, 0
            except UnicodeDecodeError as exc:
                return None, f"the file is not valid {codec.upper()}: {exc.reason}", 0
    if _looks_like_utf16(data):
        return None, "the file is not valid UTF-8: it looks like UTF-16 without a byte-order mark", 0
    try:
        return data.decode("utf-8"), None, 0
    except UnicodeDecodeError as exc:
        good = data[: exc.start].decode("utf-8", errors="replace")
        return None, f"the file is not valid UTF-8 (byte 0x{data[exc.start]:02x})", len(good)


def _looks_like_utf16(data: bytes) -> bool:
    """ASCII text in UTF-16 has a NUL in every other byte."""
    sample = data[:512]
    if len(sample) < 4 or b"\x00" not in sample:
        return False
    even, odd = sample[0::2], sample[1::2]
    return even.count(0) >= 0.8 * len(even) or odd.count(0) >= 0.8 * len(odd)


def load_bytes(path: str, data: bytes, sink: DiagnosticSink) -> LoadResult:
    if len(data) > MAX_FILE_CHARS:
        sink.add(
            rules.YAML_LIMIT,
            f"the file is larger than {MAX_FILE_CHARS:,} bytes, the limit for chain files",
            Span.point(1, 1),
            hint="split it into several chains that call each other",
        )
        return LoadResult(SourceFile(path, ""), None)
    text, error, bad = decode(data)
    if text is None:
        partial = data.decode("utf-8", errors="replace")
        source = SourceFile(path, partial)
        line, column = source.position(bad)
        sink.add(rules.YAML_SYNTAX, error or "unreadable file", Span.point(line, column), hint="save the file as UTF-8")
        return LoadResult(source, None)
    return load_text(path, text, sink)


def load_text(path: str, text: str, sink: DiagnosticSink) -> LoadResult:
    """Parse one YAML document into nodes. Problems go to `sink`."""
    source = SourceFile(path, text)
    if len(text) > MAX_FILE_CHARS:
        sink.add(rules.YAML_LIMIT, f"the file is {len(text):,} characters; chain files are limited to {MAX_FILE_CHARS:,}",
                 Span.point(1, 1), hint="split it into several chains that call each other")
        return LoadResult(source, None)
    # libyaml is fast but reads YAML 1.1: when it rejects a document, the YAML 1.2 parser
    # decides (e.g. `{trigger: post:x}` and JSON surrogate-pair escapes are valid YAML 1.2)
    # (when both reject it, libyaml's message is reported: it is the clearer one)
    reported = len(sink.items)
    fast = _fast_events(text)
    root = None
    fast_error: Exception | None = None
    if fast is not None:
        try:
            root = _Builder(source, sink).build(fast)
        except Exception as exc:
            del sink.items[reported:]
            fast, fast_error = None, exc
    if fast is None:
        try:
            root = _Builder(source, sink).build(_yaml12_events(text))
        except Exception as exc:  # MarkedYAMLError, ReaderError, ...
            del sink.items[reported:]
            root = None
            _report_yaml_error(fast_error or exc, source, sink, byte_offsets=fast_error is not None)
    if root is not None and any(c in text for c in YAML11_ONLY_BREAKS):
        _reposition(root, source)
    return LoadResult(source, root)


def _reposition(root: AnyNode, source: SourceFile) -> None:
    """Line/column from character indexes, for files where libyaml's line counting differs
    from YAML 1.2's (it also breaks lines at U+0085, U+2028 and U+2029)."""
    seen: set[int] = set()
    stack: list[AnyNode] = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        node.line, node.column = source.position(node.start)
        node.end_line, node.end_column = source.position(node.end)
        if isinstance(node, SeqNode):
            stack.extend(node.items)
        elif isinstance(node, MapNode):
            for key, value in node.pairs:
                stack.append(key)
                stack.append(value)


def _report_yaml_error(exc: Exception, source: SourceFile, sink: DiagnosticSink, byte_offsets: bool = False) -> None:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None)
    context = getattr(exc, "context", None)
    context_mark = getattr(exc, "context_mark", None)
    at_end = mark is not None and mark.index >= len(source.text.rstrip())
    opened_before = context_mark is not None and context_mark.index < len(source.text.rstrip())
    if at_end and opened_before and context_mark is not None:  # an unclosed [ or {: point where it was opened
        span = Span.point(*source.position(context_mark.index))
    elif mark is not None:  # the character index is exact, also where line counting differs
        span = Span.point(*source.position(min(mark.index, len(source.text))))
    elif getattr(exc, "position", None) is not None:  # ReaderError: an offset into what the parser read
        position = int(exc.position)  # type: ignore[attr-defined]
        if byte_offsets:  # libyaml's (the fast parser's) counts UTF-8 bytes: a character offset here
            position = len(source.text.encode("utf-8", "surrogatepass")[:position].decode("utf-8", "ignore"))
        line, column = source.position(position)
        span = Span.point(line, column)
    else:
        span = Span.point(1, 1)
    if problem:
        message = str(problem)
        if at_end and opened_before and context:
            message = f"{message} before the end of the file ({context} that starts here)"
        elif context:
            opened = ""
            if context_mark is not None and mark is not None and context_mark.line != mark.line:
                opened = f" at line {context_mark.line + 1}, column {context_mark.column + 1}"
            message = f"{message} ({context}{opened})"
    else:
        message = str(exc).split("\n")[0] or type(exc).__name__
        reason = getattr(exc, "reason", None)
        if reason:
            message = str(reason)
    lines = {span.line, context_mark.line + 1 if context_mark is not None else span.line}
    sink.add(rules.YAML_SYNTAX, f"invalid YAML: {message}", span,
             hint=_yaml_hint(message, [source.line_text(n) for n in sorted(lines)]))


_UNQUOTED_TEMPLATE = re.compile(r"(?:^|[:\-]\s)\{[^{}]*\}\s*[^\s,}\]#]")


def _yaml_hint(message: str, lines: list[str]) -> str | None:
    if any(_UNQUOTED_TEMPLATE.search(line) for line in lines):
        return 'a value that starts with { is read as a YAML mapping: quote the whole template, e.g. if: "{x} > 1"'
    if any("\t" in line[: len(line) - len(line.lstrip(" \t-?:"))] for line in lines) or "\\t" in message:
        return "YAML indentation uses spaces, not tabs (also after '- ')"
    if "mapping values are not allowed" in message:
        return "a value containing ': ' must be quoted"
    if "control characters" in message or "special characters" in message:
        return "remove the control character"
    return None


def node_at(node: AnyNode | None, path: Any) -> AnyNode | None:
    """The node at a JSON path (keys and indices) below `node`, or the deepest one found."""
    current = node
    for part in path:
        if isinstance(current, MapNode) and isinstance(part, str) and current.get(part) is not None:
            current = current.get(part)
        elif isinstance(current, SeqNode) and isinstance(part, int) and 0 <= part < len(current.items):
            current = current.items[part]
        else:
            break
    return current


def to_data(node: AnyNode | None) -> Any:
    """Plain JSON-like Python data of a node (aliases are shared, size was bounded at load)."""
    if node is None:
        return None
    if isinstance(node, ScalarNode):
        return node.value
    if isinstance(node, SeqNode):
        return [to_data(item) for item in node.items]
    return {key.text: to_data(value) for key, value in node.pairs}
