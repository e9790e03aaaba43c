"""GFLOP/s and GB/s of a MobileNetV2 inverted-residual block (configs/mobilenet_v2_block.yaml) on every
target, fused and op by op, next to each device's measured peak; and the activation traffic the fused
plan saves. Prints a Markdown table (the numbers of issue 19's note).

GB/s counts every tensor once (input, filters, biases, output: `kernelgen bench`'s compulsory bytes),
so a layer bound by memory (the depthwise 3x3) is judged against the copy bandwidth, not the FLOP peak.
hvx runs under qemu-hexagon, which has no clock: its row reports packets and MACs per packet instead.

    .venv/bin/python benchmarks/mobilenet_block.py [--targets c opencl vulkan hvx] [--repeat 5]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from kernelgen.api import load_config
from kernelgen.planner import plan
from kernelgen.report import text_report
from kernelgen.targets import TARGETS
from kernelgen.measure.context import host_line

REPO = Path(__file__).resolve().parent.parent
BLOCK = REPO / "configs" / "mobilenet_v2_block.yaml"
# The block's three ops, each its own config (what running them one by one means), on the same shapes.
SINGLE = {
    "expand_1x1": ([1, 56, 56, 24], "{out_channels: 144, kernel: 1, bias: true, activation: relu6}"),
    "depthwise_3x3": ([1, 56, 56, 144], "{out_channels: 144, kernel: 3, pad: 1, groups: 144, bias: true, "
                                        "activation: relu6}"),
    "project_1x1": ([1, 56, 56, 144], "{out_channels: 24, kernel: 1, bias: true}"),
}


def bench(config: Path, targets: list[str], repeat: int) -> list[dict]:
    args = [sys.executable, "-m", "kernelgen", "bench", str(config), "--json", "--repeat", str(repeat)]
    for target in targets:
        args += ["--target", target]
    out = subprocess.run(args, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["results"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", nargs="+", default=["c", "opencl", "vulkan", "hvx"])
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    print(host_line(options.targets))
    peaks = TARGETS["c"].host_peaks()
    rows = []
    with tempfile.TemporaryDirectory(prefix="kernelgen-mnv2-") as tmp:
        configs = [("fused block", BLOCK)]
        for name, (shape, op) in SINGLE.items():
            path = Path(tmp) / f"{name}.yaml"
            path.write_text(f"name: mnv2_{name}\ninput: {{shape: {shape}, layout: NHWC}}\nops:\n  - conv2d: {op}\n"
                            f"output: {{layout: NHWC}}\nschedule: {{budget: 262144}}\n")
            configs.append((name, path))
        for label, path in configs:
            for row in bench(path, options.targets, options.repeat):
                rows.append((label, row))
    print(f"CPU peak (8-wide FMA chains, 1 thread): {peaks.gflops:.1f} GFLOP/s; copy bandwidth (64 MiB): "
          f"{peaks.bandwidth_gbs:.1f} GB/s\n")
    print("| target | kernel | ms | GFLOP/s | GB/s (each tensor once) | device peak GFLOP/s | of peak |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for label, r in rows:
        if r["seconds"] is None or r["seconds"] == 0:
            print(f"| {r['target']} | {label} | (qemu: {r.get('packets')} packets) | | | | "
                  f"{r.get('useful_macs_per_packet', 0):.3f} useful MACs/packet |")
            continue
        peak = r.get("peak_gflops", peaks.gflops)
        print(f"| {r['target']} | {label} | {r['seconds'] * 1e3:.3f} | {r['gflops']:.2f} | {r['gbs']:.3f} | "
              f"{peak:.1f} | {r['gflops'] / peak:.1%} |")
    report = text_report(plan(load_config(BLOCK)))
    fusion = next(line for line in report.splitlines() if line.startswith("fusion:"))
    print(f"\n{fusion}")


if __name__ == "__main__":
    main()
