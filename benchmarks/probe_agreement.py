"""Do the FMA peak probes read the device, not an accident of one launch shape? Each probe's best shape against
a second launch of the same chains (another work-group size), the best of alternating runs in one process,
printed as a ratio. Moved out of the unit suite (issue 27): a speed comparison belongs here, where a busy host
shows up as a low ratio in a report instead of a red test.

    .venv/bin/python benchmarks/probe_agreement.py [--rounds 4]

Expect 0.85-1.0 on an idle host (issue 21 measured the OpenCL probe at one core of two when PoCL chose the
work-group size: a ratio near 0.5 means that is back).
"""
from __future__ import annotations

import argparse
from dataclasses import replace


def opencl(rounds: int) -> tuple[str, float, float]:
    from kernelgen.targets.opencl import probe
    from kernelgen.targets.opencl.toolchain import OpenCLRunner

    with OpenCLRunner() as runner:
        best = probe.best_shape(runner)
        second = replace(best, local_size=16, groups_per_unit=32)
        peaks, others = [], []
        for _ in range(rounds):  # alternating: a neighbour on the shared host slows single runs
            peaks.append(probe.probe_gflops(runner, best, runs=3))
            others.append(probe.probe_gflops(runner, second, runs=3))
        return f"opencl {runner.info.name} {best.type} x {best.chains}", max(peaks), max(others)


def vulkan(rounds: int) -> tuple[str, float, float]:
    from kernelgen.targets.vulkan import probe
    from kernelgen.targets.vulkan.runtime import VulkanRunner

    with VulkanRunner() as runner:
        best = probe.best_shape(runner)
        first = probe.fma_probe(shape=best)
        second = probe.fma_probe(shape=best, local_size=256, groups=32)
        peaks, others = [], []
        for _ in range(rounds):
            peaks.append(probe.probe_gflops(runner, first, repeat=3))
            others.append(probe.probe_gflops(runner, second, repeat=3))
        return (f"vulkan {runner.info.name} {best.accumulators} {'vec4' if best.components == 4 else 'float'} "
                f"accumulators x {best.unroll} per trip"), max(peaks), max(others)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="alternations of the two shapes (best of)")
    args = parser.parse_args()
    for probe_of in (opencl, vulkan):
        try:
            what, peak, other = probe_of(args.rounds)
        except Exception as error:  # noqa: BLE001 - a device missing here: say so and go on
            print(f"{probe_of.__name__}: not measured ({error})")
            continue
        print(f"{what}: best shape {peak:.1f} GFLOP/s, second launch {other:.1f} GFLOP/s, "
              f"ratio {min(peak, other) / max(peak, other):.2f}")


if __name__ == "__main__":
    main()
