"""<network>.weights: every kernel's weights packed in its layout, one versioned file a program loads (issue 46).

A small ResNet-shaped classifier (a strided stem + max pool, a two-branch Add, a Gemm head with transB) is imported
as `kernelgen import` does; one kernel's first filter is given a blocked layout (oihw-8o over 10 output channels:
padding the kernel never reads) so the packing is more than a copy. The file is checked against the model's
initializers (each tensor unpacked is the initializer, exactly), against the kernels' own C pack functions (the same
bytes), and as a file: header, alignment, table of contents, digest, refusals.
"""
from __future__ import annotations

import ctypes
import shutil
import struct
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import numpy_helper

import kernelgen
from kernelgen.api import TARGETS
from kernelgen.cli import main
from kernelgen.network.weights import (ALIGNMENT, HEADER, WeightsError, pack_network_weights, parse_weights,
                                       read_weights, tensor_array, weights_file)
from kernelgen.onnx.weights import model_weights
from kernelgen.targets.c.toolchain import build_shared

from builders import toolchain
from conftest import requires_tool

BLOCKED = "block_conv1_to_fc"  # the kernel whose filter1 gets the blocked layout
PADDING_BYTES = (16 - 10) * 6 * 3 * 3 * 4  # oihw-8o: 10 output channels in blocks of 8 -> 16; 6 inputs, 3x3


def import_classifier(root: Path, name: str = "net", *targets: str) -> Path:
    """classifier_network imported into root/name (its model root/classifier.onnx), filter1 of BLOCKED blocked."""
    import onnx_models

    model = root / "classifier.onnx"
    if not model.exists():
        onnx.save(onnx_models.classifier_network(), str(model))
    extra = [a for t in targets or ("c",) for a in ("--target", t)]
    result = CliRunner().invoke(main, ["import", str(model), "-o", str(root / name), *extra])
    assert result.exit_code == 0, result.output
    config = root / name / f"{BLOCKED}.yaml"
    text = config.read_text()
    old = "bias: true, activation: relu}"
    assert text.count(old) == 1  # its first conv (the second has its residual before the activation)
    config.write_text(text.replace(old, "bias: true, activation: relu, filter_layout: oihw-8o}"))
    return root / name / "network.yaml"


@pytest.fixture(scope="module")
def manifest(tmp_path_factory) -> Path:
    return import_classifier(tmp_path_factory.mktemp("weights"))


@pytest.fixture(scope="module")
def packed(manifest):
    network = kernelgen.load_network(manifest)
    jobs = {s.config.name: kernelgen.jobs(s.config, ("c",))["c"] for s in network.kernels}
    plan, data = pack_network_weights(network, jobs, TARGETS["c"])
    return network, jobs, plan, data


def initializers(model: Path) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(str(model)).graph.initializer}


def test_each_tensor_unpacked_is_its_initializer_and_the_file_is_their_size(manifest, packed):
    network, jobs, plan, data = packed
    model = initializers(manifest.parent.parent / "classifier.onnx")
    named = [name for t in plan.tensors for name in t.initializers]
    assert sorted(named) == sorted(model)  # every initializer once: the convs', the Gemm's B and C
    for t in plan.tensors:
        (source,) = t.initializers
        tensor = jobs[t.kernel].plan.tensor(t.tensor)
        logical = tensor.layout.unpack(tensor_array(data, t).reshape(-1))
        assert t.dtype == "float32" and t.offset % ALIGNMENT == 0
        # OIHW filters, O biases; the Gemm's B (transB=1: [K, C]) is the filter [K, C, 1, 1]
        np.testing.assert_array_equal(logical, model[source].reshape(logical.shape))
    blocked = next(t for t in plan.tensors if t.kernel == BLOCKED and t.tensor == "filter1")
    assert blocked.shape == (2, 6, 3, 3, 8)  # oihw-8o's physical shape: 16 channels in blocks of 8
    assert not tensor_array(data, blocked)[1, ..., 2:].any()  # its padding: zeros
    weights = sum(a.nbytes for a in model.values())
    assert sum(t.nbytes for t in plan.tensors) == weights + PADDING_BYTES
    assert weights + PADDING_BYTES <= plan.data_bytes < weights + PADDING_BYTES + ALIGNMENT * len(plan.tensors)


@requires_tool(*toolchain("c"))
def test_the_kernels_c_pack_functions_write_the_same_bytes(packed, tmp_path):
    """<net>_pack_weights (each kernel's own pack function, over a buffer of 0xFF) writes the data section."""
    network, jobs, plan, data = packed
    files = TARGETS["c"].network_files(network, jobs, plan)
    for job in jobs.values():
        files |= dict(job.files)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    library = ctypes.CDLL(str(build_shared(sorted(tmp_path / n for n in files if n.endswith(".c")),
                                           tmp_path / "libnet.so")))
    logical = [np.ascontiguousarray(w.values, np.float32) for step in network.kernels
               for w in model_weights(step.config).values()]
    buffer = np.full(plan.data_bytes, 0xFF, np.uint8)
    library[f"{network.name}_pack_weights"]((ctypes.c_void_p * len(logical))(*(a.ctypes.data for a in logical)),
                                            ctypes.c_void_p(buffer.ctypes.data))
    assert buffer.tobytes() == data


def test_the_file_header_and_table_of_contents(manifest, packed, tmp_path):
    network, _, plan, data = packed
    out = tmp_path / "net.weights"
    result = CliRunner().invoke(main, ["weights", str(manifest), "-o", str(out)])
    assert result.exit_code == 0, result.output
    raw = out.read_bytes()
    assert raw == weights_file(plan, data)
    magic, version, mark, digest, toc_offset, toc_bytes, offset, size = HEADER.unpack_from(raw)
    assert (magic, version, raw[12:16], digest) == (b"KGWEIGHT", 1, bytes([4, 3, 2, 1]), plan.digest)
    assert toc_offset == HEADER.size == 80 and offset % ALIGNMENT == 0 and offset + size == len(raw)
    assert raw[offset:] == data and size == plan.data_bytes
    again, section = read_weights(out)
    assert again == plan and bytes(section) == data
    assert b'"initializers": [\n    "fc_w"\n   ]' in raw[toc_offset:toc_offset + toc_bytes]


def test_the_same_build_is_the_same_bytes_and_another_model_another_digest(manifest, packed, tmp_path):
    network, jobs, plan, data = packed
    assert pack_network_weights(network, jobs, TARGETS["c"]) == (plan, data)
    copy = tmp_path / "copy"
    shutil.copytree(manifest.parent.parent, copy)
    model = onnx.load(str(copy / "classifier.onnx"))
    fc = next(t for t in model.graph.initializer if t.name == "fc_b")
    fc.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(fc) + np.float32(1e-3), "fc_b"))
    onnx.save(model, str(copy / "classifier.onnx"))
    other = kernelgen.load_network(copy / "net" / "network.yaml")
    other_jobs = {s.config.name: kernelgen.jobs(s.config, ("c",))["c"] for s in other.kernels}
    changed, changed_data = pack_network_weights(other, other_jobs, TARGETS["c"])
    assert changed.tensors == plan.tensors and changed_data != data and changed.digest != plan.digest
    (copy / "net" / "network.yaml").write_text((copy / "net" / "network.yaml").read_text() + "# a comment\n")
    edited = kernelgen.load_network(copy / "net" / "network.yaml")
    assert pack_network_weights(edited, other_jobs, TARGETS["c"])[0].digest != changed.digest  # the manifest counts


@pytest.mark.parametrize("damage, message", [
    (lambda raw: b"NOTKGWTS" + raw[8:], "not a kernelgen weights file"),
    (lambda raw: raw[:12] + struct.pack(">I", 0x01020304) + raw[16:], "byte-order mark 0x04030201"),
    (lambda raw: raw[:8] + struct.pack("<I", 2) + raw[12:], "weights format 2; this kernelgen reads format 1"),
    (lambda raw: raw[:-1], "a truncated or damaged file"),
    (lambda raw: raw[:40], "a truncated or damaged file"),
])
def test_a_damaged_file_is_refused_with_its_reason(packed, damage, message):
    _, _, plan, data = packed
    with pytest.raises(WeightsError, match=message):
        parse_weights(damage(weights_file(plan, data)), "net.weights")


def test_a_target_without_packing_says_so(manifest, monkeypatch):
    from plugin_target import CArgs

    monkeypatch.setitem(TARGETS, "c_args", CArgs())  # a target that writes kernels alone (tests/plugin_target)
    result = CliRunner().invoke(main, ["weights", str(manifest), "--target", "c_args", "-o", "x.weights"])
    assert result.exit_code == 1 and "the c_args target packs no weights" in result.output


def test_every_program_file_takes_the_weights_alignment_from_the_file_format():
    """One alignment, network/weights.py's: the program's loader (kg_weights.h), the embedded copy, c's
    <NET>_WEIGHTS_ALIGNMENT and hvx's check of the pointer all render it (128: an aligned HVX load drops the
    address's low 7 bits, and a 64-byte one put hvx filters 64 bytes off)."""
    from kernelgen.emit import environment

    assert ALIGNMENT == 128
    env = environment()
    loader = env.get_template("_common/program/kg_weights.h").render(weights_alignment=ALIGNMENT)
    assert f"#define KG_WEIGHTS_ALIGNMENT {ALIGNMENT} " in loader
    for name in ("_common/program/weights.c.j2", "_common/program/main.c.j2", "c/network.h.j2",
                 "hvx/network.c.j2", "hvx/network.h.j2"):
        source = env.loader.get_source(env, name)[0]
        assert "{{ weights_alignment }}" in source, name
