"""`kernelgen stats --target opencl --device adreno-7xx | adreno-6xx | mali-valhall` (issue 47): the opencl
target's kernels built by Mesa's rusticl with its freedreno (ir3) or panfrost (Valhall) driver over the noop DRM
shims, all of which `make mesa-compilers` builds; no GPU needed."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import requires_tool

from kernelgen.cli import main
from kernelgen.targets.opencl.rusticl_pin import install_dir
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
    assert ir3_waves("a630", 33, 0, doubled=False) == 4  # a6xx gen1: 96 vec4 as on a740
    # what Turnip itself reported for the vulkan target's network kernels (README: registers -> max waves per core)
    assert [ir3_waves("a740", r, 0, doubled=False) for r in (16, 19)] == [12, 10]
    assert [ir3_waves("a660", r, 0, doubled=False) for r in (16, 21)] == [8, 6]


def _ir3_listing(spills: int, fills: int, full: int, loops: int) -> str:
    """One kernel as IR3_SHADER_DEBUG=cs prints it through mesa_log (lines abridged from a real a740 listing)."""
    body = ["MESA: info: stp.u32 p[r0.w+4], r1.x, 1"] * spills + ["MESA: info: ldp.u32 r1.x, p[r0.w+4], 1"] * fills
    return "\n".join([
        "MESA: info: NIR (final form) for CL shader (null):", "MESA: info: shader: MESA_SHADER_KERNEL",
        "MESA: info: Native code for unnamed CL shader (null) with sha1 7be30e28bb8af106204b1776dbca16466b47802b:",
        "MESA: info: @in(r48.x)\tin0 (wrmask=0x7)", *body, "MESA: info: nop",
        "MESA: info: ; CL prog 1/1: 35660 instr, 14923 nops, 20737 non-nops, 4529 mov, 1030 cov, 46240 dwords",
        f"MESA: info: ; CL prog 1/1: 0 last-baryf, 0 last-helper, 2 half, {full} full, 104 constlen",
        "MESA: info: ; CL prog 1/1: 14931 cat0, 8137 cat1, 4734 cat2, 2567 cat3, 0 cat4, 4 cat5, 5280 cat6, 7 cat7",
        f"MESA: info: ; CL prog 1/1: 3620 sstall, 2723 (ss), 57875 systall, 1166 (sy), {loops} loops",
        "MESA: info: ; 17 preamble instr, 0 early-preamble", ""])


def test_ir3_listings_are_parsed_kernel_by_kernel():
    # the second kernel's NIR (which names no stp) follows the first's counts: each listing ends at its counts
    first, second = parse_ir3(_ir3_listing(3, 2, 48, 3) + _ir3_listing(0, 0, 20, 0))
    assert (first["vgprs"], first["half"], first["spilled_vgprs"], first["fills"]) == (48, 2, 3, 2)
    assert (first["code_bytes"], first["latency"], first["instructions"]) == (46240 * 4, 3620 + 57875, 35660)
    assert first["pipes"] == (("issued", 35660), ("nops", 14923), ("stall_ss", 3620), ("stall_sy", 57875),
                              ("loops", 3))
    assert (second["vgprs"], second["spilled_vgprs"], second["fills"], dict(second["pipes"])["loops"]) == (20, 0, 0, 0)


def test_valhall_lines_keep_the_loops_for_the_estimate():
    line = ("SHADER-DB: MESA_SHADER_KERNEL shader: 643 inst, 44.000000 cycles, 0.500000 fma, 6.625000 cvt, "
            "8.937500 sfu, 0.000000 v, 0.000000 t, 44.000000 ls, 328 quadwords, 2 threads, 3 loops, 0:0 spills:fills")
    (stats,) = parse_valhall("noise\n" + line + "\n")
    assert (stats["vgprs"], stats["waves"], stats["instructions"], stats["code_bytes"]) == (32, 2, 643, 328 * 16)
    assert stats["pipes"][-2:] == (("ls", 44.0), ("loops", 3))


def test_unbuilt_rusticl_is_one_line_and_exit_2(tmp_path, monkeypatch):
    config = tmp_path / "small_cl.yaml"
    config.write_text(SMALL)
    monkeypatch.setenv("KERNELGEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    result = CliRunner().invoke(main, ["stats", str(config), "--target", "opencl", "--device", "adreno-7xx"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: Mesa's rusticl is not built: run `make mesa-compilers` (builds rusticl 25.0.7-2+deb13u1 into "
        f"{tmp_path / 'empty-cache' / 'rusticl-25.0.7-2+deb13u1'})"]


def test_an_unbuilt_rusticl_is_listed_with_what_to_run(tmp_path, monkeypatch):
    from kernelgen.targets.opencl.rusticl_stats import compiler_status

    monkeypatch.setenv("KERNELGEN_CACHE_DIR", str(tmp_path))
    assert [(s.name, s.found, s.install_hint, s.stats_only) for s in compiler_status()] == [
        ("mesa:rusticl", False, "make mesa-compilers", True)]


@requires_tool("mesa:rusticl")
def test_the_rusticl_build_is_a_no_op_once_built(repo):
    done = subprocess.run([sys.executable, str(repo / "tools" / "rusticl_build.py")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [f"mesa-compilers: rusticl (freedreno, panfrost) in {install_dir()}"]


def test_a_profile_without_a_compiler_is_refused(tmp_path):
    config = tmp_path / "small_cl.yaml"
    config.write_text(SMALL)
    result = CliRunner().invoke(main, ["stats", str(config), "--target", "opencl", "--device", "pocl-cpu"])
    assert result.exit_code == 2
    assert "the opencl target has compiler statistics for the adreno-7xx, adreno-6xx, mali-valhall profiles only, " \
           "got 'pocl-cpu'" in result.output


def _kernel_stats(text: str, tmp_path, device: str):
    from kernelgen.api import kernel_stats, parse_config

    return kernel_stats(parse_config(text, str(tmp_path / "c.yaml")), "opencl", device)


@requires_tool(*RUSTICL)
@pytest.mark.parametrize("device", ["adreno-7xx", "adreno-6xx"])
def test_ir3_judges_each_launched_kernel_of_the_program(tmp_path, device):
    """Both kernels of the chain, in launch order, named as the plan launches them; the profile's default tiles
    spill nothing on ir3; the waves are ir3's count at the registers it reports (single 64-fiber waves: 8
    work-items a group). On A740 (tile 1 x 4 pixels x 1 chunk) the 1x1's whole 16-channel loop, unrolled, takes 48
    registers and holds 4 waves, under the profile's 8; on A660 (1 x 2 x 1) both hold the target."""
    from kernelgen.api import jobs, parse_config, with_device

    kernel = _kernel_stats(SMALL, tmp_path, device)
    job = jobs(with_device(parse_config(SMALL, str(tmp_path / "c.yaml")), device), ("opencl",))["opencl"]
    launch = json.loads(job.files["small_cl.launch.json"])["launch"]["kernels"]  # as `kernelgen build` writes it
    assert [r.label for r in kernel.rows] == [k["name"] for k in launch] == ["small_cl_conv1", "small_cl_conv2"]
    assert [e.invocations for e in kernel.estimates] == [math.prod(k["global_size"]) for k in launch]
    assert [(r.op, r.spilled_vgprs, r.fills) for r in kernel.rows] == [(1, 0, 0), (2, 0, 0)]
    part = {"adreno-7xx": "a740", "adreno-6xx": "a660"}[device]
    assert [r.waves for r in kernel.rows] == [ir3_waves(part, r.vgprs, 0, doubled=False) for r in kernel.rows]
    assert kernel.target_occupancy == dict(PROFILES)[device]
    assert [kernel.flags(r) for r in kernel.rows] == {"adreno-7xx": [(), ("BELOW-TARGET",)],
                                                      "adreno-6xx": [(), ()]}[device]
    assert kernel.rows[0].instructions > kernel.rows[1].instructions  # nine taps against one: lines matched right
    # the 3x3 kept its loops: kh x kw x 4-channel groups; the 1x1's (one vec4 chunk a work-item) unrolled: one pass
    assert [e.passes for e in kernel.estimates] == [3 * 3 * 4, 1]


@requires_tool(*RUSTICL)
def test_valhall_judges_a_tile_that_fits_and_one_that_spills(tmp_path):
    """A 1x1 conv at the profile's default tile ([1, 1, 1]) fits 32 work registers (2 threads, the target); PoCL's
    tile (1 pixel row of 4 x 16 channel groups) spills on the G610, flagged and warned of."""
    tiny = "name: tiny_cl\ninput: {shape: [1, 4, 4, 64]}\nops:\n  - conv2d: {out_channels: 64, kernel: 1}\n"
    fits = _kernel_stats(tiny + "targets: [opencl]\n", tmp_path, "mali-valhall")
    (row,) = fits.rows
    assert (row.label, row.vgprs, row.waves, row.spilled_vgprs, row.fills) == ("tiny_cl_conv1", 32, 2, 0, 0)
    assert fits.flags(row) == () and fits.target_occupancy == 2
    assert [unit for unit, _ in fits.estimates[0].unit_seconds] == ["fma", "cvt", "sfu", "v", "t", "ls"]
    config = tmp_path / "tiny_cl.yaml"
    config.write_text(tiny + "opencl: {tile: [1, 4, 16]}\ntargets: [opencl]\n")
    result = CliRunner().invoke(main, ["stats", str(config), "--target", "opencl", "--device", "mali-valhall",
                                       "--json"])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and warnings[0].startswith("warning: kernel tiny_cl_conv1 spills ")
    document = json.loads(result.output[:result.output.index("\nwarning:")])
    (op,) = document["results"][0]["ops"]
    assert (op["label"], op["vgprs"], op["waves"]) == ("tiny_cl_conv1", 64, 1) and op["spilled_vgprs"] > 0
