"""plan(config) -> Plan: seed 000's fused conv2d chain schedule, generalised. Pure.

Structure (seed 000): the last op's output is cut into stripes of k_split x k_block
output channels (ko_outer), w_split x w_block columns (wo_outer, only when the width is
split) and h_split x h_block rows (ho_outer). For each stripe: read the input rows the
whole chain needs (halo included) into the input cache; run every earlier op over all of
its output channels (its own ko_outer_<j> loop, each step reading k_split filter blocks
into the shared filter cache) into a temp-output cache; then the last op into the output
cache, and write that back.

Two schedule options change the stripe loop (seed 001):
- pipeline: double_buffer flattens the stripes into one loop whose step s loads stripe
  s + 1 into the other input cache, computes stripe s and stores stripe s - 1, with a
  prologue (load stripe 0) and an epilogue (store the last stripe);
- halo: reuse keeps the input cache as a ring of rows: window row r of stripe ho_outer
  lives in row (ho_outer * step + r) % rows, so the rows a stripe shares with the one above
  stay put and only the new rows are loaded.

Caches hold logical windows (rows x columns x channels) in their tensor's own layout
(geometry.py), so any layout works and the seed's sizes fall out.
"""
from __future__ import annotations

import math
import re
from dataclasses import replace

from .. import expr as E
from ..config import Config
from .geometry import (ALIGNMENT_BYTES, ELEMENT_BYTES, Geometry, Stripes, Windows, allocate, channel_cover, geometry,
                       reduction_channels, shapes, stripes, windows, workspace_elements)
from ..layout import LayoutError, PadKind, TensorLayout, padding_cover
from .packing import pack_function, padding_fill, unpack_function
from ..plan import (Block, Cache, Function, Guard, Loop, Node, OpGeometry, PadStrategy, Param, Plan, Section, Stmt,
                   StripeParts, Tensor)
from .search import fit_schedule
from .work import count_work

C_TYPES = {"float32": "float", "float16": "_Float16", "uint8": "uint8_t"}
ZERO = {"float32": "0.0f", "float16": "0.0f", "uint8": "0"}
ACC_TYPES = {"float32": "float", "float16": "float", "uint8": "int32_t"}
TIMELINE_HEAD, TIMELINE_TAIL = 14, 4  # pipeline steps the timeline shows before and after "..."


def fitted_config(config: Config, plan: Plan) -> Config:
    """The config with the splits the plan chose (fitted to a budget or given), for targets that re-derive
    the stripe geometry."""
    return replace(config, schedule=replace(config.schedule, k_split=plan.k_split, h_split=plan.h_split,
                                            w_split=plan.w_split))


def plan(config: Config) -> Plan:
    config, search = fit_schedule(config)
    s = config.schedule
    shape_list = shapes(config)
    n_ops = len(config.ops)
    cut = stripes(config, shape_list)
    geo = geometry(config, shape_list, cut)
    win = windows(config, shape_list, geo, cut)
    caches = allocate(config, win)
    batch = shape_list[0][0]
    ctype, zero, ebytes = C_TYPES[config.dtype], ZERO[config.dtype], ELEMENT_BYTES[config.dtype]

    # Tensors: global ones are kernel arguments; intermediates exist only as cache windows.
    tensors = [Tensor(name="input", title="Input", logical_layout="NHWC",
                      layout=config.input_layout.bind(shape_list[0]))]
    for j, op in enumerate(config.ops, start=1):
        filt = (op.out_channels, shape_list[j - 1][3], *op.kernel)
        tensors.append(Tensor(name=f"filter{j}", title=f"Filter {j}", logical_layout="OIHW",
                              layout=op.filter_layout.bind(filt)))
    tensors.append(Tensor(name="output", title="Output", logical_layout="NHWC",
                          layout=config.ops[-1].output_layout.bind(shape_list[-1])))
    intermediates = tuple(
        Tensor(name=f"temp{j}", title="Temp Output" if n_ops == 2 else f"Temp Output {j}", logical_layout="NHWC",
               layout=config.ops[j - 1].output_layout.bind(shape_list[j])) for j in range(1, n_ops))

    b = _Builder(config, shape_list, cut, geo, win, tensors, ctype, zero)
    parts = StripeParts(load=b.load(), compute=b.compute(), store=b.store(), ko_extent=cut.ko_extent,
                        ho_extent=cut.ho_extent, wo_extent=cut.wo_extent, batch=batch, channels=cut.channels,
                        rows=cut.rows, cols=cut.cols, pipeline=s.pipeline, ctype=ctype)
    nest = compose_stripes(parts)
    timeline = _timeline(parts.count) if s.pipeline == "double_buffer" else ()
    body: list[Node] = list(nest)
    output_tensor = tensors[-1]
    if output_tensor.layout.layout.pad_kind is PadKind.VALUE and not b.output_pad_by_overcompute:
        body.append(padding_fill(output_tensor.layout, "output", ctype))

    params = tuple(Param(name=t.name, ctype=f"{'' if t.name == 'output' else 'const '}{ctype} *restrict")
                   for t in tensors) + (Param(name="workspace", ctype=f"{ctype} *restrict"),)
    cache_of = {c.name: c for c in caches}
    prologue = tuple(
        f"{ctype} *const {c.c_name} = {cache_of[c.aliases].c_name if c.aliases else f'workspace + {c.offset}'};"
        + (f" /* {c.note} */" if c.note else "") for c in caches)
    kernel = Function(name=config.name, doc=f"fused chain of {n_ops} conv2d op(s); workspace: "
                                            f"{workspace_elements(caches)} elements",
                      params=params, prologue=prologue, body=tuple(body))
    helpers = [pack_function(f"{config.name}_pack_{t.name}", t.layout, t.logical_layout, ctype) for t in tensors[:-1]]
    helpers.append(unpack_function(f"{config.name}_unpack_output", output_tensor.layout, ctype))

    ops, flops = [], 0
    for j, op in enumerate(config.ops, start=1):
        macs = math.prod(shape_list[j]) * shape_list[j - 1][3] * op.kernel[0] * op.kernel[1]
        flops += 2 * macs
        ops.append(OpGeometry(index=j, in_shape=shape_list[j - 1], out_shape=shape_list[j], kernel=op.kernel,
                             stride=op.stride, pad=op.pad, dilation=op.dilation, flops=2 * macs))
    work = count_work(config, shape_list, geo, cut, ebytes)
    notes = _notes(config, caches, geo, cut, n_ops, work.reload_input_bytes, work.traffic.input_bytes)
    return Plan(name=config.name, config_path=config.path, dtype=config.dtype, ctype=ctype, element_bytes=ebytes,
                k_split=s.k_split, h_split=s.h_split, w_split=s.w_split if cut.wo_extent > 1 else None,
                k_block=s.k_block, h_block=s.h_block, w_block=s.w_block,
                stripe_counts=(cut.ko_extent, cut.ho_extent, cut.wo_extent), ops=tuple(ops),
                tensors=tuple(tensors), intermediates=intermediates, caches=caches,
                workspace_elements=workspace_elements(caches), alignment_bytes=ALIGNMENT_BYTES,
                kernel=kernel, stripe=parts, helpers=tuple(helpers), flops=flops, executed_flops=work.executed_flops,
                traffic=work.traffic, output_pad_kind=output_tensor.layout.layout.pad_kind,
                pipeline=s.pipeline, timeline=timeline, halo=s.halo, reload_input_bytes=work.reload_input_bytes,
                pad_strategies=tuple(b.strategies), search=search, notes=notes)


# ---------------------------------------------------------------- the stripe loop

def compose_stripes(parts: StripeParts) -> tuple[Node, ...]:
    """The stripe loops around load, compute and store: seed 000's nest, or the double-buffered pipeline."""
    if parts.pipeline == "double_buffer":
        return _pipelined(parts)
    stripe: Node = Loop(var="ho_outer", extent=parts.ho_extent, comment=f"output-row stripes of {parts.rows}",
                        body=(*parts.load, *parts.compute, *parts.store))
    if parts.wo_extent > 1:
        stripe = Loop(var="wo_outer", extent=parts.wo_extent, comment=f"output-column stripes of {parts.cols}",
                      body=(stripe,))
    nest = Loop(var="ko_outer", extent=parts.ko_extent, comment=f"output-channel stripes of {parts.channels}",
                body=(stripe,))
    if parts.batch > 1:
        nest = Loop(var="nb", extent=parts.batch, body=(nest,), comment="batch")
    return (nest,)


def _pipelined(parts: StripeParts) -> tuple[Node, ...]:
    """Seed 001's Sched2: load(s + 1); compute(s); store(s - 1), with prologue and epilogue.

    Copy loops stand in for DMA; the order is what an asynchronous copy engine would overlap."""
    total = parts.count

    def pick(kind: str, index: str) -> Stmt:
        if index.isdigit():
            code = f"{parts.ctype} *const {kind}_cache = {kind}_cache_{'b' if int(index) & 1 else 'a'};"
        else:
            code = f"{parts.ctype} *const {kind}_cache = (({index}) & 1) ? {kind}_cache_b : {kind}_cache_a;"
        return Stmt(code=code, summary=f"{kind}_cache = buffer ({index}) % 2")

    def step(index: str, kinds: tuple[str, ...], nodes: tuple[Node, ...]) -> tuple[Node, ...]:
        body = (*(pick(kind, index) for kind in kinds), *nodes)
        return (*_coordinates(parts, index, body), *body)

    loop = Loop(var="s", extent=total, comment=f"pipeline steps over {total} stripes", body=(
        Section(label="prefetch: load stripe s + 1 into the other input cache",
                body=(Guard(cond=f"s + 1 < {total}", body=step("s + 1", ("input",), parts.load)),)),
        Block(label="compute stripe s", body=step("s", ("input", "output"), parts.compute)),
        Section(label="drain: store stripe s - 1 from the other output cache",
                body=(Guard(cond="s >= 1", body=step("s - 1", ("output",), parts.store)),))))
    last = str(total - 1)
    return (Section(label="pipeline prologue: load stripe 0",
                    body=(Block(label="stripe 0", body=step("0", ("input",), parts.load)),)),
            loop,
            Section(label="pipeline epilogue: store the last stripe",
                    body=(Block(label=f"stripe {last}", body=step(last, ("output",), parts.store)),)))


def _coordinates(parts: StripeParts, index: str, nodes: tuple[Node, ...]) -> tuple[Stmt, ...]:
    """Declarations of the stripe indices (nb, ko_outer, wo_outer, ho_outer) of flat stripe `index` that
    `nodes` use; ho_outer varies fastest, as in the unpipelined nest."""
    used = _identifiers(nodes)
    flat = index if re.fullmatch(r"\w+", index) else f"({index})"
    ho, wo, ko = parts.ho_extent, parts.wo_extent, parts.ko_extent
    order = [("nb", ho * wo * ko, parts.batch), ("ko_outer", ho * wo, ko), ("wo_outer", ho, wo), ("ho_outer", 1, ho)]
    out = []
    for var, divisor, extent in order:
        if var not in used:
            continue
        if index.isdigit():
            value = str(int(index) // divisor % extent)
        else:
            value = flat if divisor == 1 else f"{flat} / {divisor}"
            if divisor * extent < parts.count:
                value = f"({value}) % {extent}" if divisor > 1 else f"{flat} % {extent}"
        out.append(Stmt(code=f"const int {var} = {value};", summary=f"{var} of stripe {index}"))
    return tuple(out)


def _identifiers(nodes: tuple[Node, ...]) -> set[str]:
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, Stmt):
            found |= set(re.findall(r"[A-Za-z_]\w*", node.code))
        elif isinstance(node, Guard):
            found |= set(re.findall(r"[A-Za-z_]\w*", node.cond)) | _identifiers(node.body)
        else:
            found |= _identifiers(node.body)
    return found


def _timeline(total: int) -> tuple[str, ...]:
    steps = [f"load{1}"]
    for i in range(1, total + 1):
        if i < total:
            steps.append(f"load{i + 1}")
        steps.append(f"conv{i}")
        if i > 1:
            steps.append(f"store{i - 1}")
    steps.append(f"store{total}")
    if len(steps) > TIMELINE_HEAD + TIMELINE_TAIL + 1:
        steps = steps[:TIMELINE_HEAD] + ["..."] + steps[-TIMELINE_TAIL:]
    return tuple(steps)


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


class _Builder:
    """Builds the three parts of a stripe (load, compute, store) and records each loop's pad strategy."""

    def __init__(self, config: Config, shape_list: list, cut: Stripes, geo: Geometry, win: Windows,
                 tensors: list[Tensor], ctype: str, zero: str) -> None:
        self.config, self.shape_list, self.cut, self.geo, self.win = config, shape_list, cut, geo, win
        self.tensors, self.ctype, self.zero = tensors, ctype, zero
        self.n_ops = len(config.ops)
        self.batched = shape_list[0][0] > 1
        self.strategies: list[PadStrategy] = []
        self.ring = config.schedule.halo == "reuse" and geo.halo_rows > 0
        # Source tensor j (input, then each intermediate) may be read past its channels when its layout
        # promises a finite pad value there (seed 003): the filter cache holds zeros for those channels.
        self.source_layouts = [config.input_layout] + [op.output_layout for op in config.ops[:-1]]
        self.reduce_channels = reduction_channels(config, shape_list)
        for j in range(self.n_ops):
            self._note_reduction(j)
        # Output channel padding can be stored like real channels when it must hold 0: the zero filter
        # channels compute exactly 0 there. Spatial padding still needs the fill loop.
        out_layout = tensors[-1].layout
        c_axis = out_layout.layout.dims.index("c")
        self.output_pad_by_overcompute = False
        if out_layout.layout.pad_kind is PadKind.VALUE and out_layout.layout.pad_value == 0.0:
            try:
                cover = padding_cover(out_layout)
            except LayoutError:  # padding not enumerable per dim: the fill pass decides (and reports it)
                cover = out_layout.logical_shape
            self.output_pad_by_overcompute = (
                cover[c_axis] > shape_list[-1][3]
                and all(g == n for i, (g, n) in enumerate(zip(cover, out_layout.logical_shape)) if i != c_axis))

    def bounds(self) -> dict[str, tuple[int, int]]:
        c = self.cut
        return {"ko_outer": (0, c.ko_extent - 1), "ho_outer": (0, c.ho_extent - 1), "wo_outer": (0, c.wo_extent - 1),
                "nb": (0, self.shape_list[0][0] - 1)}

    def _note_reduction(self, index: int) -> None:
        layout = self.source_layouts[index]
        channels, reduce = self.shape_list[index][3], self.reduce_channels[index]
        cover = channel_cover(layout.bind(self.shape_list[index]))
        op = f"conv2d #{index + 1} channel reduction"
        if reduce > channels:
            self.strategies.append(PadStrategy(
                loop=op, strategy="overcompute",
                why=f"runs {reduce} channels without a branch: the {channels} real ones and {reduce - channels} of "
                    f"padding holding {layout.pad_value:g}, against zero filter channels"))
        elif cover > channels:
            kind = "is undef" if layout.pad_kind is PadKind.UNDEF else "has no pad value"
            self.strategies.append(PadStrategy(loop=op, strategy="branch",
                                               why=f"stops at channel {channels}: the layout padding {kind}"))

    # ------------------------------------------------------------ load

    def load(self) -> tuple[Node, ...]:
        geo = self.geo
        if not self.ring:
            return (self._input_read(0, geo.rows[0], "input cache read"),)
        keep = geo.halo_rows
        first = self._input_read(0, keep, "input cache read (first stripe only, rows the next stripe keeps)")
        return (Guard(cond="ho_outer == 0", body=(first,)),
                self._input_read(keep, geo.rows[0] - keep, f"input cache read (new rows; {keep} kept in the ring)"))

    def ring_row(self, row: E.Expr) -> E.Expr:
        """The cache row holding window row `row` of stripe ho_outer: a ring of rows[0] rows."""
        return E.floormod(E.add(E.mul(E.Var("ho_outer"), self.geo.row_step), row), self.geo.rows[0],
                          self.bounds() | {"ih": (0, self.geo.rows[0] - 1)})

    def _input_read(self, first_row: int, rows: int, label: str) -> Node:
        geo, win, tensor = self.geo, self.win.input, self.tensors[0].layout
        _, height, width, _ = self.shape_list[0]
        copied = self.reduce_channels[0]  # the real channels, or with padding for overcompute
        bounds = self.bounds() | {"ih": (0, rows - 1), "iw": (0, geo.cols[0] - 1), "ic": (0, copied - 1)}
        window_row = E.add(E.Var("ih"), E.Const(first_row))
        row = E.add(geo.row_start[0], window_row)
        col = E.add(geo.col_start[0], E.Var("iw"))
        cache_row = self.ring_row(window_row) if self.ring else window_row
        local = win.offset_c({"n": E.Const(0), "h": cache_row, "w": E.Var("iw"), "c": E.Var("ic")}, bounds)
        glob = tensor.offset_c({"n": E.Var("nb") if self.batched else E.Const(0), "h": row, "w": col,
                                "c": E.Var("ic")}, bounds)
        conds = _cond([(row, ">=", 0), (row, "<", height), (col, ">=", 0), (col, "<", width)], bounds)
        # Inside the tensor the copy includes channel padding when the reduction overcomputes (the input's
        # padding holds its pad value); outside (conv padding) every channel gets zero.
        value = f"({' && '.join(conds)}) ? input[{glob}] : {self.zero}" if conds else f"input[{glob}]"
        stmt = Stmt(code=f"input_cache[{local}] = {value};",
                    summary="input_cache[...] = " + ("in bounds ? input[...] : 0" if conds else "input[...]"))
        if first_row == 0 and conds:
            self.strategies.append(PadStrategy(loop="input cache read", strategy="fill",
                                               why="positions outside the input (conv padding, stripe tails) get "
                                                   "zeros while loading, so the conv loops read the window without "
                                                   "branches"))
        return Section(label=f"{label}: {rows} rows x {geo.cols[0]} columns x {copied} channels",
                       body=(Loop(var="ih", extent=rows, body=(
                           Loop(var="iw", extent=geo.cols[0], body=(Loop(var="ic", extent=copied, body=(stmt,)),)),)),))

    # ------------------------------------------------------------ compute

    def compute(self) -> tuple[Node, ...]:
        out: list[Node] = []
        sources = ["input_cache", *self.win.temp_names]
        ks_ch = self.cut.channels
        for j in range(1, self.n_ops):
            var = f"ko_outer_{j}"
            kj = self.shape_list[j][3]
            # All channels the consumer reads: with its overcompute, the channel padding too (as zeros).
            produced = max(kj, self.reduce_channels[j])
            body = (self._filter_read(j, var, kj, produced),
                    self._conv(j, var, sources[j - 1], self.win.temps[j - 1], self.win.temp_names[j - 1], last=False))
            out.append(Loop(var=var, extent=math.ceil(produced / ks_ch), body=body,
                            comment=f"all {kj} output channels of conv2d #{j} before conv2d #{j + 1}"))
        n = self.n_ops
        out.append(self._filter_read(n, "ko_outer", self.shape_list[-1][3], self.shape_list[-1][3]))
        out.append(self._conv(n, "ko_outer", sources[-1], self.win.output, "output_cache", last=True))
        return tuple(out)

    def _filter_read(self, j: int, ko_var: str, out_k: int, produced: int) -> Node:
        ks_ch = self.cut.channels
        window, tensor = self.win.filters[j - 1], self.tensors[j].layout
        in_c, kernel = self.shape_list[j - 1][3], self.config.ops[j - 1].kernel
        reduce = self.reduce_channels[j - 1]
        bounds = {ko_var: (0, math.ceil(produced / ks_ch) - 1), "fk": (0, ks_ch - 1), "fc": (0, reduce - 1),
                  "fh": (0, kernel[0] - 1), "fw": (0, kernel[1] - 1)}
        k = E.add(E.mul(E.Var(ko_var), ks_ch), E.Var("fk"))
        local = window.offset_c({"o": E.Var("fk"), "i": E.Var("fc"), "h": E.Var("fh"), "w": E.Var("fw")}, bounds)
        glob = tensor.offset_c({"o": k, "i": E.Var("fc"), "h": E.Var("fh"), "w": E.Var("fw")},
                               bounds | {"fc": (0, in_c - 1)})
        conds = _cond([(k, "<", out_k)], bounds) + (["fc < %d" % in_c] if reduce > in_c else [])
        # Channels past the tensor get zeros, so the compute may run whole blocks and drop them at the store.
        value = f"({' && '.join(conds)}) ? filter{j}[{glob}] : 0" if conds else f"filter{j}[{glob}]"
        stmt = Stmt(code=f"filter_cache[{local}] = {value};",
                    summary=f"filter_cache[...] = {'in range ? ' if conds else ''}filter{j}[...]{' : 0' if conds else ''}")
        inner: tuple[Node, ...] = (Loop(var="fc", extent=reduce, body=(
            Loop(var="fh", extent=kernel[0], body=(Loop(var="fw", extent=kernel[1], body=(stmt,)),)),)),)
        return Section(label=f"filter #{j} cache read" + (" (reusing the filter cache)" if j > 1 else ""),
                       body=(Loop(var="fk", extent=ks_ch, body=inner),))

    def _conv(self, j: int, ko_var: str, src: str, dst_window: TensorLayout, dst: str, *, last: bool) -> Node:
        config, geo, cut = self.config, self.geo, self.cut
        op = config.ops[j - 1]
        _, out_h, out_w, out_k = self.shape_list[j]
        k_split, k_block = config.schedule.k_split, config.schedule.k_block
        reduce = self.reduce_channels[j - 1]
        ks_ch = cut.channels
        produced = out_k if last else max(out_k, self.reduce_channels[j])
        bounds = self.bounds() | {
            ko_var: (0, math.ceil(produced / ks_ch) - 1), "ko_inner": (0, k_split - 1), "oh": (0, geo.rows[j] - 1),
            "ow": (0, geo.cols[j] - 1), "ki": (0, k_block - 1), "rh": (0, op.kernel[0] - 1),
            "rw": (0, op.kernel[1] - 1), "rc": (0, reduce - 1)}
        k_local = E.add(E.mul(E.Var("ko_inner"), k_block), E.Var("ki"))
        k_global = E.add(E.mul(E.Var(ko_var), ks_ch), k_local)
        row = E.add(geo.row_start[j], E.Var("oh"))  # global output row
        col = E.add(geo.col_start[j], E.Var("ow"))  # global output column
        in_row = E.add(E.mul(E.Var("oh"), op.stride[0]), E.mul(E.Var("rh"), op.dilation[0]))
        # Source window column: the global input column minus the source window's first column.
        in_col = E.add(E.mul(col, op.stride[1]), E.Const(-op.pad[1]), E.mul(E.Var("rw"), op.dilation[1]),
                       E.mul(geo.col_start[j - 1], -1))
        if j == 1 and self.ring:
            in_row = self.ring_row(in_row)
        src_layout = self._window_of(j - 1, geo.rows[j - 1], geo.cols[j - 1], reduce)
        src_bounds = bounds
        if cut.wo_extent == 1 and not last:
            src_bounds = bounds | {"ow": (-geo.col_start[j].value, -geo.col_start[j].value + out_w - 1)}
        src_index = src_layout.offset_c({"n": E.Const(0), "h": in_row, "w": in_col, "c": E.Var("rc")}, src_bounds)
        f_layout = self.win.filters[j - 1]
        f_index = f_layout.offset_c({"o": k_local, "i": E.Var("rc"), "h": E.Var("rh"), "w": E.Var("rw")}, bounds)
        d_index = dst_window.offset_c({"n": E.Const(0), "h": E.Var("oh"), "w": E.Var("ow"),
                                       "c": k_local if last else k_global}, bounds)
        # Register blocking: one pixel keeps k_block accumulators, so each input value loaded feeds
        # k_block independent multiply-adds instead of one long dependent chain.
        ctype = ACC_TYPES[config.dtype]
        load = Stmt(code=f"const {ctype} x = {src}[{src_index}];", summary=f"x = {src}[...]")
        mac = Stmt(code=f"acc[ki] += x * filter_cache[{f_index}];", summary="acc[ki] += x * filter_cache[...]")
        reduction: Node = Loop(var="rh", extent=op.kernel[0], body=(
            Loop(var="rw", extent=op.kernel[1], body=(
                Loop(var="rc", extent=reduce, body=(load, Loop(var="ki", extent=k_block, body=(mac,)))),)),))
        row_checks = _cond([(row, ">=", 0), (row, "<", out_h)], bounds)
        col_checks = _cond([(col, ">=", 0), (col, "<", out_w)], bounds)
        if not last and row_checks + col_checks:
            # Positions in the consumer's padding get zeros: the accumulators stay 0 there.
            reduction = Guard(cond=" && ".join(row_checks + col_checks), body=(reduction,))
        store: Node = Stmt(code=f"{dst}[{d_index}] = acc[ki];", summary=f"{dst}[...] = acc[ki]")
        if last:
            store_limit = channel_cover(self.tensors[-1].layout) if self.output_pad_by_overcompute else out_k
        else:
            store_limit = self.reduce_channels[j]  # what the consumer reads: real channels, or with padding
        k_checks = _cond([(k_global, "<", store_limit)], bounds)
        if k_checks:
            store = Guard(cond=k_checks[0], body=(store,))
        pixel: tuple[Node, ...] = (
            Stmt(code=f"{ctype} acc[{k_block}];", summary=f"acc[{k_block}]"),
            Loop(var="ki", extent=k_block, body=(Stmt(code="acc[ki] = 0;", summary="acc[ki] = 0"),)),
            reduction,
            Loop(var="ki", extent=k_block, body=(store,)))
        columns: tuple[Node, ...] = (Loop(var="ow", extent=geo.cols[j], body=pixel),)
        if last and col_checks:
            columns = (Loop(var="ow", extent=geo.cols[j], body=(Guard(cond=" && ".join(col_checks), body=pixel),)),)
        if last and row_checks:
            columns = (Guard(cond=" && ".join(row_checks), body=columns),)
        return Section(label=f"conv2d #{j}" + ("" if last else f" into {dst}"), body=(
            Loop(var="ko_inner", extent=k_split, body=(Loop(var="oh", extent=geo.rows[j], body=columns),)),))

    def _window_of(self, index: int, rows: int, cols: int, channels: int) -> TensorLayout:
        layout = self.source_layouts[index]
        return layout.bind((1, rows, cols, max(channels, self.shape_list[index][3])))

    # ------------------------------------------------------------ store

    def store(self) -> tuple[Node, ...]:
        geo, cut, window, tensor = self.geo, self.cut, self.win.output, self.tensors[-1].layout
        _, out_h, out_w, out_k = self.shape_list[-1]
        ks_ch = cut.channels
        limit = channel_cover(tensor) if self.output_pad_by_overcompute else out_k
        bounds = self.bounds() | {"oh": (0, geo.rows[-1] - 1), "ow": (0, geo.cols[-1] - 1), "ok": (0, ks_ch - 1)}
        row = E.add(geo.row_start[-1], E.Var("oh"))
        col = E.add(geo.col_start[-1], E.Var("ow"))
        k = E.add(E.mul(E.Var("ko_outer"), ks_ch), E.Var("ok"))
        local = window.offset_c({"n": E.Const(0), "h": E.Var("oh"), "w": E.Var("ow"), "c": E.Var("ok")}, bounds)
        glob_bounds = bounds | {"ok": (0, min(ks_ch, limit) - 1)}
        glob = tensor.offset_c({"n": E.Var("nb") if self.batched else E.Const(0), "h": row, "w": col, "c": k},
                               glob_bounds)
        body: tuple[Node, ...] = (Stmt(code=f"output[{glob}] = output_cache[{local}];",
                                       summary="output[...] = output_cache[...]"),)
        k_checks = _cond([(k, "<", limit)], bounds)
        if k_checks:
            body = (Guard(cond=k_checks[0], body=body),)
        col_checks = _cond([(col, "<", out_w)], bounds)
        inner: Node = Loop(var="ok", extent=ks_ch, body=body)
        if col_checks:
            inner = Guard(cond=col_checks[0], body=(inner,))
        columns: tuple[Node, ...] = (Loop(var="ow", extent=geo.cols[-1], body=(inner,)),)
        row_checks = _cond([(row, "<", out_h)], bounds)
        if row_checks:
            columns = (Guard(cond=row_checks[0], body=columns),)
        kind = tensor.layout.pad_kind
        if self.output_pad_by_overcompute:
            self.strategies.append(PadStrategy(
                loop="write back output cache", strategy="overcompute",
                why=f"stores all {limit} channels without a channel branch: padded channels compute to 0 from zero "
                    f"filter channels, which is the layout's pad value"))
        elif tensor.padding:
            own = f"writes only the output's own positions; its {tensor.padding} padding slots"
            why = {PadKind.VALUE: f"{own} get pad value {tensor.layout.pad_value:g} from a fill loop",
                   PadKind.UNDEF: f"{own} are undef: nothing is promised or written there",
                   PadKind.NONE: f"{own} have no pad value: never written"}[kind]
            self.strategies.append(PadStrategy(loop="write back output cache",
                                               strategy="fill" if kind is PadKind.VALUE else "branch", why=why))
        return (Section(label="write back output cache", body=(Loop(var="oh", extent=geo.rows[-1], body=columns),)),)


# ---------------------------------------------------------------- notes

def _notes(config: Config, caches: tuple[Cache, ...], geo: Geometry, cut: Stripes, n_ops: int, reload_bytes: int,
           input_bytes: int) -> tuple[str, ...]:
    notes = []
    halo = geo.rows[0] - geo.rows[-1]
    if config.schedule.halo == "reuse":
        if geo.halo_rows:
            notes.append(f"halo reuse: the input cache is a ring of {geo.rows[0]} rows; each stripe after the first "
                         f"of a column keeps {geo.halo_rows} row(s) and loads {geo.row_step}: input traffic "
                         f"{input_bytes} bytes instead of {reload_bytes} ({reload_bytes - input_bytes} saved)")
        else:
            notes.append("halo reuse: vertically adjacent stripes share no input rows; every stripe loads its "
                         "whole window")
    elif halo and cut.ho_extent > 1:
        notes.append(f"the input window carries {halo} halo row(s) beyond the {geo.rows[-1]} output rows of a "
                     f"stripe; neighbouring stripes read them again (halo: reuse would keep them)")
    if n_ops > 1 and cut.ko_extent > 1:
        notes.append(f"conv2d #1..#{n_ops - 1} run again for each of the {cut.ko_extent} output-channel stripes "
                     f"(seed 000's loop order: ko_outer outside ho_outer)")
    if config.schedule.pipeline == "double_buffer":
        notes.append("double buffer: two input and two output caches; the output cannot reuse an input cache "
                     "(seed 000's To-Do: the store of stripe i-1 would race the load of stripe i+1)")
    for cache in caches:
        if cache.aliases:
            notes.append(f"the {cache.name} cache reuses the {cache.aliases} cache's storage")
    return tuple(notes)
