"""The whole epilogue (+ bias, + residual, the activation) as statement records: the Plan's Epilogue holds them in
order, the float reference computes the same order, and every target spells them through the one shared macro
(templates/_common/epilogue.j2), each load leaf (bias, residual) as the target reads it."""
from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest
from jinja2 import UndefinedError
from pycparser import c_ast, c_parser

from kernelgen import api
from kernelgen.emit import environment
from kernelgen.ops.activations import Clamp
from kernelgen.ops.dialect import C
from kernelgen.ops.hard_gates import HARDSWISH
from kernelgen.ops.op import epilogue as reference_epilogue, residual_of
from kernelgen.ops.statements import BIAS, RESIDUAL, Assign, Load, Op, Var, evaluate, loaded
from kernelgen.planner import plan
from kernelgen.targets.hvx.epilogue import QF32_SUM
from kernelgen.targets.opencl.code import OPENCL_C
from kernelgen.targets.vulkan.access import glsl_dialect
from kernelgen.targets.vulkan.plan import plan_vulkan

# bias + residual + an activation on every op kind of residual: the chain's input, op 1's output, none
CHAIN = """\
name: sums
input: {shape: [2, 7, 9, 6], layout: NHWC}
ops:
  - conv2d: {out_channels: 6, kernel: 3, pad: 1, bias: true, residual: input, activation: relu6}
  - conv2d: {out_channels: 6, kernel: 1, residual: 1, activation: hardswish}
  - conv2d: {out_channels: 5, kernel: 3, pad: 1, bias: true}
output: {layout: NHWC}
"""


def _config(targets: str = "[c]"):
    return api.parse_config(CHAIN + f"targets: {targets}\n", "sums.yaml")


def test_the_plans_epilogue_is_the_ordered_list_bias_residual_activation():
    first, second, third = (op.epilogue for op in plan(_config()).ops)
    assert BIAS == Assign("v", Op("add", (Var("v"), Load("bias"))))
    assert RESIDUAL == Assign("v", Op("add", (Var("v"), Load("residual"))))
    assert first.statements == (BIAS, RESIDUAL, *Clamp(lo=0.0, hi=6.0).statements())
    assert first.sums == (BIAS, RESIDUAL)
    assert second.statements == (RESIDUAL, *HARDSWISH.statements())
    assert third.statements == (BIAS,)
    assert [loaded(s) for s in first.statements] == [("bias",), ("residual",), (), ()]


@pytest.mark.parametrize("index", [0, 1, 2])
def test_the_statements_compute_the_references_epilogue_exactly(index):
    """float64 evaluation of the records against the float reference's epilogue (ops/op.py), bit for bit: the
    same operations in the same order (the residual added after the activation instead is a different number:
    checked too)."""
    op = _config().ops[index]
    rng = np.random.default_rng(45)
    conv, bias = rng.normal(0, 4, (2, 7, 9, 6)), rng.normal(0, 2, 6).astype(np.float32)
    sources = [rng.normal(0, 3, (2, 7, 9, 6)).astype(np.float32) for _ in range(2)]  # the input, op 1's output
    loads = {"bias": bias, "residual": residual_of(op, sources, None) if op.residual is not None else 0}
    # the epilogue written out in float64 as the reference computed it before it evaluated the records
    want = conv + (bias.astype(np.float64) if op.bias else 0)
    want = op.act.reference(want + (loads["residual"].astype(np.float64) if op.residual is not None else 0))
    np.testing.assert_array_equal(evaluate(op.epilogue.statements, conv, loads=loads), want)
    np.testing.assert_array_equal(reference_epilogue(conv, op, bias, sources), want)
    if op.residual is not None and op.epilogue.activated:
        moved = (*op.epilogue.sums[:-1], *op.epilogue.act.statements(), RESIDUAL)
        assert not np.array_equal(evaluate(moved, conv, loads=loads), want)


def test_the_float_reference_evaluates_the_ops_own_statements():
    """ops/op.py's epilogue is the op's statement records evaluated, not a second description: an op whose records
    add the residual after the relu6 gets exactly that from the reference (6 + 1 = 7, where clamping last gives 6)."""
    config_op = _config().ops[0]
    moved = (BIAS, *config_op.epilogue.act.statements(), RESIDUAL)
    op = SimpleNamespace(bias=True, residual=0, epilogue=SimpleNamespace(statements=moved))
    value, source = np.array([[[[9.0, -3.0]]]]), np.array([[[[1.0, 1.0]]]], dtype=np.float32)
    out = reference_epilogue(value, op, np.array([0.5, 0.5], dtype=np.float32), [source])
    assert out.tolist() == [[[[7.0, 1.0]]]]


def _render(steps, dialect, value="v", loads=None) -> str:
    macro = environment().from_string('{% import "_common/epilogue.j2" as e %}'
                                      '{{ e.statements(steps, d, value, "", loads=loads) }}')
    return macro.render(steps=steps, d=dialect, value=value, loads=loads or {})


def test_each_dialect_spells_the_sums_with_the_targets_loads():
    loads = {"bias": "bias_v", "residual": "res[i]"}
    steps = (BIAS, RESIDUAL)
    assert _render(steps, C, loads=loads) == "v = v + bias_v;\nv = v + res[i];\n"
    assert _render(steps, OPENCL_C.with_type("float4"), "acc0_0", loads) == (
        "acc0_0 = acc0_0 + bias_v;\nacc0_0 = acc0_0 + res[i];\n")
    assert _render(steps, glsl_dialect("float", "vec4"), loads=loads) == "v = v + bias_v;\nv = v + res[i];\n"
    # hvx qf32: an sf operand into the qf32 sum, which the kernel rounds to sf once after both
    assert _render(steps, QF32_SUM, loads=loads) == (
        "v = Q6_Vqf32_vadd_Vqf32Vsf(v, bias_v);\nv = Q6_Vqf32_vadd_Vqf32Vsf(v, res[i]);\n")


def test_a_load_the_target_does_not_spell_stops_the_render():
    with pytest.raises(UndefinedError):
        _render((RESIDUAL,), C, loads={"bias": "b"})


def _lines(text: str, start: str = "") -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith(start)]


def _kernel(config, target: str, suffix: str) -> str:
    return next(text for name, text in api.generate(config, target).items() if name.endswith(suffix))


def test_the_c_kernel_reads_each_load_as_one_operand():
    """The residual's guarded read (`cond ? input[...] : 0`) is parenthesized: `v = v + c ? a : b` would parse as
    `(v + c) ? a : b`. Each `v = v + ...` statement parses (pycparser) as v + one operand."""
    lines = _lines(_kernel(_config(), "c", ".c"), "v = v + ")
    for read in ("bias1[", "? input[", "? temp_output_1[", "bias3["):
        assert any(read in line for line in lines), read
    for line in lines:
        body = c_parser.CParser().parse(f"void f(void) {{ {line} }}").ext[0].body.block_items[0]
        assert isinstance(body, c_ast.Assignment) and isinstance(body.rvalue, c_ast.BinaryOp), line
        assert body.rvalue.op == "+" and isinstance(body.rvalue.left, c_ast.ID) and body.rvalue.left.name == "v", line


def test_the_c_kernel_adds_the_bias_then_the_residual_then_clamps():
    lines = _lines(_kernel(_config(), "c", ".c"))
    i = next(i for i, line in enumerate(lines) if line.startswith("v = v + (1 ? bias1["))
    assert lines[i - 1] == "float v = acc[ki];"
    assert lines[i + 1].startswith("v = v + ((") and "? input[" in lines[i + 1] and lines[i + 1].endswith(" : 0.0f);")
    assert lines[i + 2:i + 4] == ["v = v > 0.0f ? v : 0.0f;", "v = v < 6.0f ? v : 6.0f;"]
    assert lines[i + 4].startswith("temp_output_1[")


def test_the_vulkan_epilogue_leaves_out_the_bias_that_started_its_accumulators():
    config = _config("[vulkan]")
    first, second, third = plan_vulkan(config, plan(config)).ops
    assert first.statements == (RESIDUAL, *Clamp(lo=0.0, hi=6.0).statements())
    assert second.statements == (RESIDUAL, *HARDSWISH.statements())
    assert third.statements == () and third.epilogue  # the bias alone: in the accumulators, none in the function
    functions = re.findall(r"epilogue\(vec4 v, [^)]*\) \{\n(.*?)  return v;", _kernel(config, "vulkan", ".comp"), re.S)
    assert [_lines(f)[:1] for f in functions] == [["v = v + vec4(res[((n*378)+(oh*54)+(ow*6)+(oc4*4))], "
                                                   "4 * oc4 + 1 < 6 ? res[((n*378)+(oh*54)+(ow*6)+(oc4*4)+1)] : "
                                                   "float(0), 4 * oc4 + 2 < 6 ? res[((n*378)+(oh*54)+(ow*6)+(oc4*4)+2)]"
                                                   " : float(0), 4 * oc4 + 3 < 6 ? res[((n*378)+(oh*54)+(ow*6)+"
                                                   "(oc4*4)+3)] : float(0));"]] * 2 + [[]]
    assert _lines(functions[0])[1:] == ["v = max(v, 0.0);", "v = min(v, 6.0);"]


def test_the_opencl_kernel_adds_each_sum_in_its_own_statement():
    lines = _lines(_kernel(_config("[opencl]"), "opencl", ".cl"), "acc0_0 = acc0_0 + ")
    assert lines[0] == "acc0_0 = acc0_0 + bias_0;"  # op 1: bias, then the input at this pixel
    assert lines[1].startswith("acc0_0 = acc0_0 + (float8)(input[((n*378)+(oht*54)+(owt*24))], ")
