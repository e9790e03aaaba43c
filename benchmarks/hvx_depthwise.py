"""Useful MACs per packet of uint8 depthwise 3x3 convs on HVX (issue 30's depthwise row: >= 40, bit-exact),
before and after the depthwise sweep (templates/hvx/depthwise_sweep_uint8.c.j2). Prints a Markdown table.

Each case is one conv: input [1, size, size, channels] NHWC8h8w32c, 3x3, pad 1, groups = channels, + bias,
relu6, int8 weights with per-channel scales (fixed-point requantization), `schedule: {k_split: 1, h_block: 4}`.
Every case is validated bit-exact first, then `kernelgen bench --target hvx --json` reads qemu-hexagon's packet
counters: `packets` and `useful MACs/packet` for the whole kernel as a user builds it, `compute` for the stripe
compute alone (from a second build with counter reads around each stripe compute, ~20 packets a call; until
issue 30's last session the whole kernel was counted in that build too, which cost 576/14 stride 2 17%). QEMU's
counters are deterministic: one run says it all.

"before" is quoted, not measured here: commit 02ef58f (this script's --json output with PYTHONPATH at that tree,
counted as now: runtime.counters' plain build patched in).
There a depthwise first op read an input cache that the input read had transposed (valign + two vshuff per
vector, 4.4 packets per vector), computed one output row at a time with vrmpy(ub, b), 3 taps per instruction,
into an output cache, and a write-back copied that out: on 256 ch 28x28 (v66) the cache read took 11840 of 55843
packets, the write-back 3640. "after": the sweep reads the input tensor and stores into the output tensor (no
cache copy, no write-back), each block of up to 4 output rows of a 32-channel block one block of inline assembly
that kernelgen/targets/hvx/depthwise_asm.py list-schedules (depthwise_program.py: each input row loaded and
transposed once per block for every output row that reads it, so at stride 2 down neighbouring rows share one;
a padding row has no loads, its taps start the sums; the last group's pixels past the output neither summed nor
stored). Rows of at most 2 groups at stride 2 across take blocks of 4 rows (the per-row start, 3 rows' first
loads and transposes before the first vrmpy, overlaps the previous row's work), the others blocks of 2. The bound
of this form: no packet holds two vector-by-vector vrmpy, nor two of the requantization's vmpye / vmpyo (the
assembler rejects both: one multiply pair per packet), so 12 vrmpy + 8 of those per 4 pixels x 32 channels (1152
MACs) allow 57.6 MACs/packet. The schedules reach 20-22 packets per 4 x 32 outputs at stride 1; stride 2 needs 21
permutes per group (4 vshuff for its 2 new vectors, 2 mids, 3 packs per row of 3; 3/4 of that with a shared
row) and fills the 4 HVX resources of a packet (a multiply takes 2). 576 channels 14x14 stride 2 (7x7 out, 2
groups per row, one 3/4 used) in stripes of 4 rows takes per 32-channel block 148 packets for rows 0-3 and 124
for rows 4-6 (the multiplies alone need 239), then a few packets per stripe call (the operand loads, the row
pointers) and ~36 per block for the filter read: 45.0 useful MACs/packet (37.3 with the counter reads; 33.0
before the row blocks, counted as now).

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
# commit 02ef58f, per arch and case: (packets, useful MACs/packet, compute MACs/packet)
BEFORE = {
    "v66": {
        "96,56,1": (75205, 36.03, 49.28),
        "144,56,2": (56066, 18.12, 42.38),
        "256,28,1": (55804, 32.37, 46.01),
        "576,14,1": (64188, 15.83, 23.21),
        "576,14,2": (23023, 11.03, 30.88),
    },
    "v73": {
        "96,56,1": (68485, 39.56, 55.95),
        "144,56,2": (53777, 18.89, 45.01),
        "256,28,1": (51397, 35.14, 51.86),
        "576,14,1": (60156, 16.89, 25.57),
        "576,14,2": (22141, 11.47, 34.59),
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
    from kernelgen.measure.context import host_line
    print(host_line(["hvx"]), file=sys.stderr if options.json else sys.stdout)
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
