"""A pooling op of the chain as its own __kernel: one work-item per output element (n, oh, ow, c), its window read
from the source buffer (positions outside the input skipped: never the maximum, and counted out of the mean unless
count_include_pad), the result stored to the destination buffer. Pools move one value per tap: memory-bound, so the
plain element-per-item form is what they need."""
from __future__ import annotations

import math

import kernelgen.expr as E
from ...plan import OpGeometry
from ...layout import PadKind
from ...planner.geometry import channel_cover
from ...planner.packing import c_float
from .addressing import c_text, flat
from .model import Kernel, Param, PoolBody, PoolOp, Types

POOL_LOCAL = 64  # work-items per group: any size works; a multiple of PoCL's and GPUs' SIMD widths


def pool_kernel(name: str, op: PoolOp, half_storage: bool) -> Kernel:
    geo: OpGeometry = op.geo
    t = Types(half_math=False, half_storage=half_storage)
    n, oh, ow, c = geo.out_shape
    _, h, w, _ = geo.in_shape
    # a layout whose channel padding holds a value gets it here (a consumer may read the padding against zero
    # filter channels): the work-items walk the padded channels too
    walked = channel_cover(op.dest.layout) if op.dest.layout.layout.pad_kind is PadKind.VALUE else c
    total = n * oh * ow * walked
    glob = math.ceil(total / POOL_LOCAL) * POOL_LOCAL
    out_bounds = {"n": (0, n - 1), "oh": (0, oh - 1), "ow": (0, ow - 1), "c": (0, walked - 1)}
    in_bounds = {"n": (0, n - 1), "ih": (0, h - 1), "iw": (0, w - 1), "c": (0, c - 1)}
    source = flat(op.source.layout, {"n": E.Var("n"), "h": E.Var("ih"), "w": E.Var("iw"), "c": E.Var("c")},
                  in_bounds)
    dest = flat(op.dest.layout, {"n": E.Var("n"), "h": E.Var("oh"), "w": E.Var("ow"), "c": E.Var("c")}, out_bounds)
    kh, kw = geo.kernel
    scale = {}
    if op.scale is not None:
        channel = {"n": E.Var("n"), "h": E.Const(0), "w": E.Const(0), "c": E.Var("c")}
        scale = dict(scale=op.scale.name, scale_offset=c_text(flat(op.scale.layout, channel, out_bounds)))
    pad = dict(channels=c, pad_value=c_float(op.dest.layout.layout.pad_value)) if walked > c else {}
    body = PoolBody(types=t, total=total, decode=(("n", oh * ow * walked, n), ("oh", ow * walked, oh),
                                                  ("ow", walked, ow), ("c", 1, walked)), **pad,
                    kernel=geo.kernel, stride=geo.stride, pad=(geo.pad[0], geo.pad[1]), extent=(h, w),
                    maximum=geo.kind == "maxpool",
                    divisor=c_float(kh * kw) if geo.count_include_pad else "(float)count",
                    source=op.source.name, source_offset=c_text(source), dest=op.dest.name, dest_offset=c_text(dest),
                    **scale)
    reads = (op.source, *([op.scale] if op.scale is not None else []))
    doc = (f"{geo.label}: {list(geo.in_shape)} -> {list(geo.out_shape)}, window {kh}x{kw}, stride "
           f"{list(geo.stride)}, pad {list(geo.pad)}; one work-item per output element; NDRange [{glob}] / "
           f"[{POOL_LOCAL}]")
    return Kernel(name=f"{name}_{geo.kind}{geo.index}", doc=doc, element=t.element,
                  params=(*(Param(name=s.name, kind=s.kind, write=False) for s in reads),
                          Param(name=op.dest.name, kind=op.dest.kind, write=True)),
                  args=(*(s.name for s in reads), op.dest.name), global_size=(glob,), local_size=(POOL_LOCAL,),
                  body=body)
