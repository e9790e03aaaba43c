"""YAML -> plain Python values plus the line/column of every key and value.

PyYAML's composer keeps a mark on every node; constructing through it lets config errors
point at `configs/x.yaml:12:7`. Duplicate keys are rejected here (PyYAML keeps the last).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

Path = tuple[str | int, ...]


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


def _mark(node: yaml.Node) -> Mark:
    return Mark(node.start_mark.line + 1, node.start_mark.column + 1)


def load(text: str) -> MarkedDocument:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = Mark(mark.line + 1, mark.column + 1) if mark else Mark(1, 1)
        raise YamlProblem(f"YAML syntax error: {error.problem or error.context}", where) from None
    except yaml.YAMLError as error:  # pragma: no cover - PyYAML raises marked errors for text input
        raise YamlProblem(f"YAML syntax error: {error}", Mark(1, 1)) from None
    values: dict[Path, Mark] = {}
    keys: dict[Path, Mark] = {}
    if node is None:
        return MarkedDocument(None, values, keys)
    constructor = yaml.constructor.SafeConstructor()
    data = _build(node, (), constructor, values, keys)
    return MarkedDocument(data, values, keys)


def _build(node: yaml.Node, path: Path, constructor: yaml.constructor.SafeConstructor,
           values: dict[Path, Mark], keys: dict[Path, Mark]) -> Any:
    values[path] = _mark(node)
    if isinstance(node, yaml.MappingNode):
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = constructor.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int)):
                raise YamlProblem(f"mapping keys must be names, got {key!r}", _mark(key_node))
            if key in result:
                raise YamlProblem(f"duplicate key {key!r}", _mark(key_node))
            keys[(*path, key)] = _mark(key_node)
            result[key] = _build(value_node, (*path, key), constructor, values, keys)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, (*path, i), constructor, values, keys) for i, item in enumerate(node.value)]
    return constructor.construct_object(node, deep=True)
