"""Meaning checks of an op's epilogue keys (`activation`, `residual`): what a config may ask the store of
a conv to do after the bias. Split from config.py, which calls these with its problem reporter."""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import kernelgen.config_model as M
from .plan import HardSigmoid

Problem = Callable[[tuple, str], None]
Shape = tuple[int, int, int, int]

# The largest finite float32 (IEEE 754 binary32): a clamp bound past it cannot be stored in a kernel.
FLOAT32_MAX = 3.4028234663852886e38


# ONNX HardSwish: x * HardSigmoid(x) with alpha 1/6, beta 1/2 (fixed by the operator); HardSigmoid's defaults.
HARDSWISH = HardSigmoid(alpha=1 / 6, beta=0.5, times_value=True)
HARDSIGMOID = HardSigmoid(alpha=0.2, beta=0.5)


def activation(problem: Problem, keys: tuple, spec) -> Activation:
    """The activation: a clamp [lo, hi] of the biased accumulator (relu: [0, inf], relu6: [0, 6]) or one of ONNX's
    hard gates (hardsigmoid, hardswish)."""
    if spec == "none":
        return Activation(None, None, "none")
    if spec == "relu":
        return Activation((0.0, math.inf), None, "relu")
    if spec == "relu6":
        return Activation((0.0, 6.0), None, "relu6")
    if spec == "hardswish":
        return Activation(None, HARDSWISH, "hardswish")
    if spec == "hardsigmoid":
        return Activation(None, HARDSIGMOID, "hardsigmoid")
    if isinstance(spec, M.HardSigmoidSpec):
        alpha, beta = float(spec.hardsigmoid.alpha), float(spec.hardsigmoid.beta)
        if max(abs(alpha), abs(beta)) > FLOAT32_MAX:
            problem((*keys, "hardsigmoid"), f"expected alpha and beta a float32 holds, got {alpha:g}, {beta:g}")
        return Activation(None, HardSigmoid(alpha=alpha, beta=beta), f"hardsigmoid[{alpha:g}, {beta:g}]")
    lo, hi = float(spec[0]), float(spec[1])
    if max(abs(lo), abs(hi)) > FLOAT32_MAX:
        problem(keys, f"expected clamp bounds a float32 holds, got [{lo:g}, {hi:g}]")
    elif lo > hi:
        problem(keys, f"expected a clamp [lo, hi] with lo <= hi, got [{lo:g}, {hi:g}]")
    return Activation((lo, hi), None, f"clamp[{lo:g}, {hi:g}]")


class Activation(NamedTuple):
    clamp: tuple[float, float] | None
    hard: HardSigmoid | None
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
