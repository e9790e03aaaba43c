"""The core's measuring arithmetic on numbers given, not timed: what bench makes of a target's Timings."""
from __future__ import annotations

import math
import statistics

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
