"""The c target's kernels are right under every compiler and flag set the project documents (issue 44).

The case that started it: a 3x3 stride-2 max pool with padding 1 on a 9x8 input lost the last row of its windows
when gcc 12.2 built it at -O3 with a 256-bit tuning (-march=native on Zen 3, Haswell and later): gcc vectorized
the channel loop into masked AVX2 gathers whose all-true mask it wrote as 1s, which read nothing
(tests/data/gcc12_masked_gather.c). The pools now test each tap's position outside the channel loop
(planner/pooling.py). Here the pool and its neighbours (odd and even rows and columns, stride 1 and 2, padding 0
and 1, kernel 2 and 3, with a conv before it or not) run under gcc and clang at -O2, at the target's default
flags and, on an x86 host with AVX2 and FMA, at the flags that reproduced the bug on a host whose -march=native
tunes for 128-bit vectors (as this Zen 1 EPYC's does): a max of floats is exact, so outputs equal numpy's.
"""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
from builders import toolchain
from conftest import REPO, require_tools, requires_tool

from kernelgen.api import parse_config, run, validate
from kernelgen.targets.c.options import DEFAULT_CFLAGS
from kernelgen.targets.c.toolchain import COMPILER_VARIABLE

COMPILERS = ("gcc", "clang-19")
# What the random suite's sanitizer run builds with (tests/test_fuzz_valid.py): a finding ends the kernel's process
SANITIZED = ("-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined", "-fno-sanitize-recover=all")


def _host_has(*features: str) -> bool:
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return False
    return set(features) <= set(flags.split(":", 1)[1].split())


# 256-bit vectors as gcc 12 picks them with -march=native on Zen 3 or Intel since Haswell: what made the 9x8 max
# pool wrong; x86 hosts without AVX2 and FMA cannot run it
TUNED_256 = ("-O3", "-mavx2", "-mfma", "-mtune=haswell", "-ffp-contract=fast")
FLAG_SETS = {"O2": ("-O2",), "default": DEFAULT_CFLAGS,
             **({"avx2_tuned_256": TUNED_256} if _host_has("avx2", "fma") else {})}


@contextlib.contextmanager
def compiler(name: str):
    """Kernels built inside use `name` (KERNELGEN_CC, the c target's one way to choose its compiler)."""
    before = os.environ.get(COMPILER_VARIABLE)
    os.environ[COMPILER_VARIABLE] = name
    try:
        yield
    finally:
        if before is None:
            del os.environ[COMPILER_VARIABLE]
        else:
            os.environ[COMPILER_VARIABLE] = before


def max_pool(x: np.ndarray, kernel: int, stride: int, pad: int) -> np.ndarray:
    """numpy's max over each window of NHWC `x`, padding never the maximum (ONNX MaxPool)."""
    padded = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)), constant_values=-np.inf)
    n, h, w, c = padded.shape
    out_h, out_w = (h - kernel) // stride + 1, (w - kernel) // stride + 1
    taps = [padded[:, i:i + stride * out_h:stride, j:j + stride * out_w:stride, :]
            for i in range(kernel) for j in range(kernel)]
    return np.maximum.reduce(taps)


def _pool_config(rows: int, cols: int, channels: int, kernel: int, stride: int, pad: int, flags, conv: bool = False):
    conv_line = f"  - conv2d: {{out_channels: {channels}, kernel: 3, pad: 1}}\n" if conv else ""
    return parse_config(
        f"name: pool_{rows}x{cols}x{channels}\ninput: {{shape: [1, {rows}, {cols}, {channels}]}}\nops:\n{conv_line}"
        f"  - maxpool: {{kernel: {kernel}, stride: {stride}, pad: {pad}}}\n"
        f"c: {{cflags: {json.dumps(list(flags))}}}\ntargets: [c]\n", "pool.yaml")


def _pool_is_exact(rows, cols, channels, kernel, stride, pad, flags) -> None:
    config = _pool_config(rows, cols, channels, kernel, stride, pad, flags)
    x = np.random.default_rng(rows * 100 + cols * 10 + channels).standard_normal((1, rows, cols, channels))
    x = x.astype(np.float32)
    got = run(config, "c", {"input": x})["output"]
    expected = max_pool(x, kernel, stride, pad)
    assert got.shape == expected.shape
    wrong = np.argwhere(got != expected)
    assert not len(wrong), f"{len(wrong)} of {got.size} outputs differ from numpy's max, first at {wrong[0]}"


# the issue's case with fewer channels than a vector, a vector's and two vectors'
@requires_tool(*COMPILERS)
@pytest.mark.parametrize("flag_set", sorted(FLAG_SETS))
@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("channels", [3, 8, 16])
def test_the_9x8_max_pool_equals_numpy(channels, cc, flag_set):
    with compiler(cc):
        _pool_is_exact(9, 8, channels, 3, 2, 1, FLAG_SETS[flag_set])


# a conv before it in the chain: the pool reads the conv's output cache; validate holds it to numpy op by op, the
# max pool's bound 0 (exact)
@requires_tool(*COMPILERS)
@pytest.mark.parametrize("flag_set", sorted(FLAG_SETS))
@pytest.mark.parametrize("cc", COMPILERS)
def test_the_9x8_max_pool_after_a_conv_matches_numpy(cc, flag_set):
    with compiler(cc):
        result = validate(_pool_config(9, 8, 8, 3, 2, 1, FLAG_SETS[flag_set], conv=True), "c", seed=44)
    assert result.passed, result.detail
    assert result.checked == "op-by-op"


NEIGHBOURS = [(rows, cols, kernel, stride, pad) for rows, cols in ((9, 8), (8, 9), (9, 9), (8, 8))
              for kernel, stride, pad in ((3, 2, 1), (3, 1, 0), (2, 2, 0), (2, 1, 1))]


@requires_tool(*COMPILERS)
@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("rows, cols, kernel, stride, pad", NEIGHBOURS)
def test_max_pool_neighbours_equal_numpy(rows, cols, kernel, stride, pad, cc):
    with compiler(cc):
        for flags in FLAG_SETS.values():
            _pool_is_exact(rows, cols, 8, kernel, stride, pad, flags)


@requires_tool(*toolchain("c"))
def test_the_gcc_12_reduction_still_builds_and_says_what_it_shows(tmp_path):
    """tests/data/gcc12_masked_gather.c is the bug without kernelgen: it must stay a C99 program that runs (right
    under -O2 on any gcc; wrong under gcc 12.2 -O3 -mavx2 -mtune=haswell, which this test does not require)."""
    import subprocess

    source = REPO / "tests" / "data" / "gcc12_masked_gather.c"
    binary = tmp_path / "reduction"
    subprocess.run(["gcc", "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", str(source), "-o", str(binary)],
                   check=True)
    ran = subprocess.run([str(binary)], capture_output=True, text=True)
    assert (ran.returncode, ran.stdout) == (0, "0 of 40 wrong\n")


def test_compiler_choice_is_one_variable(monkeypatch):
    from kernelgen.targets.c import toolchain as c_toolchain

    monkeypatch.setenv(COMPILER_VARIABLE, "no-such-compiler-kg")
    assert c_toolchain.compiler() == ""
    assert c_toolchain.status()[0].name == "no-such-compiler-kg" and not c_toolchain.status()[0].found
    with pytest.raises(Exception, match="no-such-compiler-kg not found"):
        c_toolchain.build_shared([Path("x.c")], Path("x.so"))
    monkeypatch.delenv(COMPILER_VARIABLE)
    require_tools(*toolchain("c"))
    assert Path(c_toolchain.compiler()).name in ("gcc", "cc")


# an edit the sanitizer build must catch, in the kernel's first line: a write one element past the output, and a
# signed overflow (volatile: the compiler cannot fold it away)
INJECTED = {"heap-buffer-overflow": "output[{upper}_OUTPUT_ELEMENTS] = 0.0f;",
            "signed integer overflow": "{{ volatile int big = 2147483647; big = big + 1; (void)big; }}"}


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("finding", sorted(INJECTED))
def test_the_sanitizer_build_fails_on_undefined_behaviour(finding):
    """What the random suite's sanitizer run rests on: a kernel with one bad line fails validation with the
    sanitizer's report, and the same kernel without it passes (each argument has an allocation of exactly its
    size, so one element past the output is outside it)."""
    from dataclasses import replace

    from kernelgen.api import jobs
    from kernelgen.errors import ToolchainError
    from kernelgen.measure.validate import validate as validate_job
    from kernelgen.targets import TARGETS

    config = _pool_config(9, 8, 8, 3, 2, 1, SANITIZED)
    job = jobs(config, ("c",))["c"]
    assert validate_job(TARGETS["c"], job, seed=44).passed
    name = f"{job.plan.name}.c"
    signature = next(line for line in job.files[name].splitlines() if line.startswith(f"void {job.plan.name}("))
    line = INJECTED[finding].format(upper=job.plan.name.upper())
    edited = job.files[name].replace(f"{signature}\n{{\n", f"{signature}\n{{\n  {line}\n", 1)
    assert edited != job.files[name]
    with pytest.raises(ToolchainError, match=finding):
        validate_job(TARGETS["c"], replace(job, files={**job.files, name: edited}), seed=44)



def test_a_compilers_warning_about_its_own_native_reading_does_not_fail_builds(monkeypatch, tmp_path):
    """clang 19 on an AVX10.1 core warns that -march=native's +avx10.1-256 is promoted to avx10.1-512, and -Werror
    failed every kernel built with it (seen on a Granite Rapids-class Xeon): the quirk flag is added for a compiler
    that warns so, and only with -march=native. A stand-in compiler plays clang 19 on such a core."""
    import shutil

    from kernelgen.errors import ToolchainError
    from kernelgen.targets.c import toolchain as c_toolchain

    fake = tmp_path / "fake-cc"
    fake.write_text("#!/bin/sh\ncase \"$*\" in *-Wno-invalid-feature-combination*) exit 0;; esac\n"
                    "echo 'error: invalid feature combination:  +avx10.1-256; will be promoted to avx10.1-512 "
                    "[-Werror,-Winvalid-feature-combination]' >&2\nexit 1\n")
    fake.chmod(0o755)
    c_toolchain.native_quirks.cache_clear()
    try:
        assert c_toolchain.native_quirks(str(fake)) == (c_toolchain.NATIVE_QUIRK_FLAG,)
        monkeypatch.setenv(COMPILER_VARIABLE, str(fake))
        source = tmp_path / "k.c"
        source.write_text("int k;\n")
        c_toolchain.build_shared([source], tmp_path / "k.so", flags=(*c_toolchain.CFLAGS, "-march=native"))
        with pytest.raises(ToolchainError, match="invalid-feature-combination"):  # no -march=native: no quirk
            c_toolchain.build_shared([source], tmp_path / "k.so", flags=c_toolchain.CFLAGS)
        if shutil.which("gcc"):
            assert c_toolchain.native_quirks(shutil.which("gcc")) == ()  # gcc 12 reads AVX10.1 cores quietly
    finally:
        c_toolchain.native_quirks.cache_clear()
