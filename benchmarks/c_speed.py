"""The c target against one core of this host (issue 30): each conv validated, then timed beside the core's FMA
peak and STREAM triad bandwidth measured in the same run, next to onnxruntime on one thread on the same conv.

    python benchmarks/c_speed.py [--repeat 15] [--json results.json] [--small-pages] [--numpy-placement]

Rows per conv, every repeat paired with the probes run right before it (a host shared with other work slows a
probe and a kernel alike only when they run at the same moment; the medians of the paired ratios are printed):
  before       the planner's loop nest literally, gcc -O2 (kernelgen before issue 30)
  loops -O3    the same loop nest with the new default flags (-O3 -march=native -ffp-contract=fast)
  micro-kernel what the c target emits now (register-blocked micro-kernels), default flags
  onnxruntime  its Conv (+ Clip for relu6) on NCHW, intra_op_num_threads=1
`ratio` is the median of the paired ratios; `best/best` the fastest repeat against the highest probe reading, the
two least disturbed by other work on a shared host. Dense convs are judged by GFLOP/s against the FMA peak, the
depthwise conv by GB/s (input, filter, bias and output counted once each, as `kernelgen bench` counts them) against
the triad. Ratios, not milliseconds, compare runs.

Placement (CLibrary.arguments, targets/c/placement.py): the kernels' tensors start on 64-byte boundaries, as the
network arena places them, and those of 2 MiB or more on transparent huge pages, as the triad's arrays; onnxruntime's
input too. Before, the probe ran on huge pages (numpy advises every allocation of 4 MiB or more) and a 4.6 MiB tensor
had them only for the 2 MiB-aligned part inside its allocation, a different part each run: the hardware prefetchers
stop at each 4 KiB page, so a kernel streaming its input from memory was judged on small pages against a probe on
huge ones. --small-pages puts the kernels' tensors on 4 KiB pages, the probe keeping its huge pages (that unequal
comparison, made the same every run). --numpy-placement keeps numpy's placement (16 bytes: half the
vector loads and stores of a depthwise conv then split across cache lines: 5-10% slower).
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

from kernelgen import api
from kernelgen.emit import render
from kernelgen.measure.tensors import random_inputs
from kernelgen.targets.c import C
from kernelgen.targets.c.placement import placed
from kernelgen.targets.c.roofline import Probes
from kernelgen.targets.c.toolchain import Library, build_shared

# name: (input NHWC, conv2d, schedule, what the ratio is of). schedule: auto, as `kernelgen import` plans every
# imported layer: the caches fitted to one core's L2.
CONVS = {
    "dense 3x3 64x64x128 -> 128": ([1, 64, 64, 128], "{out_channels: 128, kernel: 3}", "auto", "flops"),
    "1x1 56x56x64 -> 256 + bias + relu6": ([1, 56, 56, 64], "{out_channels: 256, kernel: 1, bias: true, "
                                                             "activation: relu6}", "auto", "flops"),
    "depthwise 3x3 112x112x96 + bias + relu6": ([1, 112, 112, 96], "{out_channels: 96, kernel: 3, pad: 1, groups: 96, "
                                                                   "bias: true, activation: relu6}", "auto", "bytes"),
    "depthwise 3x3 s2 112x112x96 + bias + relu6": ([1, 112, 112, 96], "{out_channels: 96, kernel: 3, stride: 2, pad: 1, "
                                                                      "groups: 96, bias: true, activation: relu6}",
                                                   "auto", "bytes"),
}
BEFORE_FLAGS = ("-std=c99", "-O2", "-Wall", "-Wextra", "-Werror")  # the c target's flags before issue 30


def config_text(name: str, shape: list[int], op: str, schedule: str | None) -> str:
    return (f"name: {name}\ninput: {{shape: {shape}, layout: NHWC}}\nops:\n  - conv2d: {op}\noutput: {{layout: NHWC}}\n"
            + (f"schedule: {schedule}\n" if schedule else "") + "targets: [c]\n")


def planner_loops(job, workdir: Path, flags: tuple[str, ...], tag: str) -> Library:
    """The kernel as the c target emitted it before the micro-kernels: the plan's loop nest, literally."""
    files = render(job.plan, C.files, C.comment, {"c": {"kernel": job.plan.kernel, "notes": (), "lanes": 8,
                                                        "tiled": False}})
    name = job.plan.name
    (workdir / f"{name}.h").write_text(files[f"{name}.h"])
    (workdir / f"{tag}.c").write_text(files[f"{name}.c"])
    return Library(build_shared([workdir / f"{tag}.c"], workdir / f"lib{tag}.so", flags=flags))


def onnxruntime_run(shape: list[int], job, args, aligned: bool, huge_pages: bool) -> Callable[[], None]:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    op = job.plan.ops[0]
    n, h, w, c = shape
    x = np.ascontiguousarray(args.logical["input"].transpose(0, 3, 1, 2))
    x = placed(x, huge_pages) if aligned else x  # as the kernels' input (its output is onnxruntime's own)
    inits = [numpy_helper.from_array(args.logical["filter1"], "W")]
    inputs = ["x", "W"]
    if op.epilogue.bias:
        inits.append(numpy_helper.from_array(args.logical["bias1"], "B"))
        inputs.append("B")
    top, left, bottom, right = op.pad
    nodes = [helper.make_node("Conv", inputs, ["y"], kernel_shape=list(op.kernel), strides=list(op.stride),
                              pads=[top, left, bottom, right], dilations=list(op.dilation), group=op.groups)]
    out = "y"
    if op.epilogue.clamp is not None:
        lo, hi = op.epilogue.clamp
        inits += [numpy_helper.from_array(np.array(lo, np.float32), "lo"),
                  numpy_helper.from_array(np.array(hi, np.float32), "hi")]
        nodes.append(helper.make_node("Clip", ["y", "lo", "hi"], ["z"]))
        out = "z"
    _, oh, ow, ok = op.out_shape
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, [n, ok, oh, ow])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return lambda: session.run(None, {"x": x})


def timed(run: Callable[[], None], probe: Callable[[], float], repeat: int
          ) -> tuple[list[float], list[float], list[float]]:
    """Per repeat: the probe, then the kernel twice: right after the probe (cold: after the triad, whose 192 MiB
    flushed the caches, the tensors come from memory) and again at once (warm: the tensors are where the first
    run left them, as a layer's input is after the layer before it wrote it)."""
    run()  # warm-up
    cold, warm, probes = [], [], []
    for _ in range(repeat):
        probes.append(probe())
        for seconds in (cold, warm):
            start = time.perf_counter()
            run()
            seconds.append(time.perf_counter() - start)
    return cold, warm, probes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--numpy-placement", action="store_true",
                        help="the tensors where numpy puts them (16-byte aligned), not on 64-byte boundaries")
    parser.add_argument("--small-pages", action="store_true",
                        help="the kernels' tensors on 4 KiB pages (the probe keeps its huge pages)")
    options = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="kernelgen-c-speed-") as tmp:
        probes = Probes(Path(tmp))
        for index, (label, (shape, op, schedule, measure)) in enumerate(CONVS.items()):
            config = api.parse_config(config_text(f"speed{index}", shape, op, schedule), f"speed{index}.yaml")
            validation = api.validate(config, "c")
            job = api.jobs(config, ("c",))["c"]
            args = random_inputs(config, job.plan, np.random.default_rng(0))
            work = Path(tmp) / f"speed{index}"
            work.mkdir()
            exe = C().compile(job, work)
            arrays = exe.arguments(args, 0, aligned=not options.numpy_placement, huge_pages=not options.small_pages)
            name = job.plan.name
            before, loops = planner_loops(job, work, BEFORE_FLAGS, "before"), planner_loops(job, work, exe.flags, "loops")
            # each call bound before timing (Library.bind): after the probe, the Python on the way to the call
            # misses the caches too (~0.1 ms, counted against the kernel before)
            runs = {"before (loops, gcc -O2)": before.bind(name, arrays),
                    "loops -O3 -march=native": loops.bind(name, arrays), "micro-kernel (now)": exe.bind(arrays)}
            try:
                runs["onnxruntime, 1 thread"] = onnxruntime_run(shape, job, args, not options.numpy_placement,
                                                                not options.small_pages)
            except ImportError as error:
                print(f"onnxruntime row skipped: {error}")
            plan = job.plan
            nbytes = sum(t.elements for t in plan.tensors) * 4
            probe = probes.peak_gflops if measure == "flops" else probes.triad_gbs
            row = {"conv": label, "validated": validation.status.value, "max_rel_error": validation.max_rel_error,
                   "flops": plan.flops, "bytes": nbytes, "measure": measure, "runs": {}}
            for what, run in runs.items():
                cold, warm, peaks = timed(run, probe, options.repeat)
                row["runs"][what] = {}
                for when, seconds in (("warm", warm), ("cold", cold)) if measure == "bytes" else (("warm", warm),):
                    done = [(plan.flops if measure == "flops" else nbytes) / s / 1e9 for s in seconds]
                    row["runs"][what][when] = {
                        "median_ms": statistics.median(seconds) * 1e3, "median_rate": statistics.median(done),
                        "probe": statistics.median(peaks), "ratio": statistics.median(d / p for d, p in zip(done, peaks)),
                        "best_ratio": max(done) / max(peaks)}
            exe.close()
            results.append(row)
            print(f"\n{label}: validated {row['validated']} (max rel error {row['max_rel_error']:.2e}); "
                  f"{'GFLOP/s against the FMA peak' if measure == 'flops' else 'GB/s against the triad'}")
            unit = "GFLOP/s" if measure == "flops" else "GB/s"
            for what, by_when in row["runs"].items():
                for when, r in by_when.items():
                    print(f"  {what:<26} {when if measure == 'bytes' else '':<5} {r['median_ms']:8.3f} ms  "
                          f"{r['median_rate']:7.2f} {unit:<7} probe {r['probe']:7.1f}  ratio {r['ratio']:.2f}  "
                          f"best/best {r['best_ratio']:.2f}")
    if options.json:
        options.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
