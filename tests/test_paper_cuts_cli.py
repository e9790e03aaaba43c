"""Issue 33's paper cuts at the command line: each test fails without its fix."""
from __future__ import annotations

import json

from click.testing import CliRunner
from conftest import requires_tool

from kernelgen.cli import main

VULKAN = ("glslangValidator", "py:vulkan")
PLAIN_1X1 = ("name: plain_1x1\ninput: {shape: [1, 64, 64, 128]}\nops: [{conv2d: {out_channels: 128, kernel: 1}}]\n"
             "targets: [vulkan]\n")


# ---------------------------------------------------------------- 1. --device sets the profile, stats included

@requires_tool(*VULKAN)
def test_stats_device_compiles_the_tiles_build_device_writes(tmp_path):
    """`stats --device rdna2` compiled the lavapipe profile's tiles on rdna2 (256 VGPRs, 710 spilled for this
    plain 1x1 conv) while `build --device rdna2` wrote the rdna2 profile's: now both are the rdna2 profile's,
    and stats says so."""
    config = tmp_path / "plain.yaml"
    config.write_text(PLAIN_1X1)
    runner = CliRunner()
    built = runner.invoke(main, ["build", str(config), "--device", "rdna2", "-o", str(tmp_path / "out")])
    assert built.exit_code == 0, built.output
    dispatch = (tmp_path / "out" / "plain_1x1" / "vulkan" / "plain_1x1.comp").read_text()
    assert "WGSize[16x4x1]" in dispatch  # the rdna2 profile's workgroup
    shown = runner.invoke(main, ["stats", str(config), "--target", "vulkan", "--device", "rdna2", "--json"])
    assert shown.exit_code == 0, shown.output
    (report,) = json.loads(shown.stdout)["results"]
    assert (report["device"], report["profile"], report["config_sets"]) == ("rdna2", "rdna2", [])
    (op,) = report["ops"]
    assert op["label"].endswith("/Tile[2x4x4]/WGSize[16x4x1]"), op["label"]
    assert op["spilled_vgprs"] == 0 and op["vgprs"] <= 128
    text = runner.invoke(main, ["stats", str(config), "--target", "vulkan", "--device", "rdna2"])
    assert text.exit_code == 0, text.output
    assert text.stdout.startswith("plain_1x1: vulkan kernels with the rdna2 profile's default tiles, compiled for "
                                  "rdna2 by Mesa RADV/ACO"), text.stdout
    assert "/Tile[2x4x4]/WGSize[16x4x1]" in text.stdout and "spills" not in text.stderr
    # the config's own profile when --device is left out: rdna2 named in the config judges the same kernels
    config.write_text(PLAIN_1X1.replace("targets:", "vulkan: {device: rdna2}\ntargets:"))
    again = runner.invoke(main, ["stats", str(config), "--target", "vulkan", "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["results"][0]["ops"] == report["ops"]


def test_stats_without_a_compiler_for_the_profile_says_which_device_has_one(tmp_path):
    config = tmp_path / "plain.yaml"
    config.write_text(PLAIN_1X1)  # lavapipe: no compiler statistics for it
    result = CliRunner().invoke(main, ["stats", str(config), "--target", "vulkan"])
    assert result.exit_code == 2
    assert "the config's vulkan.device is 'lavapipe' (--device rdna2 compiles the kernels with that profile's " \
           "tiles)" in result.output


# ---------------------------------------------------------------- 2. plan takes many configs

def test_plan_takes_many_configs_one_report_after_another(repo):
    """`kernelgen plan a.yaml b.yaml` was exit 2 (Got unexpected extra arguments)."""
    paths = [str(repo / "configs" / name) for name in ("seed000_3x3.yaml", "seed000_split.yaml")]
    runner = CliRunner()
    text = runner.invoke(main, ["plan", *paths])
    assert text.exit_code == 0, text.output
    headers = [line for line in text.stdout.splitlines() if line.startswith("==> ")]
    assert headers == [f"==> {p} <==" for p in paths]
    first, second = text.stdout.split(f"==> {paths[1]} <==")
    assert "kernelgen plan: seed000_3x3 " in first and "kernelgen plan: seed000_split " in second
    assert first.endswith("\n\n")  # a blank line before the next report's header
    reports = json.loads(runner.invoke(main, ["plan", *paths, "--json"]).stdout)
    assert [r["name"] for r in reports] == ["seed000_3x3", "seed000_split"]
    one = json.loads(runner.invoke(main, ["plan", paths[0], "--json"]).stdout)
    assert one == reports[0]  # one config: one object, as before
    md = runner.invoke(main, ["plan", *paths, "--format", "md"]).stdout
    assert md.count("# kernelgen plan: ") == 2 and "\n---\n\n# kernelgen plan: `seed000_split`" in md
    bad = runner.invoke(main, ["plan", paths[0], "does/not/exist.yaml"])
    assert bad.exit_code == 2 and "does/not/exist.yaml" in bad.output and not bad.stdout.startswith("==>")


@requires_tool("py:onnx", "py:onnxruntime")
def test_plan_of_an_imported_folder_and_of_its_network_manifest(tmp_path):
    import onnx
    import onnx_models

    onnx.save(onnx_models.small_resnet(), str(tmp_path / "sr.onnx"))
    runner = CliRunner()
    assert runner.invoke(main, ["import", str(tmp_path / "sr.onnx"), "-o", str(tmp_path / "sr")]).exit_code == 0
    manifest = str(tmp_path / "sr" / "network.yaml")
    configs = sorted(str(p) for p in (tmp_path / "sr").glob("*.yaml") if p.name != "network.yaml")
    folder = runner.invoke(main, ["plan", *configs, manifest])  # DIR/*.yaml after an import
    assert folder.exit_code == 0, folder.output
    assert [line for line in folder.stdout.splitlines() if line.startswith("==> ")] == [f"==> {p} <==" for p in configs]
    assert "network.yaml: a network manifest, left out among configs" in folder.stderr
    network = runner.invoke(main, ["plan", manifest])
    assert network.exit_code == 0 and network.stdout.startswith("network sr (") and "arena: " in network.stdout
    assert json.loads(runner.invoke(main, ["plan", manifest, "--json"]).stdout)["network"] == "sr"
    both = json.loads(runner.invoke(main, ["plan", manifest, manifest, "--json"]).stdout)
    assert [n["network"] for n in both] == ["sr", "sr"]
