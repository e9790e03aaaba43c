"""What the Adreno and Mali compilers make of each op's shader, without the GPUs (issue 31): Mesa's Turnip
(the ir3 compiler) and PanVK (the Valhall compiler), built by `make mesa-compilers`, run over their noop DRM
shims, which fake the kernel driver (LD_PRELOAD; FD_GPU_ID / PAN_GPU_ID pick the part). Creating a compute
pipeline runs the real compiler; nothing reaches a GPU.

- Turnip answers VK_KHR_pipeline_executable_properties: registers (vec4 full registers), max waves per core,
  instruction count, STP/LDP (spill stores and fills), sync-stall estimates.
- PanVK in 25.0.7 reports only code size that way, so BIFROST_MESA_DEBUG=shaderdb makes the compiler print one
  line per shader on stderr: instructions, the cycle estimate, threads (2: at most 32 work registers, full
  occupancy; 1: 64), loops, spills:fills.

Each module is compiled in its own child process (pipeline_child.py) under a per-compile time limit: a large
kernel takes minutes on the Valhall compiler (issue 31: 113 s for seed 002's lavapipe tile).
"""
from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...children import run_child
from ...errors import ToolchainError
from ...toolstatus import ToolStatus
from .mesa_pin import DEBIAN_VERSION, INSTALL_COMMAND, PANVK, TURNIP, MesaDriver, install_dir, is_installed

TIMEOUT_S = 300.0  # per pipeline; seed 002's lavapipe tile (128 vec4 accumulators) took 113 s on PanVK here


@dataclass(frozen=True, slots=True, kw_only=True)
class MobileGpu:
    """One part a profile covers, and how the shim is told to pretend to be it."""
    name: str  # what --gpu takes
    profile: str  # the kernelgen.devices profile it belongs to
    driver: MesaDriver
    env: dict[str, str] = field(default_factory=dict)
    description: str = ""


GPUS = {g.name: g for g in (
    MobileGpu(name="a740", profile="adreno-7xx", driver=TURNIP, env={"FD_GPU_ID": "740"},
              description="Adreno 740 (Snapdragon 8 Gen 2), a7xx gen2: 96 vec4 registers per fiber slot"),
    MobileGpu(name="a730", profile="adreno-7xx", driver=TURNIP, env={"FD_GPU_ID": "730"},
              description="Adreno 730 (Snapdragon 8 Gen 1), a7xx gen1"),
    MobileGpu(name="a660", profile="adreno-6xx", driver=TURNIP, env={"FD_GPU_ID": "660"},
              description="Adreno 660 (Snapdragon 888), a6xx gen4: 64 vec4 registers per fiber slot"),
    MobileGpu(name="a630", profile="adreno-6xx", driver=TURNIP, env={"FD_GPU_ID": "630"},
              description="Adreno 630 (Snapdragon 845), a6xx gen1: 96 vec4 registers"),
    MobileGpu(name="a618", profile="adreno-6xx", driver=TURNIP, env={"FD_GPU_ID": "618"},
              description="Adreno 618 (Snapdragon 730), a6xx gen1"),
    # G610 and G710 share the v10 core; PanVK 25.0.7 rejects v9 (G57, G78)
    MobileGpu(name="g610", profile="mali-valhall", driver=PANVK,
              env={"PAN_GPU_ID": "a867", "BIFROST_MESA_DEBUG": "shaderdb"},
              description="Mali G610 (RK3588), Valhall v10"),
)}
# The part a profile is judged on when --gpu does not say (the first of each profile's parts above).
DEFAULT_GPU = {"adreno-7xx": "a740", "adreno-6xx": "a660", "mali-valhall": "g610"}
SHADERDB = re.compile(r"(\d+) inst, ([\d.]+) cycles, ([\d.]+) fma, ([\d.]+) cvt, ([\d.]+) sfu, ([\d.]+) v, "
                      r"([\d.]+) t, ([\d.]+) ls, (\d+) quadwords, (\d+) threads, (\d+) loops, (\d+):(\d+) spills:fills")
VALHALL_PIPES = ("fma", "cvt", "sfu", "v", "t", "ls")  # the shaderdb line's per-unit cycles, in its order
# A thread's cycles per load or store instruction, which Mesa counts as 1: the load/store unit serves a whole
# 16-thread warp's instruction at once, one 64-byte cache line per cycle (Arm, "The Valhall shader core"), so the
# kernels' vec4 accesses (16 bytes a thread, 4 lines a warp) take a quarter of a cycle per thread; a warp reading
# one address (a filter value) takes less.
VALHALL_LS_CYCLES = 16 * 16 / 64 / 16
TURNIP_FIELDS = ("Registers used", "Max Waves Per Core", "Instruction Count", "Code size", "STP Count",
                 "LDP Count", "Estimated cycles stalled on SS", "Estimated cycles stalled on SY")


def gpu_for(profile: str, gpu: str | None) -> MobileGpu:
    """The part to compile for: --gpu (which must belong to the profile), else the profile's default."""
    name = gpu or DEFAULT_GPU[profile]
    chosen = GPUS.get(name)
    if chosen is None or chosen.profile != profile:
        parts = ", ".join(g.name for g in GPUS.values() if g.profile == profile)
        raise ToolchainError(f"no GPU {name!r} in the {profile} profile (it covers {parts})")
    return chosen


def compiler_name(gpu: MobileGpu) -> str:
    return f"Mesa {DEBIAN_VERSION} {gpu.driver.compiler}, noop DRM shim as {gpu.name} " \
           f"({' '.join(f'{k}={v}' for k, v in gpu.env.items() if k.endswith('GPU_ID'))})"


def compiler_status() -> tuple[ToolStatus, ...]:
    """Turnip and PanVK as `kernelgen targets` lists them: found when `make mesa-compilers` has built them."""
    return tuple(ToolStatus(f"mesa:{driver.tool}", is_installed(driver),
                            f"{driver.compiler}, Mesa {DEBIAN_VERSION} in {install_dir()}" if is_installed(driver)
                            else "", INSTALL_COMMAND, stats_only=True) for driver in (TURNIP, PANVK))


def mobile_stats(gpu: MobileGpu, spirv: list[bytes], kinds: list[tuple[str, ...]]) -> list[dict[str, Any]]:
    """Compile each module (its bindings of these kinds) for the part; per module, DeviceStats' fields."""
    driver = gpu.driver
    if not is_installed(driver):
        raise ToolchainError(f"Mesa's {driver.compiler} compiler is not built: run `{INSTALL_COMMAND}` "
                             f"(builds Mesa {DEBIAN_VERSION} into {install_dir()})")
    env = {k: v for k, v in os.environ.items() if k not in ("RADV_DEBUG", "MESA_SHADER_CACHE_DIR")}
    env |= gpu.env | {"VK_ICD_FILENAMES": str(driver.icd_json()), "VK_DRIVER_FILES": str(driver.icd_json()),
                      "LD_PRELOAD": str(driver.installed_shim()), "MESA_SHADER_CACHE_DISABLE": "true"}
    out = []
    with tempfile.TemporaryDirectory(prefix="kernelgen-mesa-") as tmp:
        for index, (code, stage_kinds) in enumerate(zip(spirv, kinds)):
            module = Path(tmp) / f"{index}.spv"
            module.write_bytes(code)
            done = run_child([sys.executable, "-m", f"{__package__}.pipeline_child", str(module), *stage_kinds],
                             what=f"op {index + 1} on {driver.compiler} as {gpu.name}", timeout=TIMEOUT_S,
                             env=env, text=True)
            if done.returncode:
                raise ToolchainError(f"compiling on {driver.compiler} ({gpu.name}) failed: "
                                     f"{done.stderr.strip()[-600:]}")
            out.append(parse_turnip(json.loads(done.stdout)) if driver is TURNIP else parse_shaderdb(done.stderr))
    return out


def parse_turnip(statistics: dict[str, float]) -> dict[str, Any]:
    """Turnip's pipeline-executable statistics -> DeviceStats' fields. Registers are vec4 full registers
    (ir3's max_reg + 1); the waves a core holds follow from them (reg_size_vec4 / registers x 2 per wave pair).
    ir3 counts instructions and code size in 16 bits: on a huge kernel (tens of thousands of instructions) they
    wrap (issue 31), so those two rank only kernels of sane size."""
    missing = [name for name in TURNIP_FIELDS if name not in statistics]
    if missing:
        raise ToolchainError(f"Turnip's pipeline statistics lack {', '.join(missing)}")
    s = {k: int(v) for k, v in statistics.items()}
    return {"vgprs": s["Registers used"], "sgprs": 0, "spilled_vgprs": s["STP Count"], "spilled_sgprs": 0,
            "scratch_bytes": 0, "waves": s["Max Waves Per Core"], "code_bytes": 4 * s["Code size"],
            "latency": s["Estimated cycles stalled on SS"] + s["Estimated cycles stalled on SY"],
            "inverse_throughput": s["Instruction Count"], "instructions": s["Instruction Count"],
            "fills": s["LDP Count"],
            "pipes": (("issued", s["Instruction Count"]), ("nops", s.get("NOPs Count", 0)),
                      ("stall_ss", s["Estimated cycles stalled on SS"]),
                      ("stall_sy", s["Estimated cycles stalled on SY"]))}


def parse_shaderdb(stderr: str) -> dict[str, Any]:
    """The Valhall compiler's shaderdb line -> DeviceStats' fields. Its register allocator gives a shader 32
    work registers (2 threads per slot: full occupancy) or 64 (1 thread), so 'threads' is the register count."""
    lines = [m for m in SHADERDB.finditer(stderr)]
    if len(lines) != 1:
        raise ToolchainError(f"PanVK printed {len(lines)} shaderdb lines for one pipeline, expected 1: "
                             f"{stderr.strip()[-300:]}")
    inst, _cycles, *pipes, quadwords, threads, _loops, spills, fills = lines[0].groups()
    units = tuple(zip(VALHALL_PIPES, map(float, pipes)))  # as Mesa printed them
    # Mesa's bound is the largest unit's cycles with a load or store at 1; with VALHALL_LS_CYCLES instead
    bound = max(c * (VALHALL_LS_CYCLES if unit == "ls" else 1.0) for unit, c in units)
    return {"vgprs": 32 if threads == "2" else 64, "sgprs": 0, "spilled_vgprs": int(spills), "spilled_sgprs": 0,
            "scratch_bytes": 0, "waves": int(threads), "code_bytes": 16 * int(quadwords), "latency": 0,
            "inverse_throughput": bound, "instructions": int(inst), "fills": int(fills), "pipes": units}

