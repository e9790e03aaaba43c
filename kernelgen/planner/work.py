"""Exact work and traffic of a schedule, counted per stripe dimension. Pure.

Every count factors into rows x columns x channels, and the stripe loops are a product
(ko_outer x ho_outer x wo_outer), so the sums over stripes are products of per-dimension
sums: a 2048 x 2048 image cut into 8-row stripes costs 256 + 1 terms, not 256 x 1.
Positions outside a tensor (padding, tails) are guarded and neither moved nor computed.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import expr as E
from ..config import Config
from .geometry import Geometry, Shape, Stripes
from ..plan import Traffic


def _overlap(start: int, count: int, limit: int) -> int:
    return max(0, min(start + count, limit) - max(start, 0))


def _starts(expr: E.Expr, var: str, extent: int) -> list[int]:
    return [int(E.evaluate(expr, {var: i})) for i in range(extent)]


@dataclass(frozen=True, slots=True)
class Work:
    executed_flops: int  # what the schedule computes: halo rows, chain recompute
    traffic: Traffic  # with halo reuse when the schedule asks for it
    reload_input_bytes: int  # input bytes without halo reuse (equal to traffic.input_bytes when reloading)


def count_work(config: Config, shape_list: list[Shape], geo: Geometry, cut: Stripes, ebytes: int) -> Work:
    n_ops = len(config.ops)
    batch = shape_list[0][0]
    row_starts = [_starts(geo.row_start[j], "ho_outer", cut.ho_extent) for j in range(n_ops + 1)]
    col_starts = [_starts(geo.col_start[j], "wo_outer", cut.wo_extent) for j in range(n_ops + 1)]

    def rows_in(j: int) -> int:
        return sum(_overlap(r, geo.rows[j], shape_list[j][1]) for r in row_starts[j])

    def cols_in(j: int) -> int:
        return sum(_overlap(c, geo.cols[j], shape_list[j][2]) for c in col_starts[j])

    macs = f_elems = 0
    for j in range(1, n_ops + 1):
        op = config.ops[j - 1]
        k_j = shape_list[j][3]
        taps = shape_list[j - 1][3] * op.kernel[0] * op.kernel[1]
        # Earlier ops compute all their channels once per output-channel stripe (seed 000's order).
        channels = k_j * cut.ko_extent if j < n_ops else k_j
        macs += rows_in(j) * cols_in(j) * channels * taps
        f_elems += cut.ho_extent * cut.wo_extent * channels * taps
    _, h0, _, c0 = shape_list[0]
    reload_rows = rows_in(0)
    loaded_rows = reload_rows
    if config.schedule.halo == "reuse" and geo.halo_rows:
        # After the first stripe of each column of stripes only the rows below the shared halo arrive.
        keep = geo.halo_rows
        loaded_rows = sum(_overlap(r, geo.rows[0], h0) if i == 0 else _overlap(r + keep, geo.rows[0] - keep, h0)
                          for i, r in enumerate(row_starts[0]))
    input_scale = cols_in(0) * c0 * cut.ko_extent * batch * ebytes
    out_elems = rows_in(n_ops) * cols_in(n_ops) * shape_list[-1][3]
    traffic = Traffic(input_bytes=loaded_rows * input_scale, filter_bytes=f_elems * batch * ebytes,
                      output_bytes=out_elems * batch * ebytes)
    return Work(executed_flops=2 * macs * batch, traffic=traffic, reload_input_bytes=reload_rows * input_scale)
