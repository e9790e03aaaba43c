"""Errors at their own key (issue 32 items 4 and 5): a target option's problem at that option's line and column,
not at the first key of its block with the key doubled; a layout limit at the layout that asks for it (an
intermediate's: the op's output_layout, or input.layout, which it keeps); a residual's conv_scale at its key, by
`plan` as by `build`. And messages that help: opencl.device lists its profiles; 5e-2 is a number."""
from __future__ import annotations

import pytest
from click.testing import CliRunner
from typing import get_args

from kernelgen.api import load_config
from kernelgen.cli import main
from kernelgen.targets.opencl.options import OpenCLModel
from kernelgen.config.yamlmarks import load


def where(text: str, before: str) -> str:
    """line:col (1-based) of what follows the first `before` in text: the value a key names."""
    at = text.index(before) + len(before)
    return f"{text.count(chr(10), 0, at) + 1}:{at - text.rfind(chr(10), 0, at)}"


def _errors(tmp_path, text: str, command: str = "build") -> tuple[str, list[str]]:
    path = tmp_path / "case.yaml"
    path.write_text(text)
    args = [command, str(path)] + (["-o", str(tmp_path / "out")] if command == "build" else [])
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    return str(path), [line for line in result.stderr.splitlines() if ": error: " in line]


HEAD = "name: places\ninput: {shape: [1, 8, 8, 8]}\nops:\n  - conv2d: {out_channels: 8, kernel: 3, pad: 1}\n"

OPTION_CASES = {  # config text, the value's key as the file writes it, the error after "error: "
    "vulkan wg_size": (HEAD + "targets: [vulkan]\nvulkan:\n  device: lavapipe\n  wg_size: [64, 64, 1]\n",
                       "  wg_size: ", "vulkan.wg_size: expected 3 positive ints with a product <= 1024"),
    "vulkan ivc_tile": (HEAD + "targets: [vulkan]\nvulkan:\n  device: lavapipe\n  ivc_tile: [1, 1, 3]\n",
                        "  ivc_tile: ", "vulkan.ivc_tile: expected positive [oh, ow, oc] with oc a multiple of 4"),
    "vulkan wg_tile": (HEAD + "targets: [vulkan]\nvulkan:\n  device: lavapipe\n  wg_size: [2, 1, 1]\n"
                              "  wg_tile: [1, 1, 4]\n",
                       "  wg_tile: ", "vulkan.wg_tile: expected a multiple of [wg_size z, y, 4 * x] = [1, 1, 8]"),
    "opencl tile": (HEAD + "targets: [opencl]\nopencl:\n  variant: buffer\n  tile: [8, 8, 16]\n",
                    "  tile: ", "opencl.tile: [8, 8, 16] holds 4096 accumulators per work-item"),
    "opencl half_arithmetic": (HEAD + "targets: [opencl]\nopencl:\n  variant: buffer\n  half_arithmetic: true\n",
                               "  half_arithmetic: ", "opencl.half_arithmetic: needs dtype float16"),
    "opencl local_size": (HEAD + "targets: [opencl]\nopencl:\n  device: adreno-7xx\n  local_size: [64, 32]\n",
                          "  local_size: ", "opencl.local_size: [64, 32, 1] has 2048 work-items, over adreno-7xx's"),
}


@pytest.mark.parametrize("case", list(OPTION_CASES))
def test_a_target_option_error_is_at_that_option(case, tmp_path):
    text, key, message = OPTION_CASES[case]
    path, errors = _errors(tmp_path, text)
    assert any(e.startswith(f"{path}:{where(text, key)}: error: {message}") for e in errors), errors


def test_opencl_option_errors_are_each_at_their_own_key(tmp_path):
    text = HEAD + "targets: [opencl]\nopencl:\n  variant: buffer\n  tile: [8, 8, 16]\n  half_arithmetic: true\n"
    path, errors = _errors(tmp_path, text)
    assert [e.split(": error: ")[0] for e in errors] == [f"{path}:{where(text, '  tile: ')}",
                                                         f"{path}:{where(text, '  half_arithmetic: ')}"]


TWO_OPS = ("name: places\ninput:\n  shape: [1, 6, 6, 8]\n  layout: {input}\nops:\n"
           "  - conv2d:\n      out_channels: 6\n      kernel: 3\n      pad: 1\n{extra}"
           "  - conv2d: {{out_channels: 8, kernel: 1}}\noutput:\n  layout: NHWC\ntargets: [{target}]\n{options}")
NCHW4C = '{map: "n, h, w, c -> n, c // 4, h, |, w, c % 4"}'  # a texture, no pad_value


@pytest.mark.parametrize("extra, key", [
    ("", "  layout: "),  # the intermediate keeps the input's layout
    (f"      output_layout: {NCHW4C}\n", "      output_layout: ")])
def test_an_opencl_texture_rule_for_an_intermediate_is_at_the_layout_it_takes(extra, key, tmp_path):
    """temp1 (6 channels) as a texture without pad_value: at input.layout, or at ops[0]'s output_layout."""
    text = TWO_OPS.format(input=NCHW4C, extra=extra, target="opencl", options="opencl: {variant: texture}\n")
    path, errors = _errors(tmp_path, text)
    named = "ops[0].conv2d.output_layout" if extra else "input.layout"
    assert errors == [f"{path}:{where(text, key)}: error: {named}: temp1 has 6 channels, not a multiple of 4: "
                      f"texels are written whole, so its layout needs a pad_value (or 'undef')"], errors


@pytest.mark.parametrize("extra, key", [
    ("", "  layout: "),
    ("      output_layout: {map: nchw-4h, pad_value: 0}\n", "      output_layout: ")])
def test_the_vulkan_pad_value_limit_is_at_the_layout_that_asks_for_it(extra, key, tmp_path):
    """pad_value beyond channel padding (nchw-4h pads rows 6 -> 8) on the intermediate: not at 1:1."""
    text = TWO_OPS.format(input="{map: nchw-4h, pad_value: 0}", extra=extra, target="vulkan", options="")
    path, errors = _errors(tmp_path, text)
    named = "ops[0].conv2d.output_layout" if extra else "input.layout"
    assert errors == [f"{path}:{where(text, key)}: error: {named}: the vulkan target writes pad_value only into "
                      f"channel padding (channels rounded up to 4); layout 'nchw-4h' of ops[0]'s output pads more"]


RESIDUAL = """\
name: residual
dtype: uint8
input: {shape: [1, 8, 8, 32], layout: nhwc-8h8w32c}
quant: {input_scale: 0.05, input_zero_point: 128, weight_scale: 0.004, output_scale: 0.1, output_zero_point: 0}
ops:
  - conv2d:
      out_channels: 32
      kernel: 3
      pad: 1
      filter_layout: oihw-8i32o4i
      residual: input
      quant: {conv_scale: 1.0e-12}
output: {layout: nhwc-8h8w32c}
targets: [hvx]
"""


@pytest.mark.parametrize("command", ["plan", "build"])
def test_a_residual_conv_scale_too_far_from_the_input_scale_is_refused_at_its_key(command, tmp_path):
    path, errors = _errors(tmp_path, RESIDUAL, command)
    assert errors == [f"{path}:{where(RESIDUAL, 'conv_scale: ')}: error: ops[0].conv2d.quant.conv_scale: the "
                      f"requantization multiplier 1e-11 is below 2^-31: scales too far apart"]


def test_opencl_device_lists_every_profile(tmp_path):
    text = HEAD + "targets: [opencl]\nopencl: {device: nonsense}\n"
    path, (error,) = _errors(tmp_path, text, "plan")
    assert error.startswith(f"{path}:{where(text, 'device: ')}: error: opencl.device: expected ")
    devices = get_args(OpenCLModel.model_fields["device"].annotation)
    assert len(devices) == 5 and all(f"'{d}'" in error for d in devices), error


@pytest.mark.parametrize("text, value", [("5e-2", 0.05), ("1e-30", 1e-30), ("1.0e5", 1e5), ("-2E3", -2000.0),
                                         ("1_0e2", 1000.0), ("12", 12), ("1.5", 1.5), ("'5e-2'", "5e-2"),
                                         ("5e", "5e"), ("e5", "e5"), ("0x1f", 31)])
def test_exponent_floats_without_a_dot_are_numbers_as_in_yaml_1_2(text, value):
    got = load(f"a: {text}\n").data["a"]
    assert got == value and type(got) is type(value)


def test_scales_written_as_quantization_tools_print_them_load(tmp_path):
    config = load_config(RESIDUAL.replace("conv_scale: 1.0e-12", "conv_scale: 5e-2")
                         .replace("input_scale: 0.05", "input_scale: 5e-2").replace("0.004", "4e-3"))
    assert (config.quant.input_scale, config.quant.weight_scale, config.ops[0].quant.conv_scale) == (0.05, 0.004, 0.05)
