"""Exact work and traffic of a schedule, counted per stripe dimension. Pure.

Every count factors into rows x columns x channels, and the stripe loops are a product
(ko_outer x ho_outer x wo_outer), so the sums over stripes are products of per-dimension
sums: a 2048 x 2048 image cut into 8-row stripes costs 256 + 1 terms, not 256 x 1.
Positions outside a tensor (padding, tails) are guarded and neither moved nor computed.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import kernelgen.expr as E
from ..config import Config
from ..layout import Layout
from ..ops import OPS
from ..plan_types import Shape, StripeGeometry, Stripes
from ..plan_types import Halo, LoopOrder, Traffic
from .geometry import channel_striped_input


def _overlap(start: int, count: int, limit: int) -> int:
    return max(0, min(start + count, limit) - max(start, 0))


@dataclass(frozen=True, slots=True)
class Starts:
    """The first row (or column) of a window in stripe k = 0..extent-1: step * k + first."""

    step: int
    first: int
    extent: int

    @classmethod
    def of(cls, expr: E.Expr, var: str, extent: int) -> Starts:
        first = int(E.evaluate(expr, {var: 0}))
        step = int(E.evaluate(expr, {var: 1})) - first if extent > 1 else 0
        return cls(step=step, first=first, extent=extent)

    @classmethod
    def of_affine(cls, affine: tuple[int, int], extent: int) -> Starts:
        """From (step, first) ints (StripeGeometry.row_affines), as `of` from the expression."""
        step, first = affine
        return cls(step=step if extent > 1 else 0, first=first, extent=extent)

    def overlaps(self, count: int, limit: int, skip: int = 0) -> int:
        """Sum over stripes of how many of rows [start + skip, start + count) lie in [0, limit) (_overlaps)."""
        return _overlaps(self, count, limit, skip)


# The schedule search counts thousands of schedules whose rows (or columns) are cut the same few ways: each
# dimension's sums are worked out once.
@lru_cache(maxsize=16384)
def _overlaps(starts: Starts, count: int, limit: int, skip: int) -> int:
    """Sum over stripes of how many of rows [start + skip, start + count) lie in [0, limit).

    In closed form: the overlap of window k is min(s + count, limit) - max(s, 0) with
    s = step * k + first, clipped at 0, so it is linear in k between the four stripes where
    a window starts to touch, enters, leaves or stops touching [0, limit); each piece is an
    arithmetic series. The cost does not grow with the number of stripes nor with padding."""
    a, b, n = starts.step, starts.first + skip, starts.extent
    if n <= 1 or a == 0:
        return n * _overlap(b, count, limit)
    assert a > 0, "stripes advance"
    if count <= 0 or limit <= 0:
        return 0
    breaks = (_ceil_div(-b, a),  # s >= 0 from here: the window starts inside
              _ceil_div(limit - count - b, a),  # s + count >= limit: the window reaches the end
              (-b - count) // a + 1,  # s + count > 0: the window touches [0, limit)
              _ceil_div(limit - b, a))  # s >= limit: the window has left it
    cuts = sorted({0, n, *(min(max(k, 0), n) for k in breaks)})
    total = 0
    for lo, hi in zip(cuts, cuts[1:]):
        s = a * lo + b
        if s + count <= 0 or s >= limit:
            continue
        clipped_end, clipped_start = s + count >= limit, s < 0
        slope = (0 if clipped_end else a) - (0 if clipped_start else a)
        at_zero = (limit if clipped_end else b + count) - (0 if clipped_start else b)
        total += slope * (lo + hi - 1) * (hi - lo) // 2 + at_zero * (hi - lo)
    return total


def _ceil_div(p: int, q: int) -> int:
    return -(-p // q)


# The rows (or columns) of a schedule's windows are cut the same few ways across thousands of candidates: their
# starts and sums are worked out once per cut.
@lru_cache(maxsize=4096)
def _starts(affines: tuple[tuple[int, int], ...], extent: int) -> tuple[Starts, ...]:
    return tuple(Starts.of_affine(affine, extent) for affine in affines)


@lru_cache(maxsize=16384)
def _sums(starts: tuple[Starts, ...], sizes: tuple[int, ...], limits: tuple[int, ...]) -> tuple[int, ...]:
    """Per tensor j, the sum over stripes of the window's positions inside the tensor (Starts.overlaps)."""
    return tuple(start.overlaps(size, limit) for start, size, limit in zip(starts, sizes, limits))


@dataclass(frozen=True, slots=True)
class Work:
    executed_flops: int  # what the schedule computes: halo rows, chain recompute
    traffic: Traffic  # with halo reuse when the schedule asks for it
    reload_input_bytes: int  # input bytes without halo reuse (equal to traffic.input_bytes when reloading)
    op_flops: tuple[int, ...] = ()  # executed_flops op by op (the budget search weighs each by its tiles' speed)
    op_pixels: tuple[int, ...] = ()  # the output pixels those count, op by op (stripes clipped at the tensor's edges)


# Bytes memory delivers beyond a run of a pixel's channels that a stripe reads, where the run is not the whole
# pixel: the adjacent line and the lines the stream prefetcher runs ahead into. Fitted to a lone depthwise 3x3 read
# by channel stripes, cold, against one stripe of whole pixels (time ratios): 112x112x96 in runs of 32, 64, 128 and
# 192 bytes took 3.5x, 2.3x, 1.8x and 1.9x as long; 56x56x512 in runs of 128, 256 and 512 bytes 1.55x, 1.14x and
# 1.04x. Counting each run as its bytes alone had the search choose 32-byte runs for the first (3.3x slower).
PREFETCHED_BYTES = 128


def input_pixel_bytes(config: Config, shape: Shape, cut: Stripes, reruns: int, ebytes: int) -> int:
    """Bytes memory moves for one input pixel over all channel stripes: the pixel once per stripe (reruns), but a
    lone channelwise op's stripes read their own channels (geometry.channel_striped_input). Where those are whole
    runs of memory (channel planes, channel blocks no wider than the stripe) the pixel moves once; where a pixel's
    channels lie together (NHWC) each stripe's run moves with PREFETCHED_BYTES around it, at most the pixel."""
    pixel = shape[3] * ebytes
    if not channel_striped_input(config):
        return pixel * reruns
    if _channel_run_is_whole(config.input_layout, shape, cut.channels):
        return pixel
    full, tail = divmod(shape[3], cut.channels)
    return sum(min(pixel, run * ebytes + PREFETCHED_BYTES) for run in [cut.channels] * full + [tail] * (tail > 0))


@lru_cache(maxsize=1024)
def _channel_run_is_whole(layout: Layout, shape: Shape, channels: int) -> bool:
    """Whether `channels` consecutive channels of a pixel, read pixel after pixel, are whole runs of the tensor's
    memory: channels are not innermost (planes), or a pixel holds no more of them than that (blocks, or all)."""
    bound = layout.bind(shape)
    def at(w: int, c: int) -> int:
        return int(E.evaluate(bound.flat_offset({"n": E.Const(0), "h": E.Const(0), "w": E.Const(w),
                                                 "c": E.Const(c)}, {}), {}))
    if shape[3] < 2 or at(0, 1) - at(0, 0) != 1:
        return True
    return shape[2] < 2 or at(1, 0) - at(0, 0) <= channels


def count_work(config: Config, shape_list: list[Shape], geo: StripeGeometry, cut: Stripes, ebytes: int) -> Work:
    n_ops = len(config.ops)
    batch = shape_list[0][0]
    if geo.row_affines and geo.col_affines:
        row_starts = _starts(geo.row_affines, cut.ho_extent)
        col_starts = _starts(geo.col_affines, cut.wo_extent)
    else:
        row_starts = tuple(Starts.of(geo.row_start[j], "ho_outer", cut.ho_extent) for j in range(n_ops + 1))
        col_starts = tuple(Starts.of(geo.col_start[j], "wo_outer", cut.wo_extent) for j in range(n_ops + 1))
    row_sums = _sums(row_starts, geo.rows, tuple(shape[1] for shape in shape_list))
    col_sums = _sums(col_starts, geo.cols, tuple(shape[2] for shape in shape_list))

    # Under seed 000's order every channel stripe reloads the input and reruns the earlier ops over all their
    # channels; rows_outer loads and runs them once per row stripe (the last op's channel blocks loop inside).
    reruns = 1 if config.schedule.order is LoopOrder.ROWS_OUTER else cut.ko_extent
    flops = f_elems = residual_elems = 0
    op_flops, op_pixels = [], []
    for j in range(1, n_ops + 1):
        op = config.ops[j - 1]
        kind = OPS[op.kind]
        k_j = shape_list[j][3]
        taps = kind.taps(op, shape_list[j - 1][3])  # one group's channels over the window
        channels = k_j * reruns if j < n_ops else k_j
        op_flops.append(row_sums[j] * col_sums[j] * channels * taps * kind.FLOPS_PER_TAP * batch)
        op_pixels.append(row_sums[j] * col_sums[j] * batch)
        flops += op_flops[-1] // batch
        # the input (or a side input) read where this op's outputs are written (op K's: in its cache)
        if op.residual == 0 or isinstance(op.residual, str):
            residual_elems += row_sums[j] * col_sums[j] * channels
        # a bias is read per stripe like its filter: one value per output channel (a pool reads neither)
        f_elems += cut.ho_extent * cut.wo_extent * channels * kind.filter_reads(op, shape_list[j - 1][3])
    _, h0, _, c0 = shape_list[0]
    reload_rows = row_sums[0]
    loaded_rows = reload_rows
    if config.schedule.halo is Halo.REUSE and geo.halo_rows:
        # After the first stripe of each column of stripes only the rows below the shared halo arrive.
        keep, first = geo.halo_rows, row_starts[0]
        rest = Starts(step=first.step, first=first.first + first.step, extent=first.extent - 1)
        loaded_rows = _overlap(first.first, geo.rows[0], h0) + rest.overlaps(geo.rows[0] - keep, h0, skip=keep)
    input_scale = col_sums[0] * input_pixel_bytes(config, tuple(shape_list[0]), cut, reruns, ebytes) * batch
    out_elems = row_sums[n_ops] * col_sums[n_ops] * shape_list[-1][3]
    traffic = Traffic(input_bytes=loaded_rows * input_scale + residual_elems * batch * ebytes,
                      filter_bytes=f_elems * batch * ebytes,
                      output_bytes=out_elems * batch * ebytes)
    return Work(executed_flops=flops * batch, traffic=traffic, reload_input_bytes=reload_rows * input_scale,
                op_flops=tuple(op_flops), op_pixels=tuple(op_pixels))
