"""Where a vulkan kernel spends its time on lavapipe: perf samples over the JIT's x86 code.

lavapipe compiles each compute pipeline to x86 with LLVM at run time, so neither perf nor
a debugger can name its functions. This script runs a config's kernels in a child
process under `perf record`, copies the JIT's anonymous executable mappings out of that
process before it exits, disassembles them with objdump and charges every sample to the
instruction it hit. It prints, per JIT function that holds the kernel's multiply-adds:

- how the samples split between the code before the first multiply, the multiply-add
  region and the code after the last one (the stores);
- the share of samples in the small helper functions (texelFetch is an out-of-line call);
- instruction counts: mul / add / fused multiply-add, calls, vector spills and reloads,
  and the stack bytes the multiply-add region touches (compare with the 32 KiB L1d);
- with --hot N, the N instructions with the most samples and the samples by opcode;
- with --mca CPU, what llvm-mca's model of CPU (znver3, znver4, skylake-avx512, ...) makes of the
  multiply-add region without its calls and branches: cycles a pass and multiply/add pairs a cycle,
  the region's port-bound ceiling on that core, to set beside the probe's rate (one pair a cycle on
  Intel's two FMA ports, two on Zen's separate multiply and add pipes).

    perf, objdump: apt-get install linux-perf binutils (llvm-mca: llvm)
    .venv/bin/python benchmarks/lavapipe_profile.py configs/seed002_vulkan.yaml [--repeat 10] [--hot 30] [--mca znver3]
    .venv/bin/python benchmarks/lavapipe_profile.py configs/seed002_vulkan.yaml --ivc-tile 4,16,8 --wg-size 8,1,1
"""
from __future__ import annotations

import argparse
import collections
import ctypes
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

FP_OPS = re.compile(r"^v(mul|add|fmadd\d*|fnmadd\d*)[ps]s$")
STACK_OPERAND = re.compile(r"(-?0x[0-9a-f]+)?\(%rsp(?:,[^)]*)?\)")
INSTRUCTION = re.compile(r"\s*([0-9a-f]+):\t[^\t]*\t(\S.*)")


def _tuple(text: str) -> tuple[int, int, int]:
    values = tuple(int(v) for v in text.split(","))
    if len(values) != 3:
        raise argparse.ArgumentTypeError(f"expected 3 comma-separated ints, got {text!r}")
    return values


def run_child(args: argparse.Namespace) -> None:
    """Run the kernels `repeat` times, then write the JIT's executable mappings."""
    import numpy as np

    from kernelgen.api import load_config
    from kernelgen.config import with_options
    from kernelgen.measure.tensors import poisons, random_inputs
    from kernelgen.planner import plan as make_plan
    from kernelgen.targets import TARGETS
    from kernelgen.targets.vulkan.options import vulkan_options
    from kernelgen.targets.vulkan.program import compile_program

    config = load_config(args.config)
    overrides = {key: list(value) for key, value in (("ivc_tile", args.ivc_tile), ("wg_size", args.wg_size)) if value}
    if overrides:  # as the bench sweep's permutations do
        config = with_options(config, "vulkan", vulkan_options(config).model_copy(update=overrides))
    job = TARGETS["vulkan"].build(config, make_plan(config))  # the GLSL `kernelgen build` writes
    tensors = random_inputs(config, job.plan, np.random.default_rng(0))
    with compile_program(job, None) as program:
        runner = program.runner
        runner.run_sequence(program.stages, program.buffers(tensors, poisons(config.dtype)[0]), repeat=args.repeat)
        # The JIT's code lives in anonymous r-x mappings (no file name); read them while
        # the pipelines still exist.
        with open(args.dump, "wb") as blob, open(f"{args.dump}.maps", "w") as index:
            for line in Path("/proc/self/maps").read_text().splitlines():
                fields = line.split()
                if "x" in fields[1] and len(fields) < 6:
                    start, end = (int(v, 16) for v in fields[0].split("-"))
                    index.write(f"{start:#x} {end - start} {blob.tell()}\n")
                    blob.write(ctypes.string_at(start, end - start))


@dataclass(frozen=True)
class Mapping:
    start: int  # address in the child
    size: int
    offset: int  # where its bytes start in the dump


def disassemble(dump: Path, mapping: Mapping) -> list[tuple[int, str]]:
    """(address in the child, instruction text) for one mapping's bytes in the dump."""
    with open(dump, "rb") as blob:
        blob.seek(mapping.offset)
        data = blob.read(mapping.size)
    with tempfile.NamedTemporaryFile(suffix=".bin") as part:
        part.write(data)
        part.flush()
        text = subprocess.run(["objdump", "-D", "-b", "binary", "-m", "i386:x86-64",
                               f"--adjust-vma={mapping.start:#x}", part.name],
                              check=True, capture_output=True, text=True).stdout
    rows = []
    for line in text.splitlines():
        m = INSTRUCTION.match(line)
        if m:
            rows.append((int(m.group(1), 16), m.group(2)))
    return rows


def functions(rows: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Split straight-line disassembly at `ret`; padding between functions stays attached."""
    out, current = [], []
    for row in rows:
        current.append(row)
        if row[1].startswith("ret"):
            out.append(current)
            current = []
    if current:
        out.append(current)
    return out


def stack_slots(rows: list[tuple[int, str]]) -> int:
    """32-byte stack slots addressed in `rows` (rsp-relative operands)."""
    slots = set()
    for _, text in rows:
        for m in STACK_OPERAND.finditer(text):
            slots.add(int(m.group(1) or "0", 16) // 32)
    return len(slots)


def hot_spots(body: list[tuple[int, str]], samples: collections.Counter, top: int) -> None:
    """The `top` instructions of a function with the most samples, each with its index in the function, and the
    samples by opcode: where the cycles go inside a region (a sample lands on the instruction after a stall)."""
    ranked = sorted(range(len(body)), key=lambda i: -samples.get(body[i][0], 0))[:top]
    hits = sum(samples.get(addr, 0) for addr, _ in body) or 1
    for i in sorted(ranked):
        print(f"    {samples.get(body[i][0], 0) / hits:6.1%}  #{i:<5d} {body[i][1]}")
    by_op = collections.Counter()
    for addr, text in body:
        by_op[text.split()[0]] += samples.get(addr, 0)
    print("  samples by opcode: " + ", ".join(f"{op} {n / hits:.0%}" for op, n in by_op.most_common(12)))


# what llvm-mca cannot take from objdump's listing of a region, or should not time: control flow and padding
_NOT_TIMED = ("call", "j", "ret", "nop", "data16", "cs ", "int3", "(bad)")


def mca_line(region: list[tuple[int, str]], cpu: str) -> str:
    """llvm-mca's cycles for one pass of the multiply-add region on `cpu` and its multiply/add pairs a cycle."""
    # the newest llvm-mca installed: the CPU models (znver4 since LLVM 17) come with the version
    found = [shutil.which(f"llvm-mca-{v}") for v in range(30, 13, -1)] + [shutil.which("llvm-mca")]
    mca = next((path for path in found if path), None)
    if mca is None:
        return "  llvm-mca: not installed (apt-get install llvm)"
    body = [text for _, text in region if not text.startswith(_NOT_TIMED)]
    iterations = 20
    with tempfile.NamedTemporaryFile("w", suffix=".s") as listing:
        listing.write("\n".join(body) + "\n")
        listing.flush()
        done = subprocess.run([mca, f"-mcpu={cpu}", f"-iterations={iterations}", listing.name],
                              capture_output=True, text=True)
    cycles = re.search(r"Total Cycles:\s+(\d+)", done.stdout)
    if done.returncode or not cycles:
        return f"  llvm-mca -mcpu={cpu}: failed: {(done.stderr or done.stdout).strip().splitlines()[:1]}"
    per_pass = int(cycles.group(1)) / iterations
    pairs = sum(1 for text in body if text.startswith("vmulps"))
    return (f"  llvm-mca -mcpu={cpu} ({Path(mca).name}), the region without its {len(region) - len(body)} calls and "
            f"branches: {per_pass:.0f} cycles a pass, {pairs / per_pass:.2f} multiply/add pairs a cycle")


def report(dump: Path, samples: collections.Counter, top: int = 0, mca_cpu: str | None = None) -> None:
    maps = [Mapping(*(int(v, 0) for v in line.split())) for line in Path(f"{dump}.maps").read_text().splitlines()]
    total = sum(samples.values())
    jit = sum(n for ip, n in samples.items() if any(m.start <= ip < m.start + m.size for m in maps))
    print(f"samples: {total} in the process, {jit} in JIT code ({jit / max(total, 1):.0%})")
    if not jit:
        print("no samples in JIT code: is perf allowed to sample (perf_event_paranoid)?")
        return
    helpers = 0
    for mapping in maps:
        for body in functions(disassemble(dump, mapping)):
            hits = sum(samples.get(addr, 0) for addr, _ in body)
            ops = [text.split()[0] for _, text in body]
            fp = [i for i, op in enumerate(ops) if FP_OPS.match(op)]
            if not fp:
                helpers += hits
                continue
            first, last = fp[0], fp[-1]
            split = [sum(samples.get(addr, 0) for addr, _ in part)
                     for part in (body[:first], body[first:last + 1], body[last + 1:])]
            counts = collections.Counter(ops)
            region = body[first:last + 1]
            spills = sum(1 for _, t in region if t.startswith("vmov") and re.search(r"%[xyz]mm\d+,\S*\(%rsp", t))
            reloads = sum(1 for _, t in region if t.startswith("vmov") and re.search(r"\(%rsp[^)]*\),%[xyz]mm", t))
            fused = sum(n for op, n in counts.items() if "fmadd" in op)
            print(f"\nkernel function at {body[0][0]:#x}: {len(body)} instructions, {hits} samples ({hits / jit:.0%} of JIT)")
            print(f"  before the first multiply {split[0] / jit:6.1%}   multiply-add region {split[1] / jit:6.1%}   "
                  f"after the last (stores) {split[2] / jit:6.1%}")
            print(f"  vmulps {counts['vmulps']}  vaddps {counts['vaddps']}  fused multiply-adds {fused}  "
                  f"calls {counts['call']}")
            print(f"  in the multiply-add region: {len(region)} instructions, {spills} vector spills, {reloads} reloads, "
                  f"{stack_slots(region) * 32 / 1024:.1f} KiB of stack touched")
            if mca_cpu:
                print(mca_line(region, mca_cpu))
            if top:
                hot_spots(body, samples, top)
    print(f"\nhelper functions (texel fetches and the like): {helpers / jit:.1%} of JIT samples")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config")
    parser.add_argument("--repeat", type=int, default=10, help="dispatches of the whole chain to sample")
    parser.add_argument("--ivc-tile", type=_tuple, default=None, help="override vulkan.ivc_tile, e.g. 4,16,8")
    parser.add_argument("--wg-size", type=_tuple, default=None, help="override vulkan.wg_size, e.g. 8,4,1")
    parser.add_argument("--frequency", type=int, default=4000, help="perf samples per second")
    parser.add_argument("--hot", type=int, default=0, metavar="N",
                        help="also print each kernel function's N most-sampled instructions and samples by opcode")
    parser.add_argument("--mca", metavar="CPU", help="also time the multiply-add region with llvm-mca's model of CPU "
                        "(e.g. znver3, znver4, skylake-avx512)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dump", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args)
        return 0
    from kernelgen.measure.context import host_line
    from kernelgen.targets.vulkan.lavapipe_host import current

    print(host_line(["vulkan"]))
    found = current()  # what lavapipe compiles for (width, subgroup, L1d), so runs on different CPUs can be told apart
    print(f"lavapipe: {found.describe() if found else 'no llvmpipe device'}")
    with tempfile.TemporaryDirectory(prefix="kg-lavapipe-") as work:
        dump, data = Path(work) / "jit.bin", Path(work) / "perf.data"
        child = [sys.executable, __file__, args.config, "--child", "--dump", str(dump), "--repeat", str(args.repeat)]
        for flag, value in (("--ivc-tile", args.ivc_tile), ("--wg-size", args.wg_size)):
            if value:
                child += [flag, ",".join(map(str, value))]
        subprocess.run(["perf", "record", "-q", "-F", str(args.frequency), "-o", str(data), "--", *child], check=True)
        ips = subprocess.run(["perf", "script", "-i", str(data), "-F", "ip"], check=True,
                             capture_output=True, text=True).stdout.split()
        report(dump, collections.Counter(int(ip, 16) for ip in ips), args.hot, args.mca)
    return 0


if __name__ == "__main__":
    sys.exit(main())
