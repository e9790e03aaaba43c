"""Depthwise 3x3 convs as the memory-bound ops they are (issue 30): each target's GB/s against its own
bandwidth probe measured in the same run, beside onnxruntime on one thread for the C target's 112x112x96 rows.

    PYTHONPATH=. python benchmarks/depthwise.py [--repeat 7] [--targets c,opencl,vulkan] [--only 96x112s1,...]
                                                [--sources DIR] [--json results.json]

Every row is depthwise 3x3 (pad 1) + bias + relu6, NHWC float32, schedule: auto (576x14s2: a 1 MiB budget). Per
target and row: validated once (api.validate_job: fresh inputs against numpy), then the target's own time
primitive, which runs a STREAM triad right before every repeat of a memory-bound kernel (c: roofline.Probes, 3 x 64
MiB; opencl: the first launch of the kernel's sequence, 3 x 32 MiB; vulkan: a stage of the kernel's command buffer,
3 x 32 MiB), so the kernel's tensors come from memory, not the caches. GB/s counts every tensor once (input,
filter, bias, output), as `kernelgen bench` does; `probe` is the triad's GB/s (median); `ratio` the median of the
per-repeat paired ratios; `best/best` the fastest repeat against the highest probe reading, the two least disturbed
by the other work on a shared host. The onnxruntime table pairs each repeat with the C triad the same way
(c_speed.timed): `cold` right after the triad, `warm` at once again (the tensors where the first run left them, in
L3).

--sources DIR takes the kernel sources from `kernelgen build` output made by another checkout (DIR/<name>/<target>/),
with this checkout's plans, probes and timing. The "before" rows (commit 5fb6bad's kernels):
    git archive 5fb6bad | tar -x -C /tmp/before
    PYTHONPATH=. python benchmarks/depthwise.py --write-configs /tmp/dwcfg
    PYTHONPATH=/tmp/before python -m kernelgen build /tmp/dwcfg/*.yaml -o /tmp/before-out
    PYTHONPATH=. python benchmarks/depthwise.py --sources /tmp/before-out

Before, on this 2-core host shared with three other sessions (GB/s, the probe's GB/s in brackets, the paired
ratio; c: two runs of --targets c --repeat 21 with this checkout's timing, whose library call no longer costs
~0.8 ms; opencl and vulkan: one run, repeat 11, under a load average of ~10, lavapipe's FMA probe at 2-5 GFLOP/s
instead of its ~110-200, so its triad is starved too):
| row | c, two runs | opencl | vulkan |
|---|---|---|---|
| 96x112s1 | 5.30 (11.6) 0.47 / 5.69 (21.5) 0.26 | 0.47 (7.7) 0.06 | 0.04 (0.20) 0.22 |
| 96x112s2 | 5.70 (11.9) 0.48 / 5.45 (20.2) 0.26 | 3.13 (4.1) 0.52 | 0.11 (0.22) 0.51 |
| 144x56s1 | 0.48 (12.0) 0.04 / 0.48 (11.4) 0.04 | 0.15 (4.5) 0.03 | 0.03 (0.18) 0.17 |
| 144x56s2 | 2.06 (12.0) 0.17 / 1.95 (10.5) 0.16 | 1.64 (6.0) 0.20 | 0.06 (0.15) 0.36 |
| 384x28s1 | 3.82 (11.7) 0.33 / 3.81 (12.0) 0.32 | 4.20 (4.6) 0.91 | 0.04 (0.18) 0.22 |
| 576x14s1 | 3.02 (10.5) 0.29 / 2.91 (11.8) 0.25 | 4.23 (3.6) 1.13 | 0.02 (0.09) 0.18 |
| 576x14s2 | 2.92 (9.7) 0.29 / 2.64 (11.6) 0.23 | 6.21 (3.6) 1.55 | 0.15 (0.18) 1.11 |
The triad read 11-12 GB/s in most of these runs and 20-22 GB/s when the other sessions paused: a ratio is only
as steady as the host, so compare GB/s run against run, and read each ratio with its probe.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

from kernelgen import api
from kernelgen.measure.tensors import random_inputs
from kernelgen.targets import TARGETS
from kernelgen.targets.c.roofline import Probes
from kernelgen.measure.context import host_line

sys.path.insert(0, str(Path(__file__).parent))
from c_speed import onnxruntime_run, timed  # noqa: E402  (the c_speed benchmark's onnxruntime runner)

SHAPES = ((96, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (384, 28, 1), (576, 14, 1), (576, 14, 2))
ONNXRUNTIME_ROWS = ("96x112s1", "96x112s2")


def row_name(channels: int, size: int, stride: int) -> str:
    return f"{channels}x{size}s{stride}"


def config_text(channels: int, size: int, stride: int, targets: tuple[str, ...]) -> str:
    # schedule: auto fits the stripe caches to the c target's 512 KiB L2; 576 channels at stride 2 need a little
    # more (530,432 bytes for the smallest schedule), so that row gets this host's 1 MiB of L2 for two cores
    schedule = "{budget: 1048576}" if channels * stride > 1000 else "auto"
    return (f"name: dw_{row_name(channels, size, stride)}\n"
            f"input: {{shape: [1, {size}, {size}, {channels}], layout: NHWC}}\n"
            f"ops:\n  - conv2d: {{out_channels: {channels}, kernel: 3, stride: {stride}, pad: 1, groups: {channels}, "
            f"bias: true, activation: relu6}}\n"
            f"output: {{layout: NHWC}}\nschedule: {schedule}\ntargets: [{', '.join(targets)}]\n")


def with_sources(job, target: str, sources: Path | None):
    """The job with its files read from another checkout's build output (same names), if given."""
    if sources is None:
        return job
    folder = sources / job.config.name / target
    return dataclasses.replace(job, files={name: (folder / name).read_text() if (folder / name).exists() else text
                                           for name, text in job.files.items()})


def measure(config, target: str, repeat: int, sources: Path | None) -> dict:
    job = with_sources(api.jobs(config, (target,))[target], target, sources)
    validation = api.validate_job(job, target)
    row = {"validated": validation.status.value, "max_rel_error": validation.max_rel_error}
    if not validation.passed:
        return row
    args = random_inputs(config, job.plan, np.random.default_rng(0))
    primitives = TARGETS[target]
    with tempfile.TemporaryDirectory(prefix=f"kernelgen-dw-{target}-") as tmp, \
            primitives.compile(job, Path(tmp)) as exe:
        (timing, *_) = primitives.time(exe, args, repeat)
    moved = job.plan.compulsory_bytes
    rates = [moved / s / 1e9 for s in timing.seconds]
    row |= {"bytes": moved, "gbs": statistics.median(rates), "probe_gbs": statistics.median(timing.peak_gbs),
            "ratio": statistics.median(r / p for r, p in zip(rates, timing.peak_gbs)),
            "best_best": max(rates) / max(timing.peak_gbs), "label": timing.label}
    return row


def onnxruntime_rows(configs: dict, repeat: int, sources: Path | None) -> list[dict]:
    """The c kernel and onnxruntime (one thread) on the same inputs, each repeat after the same C triad."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="kernelgen-dw-ort-") as tmp:
        probes = Probes(Path(tmp), iterations=1000)
        for name in ONNXRUNTIME_ROWS:
            if name not in configs:
                continue
            config = configs[name]
            job = with_sources(api.jobs(config, ("c",))["c"], "c", sources)
            args = random_inputs(config, job.plan, np.random.default_rng(0))
            work = Path(tmp) / name
            work.mkdir()
            exe = TARGETS["c"].compile(job, work)
            arrays = exe.arguments(args, 0)
            moved = job.plan.compulsory_bytes
            runs = {"kernelgen c": exe.bind(arrays)}  # bound before timing, placed as c_speed.py places them
            try:
                runs["onnxruntime, 1 thread"] = onnxruntime_run(list(job.plan.ops[0].in_shape), job, args,
                                                                aligned=True, huge_pages=True)
            except ImportError as error:
                print(f"onnxruntime skipped: {error}", file=sys.stderr)
            for what, run in runs.items():
                cold, warm, triads = timed(run, probes.triad_gbs, repeat)
                for when, seconds in (("cold", cold), ("warm", warm)):
                    rates = [moved / s / 1e9 for s in seconds]
                    rows.append({"conv": name, "what": what, "when": when, "gbs": statistics.median(rates),
                                 "probe_gbs": statistics.median(triads),
                                 "ratio": statistics.median(r / p for r, p in zip(rates, triads)),
                                 "best_best": max(rates) / max(triads)})
            exe.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--targets", default="c,opencl,vulkan")
    parser.add_argument("--only", default="", help="comma-separated rows, e.g. 96x112s1,576x14s2")
    parser.add_argument("--sources", type=Path, help="kernel sources from another checkout's `kernelgen build`")
    parser.add_argument("--write-configs", type=Path, help="write the rows' configs here and exit")
    parser.add_argument("--json", type=Path)
    options = parser.parse_args(argv)
    print(host_line(options.targets.split(",")))
    targets = tuple(t for t in options.targets.split(",") if t)
    wanted = set(filter(None, options.only.split(",")))
    texts = {row_name(*shape): config_text(*shape, targets) for shape in SHAPES
             if not wanted or row_name(*shape) in wanted}
    if options.write_configs:
        options.write_configs.mkdir(parents=True, exist_ok=True)
        for name, text in texts.items():
            (options.write_configs / f"dw_{name}.yaml").write_text(text)
        return 0
    configs = {name: api.parse_config(text, f"dw_{name}.yaml") for name, text in texts.items()}
    results = {name: {t: measure(config, t, options.repeat, options.sources) for t in targets}
               for name, config in configs.items()}
    head = " | ".join(f"{t} ok | {t} GB/s | {t} probe | {t} ratio | {t} best/best" for t in targets)
    print(f"| depthwise 3x3 + bias + relu6 | {head} |")
    print("|---" * (1 + 5 * len(targets)) + "|")
    for name, by_target in results.items():
        cells = []
        for t in targets:
            r = by_target[t]
            cells += [r["validated"]] + ([f"{r['gbs']:.2f}", f"{r['probe_gbs']:.2f}", f"{r['ratio']:.2f}",
                                          f"{r['best_best']:.2f}"] if "gbs" in r else ["-"] * 4)
        print(f"| {name} | " + " | ".join(cells) + " |")
    ort = onnxruntime_rows(configs, options.repeat, options.sources) if "c" in targets else []
    if ort:
        print("\n| conv | run | when | GB/s | C triad GB/s | ratio | best/best |\n|---|---|---|---|---|---|---|")
        for r in ort:
            print(f"| {r['conv']} | {r['what']} | {r['when']} | {r['gbs']:.2f} | {r['probe_gbs']:.2f} | "
                  f"{r['ratio']:.2f} | {r['best_best']:.2f} |")
    if options.json:
        options.json.write_text(json.dumps({"rows": results, "onnxruntime": ort}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
