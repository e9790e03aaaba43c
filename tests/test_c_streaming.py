"""Streaming stores of a large depthwise output (targets/c/streaming.py): where they are emitted, and that a kernel
with them writes the bytes the plain stores write, into an output on a line boundary (non-temporal stores) and one
float past it (the plain-store fallback of KG_STREAM and kg_stream)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from builders import Case, c_library, make_config, toolchain
from conftest import requires_tool

from kernelgen.api import jobs
from kernelgen.measure.tensors import random_inputs
from kernelgen.targets.c import streaming

# 64 x 128 pixels of 128 channels: 4 MiB of output, streaming.STREAM_MIN_BYTES
LARGE = [1, 64, 128, 128]
CASES = {
    # an epilogue in registers (bias, relu6): each vector store a streaming one (KG_STREAM16 / KG_STREAM)
    "large_depthwise_relu6": Case(LARGE, ["{out_channels: 128, kernel: 3, pad: 1, groups: 128, bias: true, "
                                          "activation: relu6}"], "NHWC", "NHWC", ""),
    # a hardswish keeps the tile[] path: each pixel's block finished in acc, then kg_stream
    "large_depthwise_hardswish": Case(LARGE, ["{out_channels: 128, kernel: 3, stride: 1, pad: 1, groups: 128, "
                                              "bias: true, activation: hardswish}"], "NHWC", "NHWC", ""),
    # an NCHW output takes its vectors a lane at a time: plain stores, and no note saying otherwise
    "large_depthwise_into_nchw": Case(LARGE, ["{out_channels: 128, kernel: 3, pad: 1, groups: 128, bias: true, "
                                              "activation: relu6}"], "NHWC", "NCHW", ""),
    # a quarter of the output: plain stores
    "small_depthwise_relu6": Case([1, 32, 64, 128], ["{out_channels: 128, kernel: 3, pad: 1, groups: 128, "
                                                     "bias: true, activation: relu6}"], "NHWC", "NHWC", ""),
}
STREAMS = {"large_depthwise_relu6": "KG_STREAM16(&output[", "large_depthwise_hardswish": "kg_stream(&output[",
           "small_depthwise_relu6": None, "large_depthwise_into_nchw": None}


def _config_and_job(name: str):
    config = make_config(name, CASES[name])
    return config, jobs(config, ("c",))["c"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_depthwise_output_of_4_mib_or_more_streams_past_the_caches(name):
    job = _config_and_job(name)[1]
    text = job.files[f"{name}.c"]
    if STREAMS[name] is None:
        assert "KG_STREAM" not in text and "kg_stream" not in text and not job.target_plan.streams
        assert "past the caches" not in text
        return
    start = text.index(f"void {name}(")
    kernel = text[start:text.index("\nvoid ", start)]  # the kernel function alone, not its pack/unpack helpers
    assert STREAMS[name] in kernel and "KG_STREAM_FENCE();" in kernel and job.target_plan.streams
    # every store into the output streams: no plain `output[...] =` and no plain vector store into it is left
    assert not re.search(r"\boutput\[[^;]*\] = ", kernel) and not re.search(r"KG_STORE(16)?\(&output\[", kernel)
    assert "streams its 4,194,304-byte output past the caches" in text


def test_only_whole_lines_stream():
    """A store loop of a block of 16 channels (one line) streams; one of 8 (half a line) keeps its plain stores."""
    from kernelgen.plan_types import Loop, Stmt

    def loop(extent: int) -> Loop:
        return Loop(var="ki", extent=extent, body=(Stmt(code="float v = acc[ki];", summary=""),
                                                   Stmt(code="output[((ow*16)+ki)] = v;", summary="")))

    (whole, fence) = streaming.streamed((loop(16),), vectors=False)
    kept, stream = whole.body
    assert [n.code for n in kept.body] == ["float v = acc[ki];", "acc[ki] = v;"]
    assert stream.code == "kg_stream(&output[((ow*16)+0)], acc, 16);" and fence.code == "KG_STREAM_FENCE();"
    assert streaming.streamed((loop(8),), vectors=False) == (loop(8),)


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("name", ["large_depthwise_relu6", "large_depthwise_hardswish"])
@pytest.mark.parametrize("flags", [(), ("-mno-avx512f",), ("-DKG_SCALAR",)])
def test_streamed_outputs_are_the_plain_stores_bytes(name, flags, tmp_path, monkeypatch):
    """The same random tensors through the kernel with streaming stores and with plain ones (the threshold moved
    past the output), into an output on a 64-byte boundary and one a float past it: identical bytes each time
    (16-float vectors where this host has AVX-512F, 8-float, and the scalar struct)."""
    outputs, original = [], streaming.STREAM_MIN_BYTES
    for threshold in (original, 1 << 40):
        monkeypatch.setattr(streaming, "STREAM_MIN_BYTES", threshold)
        config, job = _config_and_job(name)
        assert job.target_plan.streams == (threshold == original)
        exe, library = c_library(job, tmp_path / str(threshold), flags)
        for shift in (0, 1):
            arrays = list(exe.arguments(random_inputs(config, job.plan, np.random.default_rng(50)), 0xFF))
            output = arrays[-2]
            assert output.ctypes.data % 64 == 0
            if shift:  # the same output, one float past a line boundary
                spare = np.full(output.size + 16, np.float32(255), np.float32)
                arrays[-2] = spare[shift:shift + output.size].reshape(output.shape)
            library.call(name, arrays)
            outputs.append(arrays[-2].tobytes())
    assert len(set(outputs)) == 1


@requires_tool(*toolchain("c"))
def test_the_bench_says_when_a_kernel_streams_its_output():
    """A warm run of a kernel that streams its output finds only its input in the caches: its rows say so."""
    from kernelgen.api import bench

    for name, streams in (("large_depthwise_relu6", True), ("small_depthwise_relu6", False)):
        rows = bench(_config_and_job(name)[0], "c", repeat=1)
        assert {row.when for row in rows} == {"cold", "warm"}
        assert all(("its output streamed past the caches" in row.measured) == streams for row in rows)
