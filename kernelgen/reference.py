"""The numpy reference: a conv2d chain in the logical NHWC / OIHW layouts, in float64,
plus a rigorous bound on the float32 kernel's rounding error for every output element.
"""
from __future__ import annotations

import numpy as np

from .config import Config, Conv2d

# Unit roundoff of IEEE binary32: round-to-nearest of a float32 operation errs by at most this factor.
FLOAT32_UNIT_ROUNDOFF = 2.0 ** -24


def conv2d(x: np.ndarray, w: np.ndarray, op: Conv2d) -> np.ndarray:
    """NHWC x OIHW -> NHWC in float64; zero padding, stride and dilation as the op says."""
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


def chain(config: Config, x: np.ndarray, filters: list[np.ndarray]) -> np.ndarray:
    for op, w in zip(config.ops, filters):
        x = conv2d(x, w, op)
    return x


def chain_error_bound(config: Config, x: np.ndarray, filters: list[np.ndarray],
                      unit_roundoff: float = FLOAT32_UNIT_ROUNDOFF,
                      storage_roundoff: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(reference, bound): |kernel - reference| <= bound holds elementwise for any summation order.

    A dot product of n terms accumulated in floating point errs by at most
    gamma_n * sum |x_i * w_i| with gamma_n = n*u / (1 - n*u) (Higham, Accuracy and Stability
    of Numerical Algorithms, 2nd ed., eq. 3.5), with or without FMA. In a chain, op j reads
    op j-1's rounded output, whose error passes through |W_j| and adds to op j's own.
    Storing a result in a narrower type (half storage) adds storage_roundoff * |value|.
    """
    value = x.astype(np.float64)
    error = np.zeros_like(value)
    for op, w in zip(config.ops, filters):
        n_terms = w.shape[1] * w.shape[2] * w.shape[3]
        gamma = n_terms * unit_roundoff / (1 - n_terms * unit_roundoff)
        magnitude = conv2d(np.abs(value) + error, np.abs(w), op)
        error = gamma * magnitude + conv2d(error, np.abs(w), op)
        value = conv2d(value, w, op)
        error = error + storage_roundoff * (np.abs(value) + error)
    return value, error
