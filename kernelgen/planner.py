"""plan(config) -> Plan: seed 000's fused conv2d chain schedule, generalised. Pure.

Structure (seed 000): the last op's output is cut into stripes of k_split x k_block
output channels (ko_outer) and h_split x h_block rows (ho_outer). For each stripe:
read the input rows the whole chain needs (halo included) into the input cache; run
every earlier op over all of its output channels (its own ko_outer_<j> loop, each step
reading k_split filter blocks into the shared filter cache) into a temp-output cache;
then the last op into the output cache, and write that back.

Caches hold logical windows (rows x columns x channels) in their tensor's own layout, so
any layout works and the seed's sizes fall out: a window of 20 rows x 64 columns x 128
channels in NHWC8h8w32c is 3 x 8 x 4 blocks of 8x8x32 = 196608 elements. Spatial padding
is applied while filling caches (zeros outside the tensor), for the first op as for the
ones inside the chain.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from . import expr as E
from .config import Config
from .layout import PadKind, TensorLayout
from .plan import Cache, Function, Guard, Loop, Node, OpSummary, Param, Plan, Section, Stmt, Tensor, Traffic
from .packing import pack_function, padding_fill, unpack_function

ELEMENT_BYTES = {"float32": 4, "float16": 2, "uint8": 1}
C_TYPES = {"float32": "float", "float16": "_Float16", "uint8": "uint8_t"}
ZERO = {"float32": "0.0f", "float16": "0.0f", "uint8": "0"}
ACC_TYPES = {"float32": "float", "float16": "float", "uint8": "int32_t"}
# Hexagon DMA and VTCM want 2048-byte aligned buffers; other targets lose nothing by it.
ALIGNMENT_BYTES = 2048


@dataclass(frozen=True, slots=True)
class _Geometry:
    """Per tensor of the chain (index 0 = input, j = output of op j): the stripe window."""

    rows: tuple[int, ...]  # R_j: rows of tensor j one stripe needs
    cols: tuple[int, ...]  # Wc_j: columns held (all output columns plus the consumer's padding)
    col_offset: tuple[int, ...]  # local column = global column + col_offset[j]
    row_start: tuple[E.Expr, ...]  # first global row of the window, in terms of ho_outer


def plan(config: Config) -> Plan:
    asked = config.schedule
    config = fit_schedule(config)
    s = config.schedule
    shapes = _shapes(config)
    n_ops = len(config.ops)
    ks_ch = s.k_split * s.k_block  # output channels per stripe
    hs_rows = s.h_split * s.h_block  # output rows per stripe
    batch, out_h, out_w, out_k = shapes[-1]
    ko_extent = math.ceil(out_k / ks_ch)
    ho_extent = math.ceil(out_h / hs_rows)
    ctype, zero, ebytes = C_TYPES[config.dtype], ZERO[config.dtype], ELEMENT_BYTES[config.dtype]

    # Tensors: global ones are kernel arguments; intermediates exist only as cache windows.
    tensors = [Tensor(name="input", title="Input", logical_layout="NHWC",
                      layout=config.input_layout.bind(shapes[0]))]
    for j, op in enumerate(config.ops, start=1):
        filt = (op.out_channels, shapes[j - 1][3], *op.kernel)
        tensors.append(Tensor(name=f"filter{j}", title=f"Filter {j}", logical_layout="OIHW",
                              layout=op.filter_layout.bind(filt)))
    tensors.append(Tensor(name="output", title="Output", logical_layout="NHWC",
                          layout=config.ops[-1].output_layout.bind(shapes[-1])))
    intermediates = tuple(
        Tensor(name=f"temp{j}", title="Temp Output" if n_ops == 2 else f"Temp Output {j}", logical_layout="NHWC",
               layout=config.ops[j - 1].output_layout.bind(shapes[j])) for j in range(1, n_ops))

    geo, windows, filter_windows, temp_names, caches = _caches(config, shapes)
    cache_of = {c.name: c for c in caches}

    # The loop nest.
    sources = ["input_cache"] + [cache_of[t].c_name for t in temp_names]
    stripe: list[Node] = [_input_read(config, shapes, geo, windows["input"], tensors[0].layout, zero, batch > 1)]
    for j in range(1, n_ops):
        var = f"ko_outer_{j}"
        kj = shapes[j][3]
        body = (_filter_read(j, var, ks_ch, kj, filter_windows[j - 1], tensors[j].layout, shapes[j - 1][3],
                             config.ops[j - 1].kernel),
                _conv(config, j, shapes, geo, s.k_split, s.k_block, var, sources[j - 1], windows[temp_names[j - 1]],
                      cache_of[temp_names[j - 1]].c_name, filter_windows[j - 1], ACC_TYPES[config.dtype],
                      last=False))
        stripe.append(Loop(var=var, extent=math.ceil(kj / ks_ch), body=body,
                           comment=f"all {kj} output channels of conv2d #{j} before conv2d #{j + 1}"))
    stripe.append(_filter_read(n_ops, "ko_outer", ks_ch, out_k, filter_windows[-1], tensors[n_ops].layout,
                               shapes[-2][3], config.ops[-1].kernel))
    stripe.append(_conv(config, n_ops, shapes, geo, s.k_split, s.k_block, "ko_outer", sources[-1], windows["output"],
                        "output_cache", filter_windows[-1], ACC_TYPES[config.dtype], last=True))
    stripe.append(_write_back(shapes, geo, ks_ch, windows["output"], tensors[-1].layout, batch > 1))
    nest: Node = Loop(var="ko_outer", extent=ko_extent, comment=f"output-channel stripes of {ks_ch}", body=(
        Loop(var="ho_outer", extent=ho_extent, comment=f"output-row stripes of {hs_rows}", body=tuple(stripe)),))
    if batch > 1:
        nest = Loop(var="nb", extent=batch, body=(nest,), comment="batch")
    body: list[Node] = [nest]
    output_tensor = tensors[-1]
    if output_tensor.layout.layout.pad_kind is PadKind.VALUE:
        body.append(padding_fill(output_tensor.layout, "output", ctype))

    params = tuple(Param(name=t.name, ctype=f"{'' if t.name == 'output' else 'const '}{ctype} *restrict")
                   for t in tensors) + (Param(name="workspace", ctype=f"{ctype} *restrict"),)
    prologue = tuple(
        f"{ctype} *const {c.c_name} = {cache_of[c.aliases].c_name if c.aliases else f'workspace + {c.offset}'};"
        + (f" /* {c.note} */" if c.note else "") for c in caches)
    kernel = Function(name=config.name, doc=f"fused chain of {n_ops} conv2d op(s); workspace: "
                                            f"{_workspace_elements(caches)} elements",
                      params=params, prologue=prologue, body=tuple(body))
    helpers = [pack_function(f"{config.name}_pack_{t.name}", t.layout, t.logical_layout, ctype) for t in tensors[:-1]]
    helpers.append(unpack_function(f"{config.name}_unpack_output", output_tensor.layout, ctype))

    ops, flops = [], 0
    for j, op in enumerate(config.ops, start=1):
        macs = math.prod(shapes[j]) * shapes[j - 1][3] * op.kernel[0] * op.kernel[1]
        flops += 2 * macs
        ops.append(OpSummary(index=j, in_shape=shapes[j - 1], out_shape=shapes[j], kernel=op.kernel, stride=op.stride,
                             pad=op.pad, dilation=op.dilation, flops=2 * macs))
    executed, traffic = _count_work(config, shapes, geo, ks_ch, ko_extent, ho_extent, hs_rows, ebytes)
    notes = _notes(config, caches, geo, ko_extent, n_ops)
    if asked.memory_budget is not None:
        fitted = [f"{name}={getattr(s, name)}" for name in ("k_split", "h_split") if getattr(asked, name) is None]
        notes = (f"{' and '.join(fitted) or 'the given splits'} fit memory_budget {asked.memory_budget} bytes "
                 f"(workspace {_workspace_elements(caches) * ebytes} bytes) with the least recompute and traffic",
                 *notes)
    return Plan(name=config.name, config_path=config.path, dtype=config.dtype, ctype=ctype, element_bytes=ebytes,
                k_split=s.k_split, h_split=s.h_split, k_block=s.k_block, h_block=s.h_block, ops=tuple(ops),
                tensors=tuple(tensors), intermediates=intermediates, caches=caches,
                workspace_elements=_workspace_elements(caches), alignment_bytes=ALIGNMENT_BYTES,
                kernel=kernel, helpers=tuple(helpers), flops=flops, executed_flops=executed, traffic=traffic,
                output_pad_kind=output_tensor.layout.layout.pad_kind, notes=notes)


# ---------------------------------------------------------------- schedule fitting

def fit_schedule(config: Config) -> Config:
    """Resolve k_split / h_split left open: the pair whose caches fit memory_budget with the least
    recomputed work, then the least traffic, then the smallest workspace (seed 001: tile to fit)."""
    s = config.schedule
    if s.k_split is not None and s.h_split is not None and s.memory_budget is None:
        return config
    shapes = _shapes(config)
    max_k = min(math.ceil(k / s.k_block) for _, _, _, k in shapes[1:])
    max_h = math.ceil(shapes[-1][1] / s.h_block)
    k_options = [s.k_split] if s.k_split is not None else range(1, max_k + 1)
    h_options = [s.h_split] if s.h_split is not None else range(1, max_h + 1)
    ebytes = ELEMENT_BYTES[config.dtype]
    best: tuple | None = None
    smallest: tuple[int, int, int] | None = None
    for k_split in k_options:
        for h_split in h_options:
            trial = replace(config, schedule=replace(s, k_split=k_split, h_split=h_split))
            geo, *_, caches = _caches(trial, shapes)
            workspace = _workspace_elements(caches) * ebytes
            if smallest is None or workspace < smallest[0]:
                smallest = (workspace, k_split, h_split)
            if s.memory_budget is not None and workspace > s.memory_budget:
                continue
            ks_ch, hs_rows = k_split * s.k_block, h_split * s.h_block
            executed, traffic = _count_work(trial, shapes, geo, ks_ch, math.ceil(shapes[-1][3] / ks_ch),
                                            math.ceil(shapes[-1][1] / hs_rows), hs_rows, ebytes)
            key = (executed, traffic.total, workspace, k_split, h_split)
            best = key if best is None or key < best else best
    if best is None:
        assert smallest is not None
        raise config.problem("schedule.memory_budget",
                             f"expected at least {smallest[0]} bytes: the smallest schedule (k_split={smallest[1]}, "
                             f"h_split={smallest[2]}) needs that much for its caches, got {s.memory_budget}")
    return replace(config, schedule=replace(s, k_split=best[3], h_split=best[4]))


def _caches(config: Config, shapes: list) -> tuple[_Geometry, dict[str, TensorLayout], list[TensorLayout],
                                                    list[str], tuple[Cache, ...]]:
    """The stripe geometry and the cache windows, each in its tensor's layout, carved from the workspace."""
    s = config.schedule
    n_ops = len(config.ops)
    ks_ch, hs_rows = s.k_split * s.k_block, s.h_split * s.h_block
    geo = _geometry(config, shapes, min(hs_rows, shapes[-1][1]))
    windows: dict[str, TensorLayout] = {
        "input": config.input_layout.bind((1, geo.rows[0], geo.cols[0], shapes[0][3]))}
    temp_names = ["temp_output"] if n_ops == 2 else [f"temp_output_{j}" for j in range(1, n_ops)]
    for j in range(1, n_ops):
        windows[temp_names[j - 1]] = config.ops[j - 1].output_layout.bind((1, geo.rows[j], geo.cols[j], shapes[j][3]))
    filter_windows = [op.filter_layout.bind((ks_ch, shapes[j][3], *op.kernel)) for j, op in enumerate(config.ops)]
    windows["output"] = config.ops[-1].output_layout.bind((1, geo.rows[-1], shapes[-1][2], ks_ch))
    caches = _allocate(windows, filter_windows, n_ops, ELEMENT_BYTES[config.dtype])
    return geo, windows, filter_windows, temp_names, caches


# ---------------------------------------------------------------- geometry

def _shapes(config: Config) -> list[tuple[int, int, int, int]]:
    shapes = [config.input_shape]
    for op in config.ops:
        n, h, w, _ = shapes[-1]
        (sh, sw), (kh, kw) = op.stride, op.span
        shapes.append((n, (h + op.pad[0] + op.pad[2] - kh) // sh + 1, (w + op.pad[1] + op.pad[3] - kw) // sw + 1,
                       op.out_channels))
    return shapes


def _geometry(config: Config, shapes: list, last_rows: int) -> _Geometry:
    n_ops = len(config.ops)
    rows, cols, offsets = [0] * (n_ops + 1), [0] * (n_ops + 1), [0] * (n_ops + 1)
    starts: list[E.Expr] = [E.Const(0)] * (n_ops + 1)
    rows[n_ops], cols[n_ops] = last_rows, shapes[n_ops][2]
    hs_rows = config.schedule.h_split * config.schedule.h_block
    starts[n_ops] = E.mul(E.Var("ho_outer"), hs_rows)
    for j in range(n_ops, 0, -1):
        op = config.ops[j - 1]
        (sh, sw), (kh, kw) = op.stride, op.span
        # A window of R output rows reads (R - 1) * stride + span input rows: the halo.
        rows[j - 1] = (rows[j] - 1) * sh + kh
        cols[j - 1] = (shapes[j][2] - 1) * sw + kw
        offsets[j - 1] = op.pad[1]
        starts[j - 1] = E.add(E.mul(starts[j], sh), E.Const(-op.pad[0]))
    return _Geometry(tuple(rows), tuple(cols), tuple(offsets), tuple(starts))


def _allocate(windows: dict[str, TensorLayout], filter_windows: list[TensorLayout], n_ops: int,
              ebytes: int) -> tuple[Cache, ...]:
    align = ALIGNMENT_BYTES // ebytes
    caches: list[Cache] = []
    offset = 0

    def add(name: str, layout: TensorLayout, elements: int, alias: str | None = None, note: str = "") -> None:
        nonlocal offset
        caches.append(Cache(name=name, c_name=f"{name}_cache" if not name.startswith("temp") else name,
                            logical_shape=layout.logical_shape, physical_layout=layout.layout.name,
                            physical_shape=layout.physical_shape, elements=elements,
                            offset=0 if alias else offset, element_bytes=ebytes, aliases=alias, note=note))
        if alias is None:
            offset += -(-elements // align) * align

    add("input", windows["input"], windows["input"].size)
    biggest = max(filter_windows, key=lambda w: w.size)
    add("filter", biggest, biggest.size,
        note="one filter cache, reused by every conv2d of the chain" if n_ops > 1 else "")
    for name, window in windows.items():
        if name.startswith("temp"):
            add(name, window, window.size)
    out = windows["output"]
    if n_ops > 1 and out.size <= windows["input"].size:
        add("output", out, out.size, alias="input", note="reuses the input cache: dead once conv2d #1 has run")
    else:
        add("output", out, out.size)
    return tuple(caches)


def _workspace_elements(caches: tuple[Cache, ...]) -> int:
    align = ALIGNMENT_BYTES // caches[0].element_bytes
    return max(c.offset + -(-c.elements // align) * align for c in caches if c.aliases is None)


# ---------------------------------------------------------------- loop bodies

def _cond(checks: list[tuple[E.Expr, str, int]], bounds: dict[str, tuple[int, int]]) -> list[str]:
    """C comparisons for the (expr, op, limit) checks that the loop bounds cannot prove."""
    out = []
    for expr, op, limit in checks:
        lo, hi = E.interval(expr, bounds)
        if op == ">=" and lo >= limit or op == "<" and hi < limit:
            continue
        out.append(f"{E.to_c(expr)} {op} {limit}")
    return out


def _input_read(config: Config, shapes: list, geo: _Geometry, window: TensorLayout, tensor: TensorLayout,
                zero: str, batched: bool) -> Node:
    _, height, width, channels = shapes[0]
    bounds = _stripe_bounds(config, shapes) | {"ih": (0, geo.rows[0] - 1), "iw": (0, geo.cols[0] - 1),
                                               "ic": (0, channels - 1)}
    row = E.add(geo.row_start[0], E.Var("ih"))
    col = E.add(E.Var("iw"), E.Const(-geo.col_offset[0]))
    local = window.offset_c({"n": E.Const(0), "h": E.Var("ih"), "w": E.Var("iw"), "c": E.Var("ic")}, bounds)
    glob = tensor.offset_c({"n": E.Var("nb") if batched else E.Const(0), "h": row, "w": col, "c": E.Var("ic")}, bounds)
    conds = _cond([(row, ">=", 0), (row, "<", height), (col, ">=", 0), (col, "<", width)], bounds)
    value = f"({' && '.join(conds)}) ? input[{glob}] : {zero}" if conds else f"input[{glob}]"
    stmt = Stmt(code=f"input_cache[{local}] = {value};",
                summary="input_cache[...] = " + ("in bounds ? input[...] : 0" if conds else "input[...]"))
    return Section(label=f"input cache read: {geo.rows[0]} rows x {geo.cols[0]} columns x {channels} channels",
                   body=(Loop(var="ih", extent=geo.rows[0], body=(
                       Loop(var="iw", extent=geo.cols[0], body=(Loop(var="ic", extent=channels, body=(stmt,)),)),)),))


def _filter_read(j: int, ko_var: str, ks_ch: int, out_k: int, window: TensorLayout, tensor: TensorLayout,
                 in_c: int, kernel: tuple[int, int]) -> Node:
    bounds = {ko_var: (0, math.ceil(out_k / ks_ch) - 1), "fk": (0, ks_ch - 1), "fc": (0, in_c - 1),
              "fh": (0, kernel[0] - 1), "fw": (0, kernel[1] - 1)}
    k = E.add(E.mul(E.Var(ko_var), ks_ch), E.Var("fk"))
    local = window.offset_c({"o": E.Var("fk"), "i": E.Var("fc"), "h": E.Var("fh"), "w": E.Var("fw")}, bounds)
    glob = tensor.offset_c({"o": k, "i": E.Var("fc"), "h": E.Var("fh"), "w": E.Var("fw")}, bounds)
    conds = _cond([(k, "<", out_k)], bounds)
    # Channels past the tensor get zeros, so the compute may run whole blocks and drop them at the store.
    value = f"({conds[0]}) ? filter{j}[{glob}] : 0" if conds else f"filter{j}[{glob}]"
    stmt = Stmt(code=f"filter_cache[{local}] = {value};",
                summary=f"filter_cache[...] = {'k in range ? ' if conds else ''}filter{j}[...]{' : 0' if conds else ''}")
    inner: tuple[Node, ...] = (Loop(var="fc", extent=in_c, body=(
        Loop(var="fh", extent=kernel[0], body=(Loop(var="fw", extent=kernel[1], body=(stmt,)),)),)),)
    return Section(label=f"filter #{j} cache read" + (" (reusing the filter cache)" if j > 1 else ""),
                   body=(Loop(var="fk", extent=ks_ch, body=inner),))


def _conv(config: Config, j: int, shapes: list, geo: _Geometry, k_split: int, k_block: int, ko_var: str, src: str,
          dst_window: TensorLayout, dst: str, filt: TensorLayout, ctype: str, *, last: bool) -> Node:
    op = config.ops[j - 1]
    _, out_h, out_w, out_k = shapes[j]
    in_c = shapes[j - 1][3]
    ks_ch = k_split * k_block
    src_window_rows, src_window_cols = geo.rows[j - 1], geo.cols[j - 1]
    bounds = _stripe_bounds(config, shapes) | {
        ko_var: (0, math.ceil(out_k / ks_ch) - 1), "ko_inner": (0, k_split - 1), "oh": (0, geo.rows[j] - 1),
        "ow": (0, geo.cols[j] - 1), "ki": (0, k_block - 1), "rh": (0, op.kernel[0] - 1),
        "rw": (0, op.kernel[1] - 1), "rc": (0, in_c - 1)}
    k_local = E.add(E.mul(E.Var("ko_inner"), k_block), E.Var("ki"))
    k_global = E.add(E.mul(E.Var(ko_var), ks_ch), k_local)
    row = E.add(geo.row_start[j], E.Var("oh"))  # global output row
    col = E.add(E.Var("ow"), E.Const(-geo.col_offset[j]))  # global output column
    in_row = E.add(E.mul(E.Var("oh"), op.stride[0]), E.mul(E.Var("rh"), op.dilation[0]))
    in_col = E.add(E.mul(col, op.stride[1]), E.mul(E.Var("rw"), op.dilation[1]))
    src_layout = _window_of(config, j - 1, shapes, src_window_rows, src_window_cols)
    src_index = src_layout.offset_c({"n": E.Const(0), "h": in_row, "w": in_col, "c": E.Var("rc")},
                                    bounds | {"ow": (geo.col_offset[j], geo.col_offset[j] + out_w - 1)})
    f_index = filt.offset_c({"o": k_local, "i": E.Var("rc"), "h": E.Var("rh"), "w": E.Var("rw")}, bounds)
    d_index = dst_window.offset_c({"n": E.Const(0), "h": E.Var("oh"), "w": E.Var("ow"),
                                   "c": k_local if last else k_global}, bounds)
    # Register blocking: one pixel keeps k_block accumulators, so each input value loaded feeds
    # k_block independent multiply-adds instead of one long dependent chain.
    load = Stmt(code=f"const {ctype} x = {src}[{src_index}];", summary=f"x = {src}[...]")
    mac = Stmt(code=f"acc[ki] += x * filter_cache[{f_index}];", summary="acc[ki] += x * filter_cache[...]")
    reduction: Node = Loop(var="rh", extent=op.kernel[0], body=(
        Loop(var="rw", extent=op.kernel[1], body=(
            Loop(var="rc", extent=in_c, body=(load, Loop(var="ki", extent=k_block, body=(mac,)))),)),))
    row_checks = _cond([(row, ">=", 0), (row, "<", out_h)], bounds)
    col_checks = _cond([(col, ">=", 0), (col, "<", out_w)], bounds)
    if not last and row_checks + col_checks:
        # Positions in the consumer's padding get zeros: the accumulators stay 0 there.
        reduction = Guard(cond=" && ".join(row_checks + col_checks), body=(reduction,))
    store: Node = Stmt(code=f"{dst}[{d_index}] = acc[ki];", summary=f"{dst}[...] = acc[ki]")
    k_checks = _cond([(k_global, "<", out_k)], bounds)
    if k_checks:
        store = Guard(cond=k_checks[0], body=(store,))
    pixel: tuple[Node, ...] = (
        Stmt(code=f"{ctype} acc[{k_block}];", summary=f"acc[{k_block}]"),
        Loop(var="ki", extent=k_block, body=(Stmt(code="acc[ki] = 0;", summary="acc[ki] = 0"),)),
        reduction,
        Loop(var="ki", extent=k_block, body=(store,)))
    columns: tuple[Node, ...] = (Loop(var="ow", extent=geo.cols[j], body=pixel),)
    if last and row_checks:
        columns = (Guard(cond=" && ".join(row_checks), body=columns),)
    return Section(label=f"conv2d #{j}" + ("" if last else f" into {dst}"), body=(
        Loop(var="ko_inner", extent=k_split, body=(Loop(var="oh", extent=geo.rows[j], body=columns),)),))


def _window_of(config: Config, index: int, shapes: list, rows: int, cols: int) -> TensorLayout:
    layout = config.input_layout if index == 0 else config.ops[index - 1].output_layout
    return layout.bind((1, rows, cols, shapes[index][3]))


def _write_back(shapes: list, geo: _Geometry, ks_ch: int, window: TensorLayout, tensor: TensorLayout,
                batched: bool) -> Node:
    _, out_h, out_w, out_k = shapes[-1]
    bounds = {"ko_outer": (0, math.ceil(out_k / ks_ch) - 1), "ho_outer": (0, math.ceil(out_h / geo.rows[-1]) - 1),
              "oh": (0, geo.rows[-1] - 1), "ow": (0, out_w - 1), "ok": (0, ks_ch - 1), "nb": (0, shapes[0][0] - 1)}
    row = E.add(geo.row_start[-1], E.Var("oh"))
    k = E.add(E.mul(E.Var("ko_outer"), ks_ch), E.Var("ok"))
    local = window.offset_c({"n": E.Const(0), "h": E.Var("oh"), "w": E.Var("ow"), "c": E.Var("ok")}, bounds)
    glob = tensor.offset_c({"n": E.Var("nb") if batched else E.Const(0), "h": row, "w": E.Var("ow"), "c": k}, bounds)
    body: tuple[Node, ...] = (Stmt(code=f"output[{glob}] = output_cache[{local}];",
                                   summary="output[...] = output_cache[...]"),)
    k_checks = _cond([(k, "<", out_k)], bounds)
    if k_checks:
        body = (Guard(cond=k_checks[0], body=body),)
    columns: tuple[Node, ...] = (Loop(var="ow", extent=out_w, body=(Loop(var="ok", extent=ks_ch, body=body),)),)
    row_checks = _cond([(row, "<", out_h)], bounds)
    if row_checks:
        columns = (Guard(cond=row_checks[0], body=columns),)
    return Section(label="write back output cache", body=(Loop(var="oh", extent=geo.rows[-1], body=columns),))


def _stripe_bounds(config: Config, shapes: list) -> dict[str, tuple[int, int]]:
    s = config.schedule
    _, out_h, _, out_k = shapes[-1]
    return {"ko_outer": (0, math.ceil(out_k / (s.k_split * s.k_block)) - 1),
            "ho_outer": (0, math.ceil(out_h / (s.h_split * s.h_block)) - 1), "nb": (0, shapes[0][0] - 1)}


# ---------------------------------------------------------------- work and traffic

def _count_work(config: Config, shapes: list, geo: _Geometry, ks_ch: int, ko_extent: int, ho_extent: int,
                hs_rows: int, ebytes: int) -> tuple[int, Traffic]:
    """Exact MACs executed and elements moved, stripe by stripe (guards included)."""
    n_ops = len(config.ops)
    macs = in_elems = f_elems = out_elems = 0

    def overlap(start: int, count: int, limit: int) -> int:
        return max(0, min(start + count, limit) - max(start, 0))

    for ko in range(ko_extent):
        for ho in range(ho_extent):
            starts = [int(E.evaluate(geo.row_start[j], {"ho_outer": ho})) for j in range(n_ops + 1)]
            _, h0, w0, c0 = shapes[0]
            in_elems += overlap(starts[0], geo.rows[0], h0) * overlap(-geo.col_offset[0], geo.cols[0], w0) * c0
            for j in range(1, n_ops + 1):
                op = config.ops[j - 1]
                _, hj, wj, kj = shapes[j]
                taps = shapes[j - 1][3] * op.kernel[0] * op.kernel[1]
                rows = overlap(starts[j], geo.rows[j], hj)
                k_here = overlap(ko * ks_ch, ks_ch, kj) if j == n_ops else kj
                f_elems += k_here * taps
                macs += rows * wj * k_here * taps
                if j == n_ops:
                    out_elems += rows * wj * k_here
    batch = shapes[0][0]
    return 2 * macs * batch, Traffic(input_bytes=in_elems * batch * ebytes, filter_bytes=f_elems * batch * ebytes,
                                     output_bytes=out_elems * batch * ebytes)


def _notes(config: Config, caches: tuple[Cache, ...], geo: _Geometry, ko_extent: int, n_ops: int) -> tuple[str, ...]:
    notes = []
    halo = geo.rows[0] - geo.rows[-1]
    if halo:
        notes.append(f"the input window carries {halo} halo row(s) beyond the {geo.rows[-1]} output rows of a stripe; "
                     f"neighbouring stripes read them again")
    if n_ops > 1 and ko_extent > 1:
        notes.append(f"conv2d #1..#{n_ops - 1} run again for each of the {ko_extent} output-channel stripes "
                     f"(seed 000's loop order: ko_outer outside ho_outer)")
    for cache in caches:
        if cache.aliases:
            notes.append(f"the {cache.name} cache reuses the {cache.aliases} cache's storage")
    return tuple(notes)
