"""`kernelgen validate network.yaml --oracle qnn`: a QDQ network's tensors also compared with Qualcomm's HTP
simulator (onnxruntime-qnn, found in this Python or KERNELGEN_QNN_PYTHON's, run in a child process), reported as
agreement beside the verdict; one line and exit 2 where it is not installed, before anything runs. The simulator
tests run only where it is installed: kernelgen never depends on it (conftest's OPTIONAL: they skip under
KERNELGEN_REQUIRE_TOOLCHAINS=1 too)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import requires_tool
from test_hvx_network import HEXAGON, ONNX, _qdq_ends

import kernelgen
from kernelgen.cli import main
from kernelgen.network import execute
from kernelgen.network.htp_check import HtpOpinion, htp_opinion, summary
from kernelgen.onnx import qnn
from kernelgen.onnx.qnn import ENV, INSTALL, QnnRun, QnnRuntime, find_qnn


def _validate(manifest: Path, *extra: str):
    return CliRunner().invoke(main, ["validate", str(manifest), "--target", "hvx", "--seed", "3", *extra])


@requires_tool(*ONNX)
def test_without_onnxruntime_qnn_the_option_is_one_line_and_exit_2_before_anything_runs(tmp_path, monkeypatch):
    manifest = _qdq_ends(tmp_path)
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setattr(qnn, "_here", lambda: False)
    result = _validate(manifest, "--oracle", "qnn")
    assert result.exit_code == 2
    assert result.output == (f"error: --oracle qnn: onnxruntime-qnn is not installed for this Python and {ENV} is "
                             f"not set; install it: {INSTALL}\n")

    monkeypatch.setenv(ENV, str(tmp_path / "nowhere" / "python"))
    result = _validate(manifest, "--oracle", "qnn:v68")
    assert result.exit_code == 2
    assert result.output == (f"error: --oracle qnn: {ENV}={tmp_path / 'nowhere' / 'python'} is not a file (expected "
                             f"a Python with onnxruntime-qnn)\n")


def test_a_python_without_the_provider_is_named_with_the_childs_reason(tmp_path, monkeypatch):
    """KERNELGEN_QNN_PYTHON names a Python whose onnxruntime has no QNN provider (a stub onnxruntime on its path,
    onnxruntime_qnn hidden): the child's own line, through the probe."""
    stubs = tmp_path / "stubs"
    (stubs / "onnxruntime").mkdir(parents=True)
    (stubs / "onnxruntime" / "__init__.py").write_text(
        "__version__ = '0.0-stub'\ndef get_available_providers():\n    return ['CPUExecutionProvider']\n")
    (stubs / "onnxruntime_qnn").mkdir()
    (stubs / "onnxruntime_qnn" / "__init__.py").write_text("raise ImportError('hidden')\n")
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={stubs} exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    monkeypatch.setenv(ENV, str(python))
    with pytest.raises(qnn.QnnMissing) as error:
        find_qnn()
    assert str(error.value) == (f"--oracle qnn: {ENV}={python}: {sys.executable}: onnxruntime 0.0-stub has no "
                                f"QNNExecutionProvider and onnxruntime_qnn is not installed (pip install "
                                f"onnxruntime-qnn); install it: {INSTALL}")
    assert error.value.exit_code == 2


@pytest.mark.parametrize("args, message", [
    (["--oracle", "qnn:v66"], "--oracle qnn:v66: expected qnn or qnn:ARCH, ARCH one of v68, v69, v73, v75, v79, "
                              "v81"),
    (["--oracle", "tflite"], "--oracle tflite: expected qnn or qnn:ARCH"),
])
def test_an_unknown_oracle_or_arch_is_a_usage_error(args, message):
    result = CliRunner().invoke(main, ["validate", "configs/seed000_baseline.yaml", *args])
    assert result.exit_code == 2 and message in result.output


def test_the_oracle_takes_a_network_not_kernel_configs():
    result = CliRunner().invoke(main, ["validate", "configs/seed000_baseline.yaml", "--oracle", "qnn"])
    assert result.exit_code == 2
    assert "--oracle qnn compares a whole network: give a network.yaml from `kernelgen import`" in result.output


@requires_tool(*ONNX)
def test_a_float_network_has_no_bytes_to_compare(tmp_path):
    import onnx
    import onnx_models

    onnx.save(onnx_models.small_resnet(), str(tmp_path / "sr.onnx"))
    assert CliRunner().invoke(main, ["import", str(tmp_path / "sr.onnx"), "-o", str(tmp_path / "sr")]).exit_code == 0
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "sr" / "network.yaml"), "--oracle", "qnn"])
    assert result.exit_code == 2
    assert "--oracle qnn compares a quantized (QDQ) network's bytes with Qualcomm's HTP simulator; this network " \
           "has no uint8 tensor" in result.output


@requires_tool(*ONNX)
def test_agreement_counts_equal_bytes_and_the_largest_step_for_the_run_and_onnxruntime(tmp_path):
    """The arithmetic of a boundary's agreement on a simulator's values made up here: 2 of 4 bytes equal to the
    run's, 3 of 4 to onnxruntime's; float tensors in their own unit."""
    network = kernelgen.load_network(_qdq_ends(tmp_path))
    runtime = QnnRuntime("/x/python", ENV, {"onnxruntime_qnn": "2.7.0", "qnn_sdk": "2.51.0"})
    htp = {"x_q": np.array([10, 20, 30, 40], np.uint8), "y_f": np.array([0.5, 1.0], np.float32)}
    opinion = HtpOpinion("v68", runtime, QnnRun("v68", runtime, htp))
    got = opinion.agreement(network, "x_q", np.array([10, 22, 29, 40], np.uint8), np.array([10, 20, 27, 40],
                                                                                          np.uint8))
    assert (got.equal, got.max_abs, got.onnxruntime_equal, got.onnxruntime_max_abs) == (0.5, 2.0, 0.75, 3.0)
    assert got.text() == "HTP v68: 50.00% of bytes equal, largest difference 2 (onnxruntime's: 75.00%, 3)"
    floats = opinion.agreement(network, "y_f", np.array([0.5, 1.25], np.float32), np.array([0.5, 1.0], np.float32))
    assert floats.text() == "HTP v68: 50.00% of values equal, largest difference 0.25 (onnxruntime's: 100.00%, 0)"
    assert summary(opinion, [got, floats]) == (
        "HTP simulator v68 (agreement, not the verdict): 1 uint8 tensors, 50.00% to 50.00% of bytes equal to the "
        "simulator's, largest difference 2; onnxruntime's: from 75.00%, largest difference 3")
    assert opinion.text == ("second opinion: Qualcomm HTP simulator v68 (onnxruntime-qnn 2.7.0, QNN SDK 2.51.0, "
                            f"/x/python ({ENV})); agreement only, not part of the verdict")
    failed = HtpOpinion("v68", runtime, failed="the HTP simulator v68 did not run the model: no")
    assert opinion.agreement is not None and failed.agreement(network, "x_q", htp["x_q"], htp["x_q"]) is None
    assert summary(failed, []) == failed.text and failed.text.endswith(": none, the HTP simulator v68 did not run "
                                                                        "the model: no")


@requires_tool(*ONNX)
def test_a_simulator_that_fails_is_a_line_in_the_report_not_an_error(tmp_path):
    """The child's own line (exit 3), or the signal that killed it: the opinion says it has none, and why."""
    network = kernelgen.load_network(_qdq_ends(tmp_path))
    feeds = execute.network_input(network, 3)
    for body, why in (("echo 'QNN: graph finalize failed' >&2; exit 3", "QNN: graph finalize failed"),
                      ("kill -SEGV $$", "killed by signal 11")):
        python = tmp_path / "python"
        python.write_text(f"#!/bin/sh\n{body}\n")
        python.chmod(0o755)
        opinion = htp_opinion(network, feeds, "v73", QnnRuntime(str(python), ENV))
        assert opinion.run is None and opinion.failed == f"the HTP simulator v73 did not run the model: {why}"
        assert opinion.text == (f"second opinion: Qualcomm HTP simulator v73 (onnxruntime-qnn, {python} "
                                f"({ENV})): none, {opinion.failed}")


@requires_tool(*ONNX, "qnn:htp")
def test_the_simulator_is_deterministic_and_within_two_steps_of_onnxruntime_on_a_small_qdq_network(tmp_path):
    """The whole model on the simulator, every boundary among its outputs: the same bytes twice, for v68 and v73;
    each uint8 boundary within 2 steps of onnxruntime's exact integers (the issue measured 1-2 on one op: here a
    difference can carry through a conv), and v68's rounding not v73's on some byte."""
    network = kernelgen.load_network(_qdq_ends(tmp_path))
    feeds = execute.network_input(network, 3)
    expected = execute.reference(network, feeds)
    runtime = find_qnn()
    runs = {arch: [htp_opinion(network, feeds, arch, runtime) for _ in range(2)] for arch in ("v68", "v73")}
    for arch, (first, second) in runs.items():
        assert not first.failed, first.failed
        assert sorted(first.run.values) == ["pool_q", "x_q", "y_f", "y_q"]
        for name, value in first.run.values.items():
            assert np.array_equal(value, second.run.values[name]), (arch, name)
            assert value.dtype == np.dtype(network.tensors[name].dtype) and value.shape == expected[name].shape
            if value.dtype == np.uint8:
                assert 0 < first.agreement(network, name, expected[name], expected[name]).max_abs <= 2, (arch, name)
    assert any(not np.array_equal(runs["v68"][0].run.values[t], runs["v73"][0].run.values[t])
               for t in ("pool_q", "y_q"))


@requires_tool(*ONNX, "qnn:htp")
def test_nothing_runs_on_the_cpu_quietly(tmp_path):
    """A kernel's nodes cut out of the model start at a uint8 graph input, which the QNN provider leaves to the
    CPU: with the CPU fallback off, the simulator refuses the model rather than answering partly from the CPU."""
    from kernelgen.onnx import subgraph
    from kernelgen.onnx.qnn import QnnFailed, run_qnn

    network = kernelgen.load_network(_qdq_ends(tmp_path))
    step = network.steps[1]
    model = subgraph.nodes_model(subgraph.graph_of(network.model), tuple(step.config.source.nodes),
                                 {"x_q": np.dtype(np.uint8)}, {"pool_q": np.dtype(np.uint8)})
    with pytest.raises(QnnFailed) as error:
        run_qnn(find_qnn(), model, {"x_q": np.zeros((1, 8, 12, 12), np.uint8)}, ["pool_q"], "v73")
    assert str(error.value) == ("the HTP simulator v73 did not run the model: This session contains graph nodes that "
                                "are assigned to the default CPU EP, but fallback to CPU EP has been explicitly "
                                "disabled by the user.")


@requires_tool(*ONNX, *HEXAGON, "qnn:htp")
def test_validate_oracle_qnn_reports_each_boundary_beside_the_verdict(tmp_path):
    """hvx kernels bit-exact with onnxruntime: their agreement with the simulator is onnxruntime's, boundary by
    boundary, for the kernels' own arch (hvx.arch v68 here); the verdict is the network's alone."""
    result = _validate(_qdq_ends(tmp_path, arch="v68"), "--oracle", "qnn", "--jsonl")
    assert result.exit_code == 0, result.output
    *steps, verdict = [json.loads(line) for line in result.output.splitlines()]
    assert [s["name"] for s in steps] == ["quantize", "stem_to_pool", "conv_a_to_conv_b", "dequantize"]
    for step in steps:
        (htp,) = step["qnn"]
        assert htp["tensor"] in ("x_q", "pool_q", "y_q", "y_f") and htp["arch"] == "v68"
        assert (htp["equal"], htp["max_abs"]) == (htp["onnxruntime_equal"], htp["onnxruntime_max_abs"])
        assert 0.5 < htp["equal"] < 1
    assert verdict["status"] == "pass" and verdict["qnn"]["arch"] == "v68" and not verdict["qnn"]["failed"]
    assert verdict["qnn"]["summary"].startswith("HTP simulator v68 (agreement, not the verdict): 3 uint8 tensors, ")
