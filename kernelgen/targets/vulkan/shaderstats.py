"""What a real GPU compiler makes of each op's shader: Mesa's RADV driver compiles for an RDNA2 GPU without
one (RADV_FORCE_FAMILY=navi21 exposes a "Null hardware" device), and RADV_DEBUG=shaderstats prints the ACO
compiler's statistics of every pipeline to stderr (a shader-cache hit prints none: hence nocache).

Creating a device, a shader module, a descriptor set layout and a compute pipeline is enough; nothing is
dispatched. The pipelines are created in a child process (this module run as a script), so the driver's
environment and its stderr stay out of the calling process, and a compile that runs away (issue 32: minutes and
gigabytes on a tile that spills thousands of registers) is killed at TIMEOUT_S and never outlives kernelgen
(kernelgen.children).
"""
from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path

from ...children import run_child
from ...errors import ToolchainError

RADEON_ICD = "/usr/share/vulkan/icd.d/radeon_icd.x86_64.json"  # mesa-vulkan-drivers
RDNA2_FAMILY = "navi21"  # Radeon RX 6800/6900; Samsung's Xclipse 920 is RDNA2 as well
# ACO's statistics, as RADV prints them, and the JSON key each becomes
FIELDS = {"VGPRs": "vgprs", "SGPRs": "sgprs", "Spilled VGPRs": "spilled_vgprs", "Spilled SGPRs": "spilled_sgprs",
          "Scratch size": "scratch_bytes", "Subgroups per SIMD": "waves", "Code size": "code_bytes",
          "Latency": "latency", "Inverse Throughput": "inverse_throughput", "Instructions": "instructions"}
# Three ops of a 512-accumulator tile (the most plan.py allows on rdna2) compile in ~12 s on a loaded 2-core host.
TIMEOUT_S = 120.0


def parse_stats(text: str) -> list[dict[str, int]]:
    """Every '*** SHADER STATS ***' block of RADV's stderr, in the order the pipelines were created: ACO's numbers
    by the name kernelgen.measure.records.DeviceStats gives them (registers, spills, waves per SIMD, code size,
    static latency and inverse throughput)."""
    out = []
    for block in text.split("*** SHADER STATS ***")[1:]:
        values = dict(re.findall(r"^([A-Za-z][A-Za-z ]*?): (\d+)\s*$", block.split("********")[0], re.MULTILINE))
        missing = [name for name in FIELDS if name not in values]
        if missing:
            raise ToolchainError(f"RADV's shader statistics lack {', '.join(missing)}")
        out.append({key: int(values[name]) for name, key in FIELDS.items()})
    return out


def rdna2_stats(spirv: list[bytes], kinds: list[tuple[str, ...]]) -> list[dict[str, int]]:
    """Compile each module (its bindings of these kinds) on RADV's null RDNA2 device; its statistics."""
    if not Path(RADEON_ICD).exists():
        raise ToolchainError(f"Mesa's radeon Vulkan driver is missing ({RADEON_ICD}): apt-get install "
                             f"mesa-vulkan-drivers")
    with tempfile.TemporaryDirectory(prefix="kernelgen-radv-") as tmp:
        for index, code in enumerate(spirv):
            (Path(tmp) / f"{index}.spv").write_bytes(code)
        (Path(tmp) / "kinds.json").write_text(json.dumps([list(k) for k in kinds]))
        env = os.environ | {"RADV_FORCE_FAMILY": RDNA2_FAMILY, "RADV_DEBUG": "shaderstats,nocache",
                            "VK_ICD_FILENAMES": RADEON_ICD, "VK_DRIVER_FILES": RADEON_ICD}
        done = run_child([sys.executable, "-m", __name__, tmp], what=f"the {len(spirv)} pipeline(s) on RADV's null "
                         f"{RDNA2_FAMILY} device", timeout=TIMEOUT_S, env=env, text=True)
    if done.returncode:
        raise ToolchainError(f"compiling on RADV's null device failed: {done.stderr.strip()[-600:]}")
    stats = parse_stats(done.stderr)
    if len(stats) != len(spirv):
        raise ToolchainError(f"RADV printed statistics for {len(stats)} of {len(spirv)} pipelines")
    return stats


def _create_pipelines(folder: Path) -> None:
    """The child: one compute pipeline per module, on the first RADV device."""
    from .device import Scope
    from .runtime import Stage, VulkanRunner

    kinds = json.loads((folder / "kinds.json").read_text())
    with VulkanRunner("RADV") as runner:
        for index, stage_kinds in enumerate(kinds):
            code = (folder / f"{index}.spv").read_bytes()
            stage = Stage(code, tuple(range(len(stage_kinds))), (1, 1, 1), kinds=tuple(stage_kinds))
            run = Scope()
            try:
                runner._dispatch(run, stage, [], [])  # the pipeline only: no buffers, no dispatch
            finally:
                run.close()
            sys.stderr.flush()


if __name__ == "__main__":
    _create_pipelines(Path(sys.argv[1]))
