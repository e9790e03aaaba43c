"""Issue 48: `schedule: auto` on the c target weighs each candidate's tiles (planner/tile_speed.py) beside its
traffic, says why the winner won, and the importer's group cost uses the same tile speed."""
import pytest

from kernelgen.api import parse_config
from kernelgen.onnx.fusion import estimate
from kernelgen.planner import plan
from kernelgen.planner.tile_speed import op_tiles
from kernelgen.report import text_report
from kernelgen.roofs import Roofs, TileSpeed
from kernelgen.targets.c import CPU_ROOFS

# ResNet18's layer1.0 as `kernelgen import` writes it: two 3x3 64->64 convs on 56x56, the block's input added
LAYER1_0 = """name: layer1_0
input: {shape: [1, 64, 56, 56], layout: NCHW}
ops:
  - conv2d: {out_channels: 64, kernel: [3, 3], pad: [1, 1, 1, 1], bias: true, activation: relu}
  - conv2d: {out_channels: 64, kernel: [3, 3], pad: [1, 1, 1, 1], bias: true, residual: input, activation: relu}
output: {layout: NCHW}
schedule: SCHEDULE
targets: [c]
"""
SPEED = CPU_ROOFS.tile_speed


def _chosen(schedule: str):
    p = plan(parse_config(LAYER1_0.replace("SCHEDULE", schedule)))
    c = p.search.chosen
    return p, (c.k_split, c.h_split, c.w_split, str(c.order), c.k_block, c.h_block, c.workspace_bytes, c.traffic_bytes)


def test_layer1_0_takes_two_vectors_a_pixel_where_traffic_alone_took_one():
    # by traffic alone (an explicit schedule's budget) the least bytes: k_block 8, 12 pixels x 1 vector tiles, 13
    # loads per 12 FMAs
    _, by_traffic = _chosen("{budget: auto, order: auto}")
    assert by_traffic == (1, 7, 7, "rows_outer", 8, 2, 524_288, 3_762_176)
    # schedule: auto: 9% more bytes (12-row stripes, full width, fit the 32-channel filter block), 6 x 2 tiles:
    # 7.18 ms measured, the least of targets/c/tile_speed.py's six, against 10.9 for k_block 8 (and 7.95 for 8-row
    # stripes, chosen while the 4 rows the fifth stripe has past the 56 were charged as computed)
    p, by_time = _chosen("auto")
    assert by_time == (1, 3, 7, "rows_outer", 32, 4, 520_192, 4_114_944)
    assert (p.k_block, p.h_block, p.w_split) == (32, 4, None)


def test_the_report_says_why_the_winner_won(monkeypatch):
    p, _ = _chosen("auto")
    lines = text_report(p).splitlines()
    why = lines[lines.index(next(line for line in lines if line.startswith("budget: "))) + 1]
    # the NCHW input's and output's 2752512 bytes through the transposes: 7 FLOPs a byte (targets/c/tile_speed.py)
    # each op's narrow (8-float) tiles, then the 16-float ones an AVX-512 host runs; priced as the mean of the two
    # conv2d #1's 17%: its 22-row windows (halo included) of 58 columns in 6-pixel tiles; conv2d #2's 7%: the 60
    # columns of its 6-pixel tiles, its rows past the 56 skipped (the loop nest's guard)
    assert why == ("  why: the least estimated time of 326 fitting: compute 6552.3 us (its tiles at 0.66 of the FMA "
                   "peak: conv2d #1 10 tile(s) of 6 pixels x 2 vector(s) a row of 58 (2 idle), 0.67 loads per FMA "
                   "(16-float vectors: 5 tile(s) of 12 pixels x 2 vector(s) a row of 58 (2 idle), 0.58 loads per FMA), "
                   "17% more pixels computed than kept; conv2d #2 10 tile(s) of 6 pixels x 2 vector(s) a row of 56 "
                   "(4 idle), 0.67 loads per FMA (16-float vectors: 4 tile(s) of 14 pixels x 2 vector(s) a row of 56, "
                   "0.57 loads per FMA), 7% more pixels computed than kept; transposing 2637824 bytes between "
                   "the tensors' layouts and the caches' 158.2 us) + traffic 179.7 us (c micro-kernel "
                   "(targets/c/tile_speed.py))")
    verdicts = [c.verdict for c in p.search.runners_up]
    assert verdicts[1:3] == ["moves 705536 more bytes (30.8 us) and its tiles take 6.9 us more",
                             "moves 352768 more bytes (15.4 us) and its tiles take 106.4 us more"]
    # the schedule traffic alone picks, further down
    import kernelgen.planner.search as search
    monkeypatch.setattr(search, "SHOWN_RUNNERS_UP", 400)
    p, _ = _chosen("auto")
    lost = [c.verdict for c in p.search.runners_up if (c.k_block, c.h_split, c.w_split, c.h_block) == (8, 7, 7, 2)]
    assert lost == ["its tiles (k_block 8 against 32) take 4374.6 us more, more than the 352768 bytes (15.4 us) it "
                    "saves"]
    # k_block 16 on 8-row stripes: one 16-float vector a pixel (28 x 1 tiles, 1.04 loads per FMA)
    sixteen = [c.verdict for c in p.search.runners_up if (c.k_block, c.h_split, c.w_split, c.h_block) == (16, 1, 7, 8)]
    assert sixteen == ["moves 705536 more bytes (30.8 us) and its tiles take 522.2 us more"]


@pytest.mark.parametrize("layout, shape, moved", [("NCHW", "[1, 64, 56, 56]", 1949696 + 802816),
                                                  ("NHWC", "[1, 56, 56, 64]", 0)])
def test_traffic_through_a_layout_change_costs_the_transposes(layout, shape, moved):
    """An NCHW tensor read into (and written back from) channels-innermost caches: its input bytes (halo rows
    included) and output bytes are charged at TRANSPOSE_FLOPS_PER_BYTE on top of the tiles in the budget search;
    NHWC moves as it is."""
    from kernelgen.planner.fitted import fit
    from kernelgen.planner.tile_speed import transpose_flops, transposed_bytes
    from kernelgen.planner.work import count_work
    text = LAYER1_0.replace("SCHEDULE", "{k_split: 1, h_split: 1, w_split: 7, order: rows_outer, k_block: 32, "
                                        "h_block: 8}").replace("NCHW", layout).replace("[1, 64, 56, 56]", shape)
    fitted = fit(parse_config(text), report=False)
    work = count_work(fitted.config, fitted.shapes, fitted.geometry, fitted.cut, 4)
    assert (work.traffic.input_bytes, work.traffic.output_bytes) == (1949696, 802816)
    assert transposed_bytes(fitted.config, fitted.geometry, work) == moved
    extra = transpose_flops(SPEED, fitted.config, fitted.geometry, work)
    assert SPEED.transpose_flops_per_byte == 7.0 and extra == pytest.approx(7.0 * moved, abs=1)


def test_explicit_budgets_and_several_cache_targets_keep_traffic_alone():
    p, _ = _chosen("{budget: auto, order: auto}")
    assert p.search.why == "" and all("tiles" not in c.verdict for c in p.search.runners_up)
    both = parse_config(LAYER1_0.replace("SCHEDULE", "auto").replace("targets: [c]", "targets: [c, hvx]"))
    assert both.schedule.speed is None  # an hvx tile is not the c micro-kernel's
    assert parse_config(LAYER1_0.replace("SCHEDULE", "auto")).schedule.speed is CPU_ROOFS


@pytest.mark.parametrize("k_block, cols, shape", [
    (8, 56, (5, 12, 1, 13 / 12)),  # 60 pixels computed for 56
    (16, 56, (10, 6, 2, 8 / 12)),
    (32, 56, (10, 6, 2, 8 / 12)),  # the kv loop runs the 6 x 2 tile twice
    (16, 8, (2, 4, 2, 6 / 8)),  # a stripe of 8 columns: 4 pixels a tile
    (8, 14, (2, 7, 1, 8 / 7)),
])
def test_tile_shapes_follow_the_micro_kernel(k_block, cols, shape):
    config = parse_config(LAYER1_0.replace("SCHEDULE", f"{{k_block: {k_block}}}"))
    t = op_tiles(SPEED, config, 1, cols)
    tiles, pixels, vectors, loads = shape
    assert (t.tiles, t.pixels, t.vectors) == (tiles, pixels, vectors) and t.loads_per_fma == pytest.approx(loads)
    assert t.slots == pytest.approx((1 + SPEED.load_slots * loads) * (1 + SPEED.row_pixels / cols))


def test_part_vectors_and_depthwise_taps_cost_more_slots():
    four = op_tiles(SPEED, parse_config(LAYER1_0.replace("SCHEDULE", "{k_block: 4}")), 1, 48)
    eight = op_tiles(SPEED, parse_config(LAYER1_0.replace("SCHEDULE", "{k_block: 8}")), 1, 48)
    assert (four.width, four.pixels, eight.pixels) == (4, 12, 12) and four.slots == pytest.approx(2 * eight.slots)
    depthwise = parse_config(LAYER1_0.replace("SCHEDULE", "{k_block: 32}").replace(
        "kernel: [3, 3], pad: [1, 1, 1, 1], bias: true, activation: relu}", "kernel: 3, pad: 1, groups: 64}", 1))
    t = op_tiles(SPEED, depthwise, 1, 56)
    assert (t.dense, t.loads_per_fma, t.slots) == (False, 2, 1 + 2 * SPEED.load_slots)  # no row charge: not fitted


def test_group_estimate_adds_the_tiles_time_to_the_traffic():
    roofs = Roofs(flops_per_second=100e9, bytes_per_second=20e9, source="test",
                  tile_speed=TileSpeed(lanes=8, half_lanes=4, accumulators=12, wide_vectors=2, load_slots=1.0,
                                       row_pixels=0, source="test"))
    one_roof = estimate(1_000_000, 1_000_000, 2_000_000, 0, None, roofs)
    tiles = estimate(1_000_000, 1_000_000, 2_000_000, 0, None, roofs, at_peak=2_500_000)
    assert one_roof.seconds == pytest.approx(max(1e6 / 100e9, 2e6 / 20e9))  # 100 us, the traffic
    assert tiles.seconds == pytest.approx(2.5e6 / 100e9 + 2e6 / 20e9)  # 25 + 100 us


def test_pixels_computed_past_the_stripe_edges_are_charged():
    from kernelgen.planner.fitted import fit
    from kernelgen.planner.tile_speed import computed_share
    from kernelgen.planner.work import count_work
    # 20-row stripes of 32 columns over 56 x 56: 2 column stripes x 6 tiles of 6 pixels on each of the 56 rows (the
    # third row stripe's 4 rows past the output are skipped by the loop nest's guard), 4032 pixels computed for 3136
    # kept (measured 9.02 ms against 7.18 for full-width 12-row ones, targets/c/tile_speed.py); conv2d #1 computes
    # every row of its 3 x 22-row windows (halos, the padding rows conv2d #2 reads), 4752 for 3480
    config = parse_config(LAYER1_0.replace("SCHEDULE", "{k_split: 1, h_split: 5, w_split: 4, order: rows_outer, "
                                                       "k_block: 32, h_block: 4}"))
    fitted = fit(config, report=False)
    work = count_work(fitted.config, fitted.shapes, fitted.geometry, fitted.cut, 4)
    assert work.op_pixels[1] == 56 * 56
    assert computed_share(SPEED, fitted.config, fitted.geometry, fitted.cut, work, 2) == pytest.approx(4032 / 3136)
    assert work.op_pixels[0] == 3480
    assert computed_share(SPEED, fitted.config, fitted.geometry, fitted.cut, work, 1) == pytest.approx(4752 / 3480)


# MobileNetV3-small's features.5 block as imported: a 1x1 40->240 and a 5x5 depthwise on 14x14
SE_FREE_BLOCK = """name: features_5_block_0_to_1
input: {shape: [1, 40, 14, 14], layout: NCHW}
ops:
  - conv2d: {out_channels: 240, kernel: [1, 1], bias: true, activation: hardswish}
  - conv2d: {out_channels: 240, kernel: [5, 5], pad: [2, 2, 2, 2], groups: 240, bias: true, activation: hardswish}
output: {layout: NCHW}
schedule: auto
targets: [c]
"""


@pytest.mark.parametrize("threads, stripes, executed", [(1, 1, 6_115_200), (2, 2, 7_190_400), (4, 4, 8_572_800)])
def test_threads_are_charged_for_their_busiest_share_of_the_stripes(threads, stripes, executed):
    """One row stripe is the cheapest work on one thread; with 2 or 4 (which share out whole stripes, each thread
    its own) the search splits the rows, recomputing the 1x1's halo rows (4 a cut for the 5x5): 1.18x and 1.40x
    the FLOPs, half and a quarter of them on the busiest thread."""
    extra = f"c: {{threads: {threads}}}\n" if threads > 1 else ""
    chosen = plan(parse_config(SE_FREE_BLOCK + extra)).search.chosen
    assert (chosen.stripes, chosen.executed_flops, str(chosen.order)) == (stripes, executed, "rows_outer")


# MobileNetV2's features_17_conv_2_to_18 as imported: 1x1 960->320, then 1x1 320->1280, on 7x7
TAIL = """name: features_17_conv_2_to_18
input: {shape: [1, 7, 7, 960], layout: NHWC}
ops:
  - conv2d: {out_channels: 320, kernel: [1, 1], filter_layout: OHWI16o, bias: true}
  - conv2d: {out_channels: 1280, kernel: [1, 1], filter_layout: OHWI16o, bias: true, activation: relu6}
output: {layout: NHWC}
schedule: SCHEDULE
targets: [c]
"""


@pytest.mark.parametrize("k_block, cols, shape", [
    (8, 7, None),  # not whole 16-float vectors: the AVX-512 host runs the 8-float tile
    (16, 7, (1, 7, 1, 8 / 7)),
    (32, 7, (1, 7, 2, 9 / 14)),
    (16, 56, (2, 28, 1, 29 / 28)),  # 28 accumulators a tile (microkernel.WIDE_ACCUMULATORS)
    (32, 56, (4, 14, 2, 16 / 28)),
])
def test_the_16_float_tiles_follow_the_micro_kernel(k_block, cols, shape):
    from kernelgen.planner.tile_speed import double_tiles
    t = double_tiles(SPEED, parse_config(TAIL.replace("SCHEDULE", f"{{k_block: {k_block}}}")), 1, cols)
    if shape is None:
        assert t is None
        return
    tiles, pixels, vectors, loads = shape
    assert (t.tiles, t.pixels, t.vectors, t.width) == (tiles, pixels, vectors, 16)
    assert t.loads_per_fma == pytest.approx(loads)
    assert t.slots == pytest.approx((1 + SPEED.load_slots * loads) * (1 + SPEED.row_pixels / cols))


@pytest.mark.parametrize("k_block, cols, rows, stacked, loads", [
    (32, 7, 7, 2, (6 * 16 / 28 + 9 / 14) / 7),  # ResNet18's layer4: 14 pixels x 2 vectors, the 7th row alone
    (32, 7, 8, 2, 16 / 28),
    (16, 7, 7, 3, (6 * 22 / 21 + 8 / 7) / 7),  # 1 vector: 4 rows (28 pixels) would leave 3 rows on 7-pixel tiles
    (16, 7, 8, 4, 29 / 28),
    (32, 14, 14, 1, 16 / 28),  # a 14-pixel row fills the 28 accumulators alone
    (32, 7, 1, 1, 9 / 14),  # one row a stripe: nothing to stack
])
def test_a_16_float_tile_spans_the_rows_its_price_chooses(k_block, cols, rows, stacked, loads):
    from kernelgen.planner.tile_speed import double_tiles
    t = double_tiles(SPEED, parse_config(TAIL.replace("SCHEDULE", f"{{k_block: {k_block}}}")), 1, cols, rows)
    assert (t.rows, t.pixels, t.tiles) == (stacked, cols, 1)
    assert t.slots == pytest.approx((1 + SPEED.load_slots * loads) * (1 + SPEED.row_pixels / cols))


def _slots(config_text: str, speed) -> list[float]:
    from kernelgen.planner.fitted import fit
    from kernelgen.planner.tile_speed import op_slots
    from kernelgen.planner.work import count_work
    f = fit(parse_config(config_text), report=False)
    work = count_work(f.config, f.shapes, f.geometry, f.cut, 4)
    return [op_slots(speed, f.config, f.geometry, f.cut, work, j) for j in range(1, len(f.config.ops) + 1)]


def test_a_schedule_is_priced_on_both_kinds_of_host():
    """The mean of the 8-float host (the 8-float tile against its peak) and the AVX-512 host (the 16-float tile
    against its own, or the 8-float tile at half of it). On the narrow tile alone k_block 8's 7 x 1 tiles (1.14 loads
    per FMA) and k_block 32's 4 x 2 (0.75, but 8 pixels computed for 7) cost nearly the same and 8 won; the 16-float
    host runs 32 as 7 x 2 (0.64 loads per FMA) and 8 at half its peak."""
    from dataclasses import replace
    narrow_only = replace(SPEED, double_lanes=0, double_accumulators=0)
    explicit = "{k_split: 1, h_split: 1, order: rows_outer, k_block: KB, h_block: 8}"
    eight, thirty_two = (TAIL.replace("SCHEDULE", explicit.replace("KB", kb)) for kb in ("8", "32"))
    on_narrow = [(1 + SPEED.load_slots * 8 / 7) * (1 + SPEED.row_pixels / 7)] * 2
    assert _slots(eight, narrow_only) == pytest.approx(on_narrow)
    assert _slots(eight, SPEED) == pytest.approx([s * 1.5 for s in on_narrow])  # (1 + 2) / 2
    by_4x2 = (1 + SPEED.load_slots * 6 / 8) * (1 + SPEED.row_pixels / 7) * 8 / 7
    # the 16-float host: 7 x 2 tiles stacked over 2 rows (stacked_rows), 14 pixels: 6 of the 7 rows at 16 loads per
    # 28 FMAs, the 7th on a one-row tile at 9 per 14
    by_7x2 = (1 + SPEED.load_slots * (6 * 16 / 28 + 9 / 14) / 7) * (1 + SPEED.row_pixels / 7)
    assert _slots(thirty_two, narrow_only) == pytest.approx([by_4x2] * 2)
    assert _slots(thirty_two, SPEED) == pytest.approx([(by_4x2 + by_7x2) / 2] * 2)
    # a depthwise tap loads as many values on either host: one price
    depthwise = LAYER1_0.replace("SCHEDULE", "{k_block: 32}").replace(
        "kernel: [3, 3], pad: [1, 1, 1, 1], bias: true, activation: relu}", "kernel: 3, pad: 1, groups: 64}", 1)
    assert _slots(depthwise, SPEED)[0] == _slots(depthwise, narrow_only)[0] == 1 + 2 * SPEED.load_slots


def test_the_tail_takes_two_16_float_vectors_a_pixel():
    # measured on the AVX-512 host (`kernelgen bench --target c`, warm): k_block 8 1.25 ms, k_block 32 0.57 ms
    chosen = plan(parse_config(TAIL.replace("SCHEDULE", "auto"))).search.chosen
    assert (chosen.k_block, chosen.stripes, str(chosen.order)) == (32, 1, "rows_outer")


EXPAND = """name: features_3_conv_0
input: {shape: [1, 56, 56, 24], layout: NHWC}
ops:
  - conv2d: {out_channels: 144, kernel: [1, 1], FILTER bias: true, activation: relu6}
output: {layout: NHWC}
schedule: SCHEDULE
targets: [c]
"""


@pytest.mark.parametrize("schedule, layout, copied", [
    ("{k_block: 32, order: rows_outer, h_block: 8}", "filter_layout: OHWI16o,", 7 * 5 * 32 * 24),  # reach channel 159
    ("{k_block: 16, order: rows_outer, h_block: 8}", "filter_layout: OHWI16o,", 0),  # 9 whole blocks: in place
    ("{k_block: 32, order: rows_outer, h_block: 8}", "", 0),  # OIHW: every schedule copies it alike
])
def test_a_filter_copied_where_it_could_be_read_in_place_is_charged(schedule, layout, copied):
    """MobileNetV2's 1x1 24->144 on 56x56 (AVX-512 host, min of interleaved runs): k_block 16 0.170 ms, 32 0.224 (its
    7 row stripes each copy five 32-channel blocks, the last half past the tensor); the copy is charged at
    TileSpeed.filter_copy_flops an element."""
    from kernelgen.planner.fitted import fit
    from kernelgen.planner.tile_speed import copied_filter, op_slots, peak_flops
    from kernelgen.planner.work import count_work
    f = fit(parse_config(EXPAND.replace("SCHEDULE", schedule).replace("FILTER ", layout + " " if layout else "")),
            report=False)
    work = count_work(f.config, f.shapes, f.geometry, f.cut, 4)
    assert copied_filter(SPEED, f.config, f.geometry, f.cut, 1) == copied
    tiles = work.op_flops[0] * op_slots(SPEED, f.config, f.geometry, f.cut, work, 1)
    assert peak_flops(SPEED, f.config, f.geometry, f.cut, work) == round(tiles + SPEED.filter_copy_flops * copied)


FEATURES_15_CONV_2 = """name: features_15_conv_2
input: {shape: [1, 7, 7, 960], layout: NHWC}
ops:
  - conv2d: {out_channels: 160, kernel: [1, 1], filter_layout: OHWI16o, bias: true}
output: {layout: NHWC}
schedule: auto
targets: [c]
"""


def test_channel_stripes_stay_inside_an_in_place_filter():
    # it took 3 stripes of 64 channels (the third past the 160, so every stripe copied its 64 x 960 block):
    # 0.38 ms in the network program; 5 of 32, read in place, 0.155. A filter read in place takes no cache
    # (test_filter_in_place.py): the whole 7 x 7 x 960 input in one stripe, its 5 channel blocks of 32 inside
    p = plan(parse_config(FEATURES_15_CONV_2))
    chosen = p.search.chosen
    assert (chosen.k_block, chosen.k_split, chosen.stripes) == (32, 5, 1)
    assert [c.name for c in p.caches] == ["input", "output"]


def test_a_1x1_conv_on_one_pixel_keeps_the_narrow_vectors_on_both_hosts():
    """A classifier's 1x1 on one pixel runs as dot products of 8-float vectors (the c target's dot tile) at any
    k_block: the AVX-512 host runs it at half its peak, whatever the channel block (at k_block 32 MobileNetV3-small's
    squeeze-excite FCs took 0.034 ms against 0.013 at 16)."""
    from dataclasses import replace
    narrow_only = replace(SPEED, double_lanes=0, double_accumulators=0)
    fc = ("name: fc\ninput: {shape: [1, 1, 1, 576], layout: NHWC}\nops:\n  - conv2d: {out_channels: 1024, kernel: 1, "
          "bias: true}\noutput: {layout: NHWC}\nschedule: {k_block: KB}\ntargets: [c]\n")
    for kb in ("16", "32"):
        text = fc.replace("KB", kb)
        assert _slots(text, SPEED) == pytest.approx([1.5 * s for s in _slots(text, narrow_only)])
