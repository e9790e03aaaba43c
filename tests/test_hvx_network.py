"""The hvx network driver: network.c / network.h for a QDQ network (kernels over a DDR arena and a VTCM region,
weights from the weights file's data section, quantize / dequantize of the float ends in C), built by clang-19 and
run under qemu-hexagon bit-exact with the kernels run one by one from Python; the VTCM refusal; int8 filters typed
int8_t; the convert steps' rounding against numpy's on ties."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import requires_tool

import kernelgen
from kernelgen.cli import main
from kernelgen.errors import ConfigError
from kernelgen.layout import ACTIVATION_DIMS, parse_layout
from kernelgen.network import execute
from kernelgen.network.program import build_network
from kernelgen.network.weights import pack_network_weights
from kernelgen.targets import TARGETS
from kernelgen.targets.hvx.network import network_files
from kernelgen.targets.hvx.toolchain import build, run

ONNX = ("py:onnx", "py:onnxruntime")
HEXAGON = ("clang-19", "ld.lld-19", "qemu-hexagon")


def _qdq_ends(tmp_path: Path, arch: str | None = None) -> Path:
    """tests/onnx_models.qdq_network without its host GlobalAveragePool: QuantizeLinear -> two kernels ->
    DequantizeLinear, float in and out (a network the DSP runs whole), imported for hvx."""
    import onnx
    import onnx_models
    from onnx import TensorProto, helper

    model = onnx_models.qdq_network()
    del model.graph.node[-1]  # the GlobalAveragePool of the dequantized output
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info("y_f", TensorProto.FLOAT, None))
    onnx.save(model, str(tmp_path / "qe.onnx"))
    result = CliRunner().invoke(main, ["import", str(tmp_path / "qe.onnx"), "-o", str(tmp_path / "qe"),
                                       "--target", "hvx"])
    assert result.exit_code == 0, result.output
    if arch:
        for config in (tmp_path / "qe").glob("*.yaml"):
            if config.name != "network.yaml":
                config.write_text(config.read_text() + f"hvx: {{arch: {arch}}}\n")
    return tmp_path / "qe" / "network.yaml"


def _jobs(network) -> dict:
    hvx = TARGETS["hvx"]
    return {step.config.name: hvx.build(step.config, kernelgen.plan(step.config)) for step in network.kernels}


def _files(network) -> dict[str, str]:
    jobs = _jobs(network)
    plan, _ = pack_network_weights(network, jobs, TARGETS["hvx"])
    return network_files(network, jobs, plan)


@requires_tool(*ONNX)
def test_network_h_plans_ddr_arena_vtcm_and_types_int8_filters(tmp_path):
    network = kernelgen.load_network(_qdq_ends(tmp_path))
    assert [s.label for s in network.steps] == ["quantize", "stem_to_pool", "conv_a_to_conv_b", "dequantize"]
    header, source = (text := _files(network))["network.h"], text["network.c"]
    # x_q: 8 channels padded to a 32-channel block on 16x16 pixels; pool_q and y_q: one 8x8x32 block each; x_q and
    # y_q are never alive together, so y_q reuses x_q's bytes
    assert "#define QE_ARENA_BYTES 10240" in header
    assert '"x_q" uint8 [1, 8, 12, 12] nhwc-8h8w32c, 8192 bytes, arena + 0' in header
    assert '"y_q" uint8 [1, 16, 6, 6] nhwc-8h8w32c, 2048 bytes, arena + 0' in header
    # the largest workspace (the stem's caches and scratch), not their sum
    jobs = _jobs(network)
    workspaces = [job.target_plan.workspace_bytes for job in jobs.values()]
    assert f"#define QE_VTCM_BYTES {max(workspaces)}" in header and max(workspaces) < sum(workspaces)
    # and build's line says so (not one arena holding the workspaces too, as c's has)
    assert TARGETS["hvx"].network_note(network, jobs) == (
        f"qe: network.c runs 4 steps with the tensors between them in a 10,240-byte DDR arena and each kernel's "
        f"workspace in a {max(workspaces):,}-byte VTCM region (of the 8,388,608 bytes v73 allows)")
    # int8 filters typed int8_t, in the table and in the kernels' prototypes network.c calls
    assert re.search(r"stem_to_pool filter1 const int8_t \[1, 1, 3, 3, 8, 32, 4\], 9216 bytes", header)
    assert re.search(r"stem_to_pool bias1 const int32_t \[16\]", header)
    assert "input_scale * weight_scale[k]" in header  # the biases' scale, said
    assert "const int8_t *restrict filter1" in jobs["stem_to_pool"].files["stem_to_pool.h"]
    assert "stem_to_pool((const uint8_t *)(base + 0), (const int8_t *)(weights + 0), " in source
    assert "qe_quantize_input0((const float *)(inputs[0]), (uint8_t *)(base + 0));" in source
    assert "qe_dequantize_output0((const uint8_t *)(base + 0), (float *)(outputs[0]));" in source


@requires_tool(*ONNX)
def test_a_workspace_that_does_not_fit_the_vtcm_is_refused_naming_kernel_and_bytes(tmp_path):
    manifest = _qdq_ends(tmp_path)
    network = kernelgen.load_network(manifest)
    stem = _jobs(network)["stem_to_pool"].target_plan.workspace_bytes
    # the second kernel's config allows 20 KiB of VTCM (its own workspace fits); the stem's does not fit in it
    config = manifest.parent / "conv_a_to_conv_b.yaml"
    config.write_text(config.read_text() + "hvx: {vtcm_bytes: 20480}\n")
    network = kernelgen.load_network(manifest)
    with pytest.raises(ConfigError) as error:
        _files(network)
    text = str(error.value)
    assert f"kernel stem_to_pool needs {stem} bytes of VTCM" in text and "20480 bytes of v73" in text
    assert "steps[1].kernel" in text


@requires_tool(*ONNX)
def test_a_host_step_is_refused_at_its_key(tmp_path):
    import onnx
    import onnx_models

    onnx.save(onnx_models.qdq_network(), str(tmp_path / "qn.onnx"))
    result = CliRunner().invoke(main, ["import", str(tmp_path / "qn.onnx"), "-o", str(tmp_path / "qn"),
                                       "--target", "hvx"])
    assert result.exit_code == 0, result.output
    with pytest.raises(ConfigError, match=r"steps\[3\]\.host.*runs kernels, convert and channel steps only"):
        _files(kernelgen.load_network(tmp_path / "qn" / "network.yaml"))
    # build writes the kernels alone and says why; what it lists is what it writes
    manifest = str(tmp_path / "qn" / "network.yaml")
    built = CliRunner().invoke(main, ["build", manifest, "-o", str(tmp_path / "out")])
    assert built.exit_code == 0, built.output
    assert "no hvx driver: the hvx network driver runs kernels, convert and channel steps only" in built.output
    written = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*") if p.is_file())
    listed = CliRunner().invoke(main, ["build", manifest, "-o", str(tmp_path / "out"), "--list-outputs"])
    assert sorted(str(Path(line).relative_to(tmp_path / "out")) for line in listed.output.split()) == written
    assert not (tmp_path / "out" / "qn").exists() and any(p.endswith(".c") for p in written)


@requires_tool(*ONNX, *HEXAGON, "make")
@pytest.mark.parametrize("arch", ["v66", "v68", "v73"])
def test_the_program_under_qemu_is_bit_exact_with_the_python_driven_run(tmp_path, arch):
    network = kernelgen.load_network(_qdq_ends(tmp_path, arch))
    validation = kernelgen.validate_network(network, "hvx", seed=5)
    runs = list(validation)
    assert all(job.target_plan.arch == arch for job in validation.jobs.values())
    makefile = build_network(network, TARGETS["hvx"], validation.jobs).files["Makefile"]
    assert f"-mcpu=hexagon{arch}" in makefile and "CC = clang-19" in makefile
    program = validation.run_program()  # network.c, the kernels and the weights file, built by make, run by qemu
    assert program.ran and program.passed and program.max_abs == 0, program.why
    assert program.against == "the step-by-step run"
    verdict = validation.verdict()
    assert verdict.status == "pass" and "output bit-exact with the step-by-step run" in verdict.summary
    assert all(a.max_abs == 0 for r in runs for a in r.agreement)  # and every uint8 tensor onnxruntime's
    assert len(np.unique(runs[-1].values["y_f"])) > 20  # a real image of many levels, not a constant one


@requires_tool(*ONNX, *HEXAGON)
def test_quantize_rounds_half_to_even_as_numpy_and_saturates(tmp_path):
    network = kernelgen.load_network(_qdq_ends(tmp_path))
    files = _files(network)
    jobs = _jobs(network)
    for name, text in {**files, **{k: v for job in jobs.values() for k, v in job.files.items()}}.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    x_q = network.tensors["x_q"]
    scale = np.float32(x_q.scale)
    # ties: x whose float32 quotient x / scale is exactly k + 0.5, every one of them from -140.5 to 140.5
    candidates = ((np.arange(-141, 141) + np.float32(0.5)) * scale).astype(np.float32)
    ties = candidates[(candidates / scale).astype(np.float32) % 1 == 0.5]
    assert len(ties) > 50 and {int(np.floor(t / scale)) % 2 for t in ties} == {0, 1}  # odd and even below
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(1152) * 3).astype(np.float32)
    x[:len(ties)] = ties
    x[-6:] = [np.nan, np.inf, -np.inf, 1e30, -1e30, -0.0]
    x = x.reshape(network.tensors["x"].shape)
    (tmp_path / "x.bin").write_bytes(x.tobytes())
    (tmp_path / "harness.c").write_text(
        '#include "kg_runtime.h"\n#include "network.h"\n'
        "static float x[QE_INPUT0_ELEMENTS];\nstatic uint8_t q[8192] __attribute__((aligned(128)));\n"
        "int main(int argc, char **argv)\n{\n  if (kg_read_file(argv[1], x, sizeof x) != 0) {\n"
        '    kg_die("x", 1);\n  }\n  qe_quantize_input0(x, q);\n  return kg_write_file(argv[2], q, sizeof q);\n}\n')
    binary = build([tmp_path / "harness.c", tmp_path / "network.c", tmp_path / "stem_to_pool.c",
                    tmp_path / "conv_a_to_conv_b.c"], tmp_path / "harness", arch="v73", include_dirs=[tmp_path])
    run(binary, ["x.bin", "q.bin"], cwd=tmp_path, arch="v73")
    packed = np.fromfile(tmp_path / "q.bin", np.uint8)
    layout = parse_layout(x_q.layout, ACTIVATION_DIMS).bind((1, 12, 12, 8))
    got = layout.unpack(packed).transpose(0, 3, 1, 2)
    want = execute.convert(network, network.steps[0], x)
    assert np.array_equal(got, want)
    assert got.reshape(-1)[-6:].tolist() == [0, 255, 0, 255, 0, 128]  # NaN -> 0 as onnxruntime's reference


@requires_tool(*ONNX, *HEXAGON, "make")
def test_build_make_make_run_without_the_model_is_bit_exact_with_validation(tmp_path):
    manifest = _qdq_ends(tmp_path)
    network = kernelgen.load_network(manifest)
    validation = kernelgen.validate_network(network, "hvx", seed=11)
    runs = list(validation)
    assert validation.verdict().status == "pass"
    stepwise = runs[-1].values["y_f"]  # the Python-driven run's output: the last uint8 tensor dequantized
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["build", str(manifest), "-o", str(out)])
    assert result.exit_code == 0, result.output
    folder = out / "qe" / "hvx"
    assert {"network.c", "network.h", "qe.weights", "qe_run.c", "Makefile", "kg_runtime.h", "kg_libc.c",
            "qemu_libc/stdio.h"} <= {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    makefile = (folder / "Makefile").read_text()
    assert "CC = clang-19" in makefile and "-mcpu=hexagonv73" in makefile and "qemu-hexagon -cpu" in makefile
    (tmp_path / "qe.onnx").unlink()  # nothing at run time reads the model
    np.save(tmp_path / "x.npy", validation.feeds["x"])
    made = subprocess.run(["make", "-s", "-C", str(folder), "run", f"INPUT={tmp_path / 'x.npy'}",
                           f"OUTPUT={tmp_path / 'y.npy'}", "REPEAT=2"], capture_output=True, text=True, timeout=900)
    assert made.returncode == 0, made.stderr
    assert re.search(r"kg_counters qe_run packets=\d+", made.stdout)
    assert re.search(r"qe: \d+\.\d{3} ms per run \(median of 2\)", made.stdout)
    got = np.load(tmp_path / "y.npy")
    assert got.dtype == np.float32 and got.shape == (1, 16, 6, 6)
    assert np.array_equal(got.view(np.uint32), stepwise.view(np.uint32))
    # a weights file from another build is refused, naming both digests
    other = folder / "other.weights"
    data = bytearray((folder / "qe.weights").read_bytes())
    data[16] ^= 0xFF  # the digest's first byte
    other.write_bytes(bytes(data))
    refused = subprocess.run(["qemu-hexagon", "-cpu", "v67", str(folder / "qe_run"), "--weights", str(other),
                              str(tmp_path / "x.npy"), str(tmp_path / "z.npy")], capture_output=True, text=True)
    assert refused.returncode == 1 and "another build's weights" in refused.stderr
