"""The c target against one core of this host (issues 30, 50): each conv validated, then timed as `kernelgen bench`
times it, beside the core's FMA peak and STREAM triad measured in the same run, next to its baselines on the same
placed tensors.

    python benchmarks/c_speed.py [--repeat 15] [--json results.json] [--no-baselines] [--match TEXT ...]

The configs are plain, as a user writes them: no `schedule:` (the c target then plans as `schedule: auto`, the
caches fitted to one core's L2). Rows per conv, cold and warm each:
  micro-kernel what the c target emits, default flags: the rows of `kernelgen bench` itself (api.bench ->
               measure/bench.py -> the c target's time primitive), so the two cannot disagree on how they measure
  loops -O3    the planner's loop nest literally, with the default flags (-O3 -march=native -ffp-contract=fast)
  before       the same loop nest with gcc -O2 (kernelgen before issue 30)
  onnxruntime  its Conv (+ Clip for relu6) on NCHW, intra_op_num_threads=1
The baselines share the kernel's measuring code: the arguments CLibrary.arguments places (64-byte boundaries, 2 MiB
pages for a tensor of 2 MiB or more, as the triad's arrays; targets/c/placement.py), calls bound before the timed
region (Library.bind), and targets/c/timing.py's loop: each repeat the probes, then the call cold (right after the
triad evicted the caches) and warm (again at once), by the CPU time of the calling thread. `ratio` is the median of
the paired ratios (each repeat against the probe run right before it: a host shared with other work slows both
alike only when they run at the same moment). Dense convs are judged by GFLOP/s against the FMA peak, depthwise
convs by GB/s (input, filter, bias and output counted once each) against the triad. Ratios, not milliseconds,
compare runs; the first line names the host's CPU and its flags.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

from kernelgen import api
from kernelgen.emit import render
from kernelgen.measure.bench import row_of
from kernelgen.measure.context import host_line
from kernelgen.measure.primitives import BANDWIDTH, FMA
from kernelgen.measure.probes import peaks
from kernelgen.measure.records import BenchRow, Timings
from kernelgen.measure.tensors import random_inputs
from kernelgen.targets.c import C
from kernelgen.targets.c.placement import placed
from kernelgen.targets.c.timing import COLD, WARM, cold_and_warm, measured
from kernelgen.targets.c.toolchain import Library, build_shared

# name: (input NHWC, conv2d, what the ratio is of). No schedule: what a plain config plans with on c.
CONVS = {
    "dense 3x3 64x64x128 -> 128": ([1, 64, 64, 128], "{out_channels: 128, kernel: 3}", "flops"),
    "1x1 56x56x64 -> 256 + bias + relu6": ([1, 56, 56, 64], "{out_channels: 256, kernel: 1, bias: true, "
                                                             "activation: relu6}", "flops"),
    "depthwise 3x3 112x112x96 + bias + relu6": ([1, 112, 112, 96], "{out_channels: 96, kernel: 3, pad: 1, groups: 96, "
                                                                   "bias: true, activation: relu6}", "bytes"),
    "depthwise 3x3 s2 112x112x96 + bias + relu6": ([1, 112, 112, 96], "{out_channels: 96, kernel: 3, stride: 2, pad: 1, "
                                                                      "groups: 96, bias: true, activation: relu6}",
                                                   "bytes"),
}
BEFORE_FLAGS = ("-std=c99", "-O2", "-Wall", "-Wextra", "-Werror")  # the c target's flags before issue 30


def config_text(name: str, shape: list[int], op: str, schedule: str | None) -> str:
    return (f"name: {name}\ninput: {{shape: {shape}, layout: NHWC}}\nops:\n  - conv2d: {op}\noutput: {{layout: NHWC}}\n"
            + (f"schedule: {schedule}\n" if schedule else "") + "targets: [c]\n")


def planner_loops(job, workdir: Path, flags: tuple[str, ...], tag: str) -> Library:
    """The kernel as the c target emitted it before the micro-kernels: the plan's loop nest, literally."""
    context = C().context(job.config, job.plan, job.target_plan)  # the emitted kernel's, its loops swapped in
    context["c"] |= {"kernel": job.plan.kernel, "notes": (), "lanes": 8, "tiled": False}
    files = render(job.plan, C.files, C.comment, context)
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


def baseline_rows(job, exe, runs: dict[str, Callable[[], None]], repeat: int) -> list[BenchRow]:
    """Each baseline timed as the c target times its kernel (timing.py), beside the same probes, into the rows
    `kernelgen bench` makes (measure/bench.row_of: the medians of the paired ratios)."""
    target = C()
    probes = target.probes(exe, FMA) + (target.probes(exe, BANDWIDTH) if job.plan.memory_bound else ())
    rows = []
    for what, run in runs.items():
        times = cold_and_warm(run, probes, target.probes(exe, BANDWIDTH)[0].kernel, repeat)
        for when, seconds in ((COLD, times.cold), (WARM, times.warm)):
            timings = Timings(label=f"{what} {when}", seconds=seconds, probe_seconds=times.probes, when=when,
                              measured=measured(when, 1))
            rows.append(row_of(job, "c", peaks(timings, probes), {}))
    return rows


def summary(row: BenchRow, nbytes: int, measure: str) -> dict:
    rate = row.gflops if measure == "flops" else nbytes / row.seconds / 1e9
    return {"label": row.label, "when": row.when, "median_ms": row.seconds * 1e3, "median_rate": rate,
            "probe": row.peak_gflops if measure == "flops" else row.peak_gbs,
            "ratio": row.ratio if measure == "flops" else row.bandwidth_ratio, "measured": row.measured}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-baselines", action="store_true", help="only the kernel, as `kernelgen bench` times it")
    parser.add_argument("--match", action="append", default=[], metavar="TEXT",
                        help="only the convs whose name contains TEXT (repeatable; default: all)")
    options = parser.parse_args(argv)
    convs = {k: v for k, v in CONVS.items() if not options.match or any(m in k for m in options.match)}
    host = host_line(["c"])
    print(host)
    results = []
    with tempfile.TemporaryDirectory(prefix="kernelgen-c-speed-") as tmp:
        for index, (label, (shape, op, measure)) in enumerate(convs.items()):
            config = api.parse_config(config_text(f"speed{index}", shape, op, None), f"speed{index}.yaml")
            validation = api.validate(config, "c")
            job = api.jobs(config, ("c",))["c"]
            rows = api.bench(config, "c", repeat=options.repeat)  # `kernelgen bench`'s rows, cold and warm
            if not options.no_baselines:
                args = random_inputs(config, job.plan, np.random.default_rng(0))
                work = Path(tmp) / f"speed{index}"
                work.mkdir()
                exe = C().compile(job, work)
                arrays = exe.arguments(args, 0)
                name = job.plan.name
                before, loops = planner_loops(job, work, BEFORE_FLAGS, "before"), planner_loops(job, work, exe.flags, "loops")
                runs = {"loops -O3 -march=native": loops.bind(name, arrays),
                        "before (loops, gcc -O2)": before.bind(name, arrays)}
                try:
                    runs["onnxruntime, 1 thread"] = onnxruntime_run(shape, job, args, True, True)
                except ImportError as error:
                    print(f"onnxruntime row skipped: {error}")
                rows += baseline_rows(job, exe, runs, options.repeat)
                exe.close()
            plan = job.plan
            nbytes = plan.compulsory_bytes
            row = {"conv": label, "host": host, "validated": validation.status.value,
                   "max_rel_error": validation.max_rel_error, "flops": plan.flops, "bytes": nbytes,
                   "measure": measure, "schedule": plan.schedule_origin, "runs": [summary(r, nbytes, measure) for r in rows]}
            results.append(row)
            print(f"\n{label}: validated {row['validated']} (max rel error {row['max_rel_error']:.2e}); "
                  f"{'GFLOP/s against the FMA peak' if measure == 'flops' else 'GB/s against the triad'}; "
                  f"schedule {plan.schedule_origin.split(' ', 1)[0]}")
            unit = "GFLOP/s" if measure == "flops" else "GB/s"
            for r in row["runs"]:
                what = r["label"].removesuffix(f" {r['when']}")
                print(f"  {what[:58]:<58} {r['when']:<5} {r['median_ms']:8.3f} ms  {r['median_rate']:7.2f} {unit:<7} "
                      f"probe {r['probe']:7.1f}  ratio {r['ratio']:.2f}")
        for what in dict.fromkeys(r["measured"] for row in results for r in row["runs"]):
            print(what)
    if options.json:
        options.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
