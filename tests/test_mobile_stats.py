"""`kernelgen stats --device adreno-7xx | adreno-6xx | mali-valhall` (issue 31): each Vulkan op compiled by Mesa's
Turnip (ir3) or PanVK (Valhall) compiler over the noop DRM shims `make mesa-compilers` builds, no GPU needed.
Shapes are small where the shape does not matter: PanVK takes minutes on a large unrolled kernel."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import requires_tool
from hypothesis import given
from hypothesis import strategies as st
from strategies import fuzz_settings, valid_configs

from kernelgen.cli import main
from kernelgen.measure.records import Status
from kernelgen.targets.vulkan.mobilestats import parse_shaderdb, parse_turnip

VULKAN = ("glslangValidator", "py:vulkan")
TURNIP = (*VULKAN, "mesa:turnip")
PANVK = (*VULKAN, "mesa:panvk")
SMALL = ("name: small_conv\ninput: {shape: [1, 8, 8, 16]}\nops:\n  - conv2d: {out_channels: 16, kernel: 1}\n"
         "targets: [vulkan]\n")
# (profile, part, tools, the occupancy the profile targets: Adreno waves per core, Mali threads per slot)
# (A660's 64-vec4 register file holds 6 waves of a 3x3 kernel's 21 registers: kernelgen devices says why that is
# the adreno-6xx target.)
PARTS = [("adreno-7xx", "a740", TURNIP, 8), ("adreno-6xx", "a660", TURNIP, 6), ("mali-valhall", "g610", PANVK, 2)]
# An explicit tile past each register file but under the profile's accumulator limit (4 x its budget): Adreno 64
# vec4 accumulators (ir3 allocates at most 48 vec4 registers) on a 1x1 conv; Mali 32 (64 work registers at most)
# on a 3x3 one (a 1x1 conv's filter loads at use leave the Valhall compiler room to finish one accumulator at a
# time: no spill even at 32).
ADRENO_BIG = SMALL.replace("out_channels: 16", "out_channels: 32").replace("targets:", "vulkan: {ivc_tile: [2, 8, 16]}\n"
                                                                                       "targets:")
OVERSIZED = {"adreno-7xx": ADRENO_BIG, "adreno-6xx": ADRENO_BIG,
             "mali-valhall": SMALL.replace("[1, 8, 8, 16]", "[1, 6, 6, 8]").replace("out_channels: 16, kernel: 1",
                                                                                    "out_channels: 32, kernel: 3")
             .replace("targets:", "vulkan: {ivc_tile: [2, 4, 16]}\ntargets:")}
SHADERDB = ("shader: 1630 inst, 1.031250 cycles, 1.031250 fma, 0.312500 cvt, 0.000000 sfu, 0.000000 v, "
            "0.000000 t, 0.562500 ls, 1744 quadwords, 1 threads, 2 loops, 117:2331 spills:fills")


def test_the_valhall_shaderdb_line_is_parsed_field_by_field():
    stats = parse_shaderdb("noise\nCompute " + SHADERDB + "\nmore noise\n")
    assert stats == {"vgprs": 64, "sgprs": 0, "spilled_vgprs": 117, "spilled_sgprs": 0, "scratch_bytes": 0,
                     "waves": 1, "code_bytes": 1744 * 16, "latency": 0, "inverse_throughput": 1.03125,
                     "instructions": 1630, "fills": 2331,
                     "pipes": (("fma", 1.03125), ("cvt", 0.3125), ("sfu", 0.0), ("v", 0.0), ("t", 0.0), ("ls", 0.5625))}
    assert parse_shaderdb("Compute " + SHADERDB.replace("1 threads", "2 threads"))["vgprs"] == 32


def test_turnip_statistics_are_parsed_by_name():
    names = {"Registers used": 48, "Max Waves Per Core": 4, "Instruction Count": 46890, "Code size": 1000,
             "STP Count": 3049, "LDP Count": 4380, "Estimated cycles stalled on SS": 7,
             "Estimated cycles stalled on SY": 5, "Half-registers used": 3}
    stats = parse_turnip({k: float(v) for k, v in names.items()})
    assert (stats["vgprs"], stats["waves"], stats["spilled_vgprs"], stats["fills"]) == (48, 4, 3049, 4380)
    assert (stats["code_bytes"], stats["latency"], stats["instructions"]) == (4000, 12, 46890)


def _stats(config, device, gpu=None):
    args = ["stats", str(config), "--target", "vulkan", "--device", device, "--json"] + (["--gpu", gpu] if gpu else [])
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


@pytest.mark.parametrize("device, gpu, tools, occupancy", PARTS)
def test_a_small_conv_compiles_spill_free_at_the_profiles_occupancy(tmp_path, device, gpu, tools, occupancy):
    from conftest import require_tools

    require_tools(*tools)
    config = tmp_path / "small.yaml"
    config.write_text(SMALL)
    answer, stderr = _stats(config, device, gpu)
    context = answer["context"]["devices"]["vulkan-stats"]
    assert context.startswith(f"{device} (Mesa 25.0.7-2+deb13u1 ") and f" as {gpu} " in context, context
    (op,) = answer["results"][0]["ops"]
    assert op["vgprs"] > 0 and op["instructions"] > 0 and op["code_bytes"] > 0 and op["inverse_throughput"] > 0
    assert op["spilled_vgprs"] == op["fills"] == 0 and "warning" not in stderr
    assert op["waves"] >= occupancy
    if device == "mali-valhall":
        assert op["vgprs"] == 32  # 2 threads per slot: at most 32 work registers


@pytest.mark.parametrize("device, gpu, tools, occupancy", PARTS)
def test_an_oversized_tile_is_reported_spilling(tmp_path, device, gpu, tools, occupancy):
    from conftest import require_tools

    require_tools(*tools)
    config = tmp_path / "big.yaml"
    config.write_text(OVERSIZED[device])
    answer, stderr = _stats(config, device, gpu)
    (op,) = answer["results"][0]["ops"]
    assert op["spilled_vgprs"] > 0 and op["fills"] > 0, op
    assert op["waves"] < occupancy
    assert f"warning: op 1 spills {op['spilled_vgprs']} registers and fills {op['fills']}" in stderr


@requires_tool(*TURNIP, "spirv-val")
def test_build_with_a_spilling_explicit_tile_warns_with_the_counts(tmp_path):
    config = tmp_path / "spilly.yaml"
    text = ADRENO_BIG.replace("name: small_conv", "name: spilly").replace("vulkan: {", "vulkan: {device: adreno-7xx, ")
    config.write_text(text)
    result = CliRunner().invoke(main, ["build", str(config), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "warning: spilly: on adreno-7xx (turnip (Adreno ir3) as a740) op 1 spills " in result.stderr
    assert " fills, " in result.stderr
    config.write_text(text.replace(", ivc_tile: [2, 8, 16]", ""))  # the profile's default: no warning
    result = CliRunner().invoke(main, ["build", str(config), "-o", str(tmp_path / "out2")])
    assert result.exit_code == 0 and "spills" not in result.stderr, result.stderr


def test_gpu_must_belong_to_the_profile(repo):
    config = str(repo / "configs" / "seed002_vulkan.yaml")
    result = CliRunner().invoke(main, ["stats", config, "--target", "vulkan", "--device", "adreno-7xx",
                                       "--gpu", "g610"])
    assert result.exit_code == 2 and "g610 is a part of the mali-valhall profile, not of adreno-7xx" in result.output


def _at_profile_defaults(config, device):
    """The config with the profile's default tiles: no tile options of its own."""
    from kernelgen.config import with_options
    from kernelgen.targets.vulkan.options import vulkan_options

    return with_options(config, "vulkan", vulkan_options(config).model_copy(update={
        "device": device, "ivc_tile": None, "wg_size": None, "wg_tile": None, "wide_store": False}))


def _short_of_the_profile(configs, device, gpu, occupancy):
    """Every op of the configs at the profile's defaults as (spills + fills, occupancy, config, op), and those that
    spill or fall below the occupancy the profile targets."""
    from kernelgen.api import stats

    ops = [(op.spilled_vgprs + op.fills, op.waves, config.name, op.op)
           for config in configs for op in stats(_at_profile_defaults(config, device), "vulkan", device, gpu)]
    return ops, sorted(op for op in ops if op[0] or op[1] < occupancy)


@pytest.mark.parametrize("device, gpu, tools, occupancy", PARTS)
def test_profile_defaults_compile_spill_free_for_every_bundled_vulkan_config_and_matrix_case(repo, device, gpu,
                                                                                            tools, occupancy):
    """Each profile's default tiles (no tile options), for every Vulkan config in configs/ and every case of the
    vulkan target's test matrix (padded, ragged, grouped, depthwise, residual, blocked nhwc-8h8w32c, 5-wide and
    dilated kernels, float16): no spill, and the occupancy the profile targets (A740: 8 waves per core; A660: 6;
    Mali: 2 threads, at most 32 work registers)."""
    from conftest import require_tools
    import test_vulkan_target

    from kernelgen.api import load_config

    require_tools(*tools)
    configs = [load_config(p) for p in sorted((repo / "configs").glob("*.yaml"))]
    configs = [c for c in configs if "vulkan" in c.targets]
    configs += [test_vulkan_target._config(name) for name in sorted(test_vulkan_target.MATRIX)]
    ops, short = _short_of_the_profile(configs, device, gpu, occupancy)
    assert len(ops) >= 55
    assert short == [], short


# Matrix cases whose mobile kernels take the paths the mobile profiles add: the taps in a kept loop (5-wide,
# dilated, tail channels, a [3, 1] kernel over 5 scalar channels), grouped reads through the division-free group
# lookup, blocked nhwc-8h8w32c read as vec4s.
MOBILE_PATHS = ("k5_same_dilation2_tile_larger", "rect_1x5_padded_output", "fp16_chain_tail_channels",
                "c5_k7_oihw_scalar", "grouped_3_ragged_pair", "grouped_4_chain_residual", "depthwise_dilated_c5_scalar",
                "chain_of_three_blocked", "residual_blocked_batch2")


@requires_tool(*VULKAN)
@pytest.mark.parametrize("device", ["adreno-6xx", "mali-valhall"])
@pytest.mark.parametrize("name", MOBILE_PATHS)
def test_mobile_profile_kernels_compute_the_right_answer_on_lavapipe(device, name):
    import test_vulkan_target

    from kernelgen.api import validate

    config = _at_profile_defaults(test_vulkan_target._config(name), device)
    result = validate(config, "vulkan", seed=11)
    assert result.passed, f"{result.detail} (seed {result.seed})"


@pytest.mark.slow
@fuzz_settings(ci_examples=12)
@given(case=valid_configs(dtypes=("float32", "float16"), max_side=9, max_channels=24, chain=2, target="vulkan"),
       part=st.sampled_from(PARTS))
def test_random_configs_at_each_profiles_defaults_are_spill_free_at_its_occupancy_and_right(case, part):
    """The randomized suite's Vulkan configs at a mobile profile's defaults: its compiler finds no spill and the
    occupancy the profile targets, and the same kernels match numpy on lavapipe."""
    from conftest import require_tools

    from kernelgen.api import parse_config, validate
    from kernelgen.errors import ConfigError

    device, gpu, tools, occupancy = part
    require_tools(*tools)
    try:
        config = _at_profile_defaults(parse_config(case.text, "fuzz.yaml"), device)
        _, short = _short_of_the_profile([config], device, gpu, occupancy)
    except ConfigError as error:  # what the vulkan target documents it cannot do (test_fuzz_valid.py)
        assert "writes pad_value only into channel padding" in str(error), f"{error}\n{case.text}"
        return
    assert short == [], f"{short}\n{case.text}"
    result = validate(config, "vulkan", seed=1234)
    assert result.passed or result.status is Status.NOT_RUN, f"{result.detail}\n{case.text}"


@requires_tool(*TURNIP)
def test_an_adreno_sweep_ranks_by_ir3_and_puts_spilling_variants_last(monkeypatch):
    """No Adreno GPU here: with the adreno-7xx profile each variant is compiled by Turnip's ir3 as an A740 and
    ranked by its estimate (instructions per wave x waves); a variant that spills ranks after every clean one."""
    from kernelgen.api import TARGETS, parse_config
    from kernelgen.measure.records import BenchOptions
    from kernelgen.measure.sweep import sweep
    from kernelgen.targets.gpu.profiles import SweepSpace
    from kernelgen.targets.vulkan import sweep as vulkan_sweep

    monkeypatch.setattr(vulkan_sweep, "GPU_SWEEP", SweepSpace(((1, 2, 4), (2, 8, 16)), ((16, 4, 1),)))
    config = parse_config(SMALL.replace("out_channels: 16", "out_channels: 32")
                          .replace("targets:", "vulkan: {device: adreno-7xx}\ntargets:"), "s.yaml")
    target = TARGETS["vulkan"]
    results = sweep(config, target, target.sweep_variants(config), BenchOptions())
    by_key = {r.variant: r.row for r in results}
    small, big = by_key["ivc_tile=[1, 2, 4] wg_size=[16, 4, 1]"], by_key["ivc_tile=[2, 8, 16] wg_size=[16, 4, 1]"]
    assert small.metrics["spilled_vgprs"] == 0 and big.metrics["spilled_vgprs"] > 0
    assert small.best and not big.best and small.rank < big.rank and small.metrics["ir3_cycles"] > 0
    assert small.seconds != small.seconds and "(ir3 estimate)" in small.label  # no wall time: an estimate


@requires_tool("mesa:turnip", "mesa:panvk")
def test_targets_lists_the_built_compilers_and_the_install_step_is_a_no_op_once_built(repo):
    import subprocess
    import sys

    result = CliRunner().invoke(main, ["targets"])
    assert result.exit_code == 0
    lines = {line.split()[0]: line for line in result.output.splitlines() if line.strip().startswith("mesa:")}
    assert set(lines) == {"mesa:turnip", "mesa:panvk", "mesa:rusticl"}  # rusticl: the opencl target's (issue 47)
    assert all(" found   " in lines[name] and "Mesa 25.0.7-2+deb13u1" in lines[name]
               for name in ("mesa:turnip", "mesa:panvk")), lines
    done = subprocess.run([sys.executable, str(repo / "tools" / "mesa_compilers.py")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("mesa-compilers: Mesa 25.0.7-2+deb13u1 (turnip, panvk"), \
        done.stdout + done.stderr
    assert len(done.stdout.splitlines()) == 1


def test_a_missing_build_is_listed_with_what_to_run(tmp_path, monkeypatch):
    from kernelgen.targets.vulkan.mobilestats import compiler_status

    monkeypatch.setenv("KERNELGEN_CACHE_DIR", str(tmp_path))
    statuses = compiler_status()
    assert [(s.name, s.found, s.install_hint, s.stats_only) for s in statuses] == [
        ("mesa:turnip", False, "make mesa-compilers", True), ("mesa:panvk", False, "make mesa-compilers", True)]
    config = tmp_path / "small.yaml"
    config.write_text(SMALL)
    result = CliRunner().invoke(main, ["stats", str(config), "--target", "vulkan", "--device", "mali-valhall"])
    assert result.exit_code == 1
    assert "panvk (Mali Valhall) compiler is not built: run `make mesa-compilers`" in result.output, result.output
