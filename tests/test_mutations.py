"""Checks that can fail (issue 27): a kernel broken in the middle of a chain (a bias dropped, a tap or a channel's
taps skipped, one op's output scaled by 1.001) or writing zeros FAILS validation: on c a 21-op MobileNetV2-shaped
chain (its -DKG_TRACE_INTERMEDIATES build stores every intermediate), on opencl and vulkan a 4-op chain (their
intermediates are device tensors); each op is held to its own rounding on the kernel's own input to it. The
kernels as generated pass."""
from __future__ import annotations

import re
from dataclasses import replace

import pytest
from builders import toolchain
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
# Where op j's code starts: each __kernel of the .cl (op order), each #if KG_OP == j block of the .comp.
OP_START = {"opencl": r"__kernel ", "vulkan": r"#if KG_OP == \d+"}
SOURCE = {"opencl": "chain4.cl", "vulkan": "chain4.comp"}
# mutation -> (op, {target: (old, new)}): the text in that op's code and what it becomes
MUTATIONS = {
    "bias dropped": (2, {"opencl": ("acc0_0 + bias_0", "acc0_0"),  # vulkan: the bias starts the accumulators
                         "vulkan": ("b = bias[min(owned_chunk(wg_oc4, k), ", "b = 0.0 * bias[min(owned_chunk(wg_oc4, k), ")}),
    "one channel's taps skipped": (2, {
        "opencl": ("acc0_0 = fma((float16)(x0.s1), w1_0, acc0_0);", ";"),
        "vulkan": ("O[i][j][k] = fma(vec4(v.y), F[b][fw][1][k], O[i][j][k]);", ";")}),
    "output scaled by 1.001": (2, {"opencl": ("  acc0_0 = fmin(", "  acc0_0 = 1.001f * fmin("),
                                   "vulkan": ("store_dst(n, oh, ow, oc4, epilogue(", "store_dst(n, oh, ow, oc4, 1.001 * epilogue(")}),
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
    require_tools(*toolchain(target))
    result = validate(TARGETS[target], _job(target), seed=11)
    assert result.status is Status.PASS and result.checked == "op-by-op", result.detail


@pytest.mark.slow
@pytest.mark.parametrize("mutation", list(MUTATIONS))
@pytest.mark.parametrize("target", ["opencl", "vulkan"])
def test_a_broken_chain_fails(target, mutation):
    require_tools(*toolchain(target))
    job = _job(target)
    op, edits = MUTATIONS[mutation]
    name = SOURCE[target]
    broken = replace(job, files={**job.files, name: _mutated(job.files[name], target, op, *edits[target])})
    result = validate(TARGETS[target], broken, seed=11)
    assert result.status is Status.FAIL, (mutation, result)
    if op < len(job.config.ops):  # named where it went wrong, not only at the output
        assert f"conv2d #{op}: output[" in result.detail, result.detail


def _mobilenet_chain(blocks: int = 7) -> str:
    """Inverted residual blocks: 1x1 expand + relu6, 3x3 depthwise + relu6, 1x1 project + the block's input."""
    ops = []
    for b in range(blocks):
        ops += ["  - conv2d: {out_channels: 16, kernel: 1, bias: true, activation: relu6}",
                "  - conv2d: {out_channels: 16, kernel: 3, pad: 1, groups: 16, bias: true, activation: relu6}",
                f"  - conv2d: {{out_channels: 8, kernel: 1, bias: true, residual: {'input' if b == 0 else 3 * b}}}"]
    return "name: mbv2_chain\ninput: {shape: [1, 8, 8, 8]}\nops:\n" + "\n".join(ops) + "\ntargets: [c]\n"


def _c_op(text: str, op: int, old: str, new: str) -> str:
    """`old` -> `new` in op `op`'s conv section and epilogue (up to the next op's filter read)."""
    begin, end = text.index(f"/* conv2d #{op} "), text.index(f"/* filter #{op + 1} cache read")
    section = text[begin:end]
    assert old in section, (op, old)
    return text[:begin] + section.replace(old, new) + text[end:]


def _c_sub(text: str, op: int, pattern: str, replacement: str) -> str:
    """re.sub of `pattern` in op `op`'s conv section and epilogue; it must match there."""
    begin, end = text.index(f"/* conv2d #{op} "), text.index(f"/* filter #{op + 1} cache read")
    section, count = re.subn(pattern, replacement, text[begin:end])
    assert count, (op, pattern)
    return text[:begin] + section + text[end:]


# A dense tile's simple epilogue runs on its accumulator vectors (register_epilogue.py: `kg_vf v = a0_0;`, then
# KG_ADD of the bias vector); anything else on the planner's per-channel `float v = acc[ki]`.
def _scaled(text: str, op: int) -> str:
    """Op `op`'s outputs times 1.001, in whichever epilogue form it has."""
    section = text[text.index(f"/* conv2d #{op} "):text.index(f"/* filter #{op + 1} cache read")]
    if "float v = acc[ki]" in section:
        return _c_op(text, op, "float v = acc[ki]", "float v = 1.001f * acc[ki]")
    return _c_sub(text, op, r"(kg_vf(16)? v = a\d+_\d+;)", r"\1 KG_FMAV\2(v, v, KG_SPLAT\2(0.001f));")


def _bias_dropped(text: str, op: int) -> str:
    """Op `op`'s bias times 0: the register epilogue's vector loads and the planner's scalar reads."""
    begin, end = text.index(f"/* conv2d #{op} "), text.index(f"/* filter #{op + 1} cache read")
    section, vectors = re.subn(rf"KG_LOAD(16)?\(&bias{op}\[", rf"KG_SPLAT\1(0.0f * bias{op}[", text[begin:end])
    section, scalars = re.subn(rf"(?<![&*] )bias{op}\[", f"0.0f * bias{op}[", section)
    assert vectors + scalars, op
    return text[:begin] + section + text[end:]


def _c_ops(text: str, op: int, changes: list[tuple[str, str]]) -> str:
    """_c_op for each (old, new) of `changes` whose `old` op `op`'s section holds (the first must be there)."""
    section = text[text.index(f"/* conv2d #{op} "):text.index(f"/* filter #{op + 1} cache read")]
    for k, (old, new) in enumerate(changes):
        text = _c_op(text, op, old, new) if k == 0 or old in section else text
    return text


C_MUTATIONS = {  # op 10: block 4's expand, op 11: its depthwise, in the middle of the 21 ops
    "bias dropped": lambda s: _bias_dropped(s, 10),
    # the depthwise micro-kernel: tap (1, 2) is the kernel row rh == 1's third filter pointer, w2, in the 8-float
    # tile and in its 16-float variant where it has one (the tile an AVX-512F host runs)
    "one tap skipped": lambda s: _c_ops(s, 11, [("KG_LOAD(w2 + ", "(float)(rh != 1) * KG_LOAD(w2 + "),
                                                ("KG_LOAD16(w2 + ", "(float)(rh != 1) * KG_LOAD16(w2 + ")]),
    "output scaled by 1.001": lambda s: _scaled(s, 11),
    # the last conv stores into the output directly (no write-back of the output cache)
    "zeros written": lambda s: re.sub(r"^(\s*output\[.*?\] = )", r"\g<1>0.0f * ", s, flags=re.M),
}


@pytest.mark.slow
@pytest.mark.parametrize("mutation", [None, *C_MUTATIONS])
def test_a_21_op_chain_on_c_fails_where_it_is_broken(mutation):
    require_tools(*toolchain("c"))
    job = api.jobs(api.load_config(_mobilenet_chain()), ("c",))["c"]
    assert len(job.config.ops) == 21
    result = _validate_mutated("c", job, "mbv2_chain.c", C_MUTATIONS.get(mutation), seed=5)
    if mutation not in (None, "zeros written"):
        op = 10 if mutation == "bias dropped" else 11
        assert f"conv2d #{op}: output[" in result.detail, result.detail


@pytest.mark.slow
def test_dump_writes_each_op_beside_its_reference_and_shows_where_a_chain_goes_wrong(tmp_path):
    """validate --dump: op<j>.npy (the kernel's) and op<j>.reference.npy (numpy on the kernel's own input to op j);
    with op 2 scaled by 1.001, op 1 still agrees and op 2 is 0.1% off."""
    import numpy as np
    from click.testing import CliRunner

    from kernelgen.cli import main

    require_tools(*toolchain("c"))
    path = tmp_path / "chain4.yaml"
    path.write_text(CHAIN.replace("targets: [opencl, vulkan]", "targets: [c]"))
    shown = CliRunner().invoke(main, ["validate", str(path), "--dump", str(tmp_path / "dump"), "--seed", "3"])
    assert shown.exit_code == 0, shown.output
    folder = tmp_path / "dump" / "chain4" / "c"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f"op{j}{kind}.npy" for j in range(1, 5) for kind in ("", ".reference"))
    for j in range(1, 5):
        got, want = np.load(folder / f"op{j}.npy"), np.load(folder / f"op{j}.reference.npy")
        assert got.shape == want.shape == (1, 10, 9, 16)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    job = api.jobs(api.load_config(path), ("c",))["c"]
    source = _scaled(job.files["chain4.c"], 2)  # op 2 only
    result = validate(TARGETS["c"], replace(job, files={**job.files, "chain4.c": source}), seed=3,
                      dump=tmp_path / "broken")
    assert result.status is Status.FAIL and "conv2d #2: output[" in result.detail
    broken = tmp_path / "broken" / "chain4" / "c"
    np.testing.assert_allclose(np.load(broken / "op1.npy"), np.load(broken / "op1.reference.npy"), rtol=1e-5, atol=1e-5)
    got, want = np.load(broken / "op2.npy"), np.load(broken / "op2.reference.npy")
    assert np.abs(got - want).max() > 1e-4 * np.abs(want).max()  # op 2 is where it goes wrong


HVX_MUTATIONS = {  # the float32 hvx kernel is the plan's loop nest in scalar C, run by qemu-hexagon
    "bias dropped": lambda s: _c_op(s, 2, "bias2[", "0.0f * bias2["),
    "one tap skipped": lambda s: _c_op(s, 2, "acc[ki] += x * filter_cache[",
                                       "if (rh != 1 || rw != 2) acc[ki] += x * filter_cache["),
    "output scaled by 1.001": lambda s: _c_op(s, 2, "float v = acc[ki]", "float v = 1.001f * acc[ki]"),
    # the last conv stores into the output directly (no write-back of the output cache)
    "zeros written": lambda s: re.sub(r"^(\s*output\[.*?\] = )", r"\g<1>0.0f * ", s, flags=re.M),
}


@pytest.mark.slow
@pytest.mark.parametrize("mutation", [None, *HVX_MUTATIONS])
def test_a_4_op_float_chain_on_hvx_fails_where_it_is_broken(mutation):
    """Under QEMU the driver built with KG_TRACE_INTERMEDIATES writes each intermediate as the kernel stored it."""
    require_tools(*toolchain("hvx"))
    job = api.jobs(api.load_config(CHAIN.replace("targets: [opencl, vulkan]", "targets: [hvx]")), ("hvx",))["hvx"]
    result = _validate_mutated("hvx", job, "chain4.c", HVX_MUTATIONS.get(mutation), seed=12)
    if mutation not in (None, "zeros written"):
        assert "conv2d #2: output[" in result.detail, result.detail


def _validate_mutated(target: str, job, name: str, mutate, seed: int):
    """The job as generated passes op by op; with `mutate` applied to its source `name`, it fails."""
    if mutate is None:
        result = validate(TARGETS[target], job, seed=seed)
        assert result.status is Status.PASS and result.checked == "op-by-op", result.detail
        return result
    broken = mutate(job.files[name])
    assert broken != job.files[name]
    result = validate(TARGETS[target], replace(job, files={**job.files, name: broken}), seed=seed)
    assert result.status is Status.FAIL, result
    return result


U8_CHAIN = """\
name: u8chain
dtype: uint8
input: {shape: [1, 12, 10, 24], layout: nhwc-8h8w32c}
quant: {input_scale: 0.05, input_zero_point: 120, weight_dtype: int8, weight_scale: 0.004, output_scale: 0.2,
        output_zero_point: 128, intermediate_scale: 0.1, intermediate_zero_point: 100, bias: true,
        requantization: float32}
ops:
  - conv2d: {out_channels: 40, kernel: 3, pad: 1, filter_layout: oihw-8i32o4i}
  - conv2d: {out_channels: 40, kernel: 3, pad: 1, groups: 40, filter_layout: oihw-8i32o4i}
  - conv2d: {out_channels: 24, kernel: 1, filter_layout: oihw-8i32o4i}
output: {layout: nhwc-8h8w32c}
schedule: {h_split: 2}
targets: [hvx]
"""


@pytest.mark.slow
@pytest.mark.parametrize("broken", [False, True])
def test_a_uint8_hvx_chain_is_checked_op_by_op_on_its_own_intermediates(broken):
    """The uint8 kernel built with KG_TRACE_INTERMEDIATES stores each intermediate once a stripe holds all its
    channels; an op one step off in the middle of the chain fails there, named by its op."""
    require_tools(*toolchain("hvx"))
    job = api.jobs(api.load_config(U8_CHAIN), ("hvx",))["hvx"]
    text = job.files["u8chain.c"]
    if broken:
        begin, end = text.index("/* ---- conv2d #2"), text.index("/* ---- conv2d #3")
        call = "x = kg_rq_float(x, fmult, fshift, fhalf, fmask);"
        assert call in text[begin:end]
        text = text[:begin] + text[begin:end].replace(
            call, "x = Q6_Vw_vadd_VwVw(kg_rq_float(x, fmult, fshift, fhalf, fmask), Q6_V_vsplat_R(1));") + text[end:]
    result = validate(TARGETS["hvx"], replace(job, files={**job.files, "u8chain.c": text}), seed=13)
    if not broken:
        assert result.status is Status.PASS and result.checked == "bit-exact op-by-op", result.detail
    else:
        assert result.status is Status.FAIL and "conv2d #2: output[" in result.detail, result.detail
