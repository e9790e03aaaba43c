"""The numpy reference: a conv2d chain in the logical NHWC / OIHW layouts, in float64,
plus a rigorous bound on the float32 kernel's rounding error for every output element.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from .config import Config, Conv2d
from .ops import OPS
from .ops.op import epilogue  # every op's bias, residual and activation (the op-by-op dump calls it here)

# Unit roundoff of IEEE binary32: round-to-nearest of a float32 operation errs by at most this factor.
FLOAT32_UNIT_ROUNDOFF = 2.0 ** -24
# IEEE binary16: half storage rounds each stored value by at most this factor, fp16 arithmetic each operation.
HALF_UNIT_ROUNDOFF = 2.0 ** -11
# Below 2^-14 half values are subnormal, 2^-24 apart: rounding there errs by up to 2^-25 absolute, whatever the
# value (a relative bound alone would fail a correct kernel on outputs near zero).
HALF_UNDERFLOW = 2.0 ** -25


def apply(x: np.ndarray, w: np.ndarray | None, op: Conv2d, sides: Mapping[str, np.ndarray] | None = None
          ) -> np.ndarray:
    """The op before its epilogue (its kind's reference, kernelgen/ops): a conv with its filter, a pool (w None),
    or a mul by a side input."""
    return OPS[op.kind].reference(x, w, op, sides)


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
    value, bound = OPS[op.kind].error_bound(op, w, b, values, errors, unit_roundoff, underflow, sides)
    return value, bound + storage_roundoff * (np.abs(value) + bound)  # the store in a narrower type (half)
