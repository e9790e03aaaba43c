"""plan(config) -> Plan: seed 000's fused conv2d chain schedule, generalised. Pure.

Structure (seed 000): the last op's output is cut into stripes of k_split x k_block
output channels (ko_outer), w_split x w_block columns (wo_outer, only when the width is
split) and h_split x h_block rows (ho_outer). For each stripe: read the input rows the
whole chain needs (halo included) into the input cache; run every earlier op over all of
its output channels (its own ko_outer_<j> loop, each step reading k_split filter blocks
into the shared filter cache) into a temp-output cache; then the last op into the output
cache, and write that back.

schedule.order: rows_outer turns the order around for chains: row stripes outermost (ho_outer),
every earlier op over all its channels once per row stripe, then the last op's channel blocks
in a ko_outer loop inside the stripe, each block's filter read, compute and write-back in turn
(the output cache still holds one block). Earlier ops then run once per row stripe (only halo
rows are recomputed) and the input is loaded once; every filter is read once per row stripe.

Two schedule options change the stripe loop (seed 001):
- pipeline: double_buffer flattens the stripes into one loop whose step s loads stripe
  s + 1 into the other input cache, computes stripe s and stores stripe s - 1, with a
  prologue (load stripe 0) and an epilogue (store the last stripe);
- halo: reuse keeps the input cache as a ring of rows: window row r of stripe ho_outer
  lives in row (ho_outer * step + r) % rows, so the rows a stripe shares with the one above
  stay put and only the new rows are loaded.

Caches hold logical windows (rows x columns x channels) in their tensor's own layout
(geometry.py), so any layout works and the seed's sizes fall out; where every target wants a
pixel's channels together and the tensor keeps them apart (NCHW), the cache is NHWC instead
(geometry.cache_window) and a note says so.
"""
from __future__ import annotations

from dataclasses import replace

from ..config import Config
from ..layout import PadKind, parse_layout
from ..plan_types import (Cache, Function, Halo, LoopOrder, Node, OpGeometry, Param, Pipeline, Plan, StripeGeometry, StripeParts,
                    Stripes, Tensor)
from .builder import StripeBuilder
from .costs import PlanCosts, plan_costs, useful_flops
from .fitted import WORKSPACE_LIMIT, fit
from .geometry import ALIGNMENT_BYTES, ELEMENT_BYTES, temp_names, workspace_elements
from .packing import pack_function, padding_fill, unpack_function
from .stripe_loops import compose_stripes, timeline as stripe_timeline
from .work import count_work

__all__ = ["PlanCosts", "WORKSPACE_LIMIT", "compose_stripes", "fitted_config", "plan", "plan_costs"]

BIAS_LAYOUT = parse_layout("O", ("o",))  # a bias: one value per output channel, contiguous

C_TYPES = {"float32": "float", "float16": "_Float16", "uint8": "uint8_t"}
ZERO = {"float32": "0.0f", "float16": "0.0f", "uint8": "0"}


def fitted_config(config: Config, plan: Plan) -> Config:
    """The config with the splits, blocks and loop order the plan chose (fitted to a budget or given), for
    targets that re-derive the stripe geometry."""
    return replace(config, schedule=replace(config.schedule, k_split=plan.k_split, h_split=plan.h_split,
                                            w_split=plan.w_split, c_split=plan.c_split, c_block=plan.c_block,
                                            k_block=plan.k_block, h_block=plan.h_block, w_block=plan.w_block,
                                            order=plan.order, orders=(plan.order,)))


def plan(config: Config) -> Plan:
    fitted = fit(config)
    config, search, shape_list = fitted.config, fitted.search, fitted.shapes
    cut, geo, win, caches = fitted.cut, fitted.geometry, fitted.windows, fitted.caches
    s = config.schedule
    n_ops = len(config.ops)
    batch = shape_list[0][0]
    ctype, zero, ebytes = C_TYPES[config.dtype], ZERO[config.dtype], ELEMENT_BYTES[config.dtype]

    # Tensors: global ones are kernel arguments; intermediates exist only as cache windows.
    tensors = [Tensor(name="input", title="Input", logical_layout="NHWC",
                      layout=config.input_layout.bind(shape_list[0]))]
    for j, op in enumerate(config.ops, start=1):
        if op.pool:
            continue  # a pool reads no filter
        filt = (op.out_channels, shape_list[j - 1][3] // op.groups, *op.kernel)
        tensors.append(Tensor(name=f"filter{j}", title=f"Filter {j}", logical_layout="OIHW",
                              layout=op.filter_layout.bind(filt)))
    # Biases after the filters: one value per output channel.
    tensors += [Tensor(name=f"bias{j}", title=f"Bias {j}", logical_layout="O", layout=BIAS_LAYOUT.bind((op.out_channels,)))
                for j, op in enumerate(config.ops, start=1) if op.bias]
    # Side inputs (a residual's other branch) after them, then the output.
    tensors += [Tensor(name=side.param, title=f"Side Input {side.name}", logical_layout="NHWC",
                       layout=side.layout.bind(side.shape)) for side in config.side_inputs]
    tensors.append(Tensor(name="output", title="Output", logical_layout="NHWC",
                          layout=config.ops[-1].output_layout.bind(shape_list[-1])))
    intermediates = tuple(
        Tensor(name=f"temp{j}", title="Temp Output" if n_ops == 2 else f"Temp Output {j}", logical_layout="NHWC",
               layout=config.ops[j - 1].output_layout.bind(shape_list[j])) for j in range(1, n_ops))

    b = StripeBuilder(config, shape_list, cut, geo, win, tensors, ctype, zero)
    assert s.order is not None, "fit_schedule picks the order"
    load, compute = b.load(), b.compute()  # rows_outer: the write-back is inside the compute's channel loop
    store = b.store() if s.order is LoopOrder.CHANNELS_OUTER else ()
    parts = StripeParts(load=load, compute=compute, store=store, ko_extent=cut.ko_extent,
                        ho_extent=cut.ho_extent, wo_extent=cut.wo_extent, batch=batch, channels=cut.channels,
                        rows=cut.rows, cols=cut.cols, pipeline=s.pipeline, ctype=ctype, chunks=b.chunks, order=s.order)
    nest = compose_stripes(parts)
    timeline = stripe_timeline(parts.count, bool(store)) if s.pipeline is Pipeline.DOUBLE_BUFFER else ()
    body: list[Node] = list(nest)
    output_tensor = tensors[-1]
    # a pad_value on a layout without padding slots has nothing to fill (no empty `if () {`)
    if (output_tensor.layout.layout.pad_kind is PadKind.VALUE and output_tensor.layout.padding
            and not b.output_pad_by_overcompute):
        body.append(padding_fill(output_tensor.layout, "output", ctype))

    params = tuple(Param(name=t.name, ctype=f"{'' if t.name == 'output' else 'const '}{ctype} *restrict")
                   for t in tensors) + (Param(name="workspace", ctype=f"{ctype} *restrict"),)
    cache_of = {c.name: c for c in caches}
    prologue = tuple(
        f"{ctype} *const {c.c_name} = {cache_of[c.aliases].c_name if c.aliases else f'workspace + {c.offset}'};"
        + (f" /* {c.note} */" if c.note else "") for c in caches)
    kernel = Function(name=config.name, doc=f"fused chain of {n_ops} conv2d op(s); workspace: "
                                            f"{workspace_elements(caches)} elements",
                      params=params, prologue=prologue, body=tuple(body), traces=n_ops - 1)
    helpers = [pack_function(f"{config.name}_pack_{t.name}", t.layout, t.logical_layout, ctype) for t in tensors[:-1]]
    helpers.append(unpack_function(f"{config.name}_unpack_output", output_tensor.layout, ctype))

    ops, flops = [], 0
    for j, op in enumerate(config.ops, start=1):
        work = useful_flops(op, shape_list[j - 1], shape_list[j])
        flops += work
        ops.append(OpGeometry(index=j, in_shape=shape_list[j - 1], out_shape=shape_list[j], kernel=op.kernel,
                             stride=op.stride, pad=op.pad, dilation=op.dilation, flops=work, groups=op.groups,
                             epilogue=op.epilogue, kind=op.kind, count_include_pad=op.count_include_pad,
                             scale_by=op.scale_by))
    work = count_work(config, shape_list, geo, cut, ebytes)
    notes = _notes(config, caches, geo, cut, n_ops, work.reload_input_bytes, work.traffic.input_bytes)
    if b.chunks > 1:
        out_cache = next(c for c in caches if c.name.startswith("output"))
        reread = 2 * (b.chunks - 1) * cut.count * batch * out_cache.elements * 4
        notes += (f"input channels in {b.chunks} chunks of {b.c_block}: the input and filter caches hold one chunk; "
                  f"partial sums stay in the output cache between chunks ({'an int32 buffer for uint8, ' if config.dtype == 'uint8' else ''}"
                  f"{reread} more bytes of cache reads and writes); memory traffic is unchanged",)
    return Plan(name=config.name, config_path=config.path, dtype=config.dtype, ctype=ctype, element_bytes=ebytes,
                k_split=s.k_split, h_split=s.h_split, w_split=s.w_split if cut.wo_extent > 1 else None,
                k_block=s.k_block, h_block=s.h_block, w_block=s.w_block,
                stripe_counts=(cut.ko_extent, cut.ho_extent, cut.wo_extent), geometry=geo, ops=tuple(ops),
                tensors=tuple(tensors), intermediates=intermediates, caches=caches,
                workspace_elements=workspace_elements(caches), alignment_bytes=ALIGNMENT_BYTES,
                kernel=kernel, stripe=parts, helpers=tuple(helpers), flops=flops, executed_flops=work.executed_flops,
                traffic=work.traffic, output_pad_kind=output_tensor.layout.layout.pad_kind,
                pipeline=s.pipeline, timeline=timeline, halo=s.halo, reload_input_bytes=work.reload_input_bytes,
                pad_strategies=tuple(b.strategies), search=search, notes=notes, c_split=b.chunks, c_block=b.c_block,
                order=s.order, schedule_origin=s.origin)


# ---------------------------------------------------------------- notes

def _notes(config: Config, caches: tuple[Cache, ...], geo: StripeGeometry, cut: Stripes, n_ops: int, reload_bytes: int,
           input_bytes: int) -> tuple[str, ...]:
    notes = []
    halo = geo.rows[0] - geo.rows[-1]
    if config.schedule.halo is Halo.REUSE:
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
    if config.schedule.order is LoopOrder.ROWS_OUTER:
        earlier = f"conv2d #1{f'..#{n_ops - 1}' if n_ops > 2 else ''} and the input load" if n_ops > 1 else "the input load"
        notes.append(f"loop order rows_outer: {earlier} run once per row stripe ({cut.ho_extent * cut.wo_extent} "
                     f"of them), conv2d #{n_ops}'s {cut.ko_extent} output-channel block(s) of {cut.channels} inside "
                     f"each, every block written back once computed; every filter is read once per row stripe")
        if config.schedule.order_ignored_by:
            notes.append(f"loop order rows_outer: {', '.join(config.schedule.order_ignored_by)} run a kernel per "
                         f"conv2d over whole tensors and ignore it (no stripe loops)")
    elif n_ops > 1 and cut.ko_extent > 1:
        notes.append(f"conv2d #1..#{n_ops - 1} run again for each of the {cut.ko_extent} output-channel stripes "
                     f"(seed 000's loop order: ko_outer outside ho_outer)")
    if config.schedule.pipeline is Pipeline.DOUBLE_BUFFER and config.schedule.order is LoopOrder.ROWS_OUTER:
        notes.append("double buffer: two input caches, the next row stripe's load overlapping this one's compute; "
                     "rows_outer writes each channel block back inside the compute, so one output cache and no "
                     "deferred store")
    elif config.schedule.pipeline is Pipeline.DOUBLE_BUFFER:
        notes.append("double buffer: two input and two output caches; the output cannot reuse an input cache "
                     "(seed 000's To-Do: the store of stripe i-1 would race the load of stripe i+1)")
    for cache in caches:
        if cache.aliases:
            notes.append(f"the {cache.name} cache reuses the {cache.aliases} cache's storage")
    # the layout of the tensor each window cache holds part of (input_a, output_b: of the input, the output)
    tensors = {"input": config.input_layout.name, "output": config.ops[-1].output_layout.name} | {
        name: op.output_layout.name for name, op in zip(temp_names(n_ops), config.ops)}
    swapped = [c for c in caches if c.physical_layout != tensors.get(c.name.removesuffix("_a").removesuffix("_b"),
                                                                     c.physical_layout)]
    if swapped:
        notes.append(f"caches {', '.join(c.name for c in swapped)}: {swapped[0].physical_layout}, a pixel's channels "
                     f"together (every target of the config reads channel vectors), though their tensors keep them "
                     f"apart: the input read and the write-back transpose")
    chosen = [(j, op) for j, op in enumerate(config.ops, 1) if op.filter_layout_by]
    if chosen:
        names, (_, op) = ", ".join(f"filter{j}" for j, _ in chosen), chosen[0]
        notes.append(f"{names}: {op.filter_layout.name}, the layout the {op.filter_layout_by} target reads "
                     f"{config.dtype} filters in (the config names no filter_layout)")
    return tuple(notes)
