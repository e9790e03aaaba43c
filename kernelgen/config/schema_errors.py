"""A pydantic ValidationError as config problems: each at the line and column of its key, in
the words of the field's description ("expected a positive int, got 0"), one per key, the
most specific one where a union's branches each complain."""
from __future__ import annotations

import difflib
import json
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import ConfigProblem
from ..ops.fields import INT32_MAX
from .yamlmarks import MarkedDocument


def schema_problems(error: ValidationError, document: MarkedDocument, path: str,
                     schema: type[BaseModel]) -> list[ConfigProblem]:
    problems: dict[str, ConfigProblem] = {}
    bounded: set[str] = set()
    for item in error.errors():
        keys, description = _locate(item["loc"], schema)
        if item["type"] == "extra_forbidden":
            unknown = str(item["loc"][-1])
            keys = (*keys, unknown) if not keys or keys[-1] != unknown else keys
            siblings = _fields_at(keys[:-1], schema)
            hint = difflib.get_close_matches(unknown, siblings, n=1)
            message = f"unknown key {unknown!r}" + (f" (did you mean {hint[0]!r}?)" if hint else
                                                   f" (expected one of: {', '.join(siblings)})")
            mark = document.mark(keys, key=True)
        elif item["type"] == "missing":
            message = f"missing required key (expected {description})"
            mark = document.mark(keys[:-1])
        else:
            message = f"expected {description}{_limit(item)}, got {show(item.get('input'))}"
            if item["type"] == "string_too_long":
                message = f"expected {_limit(item)[1:]}, got {show(item.get('input'))}"
            if item["type"] == "value_error":  # a validator's own sentence (a reserved name)
                message = str(item["ctx"]["error"])
            mark = document.mark(keys)
        key = key_text(keys)
        # A union's branches each report (`kernel: int | [h, w]`): the first speaks, unless a later one
        # names the bound that was broken, which says more.
        if key not in problems or (_limit(item) and key not in bounded):
            problems[key] = ConfigProblem(path, mark.line, mark.column, key, message)
            bounded.update([key] if _limit(item) else [])
    # A union such as `schedule: auto | {...}` also fails as a whole when one of its keys is wrong: keep
    # only the most specific problem.
    specific = [p for k, p in problems.items() if not any(o.startswith(k + ".") for o in problems if o != k)]
    return sorted(specific, key=lambda p: (p.line, p.column))


def _locate(loc: tuple, schema: type[BaseModel]) -> tuple[tuple, str]:
    """Walk a pydantic error location through the models: (config keys, field description)."""
    model: type[BaseModel] | None = schema
    keys: list[str | int] = []
    description = "a config mapping"
    field = None
    mapping = False  # the last field is a {name: {...}} mapping: the next item is one of its names
    for item in loc:
        if mapping:
            keys.append(item)
            mapping = False
        elif isinstance(item, int):
            keys.append(item)
        elif model is not None and item in model.model_fields:
            field = model.model_fields[item]
            keys.append(item)
            description = field.description or description
            mapping = typing.get_origin(field.annotation) is dict
            model = _model_in(field.annotation)
            if model is not None and _branch_model(field.annotation, model.__name__) is not None \
                    and not _optional(field.annotation):
                model = None  # a union of a model and scalars: the error's branch tag says which
        elif model is None and (branch := _branch_model(field.annotation, item)) is not None:
            model = branch  # the union branch the value went into: `layout: {map: ..., pad_value: nan}`
        else:
            break  # a union branch tag such as 'list[int]' or 'str'
    return tuple(keys), description


def _optional(annotation: Any) -> bool:
    """A model or None (`slice: {start, stop}` in a manifest step): pydantic's error location has no branch tag."""
    return typing.get_origin(annotation) is typing.Union and len(
        [a for a in typing.get_args(annotation) if a is not type(None)]) == 1


def _branch_model(annotation: Any, tag: Any) -> type[BaseModel] | None:
    """The model a pydantic union-branch tag (its class name) stands for, if one of the union's."""
    if typing.get_origin(annotation) is not typing.Union:
        return None
    for arg in typing.get_args(annotation):
        if isinstance(arg, type) and issubclass(arg, BaseModel) and arg.__name__ == tag:
            return arg
    return None


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _fields_at(keys: tuple, schema: type[BaseModel]) -> list[str]:
    model: type[BaseModel] | None = schema
    for item in keys:
        if isinstance(item, str) and model is not None:
            model = _model_in(model.model_fields[item].annotation) if item in model.model_fields else None
    return list(model.model_fields) if model is not None else []


def key_text(keys: tuple) -> str:
    text = ""
    for item in keys:
        text += f"[{item}]" if isinstance(item, int) else (f".{item}" if text else str(item))
    return text


def _limit(item: dict) -> str:
    """The bound a value broke, when it is one the description does not state."""
    ctx = item.get("ctx") or {}
    if item["type"] == "less_than_equal" and ctx.get("le") == INT32_MAX:
        return f" of at most {INT32_MAX} (kernels index with 32-bit ints)"
    if item["type"] == "string_too_long":
        return f" at most {ctx.get('max_length')} characters"
    return ""


def show(value: Any, limit: int = 80) -> str:
    """The offending value as the file spells it, cut short: a 10,000-character name is not repeated."""
    try:
        text = json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 25]}... ({len(text)} characters)"
