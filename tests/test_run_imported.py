"""Issue 49, one tensor convention: an imported config lists its tensors as its ONNX model holds them (NCHW), and
`kernelgen run` takes the array the model takes and writes the output in the config's layout order; a wrong array
is reported at the --input argument that gave it. An import made before (NHWC shapes with layout NCHW) is refused
with what to do.

The model is built here with onnx.helper: a 3x3 conv + Relu and a 1x1 conv on a 1x6x9x7 image, every extent
different, so any axis taken for another changes a shape or a value."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import kernelgen
from kernelgen.cli import main
from kernelgen.errors import ConfigError

from builders import toolchain
from conftest import requires_tool

onnx = pytest.importorskip("onnx")
onnx_models = pytest.importorskip("onnx_models")
IMAGE = [1, 6, 9, 7]  # NCHW: 6 channels, 9 rows, 7 columns


def _model(root: Path) -> Path:
    b = onnx_models.Builder(seed=31)
    t = b.relu("relu1", b.conv("conv1", "x", 6, 8, 3, pad=1))
    return onnx_models.save(b.model("x", IMAGE, b.conv("conv2", t, 8, 4, 1)), root / "tiny.onnx")


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> tuple[Path, Path]:
    """(the model, its one kernel config) as `kernelgen import --target c` writes them."""
    root = tmp_path_factory.mktemp("imported")
    model = _model(root)
    result = CliRunner().invoke(main, ["import", str(model), "-o", str(root / "net"), "--target", "c"])
    assert result.exit_code == 0, result.output
    (config,) = [p for p in (root / "net").glob("*.yaml") if p.name != "network.yaml"]  # one kernel: fused
    return model, config


def test_an_imported_config_lists_the_models_nchw_shape(imported):
    _, path = imported
    text = path.read_text()
    assert "input: {shape: [1, 6, 9, 7], layout: NCHW}" in text  # as the model's input is, not [1, 9, 7, 6]
    config = kernelgen.load_config(path)
    assert config.input_shape == (1, 9, 7, 6)  # the loader's logical NHWC, the one form every later stage reads


@requires_tool(*toolchain("c"))
def test_run_takes_the_models_nchw_array_and_matches_onnxruntime(imported, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    model, config = imported
    x = np.random.default_rng(5).uniform(-1, 1, IMAGE).astype(np.float32)  # what the model's input takes
    np.save(tmp_path / "x.npy", x)
    result = CliRunner().invoke(main, ["run", str(config), "--target", "c", "--input", f"input={tmp_path / 'x.npy'}",
                                       "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    got = np.load(tmp_path / "out" / "output.npy")
    assert "output [1, 4, 9, 7] float32 (NCHW)" in result.stdout
    (expected,) = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert got.shape == expected.shape == (1, 4, 9, 7)
    # float32 sums of 54 products (3x3x6) then 8, in another order than onnxruntime's: |values| < 4 here, so the
    # rounding is below 1e-5 (54 * 2**-24 * 4 * 8 with margin); a transposed axis is off by 0.1 or more
    assert np.abs(expected).max() > 0.5
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
    # the Python API takes and gives the same arrays
    np.testing.assert_array_equal(kernelgen.run(kernelgen.load_config(config), "c", {"input": x})["output"], got)


def test_a_wrong_shape_is_reported_at_its_input_argument(imported, tmp_path):
    _, config = imported
    nhwc = np.zeros([1, 9, 7, 6], dtype=np.float32)  # the logical NHWC array an older kernelgen wanted
    np.save(tmp_path / "x.npy", nhwc)
    result = CliRunner().invoke(main, ["run", str(config), "--target", "c", "--input", f"input={tmp_path / 'x.npy'}",
                                       "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1] == (
        f"Error: Invalid value for '--input': input={tmp_path / 'x.npy'}: expected shape [1, 6, 9, 7] dtype float32 "
        f"(NCHW), got shape [1, 9, 7, 6]")
    assert f"{config.name}:1:1" not in result.stderr and not (tmp_path / "out").exists()


def test_an_import_from_before_is_refused_with_what_to_do(imported, tmp_path):
    """An old import listed the NHWC shape with layout NCHW; where reading it in NHWC order is what loads, the loader
    says so at input.shape; where the new reading loads too (a 3x3 conv fits either), the model's tensor does."""
    model, config = imported
    old = tmp_path / config.name
    text = config.read_text().replace("[1, 6, 9, 7]", "[1, 9, 7, 6]")
    old.write_text(re.sub(r'onnx: "[^"]*"', f'onnx: "{model}"', text))  # beside another folder: the model by path
    with pytest.raises(ConfigError) as caught:
        kernelgen.validate(kernelgen.load_config(old), "c")
    (problem,) = caught.value.problems
    assert problem.key == "input.shape" and (problem.line, problem.column) == (3, 16)
    assert "[1, 6, 9, 7]" in problem.message and "got [1, 9, 7, 6]" in problem.message
    assert "import the model again" in problem.message


def test_an_old_import_the_new_reading_cannot_load_is_named_by_the_loader():
    """A depthwise conv over 6 channels listed [1, 9, 7, 6] with layout NCHW reads as 9 channels, which 6 groups do
    not divide; read in NHWC order it loads: the file is an import from before, and that is the one problem."""
    text = ("name: old\ninput: {shape: [1, 9, 7, 6], layout: NCHW}\n"
            "ops:\n  - conv2d: {out_channels: 6, kernel: [3, 3], pad: [1, 1, 1, 1], groups: 6}\n"
            "output: {layout: NCHW}\nsource: {onnx: \"m.onnx\", nodes: [\"dw\"]}\n")
    with pytest.raises(ConfigError) as caught:
        kernelgen.load_config(text)
    (problem,) = caught.value.problems
    assert (problem.key, problem.line, problem.column) == ("input.shape", 2, 16)
    assert problem.message.startswith("expected the shape in the order of the layout's letters, [n, c, h, w] = "
                                      "[1, 6, 9, 7], got [1, 9, 7, 6] in NHWC order")
    # without source: (not an import) the reading is the layout's, and the groups are what is wrong
    (plain,) = pytest.raises(ConfigError, kernelgen.load_config, text.split("source:")[0]).value.problems
    assert plain.key != "input.shape"
