"""<network>_run on the vulkan target (issue 47): the program `kernelgen build network.yaml --target vulkan` writes,
built by its own Makefile against the Vulkan loader and run on lavapipe as a user runs it, with the ONNX file moved
away: its output against onnxruntime's; the pipeline cache file beside it (cold, then warm, another build's
ignored, `make clean` removing it); a weights file from another build and a device without what the kernels need
refused with one line each; the barriers only where the data flow needs them; validate running the program.
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
from kernelgen.network.weights import pack_network_weights
from kernelgen.targets.vulkan.network import ALIGNMENT, plan_network

from builders import toolchain
from conftest import requires_tool
from test_network_program import FLOAT_TOLERANCE, SHAPE, relative_error
from programs import another_builds_weights, make
from test_network_weights import import_classifier

NET = "classifier"
TOOLS = (*toolchain("vulkan"), "make", "gcc", "py:onnxruntime")


def build(manifest: Path, out: Path) -> str:
    result = CliRunner().invoke(main, ["build", str(manifest), "-o", str(out), "--target", "vulkan"])
    assert result.exit_code == 0, result.output
    return result.output




def program(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(folder / f"{NET}_run"), *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> dict:
    """Imported for vulkan, built, the model moved away, made; the reference on a fresh input."""
    root = tmp_path_factory.mktemp("vulkan_program")
    manifest = import_classifier(root, "net", "vulkan")
    out = root / "out"
    note = build(manifest, out)
    kept = root / "kept" / "classifier.onnx"
    kept.parent.mkdir()
    shutil.move(root / "classifier.onnx", kept)  # nothing from here on reads the model but the reference
    folder = out / NET / "vulkan"
    make(folder)
    x = np.random.default_rng(5).standard_normal(SHAPE).astype(np.float32)
    np.save(root / "x.npy", x)
    import onnxruntime

    (want,) = onnxruntime.InferenceSession(str(kept), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    return dict(root=root, manifest=manifest, out=out, folder=folder, note=note, want=want, kept=kept)


@requires_tool(*TOOLS)
def test_make_run_without_the_model_matches_onnxruntime_cold_then_warm(shipped):
    folder, root = shipped["folder"], shipped["root"]
    assert (f"{NET}: network.c records 7 dispatches of 3 steps into one command buffer" in shipped["note"]
            and f"`make -C {folder}` builds {NET}_run" in shipped["note"])
    cache = folder / f"{NET}.vkcache"
    cache.unlink(missing_ok=True)
    cold = make(folder, "run", f"INPUT={root / 'x.npy'}", f"OUTPUT={root / 'y.npy'}", "REPEAT=3")
    lines = cold.stdout.splitlines()
    assert lines[0].startswith(f"{NET}: device ") and "llvmpipe" in lines[0]
    assert lines[1].startswith(f"{NET}: cold start: pipelines ") and f"no pipeline cache ./{NET}.vkcache, written" \
        in lines[1]
    assert lines[2].startswith(f"{NET}: ") and lines[2].endswith(" ms CPU per run (median of 3)")
    assert lines[3].startswith(f"{NET}: ") and lines[3].endswith(" ms per run (median of 3)") and len(lines) == 4
    got = np.load(root / "y.npy")
    assert got.dtype == np.float32 and got.shape == shipped["want"].shape == (2, 7)
    assert relative_error(got, shipped["want"]) <= FLOAT_TOLERANCE
    # the file: the program's header (8-byte magic, the SPIR-V's SHA-256 in hex, the device's cache UUID, ids)
    written = cache.read_bytes()
    assert written[:8] == b"KGVKPC01" and written[8:72].decode() == _spirv_digest(folder)
    warm = make(folder, "run", f"INPUT={root / 'x.npy'}", f"OUTPUT={root / 'y2.npy'}")
    assert f"{NET}: warm start: pipelines " in warm.stdout and f"pipelines from ./{NET}.vkcache" in warm.stdout
    assert np.load(root / "y2.npy").tobytes() == got.tobytes()  # the same dispatches on the same device


def _spirv_digest(folder: Path) -> str:
    line = next(x for x in (folder / "network.h").read_text().splitlines() if "_SPIRV_SHA256 " in x)
    return line.split('"')[1]


@requires_tool(*TOOLS)
def test_a_cache_from_another_build_is_ignored_and_rewritten_and_make_clean_removes_it(shipped, tmp_path):
    folder, root = shipped["folder"], shipped["root"]
    cache = folder / f"{NET}.vkcache"
    program(folder, str(root / "x.npy"), str(tmp_path / "y.npy"))
    good = cache.read_bytes()
    cache.write_bytes(good[:8] + b"0" * 64 + good[72:])  # another set of SPIR-V modules
    done = program(folder, str(root / "x.npy"), str(tmp_path / "y.npy"))
    assert done.returncode == 0 and "cold start: pipelines" in done.stdout
    assert f"{folder}/{NET}.vkcache holds another build's pipelines, rebuilt, written" in done.stdout
    assert cache.read_bytes()[:72] == good[:72]
    assert not list(folder.glob("*.tmp"))  # written through a temporary file renamed over it
    make(folder, "clean")
    assert not cache.exists() and not (folder / f"{NET}_run").exists() and (folder / "network.c").exists()
    make(folder)


@requires_tool(*TOOLS)
def test_a_weights_file_from_another_build_is_refused(shipped, tmp_path):
    theirs = another_builds_weights(shipped["kept"], tmp_path, "vulkan")
    ours = (shipped["folder"] / f"{NET}.weights").read_bytes()
    done = program(shipped["folder"], "--weights", str(theirs), str(shipped["root"] / "x.npy"), str(tmp_path / "y.npy"))
    assert done.returncode == 1 and not (tmp_path / "y.npy").exists() and done.stdout == ""
    assert done.stderr == (f"{shipped['folder'] / NET}_run: {theirs}: the file is another build's weights: its digest "
                           f"is {theirs.read_bytes()[16:48].hex()}, this program was built for {ours[16:48].hex()} "
                           f"(rebuild both with the same `kernelgen build`)\n")


# Each requirement network.h states, raised past what lavapipe has: the program must refuse the device with one line
# naming the limit. (lavapipe has every feature these kernels use; a build asking for more is how a test meets a
# device that lacks one.)
@requires_tool(*TOOLS)
@pytest.mark.parametrize("define, value, says", [
    ("STORAGE_RANGE", "1099511627776ull",
     "maxStorageBufferRange 134217728 bytes, a storage binding takes 1099511627776"),
    ("SHUFFLE_LANES", "3", "do not hold whole rows of the 3 the kernels' shuffles need"),
    ("WORK_GROUP_INVOCATIONS", "4096", "the kernels need [64, 1, 1] and 4096"),
])
def test_a_device_without_what_the_kernels_need_is_refused(shipped, tmp_path, define, value, says):
    folder = tmp_path / "narrow"
    shutil.copytree(shipped["folder"], folder)
    (folder / f"{NET}_run").unlink()
    (folder / f"{NET}.vkcache").unlink(missing_ok=True)
    header = folder / "network.h"
    text = header.read_text()
    line = next(x for x in text.splitlines() if x.startswith(f"#define CLASSIFIER_{define} "))
    header.write_text(text.replace(line, f"#define CLASSIFIER_{define} {value}"))
    make(folder)
    done = program(folder, str(shipped["root"] / "x.npy"), str(tmp_path / "y.npy"))
    assert done.returncode == 1 and not (tmp_path / "y.npy").exists()
    (message,) = done.stderr.splitlines()
    assert message.startswith(f"{folder / NET}_run: no Vulkan device has what the kernels need: llvmpipe")
    assert says in message, message


@requires_tool("glslangValidator", "py:onnx")
def test_barriers_only_where_the_data_flow_needs_them(tmp_path):
    network = kernelgen.load_network(import_classifier(tmp_path, "net", "vulkan"))
    jobs = {s.config.name: kernelgen.jobs(s.config, ("vulkan",))["vulkan"] for s in network.kernels}
    gpu = plan_network(network, TARGETS["vulkan"], jobs, pack_network_weights(network, jobs, TARGETS["vulkan"])[0])
    rows = [(d.label, d.barrier_why) for d in gpu.dispatches]
    assert rows == [
        ("stem_to_pool.op1", ""),
        ("stem_to_pool.op2", "read after write"),  # the pool reads the conv's output
        ("downsample.op1", "read after write, write after read"),  # reads pool_out; its output reuses the conv's bytes
        ("block_conv1_to_fc.op1", ""),  # reads pool_out too, writes bytes no dispatch since the barrier touched
        ("block_conv1_to_fc.op2", "read after write"),
        ("block_conv1_to_fc.op3", "read after write, write after read"),  # the pool's temp3 reuses temp1's bytes
        ("block_conv1_to_fc.op4", "read after write"),
    ], rows
    for d in gpu.dispatches:  # a dispatch never reads bytes it writes (the arena keeps live tensors apart)
        regions = [b.region for b in d.bindings]
        assert not any(a.overlaps(b) for k, a in enumerate(regions) for b in regions[:k]), d.label
        assert all(b.region.offset % ALIGNMENT == 0 for b in d.bindings)


@requires_tool(*TOOLS, "py:onnx")
def test_validate_runs_the_vulkan_program_as_its_end_to_end_verdict(tmp_path):
    manifest = import_classifier(tmp_path, "net", "vulkan")
    result = CliRunner().invoke(main, ["validate", str(manifest), "--target", "vulkan", "--seed", "3"])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if line.startswith("[end]"))
    assert f"{NET}_run (make run)" in row and " pass " in row
    assert f"; program {NET}_run (make run): output within" in result.output.splitlines()[-1]


@requires_tool("py:onnx")
def test_a_network_with_a_host_step_gets_its_kernels_alone(tmp_path):
    import onnx_models

    onnx.save(onnx_models.small_resnet(), str(tmp_path / "sr.onnx"))
    imported = CliRunner().invoke(main, ["import", str(tmp_path / "sr.onnx"), "-o", str(tmp_path / "sr"), "--target",
                                         "vulkan"])
    assert imported.exit_code == 0, imported.output
    note = build(tmp_path / "sr" / "network.yaml", tmp_path / "out")
    assert ("sr on vulkan: the kernels alone; no vulkan driver: the vulkan network driver runs kernels "
            "only: host MaxPool (ONNX nodes onnxruntime runs) cannot be recorded into its command buffer") in note
    assert not (tmp_path / "out" / "sr").exists()


VALIDATION_LAYER = Path("/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json")


@requires_tool(*TOOLS)
@pytest.mark.skipif(not VALIDATION_LAYER.exists(), reason="needs vulkan-validationlayers")
@pytest.mark.parametrize("staged", ["0", "1"])
def test_the_program_passes_the_khronos_validation_layer(shipped, tmp_path, staged):
    """Every Vulkan call of a start and two inferences under VK_LAYER_KHRONOS_validation with its synchronization
    checks on (it reports a misuse, such as a binding's offset, a barrier's range or a copy racing a dispatch, on
    stdout as a "Validation Error"), memories mapped and staged alike."""
    import os

    env = {**os.environ, "VK_INSTANCE_LAYERS": "VK_LAYER_KHRONOS_validation", "VK_LOADER_DEBUG": "layer",
           "VK_LAYER_ENABLES": "VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT",
           "KERNELGEN_VULKAN_STAGED": staged}
    done = subprocess.run([str(shipped["folder"] / f"{NET}_run"), "--repeat", "2", str(shipped["root"] / "x.npy"),
                           str(tmp_path / "y.npy")], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    assert 'Insert instance layer "VK_LAYER_KHRONOS_validation"' in done.stdout + done.stderr  # it did run
    assert "Validation" not in done.stdout.replace("VK_LAYER_KHRONOS_validation", "")
    assert relative_error(np.load(tmp_path / "y.npy"), shipped["want"]) <= FLOAT_TOLERANCE


@requires_tool(*TOOLS)
def test_staged_memories_give_the_same_output_as_mapped_ones(shipped, tmp_path):
    """A discrete GPU's path (device-local memories, the weights uploaded once through a staging buffer, each run's
    input copied in and output copied out by the command buffer), forced on lavapipe, whose one memory type is both
    device-local and host-visible: the same dispatches on the same device, so the same bytes."""
    import os

    runs = {}
    for staged in ("0", "1"):
        done = subprocess.run([str(shipped["folder"] / f"{NET}_run"), "--repeat", "3", str(shipped["root"] / "x.npy"),
                               str(tmp_path / f"y{staged}.npy")], capture_output=True, text=True, timeout=600,
                              env={**os.environ, "KERNELGEN_VULKAN_STAGED": staged})
        assert done.returncode == 0, done.stderr
        runs[staged] = done.stdout.splitlines()[0]
    assert runs["0"].endswith("; host-visible device-local memory, input and output copied with memcpy"), runs["0"]
    assert runs["1"].endswith("; device-local memory, input and output staged through host-visible buffers"), runs["1"]
    assert np.load(tmp_path / "y1.npy").tobytes() == np.load(tmp_path / "y0.npy").tobytes()
    assert relative_error(np.load(tmp_path / "y1.npy"), shipped["want"]) <= FLOAT_TOLERANCE
