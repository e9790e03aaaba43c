"""A dense tile's epilogue on its accumulators (targets/c/register_epilogue.py, issue 48): taken where the store is
bias, residual and clamps into a channels-innermost cache or NHWC output in whole channel blocks, the tile[] path
kept elsewhere, and the kernel's output the same bits as the tile[] path's (the same operations in the same order),
with the 16-float, 8-float and scalar vector macros. No timings here."""
from __future__ import annotations

import numpy as np
import pytest
from builders import Case, c_library, make_config, toolchain
from conftest import requires_tool

from kernelgen.api import jobs, validate
from kernelgen.measure.tensors import random_inputs
from kernelgen.targets.c import rewrite
from kernelgen.targets.c.register_epilogue import contiguous, direct_store

# name: (input shape, ops, input layout, output layout, schedule; expect: which ops' tiles run it in registers)
CASES = {name: Case(*row[:5], expect=row[5]) for name, row in {
    # MobileNetV2's features_2_conv_0_to_1 in small: 1x1 16->48 + relu6 into the cache (its padding column and row
    # stored as zeros), then a depthwise conv over that cache (depthwise_epilogue.py)
    "expansion_into_a_padded_cache": ([1, 9, 13, 16], ["{out_channels: 48, kernel: 1, bias: true, activation: relu6}",
                                                       "{out_channels: 48, kernel: 3, stride: 2, pad: 1, groups: 48, "
                                                       "bias: true, activation: relu6}"],
                                      "NHWC", "NHWC", "{k_block: 16}", [True, True]),
    # a depthwise conv reading the input in place into the output: 48 channels in the planner's blocks of 16, border
    # tiles (the padding's zero vectors) and a row of 21 pixels in tiles that do not divide it
    "depthwise_direct_into_the_output": ([1, 7, 21, 48], ["{out_channels: 48, kernel: 3, pad: 1, groups: 48, bias: true, "
                                                          "activation: relu6}"], "NHWC", "NHWC",
                                         "{k_block: 16, k_split: 3}", [True]),
    # the last op's store sent to the NHWC output, with a residual add and a clamp after it
    "projection_with_residual_into_the_output": ([1, 6, 11, 32], ["{out_channels: 32, kernel: 1, bias: true, "
                                                                  "residual: input, activation: [-1, 1]}"],
                                                 "NHWC", "NHWC", "{k_block: 32}", [True]),
    # ... and to an NCHW output: a lane at a time
    "into_an_nchw_output": ([1, 5, 7, 16], ["{out_channels: 16, kernel: 3, pad: 1, bias: true, activation: relu}"],
                            "NHWC", "NCHW", "{k_block: 16}", [True]),
    # hardswish (products) and 24 of 32 channels (a channel test): the tile[] path
    "hardswish_keeps_the_tile": ([1, 6, 7, 16], ["{out_channels: 32, kernel: 1, bias: true, activation: hardswish}"],
                                 "NHWC", "NHWC", "{k_block: 16}", [False]),
    "partial_block_keeps_the_tile": ([1, 6, 7, 16], ["{out_channels: 24, kernel: 1, bias: true, activation: relu6}"],
                                     "NHWC", "NHWC", "{k_block: 32}", [False]),
}.items()}


def _job(name: str, monkeypatch=None, *, in_registers: bool = True):
    if not in_registers:
        monkeypatch.setattr(rewrite, "register_epilogue", lambda *args: None)
        monkeypatch.setattr(rewrite, "depthwise_register_epilogue", lambda *args: None)
    config = make_config(name, CASES[name])
    return config, jobs(config, ("c",))["c"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_epilogue_runs_in_registers_where_the_store_is_simple(name):
    _, job = _job(name)
    text = job.files[f"{name}.c"]
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith("/* conv2d #") and line[0] == " "]
    sections = ["\n".join(lines[a:b]) for a, b in zip(starts, [*starts[1:], len(lines)])]
    assert [("epilogue in registers" in s) for s in sections] == CASES[name].expect
    if name == "expansion_into_a_padded_cache":  # the consumer's padding: zeros, under the planner's test
        assert "KG_STORE(&temp_output[" in text and ", KG_ZERO);" in text
        assert "v = KG_MIN16(v, KG_SPLAT16(6.0f));" in text and "v = KG_MAX(v, KG_SPLAT(0.0f));" in text
    if name == "projection_with_residual_into_the_output":
        assert "KG_STORE16(&output[" in text and "output_cache[" not in text.split("void ")[-1].split("(void)")[-1]
        assert "v = KG_MAX16(v, KG_SPLAT16(-1.0f));" in text
    if name == "into_an_nchw_output":
        assert "for (int lane = 0; lane < 16; ++lane) output[" in text


def test_a_store_is_contiguous_where_ki_is_an_added_term():
    assert contiguous("((oh*10848)+(ow*96)+(ko_outer_1*32)+ki)")
    assert not contiguous("((ki*49)+(oh*7)+ow)")  # NCHW: channels a plane apart
    assert not contiguous("(ki / 8)*64+ki % 8") and not contiguous("(oh*7)+ow")
    assert direct_store("KG_STORE16(&output_cache[(ow*32)+ki], v);", "(ow*32)+(ko_inner*32+ki)") == \
        "KG_STORE16(&output[(ow*32)+(ko_inner*32+ki)], v);"
    assert direct_store("output_cache[(ow*32)+ki] = v;", "(ow*32)+ki") is None


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("flags", [(), ("-mno-avx512f",), ("-DKG_SCALAR",)])
def test_the_output_is_the_tile_paths_bit_for_bit(name, flags, tmp_path, monkeypatch):
    """The same random tensors through both kernels: identical bytes (16-float vectors where this host has
    AVX-512F, the 8-float ones, and the scalar struct); and numpy agrees (validate)."""
    outputs = []
    for in_registers in (True, False):
        config, job = _job(name, monkeypatch, in_registers=in_registers)
        assert ("epilogue in registers" in job.files[f"{name}.c"]) == (in_registers and any(CASES[name].expect))
        exe, library = c_library(job, tmp_path / str(in_registers), flags)
        arrays = exe.arguments(random_inputs(config, job.plan, np.random.default_rng(48)), 0xFF)
        library.call(name, arrays)
        outputs.append(arrays[-2].tobytes())
    assert outputs[0] == outputs[1]
    monkeypatch.undo()
    if not flags:
        config, _ = _job(name)
        result = validate(config, "c")
        assert result.passed, f"{result.detail} (seed {result.seed})"
