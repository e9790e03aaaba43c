"""Issue 48: a dense filter the c tiles read in place (filter_layout: OHWI16o) takes no filter cache, so the budget
search spends the budget on wider stripes (ResNet18's 7x7x512 convs: one stripe of every channel, not two
input-channel chunks of 16 stripes); and the tile model keeps a classifier tail's 3x3 conv on whole 16-float vectors."""
import pytest
from builders import toolchain
from conftest import requires_tool

from kernelgen.api import jobs, parse_config, validate
from kernelgen.planner import plan
from kernelgen.targets.c.filter_prefetch import MIN_REDUCE, filter_prefetch, prefetch_line, prefetch_pointer

# ResNet18's layer4_0_conv2 as `kernelgen import` writes it, at 256 channels (a 2.4 MB filter)
DEEP = """name: deep
input: {shape: [1, 7, 7, 256], layout: NHWC}
ops:
  - conv2d: {out_channels: 256, kernel: [3, 3], pad: [1, 1, 1, 1], FILTER bias: true, activation: relu}
OPS
output: {layout: NHWC}
schedule: auto
targets: [c]
"""
POOL_FC = """  - global_avgpool: {}
  - conv2d: {out_channels: 1000, kernel: [1, 1], bias: true}"""


def _plan(filter_layout: str, tail: str = ""):
    text = DEEP.replace("FILTER ", f"filter_layout: {filter_layout}, " if filter_layout else "")
    return plan(parse_config(text.replace("OPS\n", tail + "\n" if tail else ""), "deep.yaml"))


def test_a_filter_read_in_place_takes_no_cache_and_the_budget_one_stripe():
    p = _plan("OHWI16o")
    assert [c.name for c in p.caches] == ["input", "output"]
    chosen = p.search.chosen
    # every channel in one stripe: the 9 x 9 x 256 input cache (82944 bytes) and the 7 x 7 x 256 output's
    assert (chosen.k_split, chosen.c_split, chosen.stripes, chosen.workspace_bytes) == (8, 1, 1, 83968 + 51200)
    # the planner's own loops (where no tile fits) read the tensor at its OHWI16o offsets
    body = "\n".join(str(n) for n in p.kernel.body)
    assert "filter_cache" not in body and "acc[ki] += x * filter1[" in body


def test_an_oihw_filter_keeps_its_cache_and_its_stripes():
    p = _plan("")
    assert [c.name for c in p.caches][:2] == ["input", "filter"]
    # the 32-channel filter block (294912 bytes) leaves room for one block a stripe: 8 stripes
    assert (p.search.chosen.k_split, p.search.chosen.stripes) == (1, 8)


def test_a_chain_into_a_classifier_keeps_the_widest_block_that_fits():
    p = _plan("OHWI16o", POOL_FC)
    assert str(p.search.chosen.order) == "rows_outer"
    # the classifier's 1000 rows in blocks of 16 (1008) would compute fewer idle channels than 32 (1024), but the
    # 16-float tiles of the 3x3 conv would run one vector a pixel (layer4_1_conv2_to_fc: 2.84 ms against 2.35): the
    # tile model's price for both kinds of host (tile_speed.py) keeps 32
    assert p.search.chosen.k_block == 32
    # the filter cache holds the classifier's block of rows alone (the dot tiles' OIHW rows), not the 3x3 conv's
    assert [(c.name, c.logical_shape) for c in p.caches[:2]] == [("input", (1, 9, 9, 256)), ("filter", (32, 256, 1, 1))]


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("tail", ["", POOL_FC])
def test_filters_read_in_place_match_numpy(tail):
    config = parse_config(DEEP.replace("FILTER ", "filter_layout: OHWI16o, ").replace("OPS\n", tail + "\n" if tail
                                                                                       else ""), "deep.yaml")
    result = validate(config, "c")
    assert result.passed, f"{result.detail} (seed {result.seed})"


def test_the_wide_tile_prefetches_the_next_blocks_filter_a_tap_run_at_a_time():
    lone = DEEP.replace("FILTER ", "filter_layout: OHWI16o, ").replace("OPS\n", "")
    config = parse_config(lone + "c: {winograd: false}\n", "deep.yaml")  # the direct tile (Winograd: winograd.py)
    text = jobs(config, ("c",))["c"].files["deep.c"]
    # 7 rows in 4 row tiles (3 of 2 rows, Tile.over_rows, then the 7th row alone) x 1 tile x 1 kv step x 9 taps =
    # 36 runs a 32-channel block for its 2 x 9 runs of 256 lines: 2 runs each, run call / 2 and its half call % 2
    # (128 lines of 16 elements on), a line every 2 steps; blocks of 16 channels 9 x 256 x 16 = 36864 elements
    # apart, taps 4096; one stripe of all 16 blocks (589824), the next block 2 on
    for row_tile in ("(oh / 2)", "(oh - 3)"):  # rows 0, 2, 4 by two; row 6 the 4th row tile
        assert f"const int pc = (({row_tile} * 1 + owb) * 1 + kv) * 9 + rh * 3 + rw, pu = pc / 2;" in text
    assert ("const float *const pf = pu < 18 ? filter1 + ko_outer * 589824 + ko_inner * 73728 + 73728 + (pu / 9) * "
            "36864 + (pu % 9) * 4096 + (pc % 2) * 2048 : 0;" in text)
    assert text.count("if (pf && rc % 2 == 0) KG_PREFETCH(pf + rc / 2 * 16);") == 2  # the 16-float tiles only


def test_no_prefetch_where_the_runs_are_too_few_or_too_short():
    runs = dict(ahead="f", call="c", taps=9, blocks=2, block_stride=1, tap_stride=1, line=16)
    assert filter_prefetch(calls=17, reduce=256, **runs) is None
    assert filter_prefetch(calls=18, reduce=256, **runs).units == 18
    assert filter_prefetch(calls=18, reduce=MIN_REDUCE - 1, **runs) is None  # too short a run to pay


def test_tap_runs_share_a_run_of_lines_where_there_are_more_of_them():
    """63 tap runs for 18 runs of 256 lines: 3 tap runs each (the 9 past 54 bring none), pieces of 86 lines, a line
    every 3 steps; 35 tap runs: one run each (the old burst), as the one-part form spells it."""
    runs = dict(ahead="f", call="c", taps=9, blocks=2, block_stride=1, tap_stride=1, line=16, reduce=256)
    three = filter_prefetch(calls=63, **runs)
    assert three.parts == 3
    assert [s.code for s in prefetch_pointer(three)] == [
        "const int pc = c, pu = pc / 3;",
        "const float *const pf = pu < 18 ? f + (pu / 9) * 1 + (pu % 9) * 1 + (pc % 3) * 1376 : 0;"]
    assert prefetch_line(three).code == "if (pf && rc % 3 == 0) KG_PREFETCH(pf + rc / 3 * 16);"
    one = filter_prefetch(calls=35, **runs)
    assert one.parts == 1 and prefetch_line(one).code == "if (pf) KG_PREFETCH(pf + rc * 16);"
    assert prefetch_pointer(one)[0].code == "const int pu = ((c) * 18 + 34) / 35;"
