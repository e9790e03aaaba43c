"""Issue 21's tables: what a real GPU compiler makes of the Vulkan kernels, and the OpenCL texture variant.

1. Per Vulkan config in configs/: VGPRs and spilled VGPRs on rdna2 (RADV's ACO, null navi21 device) for the
   config as written (its lavapipe tuning) and for the rdna2 profile's default tiles; the lavapipe GFLOP/s of the
   config as written and its ratio to the FMA probe's peak measured in the same command buffers.
2. OpenCL on PoCL, a 1x1 conv over 64x64x128: the buffer variant, the texture variant with filters in
   textures and with filters in buffers (pocl-cpu's default), GFLOP/s in one run and each against the buffer's.

Prints Markdown. Timings are this machine's in this run; compare ratios, not seconds, across sessions.

    .venv/bin/python benchmarks/real_gpus.py [--repeat 5] [--skip-lavapipe]
"""
from __future__ import annotations

import argparse
from pathlib import Path

from kernelgen.api import TARGETS, bench, jobs, load_config, parse_config
from kernelgen.config import with_options
from kernelgen.targets.vulkan.options import vulkan_options
from kernelgen.measure.context import host_line

REPO = Path(__file__).resolve().parent.parent
TEXTURE_1X1 = """name: {name}
input: {{shape: [1, 64, 64, 128], layout: {{map: "n, h, w, c -> n, c // 4, h, |, w, c % 4"}}}}
ops: [{{conv2d: {{out_channels: 128, kernel: 1}}}}]
output: {{layout: {{map: "n, h, w, c -> n, c // 4, h, |, w, c % 4"}}}}
opencl: {options}
targets: [opencl]
"""


def _aco(config) -> tuple[int, int]:
    """The config's kernels as written (whatever its profile) compiled by RDNA2's compiler: the target's stats
    primitive, since kernelgen.stats and `kernelgen stats` compile the profile they are given."""
    ops = TARGETS["vulkan"].stats(jobs(config, ("vulkan",))["vulkan"], "rdna2")
    return max(o.vgprs for o in ops), sum(o.spilled_vgprs for o in ops)


def vulkan_table(repeat: int, lavapipe: bool) -> list[str]:
    lines = ["| config | VGPRs / spilled, as written | VGPRs / spilled, rdna2 profile | lavapipe GFLOP/s | "
             "of the FMA peak |", "|---|---:|---:|---:|---:|"]
    for path in sorted((REPO / "configs").glob("*.yaml")):
        config = load_config(path)
        if "vulkan" not in config.targets:
            continue
        before = _aco(config)
        rdna2 = with_options(config, "vulkan", vulkan_options(config).model_copy(update={
            "device": "rdna2", "ivc_tile": None, "wg_size": None, "wg_tile": None, "wide_store": False}))
        after = _aco(rdna2)
        speed = ratio = "-"
        if lavapipe:
            (row, *_) = bench(config, "vulkan", repeat=repeat)
            speed, ratio = f"{row.gflops:.2f}", f"{row.ratio:.3f} of {row.peak_gflops:.0f}"
        lines.append(f"| {config.name} | {before[0]} / {before[1]:,} | {after[0]} / {after[1]:,} | {speed} | {ratio} |")
    return lines


def opencl_table(repeat: int) -> list[str]:
    variants = [("buffer", "{variant: buffer}"), ("texture, filters in textures",
                                                  "{variant: texture, filters_in_textures: true}"),
                ("texture, filters in buffers (pocl-cpu default)", "{variant: texture}")]
    rows = []
    for label, options in variants:
        config = parse_config(TEXTURE_1X1.format(name="conv1x1", options=options), "conv1x1.yaml")
        (row, *_) = bench(config, "opencl", repeat=repeat)
        rows.append((label, row))
    buffer = rows[0][1].gflops
    lines = ["| OpenCL variant (1x1, 64x64x128 -> 128) | GFLOP/s | of the buffer variant | FMA peak GFLOP/s |",
             "|---|---:|---:|---:|"]
    lines += [f"| {label} | {row.gflops:.2f} | {row.gflops / buffer:.2f} | {row.peak_gflops:.0f} |"
              for label, row in rows]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-lavapipe", action="store_true", help="ACO statistics only (no timing)")
    args = parser.parse_args()
    print(host_line(["opencl", *([] if args.skip_lavapipe else ["vulkan"])]))
    print("\n".join(vulkan_table(args.repeat, not args.skip_lavapipe)))
    print()
    print("\n".join(opencl_table(args.repeat)))


if __name__ == "__main__":
    main()
