"""The c target's 16-float dense tiles (issue 48): each dense tile whose k_block is a multiple of 16 also emitted in
WIDE-float vectors under `#if KG_VF16` (the compiler targets AVX-512F), the 8-float tile under `#else`, in the same
source. Both variants are built and checked against numpy (the 8-float one forced with -march=x86-64-v3, the
16-float one where this host runs AVX-512F), and gcc's code for the wide tiles is read back: zmm FMAs with a
broadcast operand in the inner loop, no stack traffic there. No timings: `kernelgen bench` measures speed."""
from __future__ import annotations

import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from builders import Case, make_config, toolchain
from conftest import requires_tool

from kernelgen.api import jobs, validate
from kernelgen.targets.c.microkernel import WIDE_ACCUMULATORS

# name: (input shape, ops, input layout, output layout, schedule, per op (wide vectors, wide pixels) or None)
CASES = {name: Case(*row[:5], targets="[c]", expect=row[5]) for name, row in {
    # a ResNet basic block as imported (NCHW, residual): op 1 writes 32 columns (the consumer's padding), 2 tiles
    # of 16, the first reading left of its window, the second right of it; op 2 30 columns in 2 tiles of 15
    "wide_nchw_basic_block_k16": ([1, 12, 30, 16], ["{out_channels: 16, kernel: 3, pad: 1, bias: true, activation: relu}",
                                                    "{out_channels: 16, kernel: 3, pad: 1, bias: true, residual: input, "
                                                    "activation: relu}"], "NCHW", "NCHW", "{k_block: 16}",
                                  [(1, 16), (1, 15)]),
    # two wide vectors a pixel (k_block 32): 20 columns in 2 tiles of 10, stride 2
    "wide_two_vectors_stride2_k32": ([1, 9, 40, 16], ["{out_channels: 64, kernel: 3, stride: 2, pad: 1, bias: true}"],
                                     "NHWC", "NHWC", "{k_block: 32}", [(2, 10)]),
    # dilation 2 and partial sums over two input-channel chunks: 35 columns in 2 tiles of 18 (the last one short)
    "wide_dilated_c_split_k16": ([1, 8, 35, 24], ["{out_channels: 32, kernel: 3, dilation: 2, pad: 2, bias: true, "
                                                  "activation: relu}"], "NHWC", "NHWC",
                                 "{k_block: 16, h_block: 4, c_split: 2}", [(1, 18)]),
    # a 1x1 over NCHW into NHWC, k_split 2 (two wide vectors in each block of 32): 57 columns in 5 tiles of 12
    "wide_1x1_k_split_width57": ([1, 4, 57, 24], ["{out_channels: 64, kernel: 1}"], "NCHW", "NHWC",
                                 "{k_block: 32, k_split: 2}", [(2, 12)]),
    # a k_block of 8: no 16-float variant, the 8-float tile alone
    "narrow_k8_has_no_wide_variant": ([1, 7, 11, 5], ["{out_channels: 13, kernel: 3, stride: 2, pad: 1}"], "NHWC",
                                      "NHWC", "{k_block: 8}", [None]),
}.items()}
NARROW = "{cflags: [-O3, -march=x86-64-v3, -ffp-contract=fast]}"  # AVX2 + FMA: KG_VF16 is 0
WIDE_FLAGS = ("-O3", "-march=x86-64-v4", "-ffp-contract=fast")  # AVX-512F/BW/DQ/VL: KG_VF16 is 1


def _host_has_avx512f() -> bool:
    cpuinfo = Path("/proc/cpuinfo")
    return cpuinfo.exists() and " avx512f" in cpuinfo.read_text()


def _job(name: str, c_options: str | None = None):
    case = CASES[name] if c_options is None else CASES[name].with_block("c", c_options)
    config = make_config(name, case)
    return config, jobs(config, ("c",))["c"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_dense_tiles_with_a_k_block_of_16s_get_a_wide_variant(name):
    _, job = _job(name)
    wide = [None if t is None or t.wide is None else (t.wide.vectors, t.wide.pixels) for t in job.target_plan.tiles]
    assert wide == CASES[name].expect
    text = job.files[f"{name}.c"]
    count = sum(w is not None for w in wide)
    assert [text.count(f"{d}\n") for d in ("#if KG_VF16", "#else /* !KG_VF16 */", "#endif /* KG_VF16 */")] == [count] * 3
    # the pixels some tile reads past the source window with: the first column of op 1's first tile (the
    # consumer's padding), the tail past the row of the last tile
    clamped = {"wide_nchw_basic_block_k16": [(0, 15), ()], "wide_dilated_c_split_k16": [(17,)],
               "wide_1x1_k_split_width57": [(9, 10, 11)]}
    assert [t.wide.clamped for t in job.target_plan.tiles if t and t.wide] == clamped.get(name, [()] * count)
    assert "#define KG_VF16 1" in text and "#define KG_VF16 0" in text  # the macros go in every tiled kernel
    for tile in job.target_plan.tiles:
        if tile is None or tile.wide is None:
            continue
        w = tile.wide
        assert w.vectors * w.pixels <= WIDE_ACCUMULATORS and w.width == w.vectors * 16
        offsets = [p for p in range(w.pixels) if p not in w.clamped]
        for p in offsets[:1] + offsets[-1:]:  # one pointer a tap: the pixels at constant offsets from it
            assert f"KG_FMA16(a{p}_0, x[xo + ch + {p * tile.stride * w.col_step}], w0);" in text
        for p in w.clamped:  # a clamped pointer each
            assert f"const int xc{p} = KG_CLAMP(xb + {p * tile.stride} + rw * {tile.dilation}, 0, {tile.col_limit});" \
                in text and f"KG_FMA16(a{p}_0, x{p}[ch], w0);" in text
        assert f"KG_FMA(a{tile.pixels - 1}_1, x{tile.pixels - 1}[ch], w1);" in text  # the 8-float tile beside it


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("variant", ["8-float", "16-float"])
def test_both_variants_match_numpy(name, variant):
    """The same source built for AVX2 (the #else tile) and, where the host runs it, for AVX-512F (the wide tile),
    within validate's tolerance (its bound on float32 summation error for the reduction length)."""
    if variant == "16-float" and not _host_has_avx512f():
        pytest.skip("this host does not run AVX-512F code")
    options = NARROW if variant == "8-float" else "{cflags: [" + ", ".join(WIDE_FLAGS) + "]}"
    config, _ = _job(name, options)
    result = validate(config, "c")
    assert result.passed, f"{result.detail} (seed {result.seed})"


def _loops(disassembly: str) -> list[list[str]]:
    """The instructions of each loop: from a backward conditional jump's target to the jump."""
    lines = [line for line in disassembly.splitlines() if re.match(r"^\s+[0-9a-f]+:\t", line)]
    at = {int(line.split(":")[0], 16): i for i, line in enumerate(lines)}
    loops = []
    for i, line in enumerate(lines):
        jump = re.search(r"\tj(?!mp)[a-z]+\s+([0-9a-f]+) <", line)
        if jump and int(jump.group(1), 16) in at and at[int(jump.group(1), 16)] < i:
            loops.append(lines[at[int(jump.group(1), 16)]:i + 1])
    return loops


@requires_tool(*toolchain("c"))
@pytest.mark.skipif(platform.machine() != "x86_64" or not shutil.which("objdump"), reason="x86-64 objdump")
@pytest.mark.parametrize("name", ["wide_nchw_basic_block_k16", "wide_1x1_k_split_width57"])
def test_gcc_makes_zmm_fmas_with_a_broadcast_operand_and_no_stack_traffic(tmp_path, name):
    """A 3x3 and a 1x1 built for AVX-512F (only compiled here, never run): each tile's loop over reduction
    channels is pixels x vectors zmm FMAs, each with its input as a {1to16} memory operand (two vectors a pixel:
    one broadcast for its two FMAs), beside the filter vectors' loads and the loop's own arithmetic: no load or
    store of the stack (a spilled accumulator or pointer). Built for AVX2, no zmm at all."""
    _, job = _job(name)
    for file, text in job.files.items():
        (tmp_path / file).write_text(text)
    source = tmp_path / f"{name}.c"
    for flags, wide in ((WIDE_FLAGS, True), (("-O3", "-march=x86-64-v3", "-ffp-contract=fast"), False)):
        subprocess.run(["gcc", "-std=c99", *flags, "-c", str(source), "-o", str(tmp_path / "k.o")], check=True)
        listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(tmp_path / "k.o")], check=True,
                                 capture_output=True, text=True).stdout
        if not wide:
            assert "%zmm" not in listing
            continue
        for tile in job.target_plan.tiles:
            fmas = tile.wide.vectors * tile.wide.pixels
            # the innermost loop holding that many FMAs (the loops around it hold them too)
            found = sorted((loop for loop in _loops(listing) if sum("vfmadd231ps" in i for i in loop) == fmas), key=len)
            assert found, f"no loop of {fmas} FMAs"
            inner = found[0]
            fma = [i for i in inner if "vfmadd231ps" in i]
            if tile.wide.vectors == 1:  # the input broadcast as the FMA's memory operand
                assert all(re.search(r"\{1to16\},%zmm\d+,%zmm\d+$", i) for i in fma), inner
            else:  # broadcast once into a register for the pixel's two FMAs
                assert all(re.search(r"%zmm\d+,%zmm\d+,%zmm\d+$", i) for i in fma), inner
                assert sum("vbroadcastss" in i and "%zmm" in i for i in inner) == tile.wide.pixels, inner
            assert not any("%rsp" in i or "%rbp" in i for i in inner), inner
            # the FMAs, the broadcasts, the filter loads, the pointer steps and the branch
            assert len(inner) <= fmas + (tile.wide.pixels if tile.wide.vectors > 1 else 0) + 10, inner


@requires_tool(*toolchain("c"))
@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64 -march levels")
def test_the_fma_probe_uses_the_vectors_the_kernels_are_built_with(tmp_path):
    """The peak a kernel's GFLOP/s is judged against: 16-float chains where the kernel's flags target AVX-512F
    (only where this host runs them), 8-float ones for AVX2 (-march=x86-64-v3), said in its description."""
    from kernelgen.measure.primitives import FMA
    from kernelgen.targets.c.roofline import Probes

    levels = [("-march=x86-64-v3", 8)] + ([("-march=x86-64-v4", 16)] if _host_has_avx512f() else [])
    for machine, lanes in levels:
        workdir = tmp_path / machine.lstrip("-")
        workdir.mkdir()
        probes = Probes(workdir, iterations=1000, machine=(machine,))
        (fma,) = probes.records(FMA)
        assert (probes.lanes, fma.work, fma.shape) == (lanes, 8 * lanes * 2 * 1000, f"8x{lanes}")
        assert f"8 chains of {lanes}-float" in probes.describe


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("team_pays", [True, False])
def test_wide_tiles_with_threads_match_numpy(monkeypatch, team_pays):
    """c: {threads: 2}: the variants inside each conv's shared row loop (a team), or, where a team does not pay,
    the row loops plain (team.solo drops the OpenMP markers, and must leave the variants' #else and #endif)."""
    from kernelgen.targets.c import team

    if team_pays:
        monkeypatch.setattr(team, "MIN_WORK_PER_BARRIER", 0)
    config, job = _job("wide_nchw_basic_block_k16", "{threads: 2}")
    text = job.files["wide_nchw_basic_block_k16.c"]
    assert text.count("#pragma omp parallel") == int(team_pays)
    assert [text.count(f"{d}\n") for d in ("#if KG_VF16", "#else /* !KG_VF16 */", "#endif /* KG_VF16 */")] == [2] * 3
    result = validate(config, "c")
    assert result.passed, f"{result.detail} (seed {result.seed})"
