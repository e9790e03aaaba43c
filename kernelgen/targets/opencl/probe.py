"""The OpenCL FMA peak probe: independent FMA chains in the widest vector type the device runs at full rate,
over every compute unit, launched between a benchmark's kernel runs so both see the same load.

Which shape reaches the peak depends on the host under PoCL: on an AVX-512 CPU float16 chains run at twice
the rate of float8 ones (424 against 226 GFLOP/s on 2 cores here), on an AVX2 CPU a float16 is two registers.
So the probe measures each candidate once per device and keeps the fastest. The launch names its work-group
size: left to PoCL, 2,048 work-items went out as one or two groups and the probe read 212 or 425 GFLOP/s
from one launch to the next (one core or both)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

from .args import BufferArg, ScalarArg
from .toolchain import OpenCLRunner


@dataclass(frozen=True, slots=True)
class ProbeShape:
    vector: int  # lanes of the float vector type (float16, float8, ...)
    chains: int  # independent FMA chains per work-item: cover the FMA latency times the FMA ports
    local_size: int = 64
    groups_per_unit: int = 16  # many more groups than compute units: every core stays busy

    @property
    def type(self) -> str:
        return f"float{self.vector}"


# 128 lanes of independent chains each: 8 x float16 (AVX-512's 16 lanes), 16 x float8 (AVX2's 8).
CANDIDATES = (ProbeShape(16, 8), ProbeShape(8, 16))
ITERS = 4096
_BEST: dict[str, ProbeShape] = {}


def source(shape: ProbeShape) -> str:
    """a -> a * b + c with b < 1 converges to c / (1 - b): never inf, never denormal."""
    t = shape.type
    init = "\n".join(f"    {t} a{j} = x + {j}.0f;" for j in range(shape.chains))
    chain = " ".join(f"a{j} = fma(a{j}, b, c);" for j in range(shape.chains))
    total = " + ".join(f"a{j}" for j in range(shape.chains))
    return (f"__kernel void fma_peak(__global {t} *out, const float bs, const float cs, const int iters)\n{{\n"
            f"    const {t} b = ({t})(bs), c = ({t})(cs);\n"
            f"    const {t} x = ({t})((float)get_global_id(0) * 1e-6f);\n{init}\n"
            f"    for (int i = 0; i < iters; ++i) {{\n        {chain}\n    }}\n"
            f"    out[get_global_id(0)] = {total};\n}}\n")


def probe_gflops(runner: OpenCLRunner, shape: ProbeShape, *, runs: int = 5) -> float:
    """Median FMA rate of `runs` launches of one shape after a warm-up one (PoCL finishes its JIT there)."""
    work_items = shape.local_size * shape.groups_per_unit * runner.info.compute_units
    args = [BufferArg(np.zeros((work_items, shape.vector), np.float32)), ScalarArg(0.999, "float32"),
            ScalarArg(0.001, "float32"), ScalarArg(ITERS, "int32")]
    result = runner.run(source(shape), "fma_peak", args, (work_items,), (shape.local_size,), repeat=runs + 1)
    flops = 2 * shape.vector * shape.chains * ITERS * work_items
    return flops / statistics.median(result.kernel_times_ns[1:])  # flop per ns = GFLOP/s


def best_shape(runner: OpenCLRunner) -> ProbeShape:
    """The candidate that runs fastest on this device, measured once per process."""
    if runner.info.name not in _BEST:
        _BEST[runner.info.name] = max(CANDIDATES, key=lambda shape: probe_gflops(runner, shape, runs=3))
    return _BEST[runner.info.name]


def fma_peak_gflops(runner: OpenCLRunner, *, runs: int = 5) -> float:
    """The device's FMA peak: the best candidate shape's median rate."""
    return probe_gflops(runner, best_shape(runner), runs=runs)
