"""The three parts of one stripe (load, compute, store) as loop trees of C statements, and
the pad strategy each loop takes (seed 003)."""
from __future__ import annotations

import math

import kernelgen.expr as E
from ..config import Config
from ..layout import LayoutError, PadKind, TensorLayout, padding_cover
from ..ops import OPS, statements
from ..ops.dialect import c_float
from ..plan_types import Guard, Halo, Loop, LoopOrder, Node, PadHandling, PadStrategy, Phase, Section, Step, Stmt, Tensor
from .geometry import (StripeGeometry, Stripes, Windows, cache_window, channel_cover, channel_striped_input,
                       reduction_channels, unproven as _cond)
from .pooling import divisor as pool_divisor, tap as pool_tap, window as pool_window

ACC_TYPES = {"float32": "float", "float16": "float", "uint8": "int32_t"}


class StripeBuilder:
    """Builds the three parts of a stripe (load, compute, store) and records each loop's pad strategy."""

    def __init__(self, config: Config, shape_list: list, cut: Stripes, geo: StripeGeometry, win: Windows,
                 tensors: list[Tensor], ctype: str, zero: str) -> None:
        self.config, self.shape_list, self.cut, self.geo, self.win = config, shape_list, cut, geo, win
        self.tensors, self.ctype, self.zero = tensors, ctype, zero
        self.n_ops = len(config.ops)
        self.batched = shape_list[0][0] > 1
        self.strategies: list[PadStrategy] = []
        self.ring = config.schedule.halo is Halo.REUSE and geo.halo_rows > 0
        # Source tensor j (input, then each intermediate) may be read past its channels when its layout
        # promises a finite pad value there (seed 003): the filter cache holds zeros for those channels.
        self.source_layouts = [config.input_layout] + [op.output_layout for op in config.ops[:-1]]
        self.reduce_channels = reduction_channels(config, shape_list)
        # input-channel chunks (schedule.c_split, a single op): the caches hold c_block channels at a time
        self.c_block = config.schedule.c_block
        self.chunks = config.schedule.c_split if self.c_block else 1
        # a lone channelwise op: the input cache holds the channel stripe's own channels (geometry)
        self.striped_input = channel_striped_input(config)
        for j in range(self.n_ops):
            self._note_reduction(j)
        # Output channel padding can be stored like real channels when it must hold 0: the zero filter
        # channels compute exactly 0 there. Spatial padding still needs the fill loop.
        out_layout = tensors[-1].layout
        c_axis = out_layout.layout.dims.index("c")
        self.output_pad_by_overcompute = False
        # (an epilogue would turn those zeros into bias values or a clamp's bound; a pool has no zero filter)
        if (out_layout.layout.pad_kind is PadKind.VALUE and out_layout.layout.pad_value == 0.0
                and not config.ops[-1].epilogue and not config.ops[-1].pool):
            try:
                cover = padding_cover(out_layout)
            except LayoutError:  # padding not enumerable per dim: the fill pass decides (and reports it)
                cover = out_layout.logical_shape
            # ... and only when the channel stripes reach the padding channels (k_block 4 under an 8c
            # layout with 12 channels stops at 12: the fill loop must write 12..15)
            self.output_pad_by_overcompute = (
                cover[c_axis] > shape_list[-1][3] and cut.ko_extent * cut.channels >= cover[c_axis]
                and all(g == n for i, (g, n) in enumerate(zip(cover, out_layout.logical_shape)) if i != c_axis))

    def bounds(self) -> dict[str, tuple[int, int]]:
        c = self.cut
        return {"ko_outer": (0, c.ko_extent - 1), "ho_outer": (0, c.ho_extent - 1), "wo_outer": (0, c.wo_extent - 1),
                "nb": (0, self.shape_list[0][0] - 1), "ci_outer": (0, self.chunks - 1)}

    def _note_reduction(self, index: int) -> None:
        layout = self.source_layouts[index]
        channels, reduce = self.shape_list[index][3], self.reduce_channels[index]
        cover = channel_cover(layout.bind(self.shape_list[index]))
        op = f"{self.config.ops[index].kind} #{index + 1} channel reduction"
        if reduce > channels:
            self.strategies.append(PadStrategy(
                loop=op, strategy=PadHandling.OVERCOMPUTE,
                why=f"runs {reduce} channels without a branch: the {channels} real ones and {reduce - channels} of "
                    f"padding holding {layout.pad_value:g}, against zero filter channels"))
        elif cover > channels:
            kind = "is undef" if layout.pad_kind is PadKind.UNDEF else "has no pad value"
            self.strategies.append(PadStrategy(loop=op, strategy=PadHandling.BRANCH,
                                               why=f"stops at channel {channels}: the layout padding {kind}"))

    # ------------------------------------------------------------ load

    def load(self) -> tuple[Node, ...]:
        geo = self.geo
        if not self.ring:
            return (self._input_read(0, geo.rows[0], "input cache read", Phase.INPUT_READ),)
        keep = geo.halo_rows
        first = self._input_read(0, keep, "input cache read (first stripe only, rows the next stripe keeps)",
                                 Phase.INPUT_READ_KEPT)
        return (Guard(cond="ho_outer == 0", body=(first,)),
                self._input_read(keep, geo.rows[0] - keep, f"input cache read (new rows; {keep} kept in the ring)",
                                 Phase.INPUT_READ_NEW))

    def ring_row(self, row: E.Expr) -> E.Expr:
        """The cache row holding window row `row` of stripe ho_outer: a ring of rows[0] rows."""
        return E.floormod(E.add(E.mul(E.Var("ho_outer"), self.geo.row_step), row), self.geo.rows[0],
                          self.bounds() | {"ih": (0, self.geo.rows[0] - 1)})

    def _input_read(self, first_row: int, rows: int, label: str, phase: Phase) -> Node:
        geo, win, tensor = self.geo, self.win.input, self.tensors[0].layout
        _, height, width, _ = self.shape_list[0]
        # the real channels, or with padding for overcompute; a striped input: the stripe's channels
        copied = self.cut.channels if self.striped_input else self.reduce_channels[0]
        bounds = self.bounds() | {"ih": (0, rows - 1), "iw": (0, geo.cols[0] - 1), "ic": (0, copied - 1)}
        window_row = E.add(E.Var("ih"), E.Const(first_row))
        row = E.add(geo.row_start[0], window_row)
        col = E.add(geo.col_start[0], E.Var("iw"))
        cache_row = self.ring_row(window_row) if self.ring else window_row
        local = win.offset_c({"n": E.Const(0), "h": cache_row, "w": E.Var("iw"), "c": E.Var("ic")}, bounds)
        channel = self._chunk_channel("ic")
        if self.striped_input:
            channel = E.add(E.mul(E.Var("ko_outer"), copied), E.Var("ic"))
        glob = tensor.offset_c({"n": E.Var("nb") if self.batched else E.Const(0), "h": row, "w": col,
                                "c": channel}, bounds | {"ic": (0, min(copied, self.shape_list[0][3]) - 1)})
        checks = [(row, ">=", 0), (row, "<", height), (col, ">=", 0), (col, "<", width)]
        chunked = self.c_block or self.striped_input  # a chunk or stripe may reach past the last channel
        conds = _cond(checks + ([(channel, "<", self.shape_list[0][3])] if chunked else []), bounds)
        # Inside the tensor the copy includes channel padding when the reduction overcomputes (the input's
        # padding holds its pad value); outside (conv padding) every channel gets zero.
        value = f"({' && '.join(conds)}) ? input[{glob}] : {self.zero}" if conds else f"input[{glob}]"
        stmt = Stmt(code=f"input_cache[{local}] = {value};",
                    summary="input_cache[...] = " + ("in bounds ? input[...] : 0" if conds else "input[...]"))
        if first_row == 0 and conds:
            self.strategies.append(PadStrategy(loop="input cache read", strategy=PadHandling.FILL,
                                               why="positions outside the input (conv padding, stripe tails) get "
                                                   "zeros while loading, so the conv loops read the window without "
                                                   "branches"))
        chunk = f" (chunk ci_outer of {self.chunks})" if self.c_block else (
            " (the channel stripe's own)" if self.striped_input else "")
        return Section(label=f"{label}: {rows} rows x {geo.cols[0]} columns x {copied} channels{chunk}",
                       step=Step(phase), body=(Loop(var="ih", extent=rows, body=(
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
            read = () if self.config.ops[j - 1].pool or self.win.in_place[j - 1] else (
                self._filter_read(j, var, kj, produced),)
            body = (*read,
                    self._conv(j, var, sources[j - 1], self.win.temps[j - 1], self.win.temp_names[j - 1], last=False))
            out.append(Loop(var=var, extent=math.ceil(produced / ks_ch), body=body,
                            comment=f"all {kj} output channels of conv2d #{j} before conv2d #{j + 1}"))
        n, out_k = self.n_ops, self.shape_list[-1][3]
        read = () if self.config.ops[-1].pool or self.win.in_place[-1] else (
            self._filter_read(n, "ko_outer", out_k, out_k),)
        last = (*read, self._conv(n, "ko_outer", sources[-1], self.win.output, "output_cache", last=True))
        if self.config.schedule.order is LoopOrder.ROWS_OUTER:
            # the last op's channel blocks inside the row stripe, each written back as soon as it is computed
            return (*out, Loop(var="ko_outer", extent=self.cut.ko_extent, body=(*last, *self.store()),
                               comment=f"output-channel blocks of {ks_ch} of conv2d #{n}, inside the row stripe"))
        return (*out, *last)

    def _filter_read(self, j: int, ko_var: str, out_k: int, produced: int) -> Node:
        ks_ch = self.cut.channels
        window, tensor = self.win.filters[j - 1], next(t for t in self.tensors if t.name == f"filter{j}").layout
        groups = self.config.ops[j - 1].groups
        in_c, kernel = self.shape_list[j - 1][3] // groups, self.config.ops[j - 1].kernel  # per group
        reduce = self.reduce_channels[j - 1] // groups
        bounds = {ko_var: (0, math.ceil(produced / ks_ch) - 1), "fk": (0, ks_ch - 1), "fc": (0, reduce - 1),
                  "fh": (0, kernel[0] - 1), "fw": (0, kernel[1] - 1)}
        k = E.add(E.mul(E.Var(ko_var), ks_ch), E.Var("fk"))
        local = window.offset_c({"o": E.Var("fk"), "i": E.Var("fc"), "h": E.Var("fh"), "w": E.Var("fw")}, bounds)
        channel = self._chunk_channel("fc") if j == 1 else E.Var("fc")
        bounds = bounds | {"ci_outer": (0, self.chunks - 1)}
        glob = tensor.offset_c({"o": k, "i": channel, "h": E.Var("fh"), "w": E.Var("fw")},
                               bounds | {"fc": (0, min(reduce, in_c) - 1)})
        conds = _cond([(k, "<", out_k)], bounds) + (
            _cond([(channel, "<", in_c)], bounds) if j == 1 and self.c_block else
            ["fc < %d" % in_c] if reduce > in_c else [])
        # Channels past the tensor get zeros, so the compute may run whole blocks and drop them at the store.
        value = f"({' && '.join(conds)}) ? filter{j}[{glob}] : 0" if conds else f"filter{j}[{glob}]"
        stmt = Stmt(code=f"filter_cache[{local}] = {value};",
                    summary=f"filter_cache[...] = {'in range ? ' if conds else ''}filter{j}[...]{' : 0' if conds else ''}")
        inner: tuple[Node, ...] = (Loop(var="fc", extent=reduce, body=(
            Loop(var="fh", extent=kernel[0], body=(Loop(var="fw", extent=kernel[1], body=(stmt,)),)),)),)
        return Section(label=f"filter #{j} cache read" + (" (reusing the filter cache)" if j > 1 else ""),
                       step=Step(Phase.FILTER_READ, j), body=(Loop(var="fk", extent=ks_ch, body=inner),))

    def _conv(self, j: int, ko_var: str, src: str, dst_window: TensorLayout, dst: str, *, last: bool) -> Node:
        config, geo, cut = self.config, self.geo, self.cut
        op = config.ops[j - 1]
        _, out_h, out_w, out_k = self.shape_list[j]
        k_split, k_block = config.schedule.k_split, config.schedule.k_block
        groups = op.groups
        reduce = self.reduce_channels[j - 1] // groups  # a group's input channels (all of them: groups 1)
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
        channel: E.Expr = E.Var("rc")
        if j == 1 and self.striped_input:  # the input cache holds this stripe's channels only
            channel = E.add(k_local, E.Var("rc")) if not op.pool else k_local
        elif op.pool:  # output channel k is input channel k's window
            channel = k_global
        elif groups > 1:  # output channel k reads its group's input channels: k // (K / G) * (C / G) + rc
            group_of_k = E.floordiv(k_global, out_k // groups)
            channel = E.add(E.mul(group_of_k, reduce), E.Var("rc"))
        src_index = src_layout.offset_c({"n": E.Const(0), "h": in_row, "w": in_col, "c": channel}, src_bounds)
        d_index = dst_window.offset_c({"n": E.Const(0), "h": E.Var("oh"), "w": E.Var("ow"),
                                       "c": k_local if last else k_global}, bounds)
        # Register blocking: one pixel keeps k_block accumulators, so each input value loaded feeds
        # k_block independent multiply-adds instead of one long dependent chain.
        ctype = ACC_TYPES[config.dtype]
        load = Stmt(code=f"const {ctype} x = {src}[{src_index}];", summary=f"x = {src}[...]")
        if op.kind == "mul":  # x times the side input's value for this image and channel
            side = next(t for t in self.tensors if t.name == f"side_{op.scale_by}").layout
            factor = side.offset_c({"n": E.Var("nb") if self.batched else E.Const(0), "h": E.Const(0), "w": E.Const(0),
                                    "c": k_global}, bounds | {"nb": (0, self.shape_list[0][0] - 1)})
            tap: tuple[Node, ...] = (load, Stmt(code=f"acc[ki] = x * side_{op.scale_by}[{factor}];",
                                                summary=f"acc[ki] = x * {op.scale_by}[n, c]"))
        elif op.pool:
            tap = pool_tap(op, load)
        elif self.win.in_place[j - 1]:  # (geometry.filter_in_place) the filter tensor itself, no filter cache
            tensor = next(t for t in self.tensors if t.name == f"filter{j}").layout
            channel = self._chunk_channel("rc") if j == 1 else E.Var("rc")
            f_index = tensor.offset_c({"o": k_global, "i": channel, "h": E.Var("rh"), "w": E.Var("rw")},
                                      bounds | {"ci_outer": (0, self.chunks - 1)})
            present = _cond([(k_global, "<", out_k)], bounds)
            value = f"({present[0]} ? filter{j}[{f_index}] : 0)" if present else f"filter{j}[{f_index}]"
            mac = Stmt(code=f"acc[ki] += x * {value};", summary=f"acc[ki] += x * filter{j}[...]")
        else:
            f_layout = self.win.filters[j - 1]
            f_index = f_layout.offset_c({"o": k_local, "i": E.Var("rc"), "h": E.Var("rh"), "w": E.Var("rw")}, bounds)
            mac = Stmt(code=f"acc[ki] += x * filter_cache[{f_index}];", summary="acc[ki] += x * filter_cache[...]")
        reduction: Node
        if op.pool:  # the taps outside the channel loop, each guarding its own loads (pooling.window)
            reduction = pool_window(op, self.shape_list[j - 1], row, col, bounds, tap, k_block,
                                    _cond([(k_global, "<", out_k)], bounds))
        elif groups == 1:
            reduction = Loop(var="rh", extent=op.kernel[0], body=(
                Loop(var="rw", extent=op.kernel[1], body=(
                    Loop(var="rc", extent=reduce, body=(load, Loop(var="ki", extent=k_block, body=(mac,)))),)),))
        else:
            # Grouped (depthwise: reduce == 1): each output channel reads its own group's inputs, so the
            # channel loop is outermost and no input value is shared across ki; channels past the tensor
            # (a block's tail) read nothing.
            taps: Node = Loop(var="rh", extent=op.kernel[0], body=(
                Loop(var="rw", extent=op.kernel[1], body=(Loop(var="rc", extent=reduce, body=(load, mac)),)),))
            k_checks = _cond([(k_global, "<", out_k)], bounds)
            if k_checks:
                taps = Guard(cond=k_checks[0], body=(taps,))
            reduction = Loop(var="ki", extent=k_block, body=(taps,))
        row_checks = _cond([(row, ">=", 0), (row, "<", out_h)], bounds)
        col_checks = _cond([(col, ">=", 0), (col, "<", out_w)], bounds)
        if not last and row_checks + col_checks:
            # Positions in the consumer's padding get zeros: the accumulators stay 0 there.
            reduction = Guard(cond=" && ".join(row_checks + col_checks), body=(reduction,))
        store = self._epilogue(j, op, dst, d_index, k_global, (row, col), bounds,
                               padding=[] if last else row_checks + col_checks)
        # the kind's start: 0, or for a max below every float32 a window holds (each has one position inside)
        start, named = OPS[op.kind].ACC_INIT
        init = Stmt(code=f"acc[ki] = {c_float(start) if start else 0};", summary=f"acc[ki] = {named}")
        if self.c_block:
            # input-channel chunks: the output cache holds the partial sums between chunks; the last one
            # finishes them (epilogue included)
            init = Stmt(code=f"acc[ki] = ci_outer ? {dst}[{d_index}] : 0;",
                        summary=f"acc[ki] = ci_outer ? {dst}[...] (partial sum) : 0")
            partial = Guard(cond=f"ci_outer < {self.chunks - 1}", body=(
                Stmt(code=f"{dst}[{d_index}] = acc[ki];", summary=f"{dst}[...] = acc[ki] (partial sum)"),))
            store = Guard(cond=f"ci_outer == {self.chunks - 1}", body=(store,))
        if last:
            store_limit = channel_cover(self.tensors[-1].layout) if self.output_pad_by_overcompute else out_k
        else:
            store_limit = self.reduce_channels[j]  # what the consumer reads: real channels, or with padding
        k_checks = _cond([(k_global, "<", store_limit)], bounds)
        stores: tuple[Node, ...] = (partial, store) if self.c_block else (store,)
        if not last:
            stores = (*stores, self._trace(j, dst, d_index, k_global, (row, col), (out_h, out_w, out_k), bounds))
        if k_checks:
            stores = (Guard(cond=k_checks[0], body=stores),)
        pixel: tuple[Node, ...] = (
            Stmt(code=f"{ctype} acc[{k_block}];", summary=f"acc[{k_block}]"),
            Loop(var="ki", extent=k_block, body=(init,)),
            reduction,
            Loop(var="ki", extent=k_block, body=stores))
        columns: tuple[Node, ...] = (Loop(var="ow", extent=geo.cols[j], body=pixel),)
        if last and col_checks:
            columns = (Loop(var="ow", extent=geo.cols[j], body=(Guard(cond=" && ".join(col_checks), body=pixel),)),)
        if last and row_checks:
            columns = (Guard(cond=" && ".join(row_checks), body=columns),)
        return Section(label=f"{op.kind} #{j}" + ("" if last else f" into {dst}"), step=Step(Phase.CONV, j), body=(
            Loop(var="ko_inner", extent=k_split, body=(Loop(var="oh", extent=geo.rows[j], body=columns),)),))

    def _trace(self, j: int, dst: str, d_index: str, k: E.Expr, at: tuple[E.Expr, E.Expr],
               shape: tuple[int, int, int], bounds: dict) -> Stmt:
        """A validation build's copy of an intermediate's stored value into its whole tensor (logical NHWC), where
        the position lies in it: what checks the chain op by op. KG_TRACE expands to nothing unless the kernel
        is compiled with -DKG_TRACE_INTERMEDIATES (the report does not list it: summary "")."""
        (row, col), (height, width, channels) = at, shape
        n = E.Var("nb") if self.batched else E.Const(0)
        flat = E.add(E.mul(E.add(E.mul(E.add(E.mul(n, height), row), width), col), channels), k)
        inside = _cond([(row, ">=", 0), (row, "<", height), (col, ">=", 0), (col, "<", width),
                        (k, "<", channels)], bounds)
        return Stmt(code=f"KG_TRACE({j - 1}, {' && '.join(inside) or '1'}, {E.to_c(flat)}, {dst}[{d_index}]);",
                    summary="")

    def _epilogue(self, j: int, op, dst: str, d_index: str, k: E.Expr, at: tuple[E.Expr, E.Expr], bounds: dict,
                  padding: list[str]) -> Node:
        """acc -> stored value: + bias, + residual, then the activation's clamp; positions in the consumer's
        padding (an intermediate's zeros) store 0, not the epilogue of 0."""
        e = op.epilogue  # the one record every target renders its store from
        if not e and not op.pool:  # (a max pool's accumulators hold -FLT_MAX in the consumer's padding)
            return Stmt(code=f"{dst}[{d_index}] = acc[ki];", summary=f"{dst}[...] = acc[ki]")
        ctype, out_k = ACC_TYPES[self.config.dtype], self.shape_list[j][3]
        mean = f" / {pool_divisor(op, self.shape_list[j - 1], at, bounds)}" if OPS[op.kind].MEAN else ""
        loads: dict[str, str] = {}  # each load leaf of the statements as C reads it
        if e.bias:
            # channels past the tensor (a block's tail, the consumer's channel padding) have no bias
            term = f"bias{j}[{E.to_c(k)}]"
            if _cond([(k, "<", out_k)], bounds):
                term = f"({E.to_c(k)} < {out_k} ? {term} : {self.zero})"
            loads["bias"] = term
        if e.residual is not None:
            loads["residual"] = self._residual(e.residual, k, at, bounds, padding)
        value = f"({' && '.join(padding)}) ? v : {self.zero}" if padding else "v"
        store = f"{dst}[{d_index}] = {value};"
        added = ("" if e.residual is None else " + input" if e.residual == 0 else f" + {e.residual}"
                 if isinstance(e.residual, str) else f" + conv2d #{e.residual}")
        summary = (f"{dst}[...] = {e.activation}(acc[ki]{' + bias' if e.bias else ''}{added})"
                   ).replace("none(", "(")
        if op.pool:
            summary, steps = f"{dst}[...] = acc[ki]{' / count' if op.kind == 'avgpool' else ''}", [op.kind]
        else:
            steps = (["bias"] if e.bias else []) + (["residual"] if e.residual is not None else []) + [e.activation]
        # the epilogue as its statement records (kernelgen/ops), spelled by the template's C dialect; the report
        # lists each step and the store, not the declaration
        return Section(label=f"epilogue of {op.kind} #{j}: {', '.join(steps)}",
                       body=(Stmt(code=f"{ctype} v = acc[ki]{mean};", summary=""),
                             *(Stmt(code="", summary=summary, assign=a,
                                    loads=tuple((name, loads[name]) for name in statements.loaded(a)))
                               for a in e.statements),
                             Stmt(code=store, summary=summary)))

    def _residual(self, source: int | str, k: E.Expr, at: tuple[E.Expr, E.Expr], bounds: dict, padding: list[str]) -> str:
        """The residual at output position `at`, channel k: the chain's input read from memory where the output
        is written, or op `source`'s output from its stripe cache (the config checked that its window, behind
        stride-1 ops only, holds every position this op writes)."""
        row, col = at
        out_k = (next(side.shape[3] for side in self.config.side_inputs if side.name == source)
                 if isinstance(source, str) else self.shape_list[source][3])
        exists = padding + _cond([(k, "<", out_k)], bounds)
        if source == 0 or isinstance(source, str):  # the input, or a side input, read where the output is written
            name = "input" if source == 0 else f"side_{source}"
            tensor = next(t for t in self.tensors if t.name == name).layout
            term = f"{name}[{tensor.offset_c({'n': E.Var('nb') if self.batched else E.Const(0), 'h': row, 'w': col, 'c': k}, bounds)}]"
        else:
            geo = self.geo
            h = E.add(row, E.mul(geo.row_start[source], -1))  # constant: the strides between are all 1
            w = E.add(col, E.mul(geo.col_start[source], -1))
            window = self.win.temps[source - 1]
            term = f"{self.win.temp_names[source - 1]}[{window.offset_c({'n': E.Const(0), 'h': h, 'w': w, 'c': k}, bounds)}]"
        return f"(({' && '.join(exists)}) ? {term} : {self.zero})" if exists else term  # an operand: parenthesized

    def _chunk_channel(self, var: str) -> E.Expr:
        """The input channel a cache channel holds: itself, or in chunk ci_outer of c_block channels."""
        if not self.c_block:
            return E.Var(var)
        return E.add(E.mul(E.Var("ci_outer"), self.c_block), E.Var(var))

    def _window_of(self, index: int, rows: int, cols: int, channels: int) -> TensorLayout:
        layout = self.source_layouts[index]
        if index == 0 and self.c_block:  # the input cache holds one chunk of channels
            return cache_window(self.config, layout, (1, rows, cols, self.c_block))
        if index == 0 and self.striped_input:  # ... or one channel stripe's
            return cache_window(self.config, layout, (1, rows, cols, self.cut.channels))
        return cache_window(self.config, layout, (1, rows, cols, max(channels, self.shape_list[index][3])))

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
                loop="write back output cache", strategy=PadHandling.OVERCOMPUTE,
                why=f"stores all {limit} channels without a channel branch: padded channels compute to 0 from zero "
                    f"filter channels, which is the layout's pad value"))
        elif tensor.padding:
            own = f"writes only the output's own positions; its {tensor.padding} padding slots"
            why = {PadKind.VALUE: f"{own} get pad value {tensor.layout.pad_value:g} from a fill loop",
                   PadKind.UNDEF: f"{own} are undef: nothing is promised or written there",
                   PadKind.NONE: f"{own} have no pad value: never written"}[kind]
            self.strategies.append(PadStrategy(loop="write back output cache",
                                               strategy=PadHandling.FILL if kind is PadKind.VALUE else PadHandling.BRANCH, why=why))
        return (Section(label="write back output cache", step=Step(Phase.WRITE_BACK), body=(Loop(var="oh", extent=geo.rows[-1], body=columns),)),)
