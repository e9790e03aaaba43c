"""A pooling op of the chain as its own __kernel: one work-item per output element (n, oh, ow, c), its window read
from the source buffer (positions outside the input skipped: never the maximum, and counted out of the mean unless
count_include_pad), the result stored to the destination buffer: gpu/pool.py's work, as an OpenCL kernel record."""
from __future__ import annotations

from ...ops import FLOAT32_MAX
from ...plan_types import OpGeometry
from ..gpu.api import OPENCL
from ..gpu.pool import pool_work
from .model import Kernel, Param, PoolBody, PoolOp, Types


def _literal(value: float) -> str:
    """OpenCL C's float literal, naming the ends of the float range (float.h) as the kernels always have."""
    return {FLOAT32_MAX: "FLT_MAX", -FLOAT32_MAX: "-FLT_MAX"}.get(value) or OPENCL.dialect.literal(value)


def pool_kernel(name: str, op: PoolOp, half_storage: bool) -> Kernel:
    geo: OpGeometry = op.geo
    t = Types(half_math=False, half_storage=half_storage)
    n, oh, ow, c = geo.out_shape
    _, h, w, _ = geo.in_shape
    work = pool_work(OPENCL, geo, op.source.layout, op.dest.layout, op.scale.layout if op.scale is not None else None)
    walked = work.channels
    glob, local = work.global_items, work.work_group
    kh, kw = geo.kernel
    scale = dict(scale=op.scale.name, scale_offset=work.scale_index) if op.scale is not None else {}
    pad = dict(channels=c, pad_value=OPENCL.dialect.literal(op.dest.layout.layout.pad_value)) if walked > c else {}
    body = PoolBody(types=t, total=work.total, decode=(("n", oh * ow * walked, n), ("oh", ow * walked, oh),
                                                       ("ow", walked, ow), ("c", 1, walked)), **pad,
                    kernel=geo.kernel, stride=geo.stride, pad=(geo.pad[0], geo.pad[1]), extent=(h, w),
                    init=_literal(work.start), step=work.step,
                    divisor=work.divisor, source=op.source.name,
                    source_offset=work.source_index, dest=op.dest.name, dest_offset=work.dest_index, **scale)
    reads = (op.source, *([op.scale] if op.scale is not None else []))
    doc = (f"{geo.label}: {list(geo.in_shape)} -> {list(geo.out_shape)}, window {kh}x{kw}, stride "
           f"{list(geo.stride)}, pad {list(geo.pad)}; one work-item per output element; NDRange [{glob}] / "
           f"[{local}]")
    return Kernel(name=f"{name}_{geo.kind}{geo.index}", doc=doc, element=t.element,
                  params=(*(Param(name=s.name, kind=s.kind, write=False) for s in reads),
                          Param(name=op.dest.name, kind=op.dest.kind, write=True)),
                  args=(*(s.name for s in reads), op.dest.name), global_size=(glob,), local_size=(local,),
                  body=body)
