"""`kernelgen stats`: each Vulkan op compiled by RADV's ACO for a null RDNA2 device (no GPU needed), its
registers, spills, occupancy and code size (issue 21's real-GPU check)."""
from __future__ import annotations

import json

from click.testing import CliRunner
from conftest import requires_tool

from kernelgen.cli import main
from kernelgen.measure.records import DeviceStats
from kernelgen.targets.vulkan.shaderstats import parse_stats

VULKAN = ("glslangValidator", "py:vulkan")
KEYS = ["vgprs", "sgprs", "spilled_vgprs", "spilled_sgprs", "scratch_bytes", "waves", "code_bytes", "latency",
        "inverse_throughput", "instructions", "fills"]
SAMPLE = """Compute Shader:
*** SHADER STATS ***
Driver pipeline hash: 1
SGPRs: 128
VGPRs: 240
Spilled SGPRs: 3
Spilled VGPRs: 180
Code size: 32956
LDS size: 0
Scratch size: 37888
Subgroups per SIMD: 4
Hash: 533141871
Instructions: 4672
Latency: 109426
Inverse Throughput: 437705
********************
"""


def test_radv_statistics_are_parsed_field_by_field():
    (stats,) = parse_stats("noise before\n" + SAMPLE)
    assert stats == {"vgprs": 240, "sgprs": 128, "spilled_vgprs": 180, "spilled_sgprs": 3, "scratch_bytes": 37888,
                     "waves": 4, "code_bytes": 32956, "latency": 109426, "inverse_throughput": 437705,
                     "instructions": 4672}
    assert DeviceStats(op=1, label="conv", **stats).spills == 183


@requires_tool(*VULKAN)
def test_the_lavapipe_tuned_tile_spills_on_rdna2_and_a_small_one_does_not(tmp_path, repo):
    """seed 002's lavapipe tile needs every VGPR and spills thousands (the issue measured 2,432); a 2x4 pixel x
    4 channel invocation tile with kernel rows in a loop fits in registers."""
    result = CliRunner().invoke(main, ["stats", str(repo / "configs" / "seed002_vulkan.yaml"), "--target", "vulkan",
                                       "--device", "rdna2", "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["context"]["devices"]["vulkan-stats"].startswith("rdna2 (Mesa RADV/ACO, null navi21")
    (report,) = answer["results"]
    assert (report["target"], report["device"], report["profile"]) == ("vulkan", "rdna2", "rdna2")
    assert report["config_sets"] == ["ivc_tile", "wg_size", "wide_store"]  # the config's own tiles, kept
    (op,) = report["ops"]
    assert list(op)[2:] == KEYS
    assert op["vgprs"] == 256 and op["spilled_vgprs"] > 1000 and op["scratch_bytes"] > 0
    assert "warning: op 1 spills " in result.stderr and " VGPRs and 0 SGPRs" in result.stderr
    small = tmp_path / "small.yaml"
    small.write_text("name: small_tile\ninput: {shape: [1, 16, 16, 32]}\nops:\n"
                     "  - conv2d: {out_channels: 32, kernel: 3, pad: 1}\n"
                     "vulkan: {ivc_tile: [2, 4, 4]}\ntargets: [vulkan]\n")
    result = CliRunner().invoke(main, ["stats", str(small), "--target", "vulkan", "--device", "rdna2", "--json"])
    assert result.exit_code == 0, result.output
    (op,) = json.loads(result.stdout)["results"][0]["ops"]
    assert op["spilled_vgprs"] == op["spilled_sgprs"] == 0 and op["vgprs"] <= 128 and op["waves"] >= 8


def test_stats_refuses_a_device_it_cannot_compile_for(repo):
    config = str(repo / "configs" / "seed002_vulkan.yaml")
    result = CliRunner().invoke(main, ["stats", config, "--target", "vulkan", "--device", "mali"])
    assert result.exit_code == 2 and "'mali' is not one of" in result.output  # not a profile at all
    result = CliRunner().invoke(main, ["stats", config, "--target", "vulkan", "--device", "pocl-cpu"])
    assert result.exit_code == 2 and "the vulkan target takes no 'pocl-cpu' profile" in result.output
    result = CliRunner().invoke(main, ["stats", config, "--target", "vulkan"])  # the config's profile: lavapipe
    assert result.exit_code == 2 and "the config's vulkan.device is 'lavapipe' (--device rdna2 " in result.output
    result = CliRunner().invoke(main, ["stats", str(repo / "configs" / "seed002_vulkan.yaml"), "--target", "c"])
    assert result.exit_code == 2 and "the c target has compiler statistics for no device" in result.output


@requires_tool(*VULKAN)
def test_rdna2_defaults_compile_spill_free_for_every_vulkan_config(repo):
    """The rdna2 profile's default tiles: no spill for every Vulkan config in configs/ and the vulkan target's
    test matrix, as RADV's ACO compiles them, and at most 128 VGPRs (8+ waves per SIMD) for kernels up to 5 wide
    (past 3 taps the invocation tile shrinks to make room for the row's filter slice)."""
    import test_vulkan_target
    from kernelgen.api import load_config, stats
    from kernelgen.config import with_options
    from kernelgen.targets.vulkan.options import vulkan_options

    configs = [load_config(p) for p in sorted((repo / "configs").glob("*.yaml"))]
    configs = [c for c in configs if "vulkan" in c.targets]
    configs += [test_vulkan_target._config(name) for name in sorted(test_vulkan_target.MATRIX)]
    worst = []
    for config in configs:
        rdna2 = with_options(config, "vulkan", vulkan_options(config).model_copy(update={
            "device": "rdna2", "ivc_tile": None, "wg_size": None, "wg_tile": None, "wide_store": False}))
        for op in stats(rdna2, "vulkan", "rdna2"):
            narrow = config.ops[op.op - 1].kernel[1] <= 5
            worst.append((op.spilled_vgprs + op.spilled_sgprs, op.vgprs if narrow else 0, config.name, op.op))
    assert max(worst)[0] == 0, max(worst)
    assert max(w[1] for w in worst) <= 128, max(worst, key=lambda w: w[1])
    assert len(worst) > 40


@requires_tool(*VULKAN)
def test_rdna2_tiles_still_compute_the_right_answer_on_lavapipe(repo):
    from kernelgen.api import parse_config, validate
    from kernelgen.measure.records import Status

    text = (repo / "configs" / "mobilenet_v2_block.yaml").read_text().replace(
        "targets: [c, hvx, opencl, vulkan]", "vulkan: {device: rdna2}\ntargets: [vulkan]").replace(
        "[1, 56, 56, 24]", "[1, 14, 13, 24]")
    result = validate(parse_config(text, "mnv2_rdna2.yaml"), "vulkan", seed=3)
    assert result.status is Status.PASS, result.detail


def test_device_profiles_name_a_source_for_every_fact():
    from kernelgen.devices import PROFILES

    assert set(PROFILES) >= {"lavapipe", "pocl-cpu", "rdna2", "adreno-7xx", "mali-valhall"}
    facts = ("subgroup", "register_budget", "local_memory_bytes", "max_workgroup", "max_image", "fp16_arithmetic",
             "int64", "vector_width")
    for p in PROFILES.values():
        assert all(p.sources.get(f) for f in facts), (p.name, [f for f in facts if not p.sources.get(f)])
    result = CliRunner().invoke(main, ["devices", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["mali-valhall"]["register_budget"] == 32


@requires_tool(*VULKAN, "spirv-val")
def test_build_writes_one_spirv_module_per_op_and_sources_only_without_glslang(tmp_path, repo, monkeypatch):
    import subprocess

    config = repo / "configs" / "vulkan_chain_fp16.yaml"
    result = CliRunner().invoke(main, ["build", str(config), "--target", "vulkan", "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    folder = tmp_path / "out" / "vulkan_chain_fp16" / "vulkan"
    modules = sorted(p.name for p in folder.glob("*.spv"))
    assert modules == ["vulkan_chain_fp16.op1.spv", "vulkan_chain_fp16.op2.spv"]
    for module in modules:
        data = (folder / module).read_bytes()
        assert data[:4] == bytes.fromhex("03022307")  # the SPIR-V magic number, little-endian
        done = subprocess.run(["spirv-val", "--target-env", "vulkan1.2", str(folder / module)], capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stderr
    monkeypatch.setenv("PATH", "/nonexistent")
    result = CliRunner().invoke(main, ["build", str(config), "--target", "vulkan", "-o", str(tmp_path / "plain")])
    assert result.exit_code == 0, result.output
    assert "glslangValidator not found, wrote the GLSL sources only" in result.stderr
    assert not list((tmp_path / "plain").rglob("*.spv")) and list((tmp_path / "plain").rglob("*.comp"))


@requires_tool(*VULKAN)
def test_device_option_applies_a_profile_to_every_target_that_takes_it(tmp_path, repo):
    """--device NAME on build, validate and bench: the profile's defaults for vulkan and opencl (their configs'
    vulkan/opencl.device replaced); a profile a target has no use for leaves it alone."""
    config = str(repo / "configs" / "seed000_baseline.yaml")
    runner = CliRunner()
    for device, workgroup in ((None, "WGSize[8x1x1]"), ("rdna2", "WGSize[16x4x1]")):
        out = tmp_path / (device or "default")
        result = runner.invoke(main, ["build", config, "-o", str(out), *(["--device", device] if device else [])])
        assert result.exit_code == 0, result.output
        assert workgroup in (out / "seed000_baseline" / "vulkan" / "seed000_baseline.comp").read_text()
    texture = tmp_path / "tex.yaml"
    texture.write_text("name: tex\ninput: {shape: [1, 8, 8, 16], layout: {map: \"n, h, w, c -> n, c // 4, h, |, w, "
                       "c % 4\"}}\nops: [{conv2d: {out_channels: 8, kernel: 3, pad: 1}}]\ntargets: [opencl]\n")
    kinds = {}
    for device in ("pocl-cpu", "adreno-7xx", "lavapipe"):
        result = runner.invoke(main, ["build", str(texture), "-o", str(tmp_path / device), "--device", device])
        assert result.exit_code == 0, result.output
        launch = json.loads((tmp_path / device / "tex" / "opencl" / "tex.launch.json").read_text())
        kinds[device] = next(t["kind"] for t in launch["launch"]["tensors"] if t["name"] == "filter1")
    assert kinds == {"pocl-cpu": "buffer", "adreno-7xx": "image", "lavapipe": "buffer"}
    result = runner.invoke(main, ["validate", config, "--target", "vulkan", "--device", "rdna2"])
    assert result.exit_code == 0 and " pass " in result.output, result.output
    assert runner.invoke(main, ["build", config, "--device", "nope"]).exit_code == 2


@requires_tool(*VULKAN, "spirv-val")
def test_an_explicit_tile_that_spills_on_rdna2_builds_with_a_warning_naming_the_spills(tmp_path):
    config = tmp_path / "spilly.yaml"
    text = ("name: spilly\ninput: {shape: [1, 34, 34, 64]}\nops: [{conv2d: {out_channels: 64, kernel: 3, pad: 1}}]\n"
            "vulkan: {device: rdna2, ivc_tile: [4, 8, 8]}\ntargets: [vulkan]\n")
    config.write_text(text)
    result = CliRunner().invoke(main, ["build", str(config), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "warning: spilly: on rdna2 (RADV's ACO) op 1 spills " in result.stderr and " VGPRs" in result.stderr
    assert (tmp_path / "out" / "spilly" / "vulkan" / "spilly.op1.spv").is_file()
    config.write_text(text.replace(", ivc_tile: [4, 8, 8]", ""))  # the profile's default: no warning
    result = CliRunner().invoke(main, ["build", str(config), "-o", str(tmp_path / "out2")])
    assert result.exit_code == 0 and "spills" not in result.stderr, result.stderr


BIG_TILE = ("name: big_tile\ninput: {shape: [1, 16, 16, 16]}\nops:\n  - conv2d: {out_channels: 32, kernel: 3, pad: 1}\n"
            "  - conv2d: {out_channels: 32, kernel: 1}\n  - conv2d: {out_channels: 64, kernel: 3, pad: 1}\n"
            "vulkan: {device: rdna2, ivc_tile: [8, 8, 64], wg_size: [16, 16, 4]}\ntargets: [vulkan]\n")


def test_a_tile_past_the_accumulator_bound_is_refused_at_its_key(tmp_path):
    """Issue 32: this tile (4,096 accumulators per invocation) kept RADV's ACO compiling for over 600 s at
    2.9 GB during `build`. It is refused when planned, at the key that set it: 512 on rdna2 (4 x its 128
    registers), 1,024 on lavapipe (its LLVM's compile time, issue 30)."""
    config = tmp_path / "big_tile.yaml"
    cases = [(BIG_TILE, "7:35", "vulkan.ivc_tile", "[8, 8, 64] holds 4096 accumulators (oh * ow * oc); keep it "
                                                   "<= 512 on rdna2 (4 x its 128-register budget"),
             (BIG_TILE.replace("device: rdna2, ", ""), "7:20", "vulkan.ivc_tile", "<= 1024 on lavapipe"),
             (BIG_TILE.replace("device: rdna2, ivc_tile: [8, 8, 64]", "wg_tile: [64, 128, 512]"), "7:19",
              "vulkan.wg_tile", "the invocation tile [16, 8, 32] holds 4096 accumulators")]
    for text, at, key, message in cases:
        config.write_text(text)
        result = CliRunner().invoke(main, ["build", str(config), "-o", str(tmp_path / "out")])
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(f"{config}:{at}: error: {key}: ") and message in result.stderr, result.stderr
    config.write_text(BIG_TILE.replace("[8, 8, 64]", "[4, 4, 32]"))  # 512: at the bound
    assert CliRunner().invoke(main, ["plan", str(config)]).exit_code == 0


@requires_tool(*VULKAN)
def test_a_radv_compile_past_its_time_limit_is_killed_and_says_so(tmp_path, monkeypatch):
    """The statistics child gets TIMEOUT_S (lowered here to 0.05 s): `stats` fails with "did not compile in
    N s", `build` still writes the sources and SPIR-V and says why it has no statistics."""
    from kernelgen.targets.vulkan import shaderstats

    monkeypatch.setattr(shaderstats, "TIMEOUT_S", 0.05)
    config = tmp_path / "small.yaml"
    config.write_text(BIG_TILE.replace("ivc_tile: [8, 8, 64], wg_size: [16, 16, 4]", "ivc_tile: [2, 4, 4]"))
    result = CliRunner().invoke(main, ["stats", str(config), "--target", "vulkan"])
    assert result.exit_code == 1, result.output
    assert "did not compile in 0.05 s (killed)" in result.stderr, result.stderr
    result = CliRunner().invoke(main, ["build", str(config), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "no rdna2 compiler statistics" in result.stderr and "did not compile in 0.05 s" in result.stderr
    assert (tmp_path / "out" / "big_tile" / "vulkan" / "big_tile.op3.spv").is_file()


@requires_tool(*VULKAN)
def test_stats_labels_a_depthwise_and_a_grouped_filter_by_what_each_output_reads(tmp_path):
    """Issue 49: a depthwise 3x3 over 88 channels reads a 3x3 slice of one channel per output, not the
    3x3x88x88 a dense label said; a conv in 4 groups reads Cin/4 channels."""
    config = tmp_path / "mobile.yaml"
    config.write_text("name: mobile_ops\ninput: {shape: [1, 14, 14, 88]}\nops:\n"
                      "  - conv2d: {out_channels: 88, kernel: 3, pad: 1, groups: 88}\n"
                      "  - conv2d: {out_channels: 32, kernel: 1, groups: 4}\n"
                      "  - conv2d: {out_channels: 16, kernel: 1}\n"
                      "targets: [vulkan]\n")
    result = CliRunner().invoke(main, ["stats", str(config), "--target", "vulkan", "--device", "rdna2"])
    assert result.exit_code == 0, result.output
    labels = [line.split(": ", 1)[1] for line in result.stdout.splitlines() if line.startswith("  op ")]
    assert [label.split("/")[0] for label in labels] == [
        "Input[1x14x14x88]xFilter[3x3x88 depthwise]",
        "Input[1x14x14x88]xFilter[1x1x22x32 groups 4]",
        "Input[1x14x14x32]xFilter[1x1x32x16]"]
