"""What the tests of the network programs (c, hvx, opencl, vulkan `<network>_run`) share: running make in a built
folder, and another build's weights file to be refused."""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import onnx
from click.testing import CliRunner
from onnx import numpy_helper

from kernelgen.cli import main
from test_network_weights import import_classifier


def make(folder: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["make", "-s", "-C", str(folder), *args], capture_output=True, text=True, timeout=600)
    assert not check or done.returncode == 0, done.stderr + done.stdout
    return done


def another_builds_weights(kept_model: Path, tmp_path: Path, target: str) -> Path:
    """The weights file `target` packs for the classifier network with one bias doubled: the same tensors and
    sizes, another build's digest."""
    other_root = tmp_path / "other"
    other_root.mkdir()
    model = onnx.load(str(kept_model))
    fc = next(t for t in model.graph.initializer if t.name == "fc_b")
    fc.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(fc) * np.float32(2), "fc_b"))
    onnx.save(model, str(other_root / "classifier.onnx"))
    other = import_classifier(other_root, "net", target)
    theirs = tmp_path / "other.weights"
    result = CliRunner().invoke(main, ["weights", str(other), "--target", target, "-o", str(theirs)])
    assert result.exit_code == 0, result.output
    return theirs
