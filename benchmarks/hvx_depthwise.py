"""Useful MACs per packet of uint8 depthwise 3x3 convs on HVX (issue 30's depthwise row: >= 40, bit-exact),
before and after the vector depthwise path (templates/hvx/depthwise_uint8.c.j2). Prints a Markdown table.

Each case is one conv: input [1, size, size, channels] NHWC8h8w32c, 3x3, pad 1, groups = channels, + bias,
relu6, int8 weights with per-channel scales (fixed-point requantization), `schedule: {k_split: 1, h_block: 4}`.
Every case is validated bit-exact first, then `kernelgen bench --target hvx --json` reads qemu-hexagon's packet
counters: `packets` and `useful MACs/packet` for the whole kernel (cache reads, filter read, compute, write-back),
`compute` for the stripe compute alone. QEMU's counters are deterministic: one run says it all.

The "before" columns are quoted, not measured here: the same configs on commit 5fb6bad (the generic grouped path:
4 pixels gathered per tap, widened to halfwords, vmpy h x h; every input channel copied for each channel stripe),
measured once with this script's --json output (PYTHONPATH at that commit's tree); v66 and v73 gave the same
counts to the packet there. "after": a depthwise first op reads the input cache transposed and multiplies with
vrmpy(ub, b), 3 taps per instruction (kernelgen/targets/hvx/depthwise.py). In clang's schedule no packet holds
two of these vector-by-vector vrmpy, nor two of the shared requantization's vmpye / vmpyo: 12 vrmpy + 8 of those
per 4 pixels x 32 channels (1152 MACs) bound the stride-1 compute near 57 MACs/packet.

    .venv/bin/python benchmarks/hvx_depthwise.py [--arch v66 v73]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CASES = ((96, 56, 1), (144, 56, 2), (256, 28, 1), (576, 14, 1), (576, 14, 2))  # (channels, size, stride)
# commit 5fb6bad, per arch and case: (packets, useful MACs/packet, compute MACs/packet)
BEFORE = {
    "v66": {
        "96,56,1": (160638, 16.87, 33.76),
        "144,56,2": (3071308, 0.33, 1.79),
        "256,28,1": (236744, 7.63, 15.80),
        "576,14,1": (461467, 2.20, 4.09),
        "576,14,2": (252475, 1.01, 2.28),
    },
    "v73": {
        "96,56,1": (160638, 16.87, 33.76),
        "144,56,2": (3071308, 0.33, 1.79),
        "256,28,1": (236744, 7.63, 15.80),
        "576,14,1": (461467, 2.20, 4.09),
        "576,14,2": (252475, 1.01, 2.28),
    },
}


def config_text(channels: int, size: int, stride: int, arch: str) -> str:
    scales = ", ".join(f"{s:.5f}" for s in np.random.default_rng(3).uniform(0.0015, 0.004, channels))
    return (f"name: dw_c{channels}_s{size}_st{stride}_{arch}\ndtype: uint8\n"
            f"input: {{shape: [1, {size}, {size}, {channels}], layout: nhwc-8h8w32c}}\n"
            "quant: {input_scale: 0.05, input_zero_point: 128, weight_dtype: int8}\nops:\n"
            f"  - conv2d: {{out_channels: {channels}, kernel: 3, stride: {stride}, pad: 1, groups: {channels}, "
            "bias: true, activation: relu6, filter_layout: oihw-8i32o4i, quant: "
            f"{{weight_scale: [{scales}], output_scale: 0.03, output_zero_point: 5}}}}\n"
            "output: {layout: nhwc-8h8w32c}\nschedule: {k_split: 1, h_block: 4}\n"
            f"hvx: {{arch: {arch}}}\ntargets: [hvx]\n")


def kernelgen(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "kernelgen", *args], check=True, capture_output=True,
                          text=True).stdout


def measure(path: Path) -> dict:
    kernelgen("validate", str(path))  # exits 1 (check=True raises) unless bit-exact
    (row,) = json.loads(kernelgen("bench", str(path), "--target", "hvx", "--json"))["results"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", nargs="+", default=["v66", "v73"])
    parser.add_argument("--json", action="store_true", help="print the measured rows as JSON (for BEFORE)")
    options = parser.parse_args()
    measured = {}
    with tempfile.TemporaryDirectory(prefix="kernelgen-hvxdw-") as tmp:
        for arch in options.arch:
            for case in CASES:
                path = Path(tmp) / f"dw_{arch}_{'_'.join(map(str, case))}.yaml"
                path.write_text(config_text(*case, arch))
                row = measure(path)
                measured[arch, case] = (row["packets"], row["useful_macs_per_packet"], row["compute_macs_per_packet"])
    if options.json:
        print(json.dumps({arch: {",".join(map(str, case)): value for (a, case), value in measured.items() if a == arch}
                          for arch in options.arch}))
        return
    print("| arch | channels | size | stride | packets before | after | useful MACs/packet before | after | "
          "compute MACs/packet before | after |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (arch, case), (packets, useful, compute) in measured.items():
        before = BEFORE.get(arch, {}).get(",".join(map(str, case)))
        old = (f"{before[0]}", f"{before[1]:.1f}", f"{before[2]:.1f}") if before else ("-", "-", "-")
        print(f"| {arch} | {case[0]} | {case[1]}x{case[1]} | {case[2]} | {old[0]} | {packets} | {old[1]} | "
              f"{useful:.1f} | {old[2]} | {compute:.1f} |")


if __name__ == "__main__":
    main()
