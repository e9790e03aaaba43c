"""The hvx uint8 input read of a tensor whose channels end inside a 32-channel block past the first (144 = 4 blocks
and 16 channels, EfficientNet's and MobileNetV2's expansions): every block is copied as whole vectors, the last with
its padding lanes muxed to the input zero point (kg_zp_tail), the bytes the pixel-by-pixel copy wrote before. Each
case is bit-exact under qemu-hexagon in poisoned runs (the input's padding lanes hold garbage), and EfficientNet-B0's
squeeze-excite pool over 56x56x144 reads its input in a twentieth of the packets it took pixel by pixel."""
from __future__ import annotations

import json

import numpy as np
import pytest
from builders import Case, config_text, toolchain
from click.testing import CliRunner
from conftest import requires_tool

from kernelgen.api import parse_config
from kernelgen.cli import main
from kernelgen.measure.records import Status
from kernelgen.measure.validate import validate
from kernelgen.planner import plan
from kernelgen.targets import TARGETS

HVX = toolchain("hvx")


def _scales(k: int, seed: int) -> str:
    return "[" + ", ".join(f"{s:.5f}" for s in np.random.default_rng(seed).uniform(0.001, 0.004, k)) + "]"


def _conv(k: int, rest: str, seed: int, activation: str = "relu") -> str:
    return (f"{{out_channels: {k}, {rest}, bias: true, activation: {activation}, filter_layout: oihw-8i32o4i, "
            f"quant: {{weight_scale: {_scales(k, seed)}, output_scale: 0.05, output_zero_point: 3}}}}")


def _config(name: str, shape, ops, schedule: str = "auto", requantization: str = "") -> str:
    quant = f"{{input_scale: 0.04, input_zero_point: 117, weight_dtype: int8{requantization}}}"
    return config_text(name, Case(list(shape), ops, "nhwc-8h8w32c", "nhwc-8h8w32c", schedule, dtype="uint8",
                                  blocks=(("quant", quant),), targets="[hvx]"))


# the silu's and sigmoid's tables map the conv's own bytes (conv_scale, conv_zero_point), as import writes them
SQUEEZE = ["global_avgpool: {quant: {output_scale: 0.002, output_zero_point: 121}}",
           "{out_channels: 6, kernel: 1, bias: true, activation: silu, filter_layout: oihw-8i32o4i, quant: "
           f"{{weight_scale: {_scales(6, 3)}, output_scale: 0.003, output_zero_point: 62, conv_scale: 0.006, "
           "conv_zero_point: 62, gate_scale: 0.0039, gate_zero_point: 0}}",
           "{out_channels: 144, kernel: 1, bias: true, activation: sigmoid, filter_layout: oihw-8i32o4i, quant: "
           f"{{weight_scale: {_scales(144, 4)}, output_scale: 0.0039, output_zero_point: 0, conv_scale: 0.02, "
           "conv_zero_point: 128}}"]

CASES = {
    # a dense 3x3 with padding: blocks inside the input copied whole, blocks straddling its edge joined and muxed
    "dense_3x3_144": _config("dense_3x3_144", (1, 9, 13, 144), [_conv(32, "kernel: 3, pad: 1", 1)]),
    # a 1x1 over 72 channels (2 blocks and 8), batch 2
    "pointwise_72": _config("pointwise_72", (2, 6, 10, 72), [_conv(40, "kernel: 1", 2)]),
    # EfficientNet's squeeze-excite: a global average pool first, as kernelgen import writes it
    "squeeze_144": _config("squeeze_144", (1, 12, 12, 144), SQUEEZE, requantization=", requantization: float32"),
    # a 5x5 depthwise first (the vmpy form, no transposed cache) over 40 channels
    "depthwise_40": _config("depthwise_40", (1, 11, 9, 40), [_conv(40, "kernel: 5, pad: 2, groups: 40", 5)]),
    # a ring of kept input rows (halo reuse) over 80 channels
    "ring_80": _config("ring_80", (1, 16, 12, 80), [_conv(64, "kernel: 3, pad: 1", 6)],
                       schedule="{k_split: 1, h_block: 4, halo: reuse}"),
}


def _job(name: str):
    config = parse_config(CASES[name], f"{name}.yaml")
    return TARGETS["hvx"].build(config, plan(config))


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_tail_block_past_the_first_is_read_as_whole_vectors(name):
    job = _job(name)
    source = job.files[f"{name}.c"]
    blocks = -(-job.config.input_shape[3] // 32)
    assert f"if (cb != {blocks - 1}) {{" in source  # kg_zp_tail leaves the other blocks as they are
    read = source[source.index("static void kg_input_read"):]
    read = read[:read.index("\n}\n")]
    assert "kg_zp_tail(" in read and "kg_copy_pixel(" not in read.split("a padding row")[0]


@requires_tool(*HVX)
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_tail_block_past_the_first_is_bit_exact_under_qemu(name):
    result = validate(TARGETS["hvx"], _job(name), int(np.random.SeedSequence().entropy % 2 ** 32))
    assert result.status is Status.PASS, f"{result.detail} (seed {result.seed})"


@requires_tool(*HVX)
def test_a_squeeze_pool_over_144_channels_reads_its_input_in_vectors(tmp_path):
    """EfficientNet-B0's features.2.1 squeeze-excite at its shape: measured 24,432 packets for its 451,584 input
    bytes (18.5 a packet); read pixel by pixel it took 619,185 (0.73). The floor leaves room for the scheduler."""
    path = tmp_path / "squeeze.yaml"
    path.write_text(_config("squeeze", (1, 56, 56, 144), SQUEEZE, requantization=", requantization: float32"))
    result = CliRunner().invoke(main, ["bench", str(path), "--target", "hvx", "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)["results"]
    assert 56 * 56 * 144 / row["packets"] >= 10, row
