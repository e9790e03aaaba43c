"""hardswish and hardsigmoid in a conv's epilogue: the config keys, the numpy reference against onnxruntime, and
every target's kernel against that reference on odd shapes (channels off every vector width, batch 2, a stride-2
depthwise conv on an odd image, a residual before the gate). A kernel whose gate is wrong fails."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from builders import toolchain
from conftest import require_tools, requires_tool

from kernelgen import api
from kernelgen.errors import ConfigError
from kernelgen.measure.records import Status
from kernelgen.measure.validate import validate as validate_job
from kernelgen.ops import HardSigmoid
from kernelgen.planner import plan
from kernelgen.report import text_report
from kernelgen.targets import TARGETS

TOOLS = {name: toolchain(name) for name in TARGETS}  # each target's own list (`kernelgen targets`)

CHAIN = """\
name: gates
input: {shape: [2, 9, 7, 6], layout: NHWC}
ops:
  - conv2d: {out_channels: 10, kernel: 1, bias: true, activation: hardswish}
  - conv2d: {out_channels: 10, kernel: 3, stride: 2, pad: 1, groups: 10, bias: true,
             activation: {hardsigmoid: {alpha: 0.16666667, beta: 0.5}}}
  - conv2d: {out_channels: 5, kernel: 3, pad: 1, bias: true, activation: hardsigmoid}
  - conv2d: {out_channels: 5, kernel: 1, residual: 3, activation: hardswish}
output: {layout: NHWC}
schedule: {budget: 65536}
"""


def test_the_keys_become_gates_in_the_epilogue():
    config = api.parse_config(CHAIN, "gates.yaml")
    hards = [op.epilogue.hard for op in config.ops]
    assert hards[0] == HardSigmoid(alpha=1 / 6, beta=0.5, times_value=True)
    assert hards[1] == HardSigmoid(alpha=0.16666667, beta=0.5)
    assert hards[2] == HardSigmoid(alpha=0.2, beta=0.5)  # ONNX HardSigmoid's defaults
    assert [op.activation for op in config.ops] == ["hardswish", "hardsigmoid[0.166667, 0.5]", "hardsigmoid",
                                                    "hardswish"]
    assert config.ops[3].epilogue.steps == ("residual", "hardswish")
    report = text_report(plan(config))
    assert "+ conv2d #3, hardswish" in report, report


@pytest.mark.parametrize("spec, key, expected", [
    ("{hardsigmoid: {alpha: 0.2, gamma: 1}}", "ops[0].conv2d.activation", "gamma"),
    ("{hardsigmoid: {alpha: .inf}}", "ops[0].conv2d.activation", "hardsigmoid"),
    ("hardswhish", "ops[0].conv2d.activation", "hardswish"),
    ("{hardsigmoid: {alpha: 1.0e+39}}", "ops[0].conv2d.activation.hardsigmoid", "a float32 holds"),
])
def test_bad_gates_are_refused_at_their_key(spec, key, expected):
    text = ("name: bad\ninput: {shape: [1, 4, 4, 4]}\nops:\n"
            f"  - conv2d: {{out_channels: 4, activation: {spec}}}\n")
    with pytest.raises(ConfigError) as error:
        api.parse_config(text, "bad.yaml")
    message = str(error.value)
    assert message.startswith("bad.yaml:4:"), message
    assert key in message and expected in message, message


def test_a_uint8_gate_without_a_quant_block_is_refused_at_its_key():
    """A uint8 hardswish maps the conv's own bytes through a table: without the op's conv_scale and conv_zero_point
    there are no such bytes (exit 2 at the activation); with them the config loads, and a gate after a residual
    add is refused (the add's bytes through a table: not generated)."""
    text = ("name: q\ndtype: uint8\ninput: {shape: [1, 8, 8, 32], layout: nhwc-8h8w32c}\n"
            "quant: {input_scale: 0.05, input_zero_point: 128, weight_scale: 0.01, output_scale: 0.1, "
            "output_zero_point: 100}\nops:\n  - conv2d: {out_channels: 32,\n      activation: hardswish}\n"
            "targets: [hvx]\n")
    with pytest.raises(ConfigError, match=r"^q\.yaml:7:19: error: ops\[0\]\.conv2d\.activation: expected quant: "
                                          r"\{conv_scale: \.\.\., conv_zero_point: \.\.\.\} on the op with a hardswish"):
        api.parse_config(text, "q.yaml")
    quantized = text.replace("activation: hardswish}", "activation: hardswish, quant: {conv_scale: 0.2, "
                                                       "conv_zero_point: 120}}")
    assert api.parse_config(quantized, "q.yaml").ops[0].act.times_value
    with pytest.raises(ConfigError, match=r"ops\[0\]\.conv2d\.activation: expected none, relu, relu6 or a clamp "
                                          r"after a residual add with dtype uint8"):
        api.parse_config(quantized.replace("out_channels: 32,", "out_channels: 32, residual: input,"), "q.yaml")


@requires_tool("py:onnxruntime", "py:onnx")
def test_the_reference_is_onnxruntimes_hardswish_and_hardsigmoid():
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    x = np.concatenate([np.linspace(-4, 4, 801), [-3, 3, -2.5, 2.5, 0]]).astype(np.float32)
    nodes = [helper.make_node("HardSwish", ["x"], ["s"]),
             helper.make_node("HardSigmoid", ["x"], ["g"], alpha=1 / 6, beta=0.5),
             helper.make_node("HardSigmoid", ["x"], ["d"])]
    graph = helper.make_graph(nodes, "gates", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [x.size])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [x.size]) for n in "sgd"])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    swish, gate, default = session.run(None, {"x": x})
    x64 = x.astype(np.float64)
    # float32 arithmetic against float64: a few roundings of values below 4
    np.testing.assert_allclose(HardSigmoid(alpha=1 / 6, beta=0.5, times_value=True).reference(x64), swish,
                               rtol=0, atol=4e-7)
    np.testing.assert_allclose(HardSigmoid(alpha=1 / 6, beta=0.5).reference(x64), gate, rtol=0, atol=2e-7)
    np.testing.assert_allclose(HardSigmoid(alpha=0.2, beta=0.5).reference(x64), default, rtol=0, atol=2e-7)


@pytest.mark.parametrize("target", ["c", "hvx", "opencl", "vulkan"])
def test_every_target_matches_the_reference(target):
    require_tools(*TOOLS[target])
    config = api.parse_config(CHAIN + f"targets: [{target}]\n", "gates.yaml")
    result = api.validate(config, target, seed=5)
    assert result.passed, f"{result.detail} (seed {result.seed})"
    assert result.checked == "op-by-op", result.checked
    assert result.bound_ratio <= 1.0


# The gate of op 1 (hardswish, alpha 1/6) read as ONNX's HardSigmoid default 0.2: an error far above the bound.
WRONG_ALPHA = {"c": ("0.16666666666666666f", "0.2f"), "opencl": ("0.16666666666666666f", "0.2f"),
               "vulkan": ("0.16666666666666666", "0.2")}


@pytest.mark.parametrize("target", sorted(WRONG_ALPHA))
def test_a_wrong_gate_fails(target):
    require_tools(*TOOLS[target])
    job = api.jobs(api.parse_config(CHAIN + f"targets: [{target}]\n", "gates.yaml"), (target,))[target]
    old, new = WRONG_ALPHA[target]
    name = next(n for n, text in job.files.items() if old in text)
    # every copy of the constant: the c target writes a conv's store twice (whole 32-channel blocks unguarded, a
    # channel tail guarded), and only one of them runs for a given block
    broken = replace(job, files={**job.files, name: job.files[name].replace(old, new)})
    result = validate_job(TARGETS[target], broken, seed=5)
    assert result.status is Status.FAIL, result


def qf32_job(chain: str):
    """A 4-op chain of CHAIN's shapes in HVX's blocked layouts, for v73's qf32 variant: its hvx job."""
    blocked = chain.replace("NHWC", "nhwc-8h8w32c").replace("bias: true", "bias: true, filter_layout: oihw-8i32o4i")
    blocked = blocked.replace("residual: 3,", "residual: 3, filter_layout: oihw-8i32o4i,").replace("65536", "262144")
    config = api.parse_config(blocked + "hvx: {arch: v73, float_compute: qf32}\ntargets: [hvx]\n", "gates.yaml")
    job = api.jobs(config, ("hvx",))["hvx"]
    assert job.target_plan.qf32 is not None, job.target_plan.notes
    return job


@requires_tool("clang-19")
def test_the_qf32_variant_compiles_the_gates(tmp_path):
    from kernelgen.targets.hvx.runtime import compile_program

    job = qf32_job(CHAIN)
    text = "\n".join(job.files.values())
    assert text.count("g = Q6_Vsf_vmax_VsfVsf(g, act_c2);") == 4  # one gate per op (its 0.0, the third literal)
    assert "v = Q6_Vsf_equals_Vqf32(Q6_Vqf32_vmpy_VsfVsf(v, g));" in text  # hardswish's product
    compile_program(job, tmp_path)
