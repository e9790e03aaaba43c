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
        value = reference.epilogue(reference.conv2d(stored[-1], args.logical[f"filter{j}"], op), op,
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
