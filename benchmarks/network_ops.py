"""What of a real network kernelgen generates, and the share of its time in each kind of op (issue 29).

    python benchmarks/network_ops.py [--models mobilenet_v2 resnet18 mobilenet_v3_small] [--work build/qdq_models]
                                     [--repeat 3] [--quantized] [--json results.json]

For torchvision's networks (exported by benchmarks/qdq_models.py when missing: needs torch and torchvision), float:
the nodes of the model, the nodes `kernelgen import` leaves to the host (by op type), then the network imported with
one op per kernel (`--max-group-ops 1`) and benched on c (`kernelgen bench network.yaml`), each kernel's time
summed by the kind of its op: convs, 1x1 convs on a pooled 1x1 image (squeeze-excite's and the classifier), max and
average pools, squeeze-excite's multiplies. Hard gates ride in the conv stores and are not separable. One run on
one host: read the shares, not the milliseconds.

With --quantized, the same for the networks quantized per tensor by onnxruntime (QDQ, uint8): imported for hvx one
op per kernel and benched there, each kernel's QEMU packets (a deterministic count, not a clock) summed by kind;
convs whose store maps bytes through a hard gate's table are a kind of their own.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import qdq_models  # noqa: E402

from kernelgen import api  # noqa: E402
from kernelgen.onnx.graph import read_graph  # noqa: E402
from kernelgen.onnx.importer import Fusion, import_model  # noqa: E402
from kernelgen.measure.context import host_line  # noqa: E402

MODELS = ("mobilenet_v2", "resnet18", "mobilenet_v3_small")


def _write(imported, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for config in imported.configs:
        (out / f"{config.name}.yaml").write_text(config.text)
    (out / "network.yaml").write_text(imported.manifest)


def _kind(config) -> str:
    op = config.ops[0]
    if op.pool:
        return "global_avgpool" if op.kind == "avgpool" and config.input_shape[1:3] == op.kernel else op.kind
    if config.input_shape[1:3] == (1, 1):
        return "1x1 conv on a pooled image"
    return "conv with a gate table" if config.dtype == "uint8" and op.hard is not None else "conv"


def _quantized(model: str, args) -> dict:
    """The per-tensor QDQ network on hvx: nodes, what is left to the host, packets by kind of op."""
    float_path = args.work / f"{model}_{args.size}.onnx"
    path = args.work / f"{model}_{args.size}_per_tensor.onnx"
    if not float_path.exists():
        qdq_models.export(model, args.size, float_path)
    if not path.exists():
        qdq_models.quantize(float_path, path, False, args.size)
    graph = read_graph(path)
    nodes = [n for i, n in enumerate(graph.nodes) if not graph.computes_constant(i)]
    whole = import_model(path, args.work / f"qops_{model}", ("hvx",), Fusion(quant_coster=api.fusion_coster("hvx")))
    split = args.work / f"qops_{model}_split"
    _write(import_model(path, split, ("hvx",), Fusion(quant_coster=api.fusion_coster("hvx"), max_ops=1)), split)
    run = subprocess.run([sys.executable, "-m", "kernelgen", "bench", str(split / "network.yaml"), "--target", "hvx",
                          "--repeat", "1", "--json"], capture_output=True, text=True, check=True)
    packets: Counter = Counter()
    for step in json.loads(run.stdout)["steps"]:
        if step["kind"] == "kernel":
            packets[_kind(api.load_config(split / f"{step['name']}.yaml"))] += step["packets"] or 0
    return {"network": f"{model} (QDQ, hvx)", "nodes": len(nodes),
            "host_nodes": dict(Counter(op for _, op, _ in whole.skipped)), "kernels": len(whole.configs),
            "converted": len(whole.converted), "packets": dict(packets), "total": sum(packets.values())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--work", type=Path, default=Path("build/qdq_models"))
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quantized", action="store_true", help="the QDQ networks on hvx (QEMU packets)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    print(host_line(["c", "opencl", "vulkan", *(["hvx"] if args.quantized else [])]))
    args.work.mkdir(parents=True, exist_ok=True)
    if args.quantized:
        rows = [_report(_quantized(model, args)) for model in args.models]
        _table(rows, "packets by op kind on hvx", "packets", lambda p: f"{p / 1e6:.2f} M")
    else:
        rows = [_report(_float(model, args)) for model in args.models]
        _table(rows, "time by op kind on c", "seconds", lambda s: f"{s * 1e3:.1f} ms")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


def _report(row: dict) -> dict:
    print(json.dumps(row), flush=True)
    return row


def _float(model: str, args) -> dict:
    """The float network on c: nodes, what is left to the host, seconds by kind of op."""
    path = args.work / f"{model}_{args.size}.onnx"
    if not path.exists():
        qdq_models.export(model, args.size, path)
    graph = read_graph(path)
    nodes = [n for i, n in enumerate(graph.nodes) if not graph.computes_constant(i)]
    whole = import_model(path, args.work / f"ops_{model}", ("c",),
                         Fusion(coster=api.fusion_coster("c"), quant_coster=api.fusion_coster("hvx"),
                                channels_last=True))
    split = args.work / f"ops_{model}_split"  # NHWC between kernels, as `kernelgen import` writes for c
    _write(import_model(path, split, ("c",), Fusion(coster=api.fusion_coster("c"), max_ops=1, channels_last=True)),
           split)
    run = subprocess.run([sys.executable, "-m", "kernelgen", "bench", str(split / "network.yaml"), "--target", "c",
                          "--repeat", str(args.repeat), "--json"], capture_output=True, text=True, check=True)
    report = json.loads(run.stdout)
    seconds: Counter = Counter()
    for step in report["steps"]:
        kind = _kind(api.load_config(split / f"{step['name']}.yaml")) if step["kind"] == "kernel" else "host"
        seconds[kind] += step["seconds"]
    return {"network": model, "nodes": len(nodes), "host_nodes": dict(Counter(op for _, op, _ in whole.skipped)),
            "kernels": len(whole.configs), "seconds": dict(seconds), "total": sum(seconds.values()),
            "onnxruntime_seconds": report.get("onnxruntime_seconds")}


def _table(rows: list[dict], what: str, key: str, unit) -> None:
    """The markdown table the note quotes: per network its nodes, what the host runs, each kind's share of `key`."""
    print(f"\n| network | nodes | left to the host | {what} (one op per kernel) |")
    print("|---|---|---|---|")
    for r in rows:
        left = ", ".join(f"{op} x{k}" for op, k in sorted(r["host_nodes"].items())) or "none"
        shares = ", ".join(f"{kind} {unit(v)} ({v / r['total']:.1%})"
                           for kind, v in sorted(r[key].items(), key=lambda kv: -kv[1]))
        print(f"| {r['network']} | {r['nodes']} | {left} | {shares} |")

if __name__ == "__main__":
    sys.exit(main())
