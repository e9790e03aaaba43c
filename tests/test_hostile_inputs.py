"""Issue 44's hostile inputs through the real command line: each ends in exit 0 (it works) or a clean exit 2 naming
the file, line, column and key; never a traceback, an IndexError or a hang; nothing half-written.

Manifests (network.yaml) are a small imported network edited one way each: a wrong shape or dtype, another model, a
host node onnxruntime refuses or the model lacks, only host steps, a bad layout, an output that is the input. `run
--input` files are broken .npy files (a huge header, empty, text, a FIFO). ONNX models are built small
(tests/onnx_models.py) with one hostile node each.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from onnx import numpy_helper

from builders import toolchain
from conftest import requires_tool, time_limit
from onnx_models import Builder, save, with_unsupported_nodes

from kernelgen.cli import main

SECONDS_PER_COMMAND = 120  # a network validate compiles two small c kernels: seconds; a hang is caught
ERROR = re.compile(r"^(?P<path>\S.*?):(?P<line>\d+):(?P<col>\d+): error: (?P<rest>.*)$", re.MULTILINE)


def cli(*args: str, seconds: int = SECONDS_PER_COMMAND):
    """The command's result: never a traceback, exit 0 or 2, and exit 2 only with file:line:col."""
    with time_limit(seconds):
        result = CliRunner().invoke(main, [str(a) for a in args])
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, f"{args[0]}: {type(result.exception).__name__}: {result.exception}\n{result.output}"
    assert "Traceback" not in result.output
    assert result.exit_code in (0, 2), f"{args[0]} exited {result.exit_code}:\n{result.output}"
    if result.exit_code == 2:
        assert ERROR.search(result.output), f"{args[0]}: exit 2 without file:line:col:\n{result.output}"
    return result


def error_at(result, path: Path | str, key: str) -> dict[str, str]:
    """The command failed (exit 2) with an error at `key` in `path` (""; any): its line and message."""
    assert result.exit_code == 2, result.output
    found = [m for m in ERROR.finditer(result.output) if not key or m["rest"].startswith(f"{key}: ")]
    assert found, f"no error at {key}:\n{result.output}"
    assert Path(found[0]["path"]).name == Path(path).name, result.output
    return {"line": found[0]["line"], "message": found[0]["rest"][len(key) + 2 if key else 0:]}


def line_of(path: Path, text: str) -> int:
    """The 1-based line of `path` holding `text`."""
    return next(k for k, line in enumerate(path.read_text().splitlines(), start=1) if text in line)


# ---------------------------------------------------------------- an imported network, edited


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    """with_unsupported_nodes imported: kernel stem, host LRN, kernel conv_after_lrn_to_fc, host Softmax."""
    root = tmp_path_factory.mktemp("net")
    save(with_unsupported_nodes(), root / "model.onnx")
    result = cli("import", root / "model.onnx", "-o", root / "net")
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture
def net(imported: Path, tmp_path: Path) -> Path:
    """A fresh copy of the imported network's folder (configs + network.yaml), the model beside it."""
    import shutil

    shutil.copy(imported / "model.onnx", tmp_path / "model.onnx")
    shutil.copytree(imported / "net", tmp_path / "net")
    return tmp_path / "net" / "network.yaml"


def edit(manifest: Path, old: str, new: str) -> None:
    text = manifest.read_text()
    assert old in text, f"{old!r} not in\n{text}"
    manifest.write_text(text.replace(old, new, 1))


RUNS = [("validate",), ("bench", "--repeat", "1")]  # the commands that run the model
SOFTMAX = '"softmax_out": {shape: [1, 4], dtype: float32}'


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("command", RUNS, ids=["validate", "bench"])
def test_1_a_manifest_shape_the_model_disagrees_with(command, net):
    edit(net, SOFTMAX, '"softmax_out": {shape: [1, 5], dtype: float32}')
    found = error_at(cli(*command, net), net, "tensors.softmax_out.shape")
    assert int(found["line"]) == line_of(net, '"softmax_out": {')
    assert "[1, 4]" in found["message"] and "model" in found["message"]


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("command", RUNS, ids=["validate", "bench"])
def test_2_a_manifest_dtype_the_model_disagrees_with(command, net):
    edit(net, SOFTMAX, '"softmax_out": {shape: [1, 4], dtype: float16}')
    found = error_at(cli(*command, net), net, "tensors.softmax_out.dtype")
    assert int(found["line"]) == line_of(net, '"softmax_out": {')
    assert "float32" in found["message"]


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("command", RUNS, ids=["validate", "bench"])
def test_3_a_manifest_pointing_at_another_model(command, net, tmp_path):
    from onnx_models import resnet_basic_block

    save(resnet_basic_block(), tmp_path / "other.onnx")
    edit(net, 'model: "../model.onnx"', 'model: "../other.onnx"')
    result = cli(*command, net)
    found = error_at(result, net, "tensors.stem_relu_out")
    assert "other.onnx has no tensor" in found["message"]
    assert int(found["line"]) == line_of(net, '"stem_relu_out": {')


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("command", RUNS, ids=["validate", "bench"])
def test_4_a_host_step_onnxruntime_refuses(command, net):
    # the Softmax step fed a tensor it does not read: its nodes cut out read fc_out, which nothing gives them
    edit(net, '    inputs: ["fc_out"]\n    outputs: ["softmax_out"]',
         '    inputs: ["lrn_out"]\n    outputs: ["softmax_out"]')
    result = cli(*command, net)
    found = error_at(result, net, "steps[3].host")
    assert "onnxruntime" in found["message"]


HOST_ONLY = """network: hostonly
model: "../model.onnx"
inputs: ["x"]
outputs: ["softmax_out"]
tensors:
  "x": {shape: [1, 3, 16, 16], dtype: float32, layout: NCHW}
  "softmax_out": {shape: [1, 4], dtype: float32}
steps:
  - host: ["stem", "stem_relu", "lrn", "conv_after_lrn", "gap", "flatten", "fc", "softmax"]
    inputs: ["x"]
    outputs: ["softmax_out"]
"""


@pytest.mark.parametrize("command", ["plan", "build", "validate", "bench"])
def test_5_to_7_a_manifest_with_only_host_steps(net, command, tmp_path):
    net.write_text(HOST_ONLY)
    extra = {"build": ["-o", tmp_path / "out"], "bench": ["--repeat", "1"]}.get(command, [])
    found = error_at(cli(command, net, *extra), net, "steps")
    assert "kernel" in found["message"]
    assert not (tmp_path / "out").exists()


def test_8_a_manifest_tensor_with_a_layout_that_does_not_parse(net, tmp_path):
    edit(net, '"lrn_out": {shape: [1, 8, 8, 8], dtype: float32, layout: NCHW}',
         '"lrn_out": {shape: [1, 8, 8, 8], dtype: float32, layout: NCHQ}')
    for args in (("plan", net), ("build", net, "-o", tmp_path / "out")):
        found = error_at(cli(*args), net, "tensors.lrn_out.layout")
        assert int(found["line"]) == line_of(net, '"lrn_out": {')
    assert not (tmp_path / "out").exists()


def test_9_outputs_naming_the_network_input_is_refused(net, tmp_path):
    """Refused at the manifest: network.c writes each output through the step that produces it, and no step
    produces the input (a copy of its own input is the caller's); building it gave C that gcc -Werror refuses."""
    edit(net, 'outputs: ["softmax_out"]', 'outputs: ["softmax_out", "x"]')
    found = error_at(cli("build", net, "-o", tmp_path / "out"), net, "outputs[1]")
    assert "network input" in found["message"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("edit_to", [("shape: [1, 8, 8, 8], dtype: float32, layout: NCHW}", "shape: [1, 0, 8, 8], "
                                      "dtype: float32, layout: NCHW}", "shape[1]"),
                                     ("shape: [1, 8, 8, 8], dtype: float32", "shape: [1, 8, 8, 8], dtype: float64", "dtype")])
def test_20_a_bad_tensor_value_is_blamed_on_that_tensor(net, edit_to):
    old, new, key = edit_to
    edit(net, f'"lrn_out": {{{old}', f'"lrn_out": {{{new}')
    found = error_at(cli("plan", net), net, f"tensors.lrn_out.{key}")
    assert int(found["line"]) == line_of(net, '"lrn_out": {')


@requires_tool(*toolchain("c"))
def test_22_validate_dump_into_a_folder_that_cannot_be_made(net, tmp_path):
    (tmp_path / "file").write_text("a file, not a folder")
    config = net.parent / "stem.yaml"
    result = cli("validate", config, "--dump", tmp_path / "file" / "dump")
    found = error_at(result, tmp_path / "file" / "dump", "--dump")
    assert "FAIL" not in result.output and "pass" not in result.output  # nothing ran
    assert "cannot create" in found["message"]


@requires_tool(*toolchain("c"))
@pytest.mark.parametrize("command", RUNS, ids=["validate", "bench"])
def test_23_a_host_node_the_model_lacks(command, net):
    edit(net, 'host: ["lrn"]', 'host: ["no_such_node"]')
    found = error_at(cli(*command, net), net, "steps[1].host[0]")
    assert "no_such_node" in found["message"]
    assert int(found["line"]) == line_of(net, 'no_such_node')


# ---------------------------------------------------------------- run --input


@pytest.fixture(scope="module")
def small_config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cfg") / "small.yaml"
    path.write_text("name: small\ninput: {shape: [1, 6, 6, 4], layout: nhwc}\n"
                    "ops:\n  - conv2d: {out_channels: 4, kernel: 3, pad: 1}\ntargets: [c]\n")
    return path


def _npy_header(header: bytes, version: int = 2) -> bytes:
    """A .npy file's start: magic, version, header length (4 bytes from version 2 on), header."""
    return b"\x93NUMPY" + bytes([version, 0]) + len(header).to_bytes(4, "little") + header


@pytest.mark.parametrize("case", ["huge_shape", "huge_header", "empty", "text", "pickle", "too_big", "fifo",
                                  "folder"])
def test_10_to_13_run_input_files_that_are_not_tensors(small_config, tmp_path, case):
    path = tmp_path / "x.npy"
    if case == "huge_shape":  # a header that says 2^40 floats, and 16 bytes of them: numpy allocated 4 TB
        path.write_bytes(_npy_header(b"{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }"
                                     .ljust(118) + b"\n", version=2) + bytes(16))
    elif case == "huge_header":  # a header declared 512 MB long, padded with spaces up to it
        with open(path, "wb") as handle:
            handle.write(_npy_header(b"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 6, 6, 4), }"))
            handle.seek(512 << 20)
            handle.write(b"\n")
        with open(path, "r+b") as handle:
            handle.seek(8)
            handle.write((512 << 20).to_bytes(4, "little"))
    elif case == "empty":
        path.write_bytes(b"")
    elif case == "text":
        path.write_text("1 2 3 4\n")
    elif case == "pickle":
        np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    elif case == "too_big":  # a valid .npy of 10 million floats, for a 144-element input
        np.save(path, np.zeros(10_000_000, dtype=np.float32))
    elif case == "fifo":
        os.mkfifo(path)  # nobody ever writes: reading it would block forever
    elif case == "folder":
        path.mkdir()
    out = tmp_path / "out"
    result = cli("run", small_config, "--target", "c", "--input", f"input={path}", "-o", out, seconds=20)
    found = error_at(result, path, "--input input")
    assert "Aborted" not in result.output and "allow_pickle" not in result.output
    assert not out.exists()


def test_10_to_13_a_good_input_file_still_runs(small_config, tmp_path):
    x = np.random.default_rng(0).standard_normal((1, 6, 6, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", np.ones((4, 4, 3, 3), dtype=np.float32))
    out = tmp_path / "out"
    result = cli("run", small_config, "--target", "c", "--input", f"input={tmp_path / 'x.npy'}",
                 "--input", f"filter1={tmp_path / 'w.npy'}", "-o", out)
    assert result.exit_code == 0, result.output
    assert np.load(out / "output.npy").shape == (1, 6, 6, 4)


# ---------------------------------------------------------------- import


def _import(model, tmp_path: Path, *extra: str):
    save(model, tmp_path / "model.onnx")
    return cli("import", tmp_path / "model.onnx", "-o", tmp_path / "out", *extra)


def _gap_fc(b: Builder, t: str, channels: int, bias_shape: tuple[int, ...]) -> str:
    t = b.node("Flatten", "flatten", [b.node("GlobalAveragePool", "gap", [t])])
    b.inits.append(numpy_helper.from_array(b.rng.uniform(-0.4, 0.4, (7, channels)).astype(np.float32), "fc_w"))
    b.inits.append(numpy_helper.from_array(b.rng.uniform(-0.2, 0.2, bias_shape).astype(np.float32), "fc_b"))
    return b.node("Gemm", "fc", [t, "fc_w", "fc_b"], transB=1)


@requires_tool(*toolchain("c"))
def test_14_a_gemm_with_a_1_by_k_bias_imports_and_validates(tmp_path):
    b = Builder(5)
    t = _gap_fc(b, b.relu("r", b.conv("c", "x", 3, 8, 3, pad=1)), 8, (1, 7))
    assert _import(b.model("x", [1, 3, 8, 8], t), tmp_path).exit_code == 0
    (config,) = [p for p in (tmp_path / "out").glob("*.yaml") if p.name != "network.yaml"]
    result = cli("validate", config)
    assert result.exit_code == 0, result.output
    assert "pass" in result.output and "FAIL" not in result.output


def test_15_import_never_writes_a_manifest_its_plan_rejects(tmp_path):
    """The model's output is a Slice of nothing ([1, 4, 0, 8]): a manifest's tensors hold at least one element, so
    the import says why there is no network.yaml (and writes the config, which plans)."""
    b = Builder(6)
    t = b.conv("c", "x", 4, 4, 3, pad=1)
    for name, value in (("starts", [0]), ("ends", [0]), ("axes", [2])):
        b.inits.append(numpy_helper.from_array(np.array(value, dtype=np.int64), name))
    t = b.node("Slice", "slice", [t, "starts", "ends", "axes"])
    result = _import(b.model("x", [1, 4, 8, 8], t), tmp_path)
    assert result.exit_code == 0, result.output
    manifest = tmp_path / "out" / "network.yaml"
    if manifest.exists():
        assert cli("plan", manifest).exit_code == 0
    else:
        assert "no network.yaml" in result.output and "slice_out" in result.output, result.output
    configs = list((tmp_path / "out").glob("*.yaml"))
    assert configs
    for config in configs:
        assert cli("plan", config).exit_code == 0, config


def test_16_a_5000_character_node_name_imports_into_configs_that_plan(tmp_path):
    b = Builder(7)
    t = b.relu("r", b.conv("c" * 5000, "x", 3, 8, 3, pad=1))
    t = b.node("LRN", "l" * 5000, [t], size=3)
    t = b.conv("d", t, 8, 8, 3, pad=1)
    result = _import(b.model("x", [1, 3, 8, 8], t), tmp_path)
    assert result.exit_code == 0, result.output
    written = sorted((tmp_path / "out").glob("*.yaml"))
    assert len(written) == 3, result.output  # two configs and network.yaml
    for path in written:
        assert cli("plan", path).exit_code == 0, path
        assert max(len(line) for line in path.read_text().splitlines()) < 1200  # no name spelled out whole


def test_16_a_long_node_name_network_validates(tmp_path):
    """The shortened names are the ones every reader of the model sees: the host step runs, the kernels get the
    model's weights."""
    b = Builder(7)
    t = b.relu("r", b.conv("c" * 5000, "x", 3, 8, 3, pad=1))
    t = b.node("LRN", "l" * 5000, [t], size=3)
    t = b.conv("d", t, 8, 8, 3, pad=1)
    assert _import(b.model("x", [1, 3, 8, 8], t), tmp_path).exit_code == 0
    result = cli("validate", tmp_path / "out" / "network.yaml")
    assert result.exit_code == 0, result.output
    assert ": pass;" in result.output


def _chain_with(middle) -> object:
    """conv c1, then whatever `middle` adds, then conv c2 and c3: a chain the cost search cuts."""
    b = Builder(8)
    t = b.relu("r1", b.conv("c1", "x", 4, 4, 3, pad=1))
    t = middle(b, t)
    t = b.relu("r3", b.conv("c3", b.conv("c2", t, 4, 4, 3, pad=1), 4, 4, 1))
    return b.model("x", [1, 4, 8, 8], t)


def _broadcast_add(b: Builder, t: str) -> str:
    """c1's result [1, 4, 8, 8] plus a [1, 4, 1, 1] conv result of a pooled branch: valid ONNX broadcasting, which
    a residual (same shape) is not."""
    small = b.conv("cs", b.node("GlobalAveragePool", "gp", [t]), 4, 4, 1)
    return b.add("badd", small, t)


def _hardsigmoid_nan(b: Builder, t: str) -> str:
    t = b.conv("cn", t, 4, 4, 1)
    return b.node("HardSigmoid", "hs", [t], alpha=float("nan"))


def _huge_stride(b: Builder, t: str) -> str:
    return b.conv("cbig", t, 4, 4, 1, stride=2 ** 31)


def _huge_input(b: Builder, t: str) -> str:
    """c1's result tiled to [1, 4, 32768, 32768]: 2^32 elements, more than a kernel indexes (the planner refuses
    any config reading it, though each node's attributes are fine), then pooled back to [1, 4, 1, 1]."""
    b.inits.append(numpy_helper.from_array(np.array([1, 1, 4096, 4096], dtype=np.int64), "repeats"))
    t = b.conv("chuge", b.node("Tile", "tile", [t, "repeats"]), 4, 4, 1)
    return b.node("GlobalAveragePool", "ghuge", [t])


@pytest.mark.parametrize("middle, node, told", [
    (_broadcast_add, "badd", "not generated (host steps in network.yaml, run by onnxruntime): Add"),
    (_hardsigmoid_nan, "hs", "not generated (host steps in network.yaml, run by onnxruntime): HardSigmoid"),
    (_huge_stride, "cbig", "not imported: Conv cbig: strides [2147483648, 2147483648]: beyond 2147483647"),
    (_huge_input, "chuge", "not imported: Conv chuge: it cannot be a kernel (input.shape: the input [1, 32768, "
                           "32768, 4] has 4294967296 elements")],
    ids=["broadcast_add", "hardsigmoid_nan", "stride_2_31", "planner_refuses_one_op"])
def test_17_to_19_one_bad_candidate_does_not_abort_the_import(tmp_path, middle, node, told):
    result = _import(_chain_with(middle), tmp_path)
    assert result.exit_code == 0, result.output
    assert "<candidate group>" not in result.output
    assert told in result.output  # the user is told which node is left to onnxruntime, and why
    manifest = tmp_path / "out" / "network.yaml"
    text = manifest.read_text()
    assert f'host: ["{node}"]' in text or f'"{node}"' in text
    assert cli("plan", manifest).exit_code == 0
    for config in (tmp_path / "out").glob("*.yaml"):
        assert cli("plan", config).exit_code == 0, config


def test_17_to_19_an_op_the_planner_refuses_on_a_target_without_a_fusion_cost(tmp_path):
    """opencl cuts no chain by cost (one kernel per conv2d): the op is still planned alone before it is written."""
    result = _import(_chain_with(_huge_input), tmp_path, "--target", "opencl")
    assert result.exit_code == 0, result.output
    assert "not imported: Conv chuge: it cannot be a kernel (input.shape: the input [1, 32768, 32768, 4]" \
        in result.output
    for path in (tmp_path / "out").glob("*.yaml"):
        assert cli("plan", path).exit_code == 0, path


def test_17_to_19_a_quantized_op_the_planner_refuses_is_left_to_onnxruntime(tmp_path):
    """qconv1 reads a [1, 32, 40000, 40000] uint8 input (more elements than a kernel indexes) with stride 20000;
    qconv2 reads its [1, 48, 2, 2] result: it is imported, qconv1 left out with the planner's reason."""
    from onnx_models import qlinear_chain

    model = qlinear_chain()
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[2].dim_value = dims[3].dim_value = 40000
    from onnx import helper

    model.graph.node[0].attribute.append(helper.make_attribute("strides", [20000, 20000]))
    result = _import(model, tmp_path)
    assert result.exit_code == 0, result.output
    assert "not imported: QLinearConv qconv1: it cannot be a kernel (input.shape: the input [1, 40000, 40000, 32] " \
           "has 51200000000 elements" in result.output
    text = (tmp_path / "out" / "network.yaml").read_text()
    assert 'host: ["qconv1"]' in text
    for path in (tmp_path / "out").glob("*.yaml"):
        assert cli("plan", path).exit_code == 0, path


@requires_tool(*toolchain("c"))
def test_17_to_19_the_network_around_a_broadcast_add_validates(tmp_path):
    assert _import(_chain_with(_broadcast_add), tmp_path).exit_code == 0
    result = cli("validate", tmp_path / "out" / "network.yaml")
    assert result.exit_code == 0, result.output


def test_21_add_of_a_conv_to_itself_imports_the_conv_once(tmp_path):
    b = Builder(9)
    t = b.conv("c1", "x", 4, 4, 3, pad=1)
    t = b.add("twice", t, t)
    t = b.conv("c2", t, 4, 4, 3, pad=1)
    assert _import(b.model("x", [1, 4, 8, 8], t), tmp_path).exit_code == 0
    out = tmp_path / "out"
    manifest = (out / "network.yaml").read_text()
    in_configs = [line for p in out.glob("*.yaml") if p.name != "network.yaml" for line in p.read_text().splitlines()
                  if line.startswith("source:") and '"c1"' in line]
    assert len(in_configs) + manifest.count('"c1"]') == 1, manifest  # c1 is computed once: in one kernel, or a host step
    assert "side_inputs" not in "".join(p.read_text() for p in out.glob("*.yaml"))


@requires_tool(*toolchain("c"))
def test_21_add_of_a_conv_to_itself_network_validates(tmp_path):
    b = Builder(9)
    t = b.add("twice", b.conv("c1", "x", 4, 4, 3, pad=1), "c1_out")
    t = b.conv("c2", t, 4, 4, 3, pad=1)
    assert _import(b.model("x", [1, 4, 8, 8], t), tmp_path).exit_code == 0
    result = cli("validate", tmp_path / "out" / "network.yaml")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("kind", ["dev_zero", "fifo", "too_big"])
def test_24_import_refuses_what_is_not_a_model_file_without_reading_it(tmp_path, kind):
    path = tmp_path / "model.onnx"
    if kind == "dev_zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    else:  # sparse: its size says too big before a byte is read
        with open(path, "wb") as handle:
            handle.truncate(3 << 30)
    result = cli("import", path, "-o", tmp_path / "out", seconds=20)
    found = error_at(result, path, "")
    assert "regular file" in found["message"] or "larger than" in found["message"]
    assert not (tmp_path / "out").exists()
