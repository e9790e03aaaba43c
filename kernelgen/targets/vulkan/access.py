"""How a Vulkan shader addresses a tensor: vec4 chunks or scalars of a layout's flat buffer, as GLSL index text,
and the epilogue's literals (the residual's access, the clamp's and the gates' constants). Split from plan.py."""
from __future__ import annotations

import math
from dataclasses import dataclass

import kernelgen.expr as E
from ...layout import PadKind, TensorLayout
from ...plan_types import OpGeometry
from ..gpu.api import glsl_dialect, glsl_float  # noqa: F401 - plan.py imports them from here
from ..gpu.vectors import aligned as vec_ok  # the vec4 proof; plan.py and filters.py import it from here

# vec4 reads go through uniform texel buffers (texelFetch): lavapipe fetches texels with
# gathers, ~4x cheaper than its per-lane storage-buffer loop (measured: ~20 vs ~60-95 ns
# per vec4 per subgroup and core). Tensors above lavapipe's maxTexelBufferElements
# (2^27 texels) fall back to storage buffers.
TEXEL_LIMIT = 1 << 27


@dataclass(frozen=True, slots=True, kw_only=True)
class Access:
    """How a shader touches one tensor: as vec4 chunks or as scalars, plus index text."""

    buffer: str  # GLSL array name
    vec4: bool
    index: tuple[str, ...]  # vec4 mode: one vec4 index; scalar mode: 4 scalar indices (channel + 0..3)
    elements: int  # buffer length in its GLSL element type
    texel: bool = False  # read through a uniform texel buffer (samplerBuffer + texelFetch), vec4 only
    # a 3-channel tensor whose pixels are 3 contiguous elements, read one RGB texel per pixel (texel index `pixel`;
    # the binding's view has 3-component texels): lavapipe gathers once per pixel instead of 3 times
    rgb: bool = False
    pixel: str = ""


def channel_padding_only(tl: TensorLayout) -> bool:
    shape = list(tl.logical_shape)
    shape[3] = -(-shape[3] // 4) * 4
    return tl.layout.bind(tuple(shape)).padding == 0


def index_text(tl: TensorLayout, index: dict[str, E.Expr], bounds: dict[str, tuple[int, int]], divide: int = 1) -> str:
    flat = E.simplify(tl.flat_offset(index, bounds), bounds)
    return E.to_c(E.floordiv(flat, divide, bounds) if divide > 1 else flat, shifts=True)


def access(tl: TensorLayout, name: str, axis: int, index: dict[str, E.Expr], chunk: str,
            bounds: dict[str, tuple[int, int]], use_vec4: bool, read: bool = False, scalar_texels: bool = False,
            rgb_ok: bool = False) -> Access:
    """Index text for chunk `chunk` (a variable: channel = 4 * chunk + e) of `axis`; `read`: vec4 reads go
    through texels, and scalar reads too with `scalar_texels` (a device profile's choice)."""
    dim = tl.layout.dims[axis]
    if use_vec4:
        text = index_text(tl, {**index, dim: E.mul(E.Var(chunk), 4)}, bounds, divide=4)
        elements = math.prod(tl.flat_shape) // 4
        return Access(buffer=name, vec4=True, index=(text,), elements=elements,
                      texel=read and elements <= TEXEL_LIMIT)
    texts = tuple(index_text(tl, {**index, dim: E.add(E.mul(E.Var(chunk), 4), E.Const(e))},
                         {**bounds, chunk: (0, max(0, (tl.logical_shape[axis] - 1 - e) // 4))})
                  for e in range(4))
    # Scalars through texels (element i is lane i % 4 of texel i / 4): on lavapipe a texelFetch is one gather, a
    # storage-buffer read a per-lane loop (an RGB conv, 3 scalars per pixel, ran 0.04 of the probe with storage
    # reads, 0.65 through texels); on Adreno's ir3 the same kernel took 32 registers instead of 19 (6 waves, not
    # 10), so GPU profiles keep storage reads.
    elements = math.prod(tl.flat_shape)
    if read and scalar_texels and rgb_ok and tl.logical_shape[axis] == 3 and vec_ok(tl, axis, width=3) \
            and elements // 3 <= TEXEL_LIMIT:
        # an RGB conv's input (3x3 s2 225x225x3 -> 32) gathered 3 scalars per pixel through 4-element texels
        pixel = index_text(tl, {**index, dim: E.Const(0)}, bounds, divide=3)
        return Access(buffer=name, vec4=False, index=texts, elements=elements, texel=True, rgb=True, pixel=pixel)
    return Access(buffer=name, vec4=False, index=texts, elements=elements,
                  texel=read and scalar_texels and -(-elements // 4) <= TEXEL_LIMIT)


def residual_access(input_tl: TensorLayout, op: OpGeometry) -> Access:
    """The residual (the chain's input or an earlier op's output) read where this op's output is written
    (same shape): a vec4 chunk when its layout keeps 4 channels together (padding lanes land on output
    lanes that are never stored or get pad_value), else 4 scalars, the ones past the channels not read."""
    n, out_h, out_w, out_c = op.out_shape
    bounds = {"n": (0, n - 1), "oh": (0, out_h - 1), "ow": (0, out_w - 1), "oc4": (0, -(-out_c // 4) - 1)}
    use4 = vec_ok(input_tl, 3) and (out_c % 4 == 0 or input_tl.layout.pad_kind is not PadKind.NONE)
    return access(input_tl, "res", 3, {"n": E.Var("n"), "h": E.Var("oh"), "w": E.Var("ow")}, "oc4", bounds, use4)


def quotient_text(name: str, divisor: int, limit: int) -> str:
    """GLSL for `name / divisor` over 0 <= name < limit without a division: a shift, or a multiply by
    ceil(2^s / divisor) and a shift, the first s exact over the whole range. A GPU compiler emits the signed
    division of a variable as a multiply-high, which Mali's Valhall has not: a grouped conv's two group
    lookups per load took it from 32 to 64 work registers (half occupancy)."""
    if divisor == 1:
        return name
    if divisor & (divisor - 1) == 0:
        return f"({name} >> {divisor.bit_length() - 1})"
    values = range(limit)
    for shift in range(1, 31):
        factor = -(-(1 << shift) // divisor)
        if (limit - 1) * factor >= 1 << 31:
            break
        if all((v * factor) >> shift == v // divisor for v in values):
            return f"(({name} * {factor}) >> {shift})"
    return f"({name} / {divisor})"
