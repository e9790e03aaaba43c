"""What a search over random small ONNX networks (import -> validate -> program, every target) found, each kept as
the smallest model that showed it: a case the importer, the validation or a network program got wrong."""
from __future__ import annotations

import numpy as np
from click.testing import CliRunner

from conftest import requires_tool

import kernelgen
from kernelgen.cli import main

ONNX = ("py:onnx", "py:onnxruntime")
HEXAGON = ("clang-19", "ld.lld-19", "qemu-hexagon")


def quantized(float_model, path, shape, seed: int = 0):
    """`float_model` quantized as users do: quantize_static with its defaults (QDQ, int8 activations and weights),
    calibrated on four random-normal inputs; written to `path`, which is returned."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, quantize_static

    class Random(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(seed)
            self.batches = iter([{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.batches, None)

    float_path = path.with_name(path.stem + "_float.onnx")
    onnx.save(float_model, str(float_path))
    quantize_static(str(float_path), str(path), Random())
    return path


def _import(model, out, target: str, *options: str):
    result = CliRunner().invoke(main, ["import", str(model), "-o", str(out), "--target", target, *options])
    assert result.exit_code == 0, result.output
    return result.output


@requires_tool(*ONNX, *HEXAGON)
def test_onnxruntime_checks_a_fused_intermediate_only_where_the_next_op_reads_it(tmp_path):
    """A fused uint8 1x1 -> 1x1 at stride 2: the first op's output is computed only at the pixels the strided op
    reads. onnxruntime's op-by-op check compared all of it (the rest is the poison the kernel left there) and failed
    a kernel numpy and the program had found bit-exact ("differs by up to 165 in 118 of 512 outputs")."""
    import onnx_models

    b = onnx_models.Builder(1)
    y = b.conv("conv2", b.conv("conv1", "x", 8, 8, 1), 8, 8, 1, stride=2)
    model = quantized(b.model("x", [1, 8, 8, 8], y), tmp_path / "strided.onnx", [1, 8, 8, 8])
    _import(model, tmp_path / "net", "hvx")
    config = kernelgen.load_config(tmp_path / "net" / "conv1_to_conv2.yaml")
    result = kernelgen.validate(config, "hvx", seed=1)
    assert result.passed, result.detail
    assert result.checked == "bit-exact op-by-op" and "onnxruntime op by op: bit-exact in all 2 ops" in result.detail
