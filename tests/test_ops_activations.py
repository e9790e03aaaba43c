"""kernelgen/ops: the activation kinds' one table, their statement records, and what every stage reads from a record
(the float reference and the uint8 byte table evaluate the same statements the kernels are rendered from)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kernelgen import api, ops
from kernelgen.emit import environment
from kernelgen.ops.activations import Clamp
from kernelgen.ops.dialect import C
from kernelgen.ops.hard_gates import HARDSWISH, HardSigmoid
from kernelgen.ops.leaky_relu import LeakyRelu
from kernelgen.ops.sigmoid import SIGMOID, SILU, Sigmoid
from kernelgen.ops.statements import ARITY, Assign, Lit, Op, Var, evaluate, literals


def test_the_table_holds_each_kind_once_with_its_spellings_and_onnx_types():
    assert list(ops.ACTIVATIONS) == ["none", "clamp", "hardsigmoid", "leaky_relu", "sigmoid"]
    assert ops.NAMED == {"none": ops.IDENTITY, "relu": Clamp(lo=0.0), "relu6": Clamp(lo=0.0, hi=6.0),
                         "hardswish": HARDSWISH, "hardsigmoid": HardSigmoid(alpha=0.2, beta=0.5),
                         "leaky_relu": LeakyRelu(alpha=0.01), "sigmoid": SIGMOID, "silu": SILU}
    assert ops.BY_ONNX == {"Relu": Clamp, "HardSigmoid": HardSigmoid, "HardSwish": HardSigmoid,
                           "LeakyRelu": LeakyRelu, "Sigmoid": Sigmoid}
    assert {key: kind.UINT8 for key, kind in ops.ACTIVATIONS.items()} == {
        "none": "range", "clamp": "range", "hardsigmoid": "table", "leaky_relu": "table", "sigmoid": "table"}
    assert list(ops.Parameters.model_fields) == ["hardsigmoid", "leaky_relu"]


@pytest.mark.parametrize("spec, record, name", [
    ("relu", Clamp(lo=0.0), "relu"),
    ("[-1.5, 2]", Clamp(lo=-1.5, hi=2.0), "clamp[-1.5, 2]"),
    ("hardswish", HARDSWISH, "hardswish"),
    ("{hardsigmoid: {alpha: 0.25}}", HardSigmoid(alpha=0.25, beta=0.5), "hardsigmoid[0.25, 0.5]"),
    ("leaky_relu", LeakyRelu(alpha=0.01), "leaky_relu"),
    ("{leaky_relu: {alpha: 0.1}}", LeakyRelu(alpha=0.1), "leaky_relu[0.1]"),
    ("{leaky_relu: {}}", LeakyRelu(alpha=0.01), "leaky_relu[0.01]"),
])
def test_a_spelling_becomes_its_record_in_the_epilogue(spec, record, name):
    text = f"name: a\ninput: {{shape: [1, 4, 4, 4]}}\nops:\n  - conv2d: {{out_channels: 4, activation: {spec}}}\n"
    (op,) = api.parse_config(text, "a.yaml").ops
    assert (op.epilogue.act, op.activation, op.epilogue.steps) == (record, name, (name,))


def test_statements_are_three_address_records():
    v = Var("v")
    assert Clamp(lo=0.0, hi=6.0).statements() == (Assign("v", Op("max", (v, Lit(0.0)))),
                                                   Assign("v", Op("min", (v, Lit(6.0)))))
    assert Clamp(lo=0.0).statements() == (Assign("v", Op("max", (v, Lit(0.0)))),)  # no step for an infinite bound
    assert ops.IDENTITY.statements() == ()
    assert literals(HARDSWISH.statements()) == (1 / 6, 0.5, 0.0, 1.0)
    with pytest.raises(AssertionError):
        Op("max", (v,))  # max takes two operands
    with pytest.raises(AssertionError):
        Op("mul", (v, Op("add", (v, v))))  # operands are leaves: no dialect needs precedence
    assert set(C.forms) == set(ARITY)


def test_the_c_dialect_spells_each_step():
    macro = environment().from_string('{% import "_common/epilogue.j2" as e %}'
                                      '{{ e.statements(steps, d, "acc", "  ") }}')
    assert macro.render(steps=LeakyRelu(alpha=0.1).statements(), d=C) == (
        "  float a = acc * 0.1f;\n  acc = acc > 0.0f ? acc : a;\n")
    assert macro.render(steps=HARDSWISH.statements(), d=C) == (
        "  float g = acc * 0.16666666666666666f + 0.5f;\n  g = g > 0.0f ? g : 0.0f;\n  g = g < 1.0f ? g : 1.0f;\n"
        "  acc = acc * g;\n")


def test_the_reference_is_the_statements_on_float32_literals():
    x = np.linspace(-5, 5, 1001)
    a, b = float(np.float32(1 / 6)), 0.5
    np.testing.assert_array_equal(HARDSWISH.reference(x), x * np.clip(a * x + b, 0, 1))  # exactly, in float64
    np.testing.assert_array_equal(Clamp(lo=0.1, hi=6.0).reference(x), np.clip(x, float(np.float32(0.1)), 6.0))
    # float32 evaluation rounds every step: alpha * v first, then + beta
    v = np.float32(1.3)  # inside the linear part (0.76)
    want = np.float32(np.float32(v * np.float32(0.2)) + np.float32(0.5))
    assert evaluate(HardSigmoid(alpha=0.2, beta=0.5).statements(), v, np.float32) == want


def test_a_byte_table_is_the_activation_between_dequantize_and_quantize():
    """Byte q: v = (q - z) * s in float32, the activation in float32, then rint(y / s_out) + z_out, saturated."""
    table = LeakyRelu(alpha=0.1).byte_table(0.05, 100, 0.02, 30)
    f32 = np.float32
    for q in (0, 1, 99, 100, 101, 180, 255):
        v = f32(q - 100) * f32(0.05)
        y = v if v > 0 else f32(v * f32(0.1))
        assert table[q] == int(min(255, max(0, np.rint(f32(y / f32(0.02))) + 30))), q
    assert table[100] == 30 and table[0] == 5 and table[255] == 255  # -5 * 0.1 / 0.02 = -25; 7.75 / 0.02 saturates


def test_the_error_bound_uses_the_kinds_slope_and_roundings():
    u = 2.0 ** -24
    assert Clamp(lo=0.0, hi=6.0).lipschitz() == 1.0 and Clamp(lo=0.0).own_error(np.ones(1), u, 0.0) == 0.0
    assert LeakyRelu(alpha=0.1).lipschitz() == 1.0 and LeakyRelu(alpha=-1.5).lipschitz() == 1.5
    assert LeakyRelu(alpha=-1.5).own_error(np.array([4.0]), u, 0.0)[0] == 6.0 * u
    assert HardSigmoid(alpha=0.2, beta=0.5).lipschitz() == 0.2
    assert math.isclose(HARDSWISH.lipschitz(), 1 + (0.5 + 1))  # |alpha| * reach: (|beta| + 1) / |alpha|
