"""The import's records (issue 45): ONNX converters as one table from op type to its float and QDQ forms
(onnx/converters.py), the activations a conv folds in as one table (onnx/activations.py), and a candidate group as a
typed record (onnx/group_config.py) whose Config is exactly what loading its written file gives."""
from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import requires_tool

from kernelgen import api
from kernelgen.api import catalog, parse_config

ONNX = ("py:onnx", "py:onnxruntime")


def _imported(tmp_path, model, coster: bool = True):
    import onnx_models

    from kernelgen.onnx.importer import Fusion, import_model

    tmp_path.mkdir(parents=True, exist_ok=True)
    path = onnx_models.save(model, tmp_path / "model.onnx")
    fusion = Fusion(coster=api.fusion_coster("c"), quant_coster=api.fusion_coster("hvx")) if coster else Fusion()
    return import_model(path, tmp_path / "configs", ("c",), fusion, quant_targets=("hvx",))


def _conv_then(op_type: str, **attrs):
    """x -> 3x3 conv -> `op_type` node -> 1x1 conv: a float chain with the node between its two convs."""
    import onnx_models

    b = onnx_models.Builder(3)
    t = b.node(op_type, "between", [b.conv("first", "x", 4, 8, 3, pad=1)], **attrs)
    return b.model("x", [1, 4, 8, 8], b.conv("second", t, 8, 4, 1))


@requires_tool(*ONNX)
@pytest.mark.parametrize("name", ["squeeze_excite_network", "qdq_network", "mixed_float_and_qdq", "small_resnet",
                                  "qlinear_chain"])
def test_a_group_record_is_the_config_its_file_holds(tmp_path, name):
    """Every config the importer writes, and the candidate group it was costed as, plans from the record without
    text: config_of gives the Config that parsing the written YAML gives (side inputs, residuals, activations,
    per-op quantization, pools and muls included)."""
    import onnx_models

    from kernelgen.onnx.group_config import config_of

    imported = _imported(tmp_path, getattr(onnx_models, name)())
    assert imported.configs
    for item in imported.configs:
        path = f"{item.name}.yaml"
        assert config_of(item.config, catalog(), path) == parse_config(item.text, path), item.text
        candidate = replace(item.config, nodes=(), schedule="auto")  # as the coster plans it: no source, auto
        assert config_of(candidate, catalog(), path).source is None
    dtypes = {item.config.dtype for item in imported.configs}
    assert dtypes == ({"uint8"} if name in ("qdq_network", "qlinear_chain") else
                      {"float32", "uint8"} if name == "mixed_float_and_qdq" else {"float32"})


@requires_tool(*ONNX)
def test_an_activation_is_one_table_entry(tmp_path, monkeypatch):
    """A node type the activation table lacks is a host step between two configs; one entry folds it into the conv
    before it, and the chain stays one config."""
    from kernelgen.onnx.activations import ACTIVATIONS, ActivationForm

    model = _conv_then("Softsign")
    without = _imported(tmp_path / "without", model, coster=False)
    assert [c.nodes for c in without.configs] == [("first",), ("second",)]
    assert ("between", "Softsign", "") in without.skipped
    monkeypatch.setitem(ACTIVATIONS, "Softsign", ActivationForm(lambda graph, node: [-1.0, 1.0]))
    (config,) = _imported(tmp_path / "with", model, coster=False).configs
    assert config.nodes == ("first", "between", "second")
    first, second = config.config.ops
    assert ("activation", [-1.0, 1.0]) in first.keys and "activation: [-1.0, 1.0]" in config.text


@requires_tool(*ONNX)
def test_an_op_is_one_converter_entry_with_both_forms(tmp_path, monkeypatch):
    """MaxPool's float form fuses it into the float chain, its QDQ form into the uint8 chain; an entry without the
    QDQ form leaves the quantized MaxPool to onnxruntime, and no entry leaves the float one too."""
    import onnx_models

    from kernelgen.onnx.converters import CONVERTERS, Converter

    float_model = _conv_then("MaxPool", kernel_shape=[2, 2], strides=[2, 2])
    (fused,) = _imported(tmp_path / "f", float_model).configs
    assert [op.kind for op in fused.config.ops] == ["conv2d", "maxpool", "conv2d"]
    assert fused.nodes == ("first", "between", "second")
    quantized = [c for c in _imported(tmp_path / "q", onnx_models.qdq_network()).configs
                 if "maxpool" in [op.kind for op in c.config.ops]]
    assert len(quantized) == 1

    monkeypatch.setitem(CONVERTERS, "MaxPool", replace(CONVERTERS["MaxPool"], quantized=None))
    assert not any("maxpool" in [op.kind for op in c.config.ops]
                   for c in _imported(tmp_path / "q2", onnx_models.qdq_network()).configs)
    assert [op.kind for op in _imported(tmp_path / "f2", float_model).configs[0].config.ops] == [
        "conv2d", "maxpool", "conv2d"]  # the float form is still there

    monkeypatch.delitem(CONVERTERS, "MaxPool")
    apart = _imported(tmp_path / "f3", float_model)
    assert [c.nodes for c in apart.configs] == [("first",), ("second",)]
    assert ("between", "MaxPool", "") in apart.skipped
    assert Converter().float is None and Converter().quantized is None


@requires_tool(*ONNX)
def test_each_conv_form_is_its_op_types_own_converter(tmp_path):
    """QLinearConv and a QDQ Conv are two entries of CONVERTERS, each with its own converter (no op-type test inside
    one): the QLinearConv's reads its node's scales; the QDQ one takes no Conv on float activations."""
    import onnx
    import onnx_models

    from kernelgen.onnx.converters import CONVERTERS
    from kernelgen.onnx.graph import read_graph
    from kernelgen.onnx.quant import qdq_conv, qlinear_conv

    assert (CONVERTERS["QLinearConv"].quantized, CONVERTERS["Conv"].quantized) == (qlinear_conv, qdq_conv)
    onnx.save(onnx_models.qlinear_chain(), tmp_path / "q.onnx")
    first = qlinear_conv(read_graph(tmp_path / "q.onnx"), 0)
    assert (first.x_scale, first.x_zero_point, first.y_scale, first.y_zero_point) == (
        pytest.approx(0.05), 128, pytest.approx(0.08), 10)
    onnx.save(_conv_then("Relu"), tmp_path / "f.onnx")
    assert qdq_conv(read_graph(tmp_path / "f.onnx"), 0) is None
