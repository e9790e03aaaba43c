"""Writes are atomic and lazy; builds are deterministic; depfiles name what shaped an output."""
import os
import subprocess
import sys
import time

from click.testing import CliRunner

from kernelgen.cli import main
from kernelgen.files import write_if_changed


def test_write_if_changed_keeps_mtime(tmp_path):
    path = tmp_path / "a" / "b.txt"
    assert write_if_changed(path, "hello\n")
    before = path.stat().st_mtime_ns
    time.sleep(0.01)
    assert not write_if_changed(path, "hello\n")
    assert path.stat().st_mtime_ns == before
    assert write_if_changed(path, "changed\n")
    assert path.read_text() == "changed\n"
    assert [p.name for p in path.parent.iterdir()] == ["b.txt"]  # no temp files left behind


def test_building_twice_gives_identical_bytes_and_keeps_mtimes(repo, tmp_path):
    # mobilenet_v2_block has all four targets (SPIR-V too): every kind of file a build writes
    configs = [str(repo / "configs" / "mobilenet_v2_block.yaml"), str(repo / "configs" / "seed000_3x3.yaml")]
    assert CliRunner().invoke(main, ["build", *configs, "-o", str(tmp_path)]).exit_code == 0
    first = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.rglob("*") if p.is_file()}
    time.sleep(0.01)
    result = CliRunner().invoke(main, ["build", *configs, "-o", str(tmp_path)])
    assert "0 written" in result.output
    second = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.rglob("*") if p.is_file()}
    assert first == second


def test_depfile_lists_config_templates_and_modules(repo, tmp_path):
    config = repo / "configs" / "seed000_split.yaml"
    dep = tmp_path / "out.d"
    assert CliRunner().invoke(main, ["build", str(config), "-o", str(tmp_path / "o"), "--depfile", str(dep)]).exit_code == 0
    text = dep.read_text()
    c_rule = text.split(f"{tmp_path / 'o' / 'seed000_split' / 'c' / 'seed000_split.c'}:")[1].split("\n\n")[0]
    assert str(config) in c_rule and "kernel.c.j2" in c_rule and "planner/__init__.py" in c_rule
    plan_rule = text.split(f"{tmp_path / 'o' / 'seed000_split' / 'plan.txt'}:")[1].split("\n\n")[0]
    assert "kernel.c.j2" not in plan_rule.split("\n\n")[0].split("kernelgen/")[0]


def test_parallel_builds_into_one_folder_match_a_serial_build(repo, tmp_path):
    """8 configs, 4 processes at once (twice this host's cores), one out/: every file complete and equal to a
    serial build."""
    configs = []
    for i in range(8):
        path = tmp_path / f"cfg{i}.yaml"
        path.write_text(f"name: cfg{i}\ninput: {{shape: [1, {8 + i}, 12, 16], layout: nhwc-8h8w32c}}\n"
                        f"ops: [{{conv2d: {{out_channels: {4 + i}, kernel: 3, pad: 1}}}}]\n")
        configs.append(str(path))
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    assert CliRunner().invoke(main, ["build", *configs, "-o", str(serial)]).exit_code == 0
    # Each process builds every config, so all 4 race on every file.
    procs = [subprocess.Popen([sys.executable, "-m", "kernelgen", "build", *configs, "-o", str(parallel)],
                              stderr=subprocess.PIPE) for _ in range(4)]
    assert all(p.wait() == 0 for p in procs)
    want = {p.relative_to(serial): p.read_bytes() for p in serial.rglob("*") if p.is_file()}
    got = {p.relative_to(parallel): p.read_bytes() for p in parallel.rglob("*") if p.is_file()}
    assert got == want and len(want) == 8 * 3
    assert not [p for p in parallel.rglob(".*.tmp")]
    os.sync()
