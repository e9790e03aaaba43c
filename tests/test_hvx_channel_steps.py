"""Channel steps on the DSP: a quantized model's Concat (DequantizeLinear of each input, Concat, one QuantizeLinear)
imports as a uint8 `concat: channels` step that requantizes each input whose scale or zero point differs from the
output's, as onnxruntime does; the hvx network driver copies it between packed nhwc-8h8w32c tensors (whole blocks as
vectors through vlut32, the rest byte by byte), and a QDQ network of fire modules runs whole under qemu-hexagon,
every uint8 tensor bit-exact with onnxruntime. A quantized classifier's trailing Flatten is its output conversion.
(The same network with int8 activations: test_qdq_import_forms.py.)"""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from conftest import requires_tool

import kernelgen
from kernelgen.cli import main
from kernelgen.expr import evaluate
from kernelgen.layout import ACTIVATION_DIMS, parse_layout
from kernelgen.network.channel_copy import input_tables, requantize_table
from kernelgen.network.execute import moved_channels
from kernelgen.network.manifest import Network, Step, Tensor
from kernelgen.targets.hvx.channel_steps import BlockCopy, copy_step
from kernelgen.targets.hvx.lut import lookup

ONNX = ("py:onnx", "py:onnxruntime")
HEXAGON = ("clang-19", "ld.lld-19", "qemu-hexagon")
PACKED = "nhwc-8h8w32c"


def _session(model, optimized: bool):
    import onnxruntime as ort

    options = ort.SessionOptions()
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


@requires_tool(*ONNX)
@pytest.mark.parametrize("optimized", [True, False])  # fused into QLinearConcat, or DequantizeLinear/Concat/Q
def test_the_requantizing_concat_is_what_onnxruntime_computes_for_every_byte(optimized):
    from onnx import TensorProto, helper, numpy_helper

    params = {"a": (0.031, 0), "b": (0.09, 40), "c": (0.05, 7), "y": (0.05, 7)}  # c: the output's own
    inits = [numpy_helper.from_array(np.asarray(v, t), f"{k}_{s}") for k, (scale, zero) in params.items()
             for s, v, t in (("s", scale, np.float32), ("z", zero, np.uint8))]
    nodes = [helper.make_node("DequantizeLinear", [k, f"{k}_s", f"{k}_z"], [f"{k}_f"]) for k in "abc"]
    nodes += [helper.make_node("Concat", ["a_f", "b_f", "c_f"], ["y_f"], axis=1),
              helper.make_node("QuantizeLinear", ["y_f", "y_s", "y_z"], ["y"])]
    shape = [1, 4, 8, 8]
    graph = helper.make_graph(nodes, "cat", [helper.make_tensor_value_info(k, TensorProto.UINT8, shape)
                                             for k in "abc"],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 12, 8, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    every_byte = np.arange(256, dtype=np.uint8).reshape(shape)
    feeds = {"a": every_byte, "b": every_byte[:, ::-1].copy(), "c": every_byte}
    want = _session(model, optimized).run(None, feeds)[0]

    tensors = {k: Tensor(k, (1, 12 if k == "y" else 4, 8, 8), "uint8", PACKED, *params[k]) for k in "abcy"}
    network, step = _network(tensors, concat=True)
    tables = input_tables(network, step)
    assert tables[2] is None and None not in tables[:2]  # c is copied as it is
    got = moved_channels(step, [feeds[k] for k in "abc"], tables)
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(want[:, 4:8])) > 100 and want[:, 4:8].max() == 255  # b's table saturates


def _network(tensors: dict[str, Tensor], **kind) -> tuple[Network, Step]:
    *inputs, output = tensors
    step = Step(index=3, inputs=tuple(inputs), outputs=(output,), **kind)
    return Network(name="n", path="n.yaml", model=None, inputs=tuple(inputs), outputs=(output,), tensors=tensors,
                   steps=(step,)), step


def test_a_requantize_table_of_equal_parameters_is_none_and_saturates_otherwise():
    a = Tensor("a", (1, 4, 2, 2), "uint8", PACKED, 0.5, 10)
    assert requantize_table(a, Tensor("y", (1, 4, 2, 2), "uint8", PACKED, 0.5, 10)) is None
    table = requantize_table(a, Tensor("y", (1, 4, 2, 2), "uint8", PACKED, 0.25, 100))
    assert table[10] == 100 and table[11] == 102 and table[0] == 80 and table[255] == 255 and table[90] == 255
    assert table[9] == 98  # (9 - 10) * 0.5 / 0.25 + 100


def _replay(copy, network: Network, step: Step, packed: dict[str, np.ndarray]) -> np.ndarray:
    """What network.c's copy function writes, its parts replayed over the packed bytes (the vector lookups as
    vlut32 computes them, lut.lookup)."""
    out = network.tensors[step.outputs[0]]
    n, c, h, w = out.shape
    result = np.zeros(parse_layout(PACKED, ACTIVATION_DIMS).bind((n, h, w, c)).size, np.uint8)
    for part in copy.parts:
        source = packed[step.inputs[part.source]]
        if isinstance(part.copy, BlockCopy):
            b = part.copy
            size = b.vectors * 128
            for run in range(b.runs):
                chunk = source[b.from_offset + run * b.from_stride:][:size]
                if part.table >= 0:
                    chunk = np.asarray(lookup(chunk.tolist(), copy.vlut_tables[part.table]), np.uint8)
                result[b.to_offset + run * b.to_stride:][:size] = chunk
        else:
            grid = np.meshgrid(*(np.arange(e) for e in part.copy.extents), indexing="ij")
            at = dict(zip("nhwc", grid))
            values = source[evaluate(part.copy.from_offset, at)]
            if part.table >= 0:
                values = np.asarray(copy.tables[part.table], np.uint8)[values]
            result[evaluate(part.copy.to_offset, at)] = values
    return result


def _pack(value: np.ndarray) -> np.ndarray:
    n, c, h, w = value.shape
    return parse_layout(PACKED, ACTIVATION_DIMS).bind((n, h, w, c)).pack(value.transpose(0, 2, 3, 1), sentinel=0
                                                                          ).reshape(-1)


def _unpack(flat: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    n, c, h, w = shape
    bound = parse_layout(PACKED, ACTIVATION_DIMS).bind((n, h, w, c))
    return bound.unpack(flat.reshape(bound.physical_shape)).transpose(0, 3, 1, 2)


def test_fire_module_parts_copy_whole_blocks_as_vectors_and_the_rest_byte_by_byte():
    tensors = {"a": Tensor("a", (1, 32, 12, 12), "uint8", PACKED, 0.05, 7),
               "b": Tensor("b", (1, 48, 12, 12), "uint8", PACKED, 0.031, 0),
               "c": Tensor("c", (1, 16, 12, 12), "uint8", PACKED, 0.09, 40),
               "y": Tensor("y", (1, 96, 12, 12), "uint8", PACKED, 0.05, 7)}
    network, step = _network(tensors, concat=True)
    copy = copy_step(network, step)
    assert copy.function == "n_step3_concat" and len(copy.tables) == 2
    rows = [(p.source, p.from_channel, p.to_channel, p.channels, p.table, p.vectors) for p in copy.parts]
    assert rows == [(0, 0, 0, 32, -1, True), (1, 0, 32, 32, 0, True), (1, 32, 64, 16, 0, False),
                    (2, 0, 80, 16, 1, False)]
    # 12x12 pixels are 2x2 blocks of 8x8; a block of a's is 2048 bytes, of y's three of them (96 channels)
    assert copy.parts[1].copy == BlockCopy(runs=4, vectors=16, from_offset=0, to_offset=2048, from_stride=4096,
                                           to_stride=6144)
    assert copy.parts[3].copy.to_index == \
        "((n*24576)+((h>>3)*12288)+((w>>3)*6144)+((h&7)*256)+((w&7)*32)+c+4112)"  # block 2, channel 16
    rng = np.random.default_rng(3)
    values = {k: rng.integers(0, 256, tensors[k].shape).astype(np.uint8) for k in "abc"}
    got = _unpack(_replay(copy, network, step, {k: _pack(v) for k, v in values.items()}), tensors["y"].shape)
    np.testing.assert_array_equal(got, moved_channels(step, [values[k] for k in "abc"],
                                                      input_tables(network, step)))


@st.composite
def _packed_steps(draw):
    """A uint8 concat, slice or shuffle over packed images of any size, each input at its own scale or the
    output's."""
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 17)), draw(st.integers(1, 17))
    kind = draw(st.sampled_from(["concat", "slice", "shuffle"]))
    pick = st.sampled_from([8, 16, 24, 32, 40, 64, 96, 3])
    if kind == "concat":
        widths = draw(st.lists(pick, min_size=1, max_size=4))
        shapes = {f"i{k}": (n, c, h, w) for k, c in enumerate(widths)} | {"y": (n, sum(widths), h, w)}
        extra: dict = {"concat": True}
    elif kind == "slice":
        c = draw(pick) + draw(pick)
        start = draw(st.sampled_from(sorted({0, 32, c // 2, c - 1} & set(range(c)))))
        stop = draw(st.sampled_from(sorted({start + 1, start + 32, c} & set(range(start + 1, c + 1)))))
        shapes, extra = {"i0": (n, c, h, w), "y": (n, stop - start, h, w)}, {"slice": (start, stop)}
    else:
        groups, width = draw(st.integers(1, 4)), draw(st.sampled_from([1, 8, 29, 32]))
        shapes, extra = {"i0": (n, groups * width, h, w), "y": (n, groups * width, h, w)}, {"shuffle": groups}
    params = {name: draw(st.sampled_from([(0.05, 7), (0.031, 0), (0.09, 40)])) for name in shapes}
    return shapes, extra, params


@settings(max_examples=150, deadline=None)
@given(_packed_steps(), st.integers(0, 2**31 - 1))
def test_any_packed_channel_step_copies_and_requantizes_what_onnx_computes(case, seed):
    shapes, extra, params = case
    tensors = {k: Tensor(k, shape, "uint8", PACKED, *params[k]) for k, shape in shapes.items()}
    network, step = _network(tensors, **extra)
    rng = np.random.default_rng(seed)
    values = {k: rng.integers(0, 256, shape).astype(np.uint8) for k, shape in shapes.items() if k != "y"}
    copy = copy_step(network, step)
    got = _unpack(_replay(copy, network, step, {k: _pack(v) for k, v in values.items()}), shapes["y"])
    want = moved_channels(step, [values[k] for k in step.inputs], input_tables(network, step))
    np.testing.assert_array_equal(got, want)


def _import(tmp_path):
    import onnx
    import onnx_models

    onnx.save(onnx_models.qdq_concat_network(), str(tmp_path / "qc.onnx"))
    result = CliRunner().invoke(main, ["import", str(tmp_path / "qc.onnx"), "-o", str(tmp_path / "qc"),
                                       "--target", "hvx"])
    assert result.exit_code == 0, result.output
    return result.output, tmp_path / "qc" / "network.yaml"


@requires_tool(*ONNX)
def test_a_qdq_concat_imports_as_a_requantizing_concat_step_and_the_flatten_as_the_output_conversion(tmp_path):
    output, manifest = _import(tmp_path)
    assert "8 kernel(s), 2 concat step(s) and no host step" in output, output
    network = kernelgen.load_network(manifest)
    assert [s.kind for s in network.steps] == ["convert", *["kernel"] * 4, "concat", *["kernel"] * 3, "concat",
                                               "kernel", "convert"]
    cat = network.steps[5]
    assert [network.tensors[t].scale for t in (*cat.inputs, *cat.outputs)] == pytest.approx([0.05, 0.031, 0.09, 0.05])
    assert {network.tensors[t].layout for t in (*cat.inputs, *cat.outputs)} == {PACKED}
    tail = network.steps[-1]  # DequantizeLinear, Flatten, QuantizeLinear, DequantizeLinear at one scale
    assert tail.convert == "dequantize" and network.tensors[tail.outputs[0]].shape == (1, 10)
    assert network.tensors[tail.inputs[0]].shape == (1, 10, 1, 1)
    text = manifest.read_text()
    assert '- convert: dequantize  # "dq' in text and '"flatten", "q_flat", "dq_out"' in text


@requires_tool(*ONNX, *HEXAGON, "make")
def test_a_qdq_network_of_fire_modules_runs_whole_on_the_dsp_bit_exact(tmp_path):
    _, manifest = _import(tmp_path)
    network = kernelgen.load_network(manifest)
    validation = kernelgen.validate_network(network, "hvx", seed=7)
    runs = list(validation)
    concats = [r for r in runs if r.step.concat]
    assert len(concats) == 2 and all(a.max_abs == 0 for r in runs for a in r.agreement) and len(runs) == 12  # onnxruntime's bytes
    program = validation.run_program()  # network.c's copies, vlut32 and bytes, built by clang, run by qemu
    assert program.ran and program.passed and program.max_abs == 0, program.why
    out = runs[-1].values["out"]
    assert out.shape == (1, 10) and len(np.unique(out)) > 5

