"""Issue 22: every command in the README runs as written. The Commands section's shell block and the Python API
example run from a scratch copy of the repository's configs/, schema/ and out/ (the README's commands write
into out/ and configs/), with the model.onnx they mention built here."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from builders import toolchain
from conftest import REPO, requires_tool

README = (REPO / "README.md").read_text()


def _block(heading: str, language: str) -> str:
    """The first fenced block of `language` after the heading."""
    section = README[README.index(f"\n## {heading}\n"):]
    match = re.search(rf"```{language}\n(.*?)```", section, re.DOTALL)
    assert match, f"no {language} block under {heading}"
    return match.group(1)


def _commands() -> list[str]:
    """One command per line; a trailing `# comment` (two spaces before the hash) is not part of it."""
    return [re.split(r"\s{2,}#", line)[0].strip() for line in _block("Commands", "sh").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("readme")
    for folder in ("configs", "schema", "out"):
        shutil.copytree(REPO / folder, root / folder)
    sys.path.insert(0, str(REPO / "tests"))
    import onnx

    import onnx_models

    onnx.save(onnx_models.resnet_basic_block(c=8, size=7), str(root / "model.onnx"))
    import numpy as np

    rng = np.random.default_rng(0)  # the tensors `kernelgen run` names (seed000_baseline's shapes)
    for name, shape in (("x", (1, 64, 64, 128)), ("w1", (128, 128, 1, 1)), ("w2", (128, 128, 1, 1))):
        np.save(root / f"{name}.npy", rng.uniform(-0.1, 0.1, shape).astype(np.float32))
    return root


def _run(command: list[str] | str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(command, shell=isinstance(command, str), cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)


def test_the_commands_section_lists_every_command():
    commands = _commands()
    assert all(c.startswith("kernelgen ") for c in commands), commands
    listed = {c.split()[1] for c in commands}
    from kernelgen.cli import main

    assert listed == set(main.commands) | {"--version", "--cmake-dir"}


@pytest.mark.slow
@requires_tool("gcc", "glslangValidator", "py:pyopencl", "py:vulkan", "py:onnx")
@pytest.mark.parametrize("command", _commands())
def test_each_command_runs_as_written(command, scratch):
    done = _run(command, scratch)
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    if command.startswith("kernelgen import"):
        assert list((scratch / "configs" / "model").glob("*.yaml"))
    if command.startswith("kernelgen init"):
        assert (scratch / "configs" / "my_conv.yaml").is_file()


@pytest.mark.slow
@requires_tool(*toolchain("c"))
def test_the_python_api_example_runs_as_written(scratch):
    example = _block("Python API", "python")
    done = _run([sys.executable, "-c", example + "\nassert result.passed and files and rows and outputs['output'].shape == (1, 60, 60, 128)\n"], scratch)
    assert done.returncode == 0, done.stderr[-3000:]
