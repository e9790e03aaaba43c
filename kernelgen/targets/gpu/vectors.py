"""The proof that a layout keeps a vector's lanes together, so that one vector access (OpenCL's vload4 / vstore4,
a GLSL vec4 or texel) touches the same elements as `width` scalar ones. Two strengths, one proof:

- aligned (Vulkan's vec4 buffers and texels, whose index counts vectors): `width` consecutive elements along the
  axis, from a multiple of `width`, are contiguous and start at a multiple of `width`, and the layout has slots
  up to the next multiple of `width`;
- lanes_together (OpenCL's vload at any element offset): every channel c sits (c % width) elements after channel
  c - c % width of the same pixel, the partial last group included, wherever the group starts.

An aligned layout keeps its lanes together, so the second asks the first, and checks element by element only a
layout the symbolic proof cannot settle."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

import kernelgen.expr as E
from ...layout import LayoutError, TensorLayout

EXHAUSTIVE_LIMIT = 1 << 20  # elements a non-separable layout is checked at, one by one


def aligned(tl: TensorLayout, axis: int, width: int = 4) -> bool:
    """Decided symbolically: with the dim written width*q + r (r in [0, width)), the flattened offset must
    simplify to r plus terms that are all multiples of `width`."""
    shape = list(tl.logical_shape)
    shape[axis] = -(-shape[axis] // width) * width
    try:
        grown = tl.layout.bind(tuple(shape))
    except LayoutError:  # a layout the grown shape does not fit
        return False
    if grown.flat_shape != tl.flat_shape:
        return False
    dims = tl.layout.dims
    bounds = {d: (0, n - 1) for d, n in zip(dims, shape)} | {"q_": (0, shape[axis] // width - 1),
                                                             "r_": (0, width - 1)}
    index = {d: E.Var(d) for d in dims} | {dims[axis]: E.add(E.mul(E.Var("q_"), width), E.Var("r_"))}
    const, terms = E._affine(E.simplify(grown.flat_offset(index, bounds), bounds))
    lane = {atom: coef for atom, coef in terms.items() if "r_" in E.variables(atom)}
    if any(E.variables(atom) != {"r_"} for atom in lane):
        return False  # the lane offset would depend on other coordinates
    rest_aligned = const % width == 0 and all(coef % width == 0 for atom, coef in terms.items() if atom not in lane)
    lanes = [sum(coef * E.evaluate(atom, {"r_": r}) for atom, coef in lane.items()) for r in range(width)]
    return rest_aligned and lanes == list(range(width))


@lru_cache(maxsize=64)
def lanes_together(layout: TensorLayout, n: int = 4) -> bool:
    """Of an NHWC-indexed activation: exact when each term of the offset depends on one dim at most (only the
    channel terms matter); otherwise checked element by element up to EXHAUSTIVE_LIMIT elements, and answered
    False past it (lane by lane addressing is always correct, only slower). A tensor with 2 channels stored NCHW
    has no full group, and its lanes are still far apart."""
    if layout.layout.dims[3:4] == ("c",) and aligned(layout, 3, n):
        return True
    shape = layout.logical_shape
    bounds = {d: (0, e - 1) for d, e in zip("nhwc", shape)}
    offset = E.simplify(layout.flat_offset({d: E.Var(d) for d in "nhwc"}, bounds), bounds)
    terms = offset.terms if isinstance(offset, E.Add) else (offset,)
    channel = np.arange(shape[3])
    if all(len(E.variables(t)) <= 1 for t in terms):
        values = np.broadcast_to(np.asarray(E.evaluate(E.add(*(t for t in terms if "c" in E.variables(t)),
                                                                E.Const(0)), {"c": channel})), channel.shape)
        return bool(np.array_equal(values - channel % n, values[channel - channel % n]))
    if layout.logical_size > EXHAUSTIVE_LIMIT:
        return False
    grid = np.meshgrid(*(np.arange(e) for e in shape), indexing="ij")
    values = np.broadcast_to(np.asarray(E.evaluate(offset, dict(zip("nhwc", grid)))), grid[0].shape)
    return bool(np.array_equal(values - channel % n, values[..., channel - channel % n]))
