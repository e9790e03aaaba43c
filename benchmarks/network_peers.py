"""Whole networks against their peers (issue 48): kernelgen's program, onnxruntime and, where it installs,
ExecuTorch + XNNPACK, interleaved round by round on one input, each peer in its own virtual environment.

    python benchmarks/network_peers.py [--models DIR] [--threads 1] [--rounds 5] [--repeat 5]
        [--executorch-python /work/xnnenv/bin/python] [--torch-python /work/torchenv/bin/python] [--json out.json]

Per network (mobilenet_v3_small, mobilenet_v2, resnet18 under --models, as /work/models/export.py wrote them):
  kernelgen    `kernelgen import` then the program `kernelgen build` ships, built once with -DKG_TIMERS
               (measure/program_bench.py, what `kernelgen bench network.yaml --target c` runs)
  onnxruntime  this venv's, same threads (more than one: spinning off)
  executorch   torchvision's model built as export.py builds it (seed 0, the same BatchNorm statistics: the same
               function as the ONNX file), torch.export, XnnpackPartitioner, to a .pte, in the ExecuTorch venv
               (`pip install executorch` and a torch there); run by its Python runtime in a process of its own
Each round runs every peer for --repeat inferences; the medians per inference of the CPU time of the whole
process (all threads) and of the wall time are reported, with each peer's output against onnxruntime's
(1e-4 of its largest magnitude). A peer that cannot run says why in its row and the others go on.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from kernelgen import api
from kernelgen.measure.program_bench import (build_timed_program, onnxruntime_round, onnxruntime_session,
                                             program_round)
from kernelgen.network import execute

NETWORKS = ("mobilenet_v3_small", "mobilenet_v2", "resnet18")

# Run in the ExecuTorch venv: torchvision's model as /work/models/export.py makes it, exported and lowered to XNNPACK.
EXPORT = r'''
import subprocess, sys, torch
# torchvision from PyPI beside a CPU torch lacks its compiled ops (its import fails on torchvision::nms): placeholder
# schemas let the classification models load, none of those ops being used (as /work/models/export.py does)
if subprocess.run([sys.executable, "-c", "import torchvision"], capture_output=True).returncode != 0:
    library = torch.library.Library("torchvision", "DEF")
    for op in ("nms", "qnms", "roi_align", "_roi_align_backward", "qroi_align", "ps_roi_align", "_ps_roi_align_backward",
               "roi_pool", "_roi_pool_backward", "ps_roi_pool", "_ps_roi_pool_backward", "deform_conv2d",
               "_deform_conv2d_backward"):
        library.define(f"{op}(Tensor x) -> Tensor")
import torchvision
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
model, path = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
net = getattr(torchvision.models, model)(weights=None).eval()
with torch.no_grad():
    for layer in net.modules():
        if isinstance(layer, torch.nn.BatchNorm2d):
            layer.weight.uniform_(0.5, 1.5); layer.bias.normal_(0.0, 0.1)
            layer.running_mean.normal_(0.0, 0.1); layer.running_var.uniform_(0.5, 1.5)
exported = torch.export.export(net, (torch.randn(1, 3, 224, 224),))
program = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch()
open(path, "wb").write(program.buffer)
'''

# Run in the ExecuTorch venv: the .pte timed on the input, medians printed as JSON, the output saved.
RUN = r'''
import json, statistics, sys, time, numpy as np, torch
from executorch.runtime import Runtime
pte, given, out, threads, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
try:
    from executorch.extension.pybindings.portable_lib import _unsafe_reset_threadpool
    _unsafe_reset_threadpool(threads)
    pool = f"{threads} thread(s)"
except Exception as error:
    pool = f"threadpool not set ({type(error).__name__})"
method = Runtime.get().load_program(pte).load_method("forward")
x = torch.from_numpy(np.load(given))
method.execute([x])
cpu, wall = [], []
for _ in range(repeat):
    start, cpu_start = time.perf_counter(), time.process_time()
    y = method.execute([x])[0]
    wall.append(time.perf_counter() - start); cpu.append(time.process_time() - cpu_start)
np.save(out, y.numpy())
print(json.dumps({"cpu": statistics.median(cpu), "wall": statistics.median(wall), "pool": pool}))
'''


def executorch_pte(python: str, model: str, folder: Path) -> tuple[Path | None, str]:
    path = folder / f"{model}.pte"
    done = subprocess.run([python, "-c", EXPORT, model, str(path)], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        return None, (done.stderr.strip().splitlines() or ["no message"])[-1]
    return path, ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path, default=Path("/work/models"))
    parser.add_argument("--networks", nargs="*", default=list(NETWORKS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--executorch-python", default="/work/xnnenv/bin/python")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="network-peers-") as scratch:
        for name in args.networks:
            results.append(one_network(name, args, Path(scratch) / name))
            print_row(results[-1])
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


def one_network(name: str, args: argparse.Namespace, work: Path) -> dict:
    work.mkdir(parents=True)
    imported = subprocess.run([sys.executable, "-m", "kernelgen", "import", str(args.models / f"{name}.onnx"), "-o",
                               str(work / "configs"), "--target", "c"], capture_output=True, text=True)
    if imported.returncode != 0:
        raise SystemExit(f"{name}: kernelgen import failed: {imported.stderr.strip()}")
    network = api.load_network(work / "configs" / "network.yaml")
    target = api.TARGETS["c"]
    program = build_timed_program(network, target, api._network_jobs(target, network, args.threads), work / "build")
    (source,), (sink,) = network.inputs, network.outputs
    given = execute.network_input(network, 0)[source]
    np.save(work / "input.npy", given)
    session, version = onnxruntime_session(network, args.threads)
    pte, why = executorch_pte(args.executorch_python, name, work) if Path(args.executorch_python).exists() else (
        None, f"no {args.executorch_python}")
    command = [str(program), "--threads", str(args.threads), "--repeat", str(args.repeat), str(work / "input.npy"),
               str(work / "kernelgen.npy")]
    rounds: dict[str, list[tuple[float, float]]] = {"kernelgen": [], "onnxruntime": [], "executorch": []}
    pool = ""
    for _ in range(args.rounds):
        _, cpu, wall, _ = program_round(command, network.name)
        rounds["kernelgen"].append((cpu, wall))
        outputs, cpu, wall = onnxruntime_round(session, {source: given}, args.repeat)
        rounds["onnxruntime"].append((cpu, wall))
        if pte is not None:
            done = subprocess.run([args.executorch_python, "-c", RUN, str(pte), str(work / "input.npy"),
                                   str(work / "executorch.npy"), str(args.threads), str(args.repeat)],
                                  capture_output=True, text=True, timeout=1800)
            if done.returncode != 0:
                pte, why = None, (done.stderr.strip().splitlines() or ["no message"])[-1]
            else:
                timed = json.loads(done.stdout.strip().splitlines()[-1])
                rounds["executorch"].append((timed["cpu"], timed["wall"]))
                pool = timed["pool"]
    reference = outputs[sink].astype(np.float64)
    row = {"network": name, "threads": args.threads, "rounds": args.rounds, "repeat": args.repeat,
           "onnxruntime_version": version, "executorch_version": f"XNNPACK, {pool}" if pool else f"not run: {why}"}
    for peer, times in rounds.items():
        if not times:
            continue
        row[peer] = {"cpu_ms": 1e3 * statistics.median(t[0] for t in times),
                     "wall_ms": 1e3 * statistics.median(t[1] for t in times)}
        if peer != "onnxruntime":
            got = np.load(work / f"{peer}.npy").astype(np.float64).reshape(reference.shape)
            row[peer]["relative"] = float(np.max(np.abs(got - reference)) / np.max(np.abs(reference)))
    return row


def print_row(row: dict) -> None:
    print(f"{row['network']} ({row['threads']} thread(s), {row['rounds']} rounds of {row['repeat']}); "
          f"{row['onnxruntime_version']}; executorch: {row['executorch_version']}")
    for peer in ("onnxruntime", "executorch", "kernelgen"):
        if peer in row:
            r, o = row[peer], row["onnxruntime"]
            agreement = f"  output within {r['relative']:.1e}" if "relative" in r else ""
            print(f"  {peer:<12} CPU {r['cpu_ms']:8.2f} ms ({r['cpu_ms'] / o['cpu_ms']:.2f}x)  wall {r['wall_ms']:8.2f} ms "
                  f"({r['wall_ms'] / o['wall_ms']:.2f}x){agreement}")


if __name__ == "__main__":
    main()
