"""A tiled row skips the tiles whose first pixel lies past the output's columns (targets/c/rewrite.py
_inside_tiles): where the planner's column stripes overrun the image, the last stripe's trailing tiles used to sum
pixels no store keeps. Checked on the guard the kernel carries (which tiles it runs) and on the kernel's output."""
from __future__ import annotations

import math
import re

import pytest
from builders import Case, make_config, toolchain
from conftest import requires_tool

from kernelgen.api import jobs, validate

# 112 columns in the planner's stripes of 24 (schedule auto): the last stripe, columns 96-119, overruns by 8
DEPTHWISE = Case([1, 112, 112, 96], ["{out_channels: 96, kernel: 3, pad: 1, groups: 96, bias: true, "
                                     "activation: relu6}"], "NHWC", "NHWC", "")
# the same kernel where the compiler targets AVX2 alone: the 8-float variant of the tile (6 pixels) is the one built
HASWELL = Case(DEPTHWISE.shape, DEPTHWISE.ops, "NHWC", "NHWC", "",
               blocks=(("c", "{cflags: [-O3, -march=haswell, -ffp-contract=fast]}"),))
STRIPES = re.compile(r"for \(int wo_outer = 0; wo_outer < (\d+); \+\+wo_outer\) \{ /\* output-column stripes of (\d+)")
ROW = re.compile(r"for \(int owb = 0; owb < (\d+); \+\+owb\) \{ /\* tiles of (\d+) pixels[^\n]*\n"
                 r"(?:[^\n]*\n){0,3}?\s*if \(\(\(wo_outer\*(\d+)\)\+\(owb \* (\d+)\)\) < (\d+)\) \{")


def _kernel(name: str, case: Case) -> str:
    text = jobs(make_config(name, case), ("c",))["c"].files[f"{name}.c"]
    start = text.index(f"void {name}(")
    return text[start:text.index("\nvoid ", start)] if "\nvoid " in text[start:] else text[start:]


def test_a_tile_past_the_image_is_not_summed():
    kernel = _kernel("skip_depthwise", DEPTHWISE)
    (stripes, width), = {(int(a), int(b)) for a, b in STRIPES.findall(kernel)}
    assert stripes * width > 112  # the case overruns, or there would be nothing to skip
    rows = ROW.findall(kernel)
    assert {int(pixels) for _, pixels, *_ in rows} == {4, 6}, rows  # the 16-float variant and the 8-float one
    for extent, pixels, guard_width, guard_step, columns in rows:
        extent, pixels = int(extent), int(pixels)
        assert (int(guard_width), int(guard_step), int(columns)) == (width, pixels, 112)
        assert extent == math.ceil(width / pixels)
        run = {(s, b) for s in range(stripes) for b in range(extent) if s * width + b * pixels < 112}
        wanted = {(s, b) for s in range(stripes) for b in range(extent)
                  if any(s * width + b * pixels + p < 112 for p in range(pixels))}  # a tile with a pixel to store
        assert run == wanted
        assert len(run) < stripes * extent  # some tiles are skipped: 2 of 30 at 4 pixels, 1 of 20 at 6


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("name,case", [("skip_depthwise", DEPTHWISE), ("skip_depthwise_haswell", HASWELL)])
def test_a_kernel_that_skips_tiles_still_writes_every_column(name, case):
    """Every output pixel, the last stripe's too, as numpy computes it (seeded inputs the kernel has not seen)."""
    result = validate(make_config(name, case), "c", seed=11)
    assert result.passed, result
