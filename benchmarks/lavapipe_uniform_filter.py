"""The filter through uniform buffers on lavapipe: a prototype against the generated kernel.

The generated kernel reads its filter by texelFetch, which lavapipe 22.3 runs as an out-of-line call (46
instructions per vec4 of 8 lanes, and the caller spills around it). gallivm lowers a uniform-buffer load at a
per-lane offset (lp_bld_nir_soa.c emit_load_ubo) to a straight-line gather: the out-of-range lanes' offsets
selected to 0, then per component one scalar load and insert per lane, no call and no branch. This script takes
the kernel `kernelgen build` writes for a plain config and changes only where the filter is read:

- the filter is split into parts of whole taps, each at most maxUniformBufferRange (64 KiB on lavapipe: 4,096
  vec4s; a 3x3 128 -> 128 conv's taps take one part each, 9 bindings of the 15 a stage may have), every part a
  std140 block `vec4 v[]` of its own binding (the plain configs' taps are constants after unrolling, so which part
  a load reads is decided at compile time);
- load_flt reads part tap / taps_per_part at (tap % taps_per_part) * tap_vec4s + ci * oc4s + oc4.

The outputs must equal the generated kernel's bit for bit (the same multiply-adds in the same order), and both
are checked against numpy. The two kernels and the FMA probe `kernelgen bench` uses (program.probes) are timed
interleaved round by round in one process: timestamps (probe and kernel in one command buffer) and process CPU
time (11 runs less 1, all threads).

Measured by this script (2026-12-06, --rounds 3, two runs; Intel Xeon with AVX-512 under KVM, 2 cores shared with two
other sessions, load average 1-3; lavapipe 22.3.6 / LLVM 15, 256 bits, subgroup 8): ratio to the probe by
timestamps, median, generated -> uniform filter:
  1x1 64x64x128 -> 128   0.304 -> 0.273, 0.308 -> 0.275  (one dispatch alone: 7.3-7.4 -> 7.9-8.5 ms)
  3x3 64x64x128 -> 128   0.504 -> 0.468, 0.495 -> 0.457  (9 uniform buffers)
  3x3 258x258x16 -> 256  0.352 -> 0.328                  (3 uniform buffers)
  3x3 s2 225x225x3 -> 32 0.252 -> 0.216
Slower everywhere, by 7-14%. What the JIT made of it (lavapipe_profile.py's dump): each component of a filter vec4
is its own gather, the offsets recomputed, clamped and moved out lane by lane (8 vpextrd, some through the stack),
then 8 scalar loads inserted (vmovd + 3 vpinsrd + vinserti128 per 4 lanes): ~20 instructions a component, ~80 a
vec4, against ~46 for texelFetch's call. The calls fall from 81 to 17 a trip (1x1) but the spills and reloads do
not (3,206 / 3,447 -> 3,192 / 3,287): they hold the 512 accumulator vectors, not registers saved around the calls.
A uniform buffer read at an offset built from constants and push constants only (the same value in every lane)
is no better on 22.3: each scalar is loaded behind its own bounds-check branch (cmp, jb, the buffer's base reloaded,
a 32-bit load into a general register, often spilled) and broadcast with vpbroadcastd, and LLVM hoists them all to
the top of the function.

    PYTHONPATH=. .venv/bin/python benchmarks/lavapipe_uniform_filter.py [--rounds 5] [--shape pw|c3|c258|s2]
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import yaml

UBO_VEC4S = 4096  # lavapipe's maxUniformBufferRange (65,536 bytes) in vec4s
UBO_BINDINGS = 15  # its maxPerStageDescriptorUniformBuffers


@dataclass(frozen=True)
class Conv:
    """A conv of a plain config: NHWC, HWIO filter, batch 1."""
    size: int  # input H = W
    ic: int
    oc: int
    kernel: int
    stride: int = 1
    pad: int = 0

    @property
    def tap_vec4s(self) -> int:
        return self.ic * self.oc // 4


SHAPES = {
    "pw": Conv(64, 128, 128, 1),
    "c3": Conv(64, 128, 128, 3, pad=1),
    "c258": Conv(258, 16, 256, 3),
    "s2": Conv(225, 3, 32, 3, stride=2),
}


def config_text(conv: Conv) -> str:
    """A plain config of the conv (no schedule, no vulkan block), as issue 50's user writes it."""
    return yaml.safe_dump({
        "name": f"uniform_filter_{conv.kernel}x{conv.kernel}", "dtype": "float32",
        "input": {"shape": [1, conv.size, conv.size, conv.ic], "layout": "NHWC"},
        "ops": [{"conv2d": {"out_channels": conv.oc, "kernel": conv.kernel, "stride": conv.stride, "pad": conv.pad,
                            "filter_layout": "HWIO"}}],
        "output": {"layout": "NHWC"}, "targets": ["vulkan"]}, sort_keys=False)


def taps_per_part(conv: Conv) -> int:
    if conv.tap_vec4s > UBO_VEC4S:
        raise ValueError(f"one tap of {conv} holds {conv.tap_vec4s} vec4s, more than a uniform buffer's {UBO_VEC4S}")
    per = UBO_VEC4S // conv.tap_vec4s
    if -(-conv.kernel ** 2 // per) > UBO_BINDINGS - 1:
        raise ValueError(f"{conv}'s filter needs more than {UBO_BINDINGS - 1} uniform buffers")
    return per


def parts(conv: Conv) -> int:
    return -(-conv.kernel ** 2 // taps_per_part(conv))


FLT_DECL = "layout(binding = 1) uniform samplerBuffer flt;\n"
LOAD_FLT = re.compile(r"vec4 load_flt\(int fh, int fw, int ci, int oc4\) \{\n.*?\n\}\n", re.S)


def binding_of(part: int) -> int:
    """Part 0 takes the texel buffer's binding 1; the rest follow dst (2): 3, 4, ..."""
    return 1 if part == 0 else part + 2


def uniform_source(source: str, conv: Conv) -> str:
    """The generated GLSL with the filter read from uniform blocks instead of the texel buffer."""
    per, count = taps_per_part(conv), parts(conv)
    if source.count(FLT_DECL) != 1 or len(LOAD_FLT.findall(source)) != 1:
        raise ValueError("the generated kernel's filter declaration or load_flt changed: update this script")
    blocks = "".join(f"layout(std140, binding = {binding_of(p)}) uniform Filter{p} {{ vec4 v[{UBO_VEC4S}]; }} "
                     f"flt{p};\n" for p in range(count))
    reads = "".join(f"  if (part == {p}) return flt{p}.v[i];\n" for p in range(count - 1))
    load = ("vec4 load_flt(int fh, int fw, int ci, int oc4) {  // tap and part: constants after unrolling\n"
            f"  int tap = fh * {conv.kernel} + fw;\n"
            f"  int part = tap / {per};\n"
            f"  int i = (tap % {per}) * {conv.tap_vec4s} + ci * {conv.oc // 4} + oc4;\n"
            f"{reads}  return flt{count - 1}.v[i];\n}}\n")
    return LOAD_FLT.sub(lambda _: load, source.replace(FLT_DECL, blocks))


def filter_parts(flt: np.ndarray, conv: Conv) -> list[np.ndarray]:
    """The packed filter (HWIO, taps of ic x oc) cut into the parts' buffers, each padded to a whole block."""
    per = taps_per_part(conv) * conv.tap_vec4s * 4
    out = []
    for p in range(parts(conv)):
        part = np.zeros(UBO_VEC4S * 4, flt.dtype)
        piece = flt[p * per:(p + 1) * per]
        part[:piece.size] = piece
        out.append(part)
    return out


def reference(bufs: list[np.ndarray], conv: Conv) -> np.ndarray:
    """float64 numpy conv of the run's own input and filter buffers."""
    n, k, s = conv.size, conv.kernel, conv.stride
    x = bufs[0][:n * n * conv.ic].reshape(n, n, conv.ic).astype(np.float64)
    f = bufs[1][:k * k * conv.ic * conv.oc].reshape(k, k, conv.ic, conv.oc)
    xp = np.pad(x, ((conv.pad, conv.pad), (conv.pad, conv.pad), (0, 0)))
    out = (n + 2 * conv.pad - k) // s + 1
    return sum(xp[i:i + s * (out - 1) + 1:s, j:j + s * (out - 1) + 1:s] @ f[i, j] for i in range(k) for j in range(k))


def run_shape(conv: Conv, rounds: int, tmp: Path) -> dict[str, float]:
    """Check the uniform-filter kernel against the generated one (bit-exact) and numpy (SystemExit on a mismatch),
    then time both against the probe for `rounds` rounds; returns the median ratios by timestamps."""
    from kernelgen.api import load_config
    from kernelgen.measure.primitives import FMA
    from kernelgen.measure.tensors import poisons, random_inputs
    from kernelgen.planner import plan as make_plan
    from kernelgen.targets import TARGETS
    from kernelgen.targets.vulkan.program import compile_program
    from kernelgen.targets.vulkan.toolchain import compile_glsl

    path = tmp / f"conv{conv.kernel}.yaml"
    path.write_text(config_text(conv))
    config = load_config(path)
    job = TARGETS["vulkan"].build(config, make_plan(config))
    source = job.files[f"{config.name}.comp"]
    with compile_program(job, None) as program:
        runner, generated = program.runner, program.stages[0]
        if generated.kinds[1] != "texel" or len(generated.bindings) != 3:
            raise SystemExit(f"expected src, a texel filter and dst, got {generated.kinds}")
        bufs = program.buffers(random_inputs(config, job.plan, np.random.default_rng(0)), poisons(config.dtype)[0])
        extra = filter_parts(bufs[1], conv)
        allb = bufs + extra
        spirv = compile_glsl(uniform_source(source, conv), defines={"KG_OP": "1"})
        first = len(bufs)
        uniform = replace(generated, spirv=spirv,
                          bindings=(generated.bindings[0], first, generated.bindings[2],
                                    *range(first + 1, first + len(extra))),
                          kinds=(generated.kinds[0], "uniform", "storage", *("uniform",) * (len(extra) - 1)))
        stages = {"generated": generated, "uniform filter": uniform}
        ref = reference(bufs, conv)
        outs = {}
        for name, stage in stages.items():
            out = runner.run_sequence([stage], allb).outputs[2][:ref.size].reshape(ref.shape)
            outs[name] = out
            # float32 sums of 27-1152 products of N(0,1)-scale values, against float64: 1e-5 of the largest output
            err = float(np.max(np.abs(out - ref))) if np.isfinite(out).all() else float("nan")
            ok = err <= 1e-5 * float(np.abs(ref).max())
            print(f"  {name:16s} max |error| vs numpy {err:.2e} {'ok' if ok else 'WRONG'}", flush=True)
            if not ok:
                raise SystemExit(f"{name}: output differs from numpy")
        if not np.array_equal(outs["generated"], outs["uniform filter"]):
            raise SystemExit("uniform filter: output differs from the generated kernel's")
        if not rounds:
            return {}
        probe = program.probes(FMA)[0]
        runs = allb + list(probe.kernel.arrays)
        pstage = probe.kernel.stage(len(allb))
        out_size = (conv.size + 2 * conv.pad - conv.kernel) // conv.stride + 1
        flops = 2 * out_size ** 2 * conv.oc * conv.kernel ** 2 * conv.ic
        stamps = {name: [] for name in stages}
        cpu = {name: [] for name in stages}

        def cpu_seconds(stage, repeat: int) -> float:
            start = time.process_time()
            runner.run_sequence([stage], runs, repeat=repeat)
            return time.process_time() - start

        for _ in range(rounds):
            for name, stage in stages.items():
                res = runner.run_sequence([pstage, stage], runs, repeat=4)
                stamps[name] += [(flops / t[1]) / (probe.work / t[0]) for t in res.stage_times_ns[1:]]
                kernel = cpu_seconds(stage, 11) - cpu_seconds(stage, 1)
                probe_s = cpu_seconds(pstage, 3) - cpu_seconds(pstage, 1)
                cpu[name].append((flops * 10 / kernel) / (probe.work * 2 / probe_s))
        for name in stages:
            print(f"  {name:16s} of the probe: timestamps {statistics.median(stamps[name]):.3f} "
                  f"({min(stamps[name]):.2f}-{max(stamps[name]):.2f}), CPU time {statistics.median(cpu[name]):.3f} "
                  f"({min(cpu[name]):.2f}-{max(cpu[name]):.2f})", flush=True)
        return {name: statistics.median(stamps[name]) for name in stages}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shape", choices=sorted(SHAPES), action="append", help="default: all")
    args = parser.parse_args()
    from kernelgen.targets.vulkan.lavapipe_host import current
    host = current()
    print(host.describe() if host else "no lavapipe host found")
    with tempfile.TemporaryDirectory() as tmp:
        for key in args.shape or sorted(SHAPES):
            print(f"{key}: {SHAPES[key]}", flush=True)
            run_shape(SHAPES[key], args.rounds, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
