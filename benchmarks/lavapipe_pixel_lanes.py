"""Pixel lanes with the filter shared through the subgroup, on lavapipe: a prototype against the generated kernel.

Issue 50 asks for >= 0.6 of lavapipe's FMA probe on the 1x1 and 3x3 64x64x128 -> 128 and the 3x3 258x258x16 -> 256
convs. The generated kernels put the subgroup's lanes along output channels; this script writes the other design by
hand and times both:

- each invocation (lane) owns R output rows x P pixels (P pixels 8 columns apart) x K output channels (K = 8 or
  16), all R x P x K accumulators scalars in registers; a workgroup is one 8-lane subgroup (lavapipe's size);
- per 4-channel input chunk and tap, the 8 lanes gather one vec4 texel each of the HWIO filter (lane l: input
  channel l / (K/4), output chunk l % (K/4): 32 filter values in one texelFetch) and every multiply-add takes its
  filter value with subgroupShuffle(texel component, constant lane), its input value from the lane's own pixel;
- a 3x3 fetches each input row once per chunk (lane l: columns l - 1 and 7 + l) and passes the neighbouring
  columns round by subgroupShuffle, rather than one fetch per tap;
- workgroup x walks the output-channel blocks, so neighbouring workgroups read the same input pixels;
- one trip of the kept loop covers U input chunks; outputs are stored 8 channels at a time as a u64vec4.

It checks every variant's output against numpy (float64, from the same buffers) and times the variants, the
generated kernel and the FMA probe `kernelgen bench` uses (program.probes), interleaved round by round in one
process: timestamps (probe and kernel in one command buffer) and process CPU time (10 runs less 1, all threads).

Measured by this script (2026-12-06, --rounds 5; Intel Xeon with AVX-512 under KVM, 2 cores shared with three
other sessions, load average 3-3.6; lavapipe 22.3.6 / LLVM 15, 256 bits, subgroup 8): ratio to the probe, median
(range), timestamps / CPU time:
  1x1 64x64x128 -> 128  generated 0.299 (0.25-0.31) / 0.400 (0.18-0.50); R4 P1 K8 U4 0.296 / 0.324;
                        R2 P2 K8 U8 0.294 / 0.224; R2 P2 K8 U2 0.292 / 0.276
  3x3 64x64x128 -> 128  generated 0.509 (0.42-0.65) / 0.426 (0.36-0.85); R4 P1 K8 U1 0.464 / 0.452;
                        R2 P2 K8 U1 0.446 / 0.460; R2 P1 K16 U1 0.437 / 0.454
  3x3 258x258x16 -> 256 (valid; --rounds 3) generated 0.333 / 0.328; R4 P1 K8 U1 0.316 / 0.295;
                        R2 P2 K8 U2 0.189 / 0.177; R2 P1 K16 U2 0.196 / 0.196
Earlier runs of the same shaders: 1x1 0.277 | 0.278-0.280, 3x3 0.495 | 0.474 (timestamps, generated | here).
Parity, not the 1.2x that would justify a second dense template. What the JIT made of it (lavapipe_profile.py's
dump): subgroupShuffle with a constant lane is one vpermd per filter value, in registers (its constant index
vectors made once per invocation, some reloaded from the stack); subgroupBroadcast with a constant lane is not: lavapipe scans the execution mask in an 8-step loop and
reloads the value from a stack slot per broadcast (0.04-0.07 of the probe). With shuffles, the kernel function
holds 46-56% of the samples in its multiply-add region (3.1 instructions per multiply-add at R4 K8: lavapipe
emits vmulps + vaddps, not FMA), 30-33% sit in the out-of-line texel fetch (8 x 16-byte loads and a transpose,
46 instructions, per vec4 of 8 lanes; the input fetch holds most), and 17% of a 1x1's in the u64vec4 stores'
per-lane loop (its store-forwarding stalls). Channel blocks along workgroup x rather than z made no difference that
survived the load (1x1 R2 P2 K8 U2: 0.270 -> 0.273).

    PYTHONPATH=. .venv/bin/python benchmarks/lavapipe_pixel_lanes.py [--rounds 5] [--shape pw|c3|c258] [--write DIR]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import yaml

LANES = 8  # lavapipe's subgroup at 256 bits; the shader assumes one 8-lane subgroup per workgroup


@dataclass(frozen=True)
class Conv:
    """A stride-1 conv, NHWC, HWIO filter, batch 1: 'same' (zero padding) or 'valid' (none)."""
    size: int  # output H = W
    ic: int
    oc: int
    kernel: int
    same: bool = True

    @property
    def pad(self) -> int:
        return (self.kernel - 1) // 2 if self.same else 0

    @property
    def in_size(self) -> int:
        return self.size + self.kernel - 1 - 2 * self.pad


@dataclass(frozen=True)
class Variant:
    rows: int  # R: output rows a lane owns
    pixels: int  # P: pixels a lane owns along its row, 8 columns apart
    channels: int  # K: output channels a lane owns (8 or 16)
    chunks: int  # U: 4-channel input chunks per trip of the kept loop
    row_shuffles: bool = True  # 3x3: one fetch per input row and column, neighbours by shuffle

    @property
    def name(self) -> str:
        return f"R{self.rows} P{self.pixels} K{self.channels} U{self.chunks}" + ("" if self.row_shuffles else " fetch/tap")

    def groups(self, conv: Conv) -> tuple[int, int, int]:
        return conv.oc // self.channels, conv.size // (LANES * self.pixels), conv.size // self.rows


SHAPES = {
    "pw": (Conv(64, 128, 128, 1), (Variant(4, 1, 8, 4), Variant(2, 2, 8, 8), Variant(2, 2, 8, 2))),
    "c3": (Conv(64, 128, 128, 3), (Variant(4, 1, 8, 1), Variant(2, 2, 8, 1), Variant(2, 1, 16, 1))),
    "c258": (Conv(256, 16, 256, 3, same=False), (Variant(4, 1, 8, 1), Variant(2, 2, 8, 2), Variant(2, 1, 16, 2))),
}


def shader(conv: Conv, v: Variant) -> str:
    """The GLSL compute shader of one variant (bindings as the generated kernel's: src, flt texel buffers, dst)."""
    h = w = conv.in_size
    ic4, oc4, pad, ks = conv.ic // 4, conv.oc // 4, conv.pad, conv.kernel
    kc = v.channels // 4  # output vec4 chunks a lane owns
    per_gather = LANES // kc  # input channels one filter gather holds
    gathers = 4 // per_gather
    if conv.size % (LANES * v.pixels) or conv.size % v.rows or conv.oc % v.channels or ic4 % v.chunks:
        raise ValueError(f"{v.name} does not tile {conv}")
    out = ["#version 450",
           "#extension GL_EXT_control_flow_attributes : require",
           "#extension GL_ARB_gpu_shader_int64 : require",
           "#extension GL_KHR_shader_subgroup_shuffle : require",
           f"layout(local_size_x = {LANES}, local_size_y = 1, local_size_z = 1) in;",
           "layout(binding = 0) uniform samplerBuffer src;",
           "layout(binding = 1) uniform samplerBuffer flt;",
           "layout(std430, binding = 2) writeonly buffer Dst { u64vec4 dst[]; };",
           "uint64_t word(float a, float b) { return packUint2x32(uvec2(floatBitsToUint(a), floatBitsToUint(b))); }",
           "vec4 load_src(int ih, int iw, int ic4) {"]
    if pad:  # a clamped read and a select, no branch (as the generated kernel reads its padding)
        out += [f"  bool inside = ih >= 0 && ih < {h} && iw >= 0 && iw < {w};",
                f"  ih = clamp(ih, 0, {h - 1}); iw = clamp(iw, 0, {w - 1});",
                f"  return mix(vec4(0), texelFetch(src, (ih * {w} + iw) * {ic4} + ic4), bvec4(inside));"]
    elif ks > 1:  # a row segment's last fetch reaches up to 6 columns past the row: read inside it, unused
        out.append(f"  return texelFetch(src, (ih * {w} + min(iw, {w - 1})) * {ic4} + ic4);")
    else:
        out.append(f"  return texelFetch(src, (ih * {w} + iw) * {ic4} + ic4);")
    out += ["}", "void main() {",
            "  int lane = int(gl_SubgroupInvocationID);",
            f"  int oc4_0 = int(gl_WorkGroupID.x) * {kc};",
            f"  int ow0 = int(gl_WorkGroupID.y) * {LANES * v.pixels} + lane;",
            f"  int oh0 = int(gl_WorkGroupID.z) * {v.rows};",
            f"  int fsel = (lane / {kc}) * {oc4} + oc4_0 + lane % {kc};"]
    accs = [(r, p, k) for r in range(v.rows) for p in range(v.pixels) for k in range(v.channels)]
    out += [f"  float A{r}_{p}_{k} = 0.0;" for r, p, k in accs]
    out.append(f"  [[dont_unroll]] for (int icb = 0; icb < {ic4}; icb += {v.chunks}) {{")
    shuffled = v.row_shuffles and ks > 1
    for u in range(v.chunks):
        out.append(f"    int ic4_{u} = icb + {u};")
        if shuffled:
            fetched = (LANES * v.pixels + ks - 1 + LANES - 1) // LANES  # columns of a row segment / 8
            for hr in range(v.rows + ks - 1):
                for q in range(fetched):
                    out.append(f"    vec4 C{hr}_{q}_{u} = load_src(oh0 + {hr - pad}, ow0 + {LANES * q - pad}, ic4_{u});")
        for fh in range(ks):
            for fw in range(ks):
                tap = fh * ks + fw
                for r in range(v.rows):
                    for p in range(v.pixels):
                        x = f"X{r}_{p}_{tap}_{u}"
                        if not shuffled:
                            out.append(f"    vec4 {x} = load_src(oh0 + {r + fh - pad}, ow0 + {LANES * p + fw - pad}, ic4_{u});")
                        elif fw == 0:
                            out.append(f"    vec4 {x} = C{r + fh}_{p}_{u};")
                        else:  # column lane + fw of this segment: this fetch's lanes, then the next one's
                            src_lane = f"uint((lane + {fw}) & {LANES - 1})"
                            out.append(f"    vec4 {x} = (lane + {fw} < {LANES}) ? subgroupShuffle(C{r + fh}_{p}_{u}, "
                                       f"{src_lane}) : subgroupShuffle(C{r + fh}_{p + 1}_{u}, {src_lane});")
                for g in range(gathers):
                    out.append(f"    vec4 F{g}_{tap}_{u} = texelFetch(flt, ({tap * conv.ic} + 4 * ic4_{u} + "
                               f"{g * per_gather}) * {oc4} + fsel);")
    for u in range(v.chunks):
        for tap in range(ks * ks):
            for c in range(4):
                g, sub = divmod(c, per_gather)
                for k in range(v.channels):
                    # a constant lane: one vpermd in registers (subgroupBroadcast scans the exec mask per value)
                    out.append(f"    {{ float f = subgroupShuffle(F{g}_{tap}_{u}.{'xyzw'[k % 4]}, {sub * kc + k // 4}u);")
                    out += [f"      A{r}_{p}_{k} = fma(X{r}_{p}_{tap}_{u}.{'xyzw'[c]}, f, A{r}_{p}_{k});"
                            for r in range(v.rows) for p in range(v.pixels)]
                    out.append("    }")
    out.append("  }")
    for r in range(v.rows):
        for p in range(v.pixels):
            for k8 in range(v.channels // 8):
                words = ", ".join(f"word(A{r}_{p}_{8 * k8 + 2 * i}, A{r}_{p}_{8 * k8 + 2 * i + 1})" for i in range(4))
                out.append(f"  dst[((oh0 + {r}) * {conv.size} + ow0 + {LANES * p}) * {conv.oc // 8} + oc4_0 / 2 + {k8}] = "
                           f"u64vec4({words});")
    out.append("}")
    return "\n".join(out) + "\n"


def config_text(conv: Conv) -> str:
    """A plain config of the conv (no schedule, no vulkan block), as issue 50's user writes it."""
    return yaml.safe_dump({
        "name": f"pixel_lanes_{conv.kernel}x{conv.kernel}", "dtype": "float32",
        "input": {"shape": [1, conv.in_size, conv.in_size, conv.ic], "layout": "NHWC"},
        "ops": [{"conv2d": {"out_channels": conv.oc, "kernel": conv.kernel, "stride": 1, "pad": conv.pad,
                            "filter_layout": "HWIO"}}],
        "output": {"layout": "NHWC"}, "targets": ["vulkan"]}, sort_keys=False)


def run_shape(conv: Conv, variants: tuple[Variant, ...], rounds: int, tmp: Path) -> None:
    """Check every variant and the generated kernel against numpy (SystemExit on a mismatch), then time them
    against the probe for `rounds` rounds (none: only the check)."""
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
    with compile_program(job, None) as program:
        runner, generated = program.runner, program.stages[0]
        bufs = program.buffers(random_inputs(config, job.plan, np.random.default_rng(0)), poisons(config.dtype)[0])
        n = conv.in_size
        x = bufs[0][:n * n * conv.ic].reshape(n, n, conv.ic).astype(np.float64)
        f = bufs[1][:conv.kernel ** 2 * conv.ic * conv.oc].reshape(conv.kernel, conv.kernel, conv.ic, conv.oc)
        pad = conv.pad
        xp = np.pad(x, ((pad, pad), (pad, pad), (0, 0)))
        ref = sum(xp[i:i + conv.size, j:j + conv.size] @ f[i, j] for i in range(conv.kernel) for j in range(conv.kernel))
        stages = {"generated": generated}
        stages.update({v.name: replace(generated, spirv=compile_glsl(shader(conv, v)), groups=v.groups(conv))
                       for v in variants})
        for name, stage in stages.items():
            out = runner.run_sequence([stage], bufs).outputs[2][:ref.size].reshape(ref.shape)
            # float32 sums of 128-1152 products of N(0,1)-scale values, against float64: 1e-5 of the largest output
            err = float(np.max(np.abs(out - ref))) if np.isfinite(out).all() else float("nan")
            ok = err <= 1e-5 * float(np.abs(ref).max())
            print(f"  {name:22s} max |error| vs numpy {err:.2e} {'ok' if ok else 'WRONG'}", flush=True)
            if not ok:
                raise SystemExit(f"{name}: output differs from numpy")
        if not rounds:
            return
        probe = program.probes(FMA)[0]
        allb = bufs + list(probe.kernel.arrays)
        pstage = probe.kernel.stage(len(bufs))
        flops = 2 * conv.size ** 2 * conv.oc * conv.kernel ** 2 * conv.ic
        stamps = {name: [] for name in stages}
        cpu = {name: [] for name in stages}

        def cpu_seconds(stage, repeat: int) -> float:
            start = time.process_time()
            runner.run_sequence([stage], allb, repeat=repeat)
            return time.process_time() - start

        for _ in range(rounds):
            for name, stage in stages.items():
                res = runner.run_sequence([pstage, stage], allb, repeat=4)
                stamps[name] += [(flops / t[1]) / (probe.work / t[0]) for t in res.stage_times_ns[1:]]
                kernel = cpu_seconds(stage, 11) - cpu_seconds(stage, 1)
                probe_s = cpu_seconds(pstage, 3) - cpu_seconds(pstage, 1)
                cpu[name].append((flops * 10 / kernel) / (probe.work * 2 / probe_s))
        for name in stages:
            print(f"  {name:22s} of the probe: timestamps {statistics.median(stamps[name]):.3f} "
                  f"({min(stamps[name]):.2f}-{max(stamps[name]):.2f}), CPU time {statistics.median(cpu[name]):.3f} "
                  f"({min(cpu[name]):.2f}-{max(cpu[name]):.2f})", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shape", choices=sorted(SHAPES), action="append", help="default: all")
    parser.add_argument("--write", type=Path, help="write the variants' GLSL to this directory and exit")
    args = parser.parse_args()
    shapes = args.shape or sorted(SHAPES)
    if args.write:
        args.write.mkdir(parents=True, exist_ok=True)
        for key in shapes:
            conv, variants = SHAPES[key]
            for v in variants:
                name = f"{key}_r{v.rows}p{v.pixels}k{v.channels}u{v.chunks}.comp"
                (args.write / name).write_text(shader(conv, v))
                print(args.write / name, "groups", ",".join(map(str, v.groups(conv))))
        return 0
    from kernelgen.targets.vulkan.lavapipe_host import current
    host = current()
    print(host.describe() if host else "no lavapipe host found")
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        for key in shapes:
            conv, variants = SHAPES[key]
            print(f"{key}: {conv}", flush=True)
            run_shape(conv, variants, args.rounds, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
