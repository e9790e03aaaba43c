"""Steps that move channels without computing, run by kernelgen (`concat: channels`, `slice: {start, stop}`,
`shuffle: {groups}` in network.yaml): the manifest's checks, the copies network.c makes in each pair of layouts, the
GPU programs' concats written in place, and imported Inception, SqueezeNet, DenseNet and ShuffleNet blocks run whole as
programs (those nodes were onnxruntime's host steps before, so such networks had no program)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from click.testing import CliRunner

from builders import toolchain
from conftest import require_tools, requires_tool

from kernelgen import api
from kernelgen.cli import main
from kernelgen.errors import ConfigError
from kernelgen.network.channel_copy import copy_parts
from kernelgen.network.manifest import Network, Step, Tensor, load_network

ONNX = ("py:onnx", "py:onnxruntime")


def _network(shapes: dict[str, tuple[int, ...]], dtype: str = "float32", **kind) -> tuple[Network, Step]:
    tensors = {name: Tensor(name, shape, dtype, None) for name, shape in shapes.items()}
    *inputs, output = shapes
    step = Step(index=0, inputs=tuple(inputs), outputs=(output,), **(kind or {"concat": True}))
    return Network(name="n", path="n.yaml", model=None, inputs=tuple(inputs), outputs=(output,), tensors=tensors,
                   steps=(step,)), step


def _copied(network: Network, step: Step, layouts: dict[str, str], values: dict[str, np.ndarray]) -> np.ndarray:
    """What network.c's loops write: each part's loops and memcpy replayed over bytes."""
    out = network.tensors[step.outputs[0]]
    to = bytearray(out.nbytes)
    for part in copy_parts(network, step, layouts):
        source = values[part.source]
        held = source.transpose(0, 2, 3, 1) if layouts[part.source] == "NHWC" else source
        raw = np.ascontiguousarray(held).tobytes()
        for index in np.ndindex(*(loop.extent for loop in part.loops)):
            t = part.to_offset + sum(i * loop.to_stride for i, loop in zip(index, part.loops))
            f = part.from_offset + sum(i * loop.from_stride for i, loop in zip(index, part.loops))
            to[t:t + part.run_bytes] = raw[f:f + part.run_bytes]
    n, c, h, w = out.shape
    flat = np.frombuffer(bytes(to), out.dtype)
    return flat.reshape(n, h, w, c).transpose(0, 3, 1, 2) if layouts[out.name] == "NHWC" else flat.reshape(n, c, h, w)


@pytest.mark.parametrize("layout_in, layout_out", [("NHWC", "NHWC"), ("NCHW", "NCHW"), ("NHWC", "NCHW"),
                                                   ("NCHW", "NHWC")])
def test_the_copies_put_each_input_at_its_channels_in_every_pair_of_layouts(layout_in, layout_out):
    network, step = _network({"a": (2, 3, 4, 5), "b": (2, 5, 4, 5), "c": (2, 1, 4, 5), "y": (2, 9, 4, 5)})
    rng = np.random.default_rng(1)
    values = {t: rng.standard_normal(network.tensors[t].shape).astype(np.float32) for t in "abc"}
    layouts = {"a": layout_in, "b": layout_in, "c": layout_in, "y": layout_out}
    got = _copied(network, step, layouts, values)
    np.testing.assert_array_equal(got, np.concatenate([values[t] for t in "abc"], axis=1))


@pytest.mark.parametrize("layout_in, layout_out", [("NHWC", "NHWC"), ("NCHW", "NCHW"), ("NHWC", "NCHW")])
def test_a_slice_and_a_shuffle_copy_what_onnx_computes(layout_in, layout_out):
    from kernelgen.network.execute import moved_channels

    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 12, 3, 5)).astype(np.float32)
    for kind, shapes in (({"slice": (5, 11)}, {"x": (2, 12, 3, 5), "y": (2, 6, 3, 5)}),
                         ({"shuffle": 3}, {"x": (2, 12, 3, 5), "y": (2, 12, 3, 5)})):
        network, step = _network(shapes, **kind)
        got = _copied(network, step, {"x": layout_in, "y": layout_out}, {"x": x})
        np.testing.assert_array_equal(got, moved_channels(step, [x]))
    # ONNX's own spelling of the shuffle: Reshape [N, g, C/g, H, W], Transpose (0, 2, 1, 3, 4), Reshape back
    onnx_way = x.reshape(2, 3, 4, 3, 5).transpose(0, 2, 1, 3, 4).reshape(2, 12, 3, 5)
    np.testing.assert_array_equal(moved_channels(_network({"x": x.shape, "y": x.shape}, shuffle=3)[1], [x]), onnx_way)
    np.testing.assert_array_equal(moved_channels(_network({"x": x.shape, "y": (2, 6, 3, 5)}, slice=(5, 11))[1], [x]),
                                  x[:, 5:11])


def test_equal_layouts_copy_runs_and_mixed_ones_transpose():
    network, step = _network({"a": (1, 64, 55, 55), "b": (1, 64, 55, 55), "y": (1, 128, 55, 55)})
    nhwc = copy_parts(network, step, dict.fromkeys("aby", "NHWC"))
    # SqueezeNet's fire module: a run of the input's 64 channels each pixel, the output's pixels 128 channels wide
    assert [(p.to_offset, p.run_bytes, [(l.extent, l.to_stride, l.from_stride) for l in p.loops]) for p in nhwc] == [
        (0, 256, [(3025, 512, 256)]), (256, 256, [(3025, 512, 256)])]
    nchw = copy_parts(network, step, dict.fromkeys("aby", "NCHW"))
    assert [(p.to_offset, p.run_bytes, p.loops) for p in nchw] == [(0, 774400, ()), (774400, 774400, ())]  # planes
    batch, step2 = _network({"a": (2, 3, 4, 4), "b": (2, 5, 4, 4), "y": (2, 8, 4, 4)}, "uint8")
    parts = copy_parts(batch, step2, dict.fromkeys("aby", "NCHW"))
    assert [(p.to_offset, p.run_bytes, [(l.extent, l.to_stride, l.from_stride) for l in p.loops]) for p in parts] == [
        (0, 48, [(2, 128, 48)]), (48, 80, [(2, 128, 80)])]
    mixed = copy_parts(network, step, {"a": "NHWC", "b": "NHWC", "y": "NCHW"})
    assert mixed[1].run_bytes == 4 and mixed[1].to_offset == 64 * 55 * 55 * 4
    assert [(l.extent, l.to_stride, l.from_stride) for l in mixed[1].loops] == [(3025, 4, 256), (64, 12100, 4)]


def _manifest(tmp_path, steps: str, tensors: str, inputs: str = "x") -> str:
    import onnx_models

    b = onnx_models.Builder(1)
    onnx_models.save(b.model("x", [1, 4, 5, 5], b.conv("c1", "x", 4, 4, 1)), tmp_path / "m.onnx")
    (tmp_path / "k.yaml").write_text("""
name: k
dtype: float32
input: {shape: [1, 5, 5, 4], layout: NCHW}
ops:
  - {op: conv2d, out_channels: 4, kernel: [1, 1]}
output: {layout: NCHW}
""")
    path = tmp_path / "network.yaml"
    path.write_text(f"""network: n
model: m.onnx
inputs: [{inputs}]
outputs: [y]
tensors:
  x: {{shape: [1, 4, 5, 5], dtype: float32}}
  a: {{shape: [1, 4, 5, 5], dtype: float32}}
{tensors}steps:
  - kernel: k
    inputs: [x]
    outputs: [a]
{steps}""")
    with pytest.raises(ConfigError) as error:
        load_network(path, api.load_config)
    return "\n".join(str(p) for p in error.value.problems)


@requires_tool(*ONNX)
@pytest.mark.parametrize("tensors, expected", [
    ("  y: {shape: [1, 9, 5, 5], dtype: float32}\n", "the inputs' channels add up to 8, the output 'y' has 9"),
    ("  y: {shape: [1, 8, 5, 5], dtype: uint8, scale: 0.1, zero_point: 3}\n",
     "dtype mismatch: 'a' is float32, the concat's output 'y' uint8 (a concat copies)"),
    ("  y: {shape: [1, 8, 5, 4], dtype: float32}\n",
     "shape mismatch: 'a' is [1, 4, 5, 5]; the output's batch, height and width are [1, 5, 4]"),
    ("  y: {shape: [1, 200], dtype: float32}\n", "expected an NCHW image for concat: channels, got 'y' of shape"),
])
def test_a_concat_whose_tensors_do_not_fit_is_refused_at_its_step(tmp_path, tensors, expected):
    text = _manifest(tmp_path, "  - concat: channels\n    inputs: [a, a]\n    outputs: [y]\n", tensors)
    assert "steps[1]" in text and expected in text, text


@requires_tool(*ONNX)
def test_a_uint8_concat_without_a_scale_or_of_another_kind_is_refused(tmp_path):
    q8 = "dtype: uint8, zero_point: 3"
    text = _manifest(tmp_path, "  - concat: channels\n    inputs: [p, q]\n    outputs: [y]\n",
                     f"  p: {{shape: [1, 4, 5, 5], {q8}, scale: 0.1}}\n  q: {{shape: [1, 4, 5, 5], {q8}}}\n"
                     f"  y: {{shape: [1, 8, 5, 5], {q8}, scale: 0.1}}\n", inputs="x, p, q")
    assert ("steps[1].inputs[1]: expected a scale and zero point on 'q' (a uint8 concat requantizes the inputs "
            "whose differ from its output's)") in text, text
    text = _manifest(tmp_path, "  - concat: sideways\n    inputs: [a, a]\n    outputs: [y]\n",
                     "  y: {shape: [1, 8, 5, 5], dtype: float32}\n")
    assert "steps[1].concat" in text and "'channels'" in text, text


def _inception(b, x: str, c: int, name: str) -> str:
    """GoogLeNet's block at a small size: 1x1, 1x1 -> 3x3, 1x1 -> 3x3 -> 3x3, max pool -> 1x1, met by a Concat."""
    one = b.relu(f"{name}_b1r", b.conv(f"{name}_b1", x, c, 8, 1))
    two = b.relu(f"{name}_b2r", b.conv(f"{name}_b2b", b.relu(f"{name}_b2ar", b.conv(f"{name}_b2a", x, c, 6, 1)),
                                       6, 12, 3, pad=1))
    three = b.relu(f"{name}_b3r", b.conv(f"{name}_b3", b.node("MaxPool", f"{name}_pool", [x], kernel_shape=[3, 3],
                                                                pads=[1, 1, 1, 1]), c, 4, 1))
    return b.node("Concat", f"{name}_cat", [one, two, three], axis=1)


def _inception_network(batch: int = 1):
    import onnx_models

    b = onnx_models.Builder(5)
    first = _inception(b, "x", 16, "a")  # 24 channels
    second = _inception(b, b.relu("mid_r", b.conv("mid", first, 24, 16, 1)), 16, "b")
    # the network's output: a Concat of a kernel's result and the first block's (NHWC between kernels, NCHW out)
    out = b.node("Concat", "tail_cat", [b.conv("tail", second, 24, 8, 3, pad=1), first], axis=-3)
    return b.model("x", [batch, 16, 9, 8], out)


def _run_whole(tmp_path, model, *targets: str, on: str = "c") -> tuple[str, str]:
    """`kernelgen import` for `targets`, then `kernelgen validate` on target `on` (every kernel and concat against
    onnxruntime, then the program's `make run`): both outputs."""
    import onnx_models

    path = onnx_models.save(model, tmp_path / "net.onnx")
    flags = [f for t in targets or (on,) for f in ("--target", t)]
    imported = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "net"), *flags])
    assert imported.exit_code == 0, imported.output
    checked = CliRunner().invoke(main, ["validate", str(tmp_path / "net" / "network.yaml"), "--target", on])
    assert checked.exit_code == 0, checked.output
    return imported.output, checked.output


@requires_tool(*ONNX, "gcc")
def test_an_inception_network_imports_with_concat_steps_and_runs_whole_as_a_program(tmp_path):
    imported, checked = _run_whole(tmp_path, _inception_network(), "c")
    assert "3 concat step(s) and no host step" in imported, imported
    assert "copied by kernelgen (channels moved, nothing computed: network.c copies them): 3 node(s) in 3 concat " \
           "step(s)" in imported, imported
    assert "not generated" not in imported, imported
    manifest = (tmp_path / "net" / "network.yaml").read_text()
    assert manifest.count("  - concat: channels") == 3 and "host:" not in manifest
    assert '"a_cat_out": {shape: [1, 24, 9, 8], dtype: float32, layout: NHWC}' in manifest, manifest
    assert '"tail_cat_out": {shape: [1, 32, 9, 8], dtype: float32}' in manifest, manifest  # the caller's: NCHW
    assert "FAIL" not in checked and checked.count("concat ") >= 3, checked
    assert "program net_run (make run)" in checked and "pass" in checked.splitlines()[-1], checked


@requires_tool(*ONNX, "gcc")
def test_a_batch_of_two_held_nchw_copies_each_image_of_the_batch(tmp_path):
    """With vulkan beside c the tensors stay NCHW (it holds no NHWC between kernels): network.c's copies are a run
    of the input's planes per image of the batch."""
    imported, checked = _run_whole(tmp_path, _inception_network(batch=2), "c", "vulkan")
    assert "NHWC" not in (tmp_path / "net" / "network.yaml").read_text()
    assert "FAIL" not in checked and "program net_run (make run)" in checked, checked


@requires_tool(*ONNX)
def test_other_concats_stay_with_onnxruntime(tmp_path):
    """A Concat along the rows, or of a constant, is ONNX nodes for onnxruntime; so is one whose input a host node
    writes (here a Concat of a rows-Concat)."""
    import onnx_models
    from onnx import numpy_helper

    b = onnx_models.Builder(2)
    a = b.conv("c1", "x", 4, 4, 1)
    rows = b.node("Concat", "rows", [a, a], axis=2)
    b.inits.append(numpy_helper.from_array(np.ones((1, 2, 5, 5), np.float32), "ones"))
    with_constant = b.node("Concat", "const_cat", [a, "ones"], axis=1)
    fed = b.node("Concat", "fed_by_host", [rows, rows], axis=1)
    out = b.add("sum", b.conv("c2", with_constant, 6, 8, 1), b.node("Slice", "cut", [fed, "s0", "s1", "s2"]))
    for name, value in (("s0", [0]), ("s1", [5]), ("s2", [2])):
        b.inits.append(numpy_helper.from_array(np.array(value, np.int64), name))
    path = onnx_models.save(b.model("x", [1, 4, 5, 5], out), tmp_path / "m.onnx")
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "m"), "--target", "c"])
    assert result.exit_code == 0, result.output
    assert "copied by kernelgen" not in result.output, result.output
    assert "concat:" not in (tmp_path / "m" / "network.yaml").read_text()


@pytest.mark.parametrize("target", ["vulkan", "opencl"])
def test_branches_at_unaligned_offsets_are_copied_on_the_gpu_and_the_network_runs_whole(tmp_path, target):
    """At 9x8 a channel is 288 bytes: the second branch would start 2,304 bytes in (aligned), the third 5,760 (not
    a multiple of 256), so that concat is copied by a dispatch per input, build says which and why, and the
    program matches onnxruntime."""
    require_tools(*ONNX, *toolchain(target))
    import onnx_models

    path = onnx_models.save(_inception_network(), tmp_path / "net.onnx")
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "net"), "--target", target])
    assert result.exit_code == 0, result.output
    built = CliRunner().invoke(main, ["build", str(tmp_path / "net" / "network.yaml"), "--target", target, "-o",
                                      str(tmp_path / "out")])
    assert ("1 concat(s) written in place by their kernels, 2 channel step(s) copied by 6 dispatch(es) (first: "
            "concat step 3 cannot be placed in device memory without a copy: 'a_b3r_out' would start 5760 bytes "
            "into 'a_cat_out', not a multiple of the 256-byte alignment") in built.output, built.output
    if target == "vulkan":  # the parts of one copied concat write apart: no barrier between them (14 if there were)
        assert "records 18 dispatches of 11 steps into one command buffer (11 barriers)" in built.output, built.output
    checked = CliRunner().invoke(main, ["validate", str(tmp_path / "net" / "network.yaml"), "--target", target])
    assert checked.exit_code == 0 and "program net_run (make run)" in checked.output, checked.output
    assert checked.output.splitlines()[-1].startswith(f"network net on {target}: pass"), checked.output


@requires_tool(*ONNX, "gcc")
def test_squeezenets_trailing_flatten_folds_into_the_global_pool(tmp_path):
    """SqueezeNet ends conv -> Relu -> GlobalAveragePool -> Flatten: the Flatten reshapes the pool's [N, C, 1, 1] to
    [N, C] and moves no byte, so the pool's kernel writes the network's [N, C] output; with its fire modules'
    Concats copied, the network is one program."""
    import onnx_models

    b = onnx_models.Builder(9)
    squeeze = b.relu("sq_r", b.conv("sq", "x", 16, 4, 1))
    fire = b.node("Concat", "fire", [b.relu("e1_r", b.conv("e1", squeeze, 4, 8, 1)),
                                     b.relu("e3_r", b.conv("e3", squeeze, 4, 8, 3, pad=1))], axis=1)
    pooled = b.node("GlobalAveragePool", "pool", [b.relu("cls_r", b.conv("cls", fire, 16, 10, 1))])
    flat = b.node("Flatten", "flat", [pooled], axis=1)
    imported, checked = _run_whole(tmp_path, b.model("x", [1, 16, 7, 6], flat), "c")
    assert "not generated" not in imported and "1 concat step(s) and no host step" in imported, imported
    manifest = (tmp_path / "net" / "network.yaml").read_text()
    assert '"flat_out": {shape: [1, 10], dtype: float32, layout: NCHW}' in manifest, manifest
    assert "FAIL" not in checked and "program net_run (make run)" in checked, checked


@requires_tool(*ONNX, "gcc")
def test_a_densenet_block_imports_whole_its_batch_norms_as_depthwise_convs(tmp_path):
    """DenseNet's norm1 follows a Concat, so no conv absorbs it: it becomes a 1x1 depthwise conv with bias (ReLU
    folded), and with the Concats copied the network (ending BN, ReLU, pool, classifier) is one program."""
    import onnx_models

    b = onnx_models.Builder(13)
    x = b.relu("stem_r", b.conv("stem", "x", 3, 8, 3, pad=1))
    block, width = onnx_models.dense_block(b, x, 8, 4, 3, "db")
    t = b.relu("final_r", onnx_models.batch_norm(b, "final_norm", block, width))
    pooled = b.node("Flatten", "flat", [b.node("GlobalAveragePool", "pool", [t])], axis=1)
    from onnx import numpy_helper

    b.inits.append(numpy_helper.from_array(b.rng.uniform(-0.3, 0.3, (5, width)).astype(np.float32), "fc_w"))
    logits = b.node("Gemm", "fc", [pooled, "fc_w"], transB=1)
    imported, checked = _run_whole(tmp_path, b.model("x", [1, 3, 10, 9], logits), "c")
    assert "not generated" not in imported and "not imported" not in imported, imported
    assert "3 concat step(s) and no host step" in imported, imported
    norms = [op for file in (tmp_path / "net").glob("*.yaml") if file.name != "network.yaml"
             for op in api.load_config(file).ops if op.kind == "conv2d" and op.kernel == (1, 1) and op.groups > 1]
    assert len(norms) == 4 and all(op.bias and op.groups == op.out_channels for op in norms), norms
    assert "FAIL" not in checked and "program net_run (make run)" in checked, checked


@requires_tool(*ONNX)
def test_a_batch_norms_folded_weights_are_what_onnxruntime_computes_with(tmp_path):
    """batch_norm_affine rounds as onnxruntime's kernel folds the statistics, and unit_variance makes the oracle's
    BatchNormalization compute x * filter + bias: both within one float32 rounding of onnxruntime's output."""
    import onnx_models
    import onnxruntime as ort
    from onnx import numpy_helper

    from kernelgen.onnx.graph import read_graph
    from kernelgen.onnx.layers import batch_norm_affine, unit_variance

    b = onnx_models.Builder(4)
    out = onnx_models.batch_norm(b, "bn", "x", 16, epsilon=1e-3)
    model = b.model("x", [2, 16, 5, 7], out)
    x = np.random.default_rng(2).standard_normal((2, 16, 5, 7)).astype(np.float32) * 4
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = session.run(None, {"x": x})[0]
    graph = read_graph(onnx_models.save(model, tmp_path / "bn.onnx"))
    factor, shift = batch_norm_affine(graph, graph.nodes[0])
    ours = x * factor.reshape(1, -1, 1, 1) + shift.reshape(1, -1, 1, 1)
    ulp = np.spacing(np.abs(theirs).astype(np.float32))
    assert np.all(np.abs(ours - theirs) <= ulp), float(np.max(np.abs(ours - theirs) / ulp))
    variance = unit_variance(1e-3)
    assert variance + np.float32(1e-3) == np.float32(1)
    for init in model.graph.initializer:  # the oracle's feed: scale = filter, B = bias, mean 0, unit variance
        values = {"bn_scale": factor.reshape(-1), "bn_bias": shift, "bn_mean": np.zeros(16, np.float32),
                  "bn_var": np.full(16, variance, np.float32)}[init.name]
        init.CopyFrom(numpy_helper.from_array(values.astype(np.float32), init.name))
    given = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.all(np.abs(given - ours) <= ulp), float(np.max(np.abs(given - ours) / ulp))


@requires_tool(*ONNX)
def test_a_batch_norm_in_training_mode_stays_with_onnxruntime(tmp_path):
    import onnx_models

    b = onnx_models.Builder(6)
    norm = onnx_models.batch_norm(b, "bn", b.conv("c1", "x", 4, 8, 1), 8)
    from onnx import helper

    b.nodes[-1].attribute.extend([helper.make_attribute("training_mode", 1)])
    b.nodes[-1].output.extend(["running_mean", "running_var"])
    path = onnx_models.save(b.model("x", [1, 4, 5, 5], norm), tmp_path / "m.onnx")
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "m"), "--target", "c"])
    assert "training mode (it also updates the running mean and variance)" in result.output, result.output


def _aliases(shapes: dict[str, tuple[int, ...]], concats: list[tuple[list[str], str]], ends=("x", "y"),
             alignment: int = 256):
    from kernelgen.targets.gpu.concat_alias import concat_aliases

    tensors = {name: Tensor(name, shape, "float32", None) for name, shape in shapes.items()}
    steps = tuple(Step(index=k, inputs=tuple(i), outputs=(o,), concat=True) for k, (i, o) in enumerate(concats))
    network = Network(name="n", path="n.yaml", model=None, inputs=(ends[0],), outputs=(ends[1],), tensors=tensors,
                      steps=steps)
    return concat_aliases(network, lambda name: 4, alignment)


def test_on_a_gpu_each_concat_input_sits_inside_the_outermost_output_at_its_channels():
    shapes = {"x": (1, 3, 8, 8), "a": (1, 4, 8, 8), "b": (1, 2, 8, 8), "ab": (1, 6, 8, 8), "c": (1, 1, 8, 8),
              "y": (1, 7, 8, 8)}
    placement = _aliases(shapes, [(["a", "b"], "ab"), (["c", "ab"], "y")])
    assert not placement.copied
    assert {n: (a.within, a.offset) for n, a in placement.aliases.items()} == {
        "a": ("y", 256), "b": ("y", 256 + 4 * 256), "ab": ("y", 256), "c": ("y", 0)}  # 256 bytes a channel


def test_densenets_concats_nest_each_earlier_output_as_the_next_ones_first_bytes():
    shapes = {"x": (1, 3, 8, 8), "s": (1, 4, 8, 8), "l1": (1, 2, 8, 8), "c1": (1, 6, 8, 8), "l2": (1, 2, 8, 8),
              "c2": (1, 8, 8, 8), "l3": (1, 2, 8, 8), "c3": (1, 10, 8, 8), "y": (1, 1, 8, 8)}
    placement = _aliases(shapes, [(["s", "l1"], "c1"), (["s", "l1", "l2"], "c2"), (["s", "l1", "l2", "l3"], "c3")])
    assert not placement.copied
    assert {n: (a.within, a.offset // 256) for n, a in placement.aliases.items()} == {  # in channels
        "s": ("c3", 0), "l1": ("c3", 4), "c1": ("c3", 0), "l2": ("c3", 6), "c2": ("c3", 0), "l3": ("c3", 8)}
    # DenseNet's last block at 7x7 (196 bytes a channel): 64 channels and a layer's 32 end at 18,816 bytes, not a
    # multiple of 256, so the second layer's features cannot follow: the first concat nests, the later two copy
    shapes = {"x": (1, 3, 7, 7), "s": (1, 64, 7, 7), "c1": (1, 96, 7, 7), "c2": (1, 128, 7, 7), "c3": (1, 160, 7, 7),
              **{f"l{k}": (1, 32, 7, 7) for k in (1, 2, 3)}, "y": (1, 1, 7, 7)}
    placement = _aliases(shapes, [(["s", "l1"], "c1"), (["s", "l1", "l2"], "c2"), (["s", "l1", "l2", "l3"], "c3")])
    assert list(placement.copied) == [1, 2] and "'l2' would start 18816 bytes into" in placement.copied[2]
    assert {n: (a.within, a.offset) for n, a in placement.aliases.items()} == {"s": ("c1", 0), "l1": ("c1", 12544)}


@pytest.mark.parametrize("shapes, concats, expected", [
    ({"a": (2, 4, 8, 8), "b": (2, 4, 8, 8), "y": (2, 8, 8, 8)}, [(["a", "b"], "y")], "a batch of 2"),
    ({"a": (1, 3, 5, 5), "b": (1, 4, 5, 5), "y": (1, 7, 5, 5)}, [(["a", "b"], "y")],
     "'b' would start 300 bytes into 'y', not a multiple of the 256-byte alignment"),
    ({"a": (1, 4, 8, 8), "b": (1, 4, 8, 8), "ab": (1, 8, 8, 8), "y": (1, 12, 8, 8)},
     [(["a", "b"], "ab"), (["ab", "a"], "y")], "'a' is an input of two concats"),
    ({"x": (1, 4, 8, 8), "b": (1, 4, 8, 8), "y": (1, 8, 8, 8)}, [(["x", "b"], "y")],
     "'x' is the network's own input or output"),
])
def test_a_concat_the_kernels_cannot_write_in_place_is_copied_and_says_why(shapes, concats, expected):
    placement = _aliases(shapes, concats)
    why = placement.copied[len(concats) - 1]
    assert "cannot be placed in device memory without a copy" in why and expected in why, why
    assert len(placement.copied) == 1 and len(placement.aliases) == 2 * (len(concats) - 1)  # the first one placed


def _small_inception():
    """The inception network at 8x8: 256 bytes a channel, so every branch starts at an aligned offset."""
    import onnx_models

    b = onnx_models.Builder(5)
    first = _inception(b, "x", 16, "a")
    second = _inception(b, b.relu("mid_r", b.conv("mid", first, 24, 16, 1)), 16, "b")
    out = b.node("Concat", "tail_cat", [b.conv("tail", second, 24, 8, 3, pad=1), first], axis=1)
    return b.model("x", [1, 16, 8, 8], out)


@pytest.mark.parametrize("target", ["vulkan", "opencl"])
def test_an_inception_network_runs_whole_on_a_gpu_its_concats_written_in_place(tmp_path, target):
    """The branches' kernels write straight into their channels of the Concat's region (the first block's output
    nested inside the network's output): the program dispatches the kernels only and matches onnxruntime."""
    require_tools(*ONNX, *toolchain(target))
    imported, checked = _run_whole(tmp_path, _small_inception(), on=target)
    assert "3 concat step(s) and no host step" in imported, imported
    assert "FAIL" not in checked and "program net_run (make run)" in checked, checked
    assert checked.splitlines()[-1].startswith(f"network net on {target}: pass"), checked



@pytest.mark.parametrize("target", ["vulkan", "opencl"])
def test_densenets_concats_nest_as_prefixes_on_the_gpu_and_the_block_runs_whole(tmp_path, target):
    """Every DenseNet layer's output is an input of each later layer's Concat, and each concat's inputs begin the
    next one's: every feature sits once, in the last concat's region, each earlier concat's output is its first
    bytes, and no copy is dispatched; the program matches onnxruntime."""
    require_tools(*ONNX, *toolchain(target))
    import onnx_models

    b = onnx_models.Builder(13)
    block, _ = onnx_models.dense_block(b, b.conv("stem", "x", 3, 8, 3, pad=1), 8, 4, 3, "db")
    imported, checked = _run_whole(tmp_path, b.model("x", [1, 3, 8, 8], block), on=target)
    assert "3 concat step(s)" in imported and "no host step" in imported, imported
    assert "FAIL" not in checked and "program net_run (make run)" in checked, checked
    assert checked.splitlines()[-1].startswith(f"network net on {target}: pass"), checked
    built = CliRunner().invoke(main, ["build", str(tmp_path / "net" / "network.yaml"), "--target", target, "-o",
                                      str(tmp_path / "out")]).output
    assert "3 concat(s) written in place by their kernels, 0 channel step(s) copied by 0 dispatch(es)" in built, built
    if target == "vulkan":  # the kernels' launches alone
        assert "records 10 dispatches of 7 steps into one command buffer" in built, built


def test_a_shuffles_parts_land_every_gth_channel():
    network, step = _network({"x": (1, 48, 28, 28), "y": (1, 48, 28, 28)}, shuffle=2)
    parts = copy_parts(network, step, {"x": "NHWC", "y": "NHWC"})
    # ShuffleNet's 48 channels: input 0..23 to output 0, 2, .., 46 and 24..47 to 1, 3, .., 47, one float a run
    assert [(p.from_channel, p.to_channel, p.last_channel, p.to_offset, p.from_offset) for p in parts] == [
        (0, 0, 46, 0, 0), (24, 1, 47, 4, 96)]
    assert [(l.extent, l.to_stride, l.from_stride) for l in parts[1].loops] == [(784, 192, 192), (24, 8, 4)]
    nchw = copy_parts(network, step, {"x": "NCHW", "y": "NCHW"})  # a plane a run, every other plane
    assert [(l.extent, l.to_stride, l.from_stride) for l in nchw[1].loops] == [(24, 6272, 3136)]
    assert nchw[1].run_bytes == 3136


@requires_tool(*ONNX)
@pytest.mark.parametrize("step, tensors, expected", [
    ("  - slice: {start: 2, stop: 9}\n    inputs: [a]\n    outputs: [y]\n", "  y: {shape: [1, 7, 5, 5], dtype: float32}\n",
     "steps[1].slice: expected 0 <= start < stop <= 4 (the channels of 'a'), got start 2, stop 9"),
    ("  - slice: {start: 1, stop: 3}\n    inputs: [a]\n    outputs: [y]\n", "  y: {shape: [1, 3, 5, 5], dtype: float32}\n",
     "channels 1..2 are 2, the output 'y' has 3"),
    ("  - shuffle: {groups: 3}\n    inputs: [a]\n    outputs: [y]\n", "  y: {shape: [1, 4, 5, 5], dtype: float32}\n",
     "steps[1].shuffle.groups: expected a divisor of 4 (the channels of 'a'), got 3"),
    ("  - shuffle: {groups: 2}\n    inputs: [a, a]\n    outputs: [y]\n", "  y: {shape: [1, 4, 5, 5], dtype: float32}\n",
     "expected one input and one output for shuffle, got 2 and 1"),
])
def test_a_slice_or_shuffle_that_does_not_fit_is_refused_at_its_key(tmp_path, step, tensors, expected):
    text = _manifest(tmp_path, step, tensors)
    assert expected in text, text


def _shufflenet_unit(b, x: str, channels: int, name: str, size: int) -> str:
    """ShuffleNetV2's stride-1 unit as PyTorch exports it: x.chunk(2, dim=1) as Shape -> Gather -> Add -> Div -> Mul
    -> Slice (the split point computed from the shape), the right half through 1x1, 3x3 depthwise, 1x1, the halves
    concatenated and shuffled by Reshape, Transpose, Reshape."""
    from onnx import numpy_helper

    half = channels // 2
    for key, value in (("one", [1]), ("zero", [0]), ("two", [2]), ("axis", [1]), ("split", [1, 2, half, size, size]),
                       ("whole", [1, channels, size, size])):
        b.inits.append(numpy_helper.from_array(np.array(value, np.int64), f"{name}_{key}"))
    channels_now = b.node("Gather", f"{name}_gather", [b.node("Shape", f"{name}_shape", [x]), f"{name}_one"], axis=0)
    middle = b.node("Mul", f"{name}_mul", [b.node("Div", f"{name}_div", [
        b.node("Add", f"{name}_add", [channels_now, f"{name}_one"]), f"{name}_two"]), f"{name}_one"])
    end = b.node("Mul", f"{name}_mul2", [middle, f"{name}_two"])
    left = b.node("Slice", f"{name}_left", [x, f"{name}_zero", middle, f"{name}_axis"])
    right = b.node("Slice", f"{name}_right", [x, middle, end, f"{name}_axis"])
    t = b.relu(f"{name}_r1", b.conv(f"{name}_c1", right, half, half, 1))
    t = b.relu(f"{name}_r3", b.conv(f"{name}_c3", b.conv(f"{name}_dw", t, half, half, 3, pad=1, groups=half), half,
                                    half, 1))
    joined = b.node("Concat", f"{name}_cat", [left, t], axis=1)
    split = b.node("Reshape", f"{name}_reshape", [joined, f"{name}_split"])
    turned = b.node("Transpose", f"{name}_transpose", [split], perm=[0, 2, 1, 3, 4])
    return b.node("Reshape", f"{name}_reshape2", [turned, f"{name}_whole"])


@requires_tool(*ONNX, "gcc")
def test_a_shufflenet_unit_imports_whole_its_split_and_shuffle_copied(tmp_path):
    """Before, shape inference left everything after the first chunk unknown (its Slice's end computed from a
    Shape), so no conv there imported; now the shape arithmetic is constants, the Slices and the shuffle are copy
    steps, and the two-unit network is one program."""
    import onnx_models

    b = onnx_models.Builder(21)
    x = b.relu("stem_r", b.conv("stem", "x", 3, 16, 3, pad=1))
    y = _shufflenet_unit(b, _shufflenet_unit(b, x, 16, "u1", 8), 16, "u2", 8)
    imported, checked = _run_whole(tmp_path, b.model("x", [1, 3, 8, 8], b.conv("head", y, 16, 10, 1)), "c")
    assert "not generated" not in imported and "not imported" not in imported, imported
    assert "2 concat, 4 slice, 2 shuffle step(s) and no host step" in imported, imported
    manifest = (tmp_path / "net" / "network.yaml").read_text()
    assert 'slice: {start: 0, stop: 8}  # "u1_left"' in manifest and "slice: {start: 8, stop: 16}" in manifest
    assert 'shuffle: {groups: 2}  # "u1_reshape", "u1_transpose", "u1_reshape2"' in manifest, manifest
    assert "FAIL" not in checked and "program net_run (make run)" in checked, checked
    built = CliRunner().invoke(main, ["build", str(tmp_path / "net" / "network.yaml"), "--target", "c", "-o",
                                      str(tmp_path / "out")])
    network_c = (tmp_path / "out" / "net" / "c" / "network.c").read_text()
    assert "channels 8..15 -> channels 1..15 every 2th" in network_c, built.output


@requires_tool(*ONNX)
def test_only_shape_arithmetic_is_folded(tmp_path):
    """A Shape of a static tensor and the integer nodes after it become Constants (same names); a DequantizeLinear
    of an int8 initializer, constant too, stays: a quantized conv's weights are read through it."""
    import onnx_models
    from onnx import helper, numpy_helper

    from kernelgen.onnx.graph import read_graph

    b = onnx_models.Builder(2)
    b.inits += [numpy_helper.from_array(np.ones((4, 4, 1, 1), np.int8), "wq"),
                numpy_helper.from_array(np.array(0.5, np.float32), "ws"),
                numpy_helper.from_array(np.array([2], np.int64), "two"),
                numpy_helper.from_array(np.array([1], np.int64), "one")]
    weights = b.node("DequantizeLinear", "dq", ["wq", "ws"])
    b.nodes.append(helper.make_node("Conv", ["x", weights], ["conv_out"], name="conv"))
    half = b.node("Div", "half", [b.node("Shape", "shape", ["conv_out"], start=1, end=2), "two"])
    out = b.node("Slice", "cut", ["conv_out", half, b.node("Mul", "twice", [half, "two"]), "one"])
    graph = read_graph(onnx_models.save(b.model("x", [1, 4, 5, 6], out), tmp_path / "m.onnx"))
    ops = {n.name: n.op_type for n in graph.nodes}
    assert ops == {"dq": "DequantizeLinear", "conv": "Conv", "shape": "Constant", "half": "Constant",
                   "twice": "Constant", "cut": "Slice"}, ops
    assert graph.constants["twice_out"].tolist() == [4] and graph.shapes["cut_out"] == (1, 2, 5, 6)


@pytest.mark.parametrize("target", ["vulkan", "opencl"])
def test_a_shufflenet_unit_runs_whole_on_a_gpu_its_slices_and_shuffle_copied(tmp_path, target):
    require_tools(*ONNX, *toolchain(target))
    import onnx_models

    b = onnx_models.Builder(21)
    y = _shufflenet_unit(b, b.conv("stem", "x", 3, 16, 3, pad=1), 16, "u1", 8)
    imported, checked = _run_whole(tmp_path, b.model("x", [1, 3, 8, 8], b.conv("head", y, 16, 10, 1)), on=target)
    assert "slice" in imported and "shuffle" in imported and "no host step" in imported, imported
    assert "FAIL" not in checked and "program net_run (make run)" in checked, checked
    assert checked.splitlines()[-1].startswith(f"network net on {target}: pass"), checked


@st.composite
def _channel_steps(draw):
    """A concat, slice or shuffle over small images, each tensor in either layout, float32 or uint8."""
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dtype = draw(st.sampled_from(["float32", "uint8"]))
    kind = draw(st.sampled_from(["concat", "slice", "shuffle"]))
    if kind == "concat":
        widths = draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
        shapes = {f"i{k}": (n, c, h, w) for k, c in enumerate(widths)} | {"y": (n, sum(widths), h, w)}
        extra = {}
    elif kind == "slice":
        c = draw(st.integers(1, 9))
        start = draw(st.integers(0, c - 1))
        stop = draw(st.integers(start + 1, c))
        shapes, extra = {"i0": (n, c, h, w), "y": (n, stop - start, h, w)}, {"slice": (start, stop)}
    else:
        groups, width = draw(st.integers(1, 4)), draw(st.integers(1, 4))
        shapes, extra = {"i0": (n, groups * width, h, w), "y": (n, groups * width, h, w)}, {"shuffle": groups}
    layouts = {name: draw(st.sampled_from(["NCHW", "NHWC"])) for name in shapes}
    return shapes, dtype, extra, layouts


@settings(max_examples=200, deadline=None)
@given(_channel_steps(), st.integers(0, 2**31 - 1))
def test_any_channel_step_copies_what_onnx_computes(case, seed):
    """network.c's loops (replayed over bytes) give what execute.moved_channels, ONNX's Concat, Slice and
    Reshape-Transpose-Reshape, gives, for any sizes, layouts and element size."""
    from kernelgen.network.execute import moved_channels

    shapes, dtype, extra, layouts = case
    network, step = _network(shapes, dtype, **extra)
    rng = np.random.default_rng(seed)
    values = {name: rng.integers(0, 255, shape).astype(dtype) for name, shape in shapes.items() if name != "y"}
    got = _copied(network, step, layouts, values)
    np.testing.assert_array_equal(got, moved_channels(step, [values[t] for t in step.inputs]))
