"""Issue 47's note table: imported networks (`kernelgen import M -o D --target vulkan`) judged by the mobile
compilers, as `kernelgen stats network.yaml --target vulkan --device P` does for each: per network and profile the
ops, the most registers, the least occupancy against the target, spills:fills summed, and the estimated time
(targets/vulkan/estimate.py states the model; the part's figures are gpu/parts.py's). With --compare-tiles (slow:
a compile of every kernel per tile) also the time with each op at its fastest tile of the sweep's.

    .venv/bin/python benchmarks/mobile_network_estimates.py D1/network.yaml ... [--devices adreno-7xx,...]
        [--compare-tiles] [--json F]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DEVICES = ("adreno-7xx", "adreno-6xx", "mali-valhall")


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def cell(network, device: str, compare_tiles: bool) -> dict:
    from kernelgen.api import kernel_stats

    start = _cpu()
    kernels = [kernel_stats(step.config, "vulkan", device, compare_tiles=compare_tiles) for step in network.kernels]
    rows = [r for k in kernels for r in k.rows]
    estimates = [e for k in kernels for e in k.estimates]
    bounds: dict[str, int] = {}
    for e in estimates:
        bounds[e.bound] = bounds.get(e.bound, 0) + 1
    return {"ops": len(rows), "registers": max(r.vgprs for r in rows), "occupancy": min(r.waves for r in rows),
            "target": kernels[0].target_occupancy, "flagged": sum(1 for k in kernels for r in k.rows if k.flags(r)),
            "spills": sum(r.spilled_vgprs for r in rows), "fills": sum(r.fills for r in rows),
            "ms": 1e3 * sum(k.seconds for k in kernels), "bounds": bounds,
            "best_tiles_ms": 1e3 * sum(k.best_tiles_seconds for k in kernels) if compare_tiles else None,
            "faster": [f"{k.name} op {d.op}: {label} {1e3 * s:.4f} vs {1e3 * d.seconds:.4f} ms"
                       for k in kernels for d, label, s in k.faster_tiles()],
            "cpu_s": _cpu() - start}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("manifests", nargs="+")
    parser.add_argument("--devices", default=",".join(DEVICES))
    parser.add_argument("--compare-tiles", action="store_true")
    parser.add_argument("--json", help="also write the cells as JSON here")
    args = parser.parse_args()
    from kernelgen.measure.context import host_line
    print(host_line())
    from kernelgen.api import load_network
    from kernelgen.targets import TARGETS

    devices = [d for d in args.devices.split(",") if d]
    table = {}
    for path in args.manifests:
        network = load_network(path)
        for device in devices:
            table[(network.name, device)] = cell(network, device, args.compare_tiles)
            print(f"# {network.name} {device}: {table[(network.name, device)]}", file=sys.stderr, flush=True)
    for device in devices:
        print(f"{device}: {TARGETS['vulkan'].stats_assumptions(device)}")
    print(f"{'network':<20} {'device':<13} {'ops':>4} {'regs':>4} {'occ/target':>10} {'spill:fill':>10} "
          f"{'flagged':>7} {'est ms':>8} {'best-tile ms':>12}  bounds")
    for (name, device), c in table.items():
        best = f"{c['best_tiles_ms']:.3f}" if c["best_tiles_ms"] is not None else "-"
        print(f"{name:<20} {device:<13} {c['ops']:>4} {c['registers']:>4} {c['occupancy']:>4}/{c['target']:<5} "
              f"{c['spills']:>5}:{c['fills']:<4} {c['flagged']:>7} {c['ms']:>8.3f} {best:>12}  "
              f"{' '.join(f'{k} {v}' for k, v in sorted(c['bounds'].items()))}")
    if args.json:
        Path(args.json).write_text(json.dumps({f"{n} {d}": c for (n, d), c in table.items()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
