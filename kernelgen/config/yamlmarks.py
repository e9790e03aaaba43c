"""YAML -> plain Python values plus the line/column of every key and value.

PyYAML's parser gives a stream of events, each with its mark; composing them here (instead
of yaml.compose) lets config errors point at `configs/x.yaml:12:7` and bounds what a
document may cost before anything is expanded:

- anchors, aliases and merge keys (`<<: *base`, YAML 1.1: explicit keys win, earlier merged
  mappings win over later ones) work, because configs repeat op blocks; but an alias may not
  take the document past MAX_NODES nodes or MAX_DEPTH levels once expanded (a "billion
  laughs" file is rejected at the alias that crosses the line, without expanding it), and an
  alias inside its own anchor is an error at the alias;
- composing is a loop over events, not a recursion, so deep nesting is an error at the
  collection that crosses MAX_DEPTH, never a RecursionError;
- duplicate keys are rejected (PyYAML keeps the last); a character YAML does not accept, or
  a byte that is not UTF-8, is reported at its own line and column.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

Path = tuple[str | int, ...]

MAX_NODES = 100_000  # after alias expansion; the bundled configs have a few hundred
MAX_DEPTH = 100  # levels of nested mappings and sequences; the bundled configs have under 10
MAX_BYTES = 1 << 20  # a config over 1 MiB is not a config (and PyYAML reads ~1 MB/s)

_MAP, _SEQ, _MERGE = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:merge"
_BREAKS = re.compile("\r\n|[\n\r\x85\u2028\u2029]")  # what PyYAML counts as a line break


@dataclass(frozen=True, slots=True)
class Mark:
    line: int  # 1-based
    column: int  # 1-based


class YamlProblem(ValueError):
    def __init__(self, message: str, mark: Mark) -> None:
        super().__init__(message)
        self.message, self.mark = message, mark


@dataclass(frozen=True, slots=True)
class MarkedDocument:
    data: Any
    value_marks: dict[Path, Mark]  # where each value starts
    key_marks: dict[Path, Mark]  # where the key naming each mapping value starts

    def mark(self, path: Path, *, key: bool = False) -> Mark:
        """The most precise mark known for path (walks up to the nearest marked parent)."""
        marks = self.key_marks if key else self.value_marks
        for cut in range(len(path), -1, -1):
            found = marks.get(path[:cut]) or self.value_marks.get(path[:cut])
            if found:
                return found
        return Mark(1, 1)


def decode(data: bytes) -> str:
    """The text of a config file's bytes; not UTF-8 is a problem at the first bad byte."""
    if len(data) > MAX_BYTES:
        raise YamlProblem(f"the file is larger than {MAX_BYTES} bytes; a config is a few hundred", Mark(1, 1))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        before = data[:error.start].decode("utf-8")
        raise YamlProblem(f"not UTF-8: byte 0x{data[error.start]:02x} cannot be decoded (save the file as UTF-8)",
                          _mark_at(before, len(before))) from None


def _mark_at(text: str, index: int) -> Mark:
    """Line and column of text[index], counted as PyYAML counts them (a BOM takes no column)."""
    head = text[:index]
    line_starts = [m.end() for m in _BREAKS.finditer(head)]
    start = line_starts[-1] if line_starts else 0
    return Mark(len(line_starts) + 1, index - start - head.count("\ufeff", start) + 1)


def _mark(yaml_mark: yaml.Mark) -> Mark:
    return Mark(yaml_mark.line + 1, yaml_mark.column + 1)


def load(text: str) -> MarkedDocument:
    if len(text) > MAX_BYTES:
        raise YamlProblem(f"the document is longer than {MAX_BYTES} characters; a config is a few hundred", Mark(1, 1))
    bad = yaml.reader.Reader.NON_PRINTABLE.search(text)
    if bad:
        raise YamlProblem(f"unacceptable character {bad.group()!r} (U+{ord(bad.group()):04X}): YAML allows tabs, "
                          f"line breaks and printable characters only", _mark_at(text, bad.start()))
    try:
        root = _Composer().compose(yaml.parse(text, Loader=yaml.SafeLoader))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = _mark(mark) if mark else Mark(1, 1)
        raise YamlProblem(f"YAML syntax error: {error.problem or error.context}", where) from None
    except yaml.YAMLError as error:  # pragma: no cover - the parser raises marked errors for text input
        raise YamlProblem(f"YAML syntax error: {error}", Mark(1, 1)) from None
    builder = _Builder()
    data = None if root is None else builder.build(root, ())
    return MarkedDocument(data, builder.values, builder.keys)


# ---------------------------------------------------------------- composing: events -> nodes

@dataclass(eq=False, slots=True)
class _Node:
    kind: str  # "scalar" | "seq" | "map" | "alias" (value: the anchored node)
    mark: Mark
    value: Any  # scalar: its Python value; seq: [_Node]; map: [(key _Node, value _Node)]
    size: int = 1  # nodes once aliases are expanded
    height: int = 0  # levels of collections inside, this one included (0 for a scalar)
    merge: bool = False  # the merge key `<<`
    anchor: str | None = None
    pending: list = field(default_factory=list)  # a mapping's key waiting for its value


class _Resolver(yaml.resolver.Resolver):
    """YAML 1.1's implicit types, plus the floats YAML 1.2 and JSON read that 1.1 leaves as strings: an exponent
    without a dot or without a sign (5e-2, 1e-30, 1.0e5, as quantization tools print scales)."""


_Resolver.add_implicit_resolver("tag:yaml.org,2002:float",
                                re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789"))


class _Composer:
    def __init__(self) -> None:
        self.anchors: dict[str, _Node] = {}
        self.open: dict[str, _Node] = {}  # anchored collections not closed yet
        self.stack: list[_Node] = []
        self.total = 0
        self.root: _Node | None = None
        self.documents = 0
        self.resolver = _Resolver()
        self.constructor = yaml.constructor.SafeConstructor()

    def compose(self, events) -> _Node | None:
        for event in events:
            if isinstance(event, yaml.DocumentStartEvent):
                self.documents += 1
                if self.documents > 1:
                    raise YamlProblem("expected a single document in the stream, but found another document",
                                      _mark(event.start_mark))
            elif isinstance(event, yaml.AliasEvent):
                self._alias(event)
            elif isinstance(event, yaml.ScalarEvent):
                self._count(1, event)
                self._add(self._scalar(event))
            elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                self._start(event)
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                self._end()
        return self.root

    def _count(self, nodes: int, event: yaml.Event) -> None:
        self.total += nodes
        if self.total > MAX_NODES:
            raise YamlProblem(f"the document has more than {MAX_NODES} nodes; a config has a few hundred",
                              _mark(event.start_mark))

    def _scalar(self, event: yaml.ScalarEvent) -> _Node:
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.resolver.resolve(yaml.ScalarNode, event.value, event.implicit)
        mark = _mark(event.start_mark)
        if tag == _MERGE:
            return _Node("scalar", mark, event.value, merge=True)
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        try:
            value = self.constructor.construct_object(node, deep=True)
        except yaml.MarkedYAMLError as error:
            raise YamlProblem(f"{error.problem or error.context}", mark) from None
        except (ValueError, TypeError, OverflowError) as error:  # e.g. a timestamp in month 13
            raise YamlProblem(f"cannot read {event.value!r} as {tag.rsplit(':', 1)[-1]}: {error}", mark) from None
        self.constructor.constructed_objects.clear()
        node = _Node("scalar", mark, value, anchor=self._anchor(event))
        if node.anchor is not None:
            self.anchors[node.anchor] = node
        return node

    def _start(self, event: yaml.CollectionStartEvent) -> None:
        mapping = isinstance(event, yaml.MappingStartEvent)
        if event.tag not in (None, "!", _MAP if mapping else _SEQ):
            raise YamlProblem(f"tag {event.tag!r} is not supported: a config holds plain mappings, lists and "
                              f"scalars", _mark(event.start_mark))
        self._count(1, event)
        if len(self.stack) + 1 > MAX_DEPTH:
            raise YamlProblem(f"more than {MAX_DEPTH} levels of nested mappings and lists", _mark(event.start_mark))
        node = _Node("map" if mapping else "seq", _mark(event.start_mark), [], height=1, anchor=self._anchor(event))
        if node.anchor is not None:
            self.open[node.anchor] = node
        self.stack.append(node)

    def _end(self) -> None:
        node = self.stack.pop()
        if node.anchor is not None:
            del self.open[node.anchor]
            self.anchors[node.anchor] = node
        self._add(node)

    def _anchor(self, event: yaml.NodeEvent) -> str | None:
        name = event.anchor
        if name is not None and (name in self.anchors or name in self.open):
            first = (self.anchors.get(name) or self.open[name]).mark
            raise YamlProblem(f"anchor &{name} is defined twice (first at line {first.line}, column {first.column})",
                              _mark(event.start_mark))
        return name

    def _alias(self, event: yaml.AliasEvent) -> None:
        name, mark = event.anchor, _mark(event.start_mark)
        if name in self.open:
            at = self.open[name].mark
            raise YamlProblem(f"alias *{name} in {self._where()} refers to &{name} (line {at.line}, column "
                              f"{at.column}), which contains it: a recursive structure cannot be a config", mark)
        if name not in self.anchors:
            raise YamlProblem(f"alias *{name} is not defined before this point (an anchor &{name} must come "
                              f"first)", mark)
        target = self.anchors[name]
        if self.total + target.size > MAX_NODES:
            raise YamlProblem(f"alias *{name} in {self._where()} expands to {target.size} nodes, taking the "
                              f"document past {MAX_NODES} nodes (aliases of aliases multiply)", mark)
        if len(self.stack) + target.height > MAX_DEPTH:
            raise YamlProblem(f"alias *{name} in {self._where()} nests {target.height} levels deep at a depth of "
                              f"{len(self.stack)}, past the limit of {MAX_DEPTH}", mark)
        self.total += target.size
        self._add(_Node("alias", mark, target, size=target.size, height=target.height))

    def _add(self, node: _Node) -> None:
        if not self.stack:
            self.root = node
            return
        parent = self.stack[-1]
        parent.size += node.size
        parent.height = max(parent.height, node.height + 1)
        if parent.kind == "seq":
            parent.value.append(node)
        elif parent.pending:
            parent.value.append((parent.pending.pop(), node))
        else:
            parent.pending.append(node)

    def _where(self) -> str:
        """The document path being composed, spelled as config errors spell keys: ops[1].conv2d."""
        text = ""
        for node in self.stack:
            key = _target(node.pending[0]) if node.pending else None
            item = len(node.value) if node.kind == "seq" else key.value if key and key.kind == "scalar" else "?"
            text += f"[{item}]" if isinstance(item, int) else (f".{item}" if text else str(item))
        return text or "the document"


def _target(node: _Node) -> _Node:
    return node.value if node.kind == "alias" else node


# ---------------------------------------------------------------- building: nodes -> Python values + marks

class _Builder:
    """Expands aliases and merge keys; the MAX_NODES budget already bounds the work."""

    def __init__(self) -> None:
        self.values: dict[Path, Mark] = {}
        self.keys: dict[Path, Mark] = {}

    def build(self, node: _Node, path: Path) -> Any:
        self.values[path] = node.mark  # an alias is marked where it is used; what it expands to, where written
        node = _target(node)
        if node.kind == "scalar":
            return node.value
        if node.kind == "seq":
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        result: dict[Any, Any] = {}
        for key, (key_node, value_node) in _entries(node).items():
            self.keys[(*path, key)] = key_node.mark
            result[key] = self.build(value_node, (*path, key))
        return result


def _entries(mapping: _Node) -> dict[Any, tuple[_Node, _Node]]:
    """key -> (key node, value node), merge keys applied: explicit keys win over merged ones,
    and a mapping earlier in `<<: [*a, *b]` wins over a later one (YAML 1.1 merge)."""
    explicit: dict[Any, tuple[_Node, _Node]] = {}
    merged: dict[Any, tuple[_Node, _Node]] = {}
    merge_mark: Mark | None = None
    for key_node, value_node in mapping.value:
        key = _target(key_node)
        if key.kind != "scalar":
            raise YamlProblem(f"mapping keys must be names, got a {'list' if key.kind == 'seq' else 'mapping'}",
                              key_node.mark)
        if key.merge:
            if merge_mark is not None:
                raise YamlProblem("duplicate key '<<'", key_node.mark)
            merge_mark = key_node.mark
            for source in _merge_sources(value_node):
                for name, entry in _entries(source).items():
                    merged.setdefault(name, entry)
            continue
        if not isinstance(key.value, (str, int)):
            raise YamlProblem(f"mapping keys must be names, got {key.value!r}", key_node.mark)
        if key.value in explicit:
            raise YamlProblem(f"duplicate key {key.value!r}", key_node.mark)
        explicit[key.value] = (key_node, value_node)
    return {**merged, **explicit}


def _merge_sources(value: _Node) -> list[_Node]:
    node = _target(value)
    sources = [node] if node.kind == "map" else [_target(n) for n in node.value] if node.kind == "seq" else [node]
    if any(source.kind != "map" for source in sources):
        raise YamlProblem("a merge key << takes a mapping or a list of mappings (<<: *base or <<: [*a, *b])",
                          value.mark)
    return sources
