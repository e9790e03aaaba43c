"""Every command through click's CliRunner, with every exit status."""
import json
import re

from click.testing import CliRunner
from builders import toolchain
from conftest import requires_tool

from kernelgen import __version__
from kernelgen.cli import main

runner = CliRunner()


def test_version_and_help_show_examples():
    assert runner.invoke(main, ["--version"]).output.strip().endswith(__version__)
    assert "Example" in runner.invoke(main, ["--help"]).output
    for command in ("plan", "build", "check", "validate", "schema", "targets", "init"):
        result = runner.invoke(main, [command, "--help"])
        assert result.exit_code == 0 and "Example" in result.output, command


def test_plan_text_has_seed_000_sections(repo):
    result = runner.invoke(main, ["plan", str(repo / "configs" / "seed000_3x3.yaml")])
    assert result.exit_code == 0
    for heading in ("Shapes and Layouts", "Cache Usage", "Loop Nest"):
        assert heading in result.output
    assert "196608" in result.output and "73728" in result.output
    assert "for (ko_outer: int32, 0, 2)" in result.output


def test_plan_json_and_markdown(repo):
    result = runner.invoke(main, ["plan", str(repo / "configs" / "seed000_baseline.yaml"), "--json"])
    data = json.loads(result.output)
    assert {c["name"]: c["elements"] for c in data["caches"]}["filter"] == 4096
    md = runner.invoke(main, ["plan", str(repo / "configs" / "seed000_baseline.yaml"), "--format", "md"]).output
    assert "| Tensor | Type |" in md and "## Cache Usage" in md


def test_plan_of_missing_file_exits_2():
    result = runner.invoke(main, ["plan", "does/not/exist.yaml"])
    assert result.exit_code == 2 and "cannot read config" in result.output


def test_build_list_outputs_writes_nothing(repo, tmp_path):
    result = runner.invoke(main, ["build", str(repo / "configs" / "seed000_3x3.yaml"), "-o", str(tmp_path / "o"),
                                  "--list-outputs", "--target", "c"])
    assert result.exit_code == 0
    assert result.output.split() == [str(tmp_path / "o" / "seed000_3x3" / f)
                                     for f in ("plan.txt", "c/seed000_3x3.h", "c/seed000_3x3.c")]
    assert not (tmp_path / "o").exists()


@requires_tool("glslangValidator")
def test_build_list_outputs_names_the_spirv_a_build_writes(repo, tmp_path):
    """What a build system declares before building (CMake's byproducts) is every file the build then writes, the
    compiled SPIR-V modules (one per op, pools too) included."""
    configs = [str(repo / "configs" / name) for name in ("seed002_vulkan.yaml", "vulkan_chain_fp16.yaml",
                                                        "mobilenet_v2_block.yaml")]
    listed = []
    for config in configs:
        result = runner.invoke(main, ["build", config, "-o", str(tmp_path), "--target", "vulkan", "--list-outputs"])
        assert result.exit_code == 0, result.output
        listed += result.output.split()
    assert any(name.endswith(".op2.spv") for name in listed)
    built = runner.invoke(main, ["build", *configs, "-o", str(tmp_path), "--target", "vulkan"])
    assert built.exit_code == 0, built.output
    assert sorted(str(p) for p in tmp_path.rglob("*") if p.is_file()) == sorted(listed)


def test_build_list_inputs_names_the_configs_and_checks_them(repo, tmp_path):
    config = str(repo / "configs" / "seed000_3x3.yaml")
    result = runner.invoke(main, ["build", config, "-o", str(tmp_path / "o"), "--list-inputs"])
    assert result.exit_code == 0 and result.output.split() == [config] and not (tmp_path / "o").exists()
    bad = repo / "tests" / "data" / "bad" / "zero_stride.yaml"
    failed = runner.invoke(main, ["build", str(bad), "--list-inputs"])
    assert failed.exit_code == 2 and f"{bad}:" in failed.output
    both = runner.invoke(main, ["build", config, "--list-inputs", "--list-outputs"])
    assert both.exit_code == 2 and "give one" in both.output


def test_cmake_dir_names_the_packages_cmake_folder(repo):
    result = runner.invoke(main, ["--cmake-dir"])
    assert result.exit_code == 0
    folder = result.output.strip()
    assert folder == str((repo / "kernelgen" / "cmake").resolve())
    assert (repo / "kernelgen" / "cmake" / "kernelgenConfig.cmake").is_file()
    assert (repo / "kernelgen" / "cmake" / "kernelgenConfigVersion.cmake").is_file()


def test_build_with_an_invalid_config_writes_nothing(repo, tmp_path):
    bad = repo / "tests" / "data" / "bad" / "zero_stride.yaml"
    result = runner.invoke(main, ["build", str(repo / "configs" / "seed000_3x3.yaml"), str(bad), "-o", str(tmp_path)])
    assert result.exit_code == 2
    assert list(tmp_path.iterdir()) == []


def test_build_rejects_an_unknown_target(repo, tmp_path):
    result = runner.invoke(main, ["build", str(repo / "configs" / "seed000_3x3.yaml"), "--target", "cuda",
                                  "-o", str(tmp_path)])
    assert result.exit_code == 2 and "unknown target 'cuda'" in result.output


def test_duplicate_config_names_are_rejected(repo, tmp_path):
    copy = tmp_path / "copy.yaml"
    copy.write_text((repo / "configs" / "seed000_3x3.yaml").read_text())
    result = runner.invoke(main, ["build", str(repo / "configs" / "seed000_3x3.yaml"), str(copy), "-o", str(tmp_path)])
    assert result.exit_code == 2 and "names must be unique" in result.output


def test_check_json_and_bad_config(repo, tmp_path):
    result = runner.invoke(main, ["check", str(repo / "configs" / "seed000_split.yaml"), "--golden", str(tmp_path),
                                  "--json"])
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert not data["clean"] and all(entry["missing"] for entry in data["stale"])
    bad = repo / "tests" / "data" / "bad" / "bad_name.yaml"
    assert runner.invoke(main, ["check", str(bad), "--golden", str(tmp_path)]).exit_code == 2


@requires_tool(*toolchain("c"))
def test_validate_prints_a_table_and_exits_0(tmp_path):
    config = tmp_path / "small.yaml"
    config.write_text("name: small\ninput: {shape: [1, 6, 6, 8]}\nops: [{conv2d: {out_channels: 4, kernel: 3}}]\n")
    result = runner.invoke(main, ["validate", str(config), "--target", "c", "--seed", "7"])
    assert result.exit_code == 0, result.output
    row = result.output.splitlines()[1].split()
    assert row[:3] == ["small", "c", "pass"] and row[-1] == "7"
    data = json.loads(runner.invoke(main, ["validate", str(config), "--json"]).output)
    assert data["results"][0]["status"] == "pass"


@requires_tool(*toolchain("c"))
def test_validate_exits_1_when_the_toolchain_fails(tmp_path, monkeypatch):
    from kernelgen.targets.c import toolchain as gcc

    monkeypatch.setattr(gcc, "compiler", lambda: "false")  # a "compiler" that always fails
    config = tmp_path / "small.yaml"
    config.write_text("name: small\ninput: {shape: [1, 6, 6, 8]}\nops: [{conv2d: {out_channels: 4, kernel: 3}}]\n")
    result = runner.invoke(main, ["validate", str(config)])
    assert result.exit_code == 1 and "FAIL" in result.output and "gcc failed" in result.output


def test_schema_is_json_schema():
    data = json.loads(runner.invoke(main, ["schema"]).output)
    assert data["$schema"].startswith("https://json-schema.org/")
    assert {"name", "input", "ops"} <= set(data["required"])


def test_init_writes_a_config_that_plans(tmp_path):
    path = tmp_path / "mine.yaml"
    assert runner.invoke(main, ["init", "mine", "-o", str(path)]).exit_code == 0
    planned = runner.invoke(main, ["plan", str(path)])
    assert planned.exit_code == 0
    # the starter says what a config without `schedule:` gets on c, and the report says where it came from
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("schedule:"))
    assert f"\nschedule: auto (mine.yaml:{line}): " in planned.output
    assert runner.invoke(main, ["init", "mine", "-o", str(path)]).exit_code == 1  # never overwrites
    assert runner.invoke(main, ["init", "Bad-Name", "-o", str(tmp_path / "x.yaml")]).exit_code == 2


def test_targets_lists_toolchains():
    result = runner.invoke(main, ["targets"])
    assert result.exit_code == 0 and result.output.startswith("c ") and "gcc" in result.output


def _cmake_lines(output: str) -> list[str]:
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("cmake "))
    return lines[start:start + 2]


@requires_tool("cmake")
def test_targets_lists_cmake_which_the_cmake_package_needs():
    import shutil
    import subprocess

    result = runner.invoke(main, ["targets"])
    assert result.exit_code == 0
    heading, tool = _cmake_lines(result.output)
    assert "kernelgen --cmake-dir" in heading
    version = subprocess.run([shutil.which("cmake"), "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    assert tool.split() == ["cmake", "found", *version.split()]


def test_targets_says_cmake_is_missing_or_too_old_and_how_to_install_it(tmp_path, monkeypatch):
    """The CMake package (kernelgenConfig.cmake) refuses a CMake older than 3.20: such a cmake is not found."""
    from kernelgen import toolstatus

    old = tmp_path / "cmake"
    old.write_text("#!/bin/sh\necho 'cmake version 3.18.4'\n")
    old.chmod(0o755)
    monkeypatch.setattr(toolstatus.shutil, "which", lambda name: str(old) if name == "cmake" else None)
    tool = _cmake_lines(runner.invoke(main, ["targets"]).output)[1]
    assert tool.split(None, 2) == ["cmake", "missing", "(cmake version 3.18.4); the CMake package needs cmake 3.20 "
                                   "or newer: apt-get install cmake (or pip install cmake)"]
    monkeypatch.setattr(toolstatus.shutil, "which", lambda name: None)
    tool = _cmake_lines(runner.invoke(main, ["targets"]).output)[1]
    assert tool.split(None, 2) == ["cmake", "missing;", "apt-get install cmake"]


def test_python_dash_m_works(repo):
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "kernelgen", "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and __version__ in result.stdout


def test_committed_schema_is_current(repo):
    """schema/kernelgen.schema.json (referenced by configs/*.yaml) is regenerated by `kernelgen schema`."""
    committed = json.loads((repo / "schema" / "kernelgen.schema.json").read_text())
    assert committed == json.loads(runner.invoke(main, ["schema"]).output)
    for config in (repo / "configs").glob("*.yaml"):
        assert config.read_text().startswith("# yaml-language-server: $schema=../schema/kernelgen.schema.json")


@requires_tool(*toolchain("c"))
def test_bench_prints_gflops_json_and_a_roofline(tmp_path):
    config = tmp_path / "small.yaml"
    config.write_text("name: small\ninput: {shape: [1, 10, 10, 16]}\nops: [{conv2d: {out_channels: 16, kernel: 3}}]\n")
    result = runner.invoke(main, ["bench", str(config), "--repeat", "1"])
    assert result.exit_code == 0, result.output
    assert "GFLOP/s" in result.output and f"FLOPs={2 * 8 * 8 * 16 * 16 * 9}" in result.output
    rows = json.loads(runner.invoke(main, ["bench", str(config), "--repeat", "1", "--json"]).output)["results"]
    assert rows[0]["target"] == "c" and rows[0]["gflops"] > 0
    # GB/s counts each tensor once: input 10x10x16, filter 16x16x3x3, output 8x8x16 floats
    assert rows[0]["bytes"] == 4 * (10 * 10 * 16 + 16 * 16 * 9 + 8 * 8 * 16)
    assert abs(rows[0]["gbs"] - rows[0]["bytes"] / rows[0]["seconds"] / 1e9) < 1e-9 * rows[0]["gbs"]
    assert "GB/s" in result.output
    png = tmp_path / "roofline.png"
    result = runner.invoke(main, ["bench", str(config), "--repeat", "1", "--plot", str(png)])
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_validate_skip_missing_reports_skipped(tmp_path, monkeypatch):
    from kernelgen.targets import TARGETS
    from kernelgen.toolstatus import ToolStatus

    monkeypatch.setattr(TARGETS["c"], "toolchain", lambda: (ToolStatus("gcc", False, "", "apt-get install gcc"),))
    config = tmp_path / "small.yaml"
    config.write_text("name: small\ninput: {shape: [1, 6, 6, 8]}\nops: [{conv2d: {out_channels: 4, kernel: 3}}]\n")
    other = tmp_path / "other.yaml"
    other.write_text(config.read_text().replace("small", "other"))
    result = runner.invoke(main, ["validate", str(config), str(other), "--skip-missing"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [line.split()[:3] for line in lines[1:3]] == [["small", "c", "skipped"], ["other", "c", "skipped"]]
    # one line per skipped target says what is missing and what to install, not one per row
    assert lines[3:] == ["c: skipped for 2 config(s), missing gcc; install: apt-get install gcc",
                         "2 rows: 0 passed, 0 failed, 2 skipped"]  # issue 49: the table's last line counts its rows


def test_the_validate_tables_summary_counts_every_status_it_shows():
    import math
    from dataclasses import replace

    from kernelgen.cli.validate_table import summary_line, validate_table
    from kernelgen.measure.records import Status, ValidationResult

    row = ValidationResult(config="k", target="c", status=Status.PASS, max_abs_error=0.0, max_rel_error=0.0,
                           bound_ratio=0.1, seed=1)
    statuses = [Status.PASS, Status.PASS, Status.FAIL, Status.SKIPPED, Status.COMPILED, Status.PASS]
    results = [replace(row, config=f"k{i}", status=s, bound_ratio=math.nan) for i, s in enumerate(statuses)]
    assert summary_line(results) == "6 rows: 3 passed, 1 failed, 1 skipped, 1 compiled"
    assert summary_line(results[:2]) == "2 rows: 2 passed, 0 failed, 0 skipped"  # the three always, others if any
    assert summary_line([*results[:2], replace(row, status=Status.NOT_RUN)]).endswith(", 0 skipped, 1 not run")
    assert validate_table(results)[-1] == summary_line(results)
    assert validate_table(results[:1])[-1].startswith("k0 ")  # one row: its own line says it all


@requires_tool(*toolchain("c"))
def test_json_answers_carry_the_context_of_the_run(tmp_path, monkeypatch):
    """validate, bench and stats print {"context": ..., "results": [...]}: results from two machines differ in it."""
    import platform

    from kernelgen.api import skipped
    from kernelgen.targets import TARGETS
    from kernelgen.toolstatus import ToolStatus

    config = tmp_path / "small.yaml"
    config.write_text("name: small\ninput: {shape: [1, 6, 6, 8]}\nops: [{conv2d: {out_channels: 4, kernel: 3}}]\n"
                      "targets: [c, opencl]\n")
    monkeypatch.setattr(TARGETS["opencl"], "toolchain", lambda: (
        ToolStatus("pyopencl", True, "2024.1", ""), ToolStatus("opencl-device", True, "Some GPU (OpenCL 3.0)", "")))
    import kernelgen.cli.commands as commands

    real = commands.validate_job
    monkeypatch.setattr(commands, "validate_job", lambda job, target, seed=None, **kwargs: skipped(
        job.config, "opencl", "not really", seed or 0) if target == "opencl" else real(job, target, seed, **kwargs))
    data = json.loads(runner.invoke(main, ["validate", str(config), "--json"]).output)
    context = data["context"]
    assert context["kernelgen_version"] == __version__ and context["python"] == platform.python_version()
    assert context["host"]["num_cpus"] >= 1 and context["host"]["cpu"]
    assert context["toolchains"]["c"]["gcc"].startswith("gcc") and context["toolchains"]["opencl"] == {"pyopencl": "2024.1"}
    assert context["devices"] == {"opencl": "Some GPU (OpenCL 3.0)"}
    assert [(r["config"], r["target"]) for r in data["results"]] == [("small", "c"), ("small", "opencl")]
    bench = json.loads(runner.invoke(main, ["bench", str(config), "--target", "c", "--repeat", "1", "--json"]).output)
    assert set(bench) == {"context", "results"} and list(bench["context"]["toolchains"]) == ["c"]


def test_validate_and_bench_exit_2_on_a_bad_config(repo):
    bad = str(repo / "tests" / "data" / "bad" / "zero_stride.yaml")
    for command in ("validate", "bench", "build"):
        result = runner.invoke(main, [command, bad])
        assert result.exit_code == 2 and "ops[1].conv2d.stride" in result.output, command


def test_json_output_has_no_nan(tmp_path, monkeypatch):
    """A skipped row has no errors to report: JSON gets null, never the invalid token NaN."""
    from kernelgen.targets import TARGETS
    from kernelgen.toolstatus import ToolStatus

    monkeypatch.setattr(TARGETS["c"], "toolchain", lambda: (ToolStatus("gcc", False, "", "apt-get install gcc"),))
    config = tmp_path / "small.yaml"
    config.write_text("name: small\ninput: {shape: [1, 6, 6, 8]}\nops: [{conv2d: {out_channels: 4, kernel: 3}}]\n")
    result = runner.invoke(main, ["validate", str(config), "--skip-missing", "--json"])
    assert "NaN" not in result.output
    assert json.loads(result.output)["results"][0]["max_abs_error"] is None


def test_validate_reports_a_plan_time_config_error_with_exit_2(tmp_path):
    """A config the planner rejects (here: a requantization multiplier of 5000) is the config's
    fault: exit 2 at its key, as plan and build say, not a FAIL row with exit 1."""
    config = tmp_path / "q.yaml"
    config.write_text("name: q\ndtype: uint8\ninput: {shape: [1, 8, 8, 32], layout: nhwc-8h8w32c}\nops:\n"
                      "  - conv2d: {out_channels: 32, filter_layout: oihw-8i32o4i, output_layout: nhwc-8h8w32c}\n"
                      "output: {layout: nhwc-8h8w32c}\nquant: {output_scale: 0.0000001}\ntargets: [hvx]\n")
    for command in ("plan", "build", "validate"):  # the planner computes every op's multipliers (issue 32)
        result = runner.invoke(main, [command, str(config), *(["-o", str(tmp_path / "out")] if command == "build" else [])])
        assert result.exit_code == 2, (command, result.output)
        assert f"{config}:7:23: error: quant.output_scale: the requantization multiplier" in result.output
    assert not (tmp_path / "out").exists()


def test_build_into_a_folder_under_a_file_is_a_usage_error(repo, tmp_path):
    (tmp_path / "a_file").write_text("")
    result = runner.invoke(main, ["build", str(repo / "configs" / "seed000_3x3.yaml"), "-o", str(tmp_path / "a_file" / "out")])
    assert result.exit_code == 2 and "cannot create folder" in result.output and "Not a directory" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_config_file_name_that_is_not_utf8_builds(repo, tmp_path):
    import os

    name = os.fsdecode(b"caf\xe9.yaml")  # surrogate-escaped, as Python hands such a name over
    (tmp_path / name).write_bytes((repo / "configs" / "seed000_3x3.yaml").read_bytes())
    result = runner.invoke(main, ["build", str(tmp_path / name), "-o", str(tmp_path / "out"),
                                  "--depfile", str(tmp_path / "out" / "kernels.d")])
    assert result.exit_code == 0, result.output
    banner = (tmp_path / "out" / "seed000_3x3" / "c" / "seed000_3x3.c").read_text().splitlines()[0]
    assert "from caf\\xe9.yaml" in banner  # printable in the source
    assert b"caf\xe9.yaml" in (tmp_path / "out" / "kernels.d").read_bytes()  # make needs the real name


def test_every_target_builds_groups_and_epilogues(tmp_path):
    """Issues 19 and 20: every target fuses groups, bias, residual and activation, the hvx uint8 kernels too."""
    config = tmp_path / "dw.yaml"
    config.write_text("name: dw\ninput: {shape: [1, 8, 8, 4]}\nops:\n"
                      "  - conv2d: {out_channels: 4, kernel: 3, pad: 1, groups: 4, bias: true, activation: relu}\n"
                      "  - conv2d: {out_channels: 4, kernel: 1, residual: 1}\n")
    for target in ("c", "hvx", "opencl", "vulkan"):
        result = runner.invoke(main, ["build", str(config), "--target", target, "-o", str(tmp_path / "out")])
        assert result.exit_code == 0, result.output
    config.write_text(config.read_text().replace("name: dw", "name: dw\ndtype: uint8\ntargets: [hvx]").replace(
        "[1, 8, 8, 4]}", "[1, 8, 8, 4], layout: nhwc-8h8w32c}\noutput: {layout: nhwc-8h8w32c}").replace(
        "1}\n", "1, filter_layout: oihw-8i32o4i}\n").replace("relu}", "relu, filter_layout: oihw-8i32o4i}"))
    result = runner.invoke(main, ["build", str(config), "--target", "hvx", "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output + config.read_text()


@requires_tool(*toolchain("c"))
def test_bench_reports_min_median_max_in_json_and_csv(repo):
    import csv
    import io

    from kernelgen.measure.context import host_line

    config = str(repo / "configs" / "seed000_baseline.yaml")
    result = CliRunner().invoke(main, ["bench", config, "--target", "c", "--repeat", "3", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    # issue 50: the kernel warm (what a dense conv is judged by, first) and cold, each against the FMA probe
    warm, cold = report["results"]
    assert (warm["when"], cold["when"]) == ("warm", "cold")
    for row in (warm, cold):
        assert 0 < row["seconds_min"] <= row["seconds_median"] <= row["seconds_max"]
        assert row["seconds_median"] == row["seconds"]
        assert row["peak_gflops"] > 0 and row["ratio"] > 0 and row["label"].endswith(f" {row['when']}")
        assert f"{row['when']}: " in row["measured"] and "CPU time of the calling thread" in row["measured"]
        # the peak's vectors: the widest the kernel's flags give it (issue 48)
        assert re.search(r"FMA peak: 8 chains of (16-float \(AVX-512F zmm\)|8-float) vectors", row["measured"])
    assert set(report["context"]["host"]["cpu_flags"]) <= {"avx2", "avx512f", "fma", "asimd", "asimdhp", "sve"}
    result = CliRunner().invoke(main, ["bench", config, "--target", "c", "--repeat", "3", "--csv"])
    assert result.exit_code == 0, result.output
    records = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["when"] for r in records] == ["warm", "cold"]
    assert all(r["config"] == "seed000_baseline" and float(r["seconds_min"]) <= float(r["seconds_max"])
               for r in records)
    assert result.stderr.startswith(host_line(["c"]))
    text = CliRunner().invoke(main, ["bench", config, "--target", "c", "--repeat", "1"]).stdout.splitlines()
    assert text[0] == host_line(["c"]) and text[0].startswith("host: ")
    assert text[-2].startswith("warm: run again at once") and text[-1].startswith("cold: right after the triad")


def test_a_target_typo_is_a_usage_error_naming_the_known_targets(repo):
    result = CliRunner().invoke(main, ["build", str(repo / "configs" / "seed000_3x3.yaml"), "--target", "vulcan"])
    assert result.exit_code == 2
    assert "unknown target 'vulcan' (did you mean 'vulkan'?); known targets: c, hvx, opencl, vulkan" in result.output


def test_targets_blames_a_missing_python_package_not_the_drivers(monkeypatch):
    """Installed from the wheel without extras: the drivers are there, pyopencl and vulkan are not."""
    import importlib.metadata

    from kernelgen.errors import ToolchainError
    from kernelgen.targets.opencl import toolchain as opencl_tools

    real_version = importlib.metadata.version

    def version(name):
        if name == "vulkan":
            raise importlib.metadata.PackageNotFoundError(name)
        return real_version(name)

    def no_pyopencl():
        raise ToolchainError("python package 'pyopencl' is missing")

    monkeypatch.setattr(importlib.metadata, "version", version)
    monkeypatch.setattr(opencl_tools, "_import_cl", no_pyopencl)
    result = CliRunner().invoke(main, ["targets"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    device = next(line for line in lines if "opencl-device" in line)
    assert "not checked: the Python package 'pyopencl' is missing" in device and "kernelgen[opencl]" in device
    device = next(line for line in lines if "vulkan-device" in line)
    assert "not checked: the Python package 'vulkan' is missing" in device and "kernelgen[vulkan]" in device
    assert "install: " not in result.output and "apt-get" not in device


def test_the_validate_table_keeps_its_columns_and_shows_no_nan(repo, tmp_path):
    """A long config name widens the config column; a row with no measurement shows '-', never 'nan'."""
    long_name = "a_config_name_much_longer_than_the_default_column"
    config = tmp_path / "long.yaml"
    config.write_text(f"name: {long_name}\ninput: {{shape: [1, 4, 4, 4]}}\nops:\n  - conv2d: {{out_channels: 4}}\n"
                      "targets: [c]\n")
    result = CliRunner().invoke(main, ["validate", str(config), "--skip-missing"])
    header, row = result.output.splitlines()[:2]
    assert header.index("target") == row.index(" c ") + 1 == len(long_name) + 2
    from kernelgen.api import load_config, skipped
    import kernelgen.cli.commands as cli

    skipped_row = skipped(load_config(config), "c", "missing gcc")
    original = cli.validate_job
    cli.validate_job = lambda *a, **k: skipped_row
    try:
        result = CliRunner().invoke(main, ["validate", str(config)])
    finally:
        cli.validate_job = original
    assert "nan" not in result.output and " - " in result.output
