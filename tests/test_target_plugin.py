"""A new target is a folder: tests/plugin_target defines one (C with a struct-of-pointers
calling convention, an option block of its own, its own templates) and these tests register
it, without any change to kernelgen's core, and use it the way the bundled targets are used."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from builders import toolchain
from conftest import requires_tool
from plugin_target import CArgs

from kernelgen import api
from kernelgen.cli import main
from kernelgen.errors import ConfigError
from kernelgen.targets import TARGETS

CONFIG = """\
name: plugged
input: {shape: [1, 6, 10, 9], layout: nchw-4c}
ops:
  - conv2d: {out_channels: 5, kernel: 3, pad: 1}
  - conv2d: {out_channels: 3, kernel: [1, 3], stride: 2}
schedule: {k_split: 1, h_split: 1, h_block: 2}
targets: [c_args, c]
c_args: {entry: forward}
"""


@pytest.fixture
def registered(monkeypatch):
    """The registry with the plugin added, as a program embedding kernelgen would add it."""
    monkeypatch.setitem(TARGETS, "c_args", CArgs())
    return TARGETS


def test_unregistered_target_is_an_unknown_name(tmp_path):
    path = tmp_path / "plugged.yaml"
    path.write_text(CONFIG)
    with pytest.raises(ConfigError) as error:
        api.load_config(path)
    assert [str(p) for p in error.value.problems] == [f"{path}:8:1: error: c_args: unknown key 'c_args' (did you mean "
                                                      f"'targets'?)"]
    path.write_text(CONFIG.replace("c_args: {entry: forward}\n", ""))
    with pytest.raises(ConfigError) as error:
        api.load_config(path)
    assert str(error.value.problems[0]).startswith(f"{path}:7:") and "targets[0]: unknown target 'c_args'" in \
        str(error.value.problems[0])


def test_registry_passed_as_data_loads_the_target_and_its_options(tmp_path):
    path = tmp_path / "plugged.yaml"
    path.write_text(CONFIG)
    config = api.load_config(path, {**TARGETS, "c_args": CArgs()})
    assert config.targets == ("c_args", "c") and config.options["c_args"].entry == "forward"
    bad = tmp_path / "bad.yaml"
    bad.write_text(CONFIG.replace("entry: forward", "entry: Forward"))
    with pytest.raises(ConfigError) as error:
        api.load_config(bad, {**TARGETS, "c_args": CArgs()})
    assert str(error.value.problems[0]).startswith(f"{bad}:8:") and "c_args.entry" in str(error.value.problems[0])


def test_build_writes_the_plugin_files_beside_the_bundled_ones(registered, tmp_path):
    path = tmp_path / "plugged.yaml"
    path.write_text(CONFIG)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["build", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    source = (out / "plugged" / "c_args" / "plugged_args.c").read_text()
    assert "struct plugged_args {" in source and "void plugged_forward(const struct plugged_args *args)" in source
    assert "static void plugged(const float *restrict input" in source
    assert (out / "plugged" / "c" / "plugged.c").is_file()
    assert "c_args/kernel.c.j2" in source.splitlines()[0]
    targets = CliRunner().invoke(main, ["targets"])
    assert "c_args" in targets.output and "struct of tensor pointers" in targets.output


@requires_tool(*toolchain("c"))
def test_validate_and_bench_run_the_plugin_kernel(registered, tmp_path):
    path = tmp_path / "plugged.yaml"
    path.write_text(CONFIG)
    result = CliRunner().invoke(main, ["validate", str(path), "--target", "c_args"])
    assert result.exit_code == 0, result.output
    assert "plugged" in result.output and " pass " in result.output
    rows = api.bench(api.load_config(path), "c_args", repeat=2)
    assert len(rows) == 1 and rows[0].seconds > 0 and rows[0].flops == api.plan(api.load_config(path)).flops


def test_the_plugin_run_code_stays_small():
    """What the plugin writes to run and time its kernel (everything below its 'run code' comment): the core's
    loops do the rest."""
    source = (Path(__file__).parent / "plugin_target" / "__init__.py").read_text().split("# ---- its run code")[1]
    assert len(source.strip().splitlines()) <= 60
