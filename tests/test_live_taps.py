"""A float Conv whose outer taps only ever read padding (DeepLabV3's atrous pyramid: 3x3 dilated by 24 and 36 over
14x14) imports as the smaller conv it computes (onnx/live_taps.py), and a dense conv's input chunks are searched
past four (the dilation-12 conv over 14x14x960 fits 512 KiB in 8 chunks). Before, all three went to onnxruntime and
DeepLabV3 got no program."""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from builders import Case, make_config, toolchain
from conftest import require_tools, requires_tool

import kernelgen
from kernelgen import api
from kernelgen.cli import main
from kernelgen.onnx.live_taps import Trim, embedded, live_range, sliced, trim

ONNX = ("py:onnx", "py:onnxruntime")


@pytest.mark.parametrize("dilation, expected", [
    (36, Trim(kernel=(1, 1), pad=(0, 0, 0, 0), dilation=(1, 1), taps=(1, 1, 1, 1))),
    (24, Trim(kernel=(1, 1), pad=(0, 0, 0, 0), dilation=(1, 1), taps=(1, 1, 1, 1))),
    (14, Trim(kernel=(1, 1), pad=(0, 0, 0, 0), dilation=(1, 1), taps=(1, 1, 1, 1))),  # 14 rows away: outside
    (13, None),  # row 13 reads row 0 from output 13, and output 0 row 13: every tap reads the image somewhere
    (12, None),
])
def test_deeplab_pyramid_taps_over_14x14(dilation, expected):
    assert trim((3, 3), (1, 1), (dilation, dilation), (dilation,) * 4, (14, 14)) == expected


def test_one_side_and_one_pixel():
    # 4 rows padded 3 on top only, 3 taps dilated by 3: the one output reads rows -3, 0 and 3; the first tap goes
    assert live_range(4, 3, 1, 3, 3, 0) == (1, 2)
    assert trim((3, 1), (1, 1), (3, 1), (3, 0, 0, 0), (4, 5)) == Trim(kernel=(2, 1), pad=(0, 0, 0, 0),
                                                                       dilation=(3, 1), taps=(1, 2, 0, 0))
    # a 3x3 over one pixel padded by 1 is its centre tap
    assert trim((3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (1, 1)) == Trim(kernel=(1, 1), pad=(0, 0, 0, 0),
                                                                       dilation=(1, 1), taps=(1, 1, 1, 1))
    assert trim((3, 3), (2, 2), (1, 1), (1, 1, 1, 1), (7, 7)) is None  # an ordinary padded conv keeps its taps


def test_the_filter_is_sliced_and_given_back_in_zeros():
    w = np.arange(2 * 3 * 3 * 3, dtype=np.float32).reshape(2, 3, 3, 3)
    cut = sliced(w, (1, 1, 0, 2))
    assert cut.shape == (2, 3, 1, 3) and np.array_equal(cut, w[:, :, 1:2, :])
    back = embedded(cut, (1, 1, 0, 2), w.shape)
    assert np.array_equal(back[:, :, 1], w[:, :, 1]) and not back[:, :, 0].any() and not back[:, :, 2].any()


def _atrous_model(tmp_path, relu: bool = True):
    """An atrous pyramid's branches over a 6x6 image: dilation 6 (only the centre tap reads the image), 3 (all read)
    and a 3x3 with pad 4 (outer rows and columns read padding alone), summed. relu False: the stem's output is
    signed, so quantized its zero point is not 0."""
    import onnx_models

    b = onnx_models.Builder(9)
    x = b.conv("stem_conv", "x", 4, 16, 3, pad=1)
    x = b.relu("stem", x) if relu else x
    wide = b.conv("wide", x, 16, 8, 3, pad=6, dilation=6)
    mid = b.conv("mid", x, 16, 8, 3, pad=3, dilation=3)
    y = b.add("sum", wide, mid)
    return onnx_models.save(b.model("x", [1, 4, 6, 6], y), tmp_path / "atrous.onnx")


@requires_tool(*ONNX, "make", "gcc")
def test_an_atrous_branch_imports_as_the_1x1_it_computes_and_runs_as_onnxruntime(tmp_path):
    require_tools(*toolchain("c"))
    result = CliRunner().invoke(main, ["import", str(_atrous_model(tmp_path)), "-o", str(tmp_path / "net"),
                                       "--target", "c", "--max-group-ops", "1"])
    assert result.exit_code == 0, result.output
    wide = kernelgen.load_config(tmp_path / "net" / "wide.yaml")
    mid = kernelgen.load_config(tmp_path / "net" / "mid.yaml")
    assert (wide.ops[0].kernel, wide.ops[0].pad, wide.ops[0].dilation) == ((1, 1), (0, 0, 0, 0), (1, 1))
    assert (mid.ops[0].kernel, mid.ops[0].dilation) == ((3, 3), (3, 3))
    check = kernelgen.validate(wide, "c", seed=2)  # the 1x1 kernel against onnxruntime's 3x3 node
    assert check.passed, check.detail
    network = kernelgen.load_network(tmp_path / "net" / "network.yaml")
    validation = kernelgen.validate_network(network, "c", seed=3)
    runs = list(validation)
    assert all(run.ran and all(a.passed for a in run.agreement) for run in runs), runs
    program = validation.run_program()
    assert program.ran and program.passed and program.relative < 1e-5, program.why


def test_a_dense_conv_takes_up_to_eight_input_chunks_to_fit():
    """DeepLabV3's dilation-12 branch: 3x3 over 14x14x960 padded by 12, 256 outputs. Four chunks of 240 channels
    asked for 991,232 bytes of caches; the search now tries the eight smallest divisors (1, 2, 3, 4, 5, 6, 8, 10),
    and more chunks than four fit the 512 KiB budget (the least estimated time among them: ten of 96 here)."""
    config = make_config("atrous12", Case([1, 14, 14, 960], ["{out_channels: 256, kernel: 3, pad: 12, dilation: 12}"],
                                          schedule="auto", targets="[c]"))
    plan = api.plan(config)
    assert plan.c_split in (5, 6, 8, 10) and plan.workspace_elements * 4 <= 524288, (plan.c_split,
                                                                                      plan.workspace_elements)


DILATED = "{out_channels: %d, kernel: 3, stride: %d, pad: %s, dilation: %d, bias: true}"
PADDED_TAPS = {
    # DeepLabV3's dilation-12 branch, narrowed: every tap row and column reads padding for some output
    "atrous_12": Case([1, 14, 14, 32], [DILATED % (32, 1, 12, 12)], schedule="auto", targets="[c]"),
    # padded by more than the dilation, over a width no tile divides, strided; and the 16-float tile's 32 outputs
    "wide_pad": Case([1, 9, 11, 16], [DILATED % (32, 1, 5, 4)], schedule="auto", targets="[c]"),
    "strided": Case([1, 13, 10, 8], [DILATED % (16, 2, "[3, 4, 3, 4]", 3)], schedule="auto", targets="[c]"),
    # rows stripes and column stripes: each stripe's window starts elsewhere in the input
    "stripes": Case([1, 16, 16, 8], [DILATED % (8, 1, 2, 2)], schedule="{k_block: 8, h_split: 1, w_split: 1}",
                    targets="[c]"),
    "nchw": Case([1, 7, 9, 8], [DILATED % (16, 1, 3, 3)], input_layout="NCHW", schedule="auto", targets="[c]"),
}


@pytest.mark.parametrize("name", list(PADDED_TAPS))
def test_taps_that_read_padding_are_skipped_and_the_sums_are_unchanged(name):
    """A dilated conv padded by at least its dilation: the c tile tests each tap row (and the tile's columns of
    each tap column) against the input and skips those in the padding (DeepLabV3's dilation-12 conv 7.2 -> 2.9 ms);
    validated against numpy on new inputs."""
    require_tools(*toolchain("c"))
    config = make_config(f"padded_{name}", PADDED_TAPS[name])
    source = "".join(text for path, text in api.generate(config, "c").items() if path.endswith(".c"))
    tests = [line for line in source.splitlines() if line.strip().startswith("if (") and "rh*" in line]
    assert tests and all(">= 0 &&" in line for line in tests), tests  # the tap rows' test, in every tile variant
    result = api.validate(config, "c", seed=4)
    assert result.passed, result.detail


@requires_tool(*ONNX, *toolchain("hvx"))
def test_a_quantized_atrous_branch_imports_as_its_1x1_and_is_bit_exact_on_hvx(tmp_path):
    """The same pyramid quantized as users quantize (quantize_static's QDQ defaults, full-range int8 weights per
    channel), its stem without a relu so that the branches' input has a zero point other than 0: the dilation-6
    branch's padding holds that zero point, so its outer taps add nothing, and it imports as a 1x1 conv with the
    centre tap's int8 weights. Under qemu-hexagon each kernel is bit-exact with onnxruntime running the model's own
    nodes (the 3x3 with all its taps), and so is the whole network."""
    import onnx
    import onnx_models

    from kernelgen.onnx.weights import model_weights

    model = onnx_models.quantized(onnx.load(str(_atrous_model(tmp_path, relu=False))), per_channel=True,
                                  full_range=True)
    onnx.save(model, str(tmp_path / "qatrous.onnx"))
    result = CliRunner().invoke(main, ["import", str(tmp_path / "qatrous.onnx"), "-o", str(tmp_path / "net"),
                                       "--target", "hvx", "--max-group-ops", "1"])
    assert result.exit_code == 0, result.output
    configs = {path.stem: kernelgen.load_config(path) for path in (tmp_path / "net").glob("*.yaml")
               if path.name != "network.yaml"}
    geometry = {name: (c.ops[0].kernel, c.ops[0].pad, c.ops[0].dilation) for name, c in configs.items()}
    assert geometry == {"stem_conv": ((3, 3), (1, 1, 1, 1), (1, 1)),
                        "wide": ((1, 1), (0, 0, 0, 0), (1, 1)),  # dilation 6 over 6x6: only its centre tap
                        "mid": ((3, 3), (3, 3, 3, 3), (3, 3))}, geometry  # dilation 3: every tap reads the image
    wide = configs["wide"]
    assert wide.dtype == "uint8" and wide.quant.input_zero_point != 0, wide.quant
    (int8,) = [onnx.numpy_helper.to_array(t) for t in model.graph.initializer
               if t.name.startswith("wide_w") and len(t.dims) == 4]
    assert int8.dtype == np.int8 and int8.shape == (8, 16, 3, 3)
    assert np.array_equal(model_weights(wide)["filter1"].values, int8[:, :, 1:2, 1:2])
    for seed, config in enumerate(configs.values(), start=5):
        check = kernelgen.validate(config, "hvx", seed=seed)
        assert check.passed and "bit-exact" in check.detail and "onnxruntime" in check.detail, check.detail
    network = kernelgen.load_network(tmp_path / "net" / "network.yaml")
    validation = kernelgen.validate_network(network, "hvx", seed=3)
    runs = list(validation)
    assert all(run.ran and all(a.passed for a in run.agreement) for run in runs), runs
    assert validation.verdict().status == "pass"
