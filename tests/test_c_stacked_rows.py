"""The c target's 16-float dense tile over several output rows (issue 48): where a whole row of a stripe leaves the
tile's accumulators room for more (7x7 deep layers: 7 pixels x 2 vectors of 28), one tile spans as many rows as
the tile model's price chooses (planner.tile_speed.stacked_rows), each filter vector loaded once for all of them;
the rows a stripe leaves over run on the one-row tile. The shapes are asserted exactly, the kernels built with gcc
and run against numpy (validate: its tolerance bounds float32 summation error for the reduction length), the
8-float variant beside it too. No timings: `kernelgen bench` measures speed."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from builders import Case, make_config, toolchain
from conftest import requires_tool

from kernelgen.api import jobs, validate

# name: (input shape, ops, schedule, (rows a tile, pixels, vectors, row_step, tiles of several rows, rows left))
CASES = {name: Case(row[0], row[1], schedule=row[2], targets="[c]", expect=row[3]) for name, row in {
    # ResNet18's layer4 3x3 (7x7, bias, residual, relu) at 128 channels: 2 rows of 7 pixels x 2 vectors, the 7th row
    # on the one-row tile; the source window is 9 columns of 128 channels a row; the filter read in place (OHWI16o)
    # and the next block's prefetched (128 input channels: filter_prefetch.MIN_REDUCE)
    "stacked_7x7_residual_k32": ([1, 7, 7, 128], ["{out_channels: 64, kernel: 3, pad: 1, filter_layout: OHWI16o, "
                                                  "bias: true, residual: input2, activation: relu}"],
                                 "{k_block: 32}", (2, 14, 2, 9 * 128, 3, 1)),
    # one vector a pixel (k_block 16): 3 rows of 7 (21 pixels; 4 would leave 3 rows on 7-pixel tiles), stride 2
    # from 14x14, whose rows are 2 source rows apart; hardswish keeps the tile[] path (its store reads tile[])
    "stacked_stride2_hardswish_k16": ([1, 14, 14, 24], ["{out_channels: 16, kernel: 3, stride: 2, pad: 1, "
                                                        "bias: true, activation: hardswish}"],
                                      "{k_block: 16}", (3, 21, 1, 2 * 15 * 24, 2, 1)),
}.items()}


def _job(name: str, c_options: str | None = None, schedule: str | None = None):
    case = CASES[name] if schedule is None else CASES[name].with_(schedule=schedule)
    if name == "stacked_7x7_residual_k32":  # a lone 3x3 of stride 1: the direct tile, not Winograd's (winograd.py)
        case = case.with_(side_inputs="{input2: {shape: [1, 7, 7, 64]}}")
        c_options = "{winograd: false}" if c_options is None else c_options.replace("}", ", winograd: false}")
    if c_options is not None:
        case = case.with_block("c", c_options)
    config = make_config(name, case)
    return config, jobs(config, ("c",))["c"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_7x7_tile_spans_the_rows_the_price_chooses(name):
    _, job = _job(name)
    (tile,) = job.target_plan.tiles
    stacked, one_row = tile.wide.over_rows
    rows, pixels, vectors, row_step, runs, left = CASES[name].expect
    assert (stacked.rows, stacked.pixels, stacked.vectors, stacked.row_step) == (rows, pixels, vectors, row_step)
    assert (one_row.rows, one_row.pixels, one_row.vectors, tile.wide.pixels) == (1, 7, vectors, 7)
    text = job.files[f"{name}.c"]
    # one loop over row tiles: `runs` of `rows` rows, then the 7th row alone (row tile `runs`: row runs * rows)
    assert (f"for (int ohs = 0; ohs < {runs + left}; ++ohs) {{ /* row tiles: {runs} of {rows} rows, then {left} of "
            f"one */") in text
    assert f"if (ohs >= {runs}) {{\n" in text and f"const int oh = ohs + {runs * (rows - 1)};" in text
    # the 8-float tile runs the same row tiles' rows
    assert f"const int oh_first = ohs < {runs} ? ohs * {rows} : ohs + {runs * (rows - 1)};" in text
    # pixel 7 + 1 (row 1, column 1): one output row on (row_step), one column (stride 1 of 128 channels, stride 2
    # of 24)
    column = 128 if name == "stacked_7x7_residual_k32" else 2 * 24
    assert f"KG_FMA16(a8_0, x[xo + ch + {row_step + column}], w0);" in text
    # each pixel's store at its own row: the register epilogue's pixel blocks, or the tile[] path's pixel loop
    shifted = "oh_first + 1;" if name == "stacked_7x7_residual_k32" else "oh_first + pb / 7;"
    assert f"const int oh = {shifted}" in text
    # the 8-float tile beside it keeps the planner's row loop
    assert [text.count(f"{d}\n") for d in ("#if KG_VF16", "#else /* !KG_VF16 */", "#endif /* KG_VF16 */")] == [1] * 3
    if tile.wide.prefetch is not None:  # the calls counted in row tiles: 4 of them (3 stacked + 1) x 9 taps
        assert (stacked.prefetch.calls, one_row.prefetch.calls) == (36, 36)
        assert "(oh / 2)" in stacked.prefetch.call and "(oh - 3)" in one_row.prefetch.call


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("schedule, shared", [
    # one stripe of both 32-channel blocks: the team's `omp for` splits the loop over row tiles (2 each: rows 0-3
    # and 4-6), whichever variant runs
    ("{k_block: 32, k_split: 2}", "#pragma omp for schedule(static)"),
    # the schedule auto takes for 2 threads: 2 channel stripes shared out, each thread's rows its own
    ("auto", "#pragma omp for collapse(2) schedule(dynamic)"),
])
def test_a_team_keeps_the_row_tiles(monkeypatch, schedule, shared):
    """c: {threads: 2}: the tiles over two rows under a team, and the output matching numpy (built with -fopenmp,
    the wide tile where the host runs it)."""
    from kernelgen.targets.c import team

    monkeypatch.setattr(team, "MIN_WORK_PER_BARRIER", 0)  # a team whatever it costs
    config, job = _job("stacked_7x7_residual_k32", "{threads: 2}", schedule)
    text = job.files["stacked_7x7_residual_k32.c"]
    assert text.count("#pragma omp parallel") == 1 and shared in text
    loop = "for (int ohs = 0; ohs < 4; ++ohs) { /* row tiles: 3 of 2 rows, then 1 of one */"
    following = re.search(rf"{re.escape(shared)}\n(?: *#endif\n)? *(.+)", text).group(1)
    assert following == loop if "static" in shared else following.startswith("for (int ko_outer = 0;")
    assert loop in text
    result = validate(config, "c")
    assert result.passed, f"{result.detail} (seed {result.seed})"


def _host_has_avx512f() -> bool:
    cpuinfo = Path("/proc/cpuinfo")
    return cpuinfo.exists() and " avx512f" in cpuinfo.read_text()


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("variant", ["8-float", "16-float"])
def test_stacked_tiles_match_numpy(name, variant):
    if variant == "16-float" and not _host_has_avx512f():
        pytest.skip("this host does not run AVX-512F code")
    march = "x86-64-v3" if variant == "8-float" else "x86-64-v4"
    config, _ = _job(name, f"{{cflags: [-O3, -march={march}, -ffp-contract=fast]}}")
    result = validate(config, "c")
    assert result.passed, f"{result.detail} (seed {result.seed})"
