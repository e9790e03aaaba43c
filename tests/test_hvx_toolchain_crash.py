"""Issue 44: a compiler crash on a valid hvx kernel is worked around and said, never reported as a failed kernel.

clang-19's Hexagon back end has crashed in MachinePipeliner ("Modulo Software Pipelining") on a valid generated
kernel; the toolchain retries a crash once with -mllvm -enable-pipeliner=false. The crash is played by a wrapper
named clang-19 that KERNELGEN_HEXAGON_CLANG points at: it prints LLVM's crash report (or dies by SIGSEGV) unless
the pipeliner is off, then runs the real clang-19, so the kernel is built, run under QEMU and compared for real.
"""
from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest
from builders import toolchain
from conftest import REPO, SMALL_UINT8, requires_tool

from kernelgen.api import TARGETS, load_config, plan
from kernelgen.errors import ToolchainError
from kernelgen.measure.records import Status
from kernelgen.measure.validate import validate_safely
from kernelgen.targets.hvx import toolchain as hexagon
from kernelgen.targets.hvx.crash import PIPELINER_OFF, Crash, compiler_crash

DATA = REPO / "tests" / "data" / "hexagon"
# What clang-19 prints when LLVM crashes inside a pass (the pretty stack trace, innermost pass last), exit 1.
CRASH_REPORT = """\
PLEASE submit a bug report to https://github.com/llvm/llvm-project/issues/ and include the crash backtrace.
Stack dump:
0.\tProgram arguments: clang-19 --target=hexagon -mcpu=hexagonv73 -O2 -c kernel.c
1.\t<eof> parser at end of file
2.\tCode generation
3.\tRunning pass 'Function Pass Manager' on module 'kernel.c'.
4.\tRunning pass 'Modulo Software Pipelining' on function '@kernel'
clang-19: error: clang frontend command failed with exit code 139 (use -v to see invocation)
"""
# how the wrapper fails while the pipeliner is on
PLAYS = {
    "report": f"cat >&2 <<'EOF'\n{CRASH_REPORT}EOF\nexit 1",
    "signal": "kill -SEGV $$",
    "diagnostic": "echo 'kernel.c:3:5: error: use of undeclared identifier' >&2; exit 1",
}


def _fake_clang(folder: Path, play: str, always: bool = False) -> Path:
    """A clang-19 that plays a failure (every time with `always`, else only with the pipeliner on) and otherwise
    runs the real one; each call appends its arguments to calls.log beside it."""
    real = shutil.which("clang-19")
    folder.mkdir(exist_ok=True)
    script = folder / "clang-19"
    guard = "" if always else 'case " $* " in *" -enable-pipeliner=false "*) exec "$REAL" "$@";; esac\n'
    script.write_text(f'#!/bin/sh\nREAL="{real}"\necho "$*" >> "{folder / "calls.log"}"\n{guard}{PLAYS[play]}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _calls(folder: Path) -> list[str]:
    log = folder / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


# ---- telling a crash from a diagnostic ----------------------------------------------------


def test_a_crash_is_told_from_a_diagnostic():
    assert compiler_crash(1, CRASH_REPORT) == Crash(pass_name="Modulo Software Pipelining", signal_name="")
    assert compiler_crash(-11, "") == Crash(pass_name="", signal_name="SIGSEGV")  # killed (subprocess's sign)
    assert compiler_crash(139, "") == Crash(pass_name="", signal_name="SIGSEGV")  # a shell's 128 + 11
    assert compiler_crash(134, "Stack dump:\n") == Crash(pass_name="", signal_name="SIGABRT")
    assert compiler_crash(1, "kernel.c:3:5: error: use of undeclared identifier 'x'\n1 error generated.\n") is None
    assert compiler_crash(1, "ld.lld: error: undefined symbol: sqrtf\n") is None
    assert str(compiler_crash(1, CRASH_REPORT)) == "crashed in Modulo Software Pipelining"
    assert str(compiler_crash(-11, "")) == "crashed (SIGSEGV)"


@requires_tool("clang-19")
def test_the_flag_turns_clang_19s_pipeliner_off():
    """The workaround's flag is clang-19's: the same loop is pipelined without it and not with it (LLVM's
    optimization remarks for the pass say which)."""
    source = "void f(int *restrict a, const int *restrict b, int n) { for (int i = 2; i < n; i++) " \
             "a[i] = a[i - 1] * b[i] + a[i - 2]; }\n"

    def remarks(*flags: str) -> str:
        import subprocess
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "loop.c").write_text(source)
            done = subprocess.run(["clang-19", "--target=hexagon", "-mcpu=hexagonv73", "-O2", "-Rpass=pipeliner",
                                   *flags, "-c", str(Path(tmp) / "loop.c"), "-o", "/dev/null"],
                                  capture_output=True, text=True, check=True)
        return done.stderr

    assert "Pipelined succesfully" in remarks()  # (LLVM's spelling)
    assert "Pipelined succesfully" not in remarks(*PIPELINER_OFF)


# ---- the toolchain ------------------------------------------------------------------------


@requires_tool(*toolchain("hvx"))
@pytest.mark.parametrize("play", ["report", "signal"])
def test_a_crash_is_built_again_with_the_pipeliner_off(play, tmp_path, monkeypatch):
    fake = _fake_clang(tmp_path / "bin", play)
    monkeypatch.setenv(hexagon.CLANG_VARIABLE, str(fake))
    built = hexagon.build_noted([DATA / "counters.c"], tmp_path / "counters", defines={"KG_N": 100})
    expected = "in Modulo Software Pipelining" if play == "report" else "(SIGSEGV)"
    assert built.workaround == f"clang-19 crashed {expected}; built with the pipeliner off (add -mllvm " \
                               f"-enable-pipeliner=false where you compile this kernel)"
    calls = _calls(tmp_path / "bin")
    assert len(calls) == 2 and "-enable-pipeliner=false" not in calls[0] and "-enable-pipeliner=false" in calls[1]
    counters = hexagon.parse_counters(hexagon.run(Path(built.output), [], cwd=tmp_path).stdout)
    assert counters["empty.packets"] > 0  # the retry's binary runs


@requires_tool("clang-19", "ld.lld-19")
def test_a_diagnostic_is_not_retried_and_a_crash_twice_is_a_compiler_bug(tmp_path, monkeypatch):
    fake = _fake_clang(tmp_path / "diag", "diagnostic")
    monkeypatch.setenv(hexagon.CLANG_VARIABLE, str(fake))
    with pytest.raises(ToolchainError, match="failed to build counters") as error:
        hexagon.build([DATA / "counters.c"], tmp_path / "counters", defines={"KG_N": 100})
    assert "undeclared identifier" in str(error.value) and len(_calls(tmp_path / "diag")) == 1
    fake = _fake_clang(tmp_path / "crash", "report", always=True)
    monkeypatch.setenv(hexagon.CLANG_VARIABLE, str(fake))
    with pytest.raises(ToolchainError, match=r"crashed in Modulo Software Pipelining \(a compiler bug, not an error "
                                             r"in the kernel\) to build counters, and failed again with the pipeliner "
                                             r"off") as error:
        hexagon.build([DATA / "counters.c"], tmp_path / "counters", defines={"KG_N": 100})
    assert "with the pipeliner off: " in str(error.value) and len(_calls(tmp_path / "crash")) == 2


@requires_tool("clang-19")
def test_the_compiler_variable_names_the_clang_status_reports(tmp_path, monkeypatch):
    fake = _fake_clang(tmp_path / "bin", "report")
    monkeypatch.setenv(hexagon.CLANG_VARIABLE, str(fake))
    assert hexagon.clang() == str(fake) and hexagon.status()[0].name == str(fake)
    monkeypatch.delenv(hexagon.CLANG_VARIABLE)
    assert hexagon.clang() == "clang-19"


# ---- validation ---------------------------------------------------------------------------


@pytest.mark.slow
@requires_tool(*toolchain("hvx"))
def test_validate_passes_a_kernel_whose_build_crashed_and_says_so(tmp_path, monkeypatch):
    """The kernel is built without the pipeliner, run under QEMU and found bit-exact: a pass, whose detail says
    which crash was worked around and what to add to one's own build, never FAIL `toolchain`."""
    fake = _fake_clang(tmp_path / "bin", "report")
    monkeypatch.setenv(hexagon.CLANG_VARIABLE, str(fake))
    config = load_config(SMALL_UINT8.format(name="crashy", bias=""))
    hvx = TARGETS["hvx"]
    result = validate_safely(hvx, hvx.build(config, plan(config)), seed=5)
    assert result.status is Status.PASS, result.detail
    assert result.failure == () and "toolchain" not in result.detail
    assert "clang-19 crashed in Modulo Software Pipelining; built with the pipeliner off (add -mllvm " \
           "-enable-pipeliner=false where you compile this kernel)" in result.detail
    # every build of the driver crashed once and was built again: the verdict says so once
    assert result.detail.count("crashed in") == 1
    assert any("-enable-pipeliner=false" in call for call in _calls(tmp_path / "bin"))


# ---- the real crash (clang-19 19.1.7, Debian 12) ---------------------------------------------

# Found by compiling random valid hvx configs (clang -c of the kernel, plain, -DKG_TRACE_INTERMEDIATES and
# -DKG_PROFILE_COMPUTE): 2 of 118 uint8 chains from tests/strategies.py's hvx_uint8_configs with hvx.pixels, arch and
# schedule keys drawn too; none in 150 uint8 chains without those keys, 300 float32 configs (qf32 on v68+ in half) or
# the 28 configs imported from MobileNetV2 and ResNet18 QDQ models. Both: a 1x1 conv with its residual, then a
# strided depthwise conv, on an 18x3x14 input; the first minimised to the defaults. With the defaults (v73, 8 pixels) only the op-by-op check's build
# (-DKG_TRACE_INTERMEDIATES) crashes; with 24 pixels on v67 the kernel as shipped does too. Before the workaround
# `kernelgen validate` reported both FAIL `toolchain`.
CRASHING = """\
name: {name}
dtype: uint8
input: {{shape: [1, 18, 3, 14], layout: nhwc-8h8w32c}}
quant: {{input_scale: 0.05, input_zero_point: 97, weight_dtype: {weights}, weight_scale: 0.004,
        weight_zero_point: {zero}, intermediate_scale: 0.2, intermediate_zero_point: 155, output_scale: 0.1,
        output_zero_point: 172, bias: true}}
ops:
  - conv2d: {{out_channels: 14, kernel: 1, residual: input, bias: {bias}{activation}}}
  - conv2d: {{out_channels: 14, kernel: {kernel}, stride: {stride}, dilation: {dilation}, groups: 14}}
output: {{layout: nhwc-8h8w32c}}
targets: [hvx]
{hvx}"""
TRACE_ONLY = CRASHING.format(name="crash_trace", weights="uint8", zero=128, bias="true",
                             activation=", activation: relu6", kernel="[3, 1]", stride=3, dilation="[1, 2]", hvx="")
SHIPPED = CRASHING.format(name="crash_shipped", weights="int8", zero=0, bias="false", activation="", kernel=3,
                          stride="[2, 3]", dilation=1, hvx="hvx: {arch: v67, pixels: 24}\n")


@pytest.mark.slow
@requires_tool(*toolchain("hvx"))
@pytest.mark.parametrize("text, note", [
    # Since the first op of a channel block under 32 copies its input in vectors (issue 48, hvx48b), this config's
    # shipped build crashes too (the note then says the shipped one, as for SHIPPED below): strict, so that the day a
    # trace-only crash is found again, or clang stops crashing, this fails and the config gets replaced.
    pytest.param(TRACE_ONLY, "clang-19 crashed in Modulo Software Pipelining on the kernel built with "
                 "-DKG_TRACE_INTERMEDIATES (not on the kernel as shipped, which built as usual); that build was made "
                 "with the pipeliner off", marks=pytest.mark.xfail(strict=True, reason="no trace-only crash config "
                                                                    "since the vector input copy")),
    # Since a grouped conv's generic stripe compute is kept out of line (a miscompile inlined: conv2d_uint8.c.j2),
    # clang-19 builds this one too: the crash was in the inlined depthwise. No shipped-build crash config has been
    # found since (850 drawn from strategies.hvx_uint8_configs with hvx.arch and hvx.pixels); strict as above.
    pytest.param(SHIPPED, "clang-19 crashed in Modulo Software Pipelining; built with the pipeliner off (add -mllvm "
                 "-enable-pipeliner=false where you compile this kernel)",
                 marks=pytest.mark.xfail(strict=True, reason="no shipped-build crash config since the grouped stripe "
                                                             "compute is out of line")),
], ids=["trace_build", "shipped_build"])
def test_valid_configs_that_crash_clang_19_pass_bit_exact_and_say_which_build_crashed(text, note):
    config = load_config(text)
    hvx = TARGETS["hvx"]
    result = validate_safely(hvx, hvx.build(config, plan(config)), seed=11)
    assert result.status is Status.PASS and result.failure == (), result.detail
    assert result.detail.startswith("bit-exact in 2 poisoned runs") and result.checked == "bit-exact op-by-op"
    assert result.detail.endswith(f"; {note}") and result.detail.count("crashed") == 1, result.detail
