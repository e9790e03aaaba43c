"""Issue 22: every command in the README runs as written. The Commands section's shell block and the Python API
example run from a scratch copy of the repository's configs/, schema/ and out/ (the README's commands write
into out/ and configs/), with the model.onnx they mention built here; the arrays `kernelgen run` reads come from
the block's own python3 line (issue 49: they were made here, so the README's run could not have run as written),
and the starter config `init` writes leaves the CI line's check clean."""
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


def _command(start: str) -> str:
    (command,) = [c for c in _commands() if c.startswith(start)]
    return command


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("readme")
    for folder in ("configs", "schema", "out"):
        shutil.copytree(REPO / folder, root / folder)
    sys.path.insert(0, str(REPO / "tests"))
    import onnx

    import onnx_models

    onnx.save(onnx_models.resnet_basic_block(c=8, size=7), str(root / "model.onnx"))
    return root


def _run(command: list[str] | str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(command, shell=isinstance(command, str), cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)


def test_the_commands_section_lists_every_command():
    commands = _commands()
    setup = [c for c in commands if not c.startswith("kernelgen ")]
    assert all(c.startswith("python3 -c ") for c in setup), setup  # what the next command reads, made first
    listed = {c.split()[1] for c in commands if c not in setup}
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
        assert (scratch / done.stdout.strip()).is_file()
    if command.startswith("kernelgen run"):
        assert (scratch / "result" / "output.npy").is_file()


def test_the_readmes_init_leaves_its_ci_check_clean(tmp_path):
    """A user who runs the README's init and then its CI line gets exit 0: the starter config does not join the
    configs whose goldens out/ holds (issue 49: `init my_conv` wrote configs/my_conv.yaml, and check exit 1)."""
    for folder in ("configs", "schema", "out"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    init, check = _command("kernelgen init"), _command("kernelgen check")
    done = _run(init, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / done.stdout.strip()).is_file()
    done = _run(check, tmp_path)
    assert done.returncode == 0, f"{init}; {check}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


@pytest.mark.slow
@requires_tool(*toolchain("c"))
def test_the_python_api_example_runs_as_written(scratch):
    example = _block("Python API", "python")
    done = _run([sys.executable, "-c", example + "\nassert result.passed and files and rows and outputs['output'].shape == (1, 60, 60, 128)\n"], scratch)
    assert done.returncode == 0, done.stderr[-3000:]
