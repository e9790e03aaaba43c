"""The FMA peak probe: the rate independent multiply-add chains reach on the device, dispatched in the same
command buffer as a kernel so both are measured under the same load."""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

from ...errors import ToolchainError
from .runtime import Stage, VulkanRunner
from .toolchain import compile_glsl


# The FMA peak probe: independent multiply-add chains, the fastest of a few shapes. Which shape reaches the
# device's rate depends on the host under lavapipe, which runs 8 (AVX2) or 16 (AVX-512) invocations per vector
# register, so a vec4 accumulator takes 4 registers and a float one 1:
# - AVX-512 (32 registers, Mesa with FMA): 3 vec4 accumulators ran at 152 GFLOP/s against 121 for 2 (72 for 1;
#   4 spilled: 66).
# - AVX2 Zen2 with Mesa 22.3 / LLVM 15: lavapipe lowers fma() to vmulps + vaddps (no vfmadd in the JIT's code),
#   and LLVM emits each accumulator's chain back to back, so the core overlaps only the chains its reorder window
#   holds: one vec4 (4 chains of 64 steps) read 67 GFLOP/s where 2 and 3 vec4 read 23, and 12 float chains of 4
#   steps per trip 33-41.
# So the probe measures every shape once per device and keeps the fastest (best_shape); a benchmark dispatches
# that one beside its kernel.


@dataclass(frozen=True, slots=True)
class ProbeShape:
    """One FMA-chain shader: `accumulators` independent variables of `components` floats (1: float, 4: vec4),
    each stepped `unroll` times per loop trip (written out in the source)."""

    components: int
    accumulators: int
    unroll: int

    @property
    def trips(self) -> int:
        """Loop trips per invocation: the same FMAs per accumulator for every shape, far below lavapipe's
        65,535 back-edges."""
        return _FMAS_PER_ACCUMULATOR // self.unroll


_FMAS_PER_ACCUMULATOR = 16384
CANDIDATES = (ProbeShape(4, 1, 64), ProbeShape(4, 2, 64), ProbeShape(4, 3, 64), ProbeShape(1, 8, 8),
              ProbeShape(1, 12, 4))
_FMA_LOCAL_SIZE = 64
_FMA_GROUPS = 128  # 0.5-3.2 GFLOP per dispatch: 20-50 ms on lavapipe here
_BEST: dict[str, ProbeShape] = {}


def _fma_source(shape: ProbeShape) -> str:
    kind = "vec4" if shape.components == 4 else "float"
    init = [f"    {kind} a{j} = {kind}(x + {j + 1}.0 / 64.0);" for j in range(shape.accumulators)]
    chain = [f"        a{j} = fma(a{j}, m, c);" for _ in range(shape.unroll) for j in range(shape.accumulators)]
    total = " + ".join(f"a{j}" for j in range(shape.accumulators))
    # m, c and the trip count are push constants so that nothing can be folded at
    # compile time; with m < 1 the values converge to c / (1 - m), never denormal.
    return "\n".join([
        "#version 450",
        "layout(local_size_x_id = 0) in;",
        "layout(std430, binding = 0) writeonly buffer Out { vec4 result[]; };",
        "layout(push_constant) uniform Push { float m; float c; uint trips; } p;",
        "void main() {",
        "    uint gid = gl_GlobalInvocationID.x;",
        "    float x = float(gid & 255u) / 4096.0;",
        f"    {kind} m = {kind}(p.m);",
        f"    {kind} c = {kind}(p.c);",
        *init,
        "    for (uint i = 0u; i < p.trips; ++i) {",
        *chain,
        "    }",
        f"    result[gid] = vec4({total});",
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


def fma_probe(binding: int = 0, shape: ProbeShape = CANDIDATES[0], local_size: int = _FMA_LOCAL_SIZE,
              groups: int = _FMA_GROUPS) -> FmaProbe:
    spirv = compile_glsl(_fma_source(shape))
    invocations = local_size * groups
    push = np.array([0.999, 0.001], np.float32).tobytes() + np.uint32(shape.trips).tobytes()
    stage = Stage(spirv, (binding,), (groups, 1, 1), {0: local_size}, push)
    flops = invocations * _FMAS_PER_ACCUMULATOR * shape.accumulators * shape.components * 2
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


def best_shape(runner: VulkanRunner) -> ProbeShape:
    """The candidate shape that runs fastest on this device, measured once per process (two readings each, the
    higher kept: a reading taken while the host's other work ran is low, never high)."""
    if runner.info.name not in _BEST:
        probes = {shape: fma_probe(shape=shape) for shape in CANDIDATES}
        rates = {shape: max(probe_gflops(runner, probe, repeat=3) for _ in range(2)) for shape, probe in probes.items()}
        _BEST[runner.info.name] = max(CANDIDATES, key=rates.__getitem__)
    return _BEST[runner.info.name]


def fma_peak_gflops(runner: VulkanRunner, *, repeat: int = 7) -> float:
    """The device's FMA peak: the best shape's median rate."""
    return probe_gflops(runner, fma_probe(shape=best_shape(runner)), repeat=repeat)
