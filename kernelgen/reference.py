"""The numpy reference: a conv2d chain in the logical NHWC / OIHW layouts, in float64,
plus a rigorous bound on the float32 kernel's rounding error for every output element.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

import numpy as np

from .config import Config, Conv2d
from .ops import IDENTITY, HardSigmoid

# Unit roundoff of IEEE binary32: round-to-nearest of a float32 operation errs by at most this factor.
FLOAT32_UNIT_ROUNDOFF = 2.0 ** -24
# IEEE binary16: half storage rounds each stored value by at most this factor, fp16 arithmetic each operation.
HALF_UNIT_ROUNDOFF = 2.0 ** -11
# Below 2^-14 half values are subnormal, 2^-24 apart: rounding there errs by up to 2^-25 absolute, whatever the
# value (a relative bound alone would fail a correct kernel on outputs near zero).
HALF_UNDERFLOW = 2.0 ** -25


def conv2d(x: np.ndarray, w: np.ndarray, op: Conv2d) -> np.ndarray:
    """NHWC x OIHW -> NHWC in float64; zero padding, stride, dilation and groups as the op says
    (w is [K, C / groups, kh, kw]: output channel k reads the input channels of group k // (K / groups))."""
    if op.groups > 1:
        kg, cg = w.shape[0] // op.groups, x.shape[3] // op.groups
        return np.concatenate([_dense(x[..., g * cg:(g + 1) * cg], w[g * kg:(g + 1) * kg], op)
                               for g in range(op.groups)], axis=3)
    return _dense(x, w, op)


def apply(x: np.ndarray, w: np.ndarray | None, op: Conv2d, sides: Mapping[str, np.ndarray] | None = None
          ) -> np.ndarray:
    """The op before its epilogue: a conv with its filter, a pool (w None), or a mul by a side input."""
    if op.kind == "mul":
        return x.astype(np.float64) * sides[op.scale_by].astype(np.float64)  # [n, 1, 1, c] over every pixel
    return pool2d(x, op) if op.pool else conv2d(x, w, op)


def _windows(x: np.ndarray, op: Conv2d, fill: float) -> tuple[np.ndarray, np.ndarray]:
    """Every window of a pool as (taps, N, OH, OW, C) with padding at `fill`, and (OH, OW) counts of the positions
    inside the input."""
    top, left, bottom, right = op.pad
    xp = np.pad(x.astype(np.float64), ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=fill)
    inside = np.pad(np.ones(x.shape[1:3]), ((top, bottom), (left, right)))
    (sh, sw), (kh, kw) = op.stride, op.kernel
    oh, ow = (xp.shape[1] - kh) // sh + 1, (xp.shape[2] - kw) // sw + 1
    taps = np.stack([xp[:, rh: rh + (oh - 1) * sh + 1: sh, rw: rw + (ow - 1) * sw + 1: sw, :]
                     for rh in range(kh) for rw in range(kw)])
    counts = sum(inside[rh: rh + (oh - 1) * sh + 1: sh, rw: rw + (ow - 1) * sw + 1: sw]
                 for rh in range(kh) for rw in range(kw))
    return taps, counts


def pool2d(x: np.ndarray, op: Conv2d) -> np.ndarray:
    """ONNX MaxPool (padding never the maximum) or AveragePool (count_include_pad: divide by the window, else by
    its positions in the input), NHWC in float64."""
    if op.kind == "maxpool":
        return _windows(x, op, -np.inf)[0].max(axis=0)
    taps, counts = _windows(x, op, 0.0)
    divisor = op.kernel[0] * op.kernel[1] if op.count_include_pad else counts[None, :, :, None]
    return taps.sum(axis=0) / divisor


def _pool_error_bound(op: Conv2d, value: np.ndarray, error: np.ndarray, unit_roundoff: float,
                      storage_roundoff: float, underflow: float) -> tuple[np.ndarray, np.ndarray]:
    """A max moves no value further than the largest error in its window; a mean of n values is a sum of n terms
    (gamma_n of their magnitudes, over n) and one division (a rounding of the result), plus the mean error."""
    result = pool2d(value, op)
    if op.kind == "maxpool":
        bound = _windows(error, op, 0.0)[0].max(axis=0)
    else:
        n = op.kernel[0] * op.kernel[1]
        gamma = n * unit_roundoff / (1 - n * unit_roundoff)
        mean = replace(op, kind="avgpool")
        bound = (gamma * pool2d(np.abs(value) + error, mean) + pool2d(error, mean) + unit_roundoff * np.abs(result)
                 + (n + 1) * underflow)
    return result, bound + storage_roundoff * (np.abs(result) + bound)


def _dense(x: np.ndarray, w: np.ndarray, op: Conv2d) -> np.ndarray:
    top, left, bottom, right = op.pad
    xp = np.pad(x.astype(np.float64), ((0, 0), (top, bottom), (left, right), (0, 0)))
    (sh, sw), (dh, dw), (kh, kw) = op.stride, op.dilation, op.kernel
    n, h, wd, _ = xp.shape
    oh = (h - op.span[0]) // sh + 1
    ow = (wd - op.span[1]) // sw + 1
    out = np.zeros((n, oh, ow, w.shape[0]), dtype=np.float64)
    w64 = w.astype(np.float64)
    for rh in range(kh):
        for rw in range(kw):
            window = xp[:, rh * dh: rh * dh + (oh - 1) * sh + 1: sh, rw * dw: rw * dw + (ow - 1) * sw + 1: sw, :]
            out += window @ w64[:, :, rh, rw].T
    return out


def residual_of(op: Conv2d, sources: list[np.ndarray], sides: Mapping[str, np.ndarray] | None) -> np.ndarray:
    """What op.residual names: sources[0] the chain's input, sources[K] op K's output, or a side input by name."""
    return sides[op.residual] if isinstance(op.residual, str) else sources[op.residual]


def epilogue(value: np.ndarray, op: Conv2d, bias: np.ndarray | None, sources: list[np.ndarray] | None = None,
             sides: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """conv + bias + residual, then the activation (ResNet's and MobileNetV2's order). sources[0] is
    the chain's input, sources[K] op K's output, sides the side inputs by name: op.residual names the one added."""
    if op.bias:
        value = value + bias.astype(np.float64)
    if op.residual is not None:
        value = value + residual_of(op, sources, sides).astype(np.float64)
    return op.act.reference(value)  # in float64, on the float32 literals the kernels hold (0.1 -> 0.100000001...)


def hard_activation(value: np.ndarray, hard: HardSigmoid) -> np.ndarray:
    """ONNX HardSigmoid min(1, max(0, alpha * x + beta)), times x for HardSwish (the record's own reference)."""
    return hard.reference(value)


def chain(config: Config, x: np.ndarray, filters: list[np.ndarray],
          biases: list[np.ndarray | None] | None = None, sides: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    sources = [x]
    for op, w, b in zip(config.ops, filters, biases or [None] * len(filters)):
        sources.append(epilogue(apply(sources[-1], w, op, sides), op, b, sources, sides))
    return sources[-1]


def chain_error_bound(config: Config, x: np.ndarray, filters: list[np.ndarray],
                      unit_roundoff: float = FLOAT32_UNIT_ROUNDOFF,
                      storage_roundoff: float = 0.0, *,
                      biases: list[np.ndarray | None] | None = None,
                      underflow: float = 0.0, sides: Mapping[str, np.ndarray] | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(reference, bound): |kernel - reference| <= bound holds elementwise for any summation order.

    A dot product of n terms accumulated in floating point errs by at most
    gamma_n * sum |x_i * w_i| with gamma_n = n*u / (1 - n*u) (Higham, Accuracy and Stability
    of Numerical Algorithms, 2nd ed., eq. 3.5), with or without FMA. In a chain, op j reads
    op j-1's rounded output, whose error passes through |W_j| and adds to op j's own.
    Storing a result in a narrower type (half storage) adds storage_roundoff * |value|.
    A bias and a residual are one more term each of the sum (|b|, |residual| added to the magnitude); the
    activation scales the bound by its slope and adds its own roundings (kernelgen/ops: a clamp is exact).
    """
    value = x.astype(np.float64)
    values, errors = [value], [np.zeros_like(value)]  # per chain tensor: the exact value, the stored one's bound
    for op, w, b in zip(config.ops, filters, biases or [None] * len(filters)):
        value, error = op_error_bound(op, w, b, values, errors, unit_roundoff, storage_roundoff, underflow, sides)
        values.append(value)
        errors.append(error)
    return value, error


def op_error_bound(op: Conv2d, w: np.ndarray, b: np.ndarray | None, values: list[np.ndarray],
                   errors: list[np.ndarray], unit_roundoff: float = FLOAT32_UNIT_ROUNDOFF,
                   storage_roundoff: float = 0.0, underflow: float = 0.0,
                   sides: Mapping[str, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One op of a chain: (reference, bound) on values[-1] (the op's input, whose stored error is errors[-1]);
    values[K] / errors[K] are what a residual of op K reads (a side input: sides[name], exact as given). With every error zero, the op is held to its own
    rounding alone: the check op by op on a kernel's own intermediates. `underflow`: the absolute error one
    rounding may add below the normal range (half: 2^-25), once per term of the sum and once for the store."""
    value, error = values[-1], errors[-1]
    if op.kind == "mul":  # one rounding of the product; the side input is exact as given
        factor = np.abs(sides[op.scale_by].astype(np.float64))
        result = apply(value, None, op, sides)
        bound = factor * error + unit_roundoff * np.abs(result) + underflow
        return result, bound + storage_roundoff * (np.abs(result) + bound)
    if op.pool:
        return _pool_error_bound(op, value, error, unit_roundoff, storage_roundoff, underflow)
    n_terms = w.shape[1] * w.shape[2] * w.shape[3] + (1 if op.bias else 0) + (1 if op.residual is not None else 0)
    gamma = n_terms * unit_roundoff / (1 - n_terms * unit_roundoff)
    magnitude = conv2d(np.abs(value) + error, np.abs(w), op)
    if op.bias:
        magnitude = magnitude + np.abs(b.astype(np.float64))
    inherited = conv2d(error, np.abs(w), op)
    if op.residual is not None:  # the stored residual: its own error passes through, its size is one more term
        carried = 0.0 if isinstance(op.residual, str) else errors[op.residual]
        magnitude = magnitude + np.abs(residual_of(op, values, sides)) + carried
        inherited = inherited + carried
    error = gamma * magnitude + inherited + (n_terms + 1) * underflow
    pre = conv2d(value, w, op)
    # the activation moves an error of its input by at most its slope and adds its own float32 steps, for an
    # input of the kernel's size (a clamp: exact, the error passes through)
    size = np.abs(epilogue(pre, replace(op, act=IDENTITY), b, values, sides)) + error
    value = epilogue(pre, op, b, values, sides)
    error = op.act.lipschitz() * error + op.act.own_error(size, unit_roundoff, underflow)
    return value, error + storage_roundoff * (np.abs(value) + error)
