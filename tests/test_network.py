"""Whole networks: `kernelgen import` writes network.yaml; `kernelgen validate|bench network.yaml` run the network's
kernels one after another on their real toolchains, host steps in onnxruntime, every boundary tensor against
onnxruntime running the whole model; bad manifests end in exit 2 at their line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import toolchain
from click.testing import CliRunner
from conftest import require_tools, requires_tool

import kernelgen
from kernelgen.cli import main
from kernelgen.targets import TARGETS

ONNX = ("py:onnx", "py:onnxruntime")
TOOLS = {name: toolchain(name) for name in TARGETS}  # each target's own list (`kernelgen targets`)


def _imported(tmp_path: Path, name: str, model, *extra: str) -> Path:
    import onnx

    onnx.save(model, str(tmp_path / f"{name}.onnx"))
    result = CliRunner().invoke(main, ["import", str(tmp_path / f"{name}.onnx"), "-o", str(tmp_path / name), *extra])
    assert result.exit_code == 0, result.output
    assert f"network {tmp_path / name / 'network.yaml'}" in result.output
    return tmp_path / name / "network.yaml"


@pytest.fixture
def small_resnet(tmp_path) -> Path:
    import onnx_models

    return _imported(tmp_path, "sr", onnx_models.small_resnet())


@requires_tool(*ONNX)
def test_manifest_lists_kernels_and_host_steps_in_execution_order(small_resnet):
    network = kernelgen.load_network(small_resnet)
    assert [(s.label, s.inputs, s.outputs) for s in network.steps] == [
        ("stem", ("x",), ("stem_relu_out",)),
        ("host MaxPool", ("stem_relu_out",), ("pool_out",)),
        ("block1_conv1_to_block1_conv2", ("pool_out",), ("block1_relu2_out",)),
        ("block2_down", ("block1_relu2_out",), ("block2_down_out",)),
        # the Add of two conv branches (the downsample's a side input), its Relu and the classifier head, fused
        ("block2_conv1_to_fc", ("block1_relu2_out", "block2_down_out"), ("fc_out",))]
    assert network.steps[1].nodes == ("pool",)
    assert tuple(network.steps[-1].config.source.nodes) == ("block2_conv1", "block2_relu1", "block2_conv2", "block2_add",
                                                     "block2_relu2", "gap", "flatten", "fc")
    assert (network.inputs, network.outputs) == (("x",), ("fc_out",))
    tensors = network.tensors
    assert (tensors["x"].shape, tensors["stem_relu_out"].shape, tensors["block2_down_out"].shape,
            tensors["fc_out"].shape) == ((1, 3, 32, 32), (1, 8, 16, 16), (1, 16, 4, 4), (1, 10))
    assert {t.dtype for t in tensors.values()} == {"float32"}
    assert tensors["pool_out"].layout == "NCHW" and tensors["fc_out"].layout == "NCHW"  # a kernel writes the logits


@pytest.mark.parametrize("target", ["c", "opencl", "vulkan"])
def test_float_network_runs_end_to_end_against_onnxruntime(small_resnet, target):
    require_tools(*ONNX, *TOOLS[target])
    runs = list(kernelgen.validate_network(kernelgen.load_network(small_resnet), target, seed=7))
    assert len(runs) == 5 and all(r.ran for r in runs)
    assert all(r.record.passed for r in runs if r.step.is_kernel), [r.record.detail for r in runs if r.record]
    # two float32 implementations, each within its rounding bound of the exact result: they drift apart by a few
    # float32 roundings per layer (measured ~1e-7 here), far below a wiring mistake's order-1 difference
    assert all(a.relative < 1e-5 and a.passed for r in runs for a in r.agreement)
    assert runs[-1].agreement[0].tensor == "fc_out"


@requires_tool(*ONNX, *TOOLS["hvx"])
def test_quantized_network_is_bit_exact_with_onnxruntime_on_hvx(tmp_path):
    import onnx_models

    manifest = _imported(tmp_path, "qn", onnx_models.qdq_network(), "--target", "hvx")
    network = kernelgen.load_network(manifest)
    # the input's QuantizeLinear is a convert step kernelgen runs; the max pool fuses into the stem's kernel; the
    # global average pool of float values (no QuantizeLinear after it) stays on the host
    assert [s.label for s in network.steps] == ["quantize", "stem_to_pool", "conv_a_to_conv_b", "host "
                                                "DequantizeLinear+GlobalAveragePool"]
    assert (network.tensors["pool_q"].scale, network.tensors["pool_q"].zero_point) == (pytest.approx(0.04), 0)
    runs = list(kernelgen.validate_network(network, "hvx", seed=3))
    assert all(r.record.passed for r in runs if r.step.is_kernel)
    uint8 = [a for r in runs for a in r.agreement if a.dtype == "uint8"]
    assert len(uint8) == 3 and all(a.max_abs == 0 and a.relative == 0 for a in uint8)  # every byte onnxruntime's
    assert runs[-1].agreement[0].max_abs == 0.0  # and so the float output, computed from them by the same nodes
    # bench: QEMU counts packets instead of a clock; each kernel's share is among the counted kernels
    result = CliRunner().invoke(main, ["bench", str(manifest), "--repeat", "1", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    kernels = [s for s in report["steps"] if s["kind"] == "kernel"]
    assert [s["name"] for s in kernels] == ["stem_to_pool", "conv_a_to_conv_b"] and all(s["seconds"] is None for s in kernels)
    assert report["counted_packets"] == sum(s["packets"] for s in kernels) > 0
    assert sum(s["share"] for s in kernels) == pytest.approx(1.0)
    text = CliRunner().invoke(main, ["bench", str(manifest), "--repeat", "1"]).output
    # the quantize step's time is Python's, not the DSP's: the table says so (the host step is onnxruntime's)
    quantize = next(line for line in text.splitlines() if "] quantize" in line)
    assert "timed in Python here; the DSP program runs it" in quantize, text
    assert "timed in Python" not in next(line for line in text.splitlines() if "] host" in line), text


@requires_tool(*ONNX, *TOOLS["c"])
def test_a_kernel_wired_to_the_wrong_tensor_fails_end_to_end(tmp_path):
    # block2_down reads the pool output instead of block1's (same shape, so the manifest loads): every kernel
    # still passes its own check, and the comparison with the whole model catches it. Imported for opencl too, so
    # both tensors are NCHW (a c-only import holds block1's NHWC: network.c refuses that wiring, the next test)
    import onnx_models

    small_resnet = _imported(tmp_path, "sr", onnx_models.small_resnet(), "--target", "c", "--target", "opencl")
    text = small_resnet.read_text()
    wrong = text.replace('  - kernel: block2_down\n    inputs: ["block1_relu2_out"]',
                         '  - kernel: block2_down\n    inputs: ["pool_out"]')
    assert wrong != text
    small_resnet.write_text(wrong)
    result = CliRunner().invoke(main, ["validate", str(small_resnet), "--target", "c", "--seed", "1"])
    assert result.exit_code == 1, result.output
    assert result.output.splitlines()[-1].startswith("network sr on c: FAIL")
    down = next(line for line in result.output.splitlines() if "block2_down" in line)
    assert " pass " in down and "(limit 0.001)" in down and float(down.split("within ")[1].split()[0]) > 0.01


@requires_tool(*ONNX, *TOOLS["c"])
def test_a_kernel_reading_an_nchw_tensor_as_nhwc_is_exit_2_at_its_layout(small_resnet):
    text = small_resnet.read_text()
    small_resnet.write_text(text.replace('  - kernel: block2_down\n    inputs: ["block1_relu2_out"]',
                                         '  - kernel: block2_down\n    inputs: ["pool_out"]'))
    result = CliRunner().invoke(main, ["validate", str(small_resnet), "--target", "c", "--seed", "1"])
    assert result.exit_code == 2, result.output
    assert result.output.splitlines()[-1] == (
        f"{small_resnet.parent / 'block2_down.yaml'}:3:38: error: input.layout: network.c passes 'pool_out' as the "
        f"manifest holds it (NCHW, unpadded) from step to step; block2_down's input is NHWC: give it `input: "
        f"{{layout: NCHW}}` (kernelgen import writes that)")


@requires_tool(*ONNX, *TOOLS["c"])
def test_validate_json_streams_one_record_per_step(small_resnet):
    result = CliRunner().invoke(main, ["validate", str(small_resnet), "--target", "c", "--json", "--seed", "2"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.output.splitlines()]
    assert [r.get("step") for r in records] == [0, 1, 2, 3, 4, None]
    assert [r.get("kind") for r in records[:5]] == ["kernel", "host", "kernel", "kernel", "kernel"]
    assert records[0]["checked"] == "chain" and records[2]["checked"] == "op-by-op" and records[0]["seed"] == 2
    assert records[-1]["status"] == "pass" and all(r["status"] == "pass" for r in records[:5])
    assert all(a["passed"] and a["relative"] < 1e-5 for r in records[:5] for a in r["agreement"])


@requires_tool(*ONNX, *TOOLS["c"])
def test_bench_network_times_every_step_beside_onnxruntime(small_resnet):
    result = CliRunner().invoke(main, ["bench", str(small_resnet), "--target", "c", "--repeat", "2", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    steps = report["steps"]
    assert [s["name"] for s in steps][:3] == ["stem", "host MaxPool", "block1_conv1_to_block1_conv2"]
    assert all(s["seconds"] > 0 for s in steps) and sum(s["share"] for s in steps) == pytest.approx(1.0)
    assert report["seconds"] == pytest.approx(sum(s["seconds"] for s in steps))
    stem = kernelgen.load_config(small_resnet.parent / "stem.yaml")
    assert steps[0]["flops"] == kernelgen.plan(stem).flops == 2 * 16 * 16 * 8 * 3 * 9
    assert report["onnxruntime_seconds"] > 0


@requires_tool(*ONNX, *TOOLS["c"])
def test_bench_network_plot_draws_each_kernel_and_each_step(small_resnet, tmp_path):
    """The chart is an SVG with a point per timed kernel (labelled by its step number) and a bar per step (labelled
    by its name), drawn from the same run's numbers; the same data draws the same bytes."""
    from kernelgen.api import network_chart
    from kernelgen.measure import roofline

    chart = tmp_path / "where.svg"
    result = CliRunner().invoke(main, ["bench", str(small_resnet), "--target", "c", "--repeat", "1", "--plot",
                                       str(chart)])
    assert result.exit_code == 0, result.output
    assert f"chart: {chart}" in result.stderr
    text = chart.read_text()
    assert text.startswith("<?xml") and "<svg" in text
    steps = [line.split("]", 1)[1].split()[0] for line in result.stdout.splitlines() if line.startswith("  [")]
    assert steps[:2] == ["stem", "host"]
    for number, name in enumerate(steps, start=1):
        assert f"[{number}] {name}" in text  # each bar's label
    drawn = []
    real = roofline.plot_network
    monkey = pytest.MonkeyPatch()
    monkey.setattr(roofline, "plot_network", lambda *a: drawn.append(a) or real(*a))
    times = kernelgen.bench_network(kernelgen.load_network(small_resnet), "c", repeat=1)
    network_chart(tmp_path / "a.svg", times)
    monkey.undo()
    (_, title, bars, unit, points, peaks, _), = drawn
    kernels = [s for s in times.steps if s.kind == "kernel"]
    assert unit == "ms" and len(bars) == len(times.steps) and len(points) == len(kernels)
    assert [p[0] for p in points] == [str(s.step + 1) for s in kernels]
    assert points[0][1] == kernels[0].flops / kernels[0].bytes and peaks.gflops > 0
    assert sum(b.value for b in bars) == pytest.approx(times.seconds * 1e3)
    real(tmp_path / "b.svg", *drawn[0][1:])  # the peaks are measured each run: the same ones again
    assert (tmp_path / "a.svg").read_bytes() == (tmp_path / "b.svg").read_bytes()


@requires_tool(*ONNX)
def test_bench_plot_refuses_an_unknown_format_or_no_matplotlib_before_measuring(small_resnet, tmp_path, monkeypatch):
    import importlib.util

    result = CliRunner().invoke(main, ["bench", str(small_resnet), "--target", "c", "--plot", str(tmp_path / "a.pdf")])
    assert result.exit_code == 2
    assert "expected a file name ending in .png or .svg (the chart's format), got .pdf" in result.output
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    result = CliRunner().invoke(main, ["bench", str(small_resnet), "--target", "c", "--plot", str(tmp_path / "a.png")])
    assert result.exit_code == 2
    assert "--plot needs matplotlib, an optional extra: pip install 'kernelgen[plot]'" in result.output
    assert not (tmp_path / "a.png").exists()


# ---------------------------------------------------------------- bad manifests: exit 2 at their line

def _bad(manifest: Path, old: str, new: str) -> str:
    text = manifest.read_text()
    assert old in text
    manifest.write_text(text.replace(old, new, 1))
    result = CliRunner().invoke(main, ["validate", str(manifest), "--target", "c"])
    assert result.exit_code == 2, result.output
    return result.output


def _line_of(manifest: Path, needle: str) -> int:
    return next(i for i, line in enumerate(manifest.read_text().splitlines(), start=1) if needle in line)


@requires_tool(*ONNX)
def test_bad_manifest_a_tensor_no_step_produces(small_resnet):
    out = _bad(small_resnet, 'outputs: ["pool_out"]', 'outputs: ["block2_down_out"]')
    line = _line_of(small_resnet, 'inputs: ["pool_out"]')
    assert f"network.yaml:{line}:14: error: steps[2].inputs[0]: no step produces 'pool_out' (and it is not a " \
           f"network input)" in out
    assert "steps[3].outputs[0]: 'block2_down_out' is already written by step 1" in out


@requires_tool(*ONNX)
def test_bad_manifest_a_tensor_written_after_it_is_read(small_resnet):
    # the block2 kernel listed before block2_down, whose output it reads: written later, but block2_down does not
    # depend on it
    down = '  - kernel: block2_down\n    inputs: ["block1_relu2_out"]\n    outputs: ["block2_down_out"]\n'
    text = small_resnet.read_text()
    assert text.endswith('outputs: ["fc_out"]\n') and down in text
    small_resnet.write_text(text.replace(down, "") + down)
    out = _bad(small_resnet, "network: sr", "network: sr")
    line = _line_of(small_resnet, 'inputs: ["block1_relu2_out", "block2_down_out"]')
    assert f"network.yaml:{line}:34: error: steps[3].inputs[1]: 'block2_down_out' is written by step 4, after " \
           f"this one (steps run in the listed order)" in out


@requires_tool(*ONNX)
def test_bad_manifest_a_cycle(small_resnet):
    out = _bad(small_resnet, 'inputs: ["pool_out"]', 'inputs: ["block2_down_out"]')
    line = _line_of(small_resnet, 'inputs: ["block2_down_out"]')
    assert (f"network.yaml:{line}:14: error: steps[2].inputs[0]: a cycle: step 2 reads 'block2_down_out' from step "
            f"3, which depends on step 2") in out
    assert "steps[2].inputs[0]: shape mismatch" in out  # it is not block1's input shape either


@requires_tool(*ONNX)
def test_bad_manifest_an_unknown_tensor_and_a_shape_mismatch(small_resnet):
    out = _bad(small_resnet, '"pool_out": {shape: [1, 8, 8, 8]', '"pool_out": {shape: [1, 8, 9, 8]')
    line = _line_of(small_resnet, '  - kernel: block1_conv1_to_block1_conv2') + 1
    assert (f"network.yaml:{line}:14: error: steps[2].inputs[0]: shape mismatch: 'pool_out' is [1, 8, 9, 8] in "
            f"tensors:, but kernel block1_conv1_to_block1_conv2 reads [1, 8, 8, 8] (NCHW)") in out
    out = _bad(small_resnet, 'outputs: ["pool_out"]', 'outputs: ["pool"]')
    assert "steps[1].outputs[0]: 'pool' is not in tensors:" in out


@requires_tool(*ONNX)
def test_bad_manifest_a_missing_model_file_and_a_schema_error(small_resnet):
    out = _bad(small_resnet, 'model: "../sr.onnx"', 'model: "../gone.onnx"')
    assert f"network.yaml:{_line_of(small_resnet, 'model:')}:8: error: model: no such file:" in out
    small_resnet.write_text(small_resnet.read_text().replace('model: "../gone.onnx"', 'model: "../sr.onnx"'))
    out = _bad(small_resnet, "  - kernel: stem\n", "  - kernel: stem\n    host: [pool]\n")
    assert ("error: steps[0]: expected exactly one of kernel: (a config name), host: (ONNX nodes), convert: "
            "(quantize or dequantize), concat: channels, slice: {start, stop}, shuffle: {groups} or resize: {mode, coordinates, scales}") in out


@requires_tool(*ONNX)
def test_quantized_chains_are_grouped_by_cost_on_hvx(tmp_path):
    import onnx_models

    manifest = _imported(tmp_path, "ql", onnx_models.qlinear_chain())
    configs = sorted(p.name for p in manifest.parent.glob("*.yaml") if p.name != "network.yaml")
    assert configs == ["qconv1_to_qconv2.yaml"]  # fused: no recompute (1x1 after 3x3), less traffic
    result = CliRunner().invoke(main, ["import", str(tmp_path / "ql.onnx"), "-o", str(tmp_path / "ql1"),
                                       "--max-group-ops", "1"])
    assert result.exit_code == 0, result.output
    assert "executed/useful FLOPs 1.00, activations" in result.output and "of a 8192 KiB budget" in result.output
    network = kernelgen.load_network(tmp_path / "ql1" / "network.yaml")
    assert [(s.label, s.inputs, s.outputs) for s in network.steps] == [
        ("qconv1", ("x",), ("qconv1_out",)), ("qconv2", ("qconv1_out",), ("qconv2_out",))]
    # a residual add of the chain's input pins its block: --max-group-ops 1 cannot split it, and says why
    model = onnx_models.save(onnx_models.qdq_resnet_block(), tmp_path / "qr.onnx")
    result = CliRunner().invoke(main, ["import", str(model), "-o", str(tmp_path / "qr"), "--max-group-ops", "1"])
    assert result.exit_code == 0, result.output
    assert "conv1_to_conv2: one kernel although more than --max-group-ops 1 ops" in result.output




@requires_tool(*ONNX)
def test_plan_of_a_network_lists_its_steps_and_arena(small_resnet):
    result = CliRunner().invoke(main, ["plan", str(small_resnet), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert [(r["kind"], r["name"]) for r in report["steps"]][:3] == [
        ("kernel", "stem"), ("host", "host MaxPool"), ("kernel", "block1_conv1_to_block1_conv2")]
    stem = report["steps"][0]
    assert stem["flops"] == stem["executed_flops"] == 2 * 16 * 16 * 8 * 3 * 9
    assert report["peak_bytes"] <= report["arena_bytes"] < report["naive_bytes"]


@requires_tool(*ONNX, "glslangValidator")
def test_a_network_lists_its_outputs_without_building_them_spirv_included(tmp_path):
    """--list-outputs of a manifest names files without planning or compiling (CMake asks before every build):
    the names must still be every file the build writes, each kernel's SPIR-V modules included."""
    import onnx_models

    manifest = _imported(tmp_path, "sr", onnx_models.small_resnet(), "--target", "vulkan")
    out = tmp_path / "out"
    listed = CliRunner().invoke(main, ["build", str(manifest), "-o", str(out), "--list-outputs"])
    assert listed.exit_code == 0 and not out.exists(), listed.output
    assert any(name.endswith(".spv") for name in listed.output.split())
    built = CliRunner().invoke(main, ["build", str(manifest), "-o", str(out)])
    assert built.exit_code == 0, built.output
    assert sorted(str(p) for p in out.rglob("*") if p.is_file()) == sorted(listed.output.split())


@requires_tool(*ONNX)
def test_build_of_a_network_lists_its_outputs_and_writes_a_depfile(small_resnet, tmp_path):
    out = tmp_path / "out"
    listed = CliRunner().invoke(main, ["build", str(small_resnet), "-o", str(out), "--list-outputs"])
    assert listed.exit_code == 0 and not out.exists(), listed.output
    names = listed.output.split()
    assert str(out / "sr" / "c" / "network.c") in names and str(out / "stem" / "c" / "stem.c") in names
    built = CliRunner().invoke(main, ["build", str(small_resnet), "-o", str(out), "--depfile", str(out / "net.d")])
    assert built.exit_code == 0, built.output
    assert sorted(str(p) for p in out.rglob("*") if p.is_file() and p.name != "net.d") == sorted(names)
    assert "network.c runs 5 steps over a" in built.output
    rules = (out / "net.d").read_text()
    lines = rules[rules.index(f"{out / 'sr' / 'c' / 'network.c'}:"):].splitlines()
    network_rule = "\n".join(lines[:next(i for i, line in enumerate(lines) if not line.endswith("\\")) + 1])
    # the driver depends on the manifest, every kernel's config and its own templates
    for needed in (str(small_resnet), str(small_resnet.parent / "block2_down.yaml"), "network.c.j2"):
        assert needed in network_rule
