"""Whole real networks through kernelgen (issue 28): torchvision's MobileNetV2 and ResNet18, float and QDQ (per
tensor and per channel), imported with cost-chosen groups, run end to end against onnxruntime on each target, the
c kernels timed beside onnxruntime in the same run.

    python benchmarks/networks.py [--models mobilenet_v2 resnet18] [--work build/qdq_models]
                                  [--float-targets c opencl vulkan] [--no-bench] [--json results.json]

The models come from benchmarks/qdq_models.py (exported and quantized there when missing, with quantize_static's
defaults: needs torch and torchvision); a quantized network's bytes are held to the onnxruntime session that is
exact on this host, named in its row's `oracle`. Prints one Markdown table row per (network, target): kernels and host steps, the worst group's
executed/useful FLOPs, activation bytes fused against op by op, the c arena against every tensor alone, the
end-to-end agreement of the network's output, and the c time beside onnxruntime's (one thread each).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import qdq_models  # noqa: E402

from kernelgen import api  # noqa: E402
from kernelgen.network.arena import plan_arena  # noqa: E402
from kernelgen.onnx.importer import Fusion, import_model  # noqa: E402
from kernelgen.measure.context import host_line  # noqa: E402


def _imported(model: Path, out: Path, target: str):
    fusion = Fusion(coster=api.fusion_coster(target), quant_coster=api.fusion_coster("hvx"),
                    channels_last=api.TARGETS[target].info().channels_last_caches)  # as `kernelgen import` does
    imported = import_model(model, out, (target,), fusion, quant_targets=("hvx",))
    out.mkdir(parents=True, exist_ok=True)
    for config in imported.configs:
        (out / f"{config.name}.yaml").write_text(config.text)
    (out / "network.yaml").write_text(imported.manifest)
    return imported


def _row(name: str, imported, network, target: str, bench: bool) -> dict:
    groups = [c.group for c in imported.configs if c.group is not None]
    fused = sum(g.activation_bytes for g in groups)
    alone = sum(g.unfused_activation_bytes for g in groups)
    row = {"network": name, "target": target, "kernels": len(network.kernels),
           "host_steps": len(network.steps) - len(network.kernels),
           "worst_recompute": max((g.recompute for g in groups), default=None),
           "groups_over_1_15": sum(g.recompute > 1.15 for g in groups),
           "activation_bytes": fused, "unfused_activation_bytes": alone}
    start = time.perf_counter()
    runs = list(api.validate_network(network, target, seed=11))
    row["validate_seconds"] = round(time.perf_counter() - start, 1)
    row["kernels_passed"] = sum(r.record.passed for r in runs if r.step.is_kernel)
    last = runs[-1].agreement[0] if runs and runs[-1].agreement else None
    row["output_agreement"] = last.text() if last else "did not finish"
    row["all_boundaries_agree"] = all(a.passed for r in runs for a in r.agreement)
    uint8 = [a for r in runs for a in r.agreement if a.dtype == "uint8"]
    row["uint8_boundaries_bit_exact"] = f"{sum(a.max_abs == 0 for a in uint8)}/{len(uint8)}" if uint8 else None
    if uint8:  # which onnxruntime session the bytes are held to on this host, and why (kernelgen/onnx/u8s8.py)
        from kernelgen.network.execute import network_oracle

        row["oracle"] = network_oracle(network).text
    if target == "c":
        built = {s.config.name: api.jobs(s.config, ("c",))["c"] for s in network.kernels}
        arena = plan_arena(network, {s.index: built[s.config.name].plan.workspace_bytes for s in network.kernels})
        row |= {"arena_bytes": arena.size_bytes, "naive_bytes": arena.naive_bytes}
        if bench:
            row |= _timed(network, built)
    return row


def _timed(network, built) -> dict:
    from kernelgen.measure.bench import bench
    from kernelgen.measure.records import BenchOptions
    from kernelgen.network import execute
    from kernelgen.onnx import subgraph

    kernels = sum(bench(api.TARGETS["c"], job, BenchOptions(repeat=3))[0].seconds for job in built.values())
    session = subgraph.session(network.model.read_bytes(), threads=1)
    feeds = execute.network_input(network, 0)
    subgraph.run(session, feeds)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        subgraph.run(session, feeds)
        times.append(time.perf_counter() - start)
    return {"c_kernels_seconds": kernels, "onnxruntime_seconds": sorted(times)[2]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(qdq_models.MODELS))
    parser.add_argument("--work", type=Path, default=Path("build/qdq_models"))
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--float-targets", nargs="+", default=["c", "opencl", "vulkan"])
    parser.add_argument("--no-bench", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    print(host_line(args.float_targets))
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    for model in args.models:
        float_path = args.work / f"{model}_{args.size}.onnx"
        if not float_path.exists():
            qdq_models.export(model, args.size, float_path)
        for flavour in ("float", "per_tensor", "per_channel"):
            path = float_path if flavour == "float" else args.work / f"{model}_{args.size}_{flavour}.onnx"
            if not path.exists():
                qdq_models.quantize(float_path, path, flavour == "per_channel", args.size)
            name = f"{model} {flavour}"
            imported = _imported(path, args.work / f"net_{model}_{flavour}", "c")
            network = api.load_network(args.work / f"net_{model}_{flavour}" / "network.yaml")
            for target in (args.float_targets if flavour == "float" else ["hvx"]):
                rows.append(_row(name, imported, network, target, not args.no_bench))
                print(json.dumps(rows[-1]), flush=True)
    print("\n| network | target | kernels + host steps | worst executed/useful | activations fused / op by op | "
          "arena / each alone | output vs onnxruntime | c / onnxruntime (1 thread) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        arena = f"{r['arena_bytes'] / 2**20:.2f} / {r['naive_bytes'] / 2**20:.2f} MiB" if "arena_bytes" in r else "-"
        timed = (f"{r['c_kernels_seconds'] * 1e3:.0f} / {r['onnxruntime_seconds'] * 1e3:.1f} ms"
                 if "c_kernels_seconds" in r else "-")
        worst = f"{r['worst_recompute']:.2f}" if r["worst_recompute"] is not None else "-"
        print(f"| {r['network']} | {r['target']} | {r['kernels']} + {r['host_steps']} | {worst} | "
              f"{r['activation_bytes'] / 1e6:.2f} / {r['unfused_activation_bytes'] / 1e6:.2f} MB | {arena} | "
              f"{r['output_agreement']}{'' if r['all_boundaries_agree'] else ' (a boundary disagrees)'} | {timed} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0 if all(r["all_boundaries_agree"] and r["kernels_passed"] == r["kernels"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
