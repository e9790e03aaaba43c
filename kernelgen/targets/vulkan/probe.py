"""The FMA peak probe: the rate a vec4 FMA chain reaches on the device, dispatched in the same
command buffer as a kernel so both are measured under the same load."""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

from ...errors import ToolchainError
from .runtime import Stage, VulkanRunner
from .toolchain import compile_glsl


# The FMA peak probe. llvmpipe runs 8 invocations per 256-bit register, so one vec4 accumulator occupies 4
# registers. How many independent accumulators fit depends on the host: with AVX-512's 32 vector registers 3
# accumulators ran at 152 GFLOP/s here against 121 for 2 (72 for 1, and 4 spilled: 66); with AVX2's 16, 3
# accumulators and m and c no longer fit. So the probe measures each candidate once per device and keeps the
# fastest (best_accumulators), and a benchmark dispatches that one beside its kernel.
CANDIDATE_ACCUMULATORS = (2, 3)
_FMA_UNROLL = 64  # FMAs per accumulator per loop trip, written out in the source
_FMA_TRIPS = 256  # loop trips (back-edges) per invocation: far below lavapipe's 65,535
_FMA_LOCAL_SIZE = 64
_FMA_GROUPS = 128  # 2.1-3.2 GFLOP per dispatch: 20-30 ms on lavapipe here
_BEST: dict[str, int] = {}


def _fma_source(accumulators: int, unroll: int) -> str:
    init = [f"    vec4 a{j} = x + vec4({j + 1}.0 / 64.0);" for j in range(accumulators)]
    chain = [f"        a{j} = fma(a{j}, m, c);" for _ in range(unroll) for j in range(accumulators)]
    total = " + ".join(f"a{j}" for j in range(accumulators))
    # m, c and the trip count are push constants so that nothing can be folded at
    # compile time; with m < 1 the values converge to c / (1 - m), never denormal.
    return "\n".join([
        "#version 450",
        "layout(local_size_x_id = 0) in;",
        "layout(std430, binding = 0) writeonly buffer Out { vec4 result[]; };",
        "layout(push_constant) uniform Push { float m; float c; uint trips; } p;",
        "void main() {",
        "    uint gid = gl_GlobalInvocationID.x;",
        "    vec4 x = vec4(float(gid & 255u) / 4096.0);",
        "    vec4 m = vec4(p.m);",
        "    vec4 c = vec4(p.c);",
        *init,
        "    for (uint i = 0u; i < p.trips; ++i) {",
        *chain,
        "    }",
        f"    result[gid] = {total};",
        "}",
        "",
    ])


@dataclass(frozen=True, slots=True)
class FmaProbe:
    """The FMA-chain shader as one stage of a sequence, so that a benchmark can dispatch it
    right before a kernel and compare both under the same load (a CPU device shares its
    cores with whatever else runs)."""

    stage: Stage  # binds buffers[binding] of the sequence: `buffer`
    buffer: np.ndarray
    flops: int  # per dispatch, 2 per lane FMA


def fma_probe(binding: int = 0, accumulators: int = CANDIDATE_ACCUMULATORS[0], local_size: int = _FMA_LOCAL_SIZE,
              groups: int = _FMA_GROUPS) -> FmaProbe:
    spirv = compile_glsl(_fma_source(accumulators, _FMA_UNROLL))
    invocations = local_size * groups
    push = np.array([0.999, 0.001], np.float32).tobytes() + np.uint32(_FMA_TRIPS).tobytes()
    stage = Stage(spirv, (binding,), (groups, 1, 1), {0: local_size}, push)
    flops = invocations * _FMA_TRIPS * _FMA_UNROLL * accumulators * 4 * 2
    return FmaProbe(stage, np.zeros((invocations, 4), np.float32), flops)


def probe_gflops(runner: VulkanRunner, probe: FmaProbe, *, repeat: int = 7) -> float:
    """Sustained FMA rate of one probe in GFLOP/s (2 FLOPs per lane), the median of `repeat` timed dispatches
    after a warm-up one that absorbs first-dispatch costs (on lavapipe the first dispatch of a pipeline is tens
    of ms slower)."""
    if not runner.info.timestamps:
        raise ToolchainError(f"{runner.info.name} cannot write timestamps; no peak to measure")
    result = runner.run_sequence([probe.stage], [probe.buffer], repeat=repeat + 1)
    if not np.isfinite(result.outputs[0]).all():
        raise ToolchainError("the FMA probe produced non-finite values")
    return probe.flops / statistics.median(result.gpu_times_ns[1:])


def best_accumulators(runner: VulkanRunner) -> int:
    """The candidate accumulator count that runs fastest on this device, measured once per process."""
    if runner.info.name not in _BEST:
        _BEST[runner.info.name] = max(CANDIDATE_ACCUMULATORS,
                                      key=lambda n: probe_gflops(runner, fma_probe(accumulators=n), repeat=3))
    return _BEST[runner.info.name]


def fma_peak_gflops(runner: VulkanRunner, *, repeat: int = 7) -> float:
    """The device's vec4 FMA peak: the best candidate's median rate."""
    return probe_gflops(runner, fma_probe(accumulators=best_accumulators(runner)), repeat=repeat)
