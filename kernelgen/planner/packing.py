"""Loop trees for the emitted pack/unpack helpers and for writing layout padding.

Packing walks the logical tensor and stores through the layout's index map; padding is
written by walking the logical domain grown to whole blocks (layout.padding_cover) and
storing pad_value where a coordinate lies past the tensor, so no inverse map is needed.
"""
from __future__ import annotations

import kernelgen.expr as E
from ..layout import PadKind, TensorLayout, padding_cover
from ..ops.dialect import c_float  # noqa: F401 (its older home: other modules import it from here)
from ..plan_types import Function, Guard, Loop, Node, Param, Section, Stmt


def _nest(dims: tuple[str, ...], extents: tuple[int, ...], body: tuple[Node, ...]) -> Node:
    node: tuple[Node, ...] = body
    for dim, extent in reversed(list(zip(dims, extents))):
        node = (Loop(var=dim, extent=extent, body=node),)
    return node[0]


def _logical_offset(dims: tuple[str, ...], shape: tuple[int, ...]) -> str:
    terms, stride = [], 1
    for dim, extent in reversed(list(zip(dims, shape))):
        terms.append(E.mul(E.Var(dim), stride))
        stride *= extent
    return E.to_c(E.add(*reversed(terms)))


def padding_fill(layout: TensorLayout, array: str, ctype: str) -> Node:
    dims = layout.layout.dims
    grown = padding_cover(layout)
    bounds = {d: (0, n - 1) for d, n in zip(dims, grown)}
    offset = layout.offset_c({d: E.Var(d) for d in dims}, bounds)
    outside = " || ".join(f"{d} >= {n}" for d, n, g in zip(dims, layout.logical_shape, grown) if g > n)
    if not outside:
        raise ValueError(f"padding_fill on {layout.layout.source!r}, which has no padding: callers check first")
    store = Stmt(code=f"{array}[{offset}] = {c_float(layout.layout.pad_value)};",
                 summary=f"{array}[...] = pad_value")
    return Section(label=f"layout padding of {array} holds pad_value {layout.layout.pad_value:g}",
                   body=(_nest(dims, grown, (Guard(cond=outside, body=(store,)),)),))


def pack_function(name: str, layout: TensorLayout, logical_layout: str, ctype: str) -> Function:
    dims = layout.layout.dims
    bounds = {d: (0, n - 1) for d, n in zip(dims, layout.logical_shape)}
    store = Stmt(code=f"physical[{layout.offset_c({d: E.Var(d) for d in dims}, bounds)}] = "
                      f"logical[{_logical_offset(dims, layout.logical_shape)}];",
                 summary="physical[...] = logical[...]")
    body: list[Node] = []
    if layout.layout.pad_kind is PadKind.VALUE and layout.padding:
        body.append(padding_fill(layout, "physical", ctype))
    body.append(_nest(dims, layout.logical_shape, (store,)))
    return Function(name=name, doc=f"{logical_layout} {list(layout.logical_shape)} -> {layout.layout.name} "
                                   f"{list(layout.physical_shape)}",
                    params=(Param(name="logical", ctype=f"const {ctype} *restrict"),
                            Param(name="physical", ctype=f"{ctype} *restrict")),
                    prologue=(), body=tuple(body))


def unpack_function(name: str, layout: TensorLayout, ctype: str) -> Function:
    dims = layout.layout.dims
    bounds = {d: (0, n - 1) for d, n in zip(dims, layout.logical_shape)}
    store = Stmt(code=f"logical[{_logical_offset(dims, layout.logical_shape)}] = "
                      f"physical[{layout.offset_c({d: E.Var(d) for d in dims}, bounds)}];",
                 summary="logical[...] = physical[...]")
    return Function(name=name, doc=f"{layout.layout.name} {list(layout.physical_shape)} -> NHWC "
                                   f"{list(layout.logical_shape)}",
                    params=(Param(name="physical", ctype=f"const {ctype} *restrict"),
                            Param(name="logical", ctype=f"{ctype} *restrict")),
                    prologue=(), body=(_nest(dims, layout.logical_shape, (store,)),))
