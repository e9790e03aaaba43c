"""Cold compile time of every vulkan kernel on lavapipe (issue 30), its speed and what RDNA2's compiler makes of it.

Workloads: every config of configs/ that targets vulkan, as written, and issue 30's four bench workloads at the
default tiles (1x1 and 3x3 64x64x128 -> 128, 3x3 258x258x16 -> 256, 3x3 stride 2 225x225x3 -> 32).

1. Compile: one child process per op, with Mesa's shader cache off (MESA_SHADER_CACHE_DISABLE=true), that builds
   the config, creates the op's pipeline on lavapipe and dispatches it once (lavapipe's LLVM compiles there).
   Reported: the child's wall time and its CPU time (user + sys of the child and all its threads, from
   getrusage(RUSAGE_CHILDREN)): on a shared host wall time also counts other processes' turns, CPU time does not.
   A child past --timeout is killed and shows as "> N".
2. Speed (--speed): `kernelgen bench` of each workload in a child (api.bench, the command's own code): GFLOP/s on
   lavapipe and the ratio to the FMA probe dispatched beside the kernel in the same command buffers, of the shape
   chosen once for this host (kernelgen/targets/vulkan/probe_choice.py), as `kernelgen bench` takes it.
3. RDNA2 (--rdna2): the rdna2 profile's default tiles of each workload (its vulkan block's tiles dropped) compiled
   by RADV's ACO on a null navi21 device: the most VGPRs of any op and the spilled VGPRs of all.

With --network MANIFEST (a network.yaml that `kernelgen import M -o DIR --target vulkan` wrote; repeatable) the
table is instead every op of every kernel of the network, cold (one child per kernel, its ops one after another):
what the op is, its invocation tile, its unrolled trip body (vec4 multiply-adds), its shader's size (SPIR-V words
of its module, GLSL lines of its block and the lines every op shares), and CPU seconds (time.process_time in the
child: all its threads, lavapipe's too) of vkCreateComputePipelines and of creation plus the first dispatch
(llvmpipe JIT-compiles a compute shader when it is first bound: that is the cold compile), then each kernel's sum
and the network's total. The host's CPU and the Vulkan driver (Mesa's version) head the output.

With --cache-dir the compile children fill that (emptied) Mesa cache instead of disabling it (each op's shader is
distinct, so every compile is still cold) and the speed children read it: what measures a slow "before" once.

    .venv/bin/python benchmarks/vulkan_compile.py [CONFIG...] [--only NAME,...] [--speed] [--rdna2] [--no-compile]
                                                  [--timeout 600] [--json F]
    .venv/bin/python benchmarks/vulkan_compile.py --network mv2/network.yaml [--network ...] [--json F]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# issue 30's bench workloads, at the default tiles (no vulkan block)
WORKLOADS = {
    "conv1x1_64x64x128": ([1, 64, 64, 128], "{out_channels: 128, kernel: 1}"),
    "conv3x3_64x64x128": ([1, 64, 64, 128], "{out_channels: 128, kernel: 3}"),
    "conv3x3_258x258x16": ([1, 258, 258, 16], "{out_channels: 256, kernel: 3}"),
    "conv3x3s2_225x225x3": ([1, 225, 225, 3], "{out_channels: 32, kernel: 3, stride: 2}"),
}
WORKLOAD_YAML = """name: {name}
input: {{shape: {shape}, layout: NHWC}}
ops: [{{conv2d: {op}}}]
output: {{layout: NHWC}}
targets: [vulkan]
"""


def workloads(folder: Path) -> dict[str, Path]:
    """name -> config file: the bundled vulkan configs, then the bench workloads (written into folder)."""
    import yaml

    out = {}
    for path in sorted((REPO / "configs").glob("*.yaml")):
        if "vulkan" in yaml.safe_load(path.read_text()).get("targets", []):
            out[path.stem] = path
    for name, (shape, op) in WORKLOADS.items():
        path = folder / f"{name}.yaml"
        path.write_text(WORKLOAD_YAML.format(name=name, shape=shape, op=op))
        out[name] = path
    return out


def child_compile(config_path: str, ops: list[int]) -> None:
    """In the child: build, compile each op of `ops` (0-based) to SPIR-V, create its pipeline and dispatch it once,
    one JSON line per op. CPU time (time.process_time: every thread of this process, lavapipe's included) of
    vkCreateComputePipelines alone (Mesa 22.3's lavapipe lowers SPIR-V to NIR there) and of the first dispatch with
    it (llvmpipe JIT-compiles a compute shader when it is first bound, so that is where most of a cold compile
    lands). Each op's shader is distinct, so with the cache off every op compiles cold in one child as in its own."""
    import numpy as np

    from kernelgen.api import load_config
    from kernelgen.measure.tensors import poisons, random_inputs
    from kernelgen.planner import plan as make_plan
    from kernelgen.targets import TARGETS
    from kernelgen.targets.vulkan.device import import_vulkan
    from kernelgen.targets.vulkan.program import compile_program

    vulkan = import_vulkan()
    create = vulkan.vkCreateComputePipelines
    create_cpu = []

    def timed_create(*args, **kwargs):
        start = time.process_time()
        try:
            return create(*args, **kwargs)
        finally:
            create_cpu.append(time.process_time() - start)

    vulkan.vkCreateComputePipelines = timed_create
    config = load_config(config_path)
    job = TARGETS["vulkan"].build(config, make_plan(config))
    args = random_inputs(config, job.plan, np.random.default_rng(0))
    start = time.perf_counter()
    with compile_program(job, None) as program:
        glslang = time.perf_counter() - start
        buffers = program.buffers(args, poisons(config.dtype)[0])
        for op in ops:
            create_cpu.clear()
            start, cpu = time.perf_counter(), time.process_time()
            result = program.runner.run_sequence([program.stages[op]], buffers)
            first, first_cpu = time.perf_counter() - start, time.process_time() - cpu
            planned = job.target_plan.ops[op]
            print(json.dumps({"op": op, "glslang_s": glslang, "first_dispatch_s": first,
                              "first_dispatch_cpu_s": first_cpu, "create_cpu_s": sum(create_cpu),
                              "kernel_s": result.gpu_times_ns[0] * 1e-9, "label": planned.label,
                              "ivc_tile": list(getattr(planned, "ivc_tile", ())),
                              "fh_block": getattr(planned, "fh_block", None), "body": getattr(planned, "body", None),
                              "ic_unroll": getattr(planned, "ic_unroll", None),
                              "shuffle_lanes": getattr(planned, "shuffle_lanes", None),
                              "driver": program.runner.info.driver, "spirv_words": len(program.spirv[op]) // 4,
                              "glsl_lines": glsl_lines(job.files[f"{config.name}.comp"], planned.index)}),
                  flush=True)


def glsl_lines(source: str, index: int) -> int:
    """Lines of op `index`'s own block of the shader (`#if KG_OP == index` .. its `#endif`) and the lines every op
    shares before the first block."""
    lines = source.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("#if KG_OP == ")]
    begin = lines.index(f"#if KG_OP == {index}")
    end = next(i for i in range(begin, len(lines)) if lines[i] == "#endif")
    return (starts[0] if starts else 0) + end - begin + 1


def host() -> str:
    """The CPU model (with its family, model and stepping: kernelgen.measure.context.cpu_model) and the cores this
    process may use."""
    from kernelgen.measure.context import cpu_model

    return f"{cpu_model()}, {len(os.sched_getaffinity(0))} cores"


def child_speed(config_path: str, repeat: int) -> None:
    from kernelgen.api import bench, load_config

    (row, *_) = bench(load_config(config_path), "vulkan", repeat=repeat)
    print(json.dumps({"gflops": row.gflops, "peak_gflops": row.peak_gflops, "ratio": row.ratio,
                      "ms": row.seconds * 1e3}))


def run_child(argv: list[str], env: dict[str, str], timeout: float) -> tuple[list[dict], float, float, str]:
    """(the child's JSON lines, wall s, CPU s of the child and its threads, error text)."""
    from kernelgen.children import run_child as run
    from kernelgen.errors import ToolchainError

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        done = run([sys.executable, __file__, *argv], what="the child", verb="finish", timeout=timeout, env=env,
                   text=True)
        error = "" if done.returncode == 0 else done.stderr.strip().splitlines()[-1:]
        results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    except ToolchainError:
        results, error = [], f"> {timeout:g} s"
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return results, wall, cpu, error if isinstance(error, str) else " ".join(error)


def op_count(config_path: Path) -> int:
    from kernelgen.api import load_config

    return len(load_config(config_path).ops)


def rdna2(config_path: Path) -> tuple[int, int]:
    """The rdna2 profile's kernels (its default tiles, as `kernelgen build --device rdna2` of a config without
    tiles) on ACO: the most VGPRs of an op, the spilled VGPRs of all."""
    from kernelgen.api import TARGETS, jobs, load_config
    from kernelgen.config import with_options
    from kernelgen.targets.vulkan.options import vulkan_options

    config = load_config(config_path)
    config = with_options(config, "vulkan", vulkan_options(config).model_copy(update={
        "device": "rdna2", "ivc_tile": None, "wg_size": None, "wg_tile": None, "wide_store": False}))
    ops = TARGETS["vulkan"].stats(jobs(config, ("vulkan",))["vulkan"], "rdna2")
    return max(o.vgprs for o in ops), sum(o.spilled_vgprs for o in ops)


def network_kernels(manifest: Path) -> list[tuple[str, Path]]:
    """(kernel step name, its config file) of a network manifest, in execution order."""
    from kernelgen.api import load_network

    return [(step.config.name, manifest.parent / f"{step.config.name}.yaml") for step in load_network(manifest).kernels]


def describe(config_path: Path, op: int) -> str:
    """What op `op` (0-based) of a config is: conv KxK (/sS, groups G) or its pool."""
    from kernelgen.api import load_config
    from kernelgen.planner import plan as make_plan

    geo = make_plan(load_config(config_path)).ops[op]
    if geo.pool:
        return f"{geo.kind} {geo.kernel[0]}x{geo.kernel[1]} {'x'.join(map(str, geo.in_shape[1:]))}"
    kind = f"conv {geo.kernel[0]}x{geo.kernel[1]}" + (f"/s{geo.stride[0]}" if max(geo.stride) > 1 else "")
    if geo.groups > 1:
        kind += " dw" if geo.groups == geo.in_shape[3] else f" g{geo.groups}"
    return f"{kind} {'x'.join(map(str, geo.in_shape[1:]))}->{geo.out_shape[3]}"


def compile_network(manifest: Path, env: dict[str, str], timeout: float) -> dict:
    """Every op of every kernel of the manifest compiled cold (a child per kernel); the table's rows printed as
    they come, then each kernel's and the network's totals."""
    print(f"\n### {manifest}\n")
    print("| kernel | op | what | tile [oh, ow, oc4] | body | SPIR-V words | GLSL lines | create CPU s | "
          "cold compile CPU s | child CPU s (all ops) |")
    print("|---|---:|---|---|---:|---:|---:|---:|---:|---:|")
    kernels = []
    for name, path in network_kernels(manifest):
        count = op_count(path)
        results, wall, cpu, error = run_child(["--child-compile", str(path), ",".join(map(str, range(count)))], env,
                                              timeout * count)
        by_op = {r["op"]: r for r in results}
        ops = []
        for op in range(count):
            row = {"what": describe(path, op), "error": "" if op in by_op else error or "no result",
                   **by_op.get(op, {}), "op": op + 1}
            ops.append(row)
            compile_cpu = row["error"] or f"{row['first_dispatch_cpu_s']:.1f}"
            print(f"| {name if op == 0 else ''} | {op + 1} | {row['what']} | {row.get('ivc_tile', '')} | "
                  f"{row.get('body') or ''} | {row.get('spirv_words', '')} | {row.get('glsl_lines', '')} | "
                  f"{row.get('create_cpu_s', 0):.2f} | {compile_cpu} | {f'{cpu:.1f}' if op == 0 else ''} |",
                  flush=True)
        kernels.append({"kernel": name, "ops": ops, "child_cpu_s": cpu, "wall_s": wall})
    totals = [sum(o.get("first_dispatch_cpu_s", 0.0) for o in k["ops"]) for k in kernels]
    failed = [f"{k['kernel']} op {o['op']}" for k in kernels for o in k["ops"] if o["error"]]
    worst_op = max((o for k in kernels for o in k["ops"]), key=lambda o: o.get("first_dispatch_cpu_s", 0.0))
    print("\nper kernel (cold compile CPU s, all its ops): "
          + ", ".join(f"{k['kernel']} {t:.1f}" for k, t in zip(kernels, totals)))
    print(f"network {manifest.parent.name}: {len(kernels)} kernels, {sum(len(k['ops']) for k in kernels)} shader "
          f"modules, cold compile CPU {sum(totals):.1f} s in all; slowest kernel {max(totals):.1f} s, slowest "
          f"module {worst_op.get('first_dispatch_cpu_s', 0.0):.1f} s" + (f"; FAILED: {', '.join(failed)}" if failed
                                                                         else ""), flush=True)
    return {"network": str(manifest), "kernels": kernels, "total_cpu_s": sum(totals)}


def lavapipe_driver() -> str:
    """lavapipe's host line (CPU model, vector flags, L1d, Mesa version, width), else the devices listed."""
    from kernelgen.targets.vulkan.device import list_devices
    from kernelgen.targets.vulkan.lavapipe_host import current

    found = current()
    return found.describe() if found else "; ".join(f"{d.name} ({d.driver})" for d in list_devices())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("extra", nargs="*", help="more config files to measure (after the bundled workloads)")
    parser.add_argument("--only", type=lambda text: text.split(","), help="comma-separated workload names (config "
                                                                             "stems or bench workloads)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per compile child")
    parser.add_argument("--speed", action="store_true", help="also bench each workload on lavapipe")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rdna2", action="store_true", help="also the rdna2 profile's VGPRs and spills (ACO)")
    parser.add_argument("--no-compile", action="store_true", help="skip the cold compiles")
    parser.add_argument("--cache-dir", help="fill this Mesa shader cache (emptied first) instead of disabling it")
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--network", action="append", default=[], metavar="MANIFEST",
                        help="a network.yaml (kernelgen import -o DIR --target vulkan): the cold-compile table of "
                             "every op of its kernels instead of the bundled workloads (repeatable)")
    args = parser.parse_args()
    from kernelgen.measure.context import host_line
    print(host_line(["vulkan"]))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    cold = dict(env, MESA_SHADER_CACHE_DISABLE="true")
    warm = env
    if args.cache_dir:
        shutil.rmtree(args.cache_dir, ignore_errors=True)
        cold = warm = dict(env, MESA_SHADER_CACHE_DIR=args.cache_dir)
        cold.pop("MESA_SHADER_CACHE_DISABLE", None)
    print(f"host: {host()}; Vulkan: {lavapipe_driver()}; "
          f"{'MESA_SHADER_CACHE_DIR=' + args.cache_dir if args.cache_dir else 'MESA_SHADER_CACHE_DISABLE=true'}")
    if args.network:
        rows = [compile_network(Path(m), cold, args.timeout) for m in args.network]
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
        return 0
    rows = []
    print("| kernel | op | tile [oh, ow, oc4] | cold compile CPU s | wall s | GFLOP/s | of probe (GFLOP/s) | "
          "rdna2 VGPRs / spilled |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="vulkan-compile-") as tmp:
        extra = {Path(p).stem: Path(p) for p in args.extra}
        for name, path in {**workloads(Path(tmp)), **extra}.items():
            if args.only and name not in args.only:
                continue
            ops = []
            for op in range(0 if args.no_compile else op_count(path)):
                results, wall, cpu, error = run_child(["--child-compile", str(path), str(op)], cold, args.timeout)
                ops.append({"op": op + 1, "wall_s": wall, "cpu_s": cpu, "error": error, **(results[-1] if results
                                                                                           else {})})
            speed = {}
            if args.speed:
                results, wall, cpu, error = run_child(["--child-speed", str(path), str(args.repeat)], warm,
                                                      max(args.timeout, 600.0) * 2)
                speed = results[-1] if results else {"error": error}
            regs = rdna2(path) if args.rdna2 else None
            rows.append({"kernel": name, "ops": ops, "speed": speed, "rdna2": regs})
            for i, o in enumerate(ops or [{}]):
                first = i == 0
                gflops = f"{speed['gflops']:.1f}" if first and "gflops" in speed else ""
                ratio = (f"{speed['ratio']:.3f} ({speed['peak_gflops']:.0f})" if first and speed.get("ratio")
                         else speed.get("error", "") if first else "")
                cpu = o.get("error") or (f"{o['cpu_s']:.1f}" if o else "")
                print(f"| {name if first else ''} | {o.get('op', '')} | {o.get('ivc_tile', '')} | {cpu} | "
                      f"{o.get('wall_s', 0):.1f} | {gflops} | {ratio} | "
                      f"{f'{regs[0]} / {regs[1]}' if first and regs else ''} |", flush=True)
    if args.speed:
        print(probe_line())
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


def probe_line() -> str:
    """Which FMA probe shape the speed children's ratios are against (on lavapipe: one per host, kept in the
    user's cache, as `kernelgen bench` says under its rows)."""
    from kernelgen.targets.vulkan.lavapipe_host import current
    from kernelgen.targets.vulkan.probe_choice import probe_note

    found = current()
    return probe_note(found) if found else "no lavapipe: each child chose its own FMA probe shape"


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child-compile":
        child_compile(sys.argv[2], [int(op) for op in sys.argv[3].split(",")])
    elif len(sys.argv) > 1 and sys.argv[1] == "--child-speed":
        child_speed(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(main())
