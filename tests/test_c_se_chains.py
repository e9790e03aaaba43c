"""The c target on MobileNetV3-small's block shapes (issue 48): a kernel's first squeeze-excite mul multiplied into
the input cache read (targets/c/gate_fold.py: no pass or cache of its own) where the copy's element is the mul's,
elsewhere the mul keeps its pass; a producer's tiles not summed on its consumer's padding rows (rewrite.py); a direct
depthwise tile's 16-float variant (tiles.py). Each case is compiled and run against numpy (a chain op by op, the
mul's output traced from the copy). No timings: `kernelgen bench` measures speed."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from builders import Case, make_config, toolchain
from conftest import requires_tool

from kernelgen import api

# MobileNetV3-small's SE tail at a small size: the gate, a 1x1 conv, a padded 3x3 depthwise (its window reaches a
# row above the image: the copy writes zeros there), a 1x1 projection; two row stripes
SE_TAIL = Case([1, 12, 10, 16], ["mul: {by: scale}", "{out_channels: 24, kernel: 1, activation: relu}",
                                  "{out_channels: 24, kernel: 3, pad: 1, groups: 24, activation: relu}",
                                  "{out_channels: 8, kernel: 1}"],
               side_inputs="{scale: {shape: [1, 1, 1, 16]}}", schedule="{h_split: 2, k_block: 8}", targets="[c]")
FOLDED = "mul #1: folded into the input cache read"

CASES = {
    "rows": (SE_TAIL, True),
    # mul and the conv that stores the output (MobileNetV3's `_mul_to_3` kernels), one stripe
    "pair": (SE_TAIL.with_(shape=[1, 7, 7, 32], ops=["mul: {by: scale}", "{out_channels: 16, kernel: 1}"],
                           side_inputs="{scale: {shape: [1, 1, 1, 32]}}", schedule="{k_block: 8}"), True),
    # two images: a gate per image, the copy's channel alone does not say which
    "batch": (SE_TAIL.with_(shape=[2, 12, 10, 16], side_inputs="{scale: {shape: [2, 1, 1, 16]}}"), False),
    # an input with channel planes: the copy is a transpose, its index not the mul's
    "nchw": (SE_TAIL.with_(input_layout="NCHW"), False),
}


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("name", list(CASES))
def test_the_first_gate_folds_into_the_input_read_where_the_copy_is_its_element(name):
    case, folds = CASES[name]
    config = make_config(f"gate_{name}", case)
    job = api.jobs(config, ("c",))["c"]
    source = job.files[f"gate_{name}.c"]
    assert any(note.startswith(FOLDED) for note in job.target_plan.notes) is folds
    assert ("/* mul #1 into " in source) is not folds  # the mul's own pass, where it stays
    read = re.split(r"/\* (?:mul #1|filter #2|conv2d #2)", source.split("/* input cache read")[1])[0]
    assert ("* side_scale[" in read) is folds
    result = api.validate(config, "c", seed=7)
    assert result.passed, result.detail
    assert result.checked == "op-by-op"  # the mul's output, traced from the copy, checked against numpy's


# the fused 1x1 before a 5x5 depthwise on 7x7 (MobileNetV3-small's features_10 block): the 1x1 sums the depthwise's
# padded window, 11 rows of which 4 are padding
PRODUCER = Case([1, 7, 7, 24], ["{out_channels: 48, kernel: 1, activation: hardswish}",
                                "{out_channels: 48, kernel: 5, pad: 2, groups: 48}"], schedule="{k_block: 16}",
                targets="[c]")


@requires_tool(*toolchain("c"))
def test_a_producer_sums_no_tile_on_its_consumers_padding_rows():
    config = make_config("producer", PRODUCER)
    source = api.generate(config, "c")["producer.c"]
    conv1 = source.split("/* conv2d #1 into")[1].split("/* conv2d #2")[0]
    # the row test guards each tile's sums (both vector widths), before the per-pixel stores' full position test
    assert conv1.count("if (KG_LIKELY(((ho_outer*8)+oh+(-2)) >= 0 && ((ho_outer*8)+oh+(-2)) < 7)) {") == 2
    result = api.validate(config, "c", seed=11)
    assert result.passed, result.detail
    assert result.checked == "op-by-op"


# a 5x5 depthwise alone on 7x7x96 (MobileNetV3-small's features_10_block_1 at a sixth of its channels): it reads the
# input in place (direct), 12 channel vectors a pixel
DIRECT = Case([1, 7, 7, 96], ["{out_channels: 96, kernel: 5, pad: 2, groups: 96, bias: true, activation: hardswish}"],
              schedule="{k_block: 96}", targets="[c]")
NARROW = "{cflags: [-O3, -march=x86-64-v3, -ffp-contract=fast]}"  # AVX2 + FMA: KG_VF16 is 0
WIDE = "{cflags: [-O3, -march=x86-64-v4, -ffp-contract=fast]}"  # AVX-512F: KG_VF16 is 1


def _avx512f() -> bool:
    return " avx512f " in Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else False


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("variant", ["8-float", "16-float"])
def test_a_direct_depthwise_tile_pairs_its_vectors_where_avx512f_is_targeted(variant):
    if variant == "16-float" and not _avx512f():
        pytest.skip("this host does not run AVX-512F code")
    config = make_config("direct", DIRECT.with_block("c", NARROW if variant == "8-float" else WIDE))
    tile = api.jobs(config, ("c",))["c"].target_plan.tiles[0]
    # a line of each pixel at a time (tile.DIRECT_GROUP: two 8-float vectors): 6 pixels of 2 vectors fill the 12
    # accumulators; 16-float, one vector of DIRECT_WIDE_PIXELS (4) pixels (7 columns: tiles of 4 and 3)
    assert tile.direct is not None and (tile.pixels, tile.groups, tile.lanes) == (6, 2, 8)
    assert tile.wide is not None and (tile.wide.pixels, tile.wide.groups, tile.wide.lanes) == (4, 2, 16)
    result = api.validate(config, "c", seed=5)
    assert result.passed, result.detail
