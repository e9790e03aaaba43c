"""Meaning checks of an op's epilogue keys (`activation`, `residual`): what a config may ask the store of
a conv to do after the bias. Split from config.py, which calls these with its problem reporter."""
from __future__ import annotations

from typing import Callable, NamedTuple

import kernelgen.ops as ops

Problem = Callable[[tuple, str], None]
Shape = tuple[int, int, int, int]


def activation(problem: Problem, keys: tuple, spec) -> Activation:
    """The activation record (kernelgen/ops) a config's spelling means: a plain name (relu, hardswish), a clamp
    [lo, hi], or a kind's parameter block ({hardsigmoid: {alpha, beta}}), with its report name."""
    if isinstance(spec, str):
        return Activation(ops.NAMED[spec], spec)
    if isinstance(spec, ops.Parameters):
        if len(spec.given) != 1:
            kinds = " or ".join(f"{{{key}: {{...}}}}" for key in type(spec).model_fields)
            problem(keys, f"expected one of {kinds}, got {len(spec.given)} of them")
            return Activation(ops.IDENTITY, "none")
        (kind,) = spec.given
        return Activation(*ops.ACTIVATIONS[kind].from_params(problem, (*keys, kind), getattr(spec, kind)))
    lo, hi = float(spec[0]), float(spec[1])
    if max(abs(lo), abs(hi)) > ops.FLOAT32_MAX:
        problem(keys, f"expected clamp bounds a float32 holds, got [{lo:g}, {hi:g}]")
    elif lo > hi:
        problem(keys, f"expected a clamp [lo, hi] with lo <= hi, got [{lo:g}, {hi:g}]")
        return Activation(ops.IDENTITY, f"clamp[{lo:g}, {hi:g}]")
    return Activation(ops.Clamp(lo=lo, hi=hi), f"clamp[{lo:g}, {hi:g}]")


def check_computed(problem: Problem, keys: tuple, act: "Activation", targets: list, dtype: str) -> None:
    """A problem at the activation's key where one of the config's targets (their TargetInfo) or its dtype does not
    compute that kind: hvx has no float sigmoid (its uint8 table it has), uint8 none of the float-only kinds."""
    kind = act.step.KEY
    table = dtype == "uint8" and act.step.UINT8 == "table"
    for t in targets:
        if t.activations is not None and kind not in t.activations and not (table and t.uint8_tables):
            named = [name for name, record in ops.NAMED.items() if record.KEY in t.activations]
            problem(keys, f"expected an activation target {t.name!r} computes ({', '.join(named)} or a clamp "
                          f"[lo, hi]), got {act.name}")
            return
    if dtype == "uint8" and not act.step.UINT8:
        named = [name for name, record in ops.NAMED.items() if record.UINT8]
        problem(keys, f"expected an activation dtype uint8 computes ({', '.join(named)} or a clamp [lo, hi]), got "
                      f"{act.name}: float only")


class Activation(NamedTuple):
    step: ops.Activation
    name: str  # as reports print it


def residual(problem: Problem, keys: tuple, spec: str | int | None, index: int, shapes: list[Shape],
             strides: list[tuple[int, int]], out_shape: Shape, sides: dict[str, Shape]) -> int | str | None:
    """Which tensor op `index` (0-based) adds before its activation: 0 for the chain's input, K for op K's
    output (1-based, an earlier op), or a side input's name. Its shape must be this op's output shape, and the ops
    after K must all have stride 1: a fused chain keeps op K's output in a stripe cache that then also covers the
    positions this op writes (each row of the output has its row of op K in the window)."""
    if spec is None:
        return None
    if isinstance(spec, str) and spec != "input":
        if spec not in sides:
            known = ", ".join(sides) or "none declared"
            problem(keys, f"expected 'input', an earlier op or a side input (side_inputs: {known}), got {spec!r}")
            return None
        if tuple(sides[spec]) != tuple(out_shape):
            problem(keys, f"expected a residual of this op's output shape {list(out_shape)}; side input {spec!r} is "
                          f"{list(sides[spec])}")
            return None
        return spec
    source = 0 if spec == "input" else int(spec)
    if source > index:
        problem(keys, f"expected 'input' or an earlier op (1 to {index}), got {spec}" if index else
                f"expected 'input' (the first op has no earlier op), got {spec}")
        return None
    what = "the input" if source == 0 else f"op {source}'s output"
    if tuple(shapes[source]) != tuple(out_shape):
        problem(keys, f"expected a residual of this op's output shape {list(out_shape)}; {what} is "
                      f"{list(shapes[source])}")
        return None
    strided = [k + 1 for k in range(source, index + 1) if strides[k] != (1, 1)]
    if source and strided:
        problem(keys, f"expected stride 1 in the ops after op {source} up to this one (op {strided[0]} has stride "
                      f"{list(strides[strided[0] - 1])}): a fused chain keeps op {source}'s output only for the "
                      f"rows its consumer reads")
        return None
    return source
