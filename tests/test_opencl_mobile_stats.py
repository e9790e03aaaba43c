"""`kernelgen stats --target opencl --device adreno-7xx | adreno-6xx | mali-valhall` (issue 47): the opencl
target's kernels built by Mesa's rusticl with its freedreno (ir3) or panfrost (Valhall) driver over the noop DRM
shims, all of which `make mesa-compilers` builds; no GPU needed."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import requires_tool

from kernelgen.cli import main
from kernelgen.targets.opencl.rusticl_stats import ir3_waves, parse_ir3, parse_valhall

RUSTICL = ("py:pyopencl", "mesa:rusticl", "mesa:turnip", "mesa:panvk")
SMALL = ("name: small_cl\ninput: {shape: [1, 8, 8, 16]}\nops:\n  - conv2d: {out_channels: 16, kernel: 3, pad: 1}\n"
         "  - conv2d: {out_channels: 8, kernel: 1}\ntargets: [opencl]\n")
# (profile, the occupancy it targets: Adreno waves per SP, Mali threads per slot)
PROFILES = [("adreno-7xx", 8), ("adreno-6xx", 6), ("mali-valhall", 2)]


def test_ir3_waves_follow_the_register_file_as_ir3_counts_them():
    # a740: 96 vec4 registers per fiber slot, waves in pairs: 24 registers -> 4 x 2 = 8 waves (adreno-7xx's target)
    assert ir3_waves("a740", 24, 0, doubled=False) == 8
    assert ir3_waves("a740", 25, 0, doubled=False) == 6
    assert ir3_waves("a740", 24, 0, doubled=True) == 4  # a 128-fiber wave takes twice the registers
    assert ir3_waves("a740", 20, 3, doubled=False) == 8  # 3 half registers count as 2 full ones: 22
    assert ir3_waves("a660", 21, 0, doubled=False) == 6  # 64 vec4: adreno-6xx's target
    assert ir3_waves("a740", 3, 0, doubled=False) == 16  # capped at ir3's 16
    assert ir3_waves("a618", 24, 0, doubled=False) == 2  # gen1_low: 48 vec4, waves one at a time


def test_unbuilt_rusticl_is_one_line_and_exit_2(tmp_path, monkeypatch):
    config = tmp_path / "small_cl.yaml"
    config.write_text(SMALL)
    monkeypatch.setenv("KERNELGEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    result = CliRunner().invoke(main, ["stats", str(config), "--target", "opencl", "--device", "adreno-7xx"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: Mesa's rusticl is not built: run `make mesa-compilers` (builds rusticl 25.0.7-2+deb13u1 into "
        f"{tmp_path / 'empty-cache' / 'rusticl-25.0.7-2+deb13u1'})"]


def test_a_profile_without_a_compiler_is_refused(tmp_path):
    config = tmp_path / "small_cl.yaml"
    config.write_text(SMALL)
    result = CliRunner().invoke(main, ["stats", str(config), "--target", "opencl", "--device", "pocl-cpu"])
    assert result.exit_code == 2
    assert "the opencl target has compiler statistics for the adreno-7xx, adreno-6xx, mali-valhall profiles only, " \
           "got 'pocl-cpu'" in result.output
