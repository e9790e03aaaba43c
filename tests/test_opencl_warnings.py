"""Issue 22: OpenCL validation printed "80 warnings generated." on AVX2 hosts. The cause there is PoCL's (a
-Wpsabi note on each call of a float16 builtin such as vload16 or fma, when the CPU lacks AVX-512: the calls are
inlined, no ABI is crossed), so kernelgen builds with -w. What is ours must stay clean: every generated OpenCL
kernel (the configs, the target's test matrix) compiles without a warning under clang -Wall -Wextra for an AVX2
CPU, the ABI note alone excepted."""
import subprocess

import pytest
from conftest import REPO, requires_tool
from test_opencl_target import MATRIX, _config

from kernelgen.api import generate, load_config

CLANG = ["clang-19", "-x", "cl", "-cl-std=CL1.2", "-target", "x86_64-unknown-linux-gnu", "-march=haswell",
         "-Xclang", "-finclude-default-header", "-O1", "-Wall", "-Wextra", "-Wno-psabi", "-fsyntax-only"]
CONFIGS = sorted(p for p in (REPO / "configs").glob("*.yaml") if "opencl" in load_config(p).targets)


def _warnings(source: str, tmp_path) -> list[str]:
    path = tmp_path / "kernel.cl"
    path.write_text(source)
    done = subprocess.run([*CLANG, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stderr.splitlines() if "warning:" in line]


@requires_tool("clang-19")
@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_config_kernels_compile_without_warnings(path, tmp_path):
    config = load_config(path)
    (source,) = [text for name, text in generate(config, "opencl").items() if name.endswith(".cl")]
    assert _warnings(source, tmp_path) == []


@requires_tool("clang-19")
@pytest.mark.parametrize("name", sorted(MATRIX))
def test_matrix_kernels_compile_without_warnings(name, tmp_path):
    (source,) = [text for file, text in generate(_config(name), "opencl").items() if file.endswith(".cl")]
    assert _warnings(source, tmp_path) == []


@requires_tool("clang-19")
def test_the_check_sees_an_unused_variable(tmp_path):
    """The compiler flags above do report a kernel's own warning (the one this issue's fix removed)."""
    source = "__kernel void k(__global float *o) { const int unused = get_global_id(2); o[0] = 1.0f; }\n"
    assert any("unused variable 'unused'" in w for w in _warnings(source, tmp_path))
