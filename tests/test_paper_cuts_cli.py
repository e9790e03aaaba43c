"""Issue 33's paper cuts at the command line: each test fails without its fix."""
from __future__ import annotations

import json
import re

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
    (op,) = report["ops"]
    assert op["label"].endswith("/Tile[2x4x4]/WGSize[16x4x1]"), op["label"]  # was lavapipe's: .../WGSize[8x1x1]
    assert op["spilled_vgprs"] == 0 and op["vgprs"] <= 128  # was 256 VGPRs, 710 spilled
    assert (report["device"], report["profile"], report["config_sets"]) == ("rdna2", "rdna2", [])
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


# ---------------------------------------------------------------- 6. a FAIL says what failed

PADDED_U8 = """name: padded_u8
dtype: uint8
input: {shape: [1, 6, 6, 32], layout: nhwc-8h8w32c}
ops: [{conv2d: {out_channels: 40, kernel: 1, filter_layout: oihw-8i32o4i}}]
output: {layout: nhwc-8h8w32c}
quant: {input_scale: 0.05, input_zero_point: 128, weight_dtype: int8, weight_scale: 0.01,
        output_scale: 0.5, output_zero_point: 128}
targets: [hvx]
"""
PADDED_F32 = """name: padded_f32
input: {shape: [1, 6, 6, 8]}
ops: [{conv2d: {out_channels: 6, kernel: 1}}]
output: {layout: {map: "n, h, w, c -> n, h, w, c // 4, c % 4", pad_value: 0}}
targets: [c]
"""


def _compared(text: str, spoil):
    """compare() on the reference's own values, packed as a kernel would store them, after spoil(flat, mask)."""
    import numpy as np

    from kernelgen import api
    from kernelgen.measure.compare import compare, reference_output
    from kernelgen.measure.tensors import poisons, random_inputs

    config = api.parse_config(text, f"{text.split()[1]}.yaml")
    plan = api.plan(config)
    args = random_inputs(config, plan, np.random.default_rng(5))
    layout = plan.tensors[-1].layout
    expected = reference_output(config, args).astype(np.uint8 if config.dtype == "uint8" else np.float32)
    outputs = {}
    for poison in poisons(config.dtype):
        flat = layout.pack(expected, sentinel=poison if config.dtype == "uint8" else None).reshape(-1)
        spoil(flat, layout.padding_mask().reshape(-1))
        outputs[poison] = flat
    return compare(config, plan, "c", 5, args, outputs)


def _shown(result) -> tuple[list[str], dict]:
    from kernelgen.cli.commands import _json_result
    from kernelgen.cli.validate_table import validate_table

    return validate_table([result]), json.loads(json.dumps(_json_result(result)))


def _ratio_column(lines: list[str]) -> str:
    start = lines[0].index("max rel err") + len("max rel err")
    return lines[1][start:lines[0].index("err/bound") + len("err/bound")].strip()


def test_a_uint8_fail_with_error_zero_says_padding_not_inf():
    """Padding bytes written, every value right: max error 0, and the row said `err/bound inf` (JSON null)."""
    def spoil(flat, mask):
        flat[mask] = 7

    result = _compared(PADDED_U8, spoil)
    assert result.status.value == "FAIL" and result.max_abs_error == 0 and result.failure == ("padding",)
    lines, row = _shown(result)
    assert _ratio_column(lines) == "padding" and "inf" not in lines[1]
    assert row["failure"] == ["padding"] and row["bound_ratio"] is None and row["max_abs_error"] == 0
    assert "layout padding bytes written" in row["detail"]


def test_a_float_fail_within_the_bound_says_what_failed():
    """A float FAIL whose err/bound is below 1 (padding not pad_value) or not a number (elements never written):
    the cell names the failure; the errors are those of the elements that exist."""
    def padding(flat, mask):
        flat[mask] = 1.0

    result = _compared(PADDED_F32, padding)
    lines, row = _shown(result)
    assert result.status.value == "FAIL" and result.bound_ratio <= 1 and result.failure == ("padding",)
    assert _ratio_column(lines) == "padding" and row["failure"] == ["padding"]
    assert "do not hold pad_value 0" in row["detail"]

    def one_unwritten(flat, mask):
        flat[(~mask).nonzero()[0][3]] = float("nan")

    result = _compared(PADDED_F32, one_unwritten)
    lines, row = _shown(result)
    assert result.failure == ("unwritten",) and result.max_abs_error < 1e-6  # the written ones are right
    assert _ratio_column(lines) == "unwritten" and "inf" not in lines[1]
    assert row["failure"] == ["unwritten"] and row["max_abs_error"] < 1e-6 and row["bound_ratio"] <= 1
    assert "1 output elements never written" in row["detail"]


def test_a_build_that_fails_is_a_toolchain_failure_in_table_and_json(tmp_path, monkeypatch):
    from kernelgen.errors import ToolchainError
    from kernelgen.targets import TARGETS

    config = tmp_path / "small.yaml"
    config.write_text("name: small\ninput: {shape: [1, 6, 6, 8]}\nops: [{conv2d: {out_channels: 4, kernel: 3}}]\n"
                      "targets: [c]\n")

    def broken(job, workdir, device=None):
        raise ToolchainError("gcc: internal compiler error: Segmentation fault")

    monkeypatch.setattr(TARGETS["c"], "compile", broken)
    table = CliRunner().invoke(main, ["validate", str(config)])
    assert table.exit_code == 1
    lines = table.stdout.splitlines()
    assert _ratio_column(lines) == "toolchain" and lines[2] == "    gcc: internal compiler error: Segmentation fault"
    shown = CliRunner().invoke(main, ["validate", str(config), "--json"])
    (row,) = json.loads(shown.stdout)["results"]
    assert (row["status"], row["failure"], row["bound_ratio"]) == ("FAIL", ["toolchain"], None)


# ---------------------------------------------------------------- 7. progress on a terminal, results as they finish

TWO = ("name: {name}\ninput: {{shape: [1, 6, 6, 8]}}\nops: [{{conv2d: {{out_channels: 4, kernel: 3}}}}]\n"
       "targets: [c]\n")


def _two_configs(tmp_path) -> list[str]:
    paths = []
    for name in ("first", "second"):
        (tmp_path / f"{name}.yaml").write_text(TWO.format(name=name))
        paths.append(str(tmp_path / f"{name}.yaml"))
    return paths


def _slow_validation(monkeypatch, seen: list[str]):
    """validate_job replaced by one that says its phases, takes a little while and notes what stdout held when it
    began (a result streamed is there before the next validation starts)."""
    import sys
    import time

    import kernelgen.cli.commands as commands
    from kernelgen.api import skipped

    def fake(job, target, seed=None, dump=None, phase=None):
        sys.stdout.flush()
        seen.append(sys.stdout.buffer.getvalue().decode())
        for name in ("compiling", "running", "comparing"):
            phase(name)
            time.sleep(0.03)
        return skipped(job.config, target, "not really", seed or 0)

    monkeypatch.setattr(commands, "validate_job", fake)


def test_validate_jsonl_streams_one_object_per_result_as_it_finishes(tmp_path, monkeypatch):
    seen: list[str] = []
    _slow_validation(monkeypatch, seen)
    paths = _two_configs(tmp_path)
    result = CliRunner().invoke(main, ["validate", *paths, "--jsonl"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert list(lines[0]) == ["context"] and lines[0]["context"]["kernelgen_version"]
    assert [(r["config"], r["target"], r["status"]) for r in lines[1:]] == [("first", "c", "skipped"),
                                                                             ("second", "c", "skipped")]
    # the first result was out before the second validation began
    assert json.loads(seen[1].splitlines()[1])["config"] == "first" and len(seen[0].splitlines()) == 1
    whole = json.loads(CliRunner().invoke(main, ["validate", *paths, "--json"]).stdout)
    assert [list(r) for r in whole["results"]] == [list(r) for r in lines[1:]]  # the same objects
    both = CliRunner().invoke(main, ["validate", *paths, "--json", "--jsonl"])
    assert both.exit_code == 2 and "--json and --jsonl: give one" in both.output
    seen.clear()
    table = CliRunner().invoke(main, ["validate", *paths])  # the table's rows stream too
    assert seen[1].splitlines()[1].startswith("first ") and table.stdout.splitlines()[2].startswith("second ")


def test_validate_shows_config_phase_and_time_on_a_terminal_only(tmp_path, monkeypatch):
    import kernelgen.cli.common as common

    _slow_validation(monkeypatch, [])
    paths = _two_configs(tmp_path)
    quiet = CliRunner().invoke(main, ["validate", *paths])  # not a terminal: CI logs stay clean
    assert quiet.exit_code == 0 and quiet.stderr == "" and "\r" not in quiet.stdout
    monkeypatch.setattr(common, "on_terminal", lambda: True)
    shown = CliRunner().invoke(main, ["validate", *paths])
    assert shown.exit_code == 0, shown.output
    for phase in ("compiling", "running", "comparing"):
        assert re.search(rf"\r\x1b\[Kvalidate \[1/2\] first on c: {phase}, \d+ s \(all: \d+ s\)", shown.stderr)
    assert "validate [2/2] second on c: comparing" in shown.stderr and shown.stderr.endswith("\r\x1b[K")
    assert "\r" not in shown.stdout and shown.stdout.splitlines()[1].startswith("first ")


def test_a_status_line_redraws_its_clock_while_one_phase_lasts(monkeypatch):
    import io
    import sys
    import time

    import kernelgen.cli.common as common

    monkeypatch.setattr(common, "on_terminal", lambda: True)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    clock = [100.0]
    with common.StatusLine(interval=0.01, clock=lambda: clock[0]) as status:
        status.start("validate [1/1] big on vulkan")
        status.set_phase("running")
        clock[0] += 372  # lavapipe compiling a shader for minutes: the line keeps counting
        time.sleep(0.1)
    assert "validate [1/1] big on vulkan: running, 6 min 12 s (all: 6 min 12 s)" in sys.stderr.getvalue()


@requires_tool("py:onnx", "py:onnxruntime", "gcc")
def test_validate_network_takes_jsonl_as_its_json(tmp_path):
    import onnx
    import onnx_models

    onnx.save(onnx_models.small_resnet(), str(tmp_path / "sr.onnx"))
    runner = CliRunner()
    assert runner.invoke(main, ["import", str(tmp_path / "sr.onnx"), "-o", str(tmp_path / "sr")]).exit_code == 0
    result = runner.invoke(main, ["validate", str(tmp_path / "sr" / "network.yaml"), "--target", "c", "--jsonl",
                                  "--seed", "3"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["step"] for r in lines[:-1]] == list(range(5)) and lines[-1]["status"] == "pass"
    assert all(r["failure"] == [] for r in lines[:-1])
