"""Checks that can fail (issue 27): a 4-op chain's kernel, broken in the middle of the chain (a bias dropped, one
channel's taps skipped, one op's output scaled by 1.001) or writing zeros, FAILS validation on opencl and vulkan,
whose intermediates the op-by-op check reads; the kernel as generated passes."""
from __future__ import annotations

import re
from dataclasses import replace

import pytest
from conftest import require_tools

from kernelgen import api
from kernelgen.measure.records import Status
from kernelgen.measure.validate import validate
from kernelgen.targets import TARGETS

CHAIN = """\
name: chain4
input: {shape: [1, 10, 9, 16]}
ops:
  - conv2d: {out_channels: 16, kernel: 3, pad: 1, bias: true, activation: relu6}
  - conv2d: {out_channels: 16, kernel: 3, pad: 1, bias: true, activation: relu6}
  - conv2d: {out_channels: 16, kernel: 1, bias: true, residual: input}
  - conv2d: {out_channels: 16, kernel: 3, pad: 1, bias: true}
targets: [opencl, vulkan]
opencl: {variant: buffer}
"""
TOOLS = {"opencl": ("py:pyopencl",), "vulkan": ("glslangValidator", "py:vulkan")}
# Where op j's code starts: each __kernel of the .cl (op order), each #if KG_OP == j block of the .comp.
OP_START = {"opencl": r"__kernel ", "vulkan": r"#if KG_OP == \d+"}
SOURCE = {"opencl": "chain4.cl", "vulkan": "chain4.comp"}
# mutation -> (op, {target: (old, new)}): the text in that op's code and what it becomes
MUTATIONS = {
    "bias dropped": (2, {"opencl": ("acc0_0 + bias_0", "acc0_0"), "vulkan": ("  v += bias[oc4];", "")}),
    "one channel's taps skipped": (2, {
        "opencl": ("acc0_0 = fma((float16)(x0.s1), w1_0, acc0_0);", ";"),
        "vulkan": ("O[i][j][k] = fma(vec4(v.y), F[b][fw][1][k], O[i][j][k]);", ";")}),
    "output scaled by 1.001": (2, {"opencl": ("  acc0_0 = fmin(", "  acc0_0 = 1.001f * fmin("),
                                   "vulkan": ("  v += bias[oc4];", "  v += bias[oc4];\n  v *= 1.001;")}),
    "zeros written": (4, {"opencl": ("vstore4(acc", "vstore4(0.0f * acc"),
                          "vulkan": ("store_dst(n, oh, ow, oc4, epilogue(", "store_dst(n, oh, ow, oc4, 0.0 * epilogue(")}),
}


def _mutated(text: str, target: str, op: int, old: str, new: str) -> str:
    starts = [m.start() for m in re.finditer(OP_START[target], text)] + [len(text)]
    begin, end = starts[op - 1], starts[op]
    section = text[begin:end]
    assert old in section, (target, op, old)
    return text[:begin] + section.replace(old, new) + text[end:]


def _job(target: str):
    return api.jobs(api.load_config(CHAIN), (target,))[target]


@pytest.mark.slow
@pytest.mark.parametrize("target", ["opencl", "vulkan"])
def test_the_generated_chain_passes_op_by_op(target):
    require_tools(*TOOLS[target])
    result = validate(TARGETS[target], _job(target), seed=11)
    assert result.status is Status.PASS and result.checked == "op-by-op", result.detail


@pytest.mark.slow
@pytest.mark.parametrize("mutation", list(MUTATIONS))
@pytest.mark.parametrize("target", ["opencl", "vulkan"])
def test_a_broken_chain_fails(target, mutation):
    require_tools(*TOOLS[target])
    job = _job(target)
    op, edits = MUTATIONS[mutation]
    name = SOURCE[target]
    broken = replace(job, files={**job.files, name: _mutated(job.files[name], target, op, *edits[target])})
    result = validate(TARGETS[target], broken, seed=11)
    assert result.status is Status.FAIL, (mutation, result)
    if op < len(job.config.ops):  # named where it went wrong, not only at the output
        assert f"conv2d #{op}: output[" in result.detail, result.detail
