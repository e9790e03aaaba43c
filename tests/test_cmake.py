"""Issue 34: the CMake package (kernelgen/cmake). examples/cmake configures, builds and runs with Ninja and with
Unix Makefiles; a second build does nothing; touching the config regenerates and recompiles nothing; an edit that
changes the kernel recompiles it; a bad config fails the build with kernelgen's file:line:col: error:; a network
manifest is a config like any other; toolchain files for aarch64 and Hexagon generate and compile; and
find_package's version check follows 0.x semantics.

Every build runs this checkout's kernelgen through a small wrapper (the `kernelgen` on PATH may be another
install's, whose --cmake-dir is not this package: the package's own check would refuse it)."""
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO, require_tools, requires_tool

from kernelgen.cli import main

PACKAGE = REPO / "kernelgen" / "cmake"
ONNX = ("py:onnx", "py:onnxruntime")
GENERATORS = {"Ninja": ("cmake", "ninja", "gcc"), "Unix Makefiles": ("cmake", "make", "gcc")}
HOST_LINE = re.compile(r"^example_conv: 4096 outputs, sum -?\d+\.\d{4}, sum of \|x\| (\d+\.\d{4}), output\[0\] \S+$")
EM_AARCH64, EM_HEXAGON = 183, 164  # ELF e_machine


@pytest.fixture
def kernelgen_bin(tmp_path) -> Path:
    """A folder holding `kernelgen`: this checkout's code on this interpreter."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "kernelgen"
    script.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" '
                      f'-m kernelgen "$@"\n')
    script.chmod(0o755)
    return folder


def _run(*command: str | Path, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in command], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def _configure(source: Path, build: Path, kernelgen_bin: Path, *extra: str,
               generator: str = "Ninja") -> subprocess.CompletedProcess:
    return _run("cmake", "-S", source, "-B", build, "-G", generator, f"-Dkernelgen_DIR={PACKAGE}",
                f"-DKERNELGEN_EXECUTABLE={kernelgen_bin / 'kernelgen'}", *extra)


def _build(build: Path, *extra: str) -> subprocess.CompletedProcess:
    return _run("cmake", "--build", build, "-j", "2", *extra)


def _mtimes(root: Path) -> dict[str, int]:
    """What a build makes: the generated files, stamps, objects, libraries and the program (not the files a
    reconfigure rewrites, which cmake's own dependencies decide)."""
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")
            if p.is_file() and (p.relative_to(root).parts[0] == "kernelgen" or p.suffix in {".stamp", ".o", ".a"}
                                or p.name == "host")}


def _touch(path: Path) -> None:
    time.sleep(0.05)  # newer than every stamp, and not in the future (the next stamp must be newer still)
    os.utime(path)


@pytest.mark.parametrize("generator", list(GENERATORS))
def test_the_example_project_builds_runs_and_rebuilds_only_what_changed(generator, kernelgen_bin, tmp_path):
    require_tools(*GENERATORS[generator])
    examples = tmp_path / "examples"
    examples.mkdir()
    for name in ("conv.yaml", "host.c"):
        shutil.copy2(REPO / "examples" / name, examples / name)
    shutil.copytree(REPO / "examples" / "cmake", examples / "cmake", ignore=shutil.ignore_patterns("build*"))
    build, config = tmp_path / "build", examples / "conv.yaml"

    configured = _configure(examples / "cmake", build, kernelgen_bin, generator=generator)
    assert configured.returncode == 0, configured.stdout + configured.stderr
    first = _build(build)
    assert first.returncode == 0, first.stdout + first.stderr
    line = _run(build / "host").stdout.strip()
    assert HOST_LINE.match(line) and float(HOST_LINE.match(line)[1]) > 0, line
    kernel = build / "kernelgen" / "example_kernels" / "example_conv"
    assert (kernel / "c" / "example_conv.c").is_file() and (kernel / "opencl" / "example_conv.cl").is_file()

    built = _mtimes(build)
    assert len([p for p in built if p.endswith(".o")]) == 2 and any(p.endswith(".stamp") for p in built)
    again = _build(build)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "kernelgen" not in again.stdout and _mtimes(build) == built  # a second build does nothing
    if generator == "Ninja":
        assert "ninja: no work to do." in again.stdout

    _touch(config)
    touched = _build(build)
    assert touched.returncode == 0, touched.stdout + touched.stderr
    assert "kernelgen: generating example_kernels" in touched.stdout  # the depfile's config is newer: regenerate
    after = _mtimes(build)
    assert {p for p in after if after[p] != built[p]} == {p for p in after if p.endswith(".stamp")}, \
        "touching the config rewrote or recompiled more than the stamp"
    assert _mtimes(build) == after and _build(build).returncode == 0 and _mtimes(build) == after

    # an edit that changes the kernel's text but not its header: the kernel is recompiled and the program relinked,
    # the host's object (which includes the header) is not rebuilt
    config.write_text(config.read_text().replace("kernel: 1,", "kernel: 1, activation: relu,"))
    _touch(config)
    edited = _build(build)
    assert edited.returncode == 0, edited.stdout + edited.stderr
    changed = {p for p, t in _mtimes(build).items() if t != after.get(p)}
    assert {"kernelgen/example_kernels/example_conv/c/example_conv.c", "host"} <= changed, changed
    assert [p for p in changed if p.endswith(".o")] == [p for p in after if p.endswith("example_conv.c.o")], changed
    assert not any(p.endswith(".h") for p in changed), changed
    assert HOST_LINE.match(_run(build / "host").stdout.strip())

    config.write_text(config.read_text().replace("kernel: 3, pad: 1", "kernel: 3, pad: -1"))
    _touch(config)
    broken = _build(build)
    assert broken.returncode != 0
    line_number = next(i for i, text in enumerate(config.read_text().splitlines(), 1) if "pad: -1" in text)
    located = re.search(rf"{re.escape(str(config))}:{line_number}:\d+: error: ", broken.stdout + broken.stderr)
    assert located, broken.stdout + broken.stderr
    config.write_text(config.read_text().replace("pad: -1", "pad: 1"))
    fixed = _build(build)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert HOST_LINE.match(_run(build / "host").stdout.strip())
