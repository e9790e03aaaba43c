"""Calibrate lavapipe's default tiles on this host (kernelgen/targets/vulkan/calibration.py says why): each kind of
conv's candidate tiles timed against the FMA probe of the same run, round by round (a busy host slows probe and
kernel alike), the medians compared; the winners are kept in the user's cache under this host's key and printed as
the `vulkan:` block that builds them.

    .venv/bin/python benchmarks/lavapipe_calibrate.py [--rounds 3] [--repeat 7] [--only pointwise,square] [--probe]
    GALLIUM_OVERRIDE_CPU_CAPS=avx .venv/bin/python benchmarks/lavapipe_calibrate.py   # as an AVX2 host (16 regs)
"""
from __future__ import annotations

import argparse
import sys

# The workloads of issue 50's table, one per kind of conv: plain configs (no vulkan: block) but the tile.
WORKLOADS = {
    "pointwise": ([1, 64, 64, 128], "{out_channels: 128, kernel: 1, stride: 1, pad: 0, filter_layout: HWIO}"),
    "square": ([1, 64, 64, 128], "{out_channels: 128, kernel: 3, stride: 1, pad: 1, filter_layout: HWIO}"),
    "strided": ([1, 225, 225, 3], "{out_channels: 32, kernel: 3, stride: 2, pad: 0, filter_layout: HWIO}"),
}


def config_text(kind: str, tile: tuple[int, int, int]) -> str:
    shape, conv = WORKLOADS[kind]
    return (f"name: calibrate_{kind}\ndtype: float32\ninput: {{shape: {shape}, layout: NHWC}}\n"
            f"ops:\n  - conv2d: {conv}\noutput: {{layout: NHWC}}\nvulkan: {{ivc_tile: {list(tile)}}}\n"
            f"targets: [vulkan]\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=7, help="paired kernel/probe runs per bench")
    parser.add_argument("--only", type=lambda text: text.split(","), default=list(WORKLOADS))
    parser.add_argument("--probe", action="store_true", help="choose the FMA probe shape again first (a choice made "
                                                             "on a busy host may be a slower shape: "
                                                             "kernelgen/targets/vulkan/probe_choice.py)")
    args = parser.parse_args()

    from kernelgen.api import bench, parse_config
    from kernelgen.targets.vulkan.calibration import CANDIDATES, Calibration, best, load, store
    from kernelgen.targets.vulkan.lavapipe_host import current

    host = current()
    if host is None:
        print("no llvmpipe device: apt-get install mesa-vulkan-drivers", file=sys.stderr)
        return 2
    print(f"host: {host.describe()}")
    if args.probe:
        from kernelgen.targets.vulkan import probe_choice

        probe_choice.cache_path(host).unlink(missing_ok=True)  # the first bench below chooses again
    before = load(host)
    ratios: dict[str, dict[str, list[float]]] = {kind: {} for kind in args.only}
    for round_ in range(args.rounds):
        for kind in args.only:
            for tile in CANDIDATES[kind]:
                (row, *_) = bench(parse_config(config_text(kind, tile)), "vulkan", repeat=args.repeat)
                ratios[kind].setdefault(",".join(map(str, tile)), []).append(row.ratio or 0.0)
                print(f"round {round_ + 1} {kind:9} {tile}: {row.gflops:6.2f} GFLOP/s, probe "
                      f"{row.peak_gflops or 0:6.2f}, ratio {row.ratio or 0:.3f}", flush=True)
    tiles, medians = dict(before.tiles if before else {}), dict(before.ratios if before else {})
    for kind, found in ratios.items():
        tiles[kind], medians[kind] = best(found)
    path = store(Calibration(host=host.describe(), key=host.key(), tiles=tiles, ratios=medians), host)
    for kind in args.only:
        print(f"{kind:9} medians " + ", ".join(f"[{t}] {r:.3f}" for t, r in medians[kind].items())
              + f" -> vulkan: {{ivc_tile: {list(tiles[kind])}}}")
    print(f"kept in {path}")
    from kernelgen.targets.vulkan.probe_choice import probe_note

    print(probe_note(host))
    return 0


if __name__ == "__main__":
    sys.exit(main())
