"""Dense uint8 convs on HVX v66 (issue 30): packets and useful MACs per packet under qemu-hexagon, each conv first
validated bit-exact, beside the same counts measured once on commit 5fb6bad (before the scheduled vrmpy rows of
targets/hvx/vrmpy_asm.py and the per-shape pixel groups of targets/hvx/dense.py), quoted in BEFORE.

    python benchmarks/hvx_dense.py [--json results.json]

QEMU's counters are deterministic for a given binary: packets executed (no stalls, no memory timing), all of the
kernel (cache reads, channel sums, filter reads, the conv, its requantization, the write-back). 256 useful MACs per
packet is the limit: two vrmpy of 128 per packet. Every conv: v66 (256 KiB of VTCM: the 512-channel ones split
their input channels in 2 chunks), schedule auto, int8 weights with per-channel scales, bias, relu.
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from kernelgen import api
from kernelgen.measure.context import host_line

VRMPY_MACS_PER_PACKET = 256

# name: (input NHWC, kernel, output channels, requantization)
WORKLOADS = {
    "3x3 512->512 14x14": ((1, 14, 14, 512), 3, 512, "fixed_point"),
    "3x3 512->512 14x14, float32 requant": ((1, 14, 14, 512), 3, 512, "float32"),
    "3x3 256->256 28x28": ((1, 28, 28, 256), 3, 256, "fixed_point"),
    "3x3 128->128 56x56": ((1, 56, 56, 128), 3, 128, "fixed_point"),
    "1x1 512->512 14x14": ((1, 14, 14, 512), 1, 512, "fixed_point"),
}

# Measured once with this script on 5fb6bad (the same configs, the same counters): packets, useful MACs/packet.
BEFORE = {
    "3x3 512->512 14x14": (2606895, 177.38),  # seeds 3504329213 ... 2991756378, all bit-exact
    "3x3 512->512 14x14, float32 requant": (2632608, 175.65),  # 65 vector spills
    "3x3 256->256 28x28": (2287701, 202.12),
    "3x3 128->128 56x56": (2219307, 208.36),
    "1x1 512->512 14x14": (310322, 165.63),
}


def config_text(name: str, shape: tuple[int, ...], kernel: int, k: int, requantization: str) -> str:
    scales = ", ".join(f"{s:.5f}" for s in np.random.default_rng(0).uniform(0.0015, 0.004, k))
    return (f"name: {name}\ndtype: uint8\ninput: {{shape: {list(shape)}, layout: nhwc-8h8w32c}}\n"
            f"quant: {{input_scale: 0.05, input_zero_point: 128, weight_dtype: int8, "
            f"requantization: {requantization}}}\nops:\n"
            f"  - conv2d: {{out_channels: {k}, kernel: {kernel}, pad: {kernel // 2}, bias: true, activation: relu, "
            f"filter_layout: oihw-8i32o4i, quant: {{weight_scale: [{scales}], output_scale: 0.8, "
            f"output_zero_point: 0}}}}\noutput: {{layout: nhwc-8h8w32c}}\nschedule: auto\nhvx: {{arch: v66}}\n"
            "targets: [hvx]\n")


def measure(label: str, spec: tuple) -> dict:
    shape, kernel, k, requantization = spec
    config = api.load_config(config_text("hvx_dense", shape, kernel, k, requantization))
    result = api.validate(config, "hvx")
    if not result.passed:
        raise SystemExit(f"{label}: not bit-exact: {result.detail} (seed {result.seed})")
    metrics = api.bench(config, "hvx", repeat=1)[0].metrics
    return {"workload": label, "packets": int(metrics["packets"]),
            "useful_macs_per_packet": metrics["useful_macs_per_packet"], "vector_spills": int(metrics["vector_spills"]),
            "checked": f"bit-exact (seed {result.seed})"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    print(host_line(["hvx"]))
    rows = []
    print("| workload (v66, bias + relu, per-channel scales) | packets before | MACs/packet before | packets now "
          "| MACs/packet now | share of 256 | spills | checked |")
    print("|---|---|---|---|---|---|---|---|")
    for label, spec in WORKLOADS.items():
        row = measure(label, spec)
        rows.append(row)
        packets, macs = BEFORE[label]
        print(f"| {label} | {packets} | {macs:.1f} | {row['packets']} | {row['useful_macs_per_packet']:.1f} | "
              f"{row['useful_macs_per_packet'] / VRMPY_MACS_PER_PACKET:.3f} | {row['vector_spills']} | "
              f"{row['checked']} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
