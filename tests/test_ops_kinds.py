"""kernelgen/ops: the op kinds' one table (conv2d, the pools, mul) and what every stage reads from a record: the
config's schema and check, the output shape, the useful FLOPs, the window, and the references (float against
loops written out here, uint8 by hand)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from kernelgen import api, ops
from kernelgen.config.keys import output_layout_key
from kernelgen.config.model import OP_KINDS, OpModel
from kernelgen.errors import ConfigError
from kernelgen.ops import OPS, Window
from kernelgen.ops.pools import MaxPoolOp, windows
from kernelgen.planner import plan
from kernelgen.reference import op_error_bound
from kernelgen.reference_quant import op_output

CHAIN = """name: chain
input: {shape: [1, 8, 8, 16]}
side_inputs: {se: {shape: [1, 1, 1, 32]}}
ops:
  - conv2d: {out_channels: 32, kernel: 3, pad: 1}
  - conv2d: {out_channels: 32, kernel: 3, pad: 1, groups: 32}
  - mul: {by: se}
  - maxpool: {kernel: 2, stride: 2}
  - avgpool: {kernel: 3, pad: 1}
  - global_avgpool: {}
  - conv2d: {out_channels: 10, bias: true}
"""


def test_the_table_holds_each_kind_once_under_its_config_key():
    assert list(OPS) == ["conv2d", "maxpool", "avgpool", "global_avgpool", "mul"]
    assert all(record.KEY == key for key, record in OPS.items())
    # a chain op's kind is a key of the table: a global average pool is an average pool over the whole image
    assert {key: record.KIND for key, record in OPS.items()} == {
        "conv2d": "conv2d", "maxpool": "maxpool", "avgpool": "avgpool", "global_avgpool": "avgpool", "mul": "mul"}
    assert [key for key, record in OPS.items() if record.UINT8] == ["conv2d", "maxpool", "avgpool", "global_avgpool",
                                                                    "mul"]
    assert [key for key, record in OPS.items() if record.FILTER] == ["conv2d"]


def test_the_schema_of_an_op_is_its_records_block():
    assert OP_KINDS == tuple(OPS)
    assert {key: field.annotation for key, field in OpModel.model_fields.items()} == {
        key: record.MODEL for key, record in OPS.items()}
    schema = api.json_schema()
    assert schema["$defs"]["OpModel"]["properties"]["maxpool"]["description"] == OPS["maxpool"].DOC
    assert schema["properties"]["ops"]["description"] == (
        "a list of one or more ops (- conv2d: {...}, - maxpool: {...}, - avgpool: {...}, - global_avgpool: {}, "
        "- mul: {...})")


def test_shapes_flops_and_windows_come_from_the_records():
    config = api.parse_config(CHAIN, "chain.yaml")
    assert [op.kind for op in config.ops] == ["conv2d", "conv2d", "mul", "maxpool", "avgpool", "avgpool", "conv2d"]
    shapes = [config.input_shape]
    for op in config.ops:
        shapes.append(OPS[op.kind].out_shape(op, shapes[-1]))
    assert shapes == [(1, 8, 8, 16), (1, 8, 8, 32), (1, 8, 8, 32), (1, 8, 8, 32), (1, 4, 4, 32), (1, 4, 4, 32),
                      (1, 1, 1, 32), (1, 1, 1, 10)]
    flops = [OPS[op.kind].flops(op, shapes[j], shapes[j + 1]) for j, op in enumerate(config.ops)]
    # dense 3x3: 2 per tap of 16 channels; depthwise: 2 per tap of 1 channel; mul: 1; max 2x2: 4 taps; mean 3x3:
    # 9 taps; the global mean: 4x4 taps; the classifier: 2 per input channel
    assert flops == [8 * 8 * 32 * 16 * 9 * 2, 8 * 8 * 32 * 9 * 2, 8 * 8 * 32, 4 * 4 * 32 * 4, 4 * 4 * 32 * 9,
                     32 * 16, 10 * 32 * 2]
    planned = plan(config)
    assert [g.flops for g in planned.ops] == flops and planned.flops == sum(flops)
    assert [g.out_shape for g in planned.ops] == shapes[1:]
    assert OPS["maxpool"].window(config.ops[3]) == Window(kernel=(2, 2), stride=(2, 2), pad=(0, 0, 0, 0))
    assert OPS["avgpool"].window(config.ops[5]) == Window(kernel=(4, 4), stride=(1, 1), pad=(0, 0, 0, 0))
    assert [OPS[op.kind].filter_shape(op, shapes[j]) for j, op in enumerate(config.ops)] == [
        (32, 16, 3, 3), (32, 1, 3, 3), None, None, None, None, (10, 32, 1, 1)]
    # filter and bias values per output channel: what the work count's filter traffic multiplies
    assert [OPS[op.kind].filter_reads(op, shapes[j][3]) for j, op in enumerate(config.ops)] == [
        16 * 9, 9, 0, 0, 0, 0, 32 + 1]


def test_a_window_spans_its_dilated_taps():
    window = Window(kernel=(3, 2), stride=(2, 1), pad=(1, 0, 1, 0), dilation=(2, 3))
    assert window.span == (5, 4)
    assert window.out_size(9, 7) == ((9 + 2 - 5) // 2 + 1, 7 - 4 + 1) == (4, 4)


def _pool_config(spec: str, shape=(2, 5, 6, 3)):
    text = f"name: p\ninput: {{shape: {list(shape)}}}\nops:\n  - {spec}\n"
    return api.parse_config(text, "p.yaml").ops[0]


def _loops(x, op, reduce):
    """A pool written out: each output position's window, positions inside the input only."""
    n, h, w, c = x.shape
    (kh, kw), (sh, sw), (top, left, bottom, right) = op.kernel, op.stride, op.pad
    oh, ow = (h + top + bottom - kh) // sh + 1, (w + left + right - kw) // sw + 1
    out = np.zeros((n, oh, ow, c))
    for b, i, j, k in itertools.product(range(n), range(oh), range(ow), range(c)):
        taps = [x[b, i * sh - top + r, j * sw - left + s, k] for r in range(kh) for s in range(kw)
                if 0 <= i * sh - top + r < h and 0 <= j * sw - left + s < w]
        out[b, i, j, k] = reduce(taps)
    return out


@pytest.mark.parametrize("spec, reduce", [
    ("maxpool: {kernel: 3, stride: 2, pad: 1}", max),
    ("avgpool: {kernel: [3, 2], stride: [1, 2], pad: [1, 1, 1, 0]}", lambda t: sum(t) / len(t)),
    ("avgpool: {kernel: 3, pad: 1, count_include_pad: true}", lambda t: sum(t) / 9),
    ("global_avgpool: {}", lambda t: sum(t) / len(t)),
])
def test_a_pools_float_reference_is_its_window_written_out(spec, reduce):
    op = _pool_config(spec)
    x = np.random.default_rng(3).standard_normal((2, 5, 6, 3)) - 2  # mostly negative: padding is never the max
    got = OPS[op.kind].reference(x, None, op, None)
    np.testing.assert_allclose(got, _loops(x, op, reduce), rtol=1e-13, atol=0)


def test_a_max_pools_bound_is_the_largest_error_in_its_window():
    op = _pool_config("maxpool: {kernel: 2, stride: 2}", shape=(1, 2, 4, 1))
    x = np.arange(8.0).reshape(1, 2, 4, 1)
    error = np.array([1, 5, 2, 3, 4, 0, 7, 6], dtype=np.float64).reshape(1, 2, 4, 1) * 1e-7
    value, bound = op_error_bound(op, None, None, [x], [error])
    assert value.ravel().tolist() == [5.0, 7.0]
    assert bound.ravel().tolist() == [5e-7, 7e-7]


def test_mul_scales_each_channel_by_its_side_value():
    text = ("name: m\ninput: {shape: [2, 3, 3, 4]}\nside_inputs: {s: {shape: [2, 1, 1, 4]}}\n"
            "ops:\n  - mul: {by: s}\n")
    (op,) = api.parse_config(text, "m.yaml").ops
    x = np.random.default_rng(5).standard_normal((2, 3, 3, 4))
    s = np.random.default_rng(6).standard_normal((2, 1, 1, 4))
    got = OPS["mul"].reference(x, None, op, {"s": s})
    for b, i, j, k in itertools.product(range(2), range(3), range(3), range(4)):
        assert got[b, i, j, k] == x[b, i, j, k] * s[b, 0, 0, k]


def test_a_grouped_convs_reference_is_its_sum_written_out():
    text = "name: g\ninput: {shape: [1, 5, 5, 4]}\nops:\n  - conv2d: {out_channels: 6, kernel: 3, pad: 1, groups: 2, " \
           "dilation: [1, 2], stride: [2, 1]}\n"
    (op,) = api.parse_config(text, "g.yaml").ops
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((1, 5, 5, 4)), rng.standard_normal((6, 2, 3, 3))
    got = OPS["conv2d"].reference(x, w, op, None)
    assert got.shape == OPS["conv2d"].out_shape(op, (1, 5, 5, 4)) == (1, 3, 3, 6)
    for i, j, k in itertools.product(range(3), range(3), range(6)):
        g = k // 3  # 3 output channels per group, each reading its group's 2 input channels
        want = sum(x[0, r, s, 2 * g + c] * w[k, c, rh, rw] for c in range(2) for rh in range(3) for rw in range(3)
                   for r, s in [(2 * i - 1 + rh, j - 1 + 2 * rw)] if 0 <= r < 5 and 0 <= s < 5)
        assert got[0, i, j, k] == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_uint8_references_by_hand():
    """A max pool keeps the bytes; a global mean of bytes 10 above the zero point is 10 * 0.05 = 0.5 real, 5 steps
    of the output's 0.1 above its zero point 128."""
    text = ("name: q\ndtype: uint8\ntargets: [hvx]\ninput: {shape: [1, 4, 4, 32]}\nops:\n"
            "  - maxpool: {kernel: 2, stride: 2}\n  - global_avgpool: {}\n")
    config = api.parse_config(text, "q.yaml")
    x = np.full((1, 4, 4, 32), 120, dtype=np.uint8)
    x[0, 1, 1, :] = 138  # the maximum of the first window
    pooled = op_output(config, 0, [x], None, None)
    assert pooled.dtype == np.uint8 and pooled[0, :, :, 0].tolist() == [[138, 120], [120, 120]]
    mean = op_output(config, 1, [x, np.full((1, 2, 2, 32), 138, dtype=np.uint8)], None, None)
    assert mean.shape == (1, 1, 1, 32) and set(mean.ravel().tolist()) == {133}


@pytest.mark.parametrize("spec, key, message", [
    ("avgpool: {kernel: 2, pad: 1}", "ops[0].avgpool.pad", "expected pad 0 with dtype uint8 (every window whole: "
                                                           "one divisor for the byte sums), got [1, 1, 1, 1]"),
    ("maxpool: {kernel: 2, pad: 2}", "ops[0].maxpool.pad", "expected pads smaller than the 2x2 window (a window "
                                                          "of padding alone has no maximum), got [2, 2, 2, 2]"),
])
def test_the_checks_messages_name_the_kind(spec, key, message):
    dtype = "dtype: uint8\ntargets: [hvx]\n" if "avgpool" in spec else ""
    with pytest.raises(ConfigError) as caught:
        api.parse_config(f"name: e\n{dtype}input: {{shape: [1, 8, 8, 32]}}\nops:\n  - {spec}\n", "e.yaml")
    (problem,) = caught.value.problems
    assert (problem.key, problem.message) == (key, message)


def test_an_ops_output_layout_is_found_under_the_key_the_file_spells():
    text = ("name: k\ninput: {shape: [1, 8, 8, 32]}\nops:\n  - avgpool: {kernel: 2, output_layout: NHWC}\n"
            "  - global_avgpool: {output_layout: NHWC}\n  - maxpool: {kernel: 1}\n")
    config = api.parse_config(text, "k.yaml")
    assert [output_layout_key(config, j) for j in range(3)] == [
        "ops[0].avgpool.output_layout", "ops[1].global_avgpool.output_layout", "input.layout"]


def test_the_shims_are_gone():
    import kernelgen.reference as reference
    from kernelgen.config import Conv2d

    assert not hasattr(reference, "hard_activation")
    assert not hasattr(Conv2d, "clamp") and not hasattr(Conv2d, "hard")
    assert ops.OPS["conv2d"].MODEL.__module__ == "kernelgen.ops.conv2d"


def test_what_a_window_does_is_read_from_the_records():
    """The accumulators' start, the reduction, the mean's divisor and uint8's kept quantization are fields of the
    kind, not tests of its name (planner/builder.py, quant.py, report.py, the gpu and hvx pool renderers)."""
    assert {key: (r.STEP, r.ACC_INIT, r.MEAN, r.KEEPS_QUANT) for key, r in OPS.items()} == {
        "conv2d": ("add", (0.0, "0"), False, False),
        "maxpool": ("max", (-ops.FLOAT32_MAX, "-FLT_MAX"), False, True),
        "avgpool": ("add", (0.0, "0"), True, False),
        "global_avgpool": ("add", (0.0, "0"), True, False),
        "mul": ("add", (0.0, "0"), False, False)}


class _MinPool(MaxPoolOp):
    """A min pool as a record alone: the scratch kind issue 45 asks a new op to be (the max pool's table entry
    stands in for its config key)."""

    ACC_INIT = (ops.FLOAT32_MAX, "FLT_MAX")
    TAP = ("acc[ki] = x < acc[ki] ? x : acc[ki];", "acc[ki] = min(acc[ki], x)")
    STEP = "min"

    def reference(self, x, w, op, sides):
        return windows(x, op, np.inf)[0].min(axis=0)


@pytest.mark.slow
def test_a_min_pool_record_alone_gives_kernels_that_validate(monkeypatch):
    """Every decision about the window comes from the record: swapped in for the max pool, a min pool's C and
    OpenCL kernels start at +FLT_MAX, take the minimum (each dialect's spelling), and match its numpy reference
    (a max's start would leave every output at or above the window's values, and fail); Vulkan's reads the same."""
    monkeypatch.setitem(OPS, "maxpool", _MinPool())
    config = api.parse_config("name: mn\ninput: {shape: [1, 9, 7, 12]}\ntargets: [c, opencl, vulkan]\nops:\n"
                              "  - conv2d: {out_channels: 12, kernel: 1}\n"
                              "  - maxpool: {kernel: 3, stride: 2, pad: 1}\n", "mn.yaml")
    (c,) = (text for name, text in api.generate(config, "c").items() if name.endswith(".c"))
    assert "acc[ki] = 3.4028234663852886e+38f;" in c and "x < acc[ki] ? x : acc[ki]" in c
    (cl,) = (text for name, text in api.generate(config, "opencl").items() if name.endswith(".cl"))
    assert "float acc = FLT_MAX;" in cl and "acc = fmin(acc, x);" in cl
    (vk,) = (text for name, text in api.generate(config, "vulkan").items() if name.endswith(".comp"))
    assert "float acc = 3.4028234663852886e+38;" in vk and "acc = min(acc, x);" in vk
    for target in ("c", "opencl"):
        result = api.validate(config, target, seed=3)
        assert result.passed, (target, result.detail)
