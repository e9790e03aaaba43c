"""Issue 31's note table: what the Adreno and Mali compilers make of every Vulkan config in configs/, before (the
config's own tiles, as written: lavapipe's defaults or its explicit ones) and after (each profile's default tiles:
the config's vulkan tile options dropped, as `kernelgen build --device PROFILE` of a config without them).

Parts: Adreno a740 (adreno-7xx) and a660 (adreno-6xx) through Turnip's ir3, Mali G610 (mali-valhall) through
PanVK's Valhall compiler, all over Mesa's noop DRM shims (`make mesa-compilers`). Each cell: the most registers of
any op (Adreno: vec4 full registers; Mali: work registers, 32 or 64), the lowest occupancy (Adreno: waves per core;
Mali: threads per slot, 2 = full), and spills:fills summed over the ops. A "before" compile that runs past
--timeout s (PanVK on a large unrolled tile takes minutes) shows as "> N s".

    .venv/bin/python benchmarks/mobile_gpu_stats.py [CONFIG...] [--no-before] [--parts a740,a660,g610] [--json F]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
PARTS = {"a740": "adreno-7xx", "a660": "adreno-6xx", "g610": "mali-valhall"}


def vulkan_configs(paths: list[str]) -> list[Path]:
    import yaml

    chosen = [Path(p) for p in paths] or sorted((REPO / "configs").glob("*.yaml"))
    return [p for p in chosen if "vulkan" in yaml.safe_load(p.read_text()).get("targets", [])]


def cell(config, gpu: str, *, defaults: bool, timeout: float) -> dict:
    """One config on one part: its own tiles (defaults=False) or the part's profile defaults."""
    from kernelgen.api import TARGETS, jobs
    from kernelgen.config import with_options
    from kernelgen.errors import KernelgenError
    from kernelgen.targets.vulkan import mobilestats
    from kernelgen.targets.vulkan.options import vulkan_options

    profile = PARTS[gpu]
    if defaults:
        config = with_options(config, "vulkan", vulkan_options(config).model_copy(update={
            "device": profile, "ivc_tile": None, "wg_size": None, "wg_tile": None, "wide_store": False}))
    mobilestats.TIMEOUT_S = timeout
    start = time.perf_counter()
    try:
        ops = TARGETS["vulkan"].stats(jobs(config, ("vulkan",))["vulkan"], profile, gpu)
    except KernelgenError as error:
        return {"error": str(error)[:160], "seconds": time.perf_counter() - start}
    return {"registers": max(o.vgprs for o in ops), "occupancy": min(o.waves for o in ops),
            "spills": sum(o.spilled_vgprs for o in ops), "fills": sum(o.fills for o in ops),
            "tiles": sorted({str(list(op.ivc_tile)) for op in jobs(config, ("vulkan",))["vulkan"].target_plan.ops
                             if not op.is_pool}),
            "seconds": time.perf_counter() - start}


def text(c: dict | None, gpu: str, timeout: float) -> str:
    if c is None:
        return "-"
    if "error" in c:
        return f"> {timeout:g} s" if "did not compile" in c["error"] else "error"
    unit = "t" if gpu == "g610" else "w"
    return f"{c['registers']}r {c['occupancy']}{unit} {c['spills']}:{c['fills']}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*")
    parser.add_argument("--no-before", action="store_true", help="only the profiles' defaults")
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated: a740, a660, g610")
    parser.add_argument("--timeout", type=float, default=300.0, help="s per pipeline compile")
    parser.add_argument("--json", help="also write the cells as JSON here")
    args = parser.parse_args()
    from kernelgen.measure.context import host_line
    print(host_line())
    from kernelgen.api import load_config
    from kernelgen.targets.vulkan.mesa_pin import DEBIAN_VERSION

    parts = [p for p in args.parts.split(",") if p]
    if not set(parts) <= set(PARTS):
        parser.error(f"--parts takes {', '.join(PARTS)}")
    rows = []
    for path in vulkan_configs(args.configs):
        config = load_config(path)
        row = {"config": config.name}
        for gpu in parts:
            row[f"{gpu} before"] = None if args.no_before else cell(config, gpu, defaults=False, timeout=args.timeout)
            row[f"{gpu} after"] = cell(config, gpu, defaults=True, timeout=args.timeout)
            print(f"# {config.name} {gpu}: " + ", ".join(f"{k.split()[1]} {v['seconds']:.1f} s" for k, v in row.items()
                                                         if k.startswith(gpu) and v), file=sys.stderr, flush=True)
        rows.append(row)
    print(f"Mesa {DEBIAN_VERSION} (Debian trixie source), Turnip/PanVK over noop DRM shims. Cells: most registers "
          f"(Adreno vec4 r, Mali work r), least occupancy (w: waves per core; t: threads per slot, 2 = full), "
          f"spills:fills summed over ops")
    heads = [f"{gpu} {when}" for gpu in parts for when in ("before", "after")]
    width = max(len(r["config"]) for r in rows)
    print(f"{'config':<{width}}  " + "  ".join(f"{h:>20}" for h in heads))
    for r in rows:
        print(f"{r['config']:<{width}}  " + "  ".join(f"{text(r[h], h.split()[0], args.timeout):>20}" for h in heads))
    tiles = {(r["config"], gpu): r[f"{gpu} after"].get("tiles") for r in rows for gpu in parts if r[f"{gpu} after"]}
    print("after tiles (ivc_tile per op: [oh, ow, vec4 output chunks]): " + "; ".join(f"{c} {g}: {' '.join(t)}" for (c, g), t in tiles.items()
                                                        if t and g in ("a740", "g610")))
    if args.json:
        Path(args.json).write_text(json.dumps({"mesa": DEBIAN_VERSION, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
