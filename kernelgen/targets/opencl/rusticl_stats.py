"""What the Adreno and Mali compilers make of the opencl target's kernels, without the GPUs (issue 47): Mesa's
rusticl, built by `make mesa-compilers` (tools/rusticl_build.py), with its freedreno (ir3) or panfrost (Valhall)
Gallium driver over the noop DRM shim the Vulkan part built (LD_PRELOAD; FD_GPU_ID / PAN_GPU_ID pick the part,
as vulkan/mobilestats.py does). clBuildProgram runs clang -> SPIR-V -> NIR -> the part's compiler; nothing runs.

- Rusticl installs no debug callback, so ir3's shaderdb line never appears; IR3_SHADER_DEBUG=cs makes ir3 print
  each compute shader's disassembly instead, headed by its counts (instructions, nops, dwords, full and half
  registers, sync stalls, loops). Spill stores and fills are the stp / ldp instructions of the listing; the waves
  a core holds follow from the registers as ir3 computes them (ir3_get_reg_dependent_max_waves; the branch-stack
  and shared-memory limits are left out: the kernels share no local memory), doubled waves (128 fibers) read back
  from CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE.
- The Valhall compiler prints its shaderdb line on stderr (BIFROST_MESA_DEBUG=shaderdb), parsed as for PanVK.

Rusticl compiles a kernel that reads get_global_id twice (a variant assuming zero global offsets); with
RUSTICL_DEBUG=no_variants it compiles each kernel once, in the order of their sorted names: that is how lines are
matched to kernels. The variant judged thus adds the global offset (a few integer adds) to what would run.
"""
from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from ...children import run_child
from ...errors import ToolchainError
from ...toolstatus import ToolStatus
from ..vulkan.mesa_pin import DEBIAN_VERSION, TURNIP, is_installed as vulkan_installed
from ..vulkan.mobilestats import SHADERDB, MobileGpu, parse_shaderdb
from .rusticl_pin import INSTALL_COMMAND, icd_dir, install_dir, installed_library, is_installed
from .rusticl_child import BEGIN, END

# per kernel of the program, as the Vulkan path allows each pipeline: a spilling kernel takes the Valhall compiler
# minutes (MobileNetV3-small's 10-kernel block at the mali-valhall defaults: over 300 s on a loaded 2-core host)
TIMEOUT_S = 300.0
# Per part: ir3's register file (reg_size_vec4, vec4 registers per fiber slot) and wave granularity, from
# Mesa 25.0.7 src/freedreno/common/freedreno_devices.py (A618, A630: a6xx_gen1; A660: a6xx_gen4; a7xx_base)
REGISTER_FILES = {"a740": (96, 2), "a730": (96, 2), "a660": (64, 2), "a630": (96, 2), "a618": (96, 2)}
IR3_MAX_WAVES = 16  # every a6xx / a7xx part's max_waves there
HEADER = re.compile(r"Native code for unnamed CL shader (\S*)")  # ir3 names an OpenCL kernel's stage CL
COUNTS = re.compile(r"; CL prog \d+/\d+: (\d+) instr, (\d+) nops, \d+ non-nops, \d+ mov, \d+ cov, (\d+) dwords")
REGISTERS = re.compile(r"; CL prog \d+/\d+: \d+ last-baryf, \d+ last-helper, (-?\d+) half, (-?\d+) full")
STALLS = re.compile(r"; CL prog \d+/\d+: (\d+) sstall, \d+ \(ss\), (\d+) systall, \d+ \(sy\), (\d+) loops")
SPILL = re.compile(r"\b(stp|ldp)\.[a-z0-9]+\b")


def compiler_name(gpu: MobileGpu) -> str:
    ids = " ".join(f"{k}={v}" for k, v in gpu.env.items() if k.endswith("GPU_ID"))
    return f"Mesa {DEBIAN_VERSION} rusticl, {gpu.driver.name}, noop DRM shim as {gpu.name} ({ids})"


def compiler_status() -> tuple[ToolStatus, ...]:
    """Rusticl as `kernelgen targets` lists it: found when `make mesa-compilers` built it (and the shims)."""
    found = is_installed()
    return (ToolStatus("mesa:rusticl", found, f"rusticl (freedreno, panfrost), Mesa {DEBIAN_VERSION} in "
                       f"{install_dir()}" if found else "", INSTALL_COMMAND, stats_only=True),)


class RusticlMissing(ToolchainError):
    """`make mesa-compilers` has not built rusticl (or the shims) here: the command asks for what cannot be
    answered on this machine, so it exits 2 as a refused request does."""

    exit_code = 2


def check_installed(gpu: MobileGpu) -> None:
    if not is_installed() or not vulkan_installed(gpu.driver):
        raise RusticlMissing(f"Mesa's rusticl is not built: run `{INSTALL_COMMAND}` (builds rusticl "
                             f"{DEBIAN_VERSION} into {install_dir()})")


def program_stats(gpu: MobileGpu, source: str, options: str, kernels: int) -> dict[str, dict[str, Any]]:
    """Build the program for the part; per kernel name, DeviceStats' fields (every kernel the program holds on
    it: the half-arithmetic ones only where the part offers cl_khr_fp16); `kernels` (the most it holds) sets the
    time limit."""
    check_installed(gpu)
    adreno = gpu.driver is TURNIP
    env = {k: v for k, v in os.environ.items() if k != "MESA_SHADER_CACHE_DIR"}
    # pyopencl's wheel bundles an ICD loader that reads OCL_ICD_VENDORS only (Debian's reads both); a program from
    # pyopencl's cache compiles nothing (and a miss stored there compiled twice on panfrost): no cache
    env |= gpu.env | {"OCL_ICD_VENDORS": str(icd_dir()), "OCL_ICD_FILENAMES": str(installed_library()),
                      "RUSTICL_ENABLE": gpu.driver.name, "LD_PRELOAD": str(gpu.driver.installed_shim()),
                      "RUSTICL_DEBUG": "no_variants", "MESA_SHADER_CACHE_DISABLE": "true", "PYOPENCL_NO_CACHE": "1"}
    if adreno:
        env["IR3_SHADER_DEBUG"] = "cs"
    with tempfile.TemporaryDirectory(prefix="kernelgen-rusticl-") as tmp:
        path = Path(tmp) / "kernels.cl"
        path.write_text(source)
        done = run_child([sys.executable, "-m", f"{__package__}.rusticl_child", str(path), options],
                         what=f"the OpenCL program on rusticl as {gpu.name}", timeout=TIMEOUT_S * max(1, kernels),
                         env=env, text=True)
    if done.returncode:
        raise ToolchainError(f"building on rusticl ({gpu.name}) failed: {done.stderr.strip()[-600:]}")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    compiled = _between_markers(done.stderr)
    names = sorted(answer["simd"])
    stats = parse_ir3(compiled) if adreno else parse_valhall(compiled)
    if len(stats) != len(names):
        raise ToolchainError(f"rusticl's {gpu.name} compiler reported {len(stats)} shaders for the program's "
                             f"{len(names)} kernels")
    for name, fields in zip(names, stats):
        if adreno:  # a 128-wide SIMD is ir3's doubled wave
            fields["waves"] = ir3_waves(gpu.name, fields["vgprs"], fields.pop("half"), answer["simd"][name] == 128)
    return dict(zip(names, stats))


def _between_markers(stderr: str) -> str:
    if BEGIN not in stderr or END not in stderr:
        raise ToolchainError(f"rusticl's child printed no build markers: {stderr.strip()[-300:]}")
    return stderr.split(BEGIN, 1)[1].split(END, 1)[0]


def parse_ir3(text: str) -> list[dict[str, Any]]:
    """Each compute shader's disassembly (IR3_SHADER_DEBUG=cs) -> DeviceStats' fields, in the order compiled;
    'half' (half registers) is kept for ir3_waves, 'waves' left to it; the loops ir3 kept are among the pipes."""
    out = []
    for block in HEADER.split(text)[2::2]:  # split keeps each header's name between the blocks
        counts, registers, stalls = (pattern.search(block) for pattern in (COUNTS, REGISTERS, STALLS))
        if not (counts and registers and stalls):
            raise ToolchainError(f"ir3's disassembly lacks its counts: {block.strip()[:300]}")
        block = block[:stalls.end()]  # the listing ends with its counts; the next kernel's NIR follows
        instructions, nops, dwords = map(int, counts.groups())
        half, full = map(int, registers.groups())
        sstall, systall, loops = map(int, stalls.groups())
        spills = SPILL.findall(block)
        out.append({"vgprs": full, "half": half, "sgprs": 0, "spilled_vgprs": spills.count("stp"),
                    "spilled_sgprs": 0, "scratch_bytes": 0, "code_bytes": 4 * dwords, "latency": sstall + systall,
                    "inverse_throughput": instructions, "instructions": instructions,
                    "fills": spills.count("ldp"), "pipes": (("issued", instructions), ("nops", nops),
                                                            ("stall_ss", sstall), ("stall_sy", systall),
                                                            ("loops", loops))})
    return out


def parse_valhall(text: str) -> list[dict[str, Any]]:
    """Each shaderdb line (BIFROST_MESA_DEBUG=shaderdb) -> DeviceStats' fields, in the order compiled, the loops
    the compiler kept among the pipes (the estimate reads them)."""
    return [stats | {"pipes": (*stats["pipes"], ("loops", int(line.group(11))))}
            for line in SHADERDB.finditer(text) for stats in (parse_shaderdb(line.group(0)),)]


def ir3_waves(part: str, full: int, half: int, doubled: bool) -> int:
    """The waves an SP holds at these registers, as ir3 counts them: full registers plus the half ones in pairs,
    a doubled (128-fiber) wave taking twice the registers."""
    size, granularity = REGISTER_FILES[part]
    registers = full + (half + 1) // 2
    if registers <= 0:
        return IR3_MAX_WAVES
    return min(IR3_MAX_WAVES, size // (registers * (2 if doubled else 1)) * granularity)
