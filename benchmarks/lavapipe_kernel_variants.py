"""Source variants of the generated conv kernel on lavapipe, paired against it and the FMA probe.

Each variant takes the GLSL `kernelgen build` writes for a plain config (no schedule, no vulkan block) and changes
one thing; its output is checked against numpy (and, where the multiply-adds keep their order, against the
generated kernel's bit for bit), then the variants, the generated kernel and the FMA probe `kernelgen bench` uses
(program.probes) are timed interleaved round by round in one process: timestamps (probe and kernel in one command
buffer) and process CPU time (11 runs less 1, all threads). Variants (--variant, default all that apply):

- uniform: the filter read from uniform buffers instead of texelFetch. lavapipe 22.3 runs texelFetch as an
  out-of-line call (46 instructions per vec4 of 8 lanes, and the caller spills around it), while gallivm lowers a
  uniform-buffer load at a per-lane offset (lp_bld_nir_soa.c emit_load_ubo) to a straight-line gather: no call,
  no branch. The filter is split into parts of whole taps, each at most maxUniformBufferRange (64 KiB on lavapipe:
  4,096 vec4s; a 3x3 128 -> 128 conv's taps take one part each, 9 bindings of the 15 a stage may have), every part
  a std140 block `vec4 v[]` of its own binding; load_flt reads part tap / taps_per_part (a constant after
  unrolling) at (tap % taps_per_part) * tap_vec4s + ci * oc4s + oc4.
- c_outer, c_inner, fw_c_outer: the multiply-adds reordered so that one accumulator's four (one per input channel
  of the chunk) are not back to back: the input channel outside the pixels (c_outer), inside the output chunks
  (c_inner), or kernel column and input channel both outside the pixels (fw_c_outer).
- hoist_rows: every input row of a channel chunk fetched ahead of its multiply-adds (no texelFetch call among them).
- trip1, trip2, trip8: 1, 2 or 8 input-channel chunks per trip of the kept channel loop (the 1x1's default: 4).

Measured by this script (2026-12-06; Intel Xeon with AVX-512 under KVM, 2 cores shared with two other sessions,
load average 1-3; lavapipe 22.3.6 / LLVM 15, 256 bits, subgroup 8): ratio to the probe by timestamps, median of
3-5 rounds, generated -> variant, separate runs apart by "|" (CPU-time ratios agree unless said):
  uniform     1x1 64x64x128 -> 128 0.304 -> 0.273 | 0.308 -> 0.275 | 0.336 -> 0.262 (one dispatch alone: 7.3-7.4 ->
              7.9-8.5 ms); 3x3 64x64x128 -> 128 0.504 -> 0.468 | 0.495 -> 0.457 | 0.503 -> 0.478; 3x3 258x258x16
              -> 256 0.352 -> 0.328 (CPU time 0.346 -> 0.380); 3x3 s2 225x225x3 -> 32 0.252 -> 0.216
  c_outer     3x3 0.508 -> 0.406 | 0.503 -> 0.417; 1x1 0.336 -> 0.254
  c_inner     3x3 0.508 -> 0.478 | 0.503 -> 0.496; 1x1 0.336 -> 0.295
  fw_c_outer  3x3 0.508 -> 0.329 | 0.503 -> 0.360; 1x1 0.336 -> 0.264
  hoist_rows  3x3 0.467 -> 0.441 | 0.503 -> 0.446; 1x1 0.306 -> 0.311 | 0.336 -> 0.309 (CPU time 0.307 -> 0.325)
  trip1/2/8   1x1 0.301 -> 0.246 / 0.291 / 0.297 | 0.336 -> 0.290 / 0.416 / 0.349 (CPU time 0.307 -> 0.266 /
              0.291 / 0.255; the timestamps' ranges 0.2-1.0 that round)
None is faster by both measures in every run. The uniform filter is slower everywhere, by 7-14%. What the JIT made
of it (lavapipe_profile.py's dump): each component of a filter vec4 is its own gather, the offsets recomputed,
clamped and moved out lane by lane (8 vpextrd, some through the stack), then 8 scalar loads inserted (vmovd + 3
vpinsrd + vinserti128 per 4 lanes): ~20 instructions a component, ~80 a vec4, against ~46 for texelFetch's call. The
calls fall from 81 to 17 a trip (1x1) but the spills and reloads do not (3,206 / 3,447 -> 3,192 / 3,287): they hold
the 512 accumulator vectors, not registers saved around the calls. A uniform buffer read at an offset built from
constants and push constants only (the same value in every lane) is no better on 22.3: each scalar is loaded behind
its own bounds-check branch (cmp, jb, the buffer's base reloaded, a 32-bit load into a general register, often
spilled) and broadcast with vpbroadcastd, and LLVM hoists them all to the top of the function. The generated order
(each accumulator's four multiply-adds together, 4 chains of 4 interleaved) beats every reordering (why was not
looked into: spreading an accumulator's updates keeps more of them live at once, which may spill more).

    PYTHONPATH=. .venv/bin/python benchmarks/lavapipe_kernel_variants.py [--rounds 5] [--shape pw|c3|c258|s2]
        [--variant NAME ...]
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
        "name": f"kernel_variants_{conv.kernel}x{conv.kernel}", "dtype": "float32",
        "input": {"shape": [1, conv.size, conv.size, conv.ic], "layout": "NHWC"},
        "ops": [{"conv2d": {"out_channels": conv.oc, "kernel": conv.kernel, "stride": conv.stride, "pad": conv.pad,
                            "filter_layout": "HWIO"}}],
        "output": {"layout": "NHWC"}, "targets": ["vulkan"]}, sort_keys=False)


def taps_per_part(conv: Conv) -> int:
    if conv.tap_vec4s > UBO_VEC4S:
        raise ValueError(f"one tap of {conv} holds {conv.tap_vec4s} vec4s, more than a uniform buffer's {UBO_VEC4S}")
    per = UBO_VEC4S // conv.tap_vec4s
    if -(-conv.kernel ** 2 // per) > UBO_BINDINGS:
        raise ValueError(f"{conv}'s filter needs more than {UBO_BINDINGS} uniform buffers")
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


# The generated kernel's multiply-adds of one (pixel, kernel column): per output chunk, the chunk's 4 input channels.
MULTIPLY_ADDS = """                    [[unroll]] for (int k = 0; k < IVC_OC; ++k) {
                      O[i][j][k] = fma(vec4(v.x), F[b][fw][0][k], O[i][j][k]);
                      O[i][j][k] = fma(vec4(v.y), F[b][fw][1][k], O[i][j][k]);
                      O[i][j][k] = fma(vec4(v.z), F[b][fw][2][k], O[i][j][k]);
                      O[i][j][k] = fma(vec4(v.w), F[b][fw][3][k], O[i][j][k]);
                    }"""
PIXEL_LOOPS = ("                [[unroll]] for (int j = 0; j < IVC_OW; ++j) {\n"
               "                  [[unroll]] for (int fw = 0; fw < KW; ++fw) {\n")
ONE_CHANNEL = """                    [[unroll]] for (int k = 0; k < IVC_OC; ++k)
                      O[i][j][k] = fma(vec4(v[c]), F[b][fw][c][k], O[i][j][k]);"""
ROW_FETCH = re.compile(r"( *)\[\[unroll\]\] for \(int h = 0; h < ROWS; \+\+h\) \{\n(?: *//.*\n)*( *)vec4 C\[(\d+)\];\n"
                       r"( *)\[\[unroll\]\] for \(int q = 0; q < \d+; \+\+q\)\n *C\[q\] = (load_src\w*\(.*\));\n")
TRIP = re.compile(r"for \(int icb = 0; icb < \d+; icb \+= (\d+)\) \{\n *\[\[unroll\]\] for \(int u = 0; u < (\d+); \+\+u\)")


def _replaced(source: str, old: str, new: str) -> str:
    if source.count(old) != 1:
        raise ValueError("the generated kernel's multiply-adds changed: update this script")
    return source.replace(old, new)


def c_outer(source: str, conv: Conv) -> str:
    source = _replaced(source, PIXEL_LOOPS, "                [[unroll]] for (int c = 0; c < 4; ++c)\n" + PIXEL_LOOPS)
    return _replaced(source, MULTIPLY_ADDS, ONE_CHANNEL)


def c_inner(source: str, conv: Conv) -> str:
    return _replaced(source, MULTIPLY_ADDS, "                    [[unroll]] for (int c = 0; c < 4; ++c)\n"
                     + ONE_CHANNEL.replace("\n", "\n  "))


def fw_c_outer(source: str, conv: Conv) -> str:
    source = _replaced(source, PIXEL_LOOPS, "                [[unroll]] for (int fw = 0; fw < KW; ++fw)\n"
                       "                [[unroll]] for (int c = 0; c < 4; ++c)\n"
                       "                [[unroll]] for (int j = 0; j < IVC_OW; ++j) {\n                  {\n")
    return _replaced(source, MULTIPLY_ADDS, ONE_CHANNEL)


def hoist_rows(source: str, conv: Conv) -> str:
    def hoisted(m: re.Match) -> str:
        ind, ind_c, n, ind_q, fetch = m.groups()
        return (f"{ind}vec4 CH[ROWS][{n}];  // every row's fetches ahead of the multiply-adds\n"
                f"{ind}[[unroll]] for (int h = 0; h < ROWS; ++h)\n{ind}  [[unroll]] for (int q = 0; q < {n}; ++q)\n"
                f"{ind}    CH[h][q] = {fetch};\n"
                f"{ind}[[unroll]] for (int h = 0; h < ROWS; ++h) {{\n{ind_c}vec4 C[{n}];\n"
                f"{ind_q}[[unroll]] for (int q = 0; q < {n}; ++q)\n{ind_q}  C[q] = CH[h][q];\n")
    out, found = ROW_FETCH.subn(hoisted, source)
    if found != 1:
        raise ValueError("the generated kernel's row fetches changed: update this script")
    return out


def chunks_a_trip(chunks: int):
    def trips(source: str, conv: Conv) -> str:
        m = TRIP.search(source)
        if conv.kernel != 1 or not m or (conv.ic // 4) % chunks:  # kernel taps: 4,608 multiply-adds a chunk already
            raise ValueError(f"not a 1x1 conv with a channel loop of {chunks}-chunk trips: {conv}")
        new = m.group(0).replace(f"icb += {m.group(1)}", f"icb += {chunks}").replace(f"u < {m.group(2)}",
                                                                                     f"u < {chunks}")
        return source.replace(m.group(0), new)
    return trips


@dataclass(frozen=True)
class Variant:
    source: object  # (generated GLSL, conv) -> GLSL
    same_order: bool  # the multiply-adds in the generated order: its output must equal the generated one's exactly
    uniform_filter: bool = False  # binds the filter parts as uniform buffers (filter_parts)


VARIANTS = {"uniform": Variant(uniform_source, True, uniform_filter=True),
            "c_outer": Variant(c_outer, False), "c_inner": Variant(c_inner, False),
            "fw_c_outer": Variant(fw_c_outer, False), "hoist_rows": Variant(hoist_rows, True),
            "trip1": Variant(chunks_a_trip(1), True), "trip2": Variant(chunks_a_trip(2), True),
            "trip8": Variant(chunks_a_trip(8), True)}


def reference(bufs: list[np.ndarray], conv: Conv) -> np.ndarray:
    """float64 numpy conv of the run's own input and filter buffers."""
    n, k, s = conv.size, conv.kernel, conv.stride
    x = bufs[0][:n * n * conv.ic].reshape(n, n, conv.ic).astype(np.float64)
    f = bufs[1][:k * k * conv.ic * conv.oc].reshape(k, k, conv.ic, conv.oc)
    xp = np.pad(x, ((conv.pad, conv.pad), (conv.pad, conv.pad), (0, 0)))
    out = (n + 2 * conv.pad - k) // s + 1
    return sum(xp[i:i + s * (out - 1) + 1:s, j:j + s * (out - 1) + 1:s] @ f[i, j] for i in range(k) for j in range(k))


def applicable(conv: Conv, names: list[str], source: str) -> list[str]:
    """The named variants that can be made of this conv's generated kernel (the others are said and skipped)."""
    out = []
    for name in names:
        try:
            VARIANTS[name].source(source, conv)
            out.append(name)
        except ValueError as err:
            print(f"  {name}: skipped ({err})")
    return out


def run_shape(conv: Conv, names: list[str], rounds: int, tmp: Path) -> dict[str, float]:
    """Check the generated kernel and the named variants against numpy, and the same-order ones against the
    generated output bit for bit (SystemExit on a mismatch), then time them against the probe for `rounds` rounds;
    returns the median ratios by timestamps of the kernels it ran (NaN without rounds)."""
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
        ref = reference(bufs, conv)
        stages = {"generated": generated}
        for name in applicable(conv, names, source):
            variant = VARIANTS[name]
            spirv = compile_glsl(variant.source(source, conv), defines={"KG_OP": "1"})
            stages[name] = replace(generated, spirv=spirv)
            if variant.uniform_filter:
                first, extra = len(bufs), filter_parts(bufs[1], conv)
                bufs = bufs + extra
                stages[name] = replace(stages[name], bindings=(generated.bindings[0], first, generated.bindings[2],
                                                               *range(first + 1, first + len(extra))),
                                       kinds=(generated.kinds[0], "uniform", "storage", *("uniform",) * (len(extra) - 1)))
        outs = {}
        for name, stage in stages.items():
            out = runner.run_sequence([stage], bufs).outputs[2][:ref.size].reshape(ref.shape)
            outs[name] = out
            # float32 sums of 27-1152 products of N(0,1)-scale values, against float64: 1e-5 of the largest output
            err = float(np.max(np.abs(out - ref))) if np.isfinite(out).all() else float("nan")
            ok = err <= 1e-5 * float(np.abs(ref).max())
            print(f"  {name:12s} max |error| vs numpy {err:.2e} {'ok' if ok else 'WRONG'}", flush=True)
            if not ok:
                raise SystemExit(f"{name}: output differs from numpy")
            if name != "generated" and VARIANTS[name].same_order and not np.array_equal(out, outs["generated"]):
                raise SystemExit(f"{name}: output differs from the generated kernel's")
        if not rounds:
            return dict.fromkeys(stages, float("nan"))
        probe = program.probes(FMA)[0]
        runs = bufs + list(probe.kernel.arrays)
        pstage = probe.kernel.stage(len(bufs))
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
            print(f"  {name:12s} of the probe: timestamps {statistics.median(stamps[name]):.3f} "
                  f"({min(stamps[name]):.2f}-{max(stamps[name]):.2f}), CPU time {statistics.median(cpu[name]):.3f} "
                  f"({min(cpu[name]):.2f}-{max(cpu[name]):.2f})", flush=True)
        return {name: statistics.median(stamps[name]) for name in stages}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shape", choices=sorted(SHAPES), action="append", help="default: all")
    parser.add_argument("--variant", choices=sorted(VARIANTS), action="append", help="default: all")
    args = parser.parse_args()
    from kernelgen.targets.vulkan.lavapipe_host import current
    host = current()
    print(host.describe() if host else "no lavapipe host found")
    with tempfile.TemporaryDirectory() as tmp:
        for key in args.shape or sorted(SHAPES):
            print(f"{key}: {SHAPES[key]}", flush=True)
            run_shape(SHAPES[key], args.variant or list(VARIANTS), args.rounds, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
