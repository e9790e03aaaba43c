"""Do the FMA peak probes read the device, not an accident of one launch shape? Each GPU target's best shape (as
`kernelgen bench` chooses it, measure/probes.py) against a second launch of the same chains (another work-group
size and count), the best of alternating runs in one process, printed as a ratio. Moved out of the unit suite
(issue 27): a speed comparison belongs here, where a busy host shows up as a low ratio in a report instead of a red
test.

    .venv/bin/python benchmarks/probe_agreement.py [--rounds 4]

Expect 0.85-1.0 on an idle host (issue 21 measured the OpenCL probe at one core of two when PoCL chose the
work-group size: a ratio near 0.5 means that is back).
"""
from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

CONFIG = "name: probe\ninput: {shape: [1, 6, 6, 4]}\nops:\n  - conv2d: {out_channels: 4, kernel: 3}\n"
# the second launch: other FMA work-group sizes and counts than each profile's
SECOND = {"opencl": dict(fma_work_group=16, fma_groups=32), "vulkan": dict(fma_work_group=256, fma_groups=32)}


def agreement(name: str, rounds: int) -> tuple[str, float, float]:
    from importlib import import_module

    from kernelgen import api
    from kernelgen.measure.primitives import FMA
    from kernelgen.measure.probes import chosen, rate
    from kernelgen.targets import TARGETS

    target = TARGETS[name]
    probes = import_module(f"kernelgen.targets.{name}.probes")
    job = api.jobs(api.load_config(CONFIG), (name,))[name]
    with tempfile.TemporaryDirectory() as tmp, target.compile(job, Path(tmp)) as exe:
        best = chosen(target, exe, FMA)
        shape = next(s for s in probes.PROBES.shapes if s.name == best.shape)
        sizes = probes.OPENCL_PROBE_SIZES if name == "opencl" else probes.VULKAN_PROBE_SIZES
        second = probes.fma_probe(exe.runner.info, shape, replace(sizes, **SECOND[name]))
        peaks, others = [], []
        for _ in range(rounds):  # alternating: a neighbour on the shared host slows single runs
            peaks.append(rate(target, exe, best, repeat=3))
            others.append(rate(target, exe, second, repeat=3))
        return f"{name} {best.device} {shape.name} (accumulators x lanes x unroll)", max(peaks), max(others)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="alternations of the two shapes (best of)")
    args = parser.parse_args()
    from kernelgen.measure.context import host_line
    print(host_line(["opencl", "vulkan"]))
    for name in ("opencl", "vulkan"):
        try:
            what, peak, other = agreement(name, args.rounds)
        except Exception as error:  # noqa: BLE001 - a device missing here: say so and go on
            print(f"{name}: not measured ({error})")
            continue
        print(f"{what}: best shape {peak:.1f} GFLOP/s, second launch {other:.1f} GFLOP/s, "
              f"ratio {min(peak, other) / max(peak, other):.2f}")


if __name__ == "__main__":
    main()
