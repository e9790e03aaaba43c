"""<network>_run: the program `kernelgen build network.yaml` writes beside network.c, built by its own Makefile and run
as a user runs it (issue 46): with the ONNX file moved away, its output against onnxruntime's on the same input; a
weights file from another build refused; --embed-weights building the same program; the .npy reader's refusals;
the same bytes on every build; a network with host steps gets no program; build builds every target the configs
name; validate runs the program as its end-to-end verdict.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

import kernelgen
from kernelgen.api import TARGETS
from kernelgen.cli import main
from kernelgen.measure.program_run import PROGRAM_AGREEMENT, run_program
from kernelgen.network import execute

from builders import toolchain
from conftest import requires_tool
from programs import another_builds_weights, make
from test_network_weights import import_classifier

# float32 end to end, as test_network_c.FLOAT_TOLERANCE argues: a few units of roundoff per product summed, about
# 1e-6 here; 1e-4 of the largest magnitude leaves a margin while a wrong offset, layout or weight is order 1.
FLOAT_TOLERANCE = PROGRAM_AGREEMENT
SHAPE = (2, 3, 37, 29)  # classifier_network's input
NET = "classifier"  # the network's name: the model's file name


def build(manifest: Path, out: Path, *extra: str) -> str:
    result = CliRunner().invoke(main, ["build", str(manifest), "-o", str(out), *extra])
    assert result.exit_code == 0, result.output
    return result.output




def program(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(folder / f"{NET}_run"), *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> dict:
    """Imported, built, the model moved away, made: the program's folder and the reference on a fresh input."""
    root = tmp_path_factory.mktemp("program")
    manifest = import_classifier(root)
    out = root / "out"
    note = build(manifest, out)
    model = root / "classifier.onnx"
    kept = root / "kept" / "classifier.onnx"
    kept.parent.mkdir()
    shutil.move(model, kept)  # nothing from here on reads the model but the reference
    folder = out / NET / "c"
    make(folder)
    x = np.random.default_rng(5).standard_normal(SHAPE).astype(np.float32)
    np.save(root / "x.npy", x)
    import onnxruntime

    session = onnxruntime.InferenceSession(str(kept), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {"x": x})
    return dict(root=root, manifest=manifest, out=out, folder=folder, note=note, want=want, kept=kept)


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    apart = np.nan_to_num(np.abs(got.astype(np.float64) - want), nan=np.inf)
    return float(apart.max() / np.abs(want).max())


@requires_tool(*toolchain("c"), "make")
def test_make_run_without_the_model_matches_onnxruntime(shipped):
    folder, root = shipped["folder"], shipped["root"]
    assert f"`make -C {folder}` builds {NET}_run" in shipped["note"]
    done = make(folder, "run", f"INPUT={root / 'x.npy'}", f"OUTPUT={root / 'y.npy'}", "REPEAT=3")
    assert f"{NET}: " in done.stdout and "ms per run (median of 3)" in done.stdout
    got = np.load(root / "y.npy")
    assert got.dtype == np.float32 and got.shape == shipped["want"].shape == (2, 7)
    assert relative_error(got, shipped["want"]) <= FLOAT_TOLERANCE
    # the Makefile builds with the c target's flags (warnings shown, never fatal in a user's build)
    makefile = (folder / "Makefile").read_text()
    assert "CFLAGS = -std=c99 -Wall -Wextra -O3 -march=native -ffp-contract=fast\n" in makefile


@requires_tool(*toolchain("c"), "make")
def test_a_weights_file_from_another_build_is_refused(shipped, tmp_path):
    theirs = another_builds_weights(shipped["kept"], tmp_path, "c")
    ours = (shipped["folder"] / f"{NET}.weights").read_bytes()
    done = program(shipped["folder"], "--weights", str(theirs), str(shipped["root"] / "x.npy"), str(tmp_path / "y.npy"))
    assert done.returncode == 1 and not (tmp_path / "y.npy").exists()
    assert (f"{theirs}: the file is another build's weights: its digest is {theirs.read_bytes()[16:48].hex()}, this "
            f"program was built for {ours[16:48].hex()}") in done.stderr


@requires_tool(*toolchain("c"), "make")
def test_embed_weights_builds_the_same_program_without_the_file(shipped, tmp_path):
    out = tmp_path / "out"
    shutil.copy(shipped["kept"], shipped["root"] / "classifier.onnx")  # the build reads the model
    try:
        build(shipped["manifest"], out, "--embed-weights")
        listed = CliRunner().invoke(main, ["build", str(shipped["manifest"]), "-o", str(out), "--embed-weights",
                                           "--list-outputs"])
    finally:
        (shipped["root"] / "classifier.onnx").unlink()
    assert sorted(listed.output.split()) == sorted(str(p) for p in out.rglob("*") if p.is_file())
    folder = out / NET / "c"
    embedded = (folder / f"{NET}_weights.c").read_text()
    assert f"const unsigned char {NET}_embedded_weights[" in embedded
    make(folder)
    (folder / f"{NET}.weights").unlink()
    root = shipped["root"]
    assert program(folder, str(root / "x.npy"), str(tmp_path / "embedded.npy")).returncode == 0
    assert program(shipped["folder"], str(root / "x.npy"), str(tmp_path / "file.npy")).returncode == 0
    assert (tmp_path / "embedded.npy").read_bytes() == (tmp_path / "file.npy").read_bytes()


def npy_v2(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as f:
        np.lib.format.write_array(f, array, version=(2, 0))


@requires_tool(*toolchain("c"), "make")
@pytest.mark.parametrize("write, message", [
    (lambda p: np.save(p, np.zeros(SHAPE, np.float64)), "dtype '<f8', expected '<f4'"),
    (lambda p: np.save(p, np.zeros(SHAPE, ">f4")), "dtype '>f4', expected '<f4' (a big-endian array"),
    (lambda p: np.save(p, np.zeros((1, 3, 37, 29), np.float32)), "shape (1, 3, 37, 29), expected (2, 3, 37, 29)"),
    (lambda p: np.save(p, np.asfortranarray(np.zeros(SHAPE, np.float32))), "a Fortran-order array"),
    (lambda p: npy_v2(p, np.zeros(SHAPE, np.float32)), ".npy version 2.0, expected 1.0"),
    (lambda p: p.write_bytes(b"not numpy at all"), "not a .npy file"),
    (lambda p: p.write_bytes(np.lib.format.magic(1, 0) + b"\x40\x00{'descr'"), "its header is cut short"),
])
def test_the_npy_reader_says_what_it_found(shipped, tmp_path, write, message):
    bad = tmp_path / "bad.npy"
    write(bad)
    done = program(shipped["folder"], str(bad), str(tmp_path / "y.npy"))
    assert done.returncode == 1 and f"{bad}: {message}" in done.stderr, done.stderr


@requires_tool(*toolchain("c"), "make")
def test_short_data_and_usage_errors(shipped, tmp_path):
    x = shipped["root"] / "x.npy"
    short = tmp_path / "short.npy"
    short.write_bytes(x.read_bytes()[:-4])
    done = program(shipped["folder"], str(short), str(tmp_path / "y.npy"))
    assert done.returncode == 1 and "less data than its shape" in done.stderr
    assert program(shipped["folder"]).returncode == 2
    assert program(shipped["folder"], "--repeat", "0", str(x), str(tmp_path / "y.npy")).returncode == 2
    assert "usage:" in program(shipped["folder"], "--bogus", str(x), str(tmp_path / "y.npy")).stderr
    missing = make(shipped["folder"], "run", check=False)
    assert missing.returncode != 0 and "make run needs INPUT=in.npy OUTPUT=out.npy" in missing.stderr


def test_the_same_build_writes_the_same_bytes(tmp_path):
    manifest = import_classifier(tmp_path)
    build(manifest, tmp_path / "a")
    build(manifest, tmp_path / "b", "--target", "c")
    a = {p.relative_to(tmp_path / "a"): p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()}
    b = {p.relative_to(tmp_path / "b"): p.read_bytes() for p in (tmp_path / "b").rglob("*") if p.is_file()}
    assert a == b and Path(NET, "c", f"{NET}.weights") in a and Path(NET, "c", "Makefile") in a


def test_a_network_with_host_steps_gets_no_program(tmp_path):
    import onnx_models

    onnx.save(onnx_models.small_resnet(), str(tmp_path / "sr.onnx"))
    assert CliRunner().invoke(main, ["import", str(tmp_path / "sr.onnx"), "-o", str(tmp_path / "sr")]).exit_code == 0
    note = build(tmp_path / "sr" / "network.yaml", tmp_path / "out")
    assert "no program: 1 host step(s) (MaxPool), which run in onnxruntime" in note
    written = sorted(p.name for p in (tmp_path / "out" / "sr" / "c").iterdir())
    assert written == ["network.c", "network.h", "sr.weights"]


def test_build_builds_every_target_the_configs_name(tmp_path, monkeypatch):
    from plugin_target import CArgs

    monkeypatch.setitem(TARGETS, "c_args", CArgs())  # a target that writes kernels alone (tests/plugin_target)
    manifest = import_classifier(tmp_path, "net", "c", "c_args")
    note = build(manifest, tmp_path / "out")
    assert (tmp_path / "out" / "downsample" / "c" / "downsample.c").is_file()
    assert (tmp_path / "out" / "downsample" / "c_args" / "downsample_args.c").is_file()
    assert (tmp_path / "out" / NET / "c" / "Makefile").is_file()
    assert not (tmp_path / "out" / NET / "c_args").exists()
    assert (f"{NET} on c_args: the kernels alone; kernelgen writes no weights file, driver or program for the c_args "
            f"target yet") in note
    narrowed = tmp_path / "narrowed"
    build(manifest, narrowed, "--target", "c_args")
    assert not (narrowed / "downsample" / "c").exists() and (narrowed / "downsample" / "c_args").is_dir()


@requires_tool(*toolchain("c"), "make")
def test_validate_runs_the_program_as_its_end_to_end_verdict(tmp_path):
    manifest = import_classifier(tmp_path)
    result = CliRunner().invoke(main, ["validate", str(manifest), "--target", "c", "--seed", "3"])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if line.startswith("[end]"))
    assert f"{NET}_run (make run)" in row and " pass " in row
    assert f"; program {NET}_run (make run): output within" in result.output.splitlines()[-1]


@requires_tool(*toolchain("c"), "make")
def test_a_program_whose_output_is_off_fails(tmp_path):
    """run_program against a reference moved by 1e-3 of its largest magnitude: the program's output no longer
    agrees, and the run says so (what catches a program that computes something else)."""
    network = kernelgen.load_network(import_classifier(tmp_path))
    jobs = {s.config.name: kernelgen.jobs(s.config, ("c",))["c"] for s in network.kernels}
    feeds = execute.network_input(network, 4)
    want = execute.reference(network, feeds)
    (sink,) = network.outputs
    good = run_program(network, TARGETS["c"], jobs, feeds, want, tmp_path / "good")
    assert good.ran and good.passed and good.relative <= FLOAT_TOLERANCE
    moved = {**want, sink: want[sink] + np.float32(1e-3 * np.abs(want[sink]).max())}
    bad = run_program(network, TARGETS["c"], jobs, feeds, moved, tmp_path / "bad")
    assert bad.ran and not bad.passed and "off by" in bad.why
    from plugin_target import CArgs

    assert run_program(network, CArgs(), jobs, feeds, want, tmp_path / "none") is None  # a target without programs


@requires_tool(*toolchain("c"), "make")
def test_validate_json_puts_the_program_in_the_verdict_record(tmp_path):
    import json

    manifest = import_classifier(tmp_path)
    result = CliRunner().invoke(main, ["validate", str(manifest), "--target", "c", "--jsonl", "--seed", "3"])
    assert result.exit_code == 0, result.output
    *steps, verdict = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["step"] for r in steps] == [0, 1, 2] and verdict["status"] == "pass"
    program = verdict["program"]
    assert program["name"] == f"{NET}_run" and program["ran"] and program["passed"]
    assert 0 < program["relative"] <= FLOAT_TOLERANCE
