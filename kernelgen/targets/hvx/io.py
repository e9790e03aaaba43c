"""The input cache read and the output write-back of the hvx kernel (element units), from the plan's stripe
geometry. Split from plan.py."""
from __future__ import annotations

from dataclasses import dataclass

from ...plan_types import Plan


@dataclass(frozen=True, slots=True, kw_only=True)
class IoGeo:
    """The input cache read and the output write-back."""

    in_rows: int
    in_cols: int
    in_wb: int  # window column blocks
    in_cb: int
    in_h: int
    in_w: int
    in_c: int
    in_row_a: int
    in_row_b: int
    in_col_off: int  # window col = global col + in_col_off
    in_g_wb: int  # column blocks of the global input tensor
    in_image: int  # elements of one batch image of the input tensor
    in_chunk_cb: int  # channel blocks the input cache holds: all of them, or one chunk's (schedule.c_split)
    chunks: int  # input-channel chunks
    out_rows: int
    out_h: int
    out_w: int
    out_k: int
    out_kb: int
    out_row_a: int
    out_win_wb: int
    out_g_wb: int
    out_image: int


def io_geometry(plan: Plan) -> IoGeo:
    geo = plan.geometry
    batch, h, w, c = geo.shapes[0]
    _, oh, ow, ok = geo.shapes[-1]
    a, b = geo.row_affine(0)
    out_a, _ = geo.row_affine(len(geo.shapes) - 1)
    in_tensor, out_tensor = plan.tensor("input").layout, plan.tensor("output").layout
    chunk_cb = plan.c_block // 32 if plan.c_block else -(-c // 32)
    return IoGeo(in_rows=geo.rows[0], in_cols=geo.cols[0], in_wb=-(-geo.cols[0] // 8), in_cb=-(-c // 32),
                 in_chunk_cb=chunk_cb, chunks=plan.c_split,
                 in_h=h, in_w=w, in_c=c, in_row_a=a, in_row_b=b, in_col_off=-geo.col_start[0].value,
                 in_g_wb=-(-w // 8), in_image=in_tensor.size // batch, out_rows=geo.rows[-1], out_h=oh,
                 out_w=ow, out_k=ok, out_kb=-(-ok // 32), out_row_a=out_a, out_win_wb=-(-ow // 8),
                 out_g_wb=-(-ow // 8), out_image=out_tensor.size // batch)
