"""The core's measuring arithmetic on numbers given, not timed: what bench makes of a target's Timings."""
from __future__ import annotations

import math
import statistics

import numpy as np

from kernelgen import api
from kernelgen.measure.bench import row_of
from kernelgen.measure.records import Timings

CONFIG = "name: rows\ninput: {shape: [1, 6, 5, 4]}\nops:\n  - conv2d: {out_channels: 3, kernel: 3, pad: 1}\n"


def _job():
    return api.jobs(api.load_config(CONFIG), ("c",))["c"]


def test_a_row_pairs_each_repeat_with_the_peak_measured_beside_it():
    """ratio = median over repeats of (FLOPs / time_i) / peak_i: a repeat slowed together with its probe keeps
    its ratio, which the ratio of the medians would not."""
    job = _job()
    flops = job.plan.flops
    seconds, peaks = (1e-3, 2e-3, 4e-3), (10.0, 5.0, 2.5)  # a host slowing down: kernel and probe alike
    row = row_of(job, "c", Timings(label="x", seconds=seconds, peak_gflops=peaks), {"steal": 0.01})
    per_repeat = [flops / s / 1e9 / p for s, p in zip(seconds, peaks)]
    assert per_repeat[0] == per_repeat[1] == per_repeat[2]
    assert row.ratio == statistics.median(per_repeat) and row.peak_gflops == 5.0
    assert (row.seconds, row.spread) == (2e-3, (1e-3, 4e-3)) and row.flops == flops
    assert row.gflops == flops / 2e-3 / 1e9
    assert row.measurements() == {"peak_gflops": 5.0, "ratio": row.ratio, "steal": 0.01}


def test_counters_or_an_estimate_give_a_row_without_a_time():
    job = _job()
    row = row_of(job, "c", Timings(label="y", rank=123.0, metrics={"packets": 7}), {})
    assert math.isnan(row.seconds) and math.isnan(row.gflops) and row.ratio is None and row.peak_gflops is None
    assert row.sort_key == 123.0 and row.measurements() == {"rank": 123.0, "packets": 7}


CHAIN = """\
name: deep
input: {shape: [1, 10, 9, 16]}
ops:
  - conv2d: {out_channels: 16, kernel: 3, pad: 1, bias: true, activation: relu6}
  - conv2d: {out_channels: 16, kernel: 3, pad: 1, groups: 16, bias: true, activation: relu6}
  - conv2d: {out_channels: 16, kernel: 1, bias: true, residual: input}
  - conv2d: {out_channels: 16, kernel: 3, pad: 1, bias: true}
"""


def _emulated_kernel(config, args, scale_op: int = 0, drop_bias_op: int = 0):
    """A float32 'kernel': each op from the previous op's stored float32 output (optionally one op's output
    scaled by 1.001 or one bias dropped); its intermediates and output as a target's run_traced returns them."""
    from kernelgen import reference

    stored = [args.logical["input"].astype(np.float64)]
    for j, op in enumerate(config.ops, start=1):
        bias = args.logical.get(f"bias{j}")
        value = reference.epilogue(reference.apply(stored[-1], args.logical[f"filter{j}"], op), op,
                                   bias * 0 if j == drop_bias_op else bias, stored)
        stored.append((value * (1.001 if j == scale_op else 1.0)).astype(np.float32).astype(np.float64))
    return tuple(s.astype(np.float32) for s in stored[1:-1]), stored[-1].astype(np.float32)


def test_op_by_op_holds_every_op_to_its_own_bound_and_the_chain_bound_does_not():
    """A 4-op chain whose op 2 is 0.1% off passes the chain-wide bound (it grows by sum|w| per op) and fails the
    op-by-op check, which names the op; the exact emulation passes both."""
    from kernelgen.measure.compare import compare
    from kernelgen.measure.records import Status
    from kernelgen.measure.tensors import random_inputs

    config = api.load_config(CHAIN)
    plan = api.plan(config)
    args = random_inputs(config, plan, np.random.default_rng(3))
    layout = plan.tensors[-1].layout

    def check(intermediates, output, traced: bool):
        return compare(config, plan, "c", 3, args, {0xFF: layout.pack(output).reshape(-1)},
                       intermediates=intermediates if traced else None)

    good = _emulated_kernel(config, args)
    assert check(*good, traced=True).status is Status.PASS and check(*good, traced=False).status is Status.PASS
    assert check(*good, traced=True).checked == "op-by-op" and check(*good, traced=False).checked == "chain"
    for broken in (_emulated_kernel(config, args, scale_op=2), _emulated_kernel(config, args, drop_bias_op=3)):
        op_by_op = check(*broken, traced=True)
        assert op_by_op.status is Status.FAIL and op_by_op.bound_ratio > 1
    scaled = check(*_emulated_kernel(config, args, scale_op=2), traced=True)
    assert "conv2d #2: output[" in scaled.detail
    # the end-to-end bound cannot see the 0.1% error of op 2 (what issue 27 measured on deep chains)
    assert check(*_emulated_kernel(config, args, scale_op=2), traced=False).status is Status.PASS
    # the threshold is reported against the output's size: tighter op by op than end to end
    assert 0 < check(*good, traced=True).threshold < check(*good, traced=False).threshold


STRIDED_U8 = """\
name: strided
dtype: uint8
input: {shape: [2, 7, 8, 6], layout: nhwc-8h8w32c}
quant: {input_scale: 0.05, input_zero_point: 120, weight_dtype: int8, weight_scale: 0.01, intermediate_scale: 0.1,
        intermediate_zero_point: 100, output_scale: 0.5, output_zero_point: 130}
ops:
  - conv2d: {out_channels: 6, kernel: 1}
  - conv2d: {out_channels: 6, kernel: 1, stride: [2, 3], dilation: 2, groups: 3}
output: {layout: nhwc-8h8w32c}
targets: [hvx]
"""


def test_uint8_op_by_op_checks_an_intermediate_only_where_a_later_op_reads_it():
    """A 1x1 consumer with stride [2, 3] reads op 1's rows 0, 2, 4, 6 and columns 0, 3, 6 (issue 32): the fused
    chain never computes the rest, which stays poisoned (0xA5) in the trace. Those positions are not compared;
    one wrong byte where the consumer reads still fails, naming the op. A residual reads its source wherever its
    op's output is needed."""
    from kernelgen import reference_quant
    from kernelgen.measure.compare import _read_positions, compare
    from kernelgen.measure.records import Status
    from kernelgen.measure.tensors import random_inputs

    config = api.load_config(STRIDED_U8)
    plan = api.plan(config)
    args = random_inputs(config, plan, np.random.default_rng(5))
    layout = plan.tensors[-1].layout
    _, first, output = reference_quant.chain_outputs(config, args.logical["input"], args.filters(len(config.ops)),
                                                     args.biases(len(config.ops)))
    read = np.broadcast_to(_read_positions(config, plan)[1], first.shape)
    assert read.sum() == 2 * 4 * 3 * 6 and read[0, 6, 6, 5] and not read[0, 1, 0, 0] and not read[0, 0, 7, 0]
    poisoned = np.where(read, first, np.uint8(0xA5))
    outputs = {poison: layout.pack(output).reshape(-1) for poison in (0xA5, 0x5A)}
    for padding in (0xA5, 0x5A):  # the output layout's padding keeps each run's poison
        flat = outputs[padding]
        flat[layout.padding_mask().reshape(-1)] = padding
    result = compare(config, plan, "hvx", 5, args, outputs, intermediates=(poisoned,))
    assert result.status is Status.PASS and result.checked == "bit-exact op-by-op", result.detail
    wrong = poisoned.copy()
    wrong[1, 4, 3, 2] ^= 1
    result = compare(config, plan, "hvx", 5, args, outputs, intermediates=(wrong,))
    assert result.status is Status.FAIL and result.detail.startswith("conv2d #1: output[1, 4, 3, 2]"), result.detail
    # op 2 (kernel 2, dilation 2, pad 1) reads op 1 at rows and columns p - 1 and p + 1, its residual at p: with op 3
    # (stride 4) needing op 2 at rows and columns 0 and 4, op 1 is read at 0, 4 (residual) and 1, 3, 5 (taps)
    residual = api.load_config(STRIDED_U8.replace(
        "  - conv2d: {out_channels: 6, kernel: 1, stride: [2, 3], dilation: 2, groups: 3}",
        "  - conv2d: {out_channels: 6, kernel: 2, dilation: 2, pad: 1, residual: 1}\n"
        "  - conv2d: {out_channels: 6, kernel: 1, stride: 4}"))
    reads = _read_positions(residual, api.plan(residual))
    assert np.flatnonzero(reads[1][0, :, 0, 0]).tolist() == [0, 1, 3, 4, 5]
    assert np.flatnonzero(reads[1][0, 0, :, 0]).tolist() == [0, 1, 3, 4, 5]
