"""<network>_run on the opencl target (issue 47), run on PoCL as a user runs it: imported, built, made, the ONNX file
moved away, `make run` against onnxruntime; a cold start that builds the programs and caches their binaries, a warm
start from that cache, a damaged cached binary rebuilt; a device below a kernel's work-group size refused in one
line; a weights file from another build refused; `make clean` removes the cache; networks network.c cannot run yet
(a host step) get their kernels alone and the reason; the texture variant's filters and intermediates run as
images; validate runs the program as its end-to-end verdict.
"""
from __future__ import annotations

import json
import math
import os
import re
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
from kernelgen.measure.program_run import PROGRAM_AGREEMENT
from kernelgen.network.weights import pack_network_weights

from builders import toolchain
from conftest import requires_tool
from programs import another_builds_weights, make
from test_network_weights import import_classifier

NET = "classifier"
SHAPE = (2, 3, 37, 29)  # classifier_network's input
TOOLS = (*toolchain("opencl"), "gcc", "make")
DIGEST_FILE = re.compile(r"^[0-9a-f]{64}\.bin$")


def build(manifest: Path, out: Path, *extra: str) -> str:
    result = CliRunner().invoke(main, ["build", str(manifest), "-o", str(out), "--target", "opencl", *extra])
    assert result.exit_code == 0, result.output
    return result.output




def program(folder: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(folder / f"{NET}_run"), *args], capture_output=True, text=True, timeout=900,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> dict:
    """Imported for opencl, built, the model moved away, made: the program's folder and onnxruntime's output."""
    root = tmp_path_factory.mktemp("opencl_program")
    manifest = import_classifier(root, "net", "opencl")
    note = build(manifest, root / "out")
    kept = root / "kept" / "classifier.onnx"
    kept.parent.mkdir()
    shutil.move(root / "classifier.onnx", kept)  # nothing from here on reads the model but the reference
    folder = root / "out" / NET / "opencl"
    make(folder)
    x = np.random.default_rng(5).standard_normal(SHAPE).astype(np.float32)
    np.save(root / "x.npy", x)
    import onnxruntime

    (want,) = onnxruntime.InferenceSession(str(kept), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    return dict(root=root, manifest=manifest, folder=folder, note=note, want=want, kept=kept)


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.nan_to_num(np.abs(got.astype(np.float64) - want), nan=np.inf).max() / np.abs(want).max())


def test_build_writes_the_host_program_and_says_where_the_memory_goes(tmp_path):
    manifest = import_classifier(tmp_path, "net", "opencl")
    note = build(manifest, tmp_path / "out")
    folder = tmp_path / "out" / NET / "opencl"
    assert sorted(p.name for p in folder.iterdir()) == [
        "Makefile", f"{NET}.weights", f"{NET}_run.c", "kg_npy.h", "kg_sha256.h", "kg_weights.h", "network.c",
        "network.h"]
    # the classifier's 7 launches: its 6x19x15 stem output is dead once pooled, and the block reuses its bytes
    assert (f"{NET}: network.c runs 7 OpenCL kernels of 3 programs over a 17,664-byte device arena (each tensor and "
            f"intermediate alone: 23,296 bytes) and 16,896 bytes of weights; `make -C {folder}` builds {NET}_run") in note
    makefile = (folder / "Makefile").read_text()
    assert "LDLIBS = -lOpenCL\n" in makefile and f"\trm -rf {NET}.clcache\n" in makefile
    network_c = (folder / "network.c").read_text()
    assert network_c.count('"__kernel void ') == 0 and "static const char program0_source[] =" in network_c
    assert '  { "pool_out", 2, 13824, 3840, -1, 0, 0 }, /* 3: arena */' in network_c
    listed = CliRunner().invoke(main, ["build", str(manifest), "-o", str(tmp_path / "out"), "--target", "opencl",
                                       "--list-outputs"])
    assert sorted(listed.output.split()) == sorted(str(p) for p in (tmp_path / "out").rglob("*") if p.is_file())
    again = tmp_path / "again"
    build(manifest, again)
    assert all((again / p.relative_to(tmp_path / "out")).read_bytes() == p.read_bytes()
               for p in (tmp_path / "out").rglob("*") if p.is_file())


@requires_tool(*TOOLS)
def test_make_run_without_the_model_matches_onnxruntime_cold_then_warm(shipped):
    folder, root = shipped["folder"], shipped["root"]
    cold = make(folder, "run", f"INPUT={root / 'x.npy'}", f"OUTPUT={root / 'cold.npy'}", "REPEAT=3")
    assert re.search(rf"^{NET}: cold start [0-9.]+ ms \(3 of 3 programs built from source, 3 binaries cached in "
                     rf"\./{NET}\.clcache; then the first run [0-9.]+ ms\) on ", cold.stdout, re.M), cold.stdout
    assert f"{NET}: " in cold.stdout and "ms per run (median of 3)" in cold.stdout
    got = np.load(root / "cold.npy")
    assert got.dtype == np.float32 and got.shape == shipped["want"].shape == (2, 7)
    # float32 on both sides, a few roundings per product summed apart (measured ~1e-7): program_run's limit
    assert relative_error(got, shipped["want"]) <= PROGRAM_AGREEMENT
    cache = sorted(p.name for p in (folder / f"{NET}.clcache").iterdir())
    assert len(cache) == 3 and all(DIGEST_FILE.match(name) for name in cache)
    for name in cache:  # each binary begins with the digest it is named by
        assert (folder / f"{NET}.clcache" / name).read_bytes()[:32].hex() == name[:64]
    warm = make(folder, "run", f"INPUT={root / 'x.npy'}", f"OUTPUT={root / 'warm.npy'}")
    assert re.search(rf"^{NET}: warm start [0-9.]+ ms \(3 programs from the binaries in \./{NET}\.clcache; ",
                     warm.stdout, re.M), warm.stdout
    assert (root / "warm.npy").read_bytes() == (root / "cold.npy").read_bytes()


@requires_tool(*TOOLS)
def test_a_damaged_cached_binary_is_built_again(shipped, tmp_path):
    folder, root = shipped["folder"], shipped["root"]
    assert program(folder, str(root / "x.npy"), str(tmp_path / "first.npy")).returncode == 0  # fills the cache
    cache = folder / f"{NET}.clcache"
    victim = sorted(cache.iterdir())[0]
    data = bytearray(victim.read_bytes())
    data[32:] = bytes(len(data) - 32)  # the digest intact, the binary zeros: the driver's to reject
    victim.write_bytes(bytes(data))
    done = program(folder, str(root / "x.npy"), str(tmp_path / "again.npy"))
    assert done.returncode == 0, done.stderr
    assert "cold start" in done.stdout and "1 of 3 programs built from source, 1 binaries cached" in done.stdout
    assert "some cached ones rejected" in done.stdout
    assert victim.read_bytes()[32:] != bytes(len(data) - 32)  # replaced by the rebuilt binary
    assert (tmp_path / "again.npy").read_bytes() == (tmp_path / "first.npy").read_bytes()
    assert "warm start" in program(folder, str(root / "x.npy"), str(tmp_path / "third.npy")).stdout


@requires_tool(*TOOLS)
def test_a_device_below_a_kernels_work_group_is_refused_in_one_line(shipped, tmp_path):
    launch = json.loads((shipped["root"] / "out" / "stem_to_pool" / "opencl" / "stem_to_pool.launch.json").read_text())
    first = launch["launch"]["kernels"][0]  # the network's first launch
    items = math.prod(first["local_size"])
    assert items > 2
    done = program(shipped["folder"], str(shipped["root"] / "x.npy"), str(tmp_path / "y.npy"),
                   env={"KG_OPENCL_MAX_WORK_GROUP_SIZE": "2"})
    assert done.returncode == 1 and not (tmp_path / "y.npy").exists() and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert re.fullmatch(rf".*{NET}_run: no OpenCL device can run {NET}: device .+: kernel {first['name']} needs a "
                        rf"work-group of {items} work-items, over its CL_DEVICE_MAX_WORK_GROUP_SIZE 2 "
                        rf"\(KG_OPENCL_MAX_WORK_GROUP_SIZE\)", line), line


@requires_tool(*TOOLS)
def test_a_weights_file_from_another_build_is_refused(shipped, tmp_path):
    theirs = another_builds_weights(shipped["kept"], tmp_path, "opencl")
    ours = (shipped["folder"] / f"{NET}.weights").read_bytes()
    done = program(shipped["folder"], "--weights", str(theirs), str(shipped["root"] / "x.npy"), str(tmp_path / "y.npy"))
    assert done.returncode == 1 and not (tmp_path / "y.npy").exists()
    (line,) = done.stderr.splitlines()
    assert (f"{theirs}: the file is another build's weights: its digest is {theirs.read_bytes()[16:48].hex()}, this "
            f"program was built for {ours[16:48].hex()}") in line


@requires_tool(*TOOLS)
def test_make_clean_removes_the_binary_cache(shipped, tmp_path):
    folder = shipped["folder"]
    assert program(folder, str(shipped["root"] / "x.npy"), str(tmp_path / "y.npy")).returncode == 0
    assert (folder / f"{NET}.clcache").is_dir()
    make(folder, "clean")
    assert not (folder / f"{NET}.clcache").exists() and not (folder / f"{NET}_run").exists()
    make(folder)  # the later tests' program


TEXELS = '{map: "n, h, w, c -> n, c // 4, h, |, w, c % 4", pad_value: 0}'  # 4 channels a texel, rows of width


@requires_tool(*TOOLS)
def test_the_texture_variant_runs_its_filters_and_intermediates_as_images(tmp_path):
    """Two kernels in the texture variant with filters in texels, and the block's first conv writing its output
    (temp1) into an image2d: each an image object of its own, the filters written from the weights file's rows."""
    manifest = import_classifier(tmp_path, "net", "opencl")
    for name in ("downsample", "block_conv1_to_fc"):
        config = manifest.parent / f"{name}.yaml"
        text = config.read_text() + "opencl: {variant: texture, filters_in_textures: true}\n"
        old = "activation: relu, filter_layout: oihw-8o}"
        config.write_text(text.replace(old, f"activation: relu, filter_layout: oihw-8o, output_layout: {TEXELS}}}"))
    build(manifest, tmp_path / "out")
    folder = tmp_path / "out" / NET / "opencl"
    network_c = (folder / "network.c").read_text()
    assert '  { "block_conv1_to_fc.temp1", 2, 0, 1920, -1, 4, 30 }, /* 4: arena */' in network_c  # 3 c4 x 10 rows
    assert '  { "downsample.filter1", 3, 5120, 384, 4864, 6, 4 }, /* 10: weights */' in network_c
    assert '  { "stem_to_pool.filter1", 3, 0, 4704, 0, 0, 0 }, /* 8: weights */' in network_c  # a buffer
    make(folder)
    x = np.random.default_rng(5).standard_normal(SHAPE).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    done = program(folder, str(tmp_path / "x.npy"), str(tmp_path / "y.npy"))
    assert done.returncode == 0, done.stderr
    import onnxruntime

    session = onnxruntime.InferenceSession(str(tmp_path / "classifier.onnx"), providers=["CPUExecutionProvider"])
    assert relative_error(np.load(tmp_path / "y.npy"), session.run(None, {"x": x})[0]) <= PROGRAM_AGREEMENT


def test_a_network_with_a_host_step_gets_its_kernels_alone_and_the_reason(tmp_path):
    import onnx_models

    onnx.save(onnx_models.small_resnet(), str(tmp_path / "sr.onnx"))
    imported = CliRunner().invoke(main, ["import", str(tmp_path / "sr.onnx"), "-o", str(tmp_path / "sr"),
                                         "--target", "opencl"])
    assert imported.exit_code == 0, imported.output
    note = build(tmp_path / "sr" / "network.yaml", tmp_path / "out")
    assert not (tmp_path / "out" / "sr" / "opencl").exists()
    assert ("sr on opencl: the kernels alone; no opencl driver: step 1 (host MaxPool) runs on the host; the opencl "
            "network runs kernels only (their tensors stay on the device)") in note


@requires_tool(*TOOLS)
def test_validate_runs_the_program_as_its_end_to_end_verdict(tmp_path):
    manifest = import_classifier(tmp_path, "net", "opencl")
    result = CliRunner().invoke(main, ["validate", str(manifest), "--target", "opencl", "--seed", "3"])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if line.startswith("[end]"))
    assert f"{NET}_run (make run)" in row and " pass " in row
    assert f"; program {NET}_run (make run): output within" in result.output.splitlines()[-1]


def test_weights_pack_as_the_python_runtime_packs_them(tmp_path):
    """The weights file holds each filter and bias exactly as host_arrays uploads them for validation."""
    from kernelgen.measure.tensors import KernelArgs
    from kernelgen.onnx.weights import model_weights
    from kernelgen.targets.opencl.runtime import host_arrays

    network = kernelgen.load_network(import_classifier(tmp_path, "net", "opencl"))
    jobs = {s.config.name: kernelgen.jobs(s.config, ("opencl",))["opencl"] for s in network.kernels}
    plan, data = pack_network_weights(network, jobs, TARGETS["opencl"])
    for step in network.kernels:
        job = jobs[step.config.name]
        logical = {name: w.values for name, w in model_weights(step.config).items()}
        shapes = {t.name: t.logical_shape for t in job.plan.tensors}
        args = KernelArgs(physical={}, logical={"input": np.zeros(shapes["input"], np.float32),
                                   **{s.param: np.zeros(shapes[s.param], np.float32) for s in step.config.side_inputs},
                                   **{n: np.asarray(v, np.float32).reshape(shapes[n]) for n, v in logical.items()}})
        uploaded = host_arrays(job.target_plan, args, 0)
        for name, placed in plan.of(step.index).items():
            packed = np.frombuffer(data, np.float32, placed.nbytes // 4, placed.offset).reshape(placed.shape)
            want = uploaded[name].array
            assert np.array_equal(packed, np.where(np.isnan(want), 0, want)), (step.config.name, name)
